//! Node agents that measure usage themselves and reach the scheduler without Prometheus, so
//! Prometheus' delay and outages never touch them:
//!
//! - **koordlet** (koordinator-sh/koordinator at a7a1b76b): its node resource collector
//!   samples the node's usage every `CollectResUsedInterval` (1 s,
//!   `pkg/koordlet/metricsadvisor/framework/config.go` `NewDefaultConfig`); its NodeMetric
//!   reporter, every `ReportIntervalSeconds` (60 s) since the agent started, writes the
//!   mean of the samples of the last `AggregateDurationSeconds` (300 s)
//!   (`pkg/koordlet/statesinformer/impl/states_nodemetric.go`: `syncNodeMetricWorker`,
//!   `collectMetric` → `queryNodeMetric(start, end, AggregationTypeAVG)`; both defaults also
//!   in `pkg/util/sloconfig/colocation_config.go`). Each node's agent runs on its own clock:
//!   its reports are offset by a phase drawn per node from the scenario's seed. A scenario's
//!   `koordlet.gaps` suppress reports (the agent down or cut off from the API server): the
//!   scheduler keeps the last NodeMetric, which ages.
//! - **metrics-server** (kubernetes-sigs/metrics-server at 5ed5d3a2): scrapes every kubelet
//!   every `--metric-resolution` (15 s in its shipped `manifests/base/deployment.yaml`; 60 s
//!   if unset, `cmd/metrics-server/app/options/options.go`); a node's cpu is the rate between
//!   its last two scrapes (`pkg/storage/types.go` `resourceUsage`), memory the last working
//!   set. A query returns that, whenever it comes.
//!
//! A sample is the instant true usage at the sampling moment; between metrics-server's
//! scrapes the cpu counter is integrated by trapezoids, as the Prometheus model does.

use std::collections::VecDeque;

use waterline_core::Millis;

use crate::model::{Resources, SimTime};

/// One node's samples: `(t, cpu millicores, memory bytes)`, oldest first.
#[derive(Clone, Debug, Default)]
struct NodeSamples {
    samples: VecDeque<(SimTime, f64, f64)>,
    /// metrics-server: busy cpu millicore-ms since the series started, at each sample.
    counters: VecDeque<f64>,
}

/// An agent's sample store for every node.
#[derive(Clone, Debug)]
pub struct AgentSeries {
    nodes: Vec<NodeSamples>,
    keep: SimTime,
}

impl AgentSeries {
    /// Keeps samples newer than `keep` behind the latest.
    pub fn new(nodes: usize, keep: Millis) -> Self {
        AgentSeries { nodes: vec![NodeSamples::default(); nodes], keep: keep.0 }
    }

    /// Every node's instant usage at `t` (cpu millicores, memory bytes).
    pub fn record(&mut self, t: SimTime, usage: &[(f64, f64)]) {
        for (node, &(cpu, memory)) in self.nodes.iter_mut().zip(usage) {
            let counter = match (node.samples.back(), node.counters.back()) {
                (Some(&(t0, cpu0, _)), Some(&c0)) => c0 + (cpu0 + cpu) / 2.0 * (t - t0) as f64,
                _ => 0.0,
            };
            node.samples.push_back((t, cpu, memory));
            node.counters.push_back(counter);
            while node.samples.front().is_some_and(|s| s.0 <= t - self.keep) {
                node.samples.pop_front();
                node.counters.pop_front();
            }
        }
    }

    /// koordlet: the mean of node `i`'s samples in `(at − window, at]`, in percent of
    /// `allocatable`; `None` without a sample there.
    pub fn mean(
        &self,
        i: usize,
        at: SimTime,
        window: Millis,
        allocatable: Resources,
    ) -> Option<(f64, f64)> {
        let inside = self.nodes[i].samples.iter().filter(|s| s.0 > at - window.0 && s.0 <= at);
        let (n, cpu, memory) =
            inside.fold((0usize, 0.0, 0.0), |(n, c, m), s| (n + 1, c + s.1, m + s.2));
        (n > 0).then(|| {
            (
                cpu / n as f64 * 100.0 / allocatable.cpu_millis as f64,
                memory / n as f64 * 100.0 / allocatable.memory_bytes as f64,
            )
        })
    }

