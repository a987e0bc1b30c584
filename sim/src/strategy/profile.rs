//! A load-aware strategy inside a kube-scheduler profile: the strategy's own score times its
//! weight plus the in-tree score plugins the profile leaves on (peers/src/profile.rs), the
//! total choosing the node — `RunScorePlugins` for a plugin, and for an extender its 0..10
//! answer (× 10, which the strategy already applies on the extender path) × the extender's
//! weight added to the plugins' sum (`prioritizeNodes`). Filter is the strategy's alone: the
//! in-tree filters that act in the simulator (NodeResourcesFit) run before it, and the
//! system default spread constraints are soft.

use waterline_core::UnixMillis;
use waterline_peers::kube_default::CpuMemory;
use waterline_peers::profile::{Candidate, Incoming, Profile};

use super::{Cycle, MetricNeed, NodeView, Path, Strategy};
use crate::model::{Resources, SimPod};

/// How a profile weighs a strategy against the in-tree plugins it keeps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedulerProfile {
    /// The load-aware plugin's weight (an extender's `weight`).
    pub weight: i64,
    pub in_tree: Profile,
}

/// `inner` scored under `profile`, labelled `label`.
pub struct Profiled {
    label: String,
    inner: Box<dyn Strategy>,
    profile: SchedulerProfile,
}

impl Profiled {
    pub fn new(label: &str, inner: Box<dyn Strategy>, profile: SchedulerProfile) -> Self {
        Profiled { label: label.to_owned(), inner, profile }
    }
}

fn cm(r: Resources) -> CpuMemory {
    CpuMemory::new(r.cpu_millis, r.memory_bytes)
}

/// The in-tree plugins' view of the candidates.
pub fn candidates(nodes: &[NodeView<'_>]) -> Vec<Candidate> {
    nodes
        .iter()
        .map(|n| Candidate {
            allocatable: cm(n.allocatable),
            requested: cm(n.requested),
            non_zero_requested: cm(n.non_zero_requested),
            same_owner_pods: n.controller_pods,
        })
        .collect()
}

pub fn incoming(pod: &SimPod) -> Incoming {
    Incoming { request: cm(pod.requests), has_controller: pod.controller.is_some() }
}

impl Strategy for Profiled {
    fn label(&self) -> &str {
        &self.label
    }

    fn path(&self, scenario: Path) -> Path {
        self.inner.path(scenario)
    }

    fn metrics(&self) -> Vec<MetricNeed> {
        self.inner.metrics()
    }

    fn filter(
        &mut self,
        cycle: &Cycle,
        pod: &SimPod,
        nodes: &[NodeView<'_>],
    ) -> Vec<Option<String>> {
        self.inner.filter(cycle, pod, nodes)
    }

    fn score(&mut self, cycle: &Cycle, pod: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64> {
        let own = self.inner.score(cycle, pod, nodes);
        let in_tree = self.profile.in_tree.scores(&incoming(pod), &candidates(nodes));
        own.iter().zip(in_tree).map(|(s, t)| s * self.profile.weight + t).collect()
    }

    fn on_metrics(&mut self, now: UnixMillis, nodes: &[NodeView<'_>]) {
        self.inner.on_metrics(now, nodes)
    }

    fn on_reserve(&mut self, now: UnixMillis, pod: &SimPod, node: &str) {
        self.inner.on_reserve(now, pod, node)
    }

    fn on_bound(&mut self, now: UnixMillis, pod: &SimPod, node: &str, bound_at: UnixMillis) {
        self.inner.on_bound(now, pod, node, bound_at)
    }

    fn on_deleted(&mut self, now: UnixMillis, pod: &SimPod, node: &str) {
        self.inner.on_deleted(now, pod, node)
    }

    fn guesses(&self) -> Option<super::Guesses> {
        self.inner.guesses()
    }
    fn pod_series(&self) -> Option<super::PodSeriesNeed> {
        self.inner.pod_series()
    }
    fn on_pod_usage(&mut self, now: UnixMillis, pods: &[super::PodSummary]) {
        self.inner.on_pod_usage(now, pods)
    }
    fn pricing(&self) -> Option<super::Pricing> {
        self.inner.pricing()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use waterline_peers::profile::ScorePlugin;

    /// Scores the nodes 10, 0, 7 whatever they hold.
    struct Fixed;

    impl Strategy for Fixed {
        fn label(&self) -> &str {
            "fixed"
        }
        fn score(&mut self, _: &Cycle, _: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64> {
            [10, 0, 7].into_iter().take(nodes.len()).collect()
        }
    }

    #[test]
    fn the_total_is_the_weighted_strategy_plus_the_in_tree_plugins() {
        let gib = 1i64 << 30;
        let view = |name, pods| NodeView {
            name,
            allocatable: Resources::new(8000, 32 * gib),
            requested: Resources::default(),
            non_zero_requested: Resources::default(),
            controller_pods: pods,
            metrics: &[],
            pods: &[],
        };
        let nodes = [view("a", 2), view("b", 0), view("c", 1)];
        let in_tree = Profile { plugins: vec![(ScorePlugin::PodTopologySpread, 2)] };
        let mut p = Profiled::new("p", Box::new(Fixed), SchedulerProfile { weight: 3, in_tree });
        let pod = SimPod {
            uid: "u".into(),
            namespace: "default".into(),
            name: "x".into(),
            labels: Default::default(),
            owner_kind: "ReplicaSet".into(),
            owner_name: String::new(),
            controller: Some("default/x".into()),
            requests: Resources::new(1000, gib),
            limits: Resources::default(),
        };
        let cycle = Cycle { now: UnixMillis(0), path: Path::Plugin };
        // spread over 3 candidates, counts 2/0/1, maxSkew 3, weight ln 5 = 1.609: raw
        // round(5.22) = 5, 2, round(3.61) = 4; max 5, min 2: 100·(7 − 5)/5 = 40, 100, 60.
        // Totals: 3·10 + 2·40 = 110, 3·0 + 2·100 = 200, 3·7 + 2·60 = 141.
        assert_eq!(p.score(&cycle, &pod, &nodes), [110, 200, 141]);
        assert_eq!(p.label(), "p");
    }
}
