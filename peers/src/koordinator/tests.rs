//! Worked examples from koordinator's own tests: `pkg/scheduler/plugins/loadaware/
//! estimator/default_estimator_test.go` TestDefaultEstimatorEstimatePod and `load_aware_test.go`
//! TestScore, TestFilterUsage, TestFilterExpiredNodeMetric (a node of 96 cpu / 512 Gi
//! allocatable, report interval 60 s). In those tests assigned pods reach the cache through
//! the informer without a PodScheduled condition, so their timestamp is the cache's clock
//! ("now") whatever the case's `timestamp` field says; the cases below use now.
//! Hand-computed cases carry their arithmetic.

use super::*;

const S: i64 = 1000;
const GI: i64 = 1 << 30;
const MI: i64 = 1 << 20;
const NODE: Vec2 = Vec2::new(96_000, 512 * GI);
const NOW: UnixMillis = 1_000_000 * S;

fn pod(req: (i64, i64), lim: (i64, i64)) -> PodResources {
    PodResources { requests: Vec2::new(req.0, req.1), limits: Vec2::new(lim.0, lim.1) }
}

fn with_factors(cpu: i64, memory: i64) -> Args {
    Args { estimated_scaling_factors: Vec2::new(cpu, memory), ..Args::default() }
}

fn metric(cpu: i64, memory: i64) -> NodeMetric {
    NodeMetric {
        update_time: Some(NOW),
        report_interval_secs: Some(60),
        node_usage: Some(Vec2::new(cpu, memory)),
        pod_usages: HashMap::new(),
    }
}

/// The 16 cpu / 32 Gi guaranteed pod of TestScore.
fn big() -> PodResources {
    pod((16_000, 32 * GI), (16_000, 32 * GI))
}

#[test]
fn defaults_are_defaults_go() {
    let a = Args::default();
    assert_eq!(a.usage_thresholds, Vec2::new(65, 95));
    assert_eq!(a.estimated_scaling_factors, Vec2::new(85, 70));
    assert_eq!(a.resource_weights, Vec2::new(1, 1));
    assert_eq!(a.node_metric_expiration_secs, Some(180));
    assert!(a.filter_expired_node_metrics && !a.enable_schedule_when_node_metrics_expired);
}

#[test]
fn upstream_estimator_cases() {
    let d = Args::default();
    // "estimate empty pod": the defaults, unscaled.
    assert_eq!(estimate_pod(&d, &PodResources::default()), Vec2::new(250, 200 * MI));
    // "estimate guaranteed pod": 4000 × 85 / 100 = 3400; 8 Gi × 70 / 100 = 6012954214 (5.6 Gi).
    let g = pod((4_000, 8 * GI), (4_000, 8 * GI));
    assert_eq!(estimate_pod(&d, &g), Vec2::new(3_400, 6_012_954_214));
    // "estimate burstable pod": the larger limit 8000 × 0.85 = 6800.
    assert_eq!(estimate_pod(&d, &pod((4_000, 8 * GI), (8_000, 8 * GI))).cpu, 6_800);
    // "zoomed cpu factors" 110: 4400 capped at the 4000 limit.
    assert_eq!(estimate_pod(&with_factors(110, 70), &g), Vec2::new(4_000, 6_012_954_214));
    // "zoomed memory factors" 110: capped at the 8 Gi limit = 8589934592.
    assert_eq!(estimate_pod(&with_factors(85, 110), &g), Vec2::new(3_400, 8_589_934_592));
    // "estimate pod only has request", factors 80: 3200; round(8 Gi × 0.8) = 6871947674.
    let r = pod((4_000, 8 * GI), (0, 0));
    assert_eq!(estimate_pod(&with_factors(80, 80), &r), Vec2::new(3_200, 6_871_947_674));
}

#[test]
fn upstream_score_empty_node() {
    // "score empty node": estimate 13600m / round(32 Gi × 0.7) = 24051816858 bytes.
    // cpu (96000 − 13600)·100 / 96000 = 85; memory (512 Gi − 22.4 Gi)·100 / 512 Gi = 95.
    // (85 + 95) / 2 = 90.
    let m = metric(0, 0);
    assert_eq!(score(&Args::default(), NODE, Some(&m), &[], &big(), NOW), 90);
    // "score request less than limit": requests 8 / 16 Gi, limits 16 / 32 Gi → same, 90.
    let p = pod((8_000, 16 * GI), (16_000, 32 * GI));
    assert_eq!(score(&Args::default(), NODE, Some(&m), &[], &p, NOW), 90);
}

