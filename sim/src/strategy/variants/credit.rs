//! Prototype of a **deletion credit** for waterline's ledger (a core feature proposal, not
//! core's behaviour): the ledger counts a new pod until the metrics show it; nothing counts a
//! deleted pod *out* until the metrics stop showing it. During a rollout the old pods' usage
//! stays in the 5 m average for minutes and in the 1 h maximum for an hour while the ledger
//! already holds the new pods, so every node looks fuller than it is and the filter leaves
//! pods pending.
//!
//! The credit: when a pod that an average had absorbed is deleted, its estimate (the
//! policy's estimator) is taken off each average of its resource until the average can no
//! longer hold it, `window + period + ledger.lag` after the deletion. A pod deleted before
//! the average absorbed it is already handled by the ledger (its entry goes with it) and
//! gets no credit. The maxima get none: a maximum over an hour or a day holds a deleted
//! pod only if it ran at the peak, and crediting every pod deleted within the span (a first
//! version did) under-reads a churning node by many pods — measured: `diurnal-day`'s
//! overload ×2.7. Here the credit is applied to the samples before core sees them; in core it
//! would be a negative ledger entry.

use std::collections::HashMap;

use waterline_core::estimate::estimate;
use waterline_core::{Millis, Policy, Sample, UnixMillis};

use crate::model::SimPod;
use crate::strategy::{Cycle, MetricKind, MetricNeed, NodeView, Path, Resource, Strategy};

struct Deleted {
    at: UnixMillis,
    bound_at: UnixMillis,
    cpu_millis: i64,
    memory_bytes: i64,
}

pub struct DeletionCredit {
    label: String,
    inner: Box<dyn Strategy>,
    policy: Policy,
    needs: Vec<MetricNeed>,
    bound: HashMap<String, UnixMillis>,
    deleted: HashMap<String, Vec<Deleted>>,
}

impl DeletionCredit {
    pub fn new(label: &str, inner: Box<dyn Strategy>, policy: Policy) -> Self {
        let needs = inner.metrics();
        DeletionCredit {
            label: label.into(),
            inner,
            policy,
            needs,
            bound: HashMap::new(),
            deleted: HashMap::new(),
        }
    }

    /// (how long after its start a pod is in metric `n`, how long after its deletion).
    fn spans(&self, n: usize) -> (Millis, Millis) {
        let need = &self.needs[n];
        let lag = self.policy.ledger.lag.0 + need.poll.0;
        match need.kind {
            MetricKind::Avg { window } => (Millis(window.0 + lag), Millis(window.0 + lag)),
            _ => (Millis(0), Millis(0)),
        }
    }

    /// Node `node`'s samples less the credit of the pods deleted from it.
    fn credited(&self, now: UnixMillis, node: &NodeView<'_>) -> Vec<Option<Sample>> {
        let gone = self.deleted.get(node.name).map(Vec::as_slice).unwrap_or(&[]);
        node.metrics
            .iter()
            .enumerate()
            .map(|(n, sample)| {
                let mut s = (*sample)?;
                let (absorbed_after, held_for) = self.spans(n);
                let credited = gone.iter().filter(|d| {
                    d.at.0 - d.bound_at.0 >= absorbed_after.0 && now.0 - d.at.0 < held_for.0
                });
                let (amount, capacity) = match self.needs[n].resource {
                    Resource::Cpu => {
                        (credited.map(|d| d.cpu_millis).sum::<i64>(), node.allocatable.cpu_millis)
                    }
                    Resource::Memory => (
                        credited.map(|d| d.memory_bytes).sum::<i64>(),
                        node.allocatable.memory_bytes,
                    ),
                };
                s.value = (s.value - amount as f64 * 100.0 / capacity.max(1) as f64).max(0.0);
                Some(s)
            })
            .collect()
    }
}

