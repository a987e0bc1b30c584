//! Wiring: parse the policy, start the node source, the gRPC server and the admin server,
//! and run until SIGTERM.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tracing::Instrument;
use waterline_api::v1::collector_service_server::CollectorServiceServer;
use waterline_core::UnixMillis;
use waterline_runtime::admin::Admin;
use waterline_runtime::limits::Limits;
use waterline_runtime::policy::{PolicyHandle, ReloadMetrics};
use waterline_runtime::rpc_metrics::RpcMetrics;
use waterline_runtime::tls::TlsMetrics;
use waterline_runtime::{grpc, https, logging, shutdown_signal};

use crate::args::Args;
use crate::args::KubeMode;
use crate::learn::{self, LearnMetrics};
use crate::node_directory::NodeDirectory;
use crate::predicted_load;
use crate::published::Deltas;
use crate::running_pods::RunningPods;
use crate::service::Collector;
use crate::shadow::{self, SchedulerFilter, ShadowMetrics};
use crate::sources::kube::{self as kube_source, NodeAddresses};
use crate::sources::metrics_server::{self, MetricsServerMetrics, MetricsServerMode};
use crate::sources::{prometheus, static_file, synthetic};
use crate::state::{ClusterState, GuessTally};

/// The long-lived stream counted per client by `--max-streams-per-client`.
const WATCH_NODES_PATH: &str = "/waterline.v1.CollectorService/WatchNodes";

/// How long readiness waits for the first pod list before giving up on it (an unreachable
/// API server must not keep the collector unready forever; the watch keeps retrying).
const KUBE_READY_WAIT: Duration = Duration::from_secs(30);

/// What [`maintain`] keeps up to date.
#[derive(Clone, Default)]
struct Gauges {
    nodes: Gauge,
    ledger_entries: Gauge,
    subscribers: Gauge,
    /// `ClusterState::guesses`, as counters.
    guesses: Family<GuessLabels, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GuessLabels {
    outcome: &'static str,
}

impl Gauges {
    fn register(registry: &mut Registry) -> Self {
        let gauges = Gauges::default();
        registry.register(
            "waterline_nodes_known",
            "Nodes the collector holds",
            gauges.nodes.clone(),
        );
        registry.register(
            "waterline_ledger_entries",
            "Placements in the ledger",
            gauges.ledger_entries.clone(),
        );
        registry.register(
            "waterline_watch_subscribers",
            "Scorers streaming WatchNodes",
            gauges.subscribers.clone(),
        );
        registry.register(
            "waterline_collector_provisional_guesses",
            "Provisional guesses (the extender's Reserve at prioritize) by what became of them: \
             confirmed (placed on the guessed node), moved (placed on another), expired",
            gauges.guesses.clone(),
        );
        gauges
    }

    /// Brings the guess counters up to `now` from `before` (both `ClusterState::guesses`).
    fn count_guesses(&self, before: GuessTally, now: GuessTally) {
        for (outcome, then, now) in [
            ("confirmed", before.confirmed, now.confirmed),
            ("moved", before.moved, now.moved),
            ("expired", before.expired, now.expired),
        ] {
            self.guesses.get_or_create(&GuessLabels { outcome }).inc_by(now.saturating_sub(then));
        }
    }
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    logging::init(args.common.log_format);
    let policy = waterline_runtime::policy::load_or_default(args.policy.as_deref())?;

    let mut registry = Registry::default();
    let rpc =
        RpcMetrics::register(&mut registry, "waterline_collector_grpc", "collector gRPC request");
    let reload_metrics = ReloadMetrics::register(&mut registry);
    let gauges = Gauges::register(&mut registry);
    let prometheus_metrics = prometheus::SourceMetrics::register(&mut registry);
    let metrics_server_config = args.metrics_server_config();
    let metrics_server_metrics = (metrics_server_config.mode != MetricsServerMode::Off)
        .then(|| MetricsServerMetrics::register(&mut registry));
    let shadow_metrics = args.shadow.shadow.then(|| ShadowMetrics::register(&mut registry));
    let load_metrics = (!args.predicted_load_interval.is_zero())
        .then(|| predicted_load::LoadMetrics::register(&mut registry));
    // The learner joins Prometheus' per-pod series with the pod watch's pods: it needs both.
    let learning = args.prometheus.prometheus_url.is_some() && args.kube_mode() != KubeMode::Off;
    let learn_metrics = learning.then(|| LearnMetrics::register(&mut registry));
    let running = learning.then(RunningPods::default);
    let limits = Limits::register(&mut registry, &args.limits, &[WATCH_NODES_PATH]);
    let tls = https::listener_config(&args.common, &TlsMetrics::register(&mut registry))?;
    let admin = Admin::new(registry).with_tls(https::admin_config(&args.common, &tls));

