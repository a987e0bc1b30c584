//! Koordinator's LoadAwareScheduling plugin, written from koordinator-sh/koordinator at
//! a7a1b76bbf81abd26f9c377de1f31a60dd965f6e (v1.8.0-61): `pkg/scheduler/plugins/loadaware/
//! {load_aware,pod_assign_cache,helper}.go`, `estimator/default_estimator.go`, the plugin's
//! defaults in `pkg/scheduler/apis/config/v1/defaults.go`, and koordlet's report loop in
//! `pkg/koordlet/statesinformer/impl/states_nodemetric.go` (usage averaged over 300 s,
//! reported every 60 s).
//!
//! Estimated node usage = the NodeMetric's node usage + for every pod assigned to the node
//! that the report may not cover (not in the report's pod list, or assigned after
//! `updateTime − reportInterval`) `max(0, estimate − reported pod usage)` per resource, plus
//! the incoming pod's estimate. Filter rejects above usage thresholds (65 % cpu, 95 % memory),
//! Score is least-used weighted 1:1 in integer arithmetic.
//!
//! Reproduced: the default (non-prod, non-aggregated) path. Times are Unix milliseconds.

use std::collections::HashMap;

/// Unix time in milliseconds.
pub type UnixMillis = i64;

/// estimator/default_estimator.go `DefaultMilliCPURequest`: a pod with no cpu request or limit.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 250;
/// estimator/default_estimator.go `DefaultMemoryRequest`: 200 MiB.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;
/// load_aware.go `DefaultNodeMetricReportInterval`, when the NodeMetric's collect policy has none.
pub const DEFAULT_NODE_METRIC_REPORT_INTERVAL_SECS: i64 = 60;
/// states_nodemetric.go `defaultAggregateDurationSeconds`: koordlet averages node usage over this.
pub const KOORDLET_AGGREGATE_DURATION_SECS: i64 = 300;
/// `framework.MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;
/// load_aware.go `ErrReasonNodeMetricExpired`.
pub const REASON_NODE_METRIC_EXPIRED: &str = "node(s) nodeMetric expired";

/// cpu in millicores and memory in bytes (the plugin's ResourceVector over [cpu, memory]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Vec2 {
    pub cpu: i64,
    pub memory: i64,
}

impl Vec2 {
    pub const fn new(cpu: i64, memory: i64) -> Self {
        Vec2 { cpu, memory }
    }

    fn add(self, o: Vec2) -> Vec2 {
        Vec2 { cpu: self.cpu + o.cpu, memory: self.memory + o.memory }
    }
}

/// `LoadAwareSchedulingArgs` after `SetDefaults_LoadAwareSchedulingArgs` (the fields that act
/// on the default path).
#[derive(Clone, Debug, PartialEq)]
pub struct Args {
    pub filter_expired_node_metrics: bool,
    pub enable_schedule_when_node_metrics_expired: bool,
    /// `None` or 0: never expired by age (a nil update time still is).
    pub node_metric_expiration_secs: Option<i64>,
    pub resource_weights: Vec2,
    pub dominant_resource_weight: i64,
    /// Percent; 0 disables a resource.
    pub usage_thresholds: Vec2,
    /// Percent.
    pub estimated_scaling_factors: Vec2,
    /// `EstimatedSecondsAfterPodScheduled`: keep estimating a pod this long after it was
    /// scheduled even when the report covers it. Unset by default.
    pub estimated_seconds_after_pod_scheduled: Option<i64>,
}

impl Default for Args {
    // apis/config/v1/defaults.go: FilterExpiredNodeMetrics true,
    // EnableScheduleWhenNodeMetricsExpired false, NodeMetricExpirationSeconds 180, weights
    // cpu 1 / memory 1, thresholds cpu 65 / memory 95, scaling factors cpu 85 / memory 70.
    fn default() -> Self {
        Args {
            filter_expired_node_metrics: true,
            enable_schedule_when_node_metrics_expired: false,
            node_metric_expiration_secs: Some(180),
            resource_weights: Vec2::new(1, 1),
            dominant_resource_weight: 0,
            usage_thresholds: Vec2::new(65, 95),
            estimated_scaling_factors: Vec2::new(85, 70),
            estimated_seconds_after_pod_scheduled: None,
        }
    }
}

impl Args {
    /// koord-scheduler's shipped LoadAwareScheduling args: the Helm chart users install,
    /// koordinator-sh/charts `versions/v1.8.0/templates/koord-scheduler-config.yaml`
    /// (filterExpiredNodeMetrics false, nodeMetricExpirationSeconds 300, weights 1 / 1,
    /// thresholds 65 / 95, factors 85 / 70). The repository's own
    /// `config/manager/scheduler-config.yaml` sets thresholds 0 / 0 (no load filter); the
    /// chart is what its install docs use.
    pub fn koord_scheduler_chart() -> Args {
        Args {
            filter_expired_node_metrics: false,
            node_metric_expiration_secs: Some(300),
            ..Args::default()
        }
    }
}

