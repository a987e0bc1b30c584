//! The policy: which metrics to read, how to score them, how to estimate pods, and what to
//! do with stale data. One policy file is shared by the collector and the scorer.

mod file;

use std::collections::BTreeMap;

use crate::ledger::{DepartureCredit, LedgerWindow};
use crate::time::Millis;

pub use file::{PolicyError, metric_field_error, parse_policy};

/// Which node resource a metric measures; decides which ledger and incoming-pod estimate
/// is added to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    Cpu,
    Memory,
    /// Disk, network, …: no estimate is added to the observed value.
    Other,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MetricSpec {
    pub name: String,
    pub resource: Resource,
    /// PromQL evaluated once per period for the whole cluster.
    pub query: String,
    pub period: Millis,
    pub weight: f64,
    /// Filter rejects a node whose predicted value exceeds this percentage.
    pub filter_above: Option<f64>,
    /// Samples older than this are stale.
    pub max_age: Millis,
    /// The averaging window inside the query: a new pod shows fully in the value this long
    /// after it starts (5 m for a 5 m average, and for a 1 h maximum of the 5 m average).
    pub window: Millis,
    /// How long a placement counts toward this metric's predicted value: until the metric
    /// can show the pod (`derived_absorb_window` unless the file sets it).
    pub absorb_window: Millis,
    /// Whether a departure lowers this metric's prediction (docs/policy.md#departures):
    /// `departures:` in the file, `hold` unless it says `credit` (docs/policy.md#departures).
    pub departures: DepartureCredit,
    /// What the query returns; only `Percent` values are clamped to 0..100 by the collector.
    pub unit: Unit,
    /// Multiplies the query's value into percent: 1 for percent, 100 for a ratio, `scale`,
    /// or `100 / max` for a raw value with a capacity. Unused by `MaxOfCandidates`, which is
    /// scale-free.
    pub to_percent: f64,
    pub normalize: Normalize,
    pub direction: Direction,
    /// This metric's own curve; `None`: the policy's.
    pub curve: Option<Curve>,
}

/// What a metric's query returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// 0..100 (the default and the shipped recording rules).
    Percent,
    /// 0..1, multiplied by 100.
    Ratio,
    /// Anything else (bytes, bytes per second, a count): made a percent by `max` or `scale`,
    /// or made relative by `normalize: maxOfCandidates`.
    Raw,
}

/// How a metric's value (in percent after its unit) becomes the level the curve reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Normalize {
    /// The value is already a share of the node (`percent`).
    Percent,
    /// `value ÷ the highest fresh value among this Score request's candidates × 100`: the
    /// busiest candidate reads 100 % and an idle one 0 % (the network-traffic plugins). The
    /// set is the candidates named in the request that the snapshot knows, whose sample is
    /// fresh (unknown, stale and breaker-tripped ones are left out and get the stale score);
    /// one candidate reads 100 %; a highest value of 0 reads 0 % for every candidate.
    MaxOfCandidates,
}

/// Which way a metric's value points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The value is usage: higher is busier (the default).
    LowerIsBetter,
    /// The value is headroom (available memory, free disk): the curve reads `100 − level`.
    HigherIsBetter,
}

/// How metric and node scores are rounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// The weighted mean rounded half away from zero.
    Nearest,
    /// Every metric's curve score and the node score truncated toward zero: Koordinator's
    /// integer arithmetic.
    Truncate,
}

/// The averaging window of a metric that does not name one: the 5 m of every default query.
pub const DEFAULT_METRIC_WINDOW: Millis = Millis(5 * 60_000);

/// How long a placement must stay in the ledger for a metric: its averaging window (the pod
/// reaches the average), plus one poll period (the collector reads the new value), plus the
/// scrape and recording-rule lag. 5 m + 30 s + 90 s = 7 m for the 5 m metrics; the 1 h and
/// 1 d maxima are polled every 5 and 30 minutes, so their pods stay 11.5 and 36.5 minutes —
/// one absorb window for all (7 m) dropped pods before those samples could show them.
/// Saturates, as [`auto_max_age`] does.
pub fn derived_absorb_window(window: Millis, period: Millis, lag: Millis) -> Millis {
    Millis(window.0.saturating_add(period.0).saturating_add(lag.0))
}

