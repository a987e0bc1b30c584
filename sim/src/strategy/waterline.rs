//! Waterline itself: core's `Snapshot`, `Ledger` and `engine::filter` / `engine::score`,
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
//! No formula is re-implemented here; the extender path's 0..100 → 0..10 mapping is the
//! extender adapter's (extender/src/mapping.rs), which lives outside core.

use waterline_core::estimate::estimate;
use waterline_core::policy::{Policy, ScoreMapping};
use waterline_core::{Capacity, LedgerEntry, LedgerSource, Millis, Snapshot, UnixMillis, engine};

use super::{Cycle, MetricKind, MetricNeed, NodeView, Path, Resource, Strategy, StrategyError};
use crate::model::SimPod;

pub struct Waterline {
    label: String,
    policy: Policy,
    needs: Vec<MetricNeed>,
    snapshot: Snapshot,
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
        Ok(Waterline {
            label: label.into(),
            policy,
            needs,
            snapshot: Snapshot::default(),
            names: Vec::new(),
        })
    }

    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    fn entry(&self, pod: &SimPod, node: &str, at: UnixMillis, source: LedgerSource) -> LedgerEntry {
        let core_pod = pod.to_core();
        LedgerEntry {
            uid: pod.uid.clone(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            node: node.to_owned(),
            placed_at: at,
            usage: estimate(&self.policy.estimator, &core_pod),
            source,
            labels: self.policy.ledger_labels(core_pod.labels),
        }
    }

    fn candidates(&mut self, nodes: &[NodeView<'_>]) -> &[String] {
        self.names.clear();
        self.names.extend(nodes.iter().map(|n| n.name.to_owned()));
        &self.names
    }
}

/// extender/src/mapping.rs `map_scores`: what kube-scheduler receives from the extender.
fn extender_scores(mapping: ScoreMapping, scores: &[i64]) -> Vec<i64> {
    const MAX: i64 = 10;
    match mapping {
        ScoreMapping::Round => {
            scores.iter().map(|&s| ((s as f64 / 10.0).round() as i64).clamp(0, MAX)).collect()
        }
        ScoreMapping::Rescale => {
            let (Some(&lo), Some(&hi)) = (scores.iter().min(), scores.iter().max()) else {
                return Vec::new();
            };
            if hi == lo {
                return vec![MAX; scores.len()];
            }
            let span = (hi - lo) as f64;
            scores
                .iter()
                .map(|&s| (((s - lo) as f64 * MAX as f64 / span).round() as i64).clamp(0, MAX))
                .collect()
        }
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
        let core_pod = pod.to_core();
        self.candidates(nodes);
        engine::filter(&self.policy, &self.snapshot, &core_pod, &self.names, cycle.now).rejections
    }

    fn score(&mut self, cycle: &Cycle, pod: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64> {
        let core_pod = pod.to_core();
        self.candidates(nodes);
        let outcome =
            engine::score(&self.policy, &self.snapshot, &core_pod, &self.names, cycle.now, false);
        let scores: Vec<i64> = outcome.scores.iter().map(|s| s.score).collect();
        match cycle.path {
            Path::Plugin => scores,
            // kube-scheduler multiplies an extender's 0..10 by its weight (1) and by 10.
            Path::Extender => extender_scores(self.policy.extender_score_mapping, &scores)
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

    #[test]
    fn extender_mapping_matches_the_adapter() {
        assert_eq!(
            extender_scores(ScoreMapping::Round, &[24, 40, 100, 19, 13, 0]),
            [2, 4, 10, 2, 1, 0]
        );
        assert_eq!(extender_scores(ScoreMapping::Rescale, &[50, 50]), [10, 10]);
        assert_eq!(extender_scores(ScoreMapping::Rescale, &[0, 25, 100]), [0, 3, 10]);
    }
}