/// A pod's requests and limits as `resourceapi.PodRequests` / `PodLimits` return them
/// (containers summed, init containers and overhead folded in by the caller); 0 when unset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodResources {
    pub requests: Vec2,
    pub limits: Vec2,
}

// default_estimator.go estimatedUsedByResource: q = the limit when it is larger than the
// request, else the request; q = 0 → the default request *unscaled* (250m, 200 MiB);
// otherwise `int64(math.Round(float64(q) * float64(factor) / 100))`, capped at the limit when
// one is set.
fn estimate_one(request: i64, limit: i64, factor: i64, default: i64) -> i64 {
    let q = if limit > request { limit } else { request };
    if q == 0 {
        return default;
    }
    let e = (q as f64 * factor as f64 / 100.0).round() as i64;
    if limit > 0 && e > limit { limit } else { e }
}

/// The estimated usage of a pod.
// default_estimator.go DefaultEstimator.EstimatePod / estimatedPodUsed.
pub fn estimate_pod(args: &Args, pod: &PodResources) -> Vec2 {
    let f = args.estimated_scaling_factors;
    Vec2 {
        cpu: estimate_one(pod.requests.cpu, pod.limits.cpu, f.cpu, DEFAULT_MILLI_CPU_REQUEST),
        memory: estimate_one(
            pod.requests.memory,
            pod.limits.memory,
            f.memory,
            DEFAULT_MEMORY_REQUEST,
        ),
    }
}

/// What the scheduler holds of a node's NodeMetric.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeMetric {
    /// `status.updateTime` (metav1.Time: whole seconds on the wire); `None` when unset.
    pub update_time: Option<UnixMillis>,
    /// `spec.collectPolicy.reportIntervalSeconds`; `None`: the 60 s default.
    pub report_interval_secs: Option<i64>,
    /// `status.nodeMetric.nodeUsage` (the usage the score path selects); `None` when absent,
    /// then the full estimates of every assigned pod stand in for it.
    pub node_usage: Option<Vec2>,
    /// `status.podsMetric`: pod key (namespace/name) → reported usage.
    pub pod_usages: HashMap<String, Vec2>,
}

/// A pod in the podAssignCache.
#[derive(Clone, Debug, PartialEq)]
pub struct AssignedPod {
    /// namespace/name, the key the report's pod list uses.
    pub key: String,
    /// pod_assign_cache.go assign: the PodScheduled condition's time when set (whole
    /// seconds), else the scheduler's clock at Reserve.
    pub timestamp: UnixMillis,
    pub estimated: Vec2,
}

/// Whether the NodeMetric is too old to use at `now`.
// helper.go isNodeMetricExpired: no metric or no update time, or expiration > 0 and
// `time.Since(updateTime) >= expiration`.
pub fn is_node_metric_expired(
    m: Option<&NodeMetric>,
    expiration_secs: i64,
    now: UnixMillis,
) -> bool {
    match m.and_then(|m| m.update_time) {
        None => true,
        Some(t) => expiration_secs > 0 && now - t >= expiration_secs * 1000,
    }
}

/// Node usage plus the estimates of assigned pods the report may not cover yet.
// pod_assign_cache.go GetNodeMetricAndEstimatedOfExisting and nodeInfo.addPod: with node
// usage, `usage + Σ AddDelta(estimate, podUsage)` over pods for which `should` holds —
// podUsage missing, or `updateTime − reportInterval` strictly before the pod's timestamp, or
// the estimation deadline (timestamp + EstimatedSecondsAfterPodScheduled) after updateTime;
// AddDelta adds `max(0, e − u)` per resource (`e` when u is missing). Without node usage,
// the full estimates of all assigned pods.
pub fn estimated_of_existing(args: &Args, m: &NodeMetric, pods: &[AssignedPod]) -> Vec2 {
    let Some(usage) = m.node_usage else {
        return pods.iter().fold(Vec2::default(), |acc, p| acc.add(p.estimated));
    };
    let update = m.update_time.unwrap_or(i64::MIN / 2);
    let interval =
        m.report_interval_secs.unwrap_or(DEFAULT_NODE_METRIC_REPORT_INTERVAL_SECS) * 1000;
    let mut est = usage;
    for p in pods {
        let reported = m.pod_usages.get(&p.key);
        let deadline_after_update = args
            .estimated_seconds_after_pod_scheduled
            .is_some_and(|s| s > 0 && p.timestamp + s * 1000 > update);
        let should = reported.is_none() || update - interval < p.timestamp || deadline_after_update;
        if should {
            let u = reported.copied().unwrap_or_default();
            est.cpu += (p.estimated.cpu - u.cpu).max(0);
            est.memory += (p.estimated.memory - u.memory).max(0);
        }
    }
    est
}

