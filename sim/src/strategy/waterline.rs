//! Waterline itself: core's `Snapshot`, `Ledger`, prepared table and `engine::evaluate`,
//! fed the way the scorer feeds them (scorer/src/store.rs, scorer/src/service.rs):
//!
//! - a poll replaces a node's samples and capacity (`Snapshot::upsert_node`, what the
//!   scorer's `apply_node` does with a WatchNodes message);
//! - Reserve estimates the pod with the policy's estimator, keeps only the labels the
//!   policy reads and applies a `LedgerSource::Reserve` entry placed now
//!   (`Scorer::reserve_now`);
//! - the pod watch applies a `LedgerSource::Watch` entry placed at the PodScheduled time
//!   (collector/src/sources/kube/pods.rs `view`), which the ledger merges with a Reserve;
//! - a deletion removes the entry.
//!
//! The filter phase asks the engine's Evaluate, the score phase its Score of the nodes that
//! passed every filter, over a table kept up to date as the scorer keeps its own
//! (`Prepared::update` after every change). No formula is re-implemented here: the ledger
//! entry is core's `placement`, the extender path's 0..100 → 0..10 mapping core's
//! `extender_score`, which the extender adapter answers with.

use waterline_core::engine::{self, Ask, Candidates, Prepared};
use waterline_core::extender_score::map_scores;
use waterline_core::placement::placement;
use waterline_core::policy::Policy;
use waterline_core::{Capacity, LedgerEntry, LedgerSource, Millis, Snapshot, UnixMillis};

use super::{Cycle, MetricKind, MetricNeed, NodeView, Path, Resource, Strategy, StrategyError};
use crate::model::SimPod;

pub struct Waterline {
    label: String,
    policy: Policy,
    needs: Vec<MetricNeed>,
    snapshot: Snapshot,
    /// The snapshot's prepared rows, brought up to date before each question.
    table: Prepared,
    names: Vec<String>,
}

/// The pipeline kind of a policy metric, from the recording-rule naming of deploy/prometheus
/// (`…avg5m`, `…max_avg1h`, `…max_avg1d`) in its query or name.
fn kind_of(name: &str, query: &str) -> Option<MetricKind> {
    let five = Millis::from_mins(5);
    let text = format!("{name} {query}").replace('_', "");
    if text.contains("maxavg1d") {
        Some(MetricKind::MaxOfAvg { window: five, over: Millis::from_mins(24 * 60) })
    } else if text.contains("maxavg1h") {
        Some(MetricKind::MaxOfAvg { window: five, over: Millis::from_mins(60) })
    } else if text.contains("avg5m") {
        Some(MetricKind::Avg { window: five })
    } else {
        None
    }
}

impl Waterline {
    pub fn new(label: &str, policy: Policy) -> Result<Self, StrategyError> {
        let mut needs = Vec::with_capacity(policy.metrics.len());
        for m in &policy.metrics {
            let error = |message: String| StrategyError::Policy { label: label.into(), message };
            let resource = match m.resource {
                waterline_core::policy::Resource::Cpu => Resource::Cpu,
                waterline_core::policy::Resource::Memory => Resource::Memory,
                waterline_core::policy::Resource::Other => {
                    return Err(error(format!(
                        "metric {}: the simulator models cpu and memory only",
                        m.name
                    )));
                }
            };
            let kind = kind_of(&m.name, &m.query).ok_or_else(|| {
                error(format!(
                    "metric {}: the simulator models 5 m averages (…avg5m) and their 1 h / 1 d \
                     maxima (…max_avg1h, …max_avg1d); name or query must say which",
                    m.name
                ))
            })?;
            needs.push(MetricNeed { name: m.name.clone(), resource, kind, poll: m.period });
        }
        let mut snapshot = Snapshot::default();
        snapshot.track_changes();
        Ok(Waterline {
            label: label.into(),
            policy,
            needs,
            snapshot,
            table: Prepared::default(),
            names: Vec::new(),
        })
    }

    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    fn entry(&self, pod: &SimPod, node: &str, at: UnixMillis, source: LedgerSource) -> LedgerEntry {
        // A simulated pod always has a uid (namespace/name) and a node.
        placement(&self.policy, pod.to_core(), node, at, source)
            .expect("a simulated placement has a uid and a node")
    }

