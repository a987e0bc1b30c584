//! `--metrics-server`: node usage from metrics-server through the API server's aggregation
//! layer, for clusters without Prometheus. One `GET /apis/metrics.k8s.io/v1beta1/nodes` per
//! period whatever the node count; each item (a node's cpu and working-set memory at one
//! time) becomes percent of the node's allocatable (from the node watch) and enters that
//! node's rolling history ([`history`]), from which every policy metric whose query names a
//! derivable recording rule ([`convert::derive`]) is published on its own period, stamped
//! with the node's newest point. Nodes are mapped through the [`NodeDirectory`] as
//! Prometheus series are; health goes to ListNodes and the per-metric `waterline_metric_*`
//! gauges (the `waterline_promql_*` counters stay the Prometheus source's).
//!
//! metrics-server keeps no past, so neither does this source beyond its own memory: a
//! restart starts every history empty (docs/operations.md#metrics-server-instead-of-prometheus).

mod args;
pub mod convert;
pub mod fleet;
pub mod history;
mod metrics;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use ::kube::Client;
use http::Request;
use tokio::sync::oneshot;
use tokio::time::{Instant, MissedTickBehavior};
use tracing::Instrument;
use waterline_core::UnixMillis;
use waterline_core::policy::{MetricSpec, Unit};
use waterline_runtime::policy::PolicyHandle;

pub use self::args::{Config, MetricsServerArgs, MetricsServerMode};
use self::convert::{Derived, NodeMetricsList, derive};
use self::fleet::{Fleet, ListReport};
pub use self::metrics::MetricsServerMetrics;
use crate::node_directory::NodeDirectory;
use crate::sources::prometheus::{SourceMetrics, label};
use crate::state::{ClusterState, MetricHealth};

/// The API group and version read.
pub const GROUP_VERSION: &str = "metrics.k8s.io/v1beta1";
/// The NodeMetrics list.
pub const NODES_PATH: &str = "/apis/metrics.k8s.io/v1beta1/nodes";
/// How often `Auto` asks again whether metrics.k8s.io answers.
const PROBE_PERIOD: Duration = Duration::from_secs(60);
/// Distinct messages remembered for log-once (bounded).
const LOG_ONCE_LIMIT: usize = 10_000;

/// Whether `metrics.k8s.io/v1beta1` serves `nodes` (an APIService is registered and its
/// backend answers discovery).
pub async fn available(client: &Client, timeout: Duration) -> Result<(), String> {
    let resources = tokio::time::timeout(timeout, client.list_api_group_resources(GROUP_VERSION))
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
        .map_err(|e| e.to_string())?;
    if resources.resources.iter().any(|r| r.name == "nodes") {
        Ok(())
    } else {
        Err(format!("{GROUP_VERSION} has no nodes resource"))
    }
}

/// Starts the source: with `On` at once, with `Auto` once metrics.k8s.io answers (asked now,
/// then every minute). Returns once the first list was attempted, or the question answered
/// no, bounded by the timeout, so start-up never hangs on it.
pub async fn start(
    config: Config,
    client: Client,
    state: ClusterState,
    policy: PolicyHandle,
    directory: NodeDirectory,
    metrics: MetricsServerMetrics,
    per_metric: SourceMetrics,
) {
    let poller = Poller {
        client,
        state,
        policy,
        directory,
        metrics,
        per_metric,
        fleet: Fleet::default(),
        published: HashMap::new(),
        health: HashMap::new(),
        last_error: String::new(),
        logged: HashSet::new(),
    };
    let (tx, rx) = oneshot::channel();
    let span = tracing::info_span!("metrics_server");
    match config.mode {
        MetricsServerMode::Off => return,
        MetricsServerMode::On => {
            tracing::info!(period = ?config.period, "metrics-server source started: one NodeMetrics list per period");
            tokio::spawn(poller.run(config, Some(tx)).instrument(span));
        }
        MetricsServerMode::Auto => {
            match available(&poller.client, config.timeout).await {
                Ok(()) => {
                    tracing::info!(
                        period = ?config.period,
                        "no Prometheus URL and {GROUP_VERSION} answers: node usage from metrics-server"
                    );
                    tokio::spawn(poller.run(config, Some(tx)).instrument(span));
                }
                Err(error) => {
                    tracing::info!(
                        %error,
                        "no Prometheus URL and {GROUP_VERSION} does not answer: no node usage until it does (asked every minute)"
                    );
                    tokio::spawn(
                    async move {
                        loop {
                            tokio::time::sleep(PROBE_PERIOD).await;
                            match available(&poller.client, config.timeout).await {
                                Ok(()) => break,
                                Err(error) => tracing::debug!(%error, "metrics.k8s.io still not answering"),
                            }
                        }
                        tracing::info!("{GROUP_VERSION} answers now: node usage from metrics-server");
                        poller.run(config, None).await;
                    }
                    .instrument(span),
                );
                    return;
                }
            }
        }
    }
    let _ = tokio::time::timeout(config.timeout + Duration::from_secs(2), rx).await;
}

struct Poller {
    client: Client,
    state: ClusterState,
    policy: PolicyHandle,
    directory: NodeDirectory,
    metrics: MetricsServerMetrics,
    per_metric: SourceMetrics,
    fleet: Fleet,
    /// When each metric was last published (Unix ms): each on its own period.
    published: HashMap<String, i64>,
    health: HashMap<String, MetricHealth>,
    /// The last list's error, empty after a success (logged on change only).
    last_error: String,
    logged: HashSet<String>,
}

