//! Wiring: policy, collector channel, sync and forward tasks, gRPC and admin servers.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use waterline_api::v1::scorer_service_server::ScorerServiceServer;
use waterline_core::{Policy, UnixMillis, engine};
use waterline_runtime::admin::Admin;
use waterline_runtime::limits::Limits;
use waterline_runtime::policy::{PolicyHandle, ReloadMetrics};
use waterline_runtime::rpc_metrics::RpcMetrics;
use waterline_runtime::tls::TlsMetrics;
use waterline_runtime::{grpc, https, logging, shutdown_signal};

use crate::args::Args;
use crate::forward::{ForwardMetrics, Forwarder};
use crate::service::{RequestCounters, Scorer};
use crate::store::Store;
use crate::sync::{self, SyncMetrics};

/// The long-lived stream counted per client by `--max-streams-per-client`.
const SESSION_PATH: &str = "/waterline.v1.ScorerService/Session";

/// `{metric="…"}`.
type MetricLabel = Vec<(String, String)>;

#[derive(Clone, Default)]
struct SnapshotGauges {
    age_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    nodes: Gauge,
    stale_nodes: Gauge,
    ledger_entries: Gauge,
    breaker_open: Family<MetricLabel, Gauge>,
}

fn register(
    registry: &mut Registry,
) -> (SnapshotGauges, SyncMetrics, ForwardMetrics, RequestCounters) {
    let g = SnapshotGauges::default();
    registry.register(
        "waterline_snapshot_age_seconds",
        "Time since the last update from the collector",
        g.age_seconds.clone(),
    );
    registry.register("waterline_nodes_known", "Nodes in the scorer's snapshot", g.nodes.clone());
    registry.register(
        "waterline_stale_nodes",
        "Nodes with at least one metric older than its max age",
        g.stale_nodes.clone(),
    );
    registry.register(
        "waterline_ledger_entries",
        "Placements in the scorer's ledger",
        g.ledger_entries.clone(),
    );
    registry.register(
        "waterline_stale_breaker_open",
        "1 while more than stale.breakerShare of the nodes reporting this metric are stale, so Filter and Score leave the metric out for every node",
        g.breaker_open.clone(),
    );
    let s = SyncMetrics::default();
    registry.register(
        "waterline_collector_connected",
        "1 while streaming from the collector",
        s.connected.clone(),
    );
    registry.register(
        "waterline_collector_reconnects",
        "Times the collector stream was (re)opened after a failure",
        s.reconnects.clone(),
    );
    registry.register(
        "waterline_collector_messages",
        "WatchNodes messages applied",
        s.messages.clone(),
    );
    registry.register(
        "waterline_collector_dropped_entries",
        "Streamed ledger entries skipped because they had no pod_uid or node_name",
        s.dropped_entries.clone(),
    );
    let f = ForwardMetrics::default();
    registry.register(
        "waterline_forward_queued",
        "Reserves/Unreserves waiting for the collector",
        f.queued.clone(),
    );
    registry.register(
        "waterline_forward_dropped",
        "Reserves/Unreserves dropped because the queue was full",
        f.dropped.clone(),
    );
    registry.register(
        "waterline_forward_retries",
        "Failed attempts to forward to the collector",
        f.retries.clone(),
    );
    registry.register(
        "waterline_forward_expired",
        "Reserves/Unreserves a collector did not take within 15 minutes, given up",
        f.expired.clone(),
    );
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
    (g, s, f, c)
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    logging::init(args.common.log_format);
    let policy = waterline_runtime::policy::load_or_default(args.policy.as_deref())?;

    let mut registry = Registry::default();
    let rpc = RpcMetrics::register(&mut registry, "waterline_scorer_grpc", "scorer gRPC request");
    let reload_metrics = ReloadMetrics::register(&mut registry);
    let (gauges, sync_metrics, forward_metrics, counters) = register(&mut registry);
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
    let store = Arc::new(Store::with_policy(collectors.len(), policy.clone()));
    let channels = collectors.iter().map(|c| c.channel.clone()).collect();
    let forwarder = Forwarder::spawn(channels, store.clone(), forward_metrics);
    let subscriber = format!("scorer {}", args.grpc_addr);
    tokio::spawn(sync::run(collectors, store.clone(), subscriber, sync_metrics));

    waterline_runtime::policy::spawn_reload(args.policy.clone(), policy.clone(), reload_metrics);

    let (health, router) = grpc::router_with_health(&limits)?;
    health.set_not_serving::<ScorerServiceServer<Scorer>>().await;
    tokio::spawn(observe(store.clone(), policy.clone(), gauges, admin.clone(), health));

    let service = ScorerServiceServer::new(Scorer {
        store,
        policy,
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

/// Once a second: snapshot gauges, and readiness/health once the first snapshot is in.
/// Health stays SERVING after that even if the collector goes away: the last snapshot is
/// still the best answer there is, and its age is exported.
async fn observe(
    store: Arc<Store>,
    policy: PolicyHandle,
    gauges: SnapshotGauges,
    admin: Admin,
    health: tonic_health::server::HealthReporter,
) {
    let mut ticker = tokio::time::interval(Duration::from_millis(250));
    let mut breakers = BreakerLog::default();
    for tick in 0u64.. {
        ticker.tick().await;
        if store.is_synced() && !admin.is_ready() {
            admin.set_ready(true);
            health.set_serving::<ScorerServiceServer<Scorer>>().await;
            tracing::info!(nodes = store.read().node_count(), "first snapshot received; serving");
        }
        let now = UnixMillis::now();
        gauges.age_seconds.set(store.age(now).as_secs_f64());
        // Rows whose placements aged out, or a reloaded policy: off the request path.
        store.refresh(now);
        // The full pass below reads every node: once every 2 s is plenty.
        if tick % 8 != 0 {
            continue;
        }
        let policy = policy.get();
        let (nodes, stale, ledger) = {
            let snapshot = store.read();
            // The breaker reads the snapshot's index of sample times: no walk over the nodes.
            let open = engine::breakers(&policy, &snapshot, now);
            breakers.update(&policy, &open, &gauges.breaker_open);
            let stale = snapshot
                .nodes()
                .filter(|node| {
                    policy.metrics.iter().any(|m| {
                        snapshot
                            .metric_id(&m.name)
                            .and_then(|id| node.sample(id))
                            .is_none_or(|s| now.since(s.at) > m.max_age)
                    })
                })
                .count();
            (snapshot.node_count(), stale, snapshot.ledger().len())
        };
        gauges.nodes.set(nodes as i64);
        gauges.stale_nodes.set(stale as i64);
        gauges.ledger_entries.set(ledger as i64);
    }
}

/// The last breaker state per metric, so an opening and a closing are each logged once.
#[derive(Default)]
struct BreakerLog {
    open: std::collections::BTreeMap<String, bool>,
}

impl BreakerLog {
    /// `open[i]` is the breaker of `policy.metrics[i]`. Metrics that left the policy lose
    /// their gauge.
    fn update(&mut self, policy: &Policy, open: &[bool], gauge: &Family<MetricLabel, Gauge>) {
        self.open.retain(|metric, _| {
            let keep = policy.metric(metric).is_some();
            if !keep {
                gauge.remove(&vec![("metric".to_string(), metric.clone())]);
            }
            keep
        });
        for (spec, &is_open) in policy.metrics.iter().zip(open) {
            gauge
                .get_or_create(&vec![("metric".to_string(), spec.name.clone())])
                .set(i64::from(is_open));
            let was_open = self.open.insert(spec.name.clone(), is_open).unwrap_or(false);
            match (was_open, is_open) {
                (false, true) => tracing::warn!(
                    metric = %spec.name,
                    share = policy.stale.breaker_share,
                    "stale breaker open: more than this share of the nodes reporting the metric are stale; Filter and Score leave it out for every node until fresh samples return"
                ),
                (true, false) => tracing::info!(
                    metric = %spec.name,
                    "stale breaker closed: the metric's samples are fresh again on enough nodes; it counts again"
                ),
                _ => {}
            }
        }
    }
}
