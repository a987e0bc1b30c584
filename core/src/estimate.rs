//! How much a pod will use once it runs (Koordinator's estimator, docs/design.md#pod-estimate):
//! `q = max(request, limit)`, a best-effort default when both are zero, then
//! `q × factor`, capped at the limit when one is set. A pod's `waterline.io/estimate-factor`
//! annotation multiplies the factor (docs/policy.md#per-workload-overrides): 0.85 × 2 =
//! 1.7 for a workload known to use twice what it requests.

use crate::pod::Pod;
use crate::policy::Estimator;

/// Estimated usage of one pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
}

fn estimate_one(request: i64, limit: i64, best_effort: i64, factor: f64) -> i64 {
    let quantity = match request.max(limit) {
        0 => best_effort,
        q => q,
    };
    let estimate = (quantity as f64 * factor).round() as i64;
    if limit > 0 { estimate.min(limit) } else { estimate }
}

pub fn estimate(estimator: &Estimator, pod: &Pod) -> Usage {
    let scale = pod.overrides.estimate_factor.unwrap_or(1.0);
    Usage {
        cpu_millis: estimate_one(
            pod.cpu_request_millis,
            pod.cpu_limit_millis,
            estimator.best_effort_cpu_millis,
            estimator.cpu_factor * scale,
        ),
        memory_bytes: estimate_one(
            pod.memory_request_bytes,
            pod.memory_limit_bytes,
            estimator.best_effort_memory_bytes,
            estimator.memory_factor * scale,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(cpu_req: i64, cpu_lim: i64, mem_req: i64, mem_lim: i64) -> Pod {
        Pod {
            cpu_request_millis: cpu_req,
            cpu_limit_millis: cpu_lim,
            memory_request_bytes: mem_req,
            memory_limit_bytes: mem_lim,
            ..Pod::default()
        }
    }

    #[test]
    fn request_only_pod_is_scaled_by_the_factors() {
        let usage = estimate(&Estimator::default(), &pod(1000, 0, 1 << 30, 0));
        assert_eq!(usage.cpu_millis, 850);
        assert_eq!(usage.memory_bytes, ((1u64 << 30) as f64 * 0.7).round() as i64);
    }

    #[test]
    fn limit_above_request_is_the_quantity() {
        let usage = estimate(&Estimator::default(), &pod(500, 2000, 0, 0));
        assert_eq!(usage.cpu_millis, 1700);
    }

    #[test]
    fn best_effort_pod_gets_the_default_quantity() {
        let usage = estimate(&Estimator::default(), &pod(0, 0, 0, 0));
        assert_eq!(usage.cpu_millis, 213); // 250m × 0.85 = 212.5, rounded
        assert_eq!(usage.memory_bytes, (200.0 * 1024.0 * 1024.0 * 0.7f64).round() as i64);
    }

    #[test]
    fn an_estimate_factor_annotation_multiplies_the_policy_factor() {
        use crate::pod::Overrides;
        let mut p = pod(1000, 0, 1000, 0);
        p.overrides = Overrides { estimate_factor: Some(2.0), ..Overrides::default() };
        // 1000m × 0.85 × 2 and 1000 B × 0.70 × 2.
        let usage = estimate(&Estimator::default(), &p);
        assert_eq!((usage.cpu_millis, usage.memory_bytes), (1700, 1400));
        // Still capped at the limit: the kubelet throttles above it.
        p.cpu_limit_millis = 1200;
        assert_eq!(estimate(&Estimator::default(), &p).cpu_millis, 1200);
    }

    #[test]
    fn estimate_never_exceeds_the_limit() {
        let estimator = Estimator { cpu_factor: 1.5, ..Estimator::default() };
        let usage = estimate(&estimator, &pod(1000, 1200, 0, 0));
        assert_eq!(usage.cpu_millis, 1200);
    }
}
