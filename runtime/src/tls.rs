//! TLS material that follows its files: certificates, keys and CAs are read at start and
//! re-read when the files change, without a restart (cert-manager renews a Secret in place
//! and the kubelet swaps the mounted files; a process that read them once serves an expired
//! certificate a few weeks later).
//!
//! A [`Reloader`] owns one set of files — a server's identity and optional client CA, or a
//! client's CA and optional identity — and polls their modification times every
//! `--tls-reload-interval`. A change is loaded completely (every PEM parsed, the key matched
//! against the certificate, the CA turned into a verifier) before it replaces the old
//! material; a half-written or invalid file keeps the old certificate, logs the reason and
//! counts `waterline_tls_reload_total{result="error"}`, and is tried again when the files
//! change again. The rustls configurations built here read the current material on every
//! handshake (a [`ResolvesServerCert`]/[`ResolvesClientCert`] and verifiers that delegate to
//! the current CA), so new connections use the new files and existing ones carry on.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, SystemTime};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, WebPkiServerVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use tracing::Instrument;

/// Why a set of TLS files could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Pem { path: PathBuf, source: rustls::pki_types::pem::Error },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path}: not a usable certificate: {reason}")]
    Certificate { path: PathBuf, reason: String },
    #[error("{key} does not fit {cert}: {source}")]
    Key { cert: PathBuf, key: PathBuf, source: rustls::Error },
    #[error("CA {path}: {source}")]
    Ca { path: PathBuf, source: rustls::Error },
    #[error("CA {path}: {reason}")]
    Verifier { path: PathBuf, reason: String },
    #[error("an https:// {flag} needs a CA to check the peer against")]
    NoCa { flag: String },
}

/// Which side of the connection the files are for (the `role` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RoleLabel {
    role: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReloadLabels {
    role: &'static str,
    result: &'static str,
}

/// `waterline_tls_reload_total{role,result}` and `waterline_tls_cert_not_after_seconds{role}`.
#[derive(Clone, Default)]
pub struct TlsMetrics {
    reloads: Family<ReloadLabels, Counter>,
    not_after: Family<RoleLabel, Gauge>,
}

impl TlsMetrics {
    pub fn register(registry: &mut Registry) -> TlsMetrics {
        let metrics = TlsMetrics::default();
        registry.register(
            "waterline_tls_reload",
            "Loads of changed TLS files by role (server, client) and result (ok: now in use; error: invalid or half-written, the previous certificate stays)",
            metrics.reloads.clone(),
        );
        registry.register(
            "waterline_tls_cert_not_after_seconds",
            "Expiry (Unix seconds) of the certificate in use, by role",
            metrics.not_after.clone(),
        );
        metrics
    }

    fn count(&self, role: &'static str, result: &'static str) {
        self.reloads.get_or_create(&ReloadLabels { role, result }).inc();
    }
}

/// The files of one side.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// Certificate chain and key presented to the peer (required for a server).
    pub identity: Option<(PathBuf, PathBuf)>,
    /// CA the peer's certificate must chain to (required for a client; for a server it turns
    /// on client certificates).
    pub ca: Option<PathBuf>,
}

impl TlsFiles {
    fn paths(&self) -> impl Iterator<Item = &Path> {
        let identity = self.identity.iter().flat_map(|(c, k)| [c.as_path(), k.as_path()]);
        identity.chain(self.ca.as_deref())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Server,
    Client,
}

impl Role {
    fn label(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Client => "client",
        }
    }
}

/// What one successful load produced.
struct Material {
    identity: Option<Arc<CertifiedKey>>,
    client_verifier: Option<Arc<dyn ClientCertVerifier>>,
    server_verifier: Option<Arc<dyn ServerCertVerifier>>,
}

/// `rustls::crypto::verify_tls12_signature` or `verify_tls13_signature`.
type SignatureCheck = fn(
    &[u8],
    &CertificateDer<'_>,
    &DigitallySignedStruct,
    &rustls::crypto::WebPkiSupportedAlgorithms,
) -> Result<HandshakeSignatureValid, rustls::Error>;

/// Modification time and length of each file: a change of either means "read again".
type Stamps = Vec<Option<(SystemTime, u64)>>;

