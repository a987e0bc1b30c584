//! TLS for the listeners (gRPC, extender and admin), from the `--tls-*` flags; the
//! certificate follows its files (`crate::tls`). Handshakes run in their own tasks, so a
//! slow or broken client never holds up the others; failed handshakes are logged at debug
//! level and dropped.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tracing::Instrument;

use crate::args::CommonArgs;
use crate::tls::TlsMetrics;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The listeners' TLS (`--tls-cert`/`--tls-key`/`--tls-client-ca`), if set, following the
/// files as they change ([`crate::tls`]). One configuration serves the gRPC, extender and
/// (with `--admin-tls`) admin listeners of a process.
pub fn listener_config(
    args: &CommonArgs,
    metrics: &TlsMetrics,
) -> anyhow::Result<Option<Arc<rustls::ServerConfig>>> {
    let Some(files) = args.server_tls_files() else { return Ok(None) };
    let config = crate::tls::server_config(files, args.tls_reload_interval, metrics)
        .context("--tls-cert/--tls-key/--tls-client-ca")?;
    Ok(Some(config))
}

/// The admin port's TLS: the listeners' configuration when `--admin-tls` is set.
pub fn admin_config(
    args: &CommonArgs,
    listener: &Option<Arc<rustls::ServerConfig>>,
) -> Option<Arc<rustls::ServerConfig>> {
    if args.admin_tls { listener.clone() } else { None }
}

/// Accepts TCP connections on `tcp` and hands over those whose TLS handshake completes
/// (each in its own task, bounded by a timeout); with Nagle off, as answers are small and
/// latency-bound. Ends when the receiver is dropped.
pub fn accept_tls(
    tcp: TcpListener,
    config: Arc<rustls::ServerConfig>,
) -> mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)> {
    let (tx, ready) = mpsc::channel(64);
    let addr = tcp.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let span = tracing::info_span!("tls_accept", %addr);
    tokio::spawn(accept_loop(tcp, TlsAcceptor::from(config), tx).instrument(span));
    ready
}

type Accepted = (TlsStream<TcpStream>, SocketAddr);

async fn accept_loop(tcp: TcpListener, acceptor: TlsAcceptor, tx: mpsc::Sender<Accepted>) {
    while !tx.is_closed() {
        let (stream, peer) = match tcp.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        // At debug, as its events are: a span per connection costs nothing at info.
        let span = tracing::debug_span!("tls_handshake", %peer);
        tokio::spawn(handshake(acceptor.clone(), stream, peer, tx.clone()).instrument(span));
    }
}

async fn handshake(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    tx: mpsc::Sender<Accepted>,
) {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => {
            let _ = tx.send((tls, peer)).await;
        }
        Ok(Err(error)) => tracing::debug!(%error, %peer, "TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
    }
}

/// A listener yielding TLS streams, for `axum::serve`.
pub struct TlsListener {
    ready: mpsc::Receiver<Accepted>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, config: Arc<rustls::ServerConfig>) -> io::Result<Self> {
        let local = tcp.local_addr()?;
        Ok(TlsListener { ready: accept_tls(tcp, config), local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accept task only ends when this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// Serves `router` on `addr`, over TLS when the flags ask for it, until `shutdown`.
pub async fn serve(
    addr: SocketAddr,
    router: axum::Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    what: &'static str,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let tcp = TcpListener::bind(addr).await.with_context(|| format!("binding {what} on {addr}"))?;
    let local = tcp.local_addr()?;
    match tls {
        None => {
            tracing::info!(addr = %local, "{what} listening (http)");
            axum::serve(tcp, router).with_graceful_shutdown(shutdown).await?;
        }
        Some(config) => {
            tracing::info!(addr = %local, "{what} listening (https)");
            axum::serve(TlsListener::new(tcp, config)?, router)
                .with_graceful_shutdown(shutdown)
                .await?;
        }
    }
    Ok(())
}
