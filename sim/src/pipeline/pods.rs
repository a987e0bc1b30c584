//! The per-pod usage series the learned estimate reads (docs/design.md#learned-estimate),
//! modelled as Prometheus records them and the collector asks for them — beside the node
//! series of `pipeline.rs`, with the same scrape interval, rate window, delay and outages:
//!
//! 1. **scrape** every `scrapeInterval` (with the node targets): cAdvisor's per-pod cpu
//!    counter (`container_cpu_usage_seconds_total` summed over the pod's containers: the
//!    integral of the pod's usage, trapezoids between scrapes) and its memory working set
//!    gauge. The kubelet's counter keeps counting while Prometheus is down; only the samples
//!    are lost.
//! 2. **recording rules** every `podRuleInterval` (1 m): `waterline:pod_cpu_usage:rate5m`,
//!    the counter's increase over the samples inside `(T − 5m, T]` divided by their span (no
//!    extrapolation, none with fewer than two samples — the node rule's arithmetic), and
//!    `waterline:pod_memory_working_set:bytes`, the latest scrape within Prometheus' 5 m
//!    lookback. A rule at `T` sees the cluster as it was at `T − delay`; during an outage
//!    nothing is recorded.
//! 3. **the collector's refresh** every `estimator.learn.refresh`: per running pod,
//!    `quantile_over_time(q, series[window])` (Prometheus' interpolated quantile) and
//!    `count_over_time(series[window])` over the recorded samples in `(R − window, R]`;
//!    during an outage the query fails and the strategy keeps the table it has.
//!
//! Memory stays bounded: per running pod, its scrapes of the last rate window (plus the
//! delay) and its recorded samples of the window — at the rule's 1 m step 1,440 f32 per
//! resource for 24 h. A deleted pod's series are dropped with it: the collector reads only
//! the pods its watch has running.

use std::collections::{BTreeMap, VecDeque};

use waterline_core::Millis;
use waterline_core::learn::Series;

use crate::model::SimTime;
use crate::scenario::Pipeline;
use crate::strategy::PodSeriesNeed;

/// The recording rule's rate window (`rate5m`) and Prometheus' instant-query lookback.
const RATE_WINDOW: SimTime = 5 * 60_000;
const LOOKBACK: SimTime = 5 * 60_000;

#[derive(Clone, Copy, Debug)]
struct Scrape {
    t: SimTime,
    /// Busy cpu, millicore-milliseconds since the first scrape.
    cpu_counter: f64,
    memory_bytes: f64,
}

/// One evaluation of the two rules for one pod.
#[derive(Clone, Copy, Debug)]
struct Recorded {
    t: SimTime,
    /// Millicores.
    cpu: Option<f32>,
    /// Bytes.
    memory: Option<f32>,
}

#[derive(Default)]
struct Track {
    scrapes: VecDeque<Scrape>,
    /// The last scrape's instant usage, for the counter's trapezoid.
    last: Option<(SimTime, f64)>,
    counter: f64,
    recorded: VecDeque<Recorded>,
}

/// One pod's answer to the refresh's queries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PodAnswer {
    /// The pod's index in the run.
    pub pod: usize,
    pub cpu: Option<Series>,
    pub memory: Option<Series>,
}

/// Every running pod's recorded series, keyed by the pod's index in the run (ordered, so a
/// refresh answers in the same order every run).
pub struct PodSeries {
    config: Pipeline,
    need: PodSeriesNeed,
    pods: BTreeMap<usize, Track>,
    keep_scrapes: SimTime,
}

impl PodSeries {
    pub fn new(config: Pipeline, need: PodSeriesNeed) -> Self {
        let keep_scrapes = RATE_WINDOW + config.delay.0 + config.scrape_interval.0;
        PodSeries { config, need, pods: BTreeMap::new(), keep_scrapes }
    }

    /// How often the per-pod rules are evaluated.
    pub fn pod_rule_interval(&self) -> Millis {
        self.config.pod_rule_interval
    }

    /// How often the collector asks for the summaries.
    pub fn refresh(&self) -> Millis {
        self.need.refresh
    }

