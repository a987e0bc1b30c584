//! `--prometheus-url`: every metric of the policy is ONE instant query for the whole
//! cluster, polled on the metric's own period by its own task, so a slow or failing query
//! only ages its own metric. Answers are mapped to nodes through the [`NodeDirectory`] and
//! the policy's node labels, and written with the sample time Prometheus gave them.
//! Optionally two more cluster-wide queries give node capacity (cores, memory).
//!
//! Only `/api/v1/query` is used, so any PromQL endpoint works (Prometheus, Thanos, Mimir,
//! VictoriaMetrics).

pub mod answer;
mod args;
mod client;
mod metrics;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tracing::Instrument;
use waterline_core::UnixMillis;
use waterline_core::policy::{MetricSpec, Unit};
use waterline_core::snapshot::{Capacity, Sample};
use waterline_runtime::policy::PolicyHandle;

use self::answer::{Mapped, QueryError, map_to_nodes};
pub use self::args::{Config, PrometheusArgs};
pub use self::client::{ClientConfig, PromClient, parse_header};
pub use self::metrics::{SourceMetrics, label};
use crate::node_directory::NodeDirectory;
use crate::state::{ClusterState, MetricHealth};

/// Cores per node: one idle-mode counter per CPU (node-exporter).
pub const CPU_CORES_QUERY: &str =
    r#"count by (instance, node) (node_cpu_seconds_total{mode="idle"})"#;
/// Memory per node, bytes (node-exporter).
pub const MEMORY_BYTES_QUERY: &str = "node_memory_MemTotal_bytes";
/// Names under which the capacity queries report their health and request counts.
pub const CAPACITY_CPU: &str = "capacity:cpu";
pub const CAPACITY_MEMORY: &str = "capacity:memory";

/// How often the running metric tasks are compared with the (reloadable) policy.
const POLICY_CHECK: Duration = Duration::from_secs(2);
/// Distinct unmapped label sets remembered for log-once (bounded, so a churning cluster
/// cannot grow it forever).
const UNMAPPED_LOG_LIMIT: usize = 10_000;

struct Shared {
    client: PromClient,
    state: ClusterState,
    policy: PolicyHandle,
    directory: NodeDirectory,
    metrics: SourceMetrics,
    logged_unmapped: Mutex<HashSet<String>>,
}

/// What identifies a running metric task: a change of any of these restarts it (the unit
/// decides whether values are clamped).
type TaskKey = (String, String, Duration, Unit);

fn key(spec: &MetricSpec) -> TaskKey {
    (spec.name.clone(), spec.query.clone(), spec.period.as_std(), spec.unit)
}

/// Starts one task per policy metric (and the capacity task), issues every first query at
/// once, and returns when all of them have been attempted — succeeded or failed — or after
/// the query timeout and a little more, so a dead Prometheus never blocks start-up. Later
/// policy reloads add, restart or stop metric tasks. Returns the client, for the learner.
pub async fn start(
    config: Config,
    state: ClusterState,
    policy: PolicyHandle,
    directory: NodeDirectory,
    metrics: SourceMetrics,
) -> Result<PromClient, String> {
    let client = PromClient::new(&config.client)?;
    let shared = Arc::new(Shared {
        client: client.clone(),
        state,
        policy: policy.clone(),
        directory,
        metrics,
        logged_unmapped: Mutex::new(HashSet::new()),
    });
    let mut first_round = Vec::new();
    let mut tasks = HashMap::new();
    for spec in &policy.get().metrics {
        let (tx, rx) = oneshot::channel();
        first_round.push(rx);
        tasks.insert(spec.name.clone(), (key(spec), spawn_metric(&shared, spec.clone(), Some(tx))));
    }
    if config.capacity {
        let (tx, rx) = oneshot::channel();
        first_round.push(rx);
        let span = tracing::info_span!("promql_capacity");
        tokio::spawn(poll_capacity(shared.clone(), config.capacity_period, tx).instrument(span));
    }
    tracing::info!(
        url = %config.client.url,
        metrics = tasks.len(),
        capacity = config.capacity,
        "Prometheus source started: one query per metric per period"
    );
    let deadline = Instant::now() + config.client.timeout + Duration::from_secs(2);
    for rx in first_round {
        // An error means the task ended (it never does) or the deadline passed: go on.
        let _ = tokio::time::timeout_at(deadline, rx).await;
    }
    tokio::spawn(follow_policy(shared, tasks).instrument(tracing::info_span!("promql_policy")));
    Ok(client)
}

