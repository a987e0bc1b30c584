//! Wiring: policy, scorer channel, optional Kubernetes client, HTTP and admin servers.

use std::sync::Arc;

use anyhow::Context;
use axum::serve::ListenerExt;
use prometheus_client::registry::Registry;
use waterline_runtime::admin::Admin;
use waterline_runtime::policy::ReloadMetrics;
use waterline_runtime::tls::{TlsFiles, TlsMetrics};
use waterline_runtime::{grpc, https, logging, shutdown_signal};

use crate::args::Args;
use crate::bind::Binder;
use crate::cache::ScoreCache;
use crate::http::{normalize_prefix, router};
use crate::metrics::Metrics;
use crate::provisional::Provisional;
use crate::scorer::ScorerClient;
use crate::verbs::Extender;

pub async fn run(args: Args) -> anyhow::Result<()> {
    logging::init(args.common.log_format);
    let policies = waterline_runtime::policy::Policies::load(&args.policy)?;

    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let reload_metrics = ReloadMetrics::register(&mut registry);
    let tls_metrics = TlsMetrics::register(&mut registry);
    // --tls-cert: the verbs over HTTPS (kube-scheduler's `enableHTTPS` + `tlsConfig.caFile`).
    let tls = https::listener_config(&args.common, &tls_metrics)?;
    let scorer_tls = grpc::client_tls(
        std::slice::from_ref(&args.scorer_url),
        TlsFiles {
            identity: args.scorer_cert.clone().zip(args.scorer_key.clone()),
            ca: args.scorer_ca.clone(),
        },
        &args.common,
        &tls_metrics,
        "--scorer-url",
    )?;
    let admin = Admin::new(registry).with_tls(https::admin_config(&args.common, &tls));

    policies.spawn_reload(reload_metrics);

    let binder = if args.enable_bind {
        Some(Binder::from_environment().await.context("--enable-bind: Kubernetes client")?)
    } else {
        None
    };
    let channel = grpc::client_channel(&args.scorer_url, scorer_tls, "--scorer-url")?;
    grpc::warm_up(channel.clone(), "waterline.v1.ScorerService", args.scorer_url.clone());
    let extender = Arc::new(Extender {
        scorer: ScorerClient::new(channel, args.scorer_timeout, &metrics),
        scheduler_names: args.scheduler_names.iter().map(|s| s.trim().to_owned()).collect(),
        max_nodes: args.max_nodes,
        policies,
        metrics,
        binder,
        cache: ScoreCache::new(args.score_cache_ttl, args.score_cache_size),
        provisional: args
            .provisional_reserve
            .then(|| Provisional::new(args.provisional_reserve_ttl)),
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
        policies = ?extender.policies.names().collect::<Vec<_>>(),
        "extender listening"
    );
    // Ready once listening: a scorer that is down is answered neutrally, not waited for.
    admin.set_ready(true);
    let app = router(extender, &args.prefix, args.max_body);
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
