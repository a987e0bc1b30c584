//! Trimaran's TargetLoadPacking Score plugin, written from kubernetes-sigs/scheduler-plugins at
//! 903da7df82cb8794dda8f2d510ba1156111662dd (v0.35.4-devel-37): `pkg/trimaran/targetloadpacking/
//! targetloadpacking.go` (Score, PredictUtilisation), `pkg/trimaran/handler.go`
//! (PodAssignEventHandler, the cache of assigned pods), `pkg/trimaran/collector.go` (the 30 s
//! poll of load-watcher) and `apis/config/v1/defaults.go`; and from paypal/load-watcher v0.2.4
//! (the version scheduler-plugins' go.mod pins; read at 17df8f96): `pkg/watcher/watcher.go`
//! (windows, fetch loop) and `pkg/watcher/internal/metricsprovider/prometheus.go` (queries).
//!
//! TargetLoadPacking has no Filter and scores CPU only:
//! `U = 100 × (node cpu % / 100 × capacity + pod's predicted cpu + predicted cpu of cached pods
//! assigned less than 60 s before the metrics window's end) / capacity`, then the target curve.
//!
//! Times are Unix milliseconds; Trimaran compares whole seconds (`Time.Unix()`).

use std::collections::HashMap;

/// Unix time in milliseconds.
pub type UnixMillis = i64;

/// targetloadpacking.go / handler.go `metricsAgentReportingIntervalSeconds`: a cached pod counts
/// while its assignment is less than this before the metrics window's end.
pub const METRICS_AGENT_REPORTING_INTERVAL_SECS: i64 = 60;
/// handler.go `cacheCleanupIntervalMinutes`: how often the cache is pruned.
pub const CACHE_CLEANUP_INTERVAL_MS: i64 = 5 * 60 * 1000;
/// collector.go `metricsUpdateIntervalSeconds`: the plugin's poll of load-watcher.
pub const COLLECTOR_UPDATE_INTERVAL_MS: i64 = 30 * 1000;
/// watcher.go StartWatching: each window is fetched, then the loop sleeps one minute.
pub const WATCHER_FETCH_SLEEP_MS: i64 = 60 * 1000;
/// watcher.go `FifteenMinutes`: the window the plugin reads (api/client.go
/// GetLatestWatcherMetrics asks for 15 m; 10 m and 5 m are fallbacks while it is empty).
pub const WATCHER_WINDOW_MS: i64 = 15 * 60 * 1000;
/// `framework.MinNodeScore`.
pub const MIN_NODE_SCORE: i64 = 0;

/// `TargetLoadPackingArgs` after `SetDefaults_TargetLoadPackingArgs`.
#[derive(Clone, Debug, PartialEq)]
pub struct Args {
    /// `TargetUtilization`, percent.
    pub target_utilization: i64,
    /// `DefaultRequests` cpu in millicores, for containers with neither request nor limit.
    pub default_requests_millicores: i64,
    /// `DefaultRequestsMultiplier`, applied to a request when there is no limit.
    pub default_requests_multiplier: f64,
}

impl Default for Args {
    // apis/config/v1/defaults.go: DefaultTargetUtilizationPercent = 40,
    // DefaultRequestsMilliCores = 1000, DefaultRequestsMultiplier = "1.5".
    fn default() -> Self {
        Args {
            target_utilization: 40,
            default_requests_millicores: 1000,
            default_requests_multiplier: 1.5,
        }
    }
}

/// A container's cpu, as `resources.requests` / `resources.limits` carry it (None: absent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Container {
    pub cpu_request_millis: Option<i64>,
    pub cpu_limit_millis: Option<i64>,
}

/// What TargetLoadPacking reads of a pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pod {
    pub containers: Vec<Container>,
    /// `spec.overhead` cpu (RuntimeClass), millicores.
    pub overhead_cpu_millis: i64,
}

/// A container's predicted cpu in millicores.
// targetloadpacking.go PredictUtilisation: the limit when one is set; otherwise
// `int64(math.Round(request × multiplier))` when a request is set; otherwise the default.
// Init containers are not read.
pub fn predict_container(args: &Args, c: &Container) -> i64 {
    if let Some(limit) = c.cpu_limit_millis {
        limit
    } else if let Some(request) = c.cpu_request_millis {
        (request as f64 * args.default_requests_multiplier).round() as i64
    } else {
        args.default_requests_millicores
    }
}

/// A pod's predicted cpu: its containers' predictions plus its overhead.
// targetloadpacking.go Score: Σ PredictUtilisation over spec.containers + spec.overhead cpu.
pub fn predict_pod(args: &Args, pod: &Pod) -> i64 {
    pod.containers.iter().map(|c| predict_container(args, c)).sum::<i64>() + pod.overhead_cpu_millis
}

/// load-watcher's `watcher.Metric` operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    Average,
    Std,
    Latest,
}

/// load-watcher's metric type (the ones that matter here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    Cpu,
    Memory,
    Other,
}

/// One `watcher.Metric`: value in percent of the node's capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Metric {
    pub kind: MetricType,
    pub operator: Operator,
    pub value: f64,
}

