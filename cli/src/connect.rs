//! Channels to the scorer and the collector (plain or TLS, with the flags the services' own
//! clients take), and gRPC failures worded for a person at a terminal.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use tonic::Code;
use tonic::transport::Channel;
use waterline_api::v1::collector_service_client::CollectorServiceClient;
use waterline_api::v1::scorer_service_client::ScorerServiceClient;
use waterline_runtime::tls::{TlsFiles, TlsMetrics};

/// The addresses `make run` (scripts/run.sh) and README's "Trying it by hand" use.
pub const DEFAULT_SCORER: &str = "http://127.0.0.1:50051";
pub const DEFAULT_COLLECTOR: &str = "http://127.0.0.1:50052";

/// Where the services are, and the TLS files for https:// addresses (as the extender's
/// `--scorer-*` and the scorer's `--collector-*` flags).
#[derive(clap::Args, Clone, Debug)]
pub struct Endpoints {
    /// The scorer: host:port, http://host:port or https://host:port.
    #[arg(long, global = true, default_value = DEFAULT_SCORER, env = "WATERLINE_SCORER_URL")]
    pub scorer: String,

    /// PEM CA that signs the scorer's certificate (required for an https:// scorer).
    #[arg(long, global = true, env = "WATERLINE_SCORER_CA")]
    pub scorer_ca: Option<PathBuf>,

    /// PEM client certificate for a scorer started with --tls-client-ca.
    #[arg(long, global = true, requires = "scorer_key", env = "WATERLINE_SCORER_CERT")]
    pub scorer_cert: Option<PathBuf>,

    /// PEM private key of --scorer-cert.
    #[arg(long, global = true, requires = "scorer_cert", env = "WATERLINE_SCORER_KEY")]
    pub scorer_key: Option<PathBuf>,

    /// The collector: host:port, http://host:port or https://host:port.
    #[arg(long, global = true, default_value = DEFAULT_COLLECTOR, env = "WATERLINE_COLLECTOR_URL")]
    pub collector: String,

    /// PEM CA that signs the collector's certificate (required for an https:// collector).
    #[arg(long, global = true, env = "WATERLINE_COLLECTOR_CA")]
    pub collector_ca: Option<PathBuf>,

    /// PEM client certificate for a collector started with --tls-client-ca.
    #[arg(long, global = true, requires = "collector_key", env = "WATERLINE_COLLECTOR_CERT")]
    pub collector_cert: Option<PathBuf>,

    /// PEM private key of --collector-cert.
    #[arg(long, global = true, requires = "collector_cert", env = "WATERLINE_COLLECTOR_KEY")]
    pub collector_key: Option<PathBuf>,

    /// Longest wait for each answer.
    #[arg(long, global = true, default_value = "10s", value_parser = waterline_core::time::parse_std_duration)]
    pub timeout: Duration,
}

/// Which service an error is about, for its wording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    Scorer,
    Collector,
}

impl Peer {
    pub fn name(self) -> &'static str {
        match self {
            Peer::Scorer => "scorer",
            Peer::Collector => "collector",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Peer::Scorer => "--scorer",
            Peer::Collector => "--collector",
        }
    }

    fn service(self) -> &'static str {
        match self {
            Peer::Scorer => "waterline.v1.ScorerService",
            Peer::Collector => "waterline.v1.CollectorService",
        }
    }
}

/// `host:port` without a scheme is plain http.
pub fn normalise_url(address: &str) -> String {
    if address.contains("://") { address.to_owned() } else { format!("http://{address}") }
}

/// A failed call, as a person should read it: who was called, at which address, and what
/// to do about it.
pub fn explain_status(peer: Peer, url: &str, rpc: &str, status: &tonic::Status) -> String {
    let name = peer.name();
    let message = status.message();
    match status.code() {
        Code::Unavailable => format!(
            "cannot reach the {name} at {url} ({message}).\n\
             Is it running? `make run` starts a collector on {DEFAULT_COLLECTOR} and a scorer on \
             {DEFAULT_SCORER}; elsewhere, pass {flag} URL.",
            flag = peer.flag()
        ),
        Code::DeadlineExceeded => format!(
            "the {name} at {url} did not answer {rpc} in time (--timeout); it may be overloaded"
        ),
        Code::Unimplemented => format!(
            "{url} does not serve {service}/{rpc}: is {flag} pointing at another service?",
            service = peer.service(),
            flag = peer.flag()
        ),
        // A server that requires client certificates rejects the handshake after it is
        // done (TLS 1.3): the client sees its stream cancelled, not a refusal.
        Code::Cancelled | Code::Unknown if url.starts_with("https://") => format!(
            "the {name} at {url} closed the connection during {rpc} ({message}): if it was \
             started with --tls-client-ca, pass {flag}-cert and {flag}-key",
            flag = peer.flag()
        ),
        code => format!("the {name} at {url} refused {rpc}: {code:?}: {message}"),
    }
}