/// Filter: `Err(reason)` to reject. `m`: the node's NodeMetric, `None` when it has none.
// load_aware.go Plugin.Filter: DaemonSet pods pass; no NodeMetric passes (nodes without
// koordlet are not load-aware); an expired one rejects unless EnableScheduleWhenNodeMetrics
// Expired; then filterNodeUsage: per resource with a threshold and an allocatable,
// `int64(math.Round(estimated / allocatable × 100)) > threshold` rejects, cpu first.
pub fn filter(
    args: &Args,
    allocatable: Vec2,
    m: Option<&NodeMetric>,
    pods: &[AssignedPod],
    incoming: &PodResources,
    daemonset: bool,
    now: UnixMillis,
) -> Result<(), String> {
    let t = args.usage_thresholds;
    if daemonset || (t.cpu == 0 && t.memory == 0) {
        return Ok(());
    }
    let Some(metric) = m else { return Ok(()) };
    if args.filter_expired_node_metrics
        && let Some(exp) = args.node_metric_expiration_secs
        && is_node_metric_expired(m, exp, now)
    {
        if !args.enable_schedule_when_node_metrics_expired {
            return Err(REASON_NODE_METRIC_EXPIRED.into());
        }
        return Ok(());
    }
    let est = estimated_of_existing(args, metric, pods).add(estimate_pod(args, incoming));
    for (name, threshold, used, total) in [
        ("cpu", t.cpu, est.cpu, allocatable.cpu),
        ("memory", t.memory, est.memory, allocatable.memory),
    ] {
        if threshold == 0 || total == 0 {
            continue;
        }
        let usage = (used as f64 / total as f64 * 100.0).round() as i64;
        if usage > threshold {
            return Err(format!("node(s) {name} usage exceed threshold"));
        }
    }
    Ok(())
}

/// `(capacity − used) × 100 / capacity` in integers; 0 when over capacity or no capacity.
// load_aware.go leastUsedScore.
pub fn least_used_score(used: i64, capacity: i64) -> i64 {
    if capacity == 0 || used > capacity {
        return 0;
    }
    (capacity - used) * MAX_NODE_SCORE / capacity
}

/// The weighted score of estimated usage `used` on `allocatable`.
// load_aware.go loadAwareSchedulingScorer: Σ score × weight (+ the smallest score × the
// dominant weight) / Σ weight, integer division; 0 when Σ weight ≤ 0.
pub fn scorer(args: &Args, used: Vec2, allocatable: Vec2) -> i64 {
    let dw = args.dominant_resource_weight;
    let (mut node_score, mut dominant, mut weight_sum) = (0i64, 0i64, 0i64);
    if dw != 0 {
        dominant = MAX_NODE_SCORE;
        weight_sum = dw;
    }
    for (w, u, c) in [
        (args.resource_weights.cpu, used.cpu, allocatable.cpu),
        (args.resource_weights.memory, used.memory, allocatable.memory),
    ] {
        let s = least_used_score(u, c);
        node_score += s * w;
        weight_sum += w;
        dominant = dominant.min(s);
    }
    node_score += dominant * dw;
    if weight_sum <= 0 { 0 } else { node_score / weight_sum }
}

/// Score of one node. `m`: the node's NodeMetric, `None` when it has none.
// load_aware.go Plugin.Score: no weights → 0; no NodeMetric → 0; expired (whatever
// FilterExpiredNodeMetrics says) → 0; else the scorer over existing + incoming estimates.
pub fn score(
    args: &Args,
    allocatable: Vec2,
    m: Option<&NodeMetric>,
    pods: &[AssignedPod],
    incoming: &PodResources,
    now: UnixMillis,
) -> i64 {
    let w = args.resource_weights;
    if args.dominant_resource_weight == 0 && w.cpu == 0 && w.memory == 0 {
        return 0;
    }
    let Some(metric) = m else { return 0 };
    if let Some(exp) = args.node_metric_expiration_secs
        && is_node_metric_expired(m, exp, now)
    {
        return 0;
    }
    let est = estimated_of_existing(args, metric, pods).add(estimate_pod(args, incoming));
    scorer(args, est, allocatable)
}

#[cfg(test)]
mod tests;
