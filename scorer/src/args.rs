use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use waterline_core::time::parse_std_duration;
use waterline_runtime::args::{CommonArgs, GrpcLimitArgs, parse_addr};
use waterline_runtime::policy::{PolicyArg, parse_policy_arg};

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

    /// A collector stream with no message for this long is taken for dead and the scorer
    /// fails over to the next collector. A collector sends a heartbeat every 2 s when it
    /// has nothing else to say, so this only fires on a connection that went silent (a
    /// partition that drops packets without resetting the connection), which HTTP/2
    /// keep-alive would notice only after 40 s.
    #[arg(long, default_value = "6s", value_parser = parse_std_duration, env = "WATERLINE_COLLECTOR_SILENCE")]
    pub collector_silence: std::time::Duration,

    /// PEM CA that signs the collector's certificate (required for an https:// collector
    /// URL). Re-read when it changes (--tls-reload-interval).
    #[arg(long, env = "WATERLINE_COLLECTOR_CA")]
    pub collector_ca: Option<PathBuf>,

    /// PEM client certificate presented to the collector (for a collector started with
    /// --tls-client-ca). Re-read when it changes.
    #[arg(long, requires = "collector_key", env = "WATERLINE_COLLECTOR_CERT")]
    pub collector_cert: Option<PathBuf>,

    /// PEM private key of --collector-cert.
    #[arg(long, requires = "collector_cert", env = "WATERLINE_COLLECTOR_KEY")]
    pub collector_key: Option<PathBuf>,

    /// Policy file (YAML): `PATH` for the default policy (the built-in default when
    /// omitted), `NAME=PATH` for a named one a request selects by name (a scheduler
    /// profile's, docs/operations.md#policies-per-profile). Repeatable; each reloaded on
    /// change.
    #[arg(long, env = "WATERLINE_POLICY", value_parser = parse_policy_arg)]
    pub policy: Vec<PolicyArg>,

    /// How long this scorer keeps a Reserve/Unreserve of its own that the collector's
    /// stream has not confirmed (and retries forwarding it to each collector): past it the
    /// scorer removes its own entry — never one the stream confirmed — and counts it in
    /// waterline_forward_outcomes_total (expired, dropped or rejected).
    #[arg(long, default_value = "15m", value_parser = parse_give_up, env = "WATERLINE_FORWARD_GIVE_UP")]
    pub forward_give_up: Duration,

    /// Most candidate nodes accepted in one Filter, Score or Evaluate request
    /// (RESOURCE_EXHAUSTED above it).
    #[arg(long, default_value_t = 10_000, env = "WATERLINE_MAX_NODES")]
    pub max_nodes: usize,

    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub limits: GrpcLimitArgs,
}

/// A duration above zero (a zero bound would remove every local change at once).
fn parse_give_up(text: &str) -> Result<Duration, String> {
    let bound = waterline_core::time::parse_std_duration(text).map_err(|e| e.to_string())?;
    if bound.is_zero() {
        return Err("must be above 0 (e.g. 15m)".into());
    }
    Ok(bound)
}

impl Args {
    /// The client side of the collector connections.
    pub fn collector_tls_files(&self) -> waterline_runtime::tls::TlsFiles {
        waterline_runtime::tls::TlsFiles {
            identity: self.collector_cert.clone().zip(self.collector_key.clone()),
            ca: self.collector_ca.clone(),
        }
    }
}
