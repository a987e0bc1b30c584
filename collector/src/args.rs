use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use waterline_runtime::args::{CommonArgs, parse_addr};

/// Collects node usage and recent placements, and streams them to waterline scorers.
///
/// Pick one node source: --static FILE (nodes and usage from a YAML file, re-read when it
/// changes) or --synthetic-nodes N (a generated cluster whose usage drifts, for demos and
/// benchmarks).
#[derive(Parser, Clone, Debug)]
#[command(name = "waterline-collector", version)]
pub struct Args {
    /// gRPC listen address (CollectorService, health, reflection).
    #[arg(long, default_value = "0.0.0.0:50052", value_parser = parse_addr, env = "WATERLINE_GRPC_ADDR")]
    pub grpc_addr: SocketAddr,

    /// Admin listen address (/metrics, /live, /ready).
    #[arg(long, default_value = "0.0.0.0:9102", value_parser = parse_addr, env = "WATERLINE_ADMIN_ADDR")]
    pub admin_addr: SocketAddr,

    /// Policy file (YAML); the built-in default policy when omitted. Reloaded on change.
    #[arg(long, env = "WATERLINE_POLICY")]
    pub policy: Option<PathBuf>,

    /// Static node source: YAML with `nodes: [{name, capacity: {cpu, memory}, metrics: {...}}]`.
    #[arg(long = "static", value_name = "FILE", conflicts_with = "synthetic_nodes")]
    pub static_file: Option<PathBuf>,

    /// Synthetic node source: this many generated nodes with drifting usage.
    #[arg(long, value_name = "N")]
    pub synthetic_nodes: Option<usize>,

    /// How often the synthetic cluster's usage moves.
    #[arg(long, default_value = "5s", value_parser = parse_span)]
    pub synthetic_interval: std::time::Duration,

    /// Seed of the synthetic cluster (same seed, same cluster).
    #[arg(long, default_value_t = 42)]
    pub synthetic_seed: u64,

    /// Node address map for matching series to nodes when no Kubernetes source gives
    /// addresses: YAML `nodes: [{name, addresses: [10.0.0.2, host-2]}]`.
    #[arg(long, value_name = "FILE", env = "WATERLINE_NODE_MAP")]
    pub node_map: Option<PathBuf>,

    #[command(flatten)]
    pub prometheus: crate::sources::prometheus::PrometheusArgs,

    #[command(flatten)]
    pub common: CommonArgs,
}

pub fn parse_span(text: &str) -> Result<std::time::Duration, String> {
    waterline_core::time::parse_duration(text).map(|m| m.as_std())
}