/// The node's cpu percent the plugin uses, if any.
// targetloadpacking.go Score: the last metric with Type CPU and Operator Average or Latest
// wins (the loop does not break). The Prometheus provider sends Average
// (`avg_over_time(instance:node_cpu:ratio[15m]) × 100`) and Std; metrics-server sends Latest.
pub fn node_cpu_percent(metrics: &[Metric]) -> Option<f64> {
    metrics
        .iter()
        .rev()
        .find(|m| {
            m.kind == MetricType::Cpu && matches!(m.operator, Operator::Average | Operator::Latest)
        })
        .map(|m| m.value)
}

/// The target curve on predicted utilisation `u` percent.
// targetloadpacking.go Score: u > 100 → MinNodeScore; target < u ≤ 100 →
// round(target × (100 − u) / (100 − target)); u ≤ target → round((100 − target) × u / target
// + target). math.Round rounds half away from zero, as f64::round does.
pub fn target_curve(target: i64, u: f64) -> i64 {
    let t = target as f64;
    if u > t {
        if u > 100.0 {
            return MIN_NODE_SCORE;
        }
        return (t * (100.0 - u) / (100.0 - t)).round() as i64;
    }
    ((100.0 - t) * u / t + t).round() as i64
}

/// A pod in the assigned-pod cache: when the handler saw it bound, and its spec.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedPod {
    pub uid: String,
    /// handler.go updateCache: `time.Now()` when the informer delivered the assignment.
    pub at: UnixMillis,
    pub pod: Pod,
}

/// The cpu of cached pods that the metrics window cannot have seen yet.
// targetloadpacking.go Score: a cached pod counts when `ts > window.End` or
// (`ts ≤ window.End` and `window.End − ts < 60`), i.e. `window.End − ts < 60`, in whole seconds.
pub fn missing_cpu_millis(args: &Args, cached: &[CachedPod], window_end_secs: i64) -> i64 {
    cached
        .iter()
        .filter(|c| window_end_secs - c.at.div_euclid(1000) < METRICS_AGENT_REPORTING_INTERVAL_SECS)
        .map(|c| predict_pod(args, &c.pod))
        .sum()
}

/// Score of one node, or `MIN_NODE_SCORE` when load-watcher has no cpu metric for it.
/// `node_metrics`: `None` when the watcher has never answered or lacks the node.
// targetloadpacking.go Score: U = 100 × (cpu% / 100 × capacity + pod + missing) / capacity
// (0 when the capacity is 0), then target_curve.
pub fn score(
    args: &Args,
    node_metrics: Option<&[Metric]>,
    window_end_secs: i64,
    capacity_millis: i64,
    pod: &Pod,
    cached: &[CachedPod],
) -> i64 {
    let Some(cpu_percent) = node_metrics.and_then(node_cpu_percent) else {
        return MIN_NODE_SCORE;
    };
    let capacity = capacity_millis as f64;
    let node_millis = cpu_percent / 100.0 * capacity;
    let incoming = predict_pod(args, pod);
    let missing = missing_cpu_millis(args, cached, window_end_secs);
    let predicted = if capacity_millis != 0 {
        100.0 * (node_millis + incoming as f64 + missing as f64) / capacity
    } else {
        0.0
    };
    target_curve(args.target_utilization, predicted)
}

/// handler.go PodAssignEventHandler: node name → pods in the order they were seen assigned.
#[derive(Clone, Debug, Default)]
pub struct PodAssignCache {
    pub by_node: HashMap<String, Vec<CachedPod>>,
}

impl PodAssignCache {
    /// OnAdd / OnUpdate with a new `spec.nodeName`: append, stamped with the delivery time.
    // handler.go updateCache; an unassigned pod (empty node name) is not cached.
    pub fn assigned(&mut self, node: &str, uid: &str, pod: Pod, now: UnixMillis) {
        if node.is_empty() {
            return;
        }
        self.by_node.entry(node.to_string()).or_default().push(CachedPod {
            uid: uid.to_string(),
            at: now,
            pod,
        });
    }

    // handler.go OnDelete: remove the first entry with the pod's UID on its node.
    pub fn deleted(&mut self, node: &str, uid: &str) {
        if let Some(list) = self.by_node.get_mut(node)
            && let Some(i) = list.iter().position(|c| c.uid == uid)
        {
            list.remove(i);
        }
    }

    /// handler.go cleanupCache (every 5 minutes): drop the entries before the first one still
    /// younger than 60 s. Reproduced as written: `sort.Search` finds that first entry; when no
    /// entry is young (`idx == len`) the node's list is left as it is (not emptied), and an
    /// empty list is deleted only after a copy. Harmless to Score, which re-checks the time.
    pub fn cleanup(&mut self, now: UnixMillis) {
        let horizon = METRICS_AGENT_REPORTING_INTERVAL_SECS * 1000;
        self.by_node.retain(|_, list| {
            let idx = list.partition_point(|c| c.at + horizon <= now);
            if idx == list.len() {
                return true;
            }
            list.drain(..idx);
            !list.is_empty()
        });
    }

    pub fn on_node(&self, node: &str) -> &[CachedPod] {
        self.by_node.get(node).map(Vec::as_slice).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests;
