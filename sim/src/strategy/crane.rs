//! Crane's Dynamic plugin (peers/src/crane.rs) behind its own pipeline:
//!
//! - the annotator syncs each of the policy's six metrics on its own period (3 m, 15 m, 3 h by
//!   default): a poll that lands writes that metric's annotation (value / 100, five decimals,
//!   whole-second timestamp); a poll without a value writes nothing, and the old annotation
//!   ages until it expires (period + 5 m) and then counts as fully used;
//! - bindings come from `Scheduled` events (the pod watch's bind, on every path) with the
//!   bind time; the hot value is recomputed and written right after each metric sync of a node
//!   (annotator/node.go syncNode), never in between;
//! - Filter and Score read only the annotations, as the plugin does. Scores are the plugin's
//!   0..100 on both paths (Crane ships only as a plugin).

use std::collections::HashMap;

use waterline_core::{Millis, UnixMillis};
use waterline_peers::crane::{self as peer, Annotation, BindingRecords, NodeAnnotations, Policy};

use super::{Cycle, MetricKind, MetricNeed, NodeView, Path, Resource, Strategy};
use crate::model::SimPod;

pub struct Crane {
    policy: Policy,
    needs: Vec<MetricNeed>,
    records: BindingRecords,
    /// Per node: its annotations and the poll time of the sample each metric last wrote.
    nodes: HashMap<String, (NodeAnnotations, Vec<Option<UnixMillis>>)>,
    /// Not upstream: recompute the hot value at every Score instead of at metric syncs
    /// (the cross-check's way to isolate that one difference from waterline's Crane curve).
    live_hot_value: bool,
}

/// The pipeline kind of one of Crane's metric names (`cpu_usage_avg_5m`, `…_max_avg_1h`,
/// `…_max_avg_1d`: the recording rules of its docs).
fn kind_of(name: &str) -> Option<(Resource, MetricKind)> {
    let resource = if name.starts_with("cpu") {
        Resource::Cpu
    } else if name.starts_with("mem") {
        Resource::Memory
    } else {
        return None;
    };
    let five = Millis::from_mins(5);
    let kind = if name.ends_with("max_avg_1d") {
        MetricKind::MaxOfAvg { window: five, over: Millis::from_mins(24 * 60) }
    } else if name.ends_with("max_avg_1h") {
        MetricKind::MaxOfAvg { window: five, over: Millis::from_mins(60) }
    } else if name.ends_with("avg_5m") {
        MetricKind::Avg { window: five }
    } else {
        return None;
    };
    Some((resource, kind))
}

impl Crane {
    /// Crane with deploy/manifests/dynamic/policy.yaml.
    pub fn new() -> Self {
        Crane::with_policy(Policy::default())
    }

    /// Metrics the simulator cannot model (names other than Crane's six) are dropped: they
    /// then have no annotation, as when the recording rule is missing.
    pub fn with_policy(policy: Policy) -> Self {
        let needs = policy
            .sync_period
            .iter()
            .filter_map(|s| {
                let (resource, kind) = kind_of(&s.name)?;
                Some(MetricNeed { name: s.name.clone(), resource, kind, poll: Millis(s.period_ms) })
            })
            .collect();
        let records = BindingRecords::new(peer::DEFAULT_BINDING_HEAP_SIZE, &policy);
        Crane { policy, needs, records, nodes: HashMap::new(), live_hot_value: false }
    }

    /// The cross-check variant: the hot value read live from the bindings at every Score.
    pub fn with_live_hot_value(mut self) -> Self {
        self.live_hot_value = true;
        self
    }

    fn annotations(&self, node: &str) -> NodeAnnotations {
        self.nodes.get(node).map(|(a, _)| a.clone()).unwrap_or_default()
    }
}

impl Default for Crane {
    fn default() -> Self {
        Crane::new()
    }
}

impl Strategy for Crane {
    fn label(&self) -> &str {
        "crane"
    }

    /// It ships only as a plugin of its own scheduler.
    fn path(&self, _scenario: Path) -> Path {
        Path::Plugin
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
        let daemonset = pod.owner_kind == "DaemonSet";
        nodes
            .iter()
            .map(|n| {
                let anno = self.annotations(n.name);
                peer::filter(&self.policy, n.name, &anno, daemonset, cycle.now.0).err()
            })
            .collect()
    }