impl Strategy for DeletionCredit {
    fn label(&self) -> &str {
        &self.label
    }
    fn path(&self, scenario: Path) -> Path {
        self.inner.path(scenario)
    }
    fn metrics(&self) -> Vec<MetricNeed> {
        self.needs.clone()
    }
    fn filter(&mut self, c: &Cycle, p: &SimPod, n: &[NodeView<'_>]) -> Vec<Option<String>> {
        self.inner.filter(c, p, n)
    }
    fn score(&mut self, c: &Cycle, p: &SimPod, n: &[NodeView<'_>]) -> Vec<i64> {
        self.inner.score(c, p, n)
    }
    fn on_metrics(&mut self, now: UnixMillis, nodes: &[NodeView<'_>]) {
        let longest = (0..self.needs.len()).map(|n| self.spans(n).1.0).max().unwrap_or(0);
        for list in self.deleted.values_mut() {
            list.retain(|d| now.0 - d.at.0 < longest);
        }
        let samples: Vec<Vec<Option<Sample>>> =
            nodes.iter().map(|n| self.credited(now, n)).collect();
        let views: Vec<NodeView<'_>> =
            nodes.iter().zip(&samples).map(|(n, s)| NodeView { metrics: s, ..*n }).collect();
        self.inner.on_metrics(now, &views)
    }
    fn on_reserve(&mut self, now: UnixMillis, p: &SimPod, node: &str) {
        self.inner.on_reserve(now, p, node)
    }
    fn on_bound(&mut self, now: UnixMillis, p: &SimPod, node: &str, at: UnixMillis) {
        self.bound.insert(p.uid.clone(), at);
        self.inner.on_bound(now, p, node, at)
    }
    fn on_deleted(&mut self, now: UnixMillis, p: &SimPod, node: &str) {
        if let Some(bound_at) = self.bound.remove(&p.uid) {
            let usage = estimate(&self.policy.estimator, &p.to_core());
            self.deleted.entry(node.to_owned()).or_default().push(Deleted {
                at: now,
                bound_at,
                cpu_millis: usage.cpu_millis,
                memory_bytes: usage.memory_bytes,
            });
        }
        self.inner.on_deleted(now, p, node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Resources;

    /// Records the cpu sample it is given.
    struct Seen(std::rc::Rc<std::cell::RefCell<Vec<f64>>>);

    impl Strategy for Seen {
        fn label(&self) -> &str {
            "seen"
        }
        fn metrics(&self) -> Vec<MetricNeed> {
            vec![MetricNeed {
                name: "cpu".into(),
                resource: Resource::Cpu,
                kind: MetricKind::Avg { window: Millis::from_mins(5) },
                poll: Millis::from_secs(30),
            }]
        }
        fn score(&mut self, _: &Cycle, _: &SimPod, n: &[NodeView<'_>]) -> Vec<i64> {
            vec![0; n.len()]
        }
        fn on_metrics(&mut self, _: UnixMillis, n: &[NodeView<'_>]) {
            self.0.borrow_mut().push(n[0].metrics[0].unwrap().value);
        }
    }

    #[test]
    fn a_deleted_absorbed_pod_is_credited_until_the_average_forgets_it() {
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut c = DeletionCredit::new("c", Box::new(Seen(seen.clone())), Policy::default());
        let pod = SimPod {
            uid: "u".into(),
            namespace: "default".into(),
            name: "p".into(),
            labels: Default::default(),
            owner_kind: "ReplicaSet".into(),
            controller: None,
            requests: Resources::new(2000, 1 << 30),
            limits: Resources::default(),
        };
        let min = |m: i64| UnixMillis(m * 60_000);
        // bound at 0, deleted at 20 m: absorbed (20 m ≥ 5 m + 30 s + 90 s = 7 m)
        c.on_bound(min(0), &pod, "a", min(0));
        c.on_deleted(min(20), &pod, "a");
        let sample = [Some(Sample { value: 50.0, at: min(21) })];
        let view = NodeView {
            name: "a",
            allocatable: Resources::new(10_000, 1 << 34),
            requested: Resources::default(),
            non_zero_requested: Resources::default(),
            controller_pods: 0,
            metrics: &sample,
            pods: &[],
        };
        // estimate 2000 m × 0.85 = 1700 m of 10 cores = 17 pp: 50 − 17 = 33 at 21 m; at
        // 20 m + 7 m the average no longer holds the pod: no credit
        c.on_metrics(min(21), &[view]);
        c.on_metrics(min(27), &[view]);
        assert_eq!(*seen.borrow(), [33.0, 50.0]);
    }
}