/// Whether a metric reads a maximum over time, by its name or query — a `max` word of a
/// metric or rule name (`cpu_usage_max_avg_1h`, `waterline:node_cpu_usage:max_avg1h`,
/// `max_over_time(…)`, a trailing `_max`). Such a metric keeps reading a departed pod's peak
/// until its span has passed, so `departures: credit` on it is refused. `max(…)` and
/// `max by (…)`, aggregations across series at one instant, are not a maximum over time and
/// do not count.
pub fn reads_maximum(name: &str, query: &str) -> bool {
    let word_max = |text: &str| {
        text.match_indices("max").any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + 3..].chars().next();
            !before.is_some_and(|c| c.is_ascii_alphanumeric())
                && matches!(after, None | Some('_' | ':'))
        })
    };
    word_max(name) || word_max(query)
}

/// One window of Crane's "hot value": every `count` bindings within `window` add one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HotWindow {
    pub window: Millis,
    pub count: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Curve {
    /// TargetLoadPacking: keep nodes near `target` percent.
    WaterLevel { target: f64 },
    /// `100 − U`.
    LeastUsed,
    /// Crane-compatible: weighted least-used of observed values minus 10 × hot value.
    Crane { hot_windows: Vec<HotWindow> },
}

/// How the metrics' curve scores make one node score.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// `Σ weight × curve / Σ weight`: the combining rule as first written. Below the
    /// target the water-level curve rises with load, so a dimension far below the target
    /// (often memory) rewards stacking pods on a node whose cpu already runs past it.
    WeightedMean,
    /// The weighted mean, capped at the lowest curve score of any water-level metric whose
    /// predicted value is above its target. An overshooting node then scores below the
    /// target's own score (the curve falls under it past the target), while a node below
    /// the target in every dimension scores at least that much — so no dimension is driven
    /// past the target while another node has room in every dimension (`sim/`, SIMULATION.md).
    OvershootDominates,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Estimator {
    pub cpu_factor: f64,
    pub memory_factor: f64,
    pub best_effort_cpu_millis: i64,
    pub best_effort_memory_bytes: i64,
    /// Pricing a pod by what its workload's running pods use (docs/policy.md#learning).
    pub learn: Learn,
}

impl Default for Estimator {
    fn default() -> Self {
        Estimator {
            cpu_factor: 0.85,
            memory_factor: 0.70,
            best_effort_cpu_millis: 250,
            best_effort_memory_bytes: 200 * 1024 * 1024,
            learn: Learn::default(),
        }
    }
}

/// `estimator.learn`: the usage model per workload (`crate::learn`) and how the estimator
/// uses it. The collector reads the queries and the evidence rules; every reader of the
/// policy reads `enabled` and the bounds when it prices a pod.
#[derive(Clone, Debug, PartialEq)]
pub struct Learn {
    pub enabled: bool,
    /// The span each pod's usage is summarised over (the queries' range).
    pub window: Millis,
    /// The quantile of each pod's usage over the window, and of the ratios across pods.
    pub quantile: f64,
    /// How often the collector asks Prometheus again.
    pub refresh: Millis,
    /// The evidence a workload needs before it prices its pods.
    pub min_pods: u32,
    pub min_samples: u64,
    /// A learned ratio is clamped to these before it prices a pod.
    pub min_ratio: f64,
    pub max_ratio: f64,
    /// The most workloads the model holds; the ones with the fewest pods go first.
    pub max_workloads: usize,
    pub queries: LearnQueries,
}

/// The instant queries the collector runs for the model, one per answer, each giving one
/// series per pod with `namespace` and `pod` labels.
#[derive(Clone, Debug, PartialEq)]
pub struct LearnQueries {
    /// Each pod's cpu usage quantile over the window, in cores.
    pub cpu: String,
    /// Each pod's memory working set quantile over the window, in bytes.
    pub memory: String,
    /// How many samples each pod's cpu series has in the window.
    pub cpu_samples: String,
    /// The same for memory.
    pub memory_samples: String,
}