fn spawn_metric(
    shared: &Arc<Shared>,
    spec: MetricSpec,
    first: Option<oneshot::Sender<()>>,
) -> JoinHandle<()> {
    let span = tracing::info_span!("promql", metric = %spec.name);
    tokio::spawn(poll_metric(shared.clone(), spec, first).instrument(span))
}

/// Restarts metric tasks whose name, query or period changed in a reloaded policy.
async fn follow_policy(shared: Arc<Shared>, mut tasks: HashMap<String, (TaskKey, JoinHandle<()>)>) {
    let mut ticker = tokio::time::interval(POLICY_CHECK);
    loop {
        ticker.tick().await;
        let policy = shared.policy.get();
        let wanted: HashMap<&str, &MetricSpec> =
            policy.metrics.iter().map(|m| (m.name.as_str(), m)).collect();
        tasks.retain(|name, (_, handle)| {
            let keep = wanted.contains_key(name.as_str());
            if !keep {
                tracing::info!(metric = %name, "metric left the policy; its queries stop");
                handle.abort();
            }
            keep
        });
        for (name, spec) in wanted {
            match tasks.get(name) {
                Some((running, _)) if *running == key(spec) => {}
                _ => {
                    tracing::info!(metric = %name, query = %spec.query, "metric (re)started by a policy change");
                    let handle = spawn_metric(&shared, spec.clone(), None);
                    if let Some((_, old)) = tasks.insert(name.to_owned(), (key(spec), handle)) {
                        old.abort();
                    }
                }
            }
        }
    }
}

fn ticker(period: Duration) -> tokio::time::Interval {
    let mut ticker = tokio::time::interval(period.max(Duration::from_millis(100)));
    // A query slower than its period delays the next one instead of bunching them up.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker
}

async fn poll_metric(
    shared: Arc<Shared>,
    spec: MetricSpec,
    mut first: Option<oneshot::Sender<()>>,
) {
    let mut health = shared.state.metric_health().remove(&spec.name).unwrap_or_default();
    let mut ticker = ticker(spec.period.as_std());
    loop {
        ticker.tick().await;
        match shared.query(&spec.name, &spec.query).await {
            Ok(series) => {
                let node_labels = shared.policy.get().node_labels.clone();
                // Only a percent metric is clamped to 0..100: ratios, bytes and bytes per
                // second pass through as Prometheus gave them, for the engine's unit.
                let percent = spec.unit == Unit::Percent;
                let mapped = map_to_nodes(series, &node_labels, &shared.directory, percent);
                shared.account(&spec.name, &mapped);
                let samples: BTreeMap<String, Sample> = mapped
                    .values
                    .iter()
                    .map(|(node, (value, at))| (node.clone(), Sample { value: *value, at: *at }))
                    .collect();
                shared.state.update_metric(&spec.name, &samples);
                shared.succeeded(&spec.name, &mut health, &mapped);
            }
            Err(error) => shared.failed(&spec.name, &spec.query, &mut health, &error),
        }
        if let Some(tx) = first.take() {
            let _ = tx.send(());
        }
    }
}