    fn score(&mut self, cycle: &Cycle, _pod: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64> {
        let now = cycle.now.0;
        nodes
            .iter()
            .map(|n| {
                let mut anno = self.annotations(n.name);
                if self.live_hot_value {
                    let hot = peer::hot_value_of(&self.records, &self.policy, n.name, now);
                    let written_at_secs = peer::unix_secs(now);
                    anno.hot_value = Some(Annotation { value: hot as f64, written_at_secs });
                }
                peer::score(&self.policy, &anno, now)
            })
            .collect()
    }

    fn on_metrics(&mut self, now: UnixMillis, nodes: &[NodeView<'_>]) {
        self.records.gc(now.0);
        for node in nodes {
            let (anno, seen) = self
                .nodes
                .entry(node.name.to_owned())
                .or_insert_with(|| (NodeAnnotations::default(), vec![None; self.needs.len()]));
            let mut synced = false;
            for ((need, sample), seen) in self.needs.iter().zip(node.metrics).zip(seen.iter_mut()) {
                let Some(sample) = sample else { continue };
                if *seen == Some(sample.at) {
                    continue;
                }
                *seen = Some(sample.at);
                anno.metrics.insert(need.name.clone(), peer::annotate(sample.value, now.0));
                synced = true;
            }
            if synced {
                let hot = peer::hot_value_of(&self.records, &self.policy, node.name, now.0);
                let written_at_secs = peer::unix_secs(now.0);
                anno.hot_value = Some(Annotation { value: hot as f64, written_at_secs });
            }
        }
    }

    fn on_bound(&mut self, _now: UnixMillis, _pod: &SimPod, node: &str, bound_at: UnixMillis) {
        self.records.add(node, bound_at.0);
    }
}

/// A small burst driver shared by the three peer adapters' tests (crane, trimaran-tlp,
/// koordinator): true usage is each node's base plus every bound pod's usage from its bind on;
/// each metric is computed from it on its poll period as the recording rule would (the mean
/// over the window; maxima of that mean at 1 m steps); the scheduler keeps the strategy's best
/// feasible node (ties: the first); Reserve at the decision and the bind delivered at once.
#[cfg(test)]
pub(super) mod burst {
    use std::sync::Arc;

    use waterline_core::Sample;

    use super::super::{Cycle, MetricKind, NodeView, Path, PlacedPod, Resource, Strategy};
    use crate::model::{Resources, SimPod, SimTime, instant};

    pub struct Node {
        pub name: String,
        pub allocatable: Resources,
        pub base: Resources,
    }

    pub struct Arrival {
        pub at: SimTime,
        pub pod: SimPod,
        pub usage: Resources,
    }

    pub struct Outcome {
        /// Node index per arrival; `None` when every node was rejected.
        pub placed: Vec<Option<usize>>,
        pub counts: Vec<usize>,
        /// True cpu utilisation per node at the end, percent.
        pub cpu_percent: Vec<f64>,
    }

    pub fn pod(i: usize, cpu_millis: i64, memory_bytes: i64) -> SimPod {
        SimPod {
            uid: format!("uid-{i}"),
            namespace: "default".into(),
            name: format!("pod-{i}"),
            labels: Default::default(),
            owner_kind: "ReplicaSet".into(),
            owner_name: String::new(),
            controller: None,
            requests: Resources::new(cpu_millis, memory_bytes),
            limits: Resources::new(cpu_millis, memory_bytes),
        }
    }

    fn pick(r: Resource, x: Resources) -> f64 {
        match r {
            Resource::Cpu => x.cpu_millis as f64,
            Resource::Memory => x.memory_bytes as f64,
        }
    }

    /// The mean over [t − w, t] of base + Σ usage from each bind on.
    fn mean(base: f64, bound: &[(SimTime, f64)], t: SimTime, w: i64) -> f64 {
        let from = t - w;
        let added: f64 = bound
            .iter()
            .filter(|(b, _)| *b < t)
            .map(|(b, u)| u * (t - (*b).max(from)) as f64 / w as f64)
            .sum();
        base + added
    }

    /// Runs `arrivals` (at whole seconds, in order) until `until`; `instant_metrics` replaces
    /// every metric by the true usage of the moment (the counterfactual without lag).
    pub fn run(
        strategy: &mut dyn Strategy,
        nodes: &[Node],
        arrivals: &[Arrival],
        until: SimTime,
        instant_metrics: bool,
    ) -> Outcome {
        let needs = strategy.metrics();
        let mut samples = vec![vec![None::<Sample>; needs.len()]; nodes.len()];
        let mut bound: Vec<Vec<(SimTime, Resources)>> = vec![Vec::new(); nodes.len()];
        let mut placed_pods: Vec<Vec<PlacedPod>> = vec![Vec::new(); nodes.len()];
        let mut placed = Vec::new();
        let mut next = 0;
        let mut t = 0;
        while t <= until {
            let mut polled = false;
            for (i, need) in needs.iter().enumerate() {
                if t % need.poll.0 != 0 {
                    continue;
                }
                polled = true;
                for (n, node) in nodes.iter().enumerate() {
                    let r = need.resource;
                    let b: Vec<(SimTime, f64)> =
                        bound[n].iter().map(|(at, u)| (*at, pick(r, *u))).collect();
                    let base = pick(r, node.base);
                    let used = match need.kind {
                        _ if instant_metrics => mean(base, &b, t, 1),
                        MetricKind::Avg { window } | MetricKind::Koordlet { window, .. } => {
                            mean(base, &b, t, window.0)
                        }
                        MetricKind::MetricsServer { resolution } => mean(base, &b, t, resolution.0),
                        MetricKind::MaxOfAvg { window, over }
                        | MetricKind::MeanPlusSigma { window, over, .. } => (0..=over.0 / 60_000)
                            .map(|k| mean(base, &b, t - k * 60_000, window.0))
                            .fold(f64::MIN, f64::max),
                    };
                    let value = 100.0 * used / pick(r, node.allocatable);
                    samples[n][i] = Some(Sample { value, at: instant(t) });
                }
            }
            if polled {
                let v = views(nodes, &samples, &placed_pods);
                strategy.on_metrics(instant(t), &v);
            }
            while next < arrivals.len() && arrivals[next].at == t {
                let a = &arrivals[next];
                next += 1;
                let v = views(nodes, &samples, &placed_pods);
                let cycle = Cycle { now: instant(t), path: Path::Plugin };
                let rejected = strategy.filter(&cycle, &a.pod, &v);
                let scores = strategy.score(&cycle, &a.pod, &v);
                let best = (0..nodes.len())
                    .filter(|&n| rejected[n].is_none())
                    .max_by_key(|&n| (scores[n], std::cmp::Reverse(n)));
                placed.push(best);
                let Some(n) = best else { continue };
                strategy.on_reserve(instant(t), &a.pod, &nodes[n].name);
                strategy.on_bound(instant(t), &a.pod, &nodes[n].name, instant(t));
                bound[n].push((t, a.usage));
                placed_pods[n].push(PlacedPod {
                    pod: Arc::new(a.pod.clone()),
                    assigned_at: instant(t),
                    bound_at: Some(instant(t)),
                });
            }
            t += 1000;
        }
        let counts: Vec<usize> =
            (0..nodes.len()).map(|n| placed.iter().filter(|p| **p == Some(n)).count()).collect();
        let cpu_percent: Vec<f64> = nodes
            .iter()
            .zip(&bound)
            .map(|(node, b)| {
                let used = node.base.cpu_millis + b.iter().map(|(_, u)| u.cpu_millis).sum::<i64>();
                100.0 * used as f64 / node.allocatable.cpu_millis as f64
            })
            .collect();
        Outcome { placed, counts, cpu_percent }
    }

    fn views<'a>(
        nodes: &'a [Node],
        samples: &'a [Vec<Option<Sample>>],
        pods: &'a [Vec<PlacedPod>],
    ) -> Vec<NodeView<'a>> {
        nodes
            .iter()
            .enumerate()
            .map(|(n, node)| {
                let requested =
                    pods[n].iter().fold(Resources::default(), |a, p| a.plus(p.pod.requests));
                NodeView {
                    name: &node.name,
                    allocatable: node.allocatable,
                    requested,
                    non_zero_requested: requested,
                    controller_pods: 0,
                    metrics: &samples[n],
                    pods: &pods[n],
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::burst::{Arrival, Node, pod, run};
    use super::*;
    use crate::model::Resources;

    const GI: i64 = 1 << 30;

    #[test]
    fn default_policy_syncs_the_six_metrics_on_crane_periods() {
        let polls: Vec<i64> = Crane::new().metrics().iter().map(|m| m.poll.0 / 60_000).collect();
        assert_eq!(polls, [3, 15, 180, 3, 15, 180]);
    }

    /// What Crane's users report (docs/design.md: "incoming pod size ignored"; the hot value
    /// exists because "the load of the nodes can not increase immediately", doc/dynamic-
    /// scheduler.md): between two syncs of the annotator nothing a pod does reaches the
    /// annotations — neither the usage nor the hot value, which is written only at a metric
    /// sync — so a burst lands entirely on the node that looked coolest at the last sync.
    /// Four 8-core nodes at 20/25/30/35 % cpu, twelve 1-core pods in the 2 minutes after a
    /// sync: all twelve go to the first node, which truly runs at 20 + 12·1000/8000·100 = 170 %.
    #[test]
    fn a_burst_between_two_syncs_piles_onto_the_coolest_node() {
        let nodes: Vec<Node> = [20, 25, 30, 35]
            .iter()
            .enumerate()
            .map(|(i, pct)| Node {
                name: format!("n{i}"),
                allocatable: Resources::new(8_000, 32 * GI),
                base: Resources::new(8_000 * pct / 100, 10 * GI),
            })
            .collect();
        let arrivals: Vec<Arrival> = (0..12)
            .map(|i| Arrival {
                at: 10_000 + i as i64 * 10_000,
                pod: pod(i, 1_000, 2 * GI),
                usage: Resources::new(1_000, GI),
            })
            .collect();
        let out = run(&mut Crane::new(), &nodes, &arrivals, 170_000, false);
        assert_eq!(out.counts, [12, 0, 0, 0]);
        assert!((out.cpu_percent[0] - 170.0).abs() < 1e-9, "{:?}", out.cpu_percent);
    }

    /// Records where each pod was bound, forwarding everything to the strategy it wraps.
    struct Recording<S> {
        inner: S,
        bound: std::collections::BTreeMap<String, String>,
    }

    impl<S: Strategy> Strategy for Recording<S> {
        fn label(&self) -> &str {
            self.inner.label()
        }
        fn metrics(&self) -> Vec<MetricNeed> {
            self.inner.metrics()
        }
        fn filter(&mut self, c: &Cycle, p: &SimPod, n: &[NodeView<'_>]) -> Vec<Option<String>> {
            self.inner.filter(c, p, n)
        }
        fn score(&mut self, c: &Cycle, p: &SimPod, n: &[NodeView<'_>]) -> Vec<i64> {
            self.inner.score(c, p, n)
        }
        fn on_metrics(&mut self, now: UnixMillis, n: &[NodeView<'_>]) {
            self.inner.on_metrics(now, n)
        }
        fn on_reserve(&mut self, now: UnixMillis, p: &SimPod, node: &str) {
            self.inner.on_reserve(now, p, node)
        }
        fn on_bound(&mut self, now: UnixMillis, p: &SimPod, node: &str, at: UnixMillis) {
            self.bound.entry(p.uid.clone()).or_insert_with(|| node.to_owned());
            self.inner.on_bound(now, p, node, at)
        }
        fn on_deleted(&mut self, now: UnixMillis, p: &SimPod, node: &str) {
            self.inner.on_deleted(now, p, node)
        }
    }

    /// Waterline's `curve: {kind: crane}`, with waterline's own polls or with Crane's sync
    /// periods and Crane's validity (period + 5 m).
    fn crane_curve(crane_periods: bool) -> waterline_core::Policy {
        let mut policy = waterline_core::policy::parse_policy("curve: {kind: crane}").unwrap();
        for m in policy.metrics.iter_mut().filter(|_| crane_periods) {
            let mins = [("avg_5m", 3), ("max_avg_1h", 15), ("max_avg_1d", 180)];
            let (_, period) = mins.iter().rev().find(|(end, _)| m.name.ends_with(end)).unwrap();
            m.period = Millis::from_mins(*period);
            m.max_age = Millis::from_mins(period + 5);
        }
        policy
    }

    /// The cross-check: the `crane` strategy (the Dynamic plugin alone) beside waterline's
    /// Crane-compatible curve on every shipped scenario; prints, per scenario, how many pods
    /// were bound elsewhere.
    /// Measured numbers and their causes: peers/README.md "Cross-check".
    #[test]
    #[ignore = "runs every shipped scenario three times: cargo test -p waterline-sim --release \
                -- --ignored crane_cross_check --nocapture"]
    fn crane_cross_check_on_shipped_scenarios() {
        use crate::scenario::{SHIPPED, parse_scenario};
        use crate::sim::{Outputs, run};
        for (name, text) in SHIPPED {
            let scenario = parse_scenario(text, None).unwrap();
            for (live, label, periods) in [
                (false, "waterline-polls", false),
                (false, "crane-periods", true),
                (true, "crane-periods", true),
            ] {
                let inner = if live { Crane::new().with_live_hot_value() } else { Crane::new() };
                let mut crane = Recording { inner, bound: Default::default() };
                run(&scenario, &mut crane, Outputs::default());
                let inner = super::super::Waterline::new(label, crane_curve(periods)).unwrap();
                let mut w = Recording { inner, bound: Default::default() };
                run(&scenario, &mut w, Outputs::default());
                let differ = crane.bound.iter().filter(|(uid, n)| w.bound.get(*uid) != Some(n));
                let first = crane.bound.iter().find(|(uid, n)| w.bound.get(*uid) != Some(n));
                eprintln!(
                    "{name:20} {label:15} live-hot {live:5} bound {:4} / {:4}, elsewhere {:4}, \
                     first {:?}",
                    crane.bound.len(),
                    w.bound.len(),
                    differ.count(),
                    first.map(|(uid, _)| uid)
                );
            }
        }
    }
}
