//! Wiring: policy, scorer channel, optional Kubernetes client, HTTP and admin servers.

use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use axum::serve::ListenerExt;
use prometheus_client::registry::Registry;
use waterline_api::v1::scorer_service_client::ScorerServiceClient;
use waterline_runtime::admin::Admin;
use waterline_runtime::policy::ReloadMetrics;
use waterline_runtime::{https, logging, shutdown_signal};

use crate::args::Args;
use crate::bind::Binder;
use crate::handlers::{Extender, Metrics};
use crate::http::{HttpError, routes};

/// `/waterline/v1/` → `/waterline/v1`; `` and `/` → `` (verbs at the root).
fn normalize_prefix(prefix: &str) -> String {
    let trimmed = prefix.trim_matches('/');
    if trimmed.is_empty() { String::new() } else { format!("/{trimmed}") }
}

/// The extender's routes under `prefix`; anything else is a 404 in the wire's error shape.
pub fn router(extender: Arc<Extender>, prefix: &str) -> Router {
    let prefix = normalize_prefix(prefix);
    Router::new()
        .route(&format!("{prefix}/filter"), post(routes::filter))
        .route(&format!("{prefix}/prioritize"), post(routes::prioritize))
        .route(&format!("{prefix}/preempt"), post(routes::preempt))
        .route(&format!("{prefix}/bind"), post(routes::bind))
        .fallback(|| async {
            HttpError { status: StatusCode::NOT_FOUND, message: "no such extender verb".into() }
        })
        .with_state(extender)
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    logging::init(args.common.log_format);
    let policy = waterline_runtime::policy::load_or_default(args.policy.as_deref())?;

    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let reload_metrics = ReloadMetrics::register(&mut registry);
    let admin = Admin::new(registry).with_tls(https::admin_config(&args.common)?);
    // --tls-cert: the verbs over HTTPS (kube-scheduler's `enableHTTPS` + `tlsConfig.caFile`).
    let tls = https::server_config(&args.common)?;

    waterline_runtime::policy::spawn_reload(args.policy.clone(), policy.clone(), reload_metrics);

    let binder = if args.enable_bind {
        Some(Binder::from_environment().await.context("--enable-bind: Kubernetes client")?)
    } else {
        None
    };
    let channel = waterline_runtime::grpc::client_endpoint(
        &args.scorer_url,
        args.scorer_ca.as_deref(),
        "--scorer-url",
    )?
    .connect_lazy();
    waterline_runtime::grpc::warm_up(
        channel.clone(),
        "waterline.v1.ScorerService",
        args.scorer_url.clone(),
    );
    let extender = Arc::new(Extender {
        scorer: ScorerServiceClient::new(channel),
        scorer_timeout: args.scorer_timeout,
        scheduler_names: args.scheduler_names.iter().map(|s| s.trim().to_owned()).collect(),
        max_nodes: args.max_nodes,
        max_body: args.max_body,
        policy,
        metrics,
        binder,
    });

    tokio::spawn(admin.clone().serve(args.admin_addr, shutdown_signal()));
    let listener = tokio::net::TcpListener::bind(args.http_addr)
        .await
        .with_context(|| format!("--http-addr {}", args.http_addr))?;
    tracing::info!(
        addr = %listener.local_addr()?,
        https = tls.is_some(),
        prefix = %normalize_prefix(&args.prefix),
        scorer = %args.scorer_url,
        scheduler_names = ?args.scheduler_names,
        "extender listening"
    );
    // Ready once listening: a scorer that is down is answered neutrally, not waited for.
    admin.set_ready(true);
    let app = router(extender, &args.prefix);
    match tls {
        None => {
            // Answers are small and latency-bound: no Nagle delay on them.
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await?
        }
        Some(config) => {
            axum::serve(https::TlsListener::new(listener, config)?, app)
                .with_graceful_shutdown(shutdown_signal())
                .await?
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::normalize_prefix;

    #[test]
    fn prefixes_are_normalised() {
        assert_eq!(normalize_prefix("/waterline/v1"), "/waterline/v1");
        assert_eq!(normalize_prefix("waterline/v1/"), "/waterline/v1");
        assert_eq!(normalize_prefix("/"), "");
        assert_eq!(normalize_prefix(""), "");
    }
}