/// The recorded per-pod series the shipped rules make (deploy/prometheus/rules.yaml).
pub const POD_CPU_SERIES: &str = "waterline:pod_cpu_usage:rate5m";
pub const POD_MEMORY_SERIES: &str = "waterline:pod_memory_working_set:bytes";

impl LearnQueries {
    /// The queries over the shipped recording rules for `window` and `quantile`.
    pub fn over_recorded_series(window: Millis, quantile: f64) -> LearnQueries {
        // Millis prints as PromQL reads a range: 24h, 90s, 500ms.
        let range = window;
        LearnQueries {
            cpu: format!("quantile_over_time({quantile}, {POD_CPU_SERIES}[{range}])"),
            memory: format!("quantile_over_time({quantile}, {POD_MEMORY_SERIES}[{range}])"),
            cpu_samples: format!("count_over_time({POD_CPU_SERIES}[{range}])"),
            memory_samples: format!("count_over_time({POD_MEMORY_SERIES}[{range}])"),
        }
    }
}

impl Default for Learn {
    fn default() -> Self {
        let window = Millis::from_secs(24 * 3600);
        let quantile = 0.9;
        Learn {
            enabled: true,
            window,
            quantile,
            refresh: Millis::from_secs(300),
            // Two pods for an hour at the rules' one sample a minute.
            min_pods: 2,
            min_samples: 120,
            min_ratio: 0.1,
            max_ratio: 4.0,
            max_workloads: 20_000,
            queries: LearnQueries::over_recorded_series(window, quantile),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StaleFilter {
    Pass,
    Reject,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StalePolicy {
    pub filter: StaleFilter,
    /// Curve score used for a metric without a fresh sample (and for unknown nodes).
    pub score: f64,
    /// The fleet breaker: when more than this share of the nodes reporting a metric hold a
    /// stale sample of it, the metric is left out for every node (no score, no filter).
    pub breaker_share: f64,
    /// The breaker stays closed while fewer nodes than this report the metric.
    pub breaker_min_nodes: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LedgerPolicy {
    pub enabled: bool,
    /// Scrape interval plus recording-rule lag: part of every metric's derived absorb window.
    pub lag: Millis,
    /// How long a Reserve that no pod watch has confirmed is kept.
    pub reserve_ttl: Millis,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AntiColocation {
    pub label_key: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoreMapping {
    /// `round(score / 10)`.
    Round,
    /// Best candidate → 10, worst → 0, linear in between.
    Rescale,
}

/// Thresholds for the pods at or above a priority (Koordinator's prod/batch split,
/// docs/policy.md#thresholds-per-priority): each replaces the `filterAbove` of the metrics
/// it names, for a pod whose `spec.priority` is at least `min_priority` (and below the
/// next tier's).
#[derive(Clone, Debug, PartialEq)]
pub struct PriorityTier {
    pub min_priority: i32,
    /// (index into `Policy::metrics`, threshold in percent), in the file's order.
    pub filter_above: Vec<(usize, f64)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub metrics: Vec<MetricSpec>,
    pub curve: Curve,
    pub combine: Combine,
    pub estimator: Estimator,
    pub stale: StalePolicy,
    pub ledger: LedgerPolicy,
    pub anti_colocation: Vec<AntiColocation>,
    /// Series labels tried, in order, to find the node a series belongs to.
    pub node_labels: Vec<String>,
    pub extender_score_mapping: ScoreMapping,
    pub rounding: Rounding,
    /// Ordered by `min_priority`, highest first; empty: every pod gets the metrics' own.
    pub priorities: Vec<PriorityTier>,
}

/// Scrape interval and recording-rule evaluation lag of the shipped Prometheus set-up.
pub const DEFAULT_LAG: Millis = Millis(90_000);

/// The default max age of a metric's samples: three missed polls plus a minute. Saturates:
/// a period of millions of years is a valid (if odd) duration, and must not overflow.
pub fn auto_max_age(period: Millis) -> Millis {
    Millis(period.0.saturating_mul(3).saturating_add(60_000))
}

fn default_metric(
    name: &str,
    resource: Resource,
    query: &str,
    period: Millis,
    weight: f64,
    filter_above: Option<f64>,
) -> MetricSpec {
    MetricSpec {
        name: name.into(),
        resource,
        query: query.into(),
        period,
        weight,
        filter_above,
        max_age: auto_max_age(period),
        window: DEFAULT_METRIC_WINDOW,
        absorb_window: derived_absorb_window(DEFAULT_METRIC_WINDOW, period, DEFAULT_LAG),
        departures: DepartureCredit::Hold,
        unit: Unit::Percent,
        to_percent: 1.0,
        normalize: Normalize::Percent,
        direction: Direction::LowerIsBetter,
        curve: None,
    }
}

/// Crane's six metrics (cpu and memory: the 5 m average, the 1 h and 1 d maxima) with its
/// thresholds and weights, reading the recording rules shipped in `deploy/prometheus/`.
pub fn default_metrics() -> Vec<MetricSpec> {
    use Resource::*;
    let (short, hour, day) = (Millis::from_secs(30), Millis::from_mins(5), Millis::from_mins(30));
    vec![
        default_metric(
            "cpu_usage_avg_5m",
            Cpu,
            "waterline:node_cpu_usage:avg5m",
            short,
            0.2,
            Some(65.0),
        ),
        default_metric(
            "cpu_usage_max_avg_1h",
            Cpu,
            "waterline:node_cpu_usage:max_avg1h",
            hour,
            0.3,
            Some(75.0),
        ),
        default_metric(
            "cpu_usage_max_avg_1d",
            Cpu,
            "waterline:node_cpu_usage:max_avg1d",
            day,
            0.5,
            None,
        ),
        default_metric(
            "mem_usage_avg_5m",
            Memory,
            "waterline:node_memory_usage:avg5m",
            short,
            0.2,
            Some(65.0),
        ),
        default_metric(
            "mem_usage_max_avg_1h",
            Memory,
            "waterline:node_memory_usage:max_avg1h",
            hour,
            0.3,
            Some(75.0),
        ),
        default_metric(
            "mem_usage_max_avg_1d",
            Memory,
            "waterline:node_memory_usage:max_avg1d",
            day,
            0.5,
            None,
        ),
    ]
}

pub fn default_hot_windows() -> Vec<HotWindow> {
    vec![
        HotWindow { window: Millis::from_mins(5), count: 5 },
        HotWindow { window: Millis::from_mins(1), count: 2 },
    ]
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            metrics: default_metrics(),
            curve: Curve::WaterLevel { target: 40.0 },
            combine: Combine::OvershootDominates,
            estimator: Estimator::default(),
            stale: StalePolicy {
                filter: StaleFilter::Pass,
                score: 50.0,
                breaker_share: 0.5,
                breaker_min_nodes: 3,
            },
            ledger: LedgerPolicy {
                enabled: true,
                lag: DEFAULT_LAG,
                reserve_ttl: Millis::from_mins(15),
            },
            anti_colocation: Vec::new(),
            node_labels: vec!["node".into(), "nodename".into(), "instance".into()],
            extender_score_mapping: ScoreMapping::Round,
            rounding: Rounding::Nearest,
            priorities: Vec::new(),
        }
    }
}

impl MetricSpec {
    /// How this metric reads the ledger: its absorb window, and whether departures credit it.
    pub fn ledger_window(&self) -> LedgerWindow {
        LedgerWindow {
            absorb: self.absorb_window,
            departures: self.departures,
            credit: self.credit_window(),
        }
    }

    /// How long a departure credits this metric: its absorb window less its averaging
    /// window — the poll period and lag before the metric starts to fall (30 s + 90 s = 2 m
    /// for the default 5 m averages); see `LedgerWindow::credit`.
    pub fn credit_window(&self) -> Millis {
        Millis(self.absorb_window.0.saturating_sub(self.window.0))
    }
}

impl Policy {
    /// This policy with `departures: credit` on every cpu and memory metric that does not
    /// read a maximum over time — what writing it on each average does (docs/policy.md).
    pub fn crediting_departures(mut self) -> Policy {
        for m in &mut self.metrics {
            if m.resource != Resource::Other && !reads_maximum(&m.name, &m.query) {
                m.departures = DepartureCredit::Credit;
            }
        }
        self
    }

    pub fn metric(&self, name: &str) -> Option<&MetricSpec> {
        self.metrics.iter().find(|m| m.name == name)
    }

    /// Filter's threshold of `metrics[index]` for a pod of `priority`. The pod's tier is the
    /// one with the highest `min_priority` at or below its priority; a metric that tier
    /// names takes the tier's threshold, every other metric keeps its own `filterAbove`.
    pub fn filter_above(&self, index: usize, priority: i32) -> Option<f64> {
        let own = self.metrics.get(index).and_then(|m| m.filter_above);
        let Some(tier) = self.priorities.iter().find(|t| t.min_priority <= priority) else {
            return own;
        };
        tier.filter_above.iter().find(|(i, _)| *i == index).map(|(_, limit)| *limit).or(own)
    }

    /// The curve a metric is scored with: its own, else the policy's.
    pub fn curve_of<'a>(&'a self, metric: &'a MetricSpec) -> &'a Curve {
        metric.curve.as_ref().unwrap_or(&self.curve)
    }

    /// The longest window the ledger must remember bindings for (the longest absorb
    /// window, or the largest Crane hot-value window).
    pub fn ledger_horizon(&self) -> Millis {
        let hot = match &self.curve {
            Curve::Crane { hot_windows } => hot_windows.iter().map(|w| w.window).max(),
            _ => None,
        };
        hot.unwrap_or_default().max(self.longest_absorb_window())
    }

    /// The longest of the metrics' absorb windows: how long the newest placement still
    /// counts toward some metric.
    pub fn longest_absorb_window(&self) -> Millis {
        self.metrics.iter().map(|m| m.absorb_window).max().unwrap_or_default()
    }

    /// The labels a ledger entry keeps: only those an anti-colocation rule reads. Every other
    /// label of a pod would cost a `BTreeMap` node (~540 bytes) per entry for nothing — at
    /// 50,000 entries more than the rest of the entry together (docs/benchmarks-history.md §4).
    /// Like the usage estimate, this follows the policy in force when the pod was placed; a re-list
    /// of the pods re-applies the current one.
    pub fn ledger_labels(&self, labels: BTreeMap<String, String>) -> BTreeMap<String, String> {
        labels
            .into_iter()
            .filter(|(key, _)| self.anti_colocation.iter().any(|rule| rule.label_key == *key))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn departures_hold_unless_told_and_only_averages_can_credit() {
        let metrics = default_metrics();
        // Every default metric holds (SIMULATION.md "Departures": a credit by default cost
        // more overload than the pending it saved).
        assert!(metrics.iter().all(|m| m.departures == DepartureCredit::Hold));
        // The four maxima could never credit (`departures: credit` on them is refused).
        let held: Vec<&str> = metrics
            .iter()
            .filter(|m| reads_maximum(&m.name, &m.query))
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(
            held,
            [
                "cpu_usage_max_avg_1h",
                "cpu_usage_max_avg_1d",
                "mem_usage_max_avg_1h",
                "mem_usage_max_avg_1d"
            ]
        );
        assert!(reads_maximum("cpu_peak", "max_over_time(x[1h])"));
        assert!(reads_maximum("cpu_peak", "waterline:node_cpu:max"));
        assert!(reads_maximum("cpu_max", "q"));
        // Across series at one instant, or a word that only contains the letters.
        assert!(!reads_maximum("cpu", "max by (node) (rate(x[5m]))"));
        assert!(!reads_maximum("cpu", "max(rate(x[5m]))"));
        assert!(!reads_maximum("climax_avg", "maximal_avg"));
    }

    #[test]
    fn ledger_entries_keep_only_the_labels_anti_colocation_reads() {
        let labels: BTreeMap<String, String> =
            [("app", "web"), ("group", "g1"), ("pod-template-hash", "abc")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into();
        assert!(Policy::default().ledger_labels(labels.clone()).is_empty());
        let policy = Policy {
            anti_colocation: vec![AntiColocation { label_key: "group".into() }],
            ..Policy::default()
        };
        let kept = policy.ledger_labels(labels);
        assert_eq!(kept, [("group".to_string(), "g1".to_string())].into());
    }
}
