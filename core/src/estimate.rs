//! How much a pod will use once it runs (docs/design.md#pod-estimate). One rule per
//! resource, in this order of precedence:
//!
//! 1. **Override**: a pod's `waterline.io/estimate-factor` annotation multiplies the
//!    policy's factor (docs/policy.md#per-workload-overrides): 0.85 × 2 = 1.7.
//! 2. **Learned**: with `estimator.learn` on and the pod's workload in the learned table
//!    (`crate::learn`), `request × ratio` with the ratio clamped to the policy's bounds; a pod
//!    without a request, or a workload whose pods request none, at the workload's usage.
//! 3. **Factor** (Koordinator's estimator): `q = max(request, limit)`, a best-effort
//!    default when both are zero, then `q × factor`.
//!
//! Every rule caps the estimate at the limit when one is set: the kubelet throttles cpu
//! above it and kills a pod past its memory limit.

use crate::learn::{Learned, LearnedUsage};
use crate::pod::Pod;
use crate::policy::{Estimator, Learn};
use crate::workload::WorkloadKey;

/// Estimated usage of one pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
}

/// Which rule priced one resource of a pod.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Source {
    /// The policy's `cpuFactor` or `memoryFactor`.
    Factor { factor: f64 },
    /// The pod's `waterline.io/estimate-factor` times the policy's factor.
    Override { factor: f64 },
    /// The workload's learned usage: `ratio` is the clamped ratio the request was scaled by,
    /// `None` when the pod was priced at the workload's absolute usage.
    Learned { ratio: Option<f64>, pods: u32, samples: u64 },
}

/// A pod's estimate and how each resource of it was priced.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub usage: Usage,
    pub cpu: Source,
    pub memory: Source,
    /// The workload whose learned usage priced a resource, if one did.
    pub workload: Option<WorkloadKey>,
}

fn by_factor(request: i64, limit: i64, best_effort: i64, factor: f64) -> i64 {
    let quantity = match request.max(limit) {
        0 => best_effort,
        q => q,
    };
    cap(limit, quantity as f64 * factor)
}

fn by_learned(request: i64, limit: i64, learned: &Learned, bounds: &Learn) -> (i64, Source) {
    let clamp = |value: f64| {
        value.clamp(request as f64 * bounds.min_ratio, request as f64 * bounds.max_ratio)
    };
    let (value, ratio) = match (request > 0, learned.ratio) {
        (true, Some(ratio)) => {
            let ratio = ratio.clamp(bounds.min_ratio, bounds.max_ratio);
            (request as f64 * ratio, Some(ratio))
        }
        (true, None) => (clamp(learned.usage), None),
        (false, _) => (learned.usage, None),
    };
    let source = Source::Learned { ratio, pods: learned.pods, samples: learned.samples };
    (cap(limit, value), source)
}

fn cap(limit: i64, estimate: f64) -> i64 {
    let estimate = estimate.round() as i64;
    if limit > 0 { estimate.min(limit) } else { estimate }
}

/// `pod`'s estimate under `estimator`, with what `learned` knows of its workload.
pub fn estimate(estimator: &Estimator, learned: &LearnedUsage, pod: &Pod) -> Usage {
    price(estimator, learned, pod).usage
}