/// One set of TLS files, loaded, watched and swapped in when they change.
pub struct Reloader {
    files: TlsFiles,
    role: Role,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<Material>>,
    /// The stamps of the files last tried, good or bad: a bad set is not retried (and not
    /// logged again) until a file changes.
    tried: RwLock<Stamps>,
    metrics: TlsMetrics,
}

impl fmt::Debug for Reloader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reloader").field("files", &self.files).field("role", &self.role).finish()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { path: path.to_owned(), source })
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem { path: path.to_owned(), source })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: path.to_owned() });
    }
    Ok(certs)
}

/// The certificate's notAfter in Unix seconds.
pub fn not_after(cert: &CertificateDer<'_>) -> Result<i64, String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert).map_err(|e| e.to_string())?;
    Ok(parsed.validity().not_after.timestamp())
}

fn roots(path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(path)? {
        roots.add(cert).map_err(|source| TlsError::Ca { path: path.to_owned(), source })?;
    }
    Ok(Arc::new(roots))
}

fn stamps(files: &TlsFiles) -> Stamps {
    files
        .paths()
        .map(|p| std::fs::metadata(p).ok().and_then(|m| Some((m.modified().ok()?, m.len()))))
        .collect()
}

impl Reloader {
    fn new(files: TlsFiles, role: Role, metrics: TlsMetrics) -> Result<Arc<Reloader>, TlsError> {
        let provider = provider();
        let tried = stamps(&files);
        let (material, not_after) = load(&files, role, &provider)?;
        if let Some(not_after) = not_after {
            metrics.not_after.get_or_create(&RoleLabel { role: role.label() }).set(not_after);
        }
        Ok(Arc::new(Reloader {
            files,
            role,
            provider,
            current: RwLock::new(Arc::new(material)),
            tried: RwLock::new(tried),
            metrics,
        }))
    }

    fn current(&self) -> Arc<Material> {
        self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Reloads when a file changed since the last attempt; whether new material is in use.
    pub fn check(&self) -> bool {
        let now = stamps(&self.files);
        {
            let mut tried = self.tried.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            if *tried == now {
                return false;
            }
            *tried = now;
        }
        let role = self.role.label();
        match load(&self.files, self.role, &self.provider) {
            Ok((material, not_after)) => {
                *self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Arc::new(material);
                if let Some(not_after) = not_after {
                    self.metrics.not_after.get_or_create(&RoleLabel { role }).set(not_after);
                }
                self.metrics.count(role, "ok");
                tracing::info!(role, files = ?self.files, not_after, "TLS files changed; new connections use them");
                true
            }
            Err(error) => {
                self.metrics.count(role, "error");
                tracing::error!(role, %error, "TLS files changed but cannot be used; keeping the previous certificate and CA");
                false
            }
        }
    }

    /// A handshake signature checked with the provider's algorithms (the same for either
    /// side, whatever the CA).
    fn signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
        verify: SignatureCheck,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    /// Checks the files every `interval` for as long as the reloader is in use.
    fn watch(self: &Arc<Self>, interval: Duration) {
        let weak: Weak<Reloader> = Arc::downgrade(self);
        let span = tracing::info_span!("tls_reload", role = self.role.label());
        tokio::spawn(
            async move {
                let mut ticker = tokio::time::interval(interval);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                ticker.tick().await;
                loop {
                    ticker.tick().await;
                    let Some(reloader) = weak.upgrade() else { return };
                    // Reads a few small files: off the runtime's worker threads (in this span,
                    // which a blocking thread does not inherit).
                    let span = tracing::Span::current();
                    let _ = tokio::task::spawn_blocking(move || span.in_scope(|| reloader.check()))
                        .await;
                }
            }
            .instrument(span),
        );
    }
}

fn load(
    files: &TlsFiles,
    role: Role,
    provider: &Arc<CryptoProvider>,
) -> Result<(Material, Option<i64>), TlsError> {
    let mut not_after_secs = None;
    let identity = match &files.identity {
        None => None,
        Some((cert, key)) => {
            let chain = certificates(cert)?;
            not_after_secs = Some(
                not_after(&chain[0])
                    .map_err(|reason| TlsError::Certificate { path: cert.clone(), reason })?,
            );
            let key_der = PrivateKeyDer::from_pem_slice(&read(key)?)
                .map_err(|source| TlsError::Pem { path: key.clone(), source })?;
            let certified = CertifiedKey::from_der(chain, key_der, provider)
                .map_err(|source| TlsError::Key { cert: cert.clone(), key: key.clone(), source })?;
            Some(Arc::new(certified))
        }
    };
    let (mut client_verifier, mut server_verifier) = (None, None);
    if let Some(ca) = &files.ca {
        let roots = roots(ca)?;
        let reason =
            |e: &dyn fmt::Display| TlsError::Verifier { path: ca.clone(), reason: e.to_string() };
        match role {
            Role::Server => {
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| reason(&e))?;
                client_verifier = Some(verifier as Arc<dyn ClientCertVerifier>);
            }
            Role::Client => {
                let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| reason(&e))?;
                server_verifier = Some(verifier as Arc<dyn ServerCertVerifier>);
            }
        }
    }
    Ok((Material { identity, client_verifier, server_verifier }, not_after_secs))
}