    /// A scrape at `t` of the running pods whose series are recorded: (pod, cpu millicores,
    /// memory bytes). A pod not seen before starts its series here.
    pub fn scrape(&mut self, t: SimTime, usage: impl IntoIterator<Item = (usize, f64, f64)>) {
        let down = self.config.down_at(t);
        for (pod, cpu, memory) in usage {
            let track = self.pods.entry(pod).or_default();
            if let Some((t0, cpu0)) = track.last {
                track.counter += (cpu0 + cpu) / 2.0 * (t - t0) as f64;
            }
            track.last = Some((t, cpu));
            if down {
                continue;
            }
            track.scrapes.push_back(Scrape { t, cpu_counter: track.counter, memory_bytes: memory });
            while track.scrapes.front().is_some_and(|s| s.t <= t - self.keep_scrapes) {
                track.scrapes.pop_front();
            }
        }
    }

    /// The pod was deleted: its series leave with it.
    pub fn stop(&mut self, pod: usize) {
        self.pods.remove(&pod);
    }

    /// The per-pod rules evaluated at `t`.
    pub fn record(&mut self, t: SimTime) {
        if self.config.down_at(t) {
            return;
        }
        let seen = t - self.config.delay.0;
        let window = self.need.window.0;
        for track in self.pods.values_mut() {
            let mut inside =
                track.scrapes.iter().filter(|s| s.t > seen - RATE_WINDOW && s.t <= seen);
            let first = inside.next();
            let last = inside.next_back();
            let cpu = match (first, last) {
                (Some(a), Some(b)) if b.t > a.t => {
                    Some(((b.cpu_counter - a.cpu_counter) / (b.t - a.t) as f64) as f32)
                }
                _ => None,
            };
            let memory = track
                .scrapes
                .iter()
                .rev()
                .find(|s| s.t <= seen)
                .filter(|s| seen - s.t <= LOOKBACK)
                .map(|s| s.memory_bytes as f32);
            if cpu.is_some() || memory.is_some() {
                track.recorded.push_back(Recorded { t, cpu, memory });
            }
            while track.recorded.front().is_some_and(|r| r.t <= t - window) {
                track.recorded.pop_front();
            }
        }
    }

    /// The refresh at `t`: each running pod with a sample in `(t − window, t]`, its quantile
    /// and count per resource; `None` while Prometheus is down (the query fails).
    pub fn answers(&self, t: SimTime) -> Option<Vec<PodAnswer>> {
        if self.config.down_at(t) {
            return None;
        }
        let from = t - self.need.window.0;
        let q = self.need.quantile;
        let mut values = Vec::new();
        let mut summarise = |track: &Track, pick: fn(&Recorded) -> Option<f32>| {
            values.clear();
            values
                .extend(track.recorded.iter().filter(|r| r.t > from && r.t <= t).filter_map(pick));
            quantile_over_time(q, &mut values)
                .map(|usage| Series { usage, samples: values.len() as u64 })
        };
        let answers = self
            .pods
            .iter()
            .filter_map(|(&pod, track)| {
                let cpu = summarise(track, |r| r.cpu);
                let memory = summarise(track, |r| r.memory);
                (cpu.is_some() || memory.is_some()).then_some(PodAnswer { pod, cpu, memory })
            })
            .collect();
        Some(answers)
    }
}

/// PromQL's `quantile_over_time` (promql/quantile.go `quantile`): the values sorted, the
/// rank `q · (n − 1)`, linear between the two neighbours; `None` without values.
pub fn quantile_over_time(q: f64, values: &mut [f32]) -> Option<f64> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * (n - 1) as f64;
    let lower = rank.floor() as usize;
    let weight = rank - rank.floor();
    let (_, &mut low, above) = values.select_nth_unstable_by(lower, f32::total_cmp);
    // The upper neighbour is the smallest value above the lower one's place.
    let high = above.iter().copied().min_by(f32::total_cmp).unwrap_or(low);
    Some(f64::from(low) * (1.0 - weight) + f64::from(high) * weight)
}

#[cfg(test)]
mod tests;
