//! Crane scheduler's Dynamic plugin and its node annotator, written from
//! gocrane/crane-scheduler at c2c05338a5d75c0a6d92bd16a1cf257b48b30ef8 (2023-10-17):
//! `pkg/plugins/dynamic/{plugins,stats}.go` (Filter, Score),
//! `pkg/controller/annotator/{node,binding,event}.go` (annotations, hot value) and
//! `deploy/manifests/dynamic/policy.yaml` (the default policy).
//!
//! The annotator writes, per node and per metric, `"<usage>,<timestamp>"` where usage is the
//! recording rule's value / 100 printed with five decimals and the timestamp has whole seconds.
//! On every metric sync of a node it also writes `node_hot_value`: Σ over the policy's hot-value
//! windows of ⌊bindings on the node in the window / count⌋. The plugin reads only annotations.
//!
//! Times are Unix milliseconds; the places where Crane keeps whole seconds truncate explicitly.

use std::collections::HashMap;

/// Unix time in milliseconds.
pub type UnixMillis = i64;

/// `ExtraActivePeriod` (stats.go): an annotation stays valid for its sync period plus this.
pub const EXTRA_ACTIVE_PERIOD_MS: i64 = 5 * 60 * 1000;
/// `DefautlHotVauleActivePeriod` (stats.go): the hot value annotation's validity, no extra.
pub const HOT_VALUE_ACTIVE_PERIOD_MS: i64 = 5 * 60 * 1000;
/// `BindingHeapSize` default (cmd/controller/app/options/options.go): bindings remembered.
pub const DEFAULT_BINDING_HEAP_SIZE: usize = 1024;
/// `framework.MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;

/// `policy.SyncPolicy`: how often the annotator refreshes one metric on every node.
#[derive(Clone, Debug, PartialEq)]
pub struct SyncPolicy {
    pub name: String,
    pub period_ms: i64,
}

/// `policy.PredicatePolicy`: reject a node whose usage (0..1) is above `max_limit_percent`
/// (a fraction despite the name; 0 disables the check).
#[derive(Clone, Debug, PartialEq)]
pub struct PredicatePolicy {
    pub name: String,
    pub max_limit_percent: f64,
}

/// `policy.PriorityPolicy`: one weighted least-used term of the score.
#[derive(Clone, Debug, PartialEq)]
pub struct PriorityPolicy {
    pub name: String,
    pub weight: f64,
}

/// `policy.HotValuePolicy`: ⌊bindings within `time_range_ms` / `count`⌋ is added to the hot value.
#[derive(Clone, Debug, PartialEq)]
pub struct HotValuePolicy {
    pub time_range_ms: i64,
    pub count: i64,
}

/// `policy.PolicySpec` (pkg/plugins/apis/policy/types.go).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub sync_period: Vec<SyncPolicy>,
    pub predicate: Vec<PredicatePolicy>,
    pub priority: Vec<PriorityPolicy>,
    pub hot_value: Vec<HotValuePolicy>,
}

const MINUTE: i64 = 60 * 1000;

impl Default for Policy {
    /// deploy/manifests/dynamic/policy.yaml: six metrics synced every 3 m (5 m averages),
    /// 15 m (1 h maxima) and 3 h (1 d maxima); thresholds 0.65 / 0.75 on the 5 m and 1 h
    /// metrics; weights 0.2 / 0.3 / 0.5; hot value `[{5m, 5}, {1m, 2}]`.
    fn default() -> Self {
        let metrics = [
            ("cpu_usage_avg_5m", 3 * MINUTE, Some(0.65), 0.2),
            ("cpu_usage_max_avg_1h", 15 * MINUTE, Some(0.75), 0.3),
            ("cpu_usage_max_avg_1d", 180 * MINUTE, None, 0.5),
            ("mem_usage_avg_5m", 3 * MINUTE, Some(0.65), 0.2),
            ("mem_usage_max_avg_1h", 15 * MINUTE, Some(0.75), 0.3),
            ("mem_usage_max_avg_1d", 180 * MINUTE, None, 0.5),
        ];
        Policy {
            sync_period: metrics
                .iter()
                .map(|&(name, period_ms, _, _)| SyncPolicy { name: name.into(), period_ms })
                .collect(),
            predicate: metrics
                .iter()
                .filter_map(|&(name, _, limit, _)| {
                    limit.map(|max_limit_percent| PredicatePolicy {
                        name: name.into(),
                        max_limit_percent,
                    })
                })
                .collect(),
            priority: metrics
                .iter()
                .map(|&(name, _, _, weight)| PriorityPolicy { name: name.into(), weight })
                .collect(),
            hot_value: vec![
                HotValuePolicy { time_range_ms: 5 * MINUTE, count: 5 },
                HotValuePolicy { time_range_ms: MINUTE, count: 2 },
            ],
        }
    }
}

