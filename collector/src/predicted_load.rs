//! The predicted load the scorers score by, on the collector's `/metrics`, for a
//! descheduler (docs/operations.md#rebalancing): per node and policy metric,
//! `waterline_node_predicted_utilisation` = (observed + ledger) / 100, the fraction of the
//! node that metric is predicted to use — the engine's own terms, never a formula of its own.
//!
//! **Only fresh values.** A metric whose sample is missing, older than its `maxAge`, or whose
//! fleet breaker is open has no series at all: its label set is removed from the family, not
//! set to 0, so a rule or a descheduler reading it sees nothing rather than an idle node.
//!
//! **No incoming pod.** The values are `engine::predicted_loads` (core/src/engine/predicted.rs):
//! `observed + ledger` without the term `incoming`, so what a node shows does not depend on a
//! pod that does not exist; the simulator's descheduler signal reads the same function.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::time::Instant;
use waterline_core::engine;
use waterline_core::policy::Resource;
use waterline_core::{Policy, Snapshot, UnixMillis};
use waterline_runtime::policy::PolicyHandle;

use crate::shadow::view::SharedView;
use crate::state::ClusterState;

/// One series: a node, a policy metric and the resource it measures.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct LoadLabels {
    pub node: String,
    pub metric: String,
    /// `cpu`, `memory` or `other` (the metric's `resource:`).
    pub resource: &'static str,
}

fn resource_label(resource: Resource) -> &'static str {
    match resource {
        Resource::Cpu => "cpu",
        Resource::Memory => "memory",
        Resource::Other => "other",
    }
}

/// Every fresh (node, metric) of `snapshot` with its predicted fraction, observed + ledger,
/// in node then policy order (`engine::predicted_loads`, labelled).
pub fn predicted_loads(
    policy: &Policy,
    snapshot: &Snapshot,
    now: UnixMillis,
) -> Vec<(LoadLabels, f64)> {
    engine::predicted_loads(policy, snapshot, now)
        .into_iter()
        .map(|load| {
            let spec = &policy.metrics[load.metric];
            let labels = LoadLabels {
                node: load.node.to_owned(),
                metric: spec.name.clone(),
                resource: resource_label(spec.resource),
            };
            (labels, load.fraction)
        })
        .collect()
}

/// The `waterline_node_predicted_utilisation` family and its refresh's duration.
#[derive(Clone)]
pub struct LoadMetrics {
    predicted: Family<LoadLabels, Gauge<f64, AtomicU64>>,
    refresh: Histogram,
    /// Full copies the followed view took after it missed changes (shadow mode off:
    /// `shadow::follow`).
    pub view_resyncs: Counter,
}

impl LoadMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = LoadMetrics {
            predicted: Family::default(),
            // 100 µs .. ~4 s: 5,000 nodes × 6 metrics take a few milliseconds.
            refresh: Histogram::new(exponential_buckets(0.0001, 2.5, 12)),
            view_resyncs: Counter::default(),
        };
        registry.register(
            "waterline_node_predicted_utilisation",
            "Predicted utilisation the scorers score by (observed + ledger, a 0..1 fraction of allocatable), per node and policy metric; absent while the metric is stale",
            m.predicted.clone(),
        );
        registry.register(
            "waterline_predicted_load_refresh_duration_seconds",
            "Time to recompute waterline_node_predicted_utilisation from the collector's state",
            m.refresh.clone(),
        );
        registry.register(
            "waterline_predicted_load_view_resyncs",
            "Full copies of the state the predicted-load view took after its queue overflowed (shadow mode off; with it on see waterline_shadow_resyncs_total)",
            m.view_resyncs.clone(),
        );
        m
    }
}

/// What the family holds, to remove the series that went stale: per node, which metrics
/// it has a series for (the family holds the labels themselves; a second set of them cost
/// ~4 MiB at 5,000 nodes × 6 metrics).
#[derive(Default)]
pub struct Published {
    /// node → indexes into `metrics`.
    nodes: HashMap<String, Vec<usize>>,
    /// Each metric named in the last refresh, with its resource label.
    metrics: Vec<(String, &'static str)>,
}

impl Published {
    /// Sets every fresh series of `loads` and removes every earlier one not among them.
    pub fn apply(&mut self, metrics: &LoadMetrics, loads: Vec<(LoadLabels, f64)>) {
        let mut names: Vec<(String, &'static str)> = Vec::new();
        let mut nodes: HashMap<String, Vec<usize>> = HashMap::with_capacity(self.nodes.len());
        for (labels, value) in loads {
            metrics.predicted.get_or_create(&labels).set(value);
            let index = match names.iter().position(|(name, _)| *name == labels.metric) {
                Some(index) => index,
                None => {
                    names.push((labels.metric, labels.resource));
                    names.len() - 1
                }
            };
            nodes.entry(labels.node).or_default().push(index);
        }
        for (node, before) in &self.nodes {
            let now = nodes.get(node).map(Vec::as_slice).unwrap_or_default();
            for &index in before {
                let (metric, resource) = &self.metrics[index];
                if !now.iter().any(|&i| names[i].0 == *metric && names[i].1 == *resource) {
                    let labels =
                        LoadLabels { node: node.clone(), metric: metric.clone(), resource };
                    metrics.predicted.remove(&labels);
                }
            }
        }
        self.nodes = nodes;
        self.metrics = names;
    }
}

/// Where the values come from.
#[derive(Clone)]
pub enum Source {
    /// A copy of the state, made for each refresh (a full delta, then a snapshot of it:
    /// two transient copies of every node and ledger entry, 41 MiB at the peak with 5,000
    /// nodes and 50,000 entries, BENCHMARKS.md). The reference the view is tested against.
    Copy(ClusterState),
    /// The state as one standing snapshot, read in place (`shadow/view.rs`): the shadow
    /// judge's view when shadow mode is on, else one followed for this alone
    /// (`shadow::follow`).
    Shared(SharedView),
}

impl Source {
    /// The state's predicted loads at `now`.
    pub fn loads(&self, policy: &Policy, now: UnixMillis) -> Vec<(LoadLabels, f64)> {
        match self {
            Source::Copy(state) => {
                let mut snapshot = Snapshot::default();
                state.full_delta().apply_to(&mut snapshot);
                predicted_loads(policy, &snapshot, now)
            }
            Source::Shared(view) => view.read(|snapshot| predicted_loads(policy, snapshot, now)),
        }
    }
}

/// Recomputes the family every `interval` from `source`.
pub async fn run(source: Source, policy: PolicyHandle, metrics: LoadMetrics, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut published = Published::default();
    loop {
        ticker.tick().await;
        let started = Instant::now();
        let loads = source.loads(&policy.get(), UnixMillis::now());
        let series = loads.len();
        published.apply(&metrics, loads);
        let seconds = started.elapsed().as_secs_f64();
        metrics.refresh.observe(seconds);
        tracing::debug!(series, seconds, "predicted load published");
    }
}

#[cfg(test)]
mod tests;
