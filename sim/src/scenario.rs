//! A scenario resolved into explicit lists: every node with its capacity and background
//! usage, every pod with its arrival, deletion and true usage. Generators (node groups, pod
//! groups) are expanded with the scenario's seed when the file is read (`file.rs`), so a
//! run only ever sees lists — the same shape a recorded trace is replayed from.

mod file;
mod usage;
pub mod volatile;

pub use file::{ScenarioError, parse_scenario};
pub use usage::{Background, Diurnal, PodUsage, Series};

use std::sync::Arc;

use waterline_core::Millis;

use crate::model::{Resources, SimPod, SimTime};
use crate::strategy::Path;

#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub seed: u64,
    /// Measured time, from 0.
    pub duration: Millis,
    /// Time before 0 during which the pipeline fills its history (the 1 h / 1 d maxima).
    pub warmup: Millis,
    /// Percent: a node above it (cpu or memory, true usage) is overloaded.
    pub threshold: f64,
    /// Percent: the water level the measures compare with.
    pub target: f64,
    pub measure_interval: Millis,
    pub pipeline: Pipeline,
    pub scheduler: Scheduler,
    pub nodes: Vec<NodeSpec>,
    pub pods: Vec<PodSpec>,
    /// When the load step happens (`loadStep:`): the rebalancing measures' recovery time
    /// counts from it.
    pub load_step: Option<SimTime>,
}

impl Scenario {
    /// A smaller copy for quick tests: the first `max_nodes` nodes, a share of the pods in
    /// proportion (every k-th), at most `max_duration` measured and 10 m of warm-up.
    pub fn scale_down(&mut self, max_nodes: usize, max_duration: Millis) {
        let keep_every = self.nodes.len().div_ceil(max_nodes.max(1)).max(1);
        self.nodes.truncate(max_nodes.max(1));
        self.duration = self.duration.min(max_duration);
        self.warmup = self.warmup.min(Millis::from_mins(10));
        let nodes = &self.nodes;
        let end = self.duration.0;
        let mut k = 0;
        self.pods.retain(|p| {
            let on_kept = p.node.as_ref().is_none_or(|n| nodes.iter().any(|m| &m.name == n));
            k += 1;
            on_kept && p.arrival <= end && (k - 1) % keep_every == 0
        });
    }
}

/// Prometheus and the collector, as docs/design.md and deploy/prometheus/rules.yml set them up.
#[derive(Clone, Debug, PartialEq)]
pub struct Pipeline {
    pub scrape_interval: Millis,
    /// Evaluation interval of the 5 m average rules.
    pub rule_interval: Millis,
    /// Evaluation interval of the 1 h maxima.
    pub hour_rule_interval: Millis,
    /// Evaluation interval of the 1 d maxima.
    pub day_rule_interval: Millis,
    /// Resolution of the `[1h:1m]` subqueries.
    pub subquery_step: Millis,
    /// Evaluation interval of the per-pod usage rules the learned estimate reads
    /// (pipeline/pods.rs): one sample a minute per pod and resource.
    pub pod_rule_interval: Millis,
    /// Extra lag between a scrape and the data a query sees (remote storage, a slow rule
    /// group): everything Prometheus answers at `t` describes `t − delay`.
    pub delay: Millis,
    /// When set, every metric is polled at this period instead of the strategy's own.
    pub poll_override: Option<Millis>,
    /// Prometheus unreachable: no scrapes, no rule evaluations, failed polls.
    pub outages: Vec<(SimTime, SimTime)>,
    /// koordlet writes no NodeMetric (the agent down, or cut off from the API server); it
    /// has nothing to do with Prometheus.
    pub koordlet_gaps: Vec<(SimTime, SimTime)>,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline {
            scrape_interval: Millis::from_secs(15),
            rule_interval: Millis::from_secs(30),
            hour_rule_interval: Millis::from_mins(1),
            day_rule_interval: Millis::from_mins(5),
            subquery_step: Millis::from_mins(1),
            pod_rule_interval: Millis::from_mins(1),
            delay: Millis(0),
            poll_override: None,
            outages: Vec::new(),
            koordlet_gaps: Vec::new(),
        }
    }
}

impl Pipeline {
    pub fn down_at(&self, t: SimTime) -> bool {
        self.outages.iter().any(|&(from, to)| from <= t && t < to)
    }

    pub fn koordlet_down_at(&self, t: SimTime) -> bool {
        self.koordlet_gaps.iter().any(|&(from, to)| from <= t && t < to)
    }
}

/// The scheduler's loop.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheduler {
    pub path: Path,
    /// Time one scheduling cycle takes (pods are taken one per cycle).
    pub cycle: Millis,
    /// From the decision to the binding (PodScheduled) and the pod's start.
    pub bind_delay: Millis,
    /// From a binding or deletion to the strategy's pod watch seeing it.
    pub watch_lag: Millis,
    /// An unschedulable pod is tried again after this long.
    pub retry_interval: Millis,
}

/// The scheduler loop's timing when a scenario does not set it: the one place to change
/// it. Placeholders until a measured set replaces them — the end-to-end runs on a real
/// kube-apiserver and kube-scheduler (tests/e2e) saw bind 7–40 ms, pod watch 17–50 ms and
/// scheduling cycles 12–45 ms for 30-pod bursts, and bind delays of hundreds of ms in
/// 1,000-pod throughput runs; the sensitivity tables (`waterline-sim sweep`) show how much
/// each result depends on them.
pub mod default_timing {
    use waterline_core::Millis;