/// One annotation as the plugin parses it: the value and the whole second it was written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Annotation {
    pub value: f64,
    /// Whole seconds (utils.TimeFormat has no fraction), as Unix seconds.
    pub written_at_secs: i64,
}

/// A node's annotations: metric name → annotation, and `node_hot_value`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeAnnotations {
    pub metrics: HashMap<String, Annotation>,
    pub hot_value: Option<Annotation>,
}

/// Whole Unix seconds of `t`, as Go's `time.Format(TimeFormat)` and `Time.Unix()` keep them.
pub fn unix_secs(t: UnixMillis) -> i64 {
    t.div_euclid(1000)
}

/// The value the annotator writes for a recording rule's sample `percent` (0..100).
// annotator/node.go annotateNodeLoad → prometheus.go QueryByNodeIP: the query is
// `metric{instance=~ip} / 100`, and `query` maps a negative or NaN sample to 0 and prints it
// with `strconv.FormatFloat(v, 'f', 5, 64)`: five decimals, rounded to nearest.
pub fn annotation_value(percent: f64) -> f64 {
    let v = percent / 100.0;
    let v = if v < 0.0 || v.is_nan() { 0.0 } else { v };
    // Printing with five decimals and parsing back (stats.go getResourceUsage's ParseFloat)
    // is what the plugin sees; Rust's `{:.5}` rounds to nearest like Go's 'f' format.
    format!("{v:.5}").parse().unwrap_or(0.0)
}

/// The annotation the annotator writes at `now` for a sample `percent`.
pub fn annotate(percent: f64, now: UnixMillis) -> Annotation {
    Annotation { value: annotation_value(percent), written_at_secs: unix_secs(now) }
}

/// How long an annotation of `metric` stays valid, or `None` when the policy has no sync
/// period for it (then Filter skips the metric and Score counts it as fully used).
// stats.go getActiveDuration: the metric's sync period + ExtraActivePeriod; a zero period
// is an error.
pub fn active_duration_ms(sync: &[SyncPolicy], metric: &str) -> Option<i64> {
    sync.iter()
        .find(|p| p.name == metric && p.period_ms != 0)
        .map(|p| p.period_ms + EXTRA_ACTIVE_PERIOD_MS)
}

/// Whether an annotation written at `written_at_secs` is still valid at `now`.
// stats.go inActivePeriod: `now.Before(updateTime.Add(activeDuration))`, strictly before,
// with the update time parsed back from whole seconds.
pub fn in_active_period(written_at_secs: i64, active_ms: i64, now: UnixMillis) -> bool {
    now < written_at_secs * 1000 + active_ms
}

/// A valid, non-negative usage from an annotation, or `None` (missing, expired, negative).
// stats.go getResourceUsage.
pub fn resource_usage(anno: Option<&Annotation>, active_ms: i64, now: UnixMillis) -> Option<f64> {
    let a = anno?;
    if !in_active_period(a.written_at_secs, active_ms, now) || a.value < 0.0 {
        return None;
    }
    Some(a.value)
}

/// Filter: `Err(reason)` when any predicate metric's valid usage is above its limit.
/// DaemonSet pods pass. A missing or expired annotation passes (Crane cannot tell).
// plugins.go DynamicScheduler.Filter and stats.go isOverLoad: `usage > MaxLimitPecent`,
// strictly above; a limit of 0 disables the metric; a metric without a sync period is skipped.
pub fn filter(
    policy: &Policy,
    node: &str,
    anno: &NodeAnnotations,
    daemonset: bool,
    now: UnixMillis,
) -> Result<(), String> {
    if daemonset {
        return Ok(());
    }
    for p in &policy.predicate {
        let Some(active) = active_duration_ms(&policy.sync_period, &p.name) else { continue };
        let Some(usage) = resource_usage(anno.metrics.get(&p.name), active, now) else { continue };
        if p.max_limit_percent != 0.0 && usage > p.max_limit_percent {
            return Err(format!("Load[{}] of node[{}] is too high", p.name, node));
        }
    }
    Ok(())
}