    // Kubernetes nodes and their addresses, for mapping series to nodes; empty (identity)
    // unless a source or --node-map fills it.
    let directory = NodeDirectory::default();
    if let Some(path) = &args.node_map {
        let count = directory.load_file(path).map_err(|e| anyhow::anyhow!("--node-map {e}"))?;
        tracing::info!(nodes = count, path = %path.display(), "node address map loaded");
    }

    let deltas = Deltas::default();
    let state = ClusterState::new(std::sync::Arc::new(deltas.clone()));
    match (&args.static_file, args.synthetic_nodes) {
        (Some(path), _) => {
            static_file::load(path, &state)
                .map_err(|e| anyhow::anyhow!("--static {}: {e}", path.display()))?;
            let span = tracing::info_span!("static_file", path = %path.display());
            tokio::spawn(
                static_file::watch(
                    path.clone(),
                    state.clone(),
                    Duration::from_secs(1),
                    Duration::from_secs(10),
                )
                .instrument(span),
            );
        }
        (None, Some(count)) => {
            let mut cluster = synthetic::Synthetic::new(count, args.synthetic_seed);
            state.replace_nodes(cluster.sample(&policy.get(), UnixMillis::now()));
            tracing::info!(nodes = count, "synthetic cluster generated");
            let span = tracing::info_span!("synthetic", nodes = count);
            tokio::spawn(
                synthetic::run(cluster, state.clone(), policy.clone(), args.synthetic_interval)
                    .instrument(span),
            );
        }
        (None, None)
            if args.prometheus.prometheus_url.is_some() || args.kube_mode() != KubeMode::Off => {}
        (None, None) => {
            tracing::warn!(
                "no node source (--static or --synthetic-nodes): serving an empty cluster"
            );
        }
    }
    // Attached before any watch starts, so the judge sees every change.
    let shadow = match shadow_metrics {
        Some(metrics) => {
            if args.kube_mode() == KubeMode::Off {
                tracing::warn!("--shadow without the Kubernetes pod watch: no bind will be judged");
            }
            Some(shadow::start(&args.shadow, &state, policy.clone(), metrics)?)
        }
        None => None,
    };
    let (decisions, filter, view) = match shadow {
        Some((decisions, filter, view)) => (Some(decisions), Some(filter), Some(view)),
        None => (None, None, None),
    };
    // Before Prometheus, so the node watch's addresses are there as early as possible.
    let (pods_synced, kube_client) =
        match start_kube(&args, &state, &policy, &directory, filter, running.clone()).await? {
            Some((synced, client)) => (Some(synced), Some(client)),
            None => (None, None),
        };
    // Capacity comes from the Kubernetes node watch when it runs (allocatable), else from
    // Prometheus (node-exporter), unless --prometheus-capacity says otherwise.
    let kube_capacity = pods_synced.is_some() && !args.owns_nodes();
    let prometheus_metrics_for_metrics_server = prometheus_metrics.clone();
    if let Some(config) = args.prometheus.config(kube_capacity) {
        // Returns once every first query was attempted (bounded by the query timeout).
        let client = prometheus::start(
            config,
            state.clone(),
            policy.clone(),
            directory.clone(),
            prometheus_metrics.clone(),
        )
        .await
        .map_err(|e| anyhow::anyhow!("Prometheus source: {e}"))?;
        // Without the pod watch (Kubernetes turned out unavailable) no pod is known.
        if let (Some(metrics), Some(running), Some(synced)) =
            (learn_metrics, running, pods_synced.clone())
        {
            let span = tracing::info_span!("learn");
            let learner =
                learn::run(client, state.clone(), policy.clone(), running, metrics, Some(synced));
            tokio::spawn(learner.instrument(span));
            tracing::info!("learning each workload's usage from Prometheus (estimator.learn)");
        }
    }
    // metrics-server is read through the API server, so only with a Kubernetes client
    // (`--metrics-server` turns Kubernetes on; `Auto` needs a configuration to be found).
    if let (Some(metrics), Some(client)) = (metrics_server_metrics, kube_client) {
        // Returns once the first list was attempted (bounded by its timeout).
        metrics_server::start(
            metrics_server_config,
            client,
            state.clone(),
            policy.clone(),
            directory.clone(),
            metrics,
            prometheus_metrics_for_metrics_server,
        )
        .await;
    }
    // The first round of every source has run (or failed) by now; the pod list may still
    // be on its way.
    match pods_synced {
        Some(synced) => {
            let span = tracing::info_span!("readiness");
            tokio::spawn(
                ready_after_pod_list(admin.clone(), synced, KUBE_READY_WAIT).instrument(span),
            );
        }
        None => admin.set_ready(true),
    }

    waterline_runtime::policy::spawn_reload(args.policy.clone(), policy.clone(), reload_metrics);
    if let Some(metrics) = load_metrics {
        let interval = args.predicted_load_interval;
        let span = tracing::info_span!("predicted_load", interval_secs = interval.as_secs_f64());
        // One standing snapshot, never a copy per refresh: the judge's view with shadow mode
        // on, else one followed for this.
        let view = match view {
            Some(view) => view,
            None => {
                let queue = args.shadow.shadow_queue as usize;
                shadow::follow(&state, queue, metrics.view_resyncs.clone())?
            }
        };
        let source = predicted_load::Source::Shared(view);
        tokio::spawn(
            predicted_load::run(source, policy.clone(), metrics, interval).instrument(span),
        );
    }
    let span = tracing::info_span!("maintain");
    tokio::spawn(maintain(state.clone(), policy.clone(), gauges).instrument(span));