    /// One pod per cycle; kube-scheduler's cycle for one pod is milliseconds to tens of
    /// milliseconds (the e2e's 12–45 ms), 10 ms on an idle control plane.
    pub const CYCLE: Millis = Millis(10);
    /// From the decision to the binding: an API round trip, slower under load.
    pub const BIND_DELAY: Millis = Millis(100);
    /// From a binding to the strategy's pod watch: a watch delivery plus the informer;
    /// 500 ms is pessimistic for an idle control plane and optimistic for a loaded one.
    pub const WATCH_LAG: Millis = Millis(500);
    /// kube-scheduler's backoff for unschedulable pods is 1–10 s, but such a pod waits in
    /// the unschedulable queue until a cluster event or `podMaxInUnschedulablePodsDuration`
    /// (5 m); 30 s stands for the events a busy cluster produces.
    pub const RETRY: Millis = Millis::from_secs(30);
}

impl Default for Scheduler {
    fn default() -> Self {
        Scheduler {
            path: Path::Plugin,
            cycle: default_timing::CYCLE,
            bind_delay: default_timing::BIND_DELAY,
            watch_lag: default_timing::WATCH_LAG,
            retry_interval: default_timing::RETRY,
        }
    }
}

/// Overrides of the scheduler's timing (`--timing cycle=40ms,watchLag=2s`): every field
/// left `None` keeps the scenario's value.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timing {
    pub cycle: Option<Millis>,
    pub bind_delay: Option<Millis>,
    pub watch_lag: Option<Millis>,
}

impl Timing {
    pub fn apply(&self, s: &mut Scheduler) {
        s.cycle = self.cycle.unwrap_or(s.cycle);
        s.bind_delay = self.bind_delay.unwrap_or(s.bind_delay);
        s.watch_lag = self.watch_lag.unwrap_or(s.watch_lag);
    }

    /// `cycle=10ms,bindDelay=100ms,watchLag=500ms`, any subset, in any order.
    pub fn parse(text: &str) -> Result<Timing, ScenarioError> {
        let mut t = Timing::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| ScenarioError(format!("--timing: '{part}' is not key=duration")))?;
            let d = waterline_core::time::parse_duration(value.trim())
                .map_err(|e| ScenarioError(format!("--timing {key}: {e}")))?;
            match key.trim() {
                "cycle" => t.cycle = Some(d),
                "bindDelay" => t.bind_delay = Some(d),
                "watchLag" => t.watch_lag = Some(d),
                other => {
                    return Err(ScenarioError(format!(
                        "--timing: unknown key '{other}' (cycle, bindDelay, watchLag)"
                    )));
                }
            }
        }
        Ok(t)
    }
}

#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub name: String,
    pub allocatable: Resources,
    pub background: Background,
}

#[derive(Clone, Debug)]
pub struct PodSpec {
    pub pod: Arc<SimPod>,
    pub arrival: SimTime,
    /// When the pod is deleted (absolute); `None`: it runs to the end.
    pub deletion: Option<SimTime>,
    /// Already bound to this node at its arrival (a replayed trace's existing pods).
    pub node: Option<String>,
    pub usage: PodUsage,
    /// Whether Prometheus records the pod's usage series (`podSeries:`, default recorded):
    /// a pod without them gives the learned estimate no evidence.
    pub series_recorded: bool,
}

/// The shipped library, embedded so the binary works from any directory.
pub const SHIPPED: &[(&str, &str)] = &[
    ("calm-burst", include_str!("../scenarios/calm-burst.yaml")),
    ("hot-and-uneven", include_str!("../scenarios/hot-and-uneven.yaml")),
    ("memory-below-target", include_str!("../scenarios/memory-below-target.yaml")),
    ("heterogeneous", include_str!("../scenarios/heterogeneous.yaml")),
    ("rollout", include_str!("../scenarios/rollout.yaml")),
    ("diurnal-day", include_str!("../scenarios/diurnal-day.yaml")),
    ("usage-twice-request", include_str!("../scenarios/usage-twice-request.yaml")),
    ("two-workloads", include_str!("../scenarios/two-workloads.yaml")),
    ("release", include_str!("../scenarios/release.yaml")),
    ("missing-series", include_str!("../scenarios/missing-series.yaml")),
    ("metric-lag-60s", include_str!("../scenarios/metric-lag-60s.yaml")),
    ("metric-lag-5m", include_str!("../scenarios/metric-lag-5m.yaml")),
    ("prometheus-outage", include_str!("../scenarios/prometheus-outage.yaml")),
    ("volatile-stream", include_str!("../scenarios/volatile-stream.yaml")),
    ("volatile-bursts", include_str!("../scenarios/volatile-bursts.yaml")),
    ("rebalance-step", include_str!("../scenarios/rebalance-step.yaml")),
    ("rebalance-step-outage", include_str!("../scenarios/rebalance-step-outage.yaml")),
    ("rebalance-diurnal", include_str!("../scenarios/rebalance-diurnal.yaml")),
];

/// A shipped scenario's text by name.
pub fn shipped(name: &str) -> Option<&'static str> {
    SHIPPED.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}