/// The weighted least-used part of the score, before the hot value.
// stats.go getNodeScore / getScore: Σ (1 − usage) × weight × 100 over the priority metrics,
// a metric without a valid annotation adding 0 to the sum but its weight to Σweight (so it
// counts as fully used), then `int(score / weight)` — truncation toward zero. No priority
// metrics: 0. Sums run in policy order, as Go's loop does.
pub fn node_score(policy: &Policy, anno: &NodeAnnotations, now: UnixMillis) -> i64 {
    if policy.priority.is_empty() {
        return 0;
    }
    let (mut score, mut weight) = (0.0f64, 0.0f64);
    for p in &policy.priority {
        let term = active_duration_ms(&policy.sync_period, &p.name)
            .and_then(|active| resource_usage(anno.metrics.get(&p.name), active, now))
            .map(|usage| (1.0 - usage) * p.weight * MAX_NODE_SCORE as f64)
            .unwrap_or(0.0);
        weight += p.weight;
        score += term;
    }
    (score / weight) as i64
}

/// The hot value the plugin reads: 0 when missing or older than five minutes.
// stats.go getNodeHotValue: getResourceUsage with DefautlHotVauleActivePeriod (no extra period).
pub fn hot_value(anno: &NodeAnnotations, now: UnixMillis) -> f64 {
    resource_usage(anno.hot_value.as_ref(), HOT_VALUE_ACTIVE_PERIOD_MS, now).unwrap_or(0.0)
}

/// Score: node score minus ten times the hot value, clamped to 0..100.
// plugins.go DynamicScheduler.Score: `score - int(hotValue*10)` (Go int conversion truncates),
// then utils.NormalizeScore clamps to [MinNodeScore, MaxNodeScore].
pub fn score(policy: &Policy, anno: &NodeAnnotations, now: UnixMillis) -> i64 {
    let s = node_score(policy, anno, now) - (hot_value(anno, now) * 10.0) as i64;
    s.clamp(0, MAX_NODE_SCORE)
}

/// One binding the annotator learned from a `Scheduled` event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub node: String,
    /// event.go translateEventToBinding: the event's LastTimestamp (or EventTime), `.Unix()`.
    pub timestamp_secs: i64,
}

/// binding.go BindingRecords: a bounded min-heap of recent bindings, oldest evicted first.
#[derive(Clone, Debug)]
pub struct BindingRecords {
    size: usize,
    gc_time_range_ms: i64,
    bindings: Vec<Binding>,
}

impl BindingRecords {
    /// controller.go NewNodeAnnotator: the GC horizon is the longest hot-value window.
    pub fn new(size: usize, policy: &Policy) -> Self {
        let gc_time_range_ms = policy.hot_value.iter().map(|h| h.time_range_ms).max().unwrap_or(0);
        BindingRecords { size, gc_time_range_ms, bindings: Vec::new() }
    }

    // binding.go AddBinding: when the heap is full, heap.Pop drops the smallest timestamp.
    pub fn add(&mut self, node: &str, at: UnixMillis) {
        if self.size == 0 {
            return;
        }
        if self.bindings.len() == self.size
            && let Some(i) = self.oldest()
        {
            self.bindings.swap_remove(i);
        }
        self.bindings.push(Binding { node: node.into(), timestamp_secs: unix_secs(at) });
    }

    fn oldest(&self) -> Option<usize> {
        (0..self.bindings.len()).min_by_key(|&i| self.bindings[i].timestamp_secs)
    }

    /// Bindings on `node` strictly newer than `now − range`, in whole seconds.
    // binding.go GetLastNodeBindingCount: `binding.Timestamp > now.Unix() - int64(range.Seconds())`.
    pub fn count(&self, node: &str, range_ms: i64, now: UnixMillis) -> i64 {
        let timeline = unix_secs(now) - range_ms / 1000;
        self.bindings.iter().filter(|b| b.timestamp_secs > timeline && b.node == node).count()
            as i64
    }

    // binding.go BindingsGC (run every minute): drop bindings at or before `now − range`.
    pub fn gc(&mut self, now: UnixMillis) {
        if self.gc_time_range_ms == 0 {
            return;
        }
        let timeline = unix_secs(now) - self.gc_time_range_ms / 1000;
        self.bindings.retain(|b| b.timestamp_secs > timeline);
    }

    pub fn len(&self) -> usize {
        self.bindings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty()
    }
}

/// The hot value the annotator writes for `node` at `now`.
// node.go annotateNodeHotValue: Σ over HotValue policies of `count / p.Count` (Go integer
// division, truncating); written as an integer string.
pub fn hot_value_of(records: &BindingRecords, policy: &Policy, node: &str, now: UnixMillis) -> i64 {
    policy
        .hot_value
        .iter()
        .filter(|h| h.count != 0)
        .map(|h| records.count(node, h.time_range_ms, now) / h.count)
        .sum()
}

#[cfg(test)]
mod tests;