impl Poller {
    async fn run(mut self, config: Config, mut first: Option<oneshot::Sender<()>>) {
        let mut ticker = tokio::time::interval(config.period.max(Duration::from_millis(100)));
        // A list slower than its period delays the next one instead of bunching them up.
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            self.round(config.timeout).await;
            if let Some(tx) = first.take() {
                let _ = tx.send(());
            }
        }
    }

    /// One list, and every due metric published from the histories.
    async fn round(&mut self, timeout: Duration) {
        self.metrics.requests.inc();
        let started = Instant::now();
        let list = fetch(&self.client, timeout).await;
        self.metrics.duration.observe(started.elapsed().as_secs_f64());
        match list {
            Ok(list) => {
                let capacities = self.state.capacities();
                let directory = &self.directory;
                let report =
                    self.fleet.apply(&list.items, &capacities, |name| directory.resolve(name));
                self.account(&report);
                self.publish(&report);
            }
            Err(error) => self.failed(&error),
        }
    }

    fn account(&mut self, report: &ListReport) {
        if !self.last_error.is_empty() {
            tracing::info!("NodeMetrics list works again");
            self.last_error.clear();
        }
        self.metrics.set_up(true);
        for (reason, count) in [
            ("unmapped", report.unmapped.len()),
            ("malformed", report.malformed.len()),
            ("no_allocatable", report.no_allocatable.len()),
        ] {
            self.metrics
                .skipped
                .get_or_create(&metrics::ReasonLabel { reason: reason.into() })
                .set(count as i64);
        }
        self.metrics.history_nodes.set(self.fleet.len() as i64);
        self.metrics.history_bytes.set(self.fleet.bytes() as i64);
        for name in &report.unmapped {
            if first_time(&mut self.logged, format!("unmapped {name}")) {
                tracing::warn!(
                    node = %name,
                    known_nodes = self.directory.len(),
                    "NodeMetrics item names no known node (by name, InternalIP or hostname)"
                );
            }
        }
        for error in &report.malformed {
            if first_time(&mut self.logged, format!("malformed {error}")) {
                tracing::warn!(%error, "NodeMetrics item unreadable; skipped");
            }
        }
        if !report.no_allocatable.is_empty() {
            tracing::debug!(
                nodes = report.no_allocatable.len(),
                "nodes without allocatable yet; their usage waits"
            );
        }
    }

    /// Publishes every metric whose period has passed since it was last published.
    fn publish(&mut self, report: &ListReport) {
        let policy = self.policy.get();
        let now = UnixMillis::now();
        self.published.retain(|name, _| policy.metrics.iter().any(|m| &m.name == name));
        for spec in &policy.metrics {
            let derived = match derivable(spec) {
                Ok(derived) => derived,
                Err(why) => {
                    if first_time(&mut self.logged, format!("underivable {} {why}", spec.name)) {
                        tracing::warn!(metric = %spec.name, error = %why, "policy metric gets no samples from metrics-server");
                    }
                    self.set_failed(&spec.name, why);
                    continue;
                }
            };
            let due =
                self.published.get(&spec.name).is_none_or(|last| now.0 - last >= spec.period.0);
            if !due {
                continue;
            }
            let samples = self.fleet.samples(derived, spec.unit == Unit::Percent);
            self.state.update_metric(&spec.name, &samples);
            self.published.insert(spec.name.clone(), now.0);
            let health = MetricHealth {
                last_success: Some(now),
                last_error: String::new(),
                series: report.items as i64,
                nodes_covered: samples.len() as i64,
            };
            let label = label(&spec.name);
            self.per_metric.last_success.get_or_create(&label).set(now.0 as f64 / 1000.0);
            self.per_metric.last_failed.get_or_create(&label).set(0);
            self.per_metric.series.get_or_create(&label).set(health.series);
            self.per_metric.nodes_covered.get_or_create(&label).set(health.nodes_covered);
            self.per_metric.unmapped.get_or_create(&label).set(report.unmapped.len() as i64);
            self.state.set_metric_health(&spec.name, health.clone());
            self.health.insert(spec.name.clone(), health);
        }
    }

    fn failed(&mut self, error: &str) {
        self.metrics.failures.inc();
        self.metrics.set_up(false);
        if self.last_error != error {
            tracing::warn!(%error, path = NODES_PATH, "NodeMetrics list failed; node usage ages until it works again");
            self.last_error = error.to_owned();
        } else {
            tracing::debug!(%error, "NodeMetrics list failed again");
        }
        let policy = self.policy.get();
        for spec in &policy.metrics {
            let message = match derivable(spec) {
                Ok(_) => format!("metrics-server: {error}"),
                Err(why) => why,
            };
            self.set_failed(&spec.name, message);
        }
    }

    fn set_failed(&mut self, metric: &str, message: String) {
        let health = self.health.entry(metric.to_owned()).or_default();
        health.last_error = message;
        self.per_metric.last_failed.get_or_create(&label(metric)).set(1);
        self.state.set_metric_health(metric, health.clone());
    }
}

/// Whether `key` is logged for the first time (log-once, bounded).
fn first_time(logged: &mut HashSet<String>, key: String) -> bool {
    logged.len() < LOG_ONCE_LIMIT && logged.insert(key)
}

/// What a policy metric reads from the histories; `Err` why it cannot be served.
pub fn derivable(spec: &MetricSpec) -> Result<Derived, String> {
    let derived = derive(&spec.query)?;
    if spec.unit != Unit::Percent {
        return Err(format!(
            "metrics-server values are percent, but metric {} has unit {:?}",
            spec.name, spec.unit
        ));
    }
    Ok(derived)
}

/// One NodeMetrics list, bounded by `timeout`.
async fn fetch(client: &Client, timeout: Duration) -> Result<NodeMetricsList, String> {
    let request = Request::get(NODES_PATH).body(Vec::new()).map_err(|e| e.to_string())?;
    tokio::time::timeout(timeout, client.request::<NodeMetricsList>(request))
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
