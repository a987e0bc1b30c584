//! Wiring: policy, collector channel, sync and forward tasks, gRPC and admin servers.

use std::sync::Arc;

use prometheus_client::registry::Registry;
use tracing::Instrument;
use waterline_api::v1::scorer_service_server::ScorerServiceServer;
use waterline_runtime::admin::Admin;
use waterline_runtime::limits::Limits;
use waterline_runtime::policy::ReloadMetrics;
use waterline_runtime::rpc_metrics::RpcMetrics;
use waterline_runtime::tls::TlsMetrics;
use waterline_runtime::{grpc, https, logging, shutdown_signal};

use crate::args::Args;
use crate::forward::{self, ForwardMetrics, Forwarder};
use crate::observe::{self, SnapshotGauges};
use crate::service::{RequestCounters, Scorer};
use crate::store::Store;
use crate::sync::{self, SyncMetrics};

/// The long-lived stream counted per client by `--max-streams-per-client`.
const SESSION_PATH: &str = "/waterline.v1.ScorerService/Session";

fn register_request_counters(registry: &mut Registry) -> RequestCounters {
    let c = RequestCounters::default();
    registry.register(
        "waterline_unknown_nodes",
        "Candidate nodes the snapshot did not know",
        c.unknown_nodes.clone(),
    );
    registry.register(
        "waterline_capped_estimates",
        "Pod estimates above a node's capacity, capped at 100 %",
        c.capped_estimates.clone(),
    );
    c
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    logging::init(args.common.log_format);
    let policies = waterline_runtime::policy::Policies::load(&args.policy)?;
    let policy = policies.default_handle().clone();

    let mut registry = Registry::default();
    let rpc = RpcMetrics::register(&mut registry, "waterline_scorer_grpc", "scorer gRPC request");
    let reload_metrics = ReloadMetrics::register(&mut registry);
    let gauges = SnapshotGauges::register(&mut registry);
    let sync_metrics = SyncMetrics::register(&mut registry);
    let forward_metrics = ForwardMetrics::register(&mut registry);
    // Made before the registry goes to the admin server: the store owns the outcome counters.
    let store = Arc::new(Store::with_policies(args.collector_url.len(), policies.clone()));
    store.outcome_metrics().register(&mut registry);
    let counters = register_request_counters(&mut registry);
    let limits = Limits::register(&mut registry, &args.limits, &[SESSION_PATH]);
    let tls_metrics = TlsMetrics::register(&mut registry);
    let tls = https::listener_config(&args.common, &tls_metrics)?;
    let client_tls = grpc::client_tls(
        &args.collector_url,
        args.collector_tls_files(),
        &args.common,
        &tls_metrics,
        "--collector-url",
    )?;
    let admin = Admin::new(registry).with_tls(https::admin_config(&args.common, &tls));

    let mut collectors = Vec::new();
    for url in &args.collector_url {
        let channel = grpc::client_channel(url, client_tls.clone(), "--collector-url")?;
        collectors.push(sync::Collector { url: url.clone(), channel });
    }
    let forwarder =
        Forwarder::spawn(collectors.clone(), store.clone(), forward_metrics, args.forward_give_up);
    tokio::spawn(
        forward::give_up_unconfirmed(store.clone(), args.forward_give_up)
            .instrument(tracing::info_span!("forward_give_up")),
    );
    let subscriber = format!("scorer {}", args.grpc_addr);
    let span = tracing::info_span!("collector_stream", collectors = %args.collector_url.join(","));
    tokio::spawn(
        sync::run(collectors, store.clone(), subscriber, args.collector_silence, sync_metrics)
            .instrument(span),
    );

    policies.spawn_reload(reload_metrics);
    tracing::info!(named = ?policies.names().collect::<Vec<_>>(), "policies loaded");

    let (health, router) = grpc::router_with_health(&limits)?;
    health.set_not_serving::<ScorerServiceServer<Scorer>>().await;
    tokio::spawn(
        observe::run(store.clone(), policy.clone(), gauges, admin.clone(), health)
            .instrument(tracing::info_span!("observe")),
    );

    let service = ScorerServiceServer::new(Scorer {
        store,
        policies,
        forwarder,
        max_nodes: args.max_nodes,
        limits: limits.clone(),
        rpc,
        counters,
    })
    .max_decoding_message_size(limits.max_request_bytes());

    tokio::spawn(admin.serve(args.admin_addr, shutdown_signal()));
    tracing::info!(collectors = ?args.collector_url, "streaming the snapshot from a collector");
    grpc::serve(router.add_service(service), args.grpc_addr, tls, "scorer").await?;
    Ok(())
}
