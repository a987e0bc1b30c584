//! Flags every waterline binary takes.

use std::net::SocketAddr;
use std::path::PathBuf;

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
}

/// Parses `host:port`, naming the flag on error.
pub fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|e| format!("'{text}' is not host:port ({e})"))
}