    /// `ask` for `pod` on `nodes`, over the table brought up to date first.
    fn evaluate(
        &mut self,
        now: UnixMillis,
        pod: &SimPod,
        nodes: &[NodeView<'_>],
        ask: Ask,
    ) -> engine::Evaluation {
        self.table.update(&self.policy, &mut self.snapshot, now);
        self.names.clear();
        self.names.extend(nodes.iter().map(|n| n.name.to_owned()));
        let pod = pod.to_core();
        let candidates = Candidates::Names(&self.names);
        engine::evaluate(
            &self.policy,
            &self.snapshot,
            Some(&self.table),
            &pod,
            ask,
            candidates,
            now,
        )
    }
}

impl Strategy for Waterline {
    fn label(&self) -> &str {
        &self.label
    }

    fn metrics(&self) -> Vec<MetricNeed> {
        self.needs.clone()
    }

    fn filter(
        &mut self,
        cycle: &Cycle,
        pod: &SimPod,
        nodes: &[NodeView<'_>],
    ) -> Vec<Option<String>> {
        let evaluation = self.evaluate(cycle.now, pod, nodes, Ask::Evaluate);
        evaluation.verdicts().into_iter().map(|v| v.map(str::to_owned)).collect()
    }

    fn score(&mut self, cycle: &Cycle, pod: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64> {
        let evaluation = self.evaluate(cycle.now, pod, nodes, Ask::Score { explain: false });
        let scores: Vec<i64> = evaluation.scores.iter().map(|s| s.unwrap_or_default()).collect();
        match cycle.path {
            Path::Plugin => scores,
            // kube-scheduler multiplies an extender's 0..10 by its weight (1) and by 10.
            Path::Extender => map_scores(self.policy.extender_score_mapping, &scores)
                .into_iter()
                .map(|s| s * 10)
                .collect(),
        }
    }

    fn on_metrics(&mut self, _now: UnixMillis, nodes: &[NodeView<'_>]) {
        for node in nodes {
            let capacity = Capacity {
                cpu_millis: node.allocatable.cpu_millis,
                memory_bytes: node.allocatable.memory_bytes,
            };
            let samples = self
                .needs
                .iter()
                .zip(node.metrics)
                .filter_map(|(need, sample)| sample.map(|s| (need.name.as_str(), s)));
            self.snapshot.upsert_node(node.name, capacity, samples);
        }
    }

    fn on_reserve(&mut self, now: UnixMillis, pod: &SimPod, node: &str) {
        let entry = self.entry(pod, node, now, LedgerSource::Reserve);
        self.snapshot.apply_placement(entry);
    }

    fn on_bound(&mut self, _now: UnixMillis, pod: &SimPod, node: &str, bound_at: UnixMillis) {
        let entry = self.entry(pod, node, bound_at, LedgerSource::Watch);
        self.snapshot.apply_placement(entry);
    }

    fn on_deleted(&mut self, _now: UnixMillis, pod: &SimPod, _node: &str) {
        self.snapshot.delete_placement(&pod.uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_policy_maps_to_the_six_pipeline_metrics() {
        let w = Waterline::new("w", Policy::default()).unwrap();
        let kinds: Vec<MetricKind> = w.metrics().iter().map(|m| m.kind).collect();
        let five = Millis::from_mins(5);
        let hour = MetricKind::MaxOfAvg { window: five, over: Millis::from_mins(60) };
        let day = MetricKind::MaxOfAvg { window: five, over: Millis::from_mins(1440) };
        let avg = MetricKind::Avg { window: five };
        assert_eq!(kinds, vec![avg, hour, day, avg, hour, day]);
        assert_eq!(w.metrics()[0].poll, Millis::from_secs(30));
    }
}
