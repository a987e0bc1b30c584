//! kube-scheduler's default request-based scoring: NodeResourcesFit with the LeastAllocated
//! strategy plus NodeResourcesBalancedAllocation, each with weight 1 in the default profile
//! (`pkg/scheduler/apis/config/v1/default_plugins.go`), over cpu and memory with resource
//! weights 1 and 1 (`defaultResourceSpec`). Written from kubernetes/kubernetes
//! `pkg/scheduler/framework/plugins/noderesources/`; the integer arithmetic is theirs.
//!
//! Inputs are the node's allocatable and the sum of requests of the pods already on it (the
//! scheduler cache, assumed pods included); the incoming pod's request is added here, as
//! `resourceAllocationScorer.calculateResourceAllocatableRequest` does.

/// `framework.MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;

/// `schedutil.DefaultMilliCPURequest` (pkg/scheduler/util/pod_resources.go): what a
/// container without a cpu request counts as when scoring.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// `schedutil.DefaultMemoryRequest`: 200 * 1024 * 1024 ("200 MB" in their comment).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// Cpu (millicores) and memory (bytes), in kube-scheduler's resource order for the default
/// profile: `[cpu, memory]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuMemory {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
}

impl CpuMemory {
    pub const fn new(cpu_millis: i64, memory_bytes: i64) -> Self {
        CpuMemory { cpu_millis, memory_bytes }
    }

    fn plus(self, other: CpuMemory) -> CpuMemory {
        CpuMemory::new(
            self.cpu_millis.saturating_add(other.cpu_millis),
            self.memory_bytes.saturating_add(other.memory_bytes),
        )
    }
}

/// A pod's request as NodeResourcesFit's scoring counts it (`schedutil.GetNonzeroRequests`,
/// used because LeastAllocated has `useRequested == false`): an unset request becomes the
/// default above. The simulator's pods are one container each and 0 means "not set", so the
/// default applies per pod.
pub fn non_zero_request(request: CpuMemory) -> CpuMemory {
    CpuMemory::new(
        if request.cpu_millis == 0 { DEFAULT_MILLI_CPU_REQUEST } else { request.cpu_millis },
        if request.memory_bytes == 0 { DEFAULT_MEMORY_REQUEST } else { request.memory_bytes },
    )
}

/// least_allocated.go, `leastRequestedScore`: the unused share on a 0..MaxNodeScore scale,
/// integer division; 0 when the node has no such resource or the request exceeds it.
pub fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// least_allocated.go, `leastResourceScorer` with the default resources (cpu weight 1,
/// memory weight 1): Σ score·weight / Σ weight in integers, skipping a resource the node
/// does not have (allocatable 0).
///
/// `node_requested` is the node's `NonZeroRequested` and `pod` the incoming pod's request as
/// `calculatePodResourceRequestList` gives it with `useRequested == false`: both through
/// [`non_zero_request`] already (the caller knows whether a request was set at all).
pub fn least_allocated(allocatable: CpuMemory, node_requested: CpuMemory, pod: CpuMemory) -> i64 {
    let requested = node_requested.plus(pod);
    weighted_least(&[
        (requested.cpu_millis, allocatable.cpu_millis, 1),
        (requested.memory_bytes, allocatable.memory_bytes, 1),
    ])
}

/// The loop of `leastResourceScorer` over (requested, allocatable, weight) triples.
pub fn weighted_least(resources: &[(i64, i64, i64)]) -> i64 {
    let (mut node_score, mut weight_sum) = (0i64, 0i64);
    for &(requested, allocatable, weight) in resources {
        if allocatable == 0 {
            continue;
        }
        node_score += least_requested_score(requested, allocatable) * weight;
        weight_sum += weight;
    }
    if weight_sum == 0 { 0 } else { node_score / weight_sum }
}

/// balanced_allocation.go, `balancedResourceScorer`: each resource's requested fraction of
/// allocatable (capped at 1, resources with allocatable 0 skipped); with two fractions the
/// standard deviation is `|f1 − f2| / 2`; the score is `int64((1 − std) × MaxNodeScore)`,
/// truncated.
///
/// `node_requested` is the node's `Requested` (raw requests: BalancedAllocation has
/// `useRequested == true`) and `pod` the incoming pod's raw request. A best-effort pod (no
/// requests at all) is skipped in PreScore (kubernetes#129138): `None`, the plugin adds
/// nothing for any node.
pub fn balanced_allocation(
    allocatable: CpuMemory,
    node_requested: CpuMemory,
    pod: CpuMemory,
) -> Option<i64> {
    if pod.cpu_millis == 0 && pod.memory_bytes == 0 {
        return None;
    }
    let requested = node_requested.plus(pod);
    let mut fractions = Vec::with_capacity(2);
    for (requested, allocatable) in [
        (requested.cpu_millis, allocatable.cpu_millis),
        (requested.memory_bytes, allocatable.memory_bytes),
    ] {
        if allocatable == 0 {
            continue;
        }
        fractions.push((requested as f64 / allocatable as f64).min(1.0));
    }
    Some(balanced_score(&fractions))
}

/// The standard deviation and score of `balancedResourceScorer` over the fractions.
fn balanced_score(fractions: &[f64]) -> i64 {
    let std = match fractions.len() {
        2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
        n if n > 2 => {
            let mean = fractions.iter().sum::<f64>() / n as f64;
            let sum: f64 = fractions.iter().map(|f| (f - mean) * (f - mean)).sum();
            (sum / n as f64).sqrt()
        }
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// The default profile's sum for one node: NodeResourcesFit (LeastAllocated) × 1 +
/// NodeResourcesBalancedAllocation × 1 (framework/runtime `RunScorePlugins` multiplies each
/// plugin's score by its weight and adds them up). Neither plugin normalizes.
pub fn default_score(
    allocatable: CpuMemory,
    non_zero_requested: CpuMemory,
    requested: CpuMemory,
    pod: CpuMemory,
) -> i64 {
    let fit = least_allocated(allocatable, non_zero_requested, non_zero_request(pod));
    let balanced = balanced_allocation(allocatable, requested, pod).unwrap_or(0);
    fit + balanced
}

#[cfg(test)]
mod tests;