#[test]
fn upstream_score_load_node() {
    // "score load node": usage 32 cpu / 10 Gi. cpu (96000 − 45600)·100 / 96000 = 52;
    // memory 32.4 Gi used → 93. (52 + 93) / 2 = 72.
    let m = metric(32_000, 10 * GI);
    assert_eq!(score(&Args::default(), NODE, Some(&m), &[], &big(), NOW), 72);
}

#[test]
fn upstream_score_load_node_with_just_assigned_pod() {
    // "score load node with just assigned pod" (and the "after/before updateTime" variants):
    // the assigned pod is not in the report → its full estimate counts. cpu 32000 + 13600 +
    // 13600 = 59200 → 38; memory 10 + 22.4 + 22.4 Gi = 54.8 Gi → 89. (38 + 89) / 2 = 63.
    let a = Args::default();
    let m = metric(32_000, 10 * GI);
    let assigned = [AssignedPod {
        key: "default/assigned-pod-1".into(),
        timestamp: NOW,
        estimated: estimate_pod(&a, &big()),
    }];
    assert_eq!(score(&a, NODE, Some(&m), &assigned, &big(), NOW), 63);
    let mut m10 = m.clone();
    m10.update_time = Some(NOW - 10 * S);
    assert_eq!(score(&a, NODE, Some(&m10), &assigned, &big(), NOW), 63);
}

#[test]
fn upstream_score_p95_without_reported_usage_and_assigned_pods() {
    // "score load node with p95 but have not reported usage and have assigned pods": the
    // selected usage is missing, so the full estimates of assigned pods stand in: 13600 +
    // 13600 = 27200 → 71; 22.4 + 22.4 Gi = 44.8 Gi → 91. (71 + 91) / 2 = 81.
    let a = Args::default();
    let mut m = metric(0, 0);
    m.node_usage = None;
    m.pod_usages.insert("default/assigned-pod-1".into(), Vec2::new(1_000, GI));
    let assigned = [AssignedPod {
        key: "default/assigned-pod-1".into(),
        timestamp: NOW,
        estimated: estimate_pod(&a, &big()),
    }];
    assert_eq!(score(&a, NODE, Some(&m), &assigned, &big(), NOW), 81);
}

#[test]
fn upstream_score_drf_empty_pod_expired_and_missing() {
    // "score with drf": dominant weight 10 and (SetDefaults skips them) no resource weights:
    // the smaller score, cpu 85, × 10 / 10 = 85.
    let drf =
        Args { dominant_resource_weight: 10, resource_weights: Vec2::new(0, 0), ..Args::default() };
    assert_eq!(score(&drf, NODE, Some(&metric(0, 0)), &[], &big(), NOW), 85);
    // "score empty pod": 250m → (95750·100)/96000 = 99; 200 Mi → 99. 99.
    let empty = PodResources::default();
    assert_eq!(score(&Args::default(), NODE, Some(&metric(0, 0)), &[], &empty, NOW), 99);
    // "score node with expired nodeMetric": updated 180 s ago, expiration 180 s → 0.
    let mut old = metric(0, 0);
    old.update_time = Some(NOW - 180 * S);
    assert_eq!(score(&Args::default(), NODE, Some(&old), &[], &big(), NOW), 0);
    // "score node missing NodeMetrics" → 0.
    assert_eq!(score(&Args::default(), NODE, None, &[], &big(), NOW), 0);
}

#[test]
fn upstream_filter_usage_cases() {
    // The filter cases' test pod is `&corev1.Pod{}`: estimate 250m / 200 Mi.
    let a = Args::default();
    let p = PodResources::default();
    let f = |m: NodeMetric| filter(&a, NODE, Some(&m), &[], &p, false, NOW);
    // "filter normal usage": 60250 / 96000 → 63 ≤ 65; 256 Gi + 200 Mi → 50 ≤ 95.
    assert_eq!(f(metric(60_000, 256 * GI)), Ok(()));
    // "filter exceed cpu usage": 70250 / 96000 = 73.2 → 73 > 65.
    assert_eq!(f(metric(70_000, 256 * GI)), Err("node(s) cpu usage exceed threshold".into()));
    // "filter exceed memory usage": cpu 32 ≤ 65; 500 Gi + 200 Mi → 98 > 95.
    assert_eq!(f(metric(30_000, 500 * GI)), Err("node(s) memory usage exceed threshold".into()));
    // "filter node missing NodeMetrics": passes.
    assert_eq!(filter(&a, NODE, None, &[], &p, false, NOW), Ok(()));
    // DaemonSet pods pass.
    assert_eq!(filter(&a, NODE, Some(&metric(90_000, 0)), &[], &p, true, NOW), Ok(()));
}

