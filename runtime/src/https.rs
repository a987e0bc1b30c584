//! TLS for the HTTP listeners (admin and extender), from the same `--tls-*` flags as the
//! gRPC listeners. Handshakes run in their own tasks, so a slow or broken client never
//! holds up the others; failed handshakes are logged at debug level and dropped.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::args::CommonArgs;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

fn certificates(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading certificates from {}", path.display()))
}

/// A rustls server configuration from `--tls-cert`/`--tls-key`/`--tls-client-ca`, if set.
pub fn server_config(args: &CommonArgs) -> anyhow::Result<Option<Arc<rustls::ServerConfig>>> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match &args.tls_client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in certificates(ca)? {
                roots.add(cert)?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build()?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("reading the private key {}", key.display()))?;
    let mut config = builder.with_single_cert(certificates(cert)?, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Some(Arc::new(config)))
}

/// The admin port's TLS: the listeners' certificate when `--admin-tls` is set.
pub fn admin_config(args: &CommonArgs) -> anyhow::Result<Option<Arc<rustls::ServerConfig>>> {
    if args.admin_tls { server_config(args) } else { Ok(None) }
}

/// A listener yielding TLS streams, for `axum::serve`.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, config: Arc<rustls::ServerConfig>) -> io::Result<Self> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(async move {
            while !tx.is_closed() {
                let (stream, peer) = match tcp.accept().await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(error)) => tracing::debug!(%error, %peer, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { ready, local })
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
