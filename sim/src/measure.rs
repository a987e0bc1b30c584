//! Placement quality from true usage (docs/design.md). Sampled every `measureInterval` from 0
//! to the end of the run; each sample stands for one interval of time, so "node-seconds" are
//! node-samples × interval. A node's utilisation is the larger of its cpu and memory
//! percentages of allocatable — a node is as hot as its hottest dimension. The field names of
//! [`StrategySummary`] are summary.json's (documented in sim/README.md; stable).

pub mod room;

use serde::{Deserialize, Serialize};

use crate::scenario::Scenario;
pub use room::{RoomVsDemand, room_vs_demand};

/// p50 / p99 / max of a series.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// Time-weighted mean of a spread across nodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Mean over time of the population standard deviation across nodes (pp).
    pub stddev: f64,
    /// Mean over time of max − min across nodes (pp).
    pub range: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StrategySummary {
    pub strategy: String,
    /// Pods that arrived (pre-bound ones included).
    pub pods_arrived: usize,
    /// Pods the scheduler placed.
    pub pods_placed: usize,
    /// Pods still waiting for a node at the end.
    pub pods_pending_end: usize,
    /// Pods that arrived to be scheduled and were never placed: still pending at the end,
    /// or deleted while they waited.
    pub pods_never_placed: usize,
    /// Pod-seconds spent waiting for a node (from arrival to placement or deletion),
    /// measured time only.
    pub pending_pod_seconds: f64,
    /// Scheduling attempts that found no node.
    pub unschedulable_attempts: usize,
    /// Node-seconds with utilisation above the scenario's threshold.
    pub overload_node_seconds: f64,
    /// Placements (from time 0) onto a node whose true utilisation was above the threshold.
    pub placed_on_hot_nodes: usize,
    /// The hottest node's utilisation over time (percent).
    pub hottest_pct: Percentiles,
    /// The hottest node's utilisation over the samples where the nodes' mean utilisation is
    /// above the target — where no strategy can keep every node at the water level, so the
    /// hottest node shows how evenly the excess is spread; `null` if there are none.
    pub hottest_pct_when_mean_above_target: Option<Percentiles>,
    /// Seconds during which the nodes' mean utilisation was above the target.
    pub mean_above_target_s: f64,
    /// Node-seconds with utilisation more than 10 pp above the scenario's target.
    pub above_water_node_seconds: f64,
    pub spread_cpu: Spread,
    pub spread_memory: Spread,
    /// Nodes running at least one pod at the end.
    pub nodes_in_use: usize,
    /// Nodes that received at least one placement from time 0.
    pub nodes_receiving_pods: usize,
    /// Placements from time 0 per node (every node listed), for agreement with real runs.
    pub placements_per_node: std::collections::BTreeMap<String, usize>,
    /// At each decision from time 0: how many pods the scheduler had already placed whose
    /// binding the pod watch had not yet delivered — the pods a strategy without Reserve
    /// decides blind to (every strategy on the extender path; Crane and Trimaran on both).
    pub unwatched_at_decision: Unwatched,
    /// Extender path, waterline: its adapter's provisional guesses and what became of them
    /// (absent for strategies that make none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisional_guesses: Option<crate::strategy::Guesses>,
    /// waterline: how its estimator priced the pods bound from time 0 — by their workload's
    /// learned usage or by the policy's factors — and the workloads it had learned (absent
    /// for strategies that estimate no pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<crate::strategy::Pricing>,
    /// With a rebalancing actor: what it did (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebalance: Option<crate::rebalance::RebalanceSummary>,
}

/// Mean and maximum of [`StrategySummary::unwatched_at_decision`] over the decisions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Unwatched {
    pub mean: f64,
    pub max: usize,
}

/// What summary.json holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub scenario: String,
    pub seed: u64,
    pub duration_s: f64,
    pub threshold_pct: f64,
    pub target_pct: f64,
    pub nodes: usize,
    pub pods: usize,
    pub path: crate::strategy::Path,
    /// The scenario's room under the threshold against its demand (room.rs).
    pub room: RoomVsDemand,
    /// The scheduler's timing of the run (cycle, bind delay, watch lag), in ms.
    pub timing_ms: Timing,
    pub strategies: Vec<StrategySummary>,
}

/// The scheduler loop's timing of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub cycle: i64,
    pub bind_delay: i64,
    pub watch_lag: i64,
}

pub struct Recorder {
    threshold: f64,
    target: f64,
    water: f64,
    interval_s: f64,
    hottest: Vec<f64>,
    hottest_mean_above_target: Vec<f64>,
    overload: f64,
    above_water: f64,
    cpu: (f64, f64),
    memory: (f64, f64),
    pending: f64,
    samples: usize,
    pub arrived: usize,
    pub placed: usize,
    pub placed_on_hot: usize,
    pub unschedulable_attempts: usize,
    /// Pods that arrived without a node (the scheduler's to place).
    pub to_schedule: usize,
    unwatched_sum: usize,
    unwatched_max: usize,
    decisions: usize,
}