/// Capacity from node-exporter: both queries concurrently, merged per node with what the
/// other one last said, so one failing query does not zero the other resource.
async fn poll_capacity(shared: Arc<Shared>, period: Duration, first: oneshot::Sender<()>) {
    let mut first = Some(first);
    let mut known: BTreeMap<String, Capacity> = BTreeMap::new();
    let mut cpu_health = MetricHealth::default();
    let mut memory_health = MetricHealth::default();
    let mut ticker = ticker(period);
    loop {
        ticker.tick().await;
        let (cpu, memory) = tokio::join!(
            shared.query(CAPACITY_CPU, CPU_CORES_QUERY),
            shared.query(CAPACITY_MEMORY, MEMORY_BYTES_QUERY)
        );
        let node_labels = shared.policy.get().node_labels.clone();
        let mut changed = false;
        for (name, query, result, health) in [
            (CAPACITY_CPU, CPU_CORES_QUERY, cpu, &mut cpu_health),
            (CAPACITY_MEMORY, MEMORY_BYTES_QUERY, memory, &mut memory_health),
        ] {
            match result {
                Ok(series) => {
                    let mapped = map_to_nodes(series, &node_labels, &shared.directory, false);
                    shared.account(name, &mapped);
                    for (node, (value, _)) in &mapped.values {
                        let capacity = known.entry(node.clone()).or_default();
                        if name == CAPACITY_CPU {
                            capacity.cpu_millis = (value * 1000.0).round() as i64;
                        } else {
                            capacity.memory_bytes = value.round() as i64;
                        }
                    }
                    changed = true;
                    shared.succeeded(name, health, &mapped);
                }
                Err(error) => shared.failed(name, query, health, &error),
            }
        }
        if changed {
            shared.state.update_capacity(&known);
        }
        if let Some(tx) = first.take() {
            let _ = tx.send(());
        }
    }
}

impl Shared {
    async fn query(&self, metric: &str, promql: &str) -> Result<Vec<answer::Series>, QueryError> {
        let label = label(metric);
        self.metrics.requests.get_or_create(&label).inc();
        let started = Instant::now();
        let result = self.client.query(promql).await;
        self.metrics.duration.get_or_create(&label).observe(started.elapsed().as_secs_f64());
        result
    }

    /// Counts what the answer had besides good samples, and logs each unmapped label set
    /// once.
    fn account(&self, metric: &str, mapped: &Mapped) {
        let label = label(metric);
        self.metrics.unmapped.get_or_create(&label).set(mapped.unmapped.len() as i64);
        if mapped.dropped > 0 {
            self.metrics.dropped.get_or_create(&label).inc_by(mapped.dropped as u64);
            tracing::debug!(dropped = mapped.dropped, "samples with NaN, Inf or no number dropped");
        }
        if mapped.clamped > 0 {
            self.metrics.clamped.get_or_create(&label).inc_by(mapped.clamped as u64);
            tracing::debug!(clamped = mapped.clamped, "percent samples outside 0..100 clamped");
        }
        if mapped.unmapped.is_empty() {
            return;
        }
        let mut logged = self.logged_unmapped.lock().unwrap_or_else(|p| p.into_inner());
        for labels in &mapped.unmapped {
            let text = format!("{labels:?}");
            if logged.len() < UNMAPPED_LOG_LIMIT && logged.insert(format!("{metric} {text}")) {
                tracing::warn!(
                    metric,
                    labels = %text,
                    known_nodes = self.directory.len(),
                    "series maps to no node: none of the policy's nodeMapping labels names a known node (by name, InternalIP or hostname)"
                );
            }
        }
    }

    fn succeeded(&self, metric: &str, health: &mut MetricHealth, mapped: &Mapped) {
        if !health.last_error.is_empty() {
            tracing::info!(metric, "query works again");
        }
        let now = UnixMillis::now();
        *health = MetricHealth {
            last_success: Some(now),
            last_error: String::new(),
            series: mapped.series as i64,
            nodes_covered: mapped.values.len() as i64,
        };
        let label = label(metric);
        self.metrics.last_success.get_or_create(&label).set(now.0 as f64 / 1000.0);
        self.metrics.last_failed.get_or_create(&label).set(0);
        self.metrics.series.get_or_create(&label).set(health.series);
        self.metrics.nodes_covered.get_or_create(&label).set(health.nodes_covered);
        self.state.set_metric_health(metric, health.clone());
    }

    fn failed(&self, metric: &str, query: &str, health: &mut MetricHealth, error: &QueryError) {
        let message = error.to_string();
        if health.last_error != message {
            tracing::warn!(
                metric,
                query,
                %error,
                "PromQL query failed; this metric's samples age until it works again"
            );
        } else {
            tracing::debug!(metric, %error, "PromQL query failed again");
        }
        health.last_error = message;
        let label = label(metric);
        self.metrics.failures.get_or_create(&label).inc();
        self.metrics.last_failed.get_or_create(&label).set(1);
        self.state.set_metric_health(metric, health.clone());
    }
}