/// [`estimate`] with the rule that priced each resource, for explain and the ledger.
pub fn price(estimator: &Estimator, learned: &LearnedUsage, pod: &Pod) -> Estimate {
    let factor = |policy_factor: f64| match pod.overrides.estimate_factor {
        Some(scale) => (policy_factor * scale, Source::Override { factor: policy_factor * scale }),
        None => (policy_factor, Source::Factor { factor: policy_factor }),
    };
    let (cpu_factor, cpu_source) = factor(estimator.cpu_factor);
    let (memory_factor, memory_source) = factor(estimator.memory_factor);
    let mut estimate = Estimate {
        usage: Usage {
            cpu_millis: by_factor(
                pod.cpu_request_millis,
                pod.cpu_limit_millis,
                estimator.best_effort_cpu_millis,
                cpu_factor,
            ),
            memory_bytes: by_factor(
                pod.memory_request_bytes,
                pod.memory_limit_bytes,
                estimator.best_effort_memory_bytes,
                memory_factor,
            ),
        },
        cpu: cpu_source,
        memory: memory_source,
        workload: None,
    };
    // An override outranks what was learned; an empty table costs no key.
    if !estimator.learn.enabled || learned.is_empty() || pod.overrides.estimate_factor.is_some() {
        return estimate;
    }
    let workload = WorkloadKey::of(pod);
    let Some(usage) = learned.get(&workload) else { return estimate };
    let bounds = &estimator.learn;
    if let Some(cpu) = &usage.cpu {
        (estimate.usage.cpu_millis, estimate.cpu) =
            by_learned(pod.cpu_request_millis, pod.cpu_limit_millis, cpu, bounds);
    }
    if let Some(memory) = &usage.memory {
        (estimate.usage.memory_bytes, estimate.memory) =
            by_learned(pod.memory_request_bytes, pod.memory_limit_bytes, memory, bounds);
    }
    if usage.cpu.is_some() || usage.memory.is_some() {
        estimate.workload = Some(workload);
    }
    estimate
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
        let usage =
            estimate(&Estimator::default(), &LearnedUsage::default(), &pod(1000, 0, 1 << 30, 0));
        assert_eq!(usage.cpu_millis, 850);
        assert_eq!(usage.memory_bytes, ((1u64 << 30) as f64 * 0.7).round() as i64);
    }

    #[test]
    fn limit_above_request_is_the_quantity() {
        let usage =
            estimate(&Estimator::default(), &LearnedUsage::default(), &pod(500, 2000, 0, 0));
        assert_eq!(usage.cpu_millis, 1700);
    }

    #[test]
    fn best_effort_pod_gets_the_default_quantity() {
        let usage = estimate(&Estimator::default(), &LearnedUsage::default(), &pod(0, 0, 0, 0));
        assert_eq!(usage.cpu_millis, 213); // 250m × 0.85 = 212.5, rounded
        assert_eq!(usage.memory_bytes, (200.0 * 1024.0 * 1024.0 * 0.7f64).round() as i64);
    }

    #[test]
    fn an_estimate_factor_annotation_multiplies_the_policy_factor() {
        use crate::pod::Overrides;
        let mut p = pod(1000, 0, 1000, 0);
        p.overrides = Overrides { estimate_factor: Some(2.0), ..Overrides::default() };
        // 1000m × 0.85 × 2 and 1000 B × 0.70 × 2.
        let usage = estimate(&Estimator::default(), &LearnedUsage::default(), &p);
        assert_eq!((usage.cpu_millis, usage.memory_bytes), (1700, 1400));
        // Still capped at the limit: the kubelet throttles above it.
        p.cpu_limit_millis = 1200;
        assert_eq!(estimate(&Estimator::default(), &LearnedUsage::default(), &p).cpu_millis, 1200);
    }

    #[test]
    fn estimate_never_exceeds_the_limit() {
        let estimator = Estimator { cpu_factor: 1.5, ..Estimator::default() };
        let usage = estimate(&estimator, &LearnedUsage::default(), &pod(1000, 1200, 0, 0));
        assert_eq!(usage.cpu_millis, 1200);
    }

    fn learned(cpu_ratio: Option<f64>, cpu_usage: f64) -> (LearnedUsage, Pod) {
        let pod = Pod {
            namespace: "shop".into(),
            owner_kind: "StatefulSet".into(),
            owner_name: "db".into(),
            ..pod(1000, 0, 1000, 0)
        };
        let cpu =
            Learned { ratio: cpu_ratio, usage: cpu_usage, spread: 0.0, pods: 3, samples: 360 };
        let table =
            [(WorkloadKey::of(&pod), crate::learn::WorkloadUsage { cpu: Some(cpu), memory: None })]
                .into_iter()
                .collect();
        (table, pod)
    }

    #[test]
    fn a_learned_workload_prices_the_request_at_its_ratio() {
        let (table, p) = learned(Some(2.0), 2000.0);
        let priced = price(&Estimator::default(), &table, &p);
        // cpu: 1000m × 2.0 learned; memory has no evidence: 1000 B × 0.70.
        assert_eq!((priced.usage.cpu_millis, priced.usage.memory_bytes), (2000, 700));
        assert_eq!(priced.cpu, Source::Learned { ratio: Some(2.0), pods: 3, samples: 360 });
        assert_eq!(priced.memory, Source::Factor { factor: 0.7 });
        assert_eq!(priced.workload.unwrap().to_string(), "shop/StatefulSet/db");
    }

    #[test]
    fn a_learned_ratio_is_clamped_and_capped_at_the_limit() {
        // 9.0 clamps to maxRatio 4.0: 4000m; with a 3000m limit, 3000m.
        let (table, mut p) = learned(Some(9.0), 9000.0);
        assert_eq!(estimate(&Estimator::default(), &table, &p).cpu_millis, 4000);
        p.cpu_limit_millis = 3000;
        assert_eq!(estimate(&Estimator::default(), &table, &p).cpu_millis, 3000);
        // 0.01 clamps to minRatio 0.1: 100m.
        let (table, p) = learned(Some(0.01), 10.0);
        assert_eq!(estimate(&Estimator::default(), &table, &p).cpu_millis, 100);
    }

    #[test]
    fn a_pod_without_a_request_is_priced_at_the_workload_usage() {
        let (table, mut p) = learned(Some(2.0), 640.0);
        p.cpu_request_millis = 0;
        let priced = price(&Estimator::default(), &table, &p);
        assert_eq!(priced.usage.cpu_millis, 640);
        assert_eq!(priced.cpu, Source::Learned { ratio: None, pods: 3, samples: 360 });
        // Siblings that request nothing price a requesting pod by usage, within the bounds
        // of its request: 640m of a 100m request is above 4 × 100m.
        let (table, mut p) = learned(None, 640.0);
        p.cpu_request_millis = 100;
        assert_eq!(estimate(&Estimator::default(), &table, &p).cpu_millis, 400);
    }

    #[test]
    fn an_override_outranks_the_learned_ratio_and_learning_can_be_off() {
        let (table, mut p) = learned(Some(2.0), 2000.0);
        p.overrides.estimate_factor = Some(1.5);
        // 1000m × 0.85 × 1.5 = 1275m.
        let priced = price(&Estimator::default(), &table, &p);
        assert_eq!(priced.usage.cpu_millis, 1275);
        assert!(
            matches!(priced.cpu, Source::Override { factor } if (factor - 1.275).abs() < 1e-12)
        );
        p.overrides.estimate_factor = None;
        let off = Estimator {
            learn: Learn { enabled: false, ..Learn::default() },
            ..Estimator::default()
        };
        assert_eq!(price(&off, &table, &p).cpu, Source::Factor { factor: 0.85 });
        assert_eq!(price(&off, &table, &p).workload, None);
    }
}