fn stddev_and_range(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let n = values.clone().count();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = values.clone().sum::<f64>() / n as f64;
    let var = values.clone().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
    let max = values.clone().fold(f64::MIN, f64::max);
    let min = values.fold(f64::MAX, f64::min);
    (var.sqrt(), max - min)
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

impl Recorder {
    pub fn new(scenario: &Scenario) -> Self {
        Recorder {
            threshold: scenario.threshold,
            target: scenario.target,
            water: scenario.target + 10.0,
            interval_s: scenario.measure_interval.as_secs_f64(),
            hottest: Vec::new(),
            hottest_mean_above_target: Vec::new(),
            overload: 0.0,
            above_water: 0.0,
            cpu: (0.0, 0.0),
            memory: (0.0, 0.0),
            pending: 0.0,
            samples: 0,
            arrived: 0,
            placed: 0,
            placed_on_hot: 0,
            unschedulable_attempts: 0,
            to_schedule: 0,
            unwatched_sum: 0,
            unwatched_max: 0,
            decisions: 0,
        }
    }

    /// A decision from time 0 while `unwatched` placed pods were not yet in the pod watch.
    pub fn decided_unwatched(&mut self, unwatched: usize) {
        self.unwatched_sum += unwatched;
        self.unwatched_max = self.unwatched_max.max(unwatched);
        self.decisions += 1;
    }

    /// One sample: every node's (cpu %, memory %) and the pods waiting.
    pub fn record(&mut self, utils: &[(f64, f64)], pending: usize) {
        let dt = self.interval_s;
        let hot = |&(c, m): &(f64, f64)| c.max(m);
        let hottest = utils.iter().map(hot).fold(0.0, f64::max);
        self.hottest.push(hottest);
        let mean = utils.iter().map(hot).sum::<f64>() / utils.len().max(1) as f64;
        if mean > self.target {
            self.hottest_mean_above_target.push(hottest);
        }
        self.overload += utils.iter().filter(|u| hot(u) > self.threshold).count() as f64 * dt;
        self.above_water += utils.iter().filter(|u| hot(u) > self.water).count() as f64 * dt;
        let (s, r) = stddev_and_range(utils.iter().map(|u| u.0));
        self.cpu = (self.cpu.0 + s, self.cpu.1 + r);
        let (s, r) = stddev_and_range(utils.iter().map(|u| u.1));
        self.memory = (self.memory.0 + s, self.memory.1 + r);
        self.pending += pending as f64 * dt;
        self.samples += 1;
    }

    pub fn finish(
        mut self,
        strategy: String,
        pending_end: usize,
        nodes_in_use: usize,
        nodes_receiving: usize,
        placements_per_node: std::collections::BTreeMap<String, usize>,
    ) -> StrategySummary {
        self.hottest.sort_by(f64::total_cmp);
        self.hottest_mean_above_target.sort_by(f64::total_cmp);
        let n = self.samples.max(1) as f64;
        let r2 = |x: f64| (x * 100.0).round() / 100.0;
        let percentiles = |sorted: &[f64]| Percentiles {
            p50: r2(percentile(sorted, 50.0)),
            p99: r2(percentile(sorted, 99.0)),
            max: r2(sorted.last().copied().unwrap_or(0.0)),
        };
        StrategySummary {
            strategy,
            pods_arrived: self.arrived,
            pods_placed: self.placed,
            pods_pending_end: pending_end,
            pods_never_placed: self.to_schedule - self.placed.min(self.to_schedule),
            pending_pod_seconds: r2(self.pending),
            unschedulable_attempts: self.unschedulable_attempts,
            overload_node_seconds: r2(self.overload),
            placed_on_hot_nodes: self.placed_on_hot,
            hottest_pct: percentiles(&self.hottest),
            hottest_pct_when_mean_above_target: (!self.hottest_mean_above_target.is_empty())
                .then(|| percentiles(&self.hottest_mean_above_target)),
            mean_above_target_s: r2(self.hottest_mean_above_target.len() as f64 * self.interval_s),
            above_water_node_seconds: r2(self.above_water),
            spread_cpu: Spread { stddev: r2(self.cpu.0 / n), range: r2(self.cpu.1 / n) },
            spread_memory: Spread { stddev: r2(self.memory.0 / n), range: r2(self.memory.1 / n) },
            nodes_in_use,
            nodes_receiving_pods: nodes_receiving,
            placements_per_node,
            unwatched_at_decision: Unwatched {
                mean: r2(self.unwatched_sum as f64 / self.decisions.max(1) as f64),
                max: self.unwatched_max,
            },
            provisional_guesses: None,
            pricing: None,
            rebalance: None,
        }
    }
}

/// The Markdown table printed on stdout.
pub fn table(summary: &Summary) -> String {
    let mut out = format!(
        "### {} (seed {}, {} nodes, {} pods, {:?} path, threshold {} %, target {} %; peak \
         demand / room cpu {:.2}, memory {:.2})\n\n",
        summary.scenario,
        summary.seed,
        summary.nodes,
        summary.pods,
        summary.path,
        summary.threshold_pct,
        summary.target_pct,
        summary.room.cpu_peak,
        summary.room.memory_peak,
    );
    out.push_str(
        "| strategy | overload node·s | pending pod·s | never placed | placed on hot | hottest \
         p50 / p99 / max % | > target+10 node·s | cpu / mem spread sd pp | pending (end) | \
         unschedulable tries | nodes in use / receiving | unwatched at a decision, mean / max |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---|---:|---|---:|---:|---|---|\n");
    for s in &summary.strategies {
        out.push_str(&format!(
            "| {} | {:.0} | {:.0} | {} | {} | {:.1} / {:.1} / {:.1} | {:.0} | {:.1} / {:.1} | {} | {} | {} / {} | {:.1} / {} |\n",
            s.strategy,
            s.overload_node_seconds,
            s.pending_pod_seconds,
            s.pods_never_placed,
            s.placed_on_hot_nodes,
            s.hottest_pct.p50,
            s.hottest_pct.p99,
            s.hottest_pct.max,
            s.above_water_node_seconds,
            s.spread_cpu.stddev,
            s.spread_memory.stddev,
            s.pods_pending_end,
            s.unschedulable_attempts,
            s.nodes_in_use,
            s.nodes_receiving_pods,
            s.unwatched_at_decision.mean,
            s.unwatched_at_decision.max,
        ));
    }
    out
}

#[cfg(test)]
mod tests;