/// Lazily connecting clients of both services (nothing is dialled until a call).
pub struct Clients {
    pub scorer_url: String,
    pub collector_url: String,
    pub timeout: Duration,
    scorer: ScorerServiceClient<Channel>,
    collector: CollectorServiceClient<Channel>,
}

impl Clients {
    /// Must run inside a tokio runtime: TLS files are watched for changes there.
    pub fn new(endpoints: &Endpoints) -> Result<Clients> {
        // Client TLS counts its reloads like every waterline process; nothing scrapes a CLI.
        let metrics = TlsMetrics::register(&mut prometheus_client::registry::Registry::default());
        let scorer_url = normalise_url(&endpoints.scorer);
        let collector_url = normalise_url(&endpoints.collector);
        let scorer = channel(
            &scorer_url,
            TlsFiles {
                identity: endpoints.scorer_cert.clone().zip(endpoints.scorer_key.clone()),
                ca: endpoints.scorer_ca.clone(),
            },
            &metrics,
            "--scorer",
            "--scorer-ca",
        )?;
        let collector = channel(
            &collector_url,
            TlsFiles {
                identity: endpoints.collector_cert.clone().zip(endpoints.collector_key.clone()),
                ca: endpoints.collector_ca.clone(),
            },
            &metrics,
            "--collector",
            "--collector-ca",
        )?;
        Ok(Clients {
            scorer_url,
            collector_url,
            timeout: endpoints.timeout,
            scorer: ScorerServiceClient::new(scorer).max_decoding_message_size(256 << 20),
            collector: CollectorServiceClient::new(collector).max_decoding_message_size(256 << 20),
        })
    }

    pub fn scorer(&self) -> ScorerServiceClient<Channel> {
        self.scorer.clone()
    }

    pub fn collector(&self) -> CollectorServiceClient<Channel> {
        self.collector.clone()
    }

    /// A request with the `--timeout` deadline.
    pub fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(self.timeout);
        request
    }

    /// Maps a failed call to [`explain_status`]'s wording.
    pub fn fail(&self, peer: Peer, rpc: &str, status: tonic::Status) -> anyhow::Error {
        let url = match peer {
            Peer::Scorer => &self.scorer_url,
            Peer::Collector => &self.collector_url,
        };
        anyhow::anyhow!(explain_status(peer, url, rpc, &status))
    }
}

fn channel(
    url: &str,
    files: TlsFiles,
    metrics: &TlsMetrics,
    flag: &str,
    ca_flag: &str,
) -> Result<Channel> {
    let tls = if url.starts_with("https://") {
        if files.ca.is_none() {
            anyhow::bail!("{flag} {url} is https: {ca_flag} FILE names the CA of its certificate");
        }
        Some(
            waterline_runtime::tls::client_config(files, Duration::from_secs(5), metrics)
                .with_context(|| format!("TLS files for {flag}"))?,
        )
    } else {
        None
    };
    waterline_runtime::grpc::client_channel(url, tls, flag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_address_is_plain_http() {
        assert_eq!(normalise_url("127.0.0.1:50051"), "http://127.0.0.1:50051");
        assert_eq!(normalise_url("https://scorer:50051"), "https://scorer:50051");
    }

    #[test]
    fn an_unreachable_service_names_its_address_and_make_run() {
        let status = tonic::Status::unavailable("tcp connect error");
        let text = explain_status(Peer::Scorer, "http://127.0.0.1:1", "Score", &status);
        assert!(text.contains("cannot reach the scorer at http://127.0.0.1:1"), "{text}");
        assert!(text.contains("make run"), "{text}");
        assert!(text.contains("--scorer URL"), "{text}");
    }

    #[test]
    fn a_wrong_service_is_named() {
        let status = tonic::Status::unimplemented("");
        let text = explain_status(Peer::Collector, "http://h:1", "ListNodes", &status);
        assert!(text.contains("waterline.v1.CollectorService/ListNodes"), "{text}");
        assert!(text.contains("--collector"), "{text}");
    }

    #[test]
    fn a_closed_tls_connection_suggests_a_client_certificate() {
        let status = tonic::Status::cancelled("operation was canceled");
        let text = explain_status(Peer::Scorer, "https://h:1", "Evaluate", &status);
        assert!(text.contains("--scorer-cert and --scorer-key"), "{text}");
        let plain = explain_status(Peer::Scorer, "http://h:1", "Evaluate", &status);
        assert!(!plain.contains("--scorer-cert"), "{plain}");
    }

    #[test]
    fn other_refusals_keep_the_code_and_message() {
        let status = tonic::Status::invalid_argument("pod.cpu_request_millis is negative");
        let text = explain_status(Peer::Scorer, "http://h:1", "Score", &status);
        assert!(text.contains("InvalidArgument: pod.cpu_request_millis is negative"), "{text}");
    }
}
