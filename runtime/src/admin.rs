//! The admin listener: `/metrics` (Prometheus text), `/live` (the process runs) and
//! `/ready` (the process has its first snapshot). Kept on its own port so probes and
//! scrapes never queue behind scheduling traffic.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tracing::Instrument;

/// Shared by the admin server and whoever decides readiness.
#[derive(Clone)]
pub struct Admin {
    registry: Arc<Mutex<Registry>>,
    ready: Arc<AtomicBool>,
    tls: Option<Arc<rustls::ServerConfig>>,
}

impl Admin {
    pub fn new(registry: Registry) -> Self {
        Admin {
            registry: Arc::new(Mutex::new(registry)),
            ready: Arc::new(AtomicBool::new(false)),
            tls: None,
        }
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/metrics", get(metrics))
            .route("/live", get(|| async { "ok\n" }))
            .route("/ready", get(ready))
            .with_state(self.clone())
    }

    /// Serve over TLS (`--admin-tls`).
    pub fn with_tls(mut self, tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        self.tls = tls;
        self
    }

    /// Serves until `shutdown` resolves.
    pub async fn serve(
        self,
        addr: SocketAddr,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let tls = self.tls.clone();
        crate::https::serve(addr, self.router(), tls, "admin", shutdown)
            .instrument(tracing::info_span!("admin", %addr))
            .await
    }
}

async fn metrics(State(admin): State<Admin>) -> impl IntoResponse {
    let mut body = String::new();
    let encoded = {
        let registry = admin.registry.lock().unwrap_or_else(|p| p.into_inner());
        prometheus_client::encoding::text::encode(&mut body, &registry)
    };
    match encoded {
        Ok(()) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
            body,
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain")],
            format!("encoding metrics failed: {e}\n"),
        ),
    }
}

async fn ready(State(admin): State<Admin>) -> impl IntoResponse {
    if admin.is_ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "waiting for the first snapshot\n")
    }
}
