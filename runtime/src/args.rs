//! Flags every waterline binary takes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Plain,
    /// One JSON object per line, for log pipelines.
    Json,
}

/// Logging and TLS flags shared by every listener-owning process.
#[derive(Args, Clone, Debug)]
pub struct CommonArgs {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Plain, env = "WATERLINE_LOG_FORMAT")]
    pub log_format: LogFormat,

    /// PEM certificate for the gRPC (and HTTP) listeners; TLS is off unless set.
    #[arg(long, requires = "tls_key", env = "WATERLINE_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key for --tls-cert.
    #[arg(long, requires = "tls_cert", env = "WATERLINE_TLS_KEY")]
    pub tls_key: Option<PathBuf>,

    /// PEM CA bundle; when set, clients must present a certificate signed by it (mTLS).
    #[arg(long, requires = "tls_cert", env = "WATERLINE_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<PathBuf>,

    /// Serve the admin port (/metrics, /live, /ready) over TLS too, with the same
    /// certificate. Off by default: probes and scrapers usually speak plain HTTP in-cluster.
    #[arg(long, requires = "tls_cert", env = "WATERLINE_ADMIN_TLS")]
    pub admin_tls: bool,

    /// How often certificate, key and CA files (this process's own and its clients') are
    /// checked for changes. Changed files are used for new connections without a restart;
    /// an invalid or half-written file keeps the previous certificate (logged, and counted
    /// in `waterline_tls_reload_total{result="error"}`).
    #[arg(long, default_value = "5s", value_parser = waterline_core::time::parse_std_duration, env = "WATERLINE_TLS_RELOAD_INTERVAL")]
    pub tls_reload_interval: Duration,
}

impl CommonArgs {
    /// The listeners' TLS files, when `--tls-cert` is set.
    pub fn server_tls_files(&self) -> Option<crate::tls::TlsFiles> {
        let (cert, key) = (self.tls_cert.clone()?, self.tls_key.clone()?);
        Some(crate::tls::TlsFiles { identity: Some((cert, key)), ca: self.tls_client_ca.clone() })
    }
}

/// Limits of a gRPC server. Each refusal answers RESOURCE_EXHAUSTED at once (nothing
/// queues) and is counted in `waterline_grpc_limit_rejections_total{limit}`.
#[derive(Args, Clone, Debug)]
pub struct GrpcLimitArgs {
    /// Largest gRPC request message accepted, in bytes (RESOURCE_EXHAUSTED above it). A
    /// Filter or Score naming 10,000 nodes is ~200 KiB.
    #[arg(long, default_value_t = 16 << 20, env = "WATERLINE_MAX_REQUEST_BYTES")]
    pub max_request_bytes: usize,

    /// Most unary RPCs served at once, over all clients; one more is answered
    /// RESOURCE_EXHAUSTED instead of waiting (health checks are exempt, so probes still
    /// answer under load). 0: no limit.
    #[arg(long, default_value_t = 1024, env = "WATERLINE_MAX_CONCURRENT_RPCS")]
    pub max_concurrent_rpcs: usize,

    /// Most long-lived streams (WatchNodes, Session) one client address may hold open at
    /// once; one more is answered RESOURCE_EXHAUSTED. A scheduler or scorer needs one per
    /// peer. 0: no limit.
    #[arg(long, default_value_t = 32, env = "WATERLINE_MAX_STREAMS_PER_CLIENT")]
    pub max_streams_per_client: usize,
}

/// Parses `host:port`, naming the flag on error.
pub fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|e| format!("'{text}' is not host:port ({e})"))
}