    let (health, router) = grpc::router_with_health(&limits)?;
    health.set_serving::<CollectorServiceServer<Collector>>().await;
    let service =
        CollectorServiceServer::new(Collector { state, deltas, policy, rpc, shadow: decisions })
            .max_decoding_message_size(limits.max_request_bytes());

    tokio::spawn(admin.clone().serve(args.admin_addr, shutdown_signal()));
    grpc::serve(router.add_service(service), args.grpc_addr, tls, "collector").await?;
    Ok(())
}

/// Housekeeping every second: unconfirmed Reserves expire (provisional ones have TTLs of
/// seconds, so a coarser tick would keep a wrong guess on its node noticeably longer; the
/// walk over the ledger costs well under a millisecond), gauges follow the state.
async fn maintain(state: ClusterState, policy: PolicyHandle, gauges: Gauges) {
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    let mut guesses = GuessTally::default();
    loop {
        ticker.tick().await;
        let (at, current) = (UnixMillis::now(), policy.get());
        let pruned = state.prune_unconfirmed(at, current.ledger.reserve_ttl);
        if pruned > 0 {
            tracing::info!(pruned, "unconfirmed reservations expired");
        }
        // Departures leave once no metric counts their credit (docs/design.md#departures).
        let departed = state.prune_departed(at, current.longest_absorb_window());
        if departed > 0 {
            tracing::debug!(departed, "departures absorbed");
        }
        gauges.nodes.set(state.node_count() as i64);
        gauges.ledger_entries.set(state.ledger_len() as i64);
        gauges.subscribers.set(state.subscribers() as i64);
        let now = state.guesses();
        gauges.count_guesses(guesses, now);
        guesses = now;
    }
}

/// Starts the Kubernetes watches when Kubernetes is on; returns the pod watch's "first
/// list is in the ledger" signal and the client (for metrics-server).
async fn start_kube(
    args: &Args,
    state: &ClusterState,
    policy: &PolicyHandle,
    directory: &NodeDirectory,
    shadow: Option<std::sync::Arc<SchedulerFilter>>,
    running: Option<RunningPods>,
) -> anyhow::Result<Option<(tokio::sync::watch::Receiver<bool>, ::kube::Client)>> {
    let client = match args.kube_mode() {
        KubeMode::Off => return Ok(None),
        KubeMode::On => kube_source::client(args.kubeconfig.as_deref()).await?,
        KubeMode::Auto if !kube_source::config_available() => {
            tracing::info!("no Kubernetes configuration found: pod and node watches off");
            return Ok(None);
        }
        KubeMode::Auto => match kube_source::client(None).await {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!(%error, "Kubernetes configuration unusable: watches off");
                return Ok(None);
            }
        },
    };
    let synced = kube_source::spawn_pod_watch(
        client.clone(),
        state.clone(),
        policy.clone(),
        args.kube_watch_timeout,
        shadow,
        running,
    );
    if args.owns_nodes() {
        tracing::info!("watching Kubernetes pods (the static or synthetic source owns nodes)");
    } else {
        // An operator's --node-map wins over the addresses the API server reports.
        let addresses: Option<Box<dyn NodeAddresses>> = match args.node_map {
            Some(_) => None,
            None => {
                // Until the first node list, series map to no node rather than to IP names.
                directory.attach_source();
                Some(Box::new(directory.clone()))
            }
        };
        kube_source::spawn_node_watch(
            client.clone(),
            state.clone(),
            addresses,
            args.kube_watch_timeout,
        );
        tracing::info!("watching Kubernetes pods and nodes");
    }
    Ok(Some((synced, client)))
}

/// Ready once the first pod list is in the ledger, or after `wait` at the latest.
async fn ready_after_pod_list(
    admin: Admin,
    mut synced: tokio::sync::watch::Receiver<bool>,
    wait: Duration,
) {
    if tokio::time::timeout(wait, synced.wait_for(|s| *s)).await.is_err() {
        tracing::warn!(
            wait_secs = wait.as_secs(),
            "no pod list from the API server yet: ready without it (the watch keeps retrying)"
        );
    }
    admin.set_ready(true);
}

impl NodeAddresses for NodeDirectory {
    fn replace(&self, nodes: Vec<(String, Vec<String>)>) {
        NodeDirectory::replace(self, nodes);
    }
    fn upsert(&self, node: &str, addresses: Vec<String>) {
        NodeDirectory::upsert(self, node, addresses);
    }
    fn remove(&self, node: &str) {
        NodeDirectory::remove(self, node);
    }
}