/// The handshake-signature methods both verifier traits require: the provider's
/// algorithms, whatever the CA (only the chain check follows the files).
macro_rules! signature_checks {
    () => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.signature(message, cert, dss, rustls::crypto::verify_tls12_signature)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.signature(message, cert, dss, rustls::crypto::verify_tls13_signature)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.provider.signature_verification_algorithms.supported_schemes()
        }
    };
}

/// The server side: the certificate in use, and client certificates checked against the
/// CA in use (when one is configured).
#[derive(Debug)]
struct ServerSide(Arc<Reloader>);

impl ResolvesServerCert for ServerSide {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.current().identity.clone()
    }
}

/// A rejection when the reloader has no client CA (never built that way).
fn no_verifier() -> rustls::Error {
    rustls::Error::General("no CA loaded".into())
}

impl ClientCertVerifier for ServerSide {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // The hints would borrow from material that a reload may replace; an empty list
        // tells the client to send the certificate it has (RFC 8446 §4.3.2).
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let current = self.0.current();
        let verifier = current.client_verifier.as_ref().ok_or_else(no_verifier)?;
        verifier.verify_client_cert(end_entity, intermediates, now)
    }

    signature_checks!();
}

/// The client side: the peer checked against the CA in use, and the client certificate in
/// use presented when the server asks for one.
#[derive(Debug)]
struct ClientSide(Arc<Reloader>);

impl ResolvesClientCert for ClientSide {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.0.current().identity.clone()
    }

    fn has_certs(&self) -> bool {
        self.0.files.identity.is_some()
    }
}

impl ServerCertVerifier for ClientSide {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let current = self.0.current();
        let verifier = current.server_verifier.as_ref().ok_or_else(no_verifier)?;
        verifier.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    signature_checks!();
}

/// A server configuration following `files` (identity required; `ca` turns on client
/// certificates), checked every `interval`. ALPN offers h2 and http/1.1: gRPC clients pick
/// h2, kube-scheduler's extender client and curl either.
pub fn server_config(
    files: TlsFiles,
    interval: Duration,
    metrics: &TlsMetrics,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let mtls = files.ca.is_some();
    let reloader = Reloader::new(files, Role::Server, metrics.clone())?;
    reloader.watch(interval);
    let builder = rustls::ServerConfig::builder_with_provider(reloader.provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|source| TlsError::Ca { path: PathBuf::new(), source })?;
    let side = Arc::new(ServerSide(reloader));
    let builder = if mtls {
        builder.with_client_cert_verifier(side.clone())
    } else {
        builder.with_no_client_auth()
    };
    let mut config = builder.with_cert_resolver(side);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A client configuration following `files` (CA required; identity for mTLS), checked every
/// `interval`; ALPN h2 (gRPC).
pub fn client_config(
    files: TlsFiles,
    interval: Duration,
    metrics: &TlsMetrics,
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let reloader = Reloader::new(files, Role::Client, metrics.clone())?;
    reloader.watch(interval);
    let side = Arc::new(ClientSide(reloader.clone()));
    let mut config = rustls::ClientConfig::builder_with_provider(reloader.provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|source| TlsError::Ca { path: PathBuf::new(), source })?
        .dangerous()
        .with_custom_certificate_verifier(side.clone())
        .with_client_cert_resolver(side);
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests;
