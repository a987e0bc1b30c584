//! gRPC plumbing every server shares: reflection (v1 and v1alpha: grpcurl builds before
//! 1.8.7 speak only v1alpha), TLS that follows its files, limits, and clients of the other
//! waterline services.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use rustls::pki_types::ServerName;
use tonic::transport::server::Router;
use tonic::transport::{Channel, Endpoint, Server};
use tower::layer::util::{Identity, Stack};

use crate::args::CommonArgs;
use crate::limits::Limits;
use crate::tls::{TlsError, TlsFiles, TlsMetrics};

use tonic_reflection::server::{v1, v1alpha};
use tracing::Instrument;

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

/// The router every waterline gRPC server uses: its services behind [`Limits`].
pub type GrpcRouter = Router<Stack<Limits, Identity>>;

/// HTTP/2 flow-control window per stream, both directions: a whole Filter or Score request
/// for the largest clusters fits without a window update.
const HTTP2_WINDOW: u32 = 4 << 20;

/// A server builder with the settings and limits every waterline gRPC listener uses. TLS
/// is not tonic's (which reads its files once) but [`serve`]'s reloading acceptor.
pub fn server_builder(limits: &Limits) -> Server<Stack<Limits, Identity>> {
    Server::builder()
        // Dead peers are noticed without waiting for the OS.
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        // A Filter for 5,000 nodes is ~100 KiB; with HTTP/2's default 64 KiB windows the
        // caller stops mid-request until this process is scheduled to grant more, which on
        // a busy scheduler host cost milliseconds per pod (docs/benchmarks-history.md §6).
        .initial_stream_window_size(Some(HTTP2_WINDOW))
        .initial_connection_window_size(Some(HTTP2_WINDOW * 4))
        .tcp_nodelay(true)
        .layer(limits.clone())
}

/// A server with health and reflection registered; the caller adds its own service and
/// sets health statuses through the returned reporter.
pub fn router_with_health(
    limits: &Limits,
) -> anyhow::Result<(tonic_health::server::HealthReporter, GrpcRouter)> {
    let (health, health_service) = tonic_health::server::health_reporter();
    let (reflection_v1, reflection_v1alpha) = reflection()?;
    let router = server_builder(limits)
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha);
    Ok((health, router))
}

/// Binds `addr` and serves `router` until SIGTERM/SIGINT, over TLS when `tls` is set (its
/// certificate follows the files, see [`crate::tls`]).
pub async fn serve(
    router: GrpcRouter,
    addr: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    what: &'static str,
) -> anyhow::Result<()> {
    let listener =
        tokio::net::TcpListener::bind(addr).await.with_context(|| format!("--grpc-addr {addr}"))?;
    tracing::info!(addr = %listener.local_addr()?, tls = tls.is_some(), "{what} gRPC listening");
    match tls {
        None => {
            // Server::tcp_nodelay applies only to listeners tonic binds itself; without it
            // here every small unary answer waits out Nagle's delay (~40 ms per extender
            // call, measured).
            let incoming =
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
            router.serve_with_incoming_shutdown(incoming, crate::shutdown_signal()).await?;
        }
        Some(config) => {
            let accepted = crate::https::accept_tls(listener, config);
            let incoming = tokio_stream::wrappers::ReceiverStream::new(accepted)
                .map(|(stream, _peer)| Ok::<_, std::io::Error>(stream));
            router.serve_with_incoming_shutdown(incoming, crate::shutdown_signal()).await?;
        }
    }
    Ok(())
}

/// The client TLS of a process calling other waterline services at `urls`: `None` when no
/// URL is https://; otherwise `files` (a CA is then required), followed as they change.
pub fn client_tls(
    urls: &[String],
    files: TlsFiles,
    common: &CommonArgs,
    metrics: &TlsMetrics,
    flag: &str,
) -> anyhow::Result<Option<Arc<rustls::ClientConfig>>> {
    if !urls.iter().any(|url| url.starts_with("https://")) {
        return Ok(None);
    }
    if files.ca.is_none() {
        return Err(TlsError::NoCa { flag: flag.to_owned() }.into());
    }
    Ok(Some(crate::tls::client_config(files, common.tls_reload_interval, metrics)?))
}

/// A lazily connecting channel to another waterline service: keepalives so a dead peer is
/// noticed, and for an https:// URL TLS with `tls` (from [`client_tls`]; its CA and client
/// certificate follow their files, so every new connection uses the current ones).
/// `flag` names the URL flag in errors.
pub fn client_channel(
    url: &str,
    tls: Option<Arc<rustls::ClientConfig>>,
    flag: &str,
) -> anyhow::Result<Channel> {
    let uri: http::Uri = url.parse().with_context(|| format!("{flag} {url}"))?;
    let https = uri.scheme_str() == Some("https");
    // tonic refuses an https:// URI without its own TLS, which reads files once: the
    // endpoint is given as http:// and the connector below does the handshake.
    let plain = match (&https, uri.authority()) {
        (true, Some(authority)) => {
            let port = authority.port_u16().unwrap_or(443);
            format!("http://{}:{port}{}", authority.host(), uri.path())
        }
        _ => url.to_owned(),
    };
    let endpoint = Endpoint::from_shared(plain)
        .with_context(|| format!("{flag} {url}"))?
        .connect_timeout(Duration::from_secs(3))
        .tcp_nodelay(true)
        .initial_stream_window_size(Some(HTTP2_WINDOW))
        .initial_connection_window_size(Some(HTTP2_WINDOW * 4))
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10))
        .keep_alive_while_idle(true);
    if !https {
        return Ok(endpoint.connect_lazy());
    }
    let tls = tls.ok_or_else(|| TlsError::NoCa { flag: flag.to_owned() })?;
    let connector = tokio_rustls::TlsConnector::from(tls);
    let connect = tower::service_fn(move |uri: http::Uri| {
        let connector = connector.clone();
        async move {
            let host = uri.host().unwrap_or_default();
            let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
            let port = uri.port_u16().unwrap_or(443);
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let name = ServerName::try_from(host)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
            let tls = connector.connect(name, tcp).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
        }
    });
    Ok(endpoint.connect_with_connector_lazy(connect))
}

/// Opens a lazily connecting channel now, with one `grpc.health.v1` check of `service`, so
/// the first real request does not also pay for the TCP, TLS and HTTP/2 handshakes inside its
/// deadline; logs whether the peer answered. Never fails: a peer that is down is dialled
/// again by the channel on the next request.
pub fn warm_up(channel: tonic::transport::Channel, service: &'static str, url: String) {
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let span = tracing::info_span!("warm_up", %url);
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
    }.instrument(span));
}