#[test]
fn upstream_filter_expired_node_metric_cases() {
    let a = Args::default();
    let p = PodResources::default();
    // "filter unhealthy nodeMetric with expired updateTime" (180 s) and "with nil updateTime".
    let mut old = metric(0, 0);
    old.update_time = Some(NOW - 180 * S);
    assert_eq!(
        filter(&a, NODE, Some(&old), &[], &p, false, NOW),
        Err(REASON_NODE_METRIC_EXPIRED.into())
    );
    old.update_time = None;
    assert_eq!(
        filter(&a, NODE, Some(&old), &[], &p, false, NOW),
        Err(REASON_NODE_METRIC_EXPIRED.into())
    );
    // TestEnableScheduleWhenNodeMetricsExpired "enable scheduling when nodeMetric with expired
    // updateTime": passes.
    let lax = Args { enable_schedule_when_node_metrics_expired: true, ..Args::default() };
    assert_eq!(filter(&lax, NODE, Some(&old), &[], &p, false, NOW), Ok(()));
    // 179.999 s old is still fresh.
    let mut fresh = metric(0, 0);
    fresh.update_time = Some(NOW - 179_999);
    assert_eq!(filter(&a, NODE, Some(&fresh), &[], &p, false, NOW), Ok(()));
}

#[test]
fn a_reported_pod_counts_only_inside_the_report_interval_and_only_its_excess() {
    // Report at NOW, interval 60 s. A pod reported at 1000m/1 Gi with estimate 3400m/5.6 Gi:
    // assigned at NOW − 59 s (after NOW − 60 s) → delta max(0, 3400 − 1000) = 2400m and
    // 6012954214 − 1073741824 = 4939212390 bytes. Assigned exactly at NOW − 60 s → not after
    // (Before is strict) → 0. Not reported at all → the full estimate.
    let a = Args::default();
    let est = estimate_pod(&a, &pod((4_000, 8 * GI), (4_000, 8 * GI)));
    let mut m = metric(10_000, 10 * GI);
    m.pod_usages.insert("ns/p".into(), Vec2::new(1_000, GI));
    let at = |key: &str, t| AssignedPod { key: key.into(), timestamp: t, estimated: est };
    assert_eq!(
        estimated_of_existing(&a, &m, &[at("ns/p", NOW - 59 * S)]),
        Vec2::new(12_400, 10 * GI + 4_939_212_390)
    );
    assert_eq!(
        estimated_of_existing(&a, &m, &[at("ns/p", NOW - 60 * S)]),
        Vec2::new(10_000, 10 * GI)
    );
    assert_eq!(
        estimated_of_existing(&a, &m, &[at("ns/q", NOW - 3_600 * S)]),
        Vec2::new(13_400, 10 * GI + 6_012_954_214)
    );
    // A pod using more than its estimate adds nothing (max(0, ·)).
    m.pod_usages.insert("ns/p".into(), Vec2::new(5_000, 7 * GI));
    assert_eq!(estimated_of_existing(&a, &m, &[at("ns/p", NOW)]), Vec2::new(10_000, 10 * GI));
    // EstimatedSecondsAfterPodScheduled 300: a pod scheduled 200 s before the report keeps
    // its excess: deadline NOW + 100 s is after the update time.
    m.pod_usages.insert("ns/p".into(), Vec2::new(1_000, GI));
    let keep = Args { estimated_seconds_after_pod_scheduled: Some(300), ..Args::default() };
    assert_eq!(estimated_of_existing(&keep, &m, &[at("ns/p", NOW - 200 * S)]).cpu, 12_400);
}

#[test]
fn least_used_is_integer_and_zero_over_capacity() {
    // (96000 − 45600)·100 / 96000 = 5040000 / 96000 = 52 (52.5 truncated).
    assert_eq!(least_used_score(45_600, 96_000), 52);
    assert_eq!(least_used_score(96_001, 96_000), 0);
    assert_eq!(least_used_score(0, 0), 0);
}
