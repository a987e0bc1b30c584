use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use waterline_runtime::args::{CommonArgs, parse_addr};

/// Answers load-aware Filter and Score RPCs from the collector's streamed snapshot.
///
/// Keeps serving from its last snapshot when the collector is unreachable (reconnecting
/// with backoff); the snapshot's age is exported as `waterline_snapshot_age_seconds` and
/// returned in every answer.
#[derive(Parser, Clone, Debug)]
#[command(name = "waterline-scorer", version)]
pub struct Args {
    /// gRPC listen address (ScorerService, health, reflection).
    #[arg(long, default_value = "0.0.0.0:50051", value_parser = parse_addr, env = "WATERLINE_GRPC_ADDR")]
    pub grpc_addr: SocketAddr,

    /// Admin listen address (/metrics, /live, /ready).
    #[arg(long, default_value = "0.0.0.0:9101", value_parser = parse_addr, env = "WATERLINE_ADMIN_ADDR")]
    pub admin_addr: SocketAddr,

    /// Collectors (http:// or https://), comma-separated or repeated: active-active
    /// replicas holding the same state. The scorer streams the snapshot from one, fails over
    /// to the next when it goes away, and forwards every Reserve/Unreserve to all of them.
    #[arg(
        long,
        default_value = "http://127.0.0.1:50052",
        env = "WATERLINE_COLLECTOR_URL",
        value_delimiter = ','
    )]
    pub collector_url: Vec<String>,

    /// PEM CA that signs the collector's certificate (for an https:// collector URL).
    #[arg(long, env = "WATERLINE_COLLECTOR_CA")]
    pub collector_ca: Option<PathBuf>,

    /// Policy file (YAML); the built-in default policy when omitted. Reloaded on change.
    #[arg(long, env = "WATERLINE_POLICY")]
    pub policy: Option<PathBuf>,

    /// Most candidate nodes accepted in one Filter or Score request.
    #[arg(long, default_value_t = 10_000, env = "WATERLINE_MAX_NODES")]
    pub max_nodes: usize,

    /// Largest gRPC request accepted, in bytes.
    #[arg(long, default_value_t = 16 << 20)]
    pub max_request_bytes: usize,

    #[command(flatten)]
    pub common: CommonArgs,
}