    /// metrics-server: cpu as the rate between node `i`'s last two samples and memory at
    /// the last one, in percent of `allocatable`; `None` before the second sample.
    pub fn latest_rate(&self, i: usize, allocatable: Resources) -> Option<(f64, f64)> {
        let node = &self.nodes[i];
        let n = node.samples.len();
        if n < 2 {
            return None;
        }
        let (t1, _, memory) = node.samples[n - 1];
        let (t0, _, _) = node.samples[n - 2];
        let rate = (node.counters[n - 1] - node.counters[n - 2]) / (t1 - t0) as f64;
        Some((
            rate * 100.0 / allocatable.cpu_millis as f64,
            memory * 100.0 / allocatable.memory_bytes as f64,
        ))
    }
}

/// The phase of node `i`'s koordlet reports in `[0, report)`, from the scenario's seed: the
/// agents started at different moments (a SplitMix64 step of seed and index, so adding a
/// node does not move the others).
pub fn report_phase(seed: u64, i: usize, report: Millis) -> SimTime {
    let mut z = seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % report.0.max(1) as u64) as SimTime
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: Resources = Resources::new(1000, 1000);

    #[test]
    fn koordlet_reports_the_mean_of_its_samples_over_the_window() {
        // 1 s samples: 0 m until 0 s, then 500 m (memory the same in bytes).
        let mut a = AgentSeries::new(1, Millis::from_secs(300));
        for t in (-300..=60).map(|s| s * 1000) {
            let u = if t > 0 { 500.0 } else { 0.0 };
            a.record(t, &[(u, u)]);
        }
        // At 60 s the window (−240 s, 60 s] holds 300 samples, 60 of them (1..60 s) at 500:
        // 60 × 500 / 300 = 100 m → 10 %.
        let (cpu, memory) = a.mean(0, 60_000, Millis::from_secs(300), NODE).unwrap();
        assert!((cpu - 10.0).abs() < 1e-9 && (memory - 10.0).abs() < 1e-9, "{cpu} {memory}");
        // a 60 s window at 60 s: all 60 samples at 500 → 50 %
        let (cpu, _) = a.mean(0, 60_000, Millis::from_secs(60), NODE).unwrap();
        assert!((cpu - 50.0).abs() < 1e-9);
        assert_eq!(a.mean(0, -400_000, Millis::from_secs(60), NODE), None);
    }

    #[test]
    fn metrics_server_rates_the_last_two_scrapes() {
        let mut a = AgentSeries::new(1, Millis::from_secs(60));
        a.record(0, &[(200.0, 100.0)]);
        assert_eq!(a.latest_rate(0, NODE), None);
        // 15 s later at 400 m: the trapezoid (200 + 400)/2 = 300 m over the interval → 30 %;
        // memory the last gauge, 300 bytes → 30 %.
        a.record(15_000, &[(400.0, 300.0)]);
        let (cpu, memory) = a.latest_rate(0, NODE).unwrap();
        assert!((cpu - 30.0).abs() < 1e-9 && (memory - 30.0).abs() < 1e-9);
    }

    #[test]
    fn report_phases_spread_over_the_interval_and_are_seeded() {
        let report = Millis::from_secs(60);
        let phases: Vec<SimTime> = (0..100).map(|i| report_phase(7, i, report)).collect();
        assert!(phases.iter().all(|p| (0..60_000).contains(p)));
        // spread: some in each quarter of the minute
        for q in 0..4 {
            assert!(phases.iter().any(|p| p / 15_000 == q), "quarter {q}: {phases:?}");
        }
        assert_eq!(phases[3], report_phase(7, 3, report));
        assert_ne!(phases, (0..100).map(|i| report_phase(8, i, report)).collect::<Vec<_>>());
    }
}
