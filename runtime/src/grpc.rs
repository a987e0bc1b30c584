//! gRPC plumbing every server shares: reflection (v1 and v1alpha: grpcurl builds before
//! 1.8.7 speak only v1alpha), TLS from flags, and a server builder with sane limits.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use tonic::transport::server::Router;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, Server, ServerTlsConfig};

use crate::args::CommonArgs;

use tonic_reflection::server::{v1, v1alpha};

/// Reflection services describing waterline.v1 and grpc.health.v1.
#[allow(clippy::type_complexity)]
pub fn reflection() -> anyhow::Result<(
    v1::ServerReflectionServer<impl v1::ServerReflection>,
    v1alpha::ServerReflectionServer<impl v1alpha::ServerReflection>,
)> {
    let v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(waterline_api::v1::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(waterline_api::v1::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    Ok((v1, v1alpha))
}

/// Server TLS from `--tls-cert`/`--tls-key` (and `--tls-client-ca` for mTLS), if set.
pub fn server_tls(args: &CommonArgs) -> anyhow::Result<Option<ServerTlsConfig>> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    let cert_pem = std::fs::read(cert).with_context(|| format!("--tls-cert {}", cert.display()))?;
    let key_pem = std::fs::read(key).with_context(|| format!("--tls-key {}", key.display()))?;
    let mut tls = ServerTlsConfig::new().identity(Identity::from_pem(cert_pem, key_pem));
    if let Some(ca) = &args.tls_client_ca {
        let ca_pem =
            std::fs::read(ca).with_context(|| format!("--tls-client-ca {}", ca.display()))?;
        tls = tls.client_ca_root(Certificate::from_pem(ca_pem));
    }
    Ok(Some(tls))
}

/// A server builder with the limits every waterline gRPC listener uses.
/// HTTP/2 flow-control window per stream, both directions: a whole Filter or Score request
/// for the largest clusters fits without a window update.
const HTTP2_WINDOW: u32 = 4 << 20;

pub fn server_builder(args: &CommonArgs) -> anyhow::Result<Server> {
    let mut builder = Server::builder()
        // Dead peers are noticed without waiting for the OS.
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        // A Filter for 5,000 nodes is ~100 KiB; with HTTP/2's default 64 KiB windows the
        // caller stops mid-request until this process is scheduled to grant more, which on
        // a busy scheduler host cost milliseconds per pod (e2e throughput, BENCHMARKS.md §6).
        .initial_stream_window_size(Some(HTTP2_WINDOW))
        .initial_connection_window_size(Some(HTTP2_WINDOW * 4))
        .tcp_nodelay(true);
    if let Some(tls) = server_tls(args)? {
        builder = builder.tls_config(tls).context("TLS configuration")?;
    }
    Ok(builder)
}

/// A server with health and reflection registered; the caller adds its own service and
/// sets health statuses through the returned reporter.
pub fn router_with_health(
    args: &CommonArgs,
) -> anyhow::Result<(tonic_health::server::HealthReporter, Router)> {
    let (health, health_service) = tonic_health::server::health_reporter();
    let (reflection_v1, reflection_v1alpha) = reflection()?;
    let router = server_builder(args)?
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha);
    Ok((health, router))
}

/// Binds `addr` and serves `router` until SIGTERM/SIGINT.
pub async fn serve(router: Router, addr: SocketAddr, what: &'static str) -> anyhow::Result<()> {
    let listener =
        tokio::net::TcpListener::bind(addr).await.with_context(|| format!("--grpc-addr {addr}"))?;
    tracing::info!(addr = %listener.local_addr()?, "{what} gRPC listening");
    // Server::tcp_nodelay applies only to listeners tonic binds itself; without it here
    // every small unary answer waits out Nagle's delay (~40 ms per extender call, measured).
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    router.serve_with_incoming_shutdown(incoming, crate::shutdown_signal()).await?;
    Ok(())
}

/// A lazily connecting client endpoint for another waterline service: keepalives so a
/// dead peer is noticed, and TLS (checked against `ca`, if given) for an https:// URL.
/// `flag` names the URL flag in errors.
pub fn client_endpoint(
    url: &str,
    ca: Option<&std::path::Path>,
    flag: &str,
) -> anyhow::Result<Endpoint> {
    let mut endpoint = Endpoint::from_shared(url.to_owned())
        .with_context(|| format!("{flag} {url}"))?
        .connect_timeout(Duration::from_secs(3))
        .tcp_nodelay(true)
        .initial_stream_window_size(Some(HTTP2_WINDOW))
        .initial_connection_window_size(Some(HTTP2_WINDOW * 4))
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10))
        .keep_alive_while_idle(true);
    if url.starts_with("https://") {
        let mut tls = ClientTlsConfig::new();
        if let Some(ca) = ca {
            let pem = std::fs::read(ca).with_context(|| format!("CA file {}", ca.display()))?;
            tls = tls.ca_certificate(Certificate::from_pem(pem));
        }
        endpoint = endpoint.tls_config(tls)?;
    }
    Ok(endpoint)
}

/// Opens a lazily connecting channel now, with one `grpc.health.v1` check of `service`, so
/// the first real request does not also pay for the TCP, TLS and HTTP/2 handshakes inside its
/// deadline; logs whether the peer answered. Never fails: a peer that is down is dialled
/// again by the channel on the next request.
pub fn warm_up(channel: tonic::transport::Channel, service: &'static str, url: String) {
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    tokio::spawn(async move {
        let request = HealthCheckRequest { service: service.to_owned() };
        let mut request = tonic::Request::new(request);
        request.set_timeout(Duration::from_secs(5));
        match HealthClient::new(channel).check(request).await {
            Ok(answer) => {
                tracing::info!(%url, status = ?answer.into_inner().status(), "{service} reachable")
            }
            Err(status) => {
                tracing::warn!(%url, error = %status.message(), "{service} not reachable yet")
            }
        }
    });
}
