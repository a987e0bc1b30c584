//! Worked examples. crane-scheduler ships no unit tests for `pkg/plugins/dynamic` or the
//! annotator, so every expected number here is computed by hand from the code, with the
//! arithmetic written beside it.

use super::*;

const S: i64 = 1000;

fn anno(values: &[(&str, f64)], written_at_secs: i64) -> NodeAnnotations {
    NodeAnnotations {
        metrics: values
            .iter()
            .map(|&(n, value)| (n.to_string(), Annotation { value, written_at_secs }))
            .collect(),
        hot_value: None,
    }
}

fn six(cpu: [f64; 3], mem: [f64; 3], at: i64) -> NodeAnnotations {
    anno(
        &[
            ("cpu_usage_avg_5m", cpu[0]),
            ("cpu_usage_max_avg_1h", cpu[1]),
            ("cpu_usage_max_avg_1d", cpu[2]),
            ("mem_usage_avg_5m", mem[0]),
            ("mem_usage_max_avg_1h", mem[1]),
            ("mem_usage_max_avg_1d", mem[2]),
        ],
        at,
    )
}

#[test]
fn default_policy_is_policy_yaml() {
    let p = Policy::default();
    let periods: Vec<_> =
        p.sync_period.iter().map(|s| (s.name.as_str(), s.period_ms / S)).collect();
    assert_eq!(
        periods,
        [
            ("cpu_usage_avg_5m", 180),
            ("cpu_usage_max_avg_1h", 900),
            ("cpu_usage_max_avg_1d", 10_800),
            ("mem_usage_avg_5m", 180),
            ("mem_usage_max_avg_1h", 900),
            ("mem_usage_max_avg_1d", 10_800),
        ]
    );
    let limits: Vec<_> =
        p.predicate.iter().map(|s| (s.name.as_str(), s.max_limit_percent)).collect();
    assert_eq!(
        limits,
        [
            ("cpu_usage_avg_5m", 0.65),
            ("cpu_usage_max_avg_1h", 0.75),
            ("mem_usage_avg_5m", 0.65),
            ("mem_usage_max_avg_1h", 0.75),
        ]
    );
    let weights: Vec<_> = p.priority.iter().map(|s| s.weight).collect();
    assert_eq!(weights, [0.2, 0.3, 0.5, 0.2, 0.3, 0.5]);
    assert_eq!(
        p.hot_value,
        [
            HotValuePolicy { time_range_ms: 300 * S, count: 5 },
            HotValuePolicy { time_range_ms: 60 * S, count: 2 }
        ]
    );
}

#[test]
fn design_worked_example_score_50_then_hot_value_2_gives_30() {
    // cpu {0.3, 0.5, 0.6}: (0.7·0.2 + 0.5·0.3 + 0.4·0.5)·100 = 14 + 15 + 20 = 49
    // mem {0.4, 0.5, 0.5}: (0.6·0.2 + 0.5·0.3 + 0.5·0.5)·100 = 12 + 15 + 25 = 52
    // int(101 / 2.0) = int(50.5) = 50
    let now = 10_000 * S;
    let policy = Policy::default();
    let mut a = six([0.3, 0.5, 0.6], [0.4, 0.5, 0.5], 10_000);
    assert_eq!(node_score(&policy, &a, now), 50);

    // 7 bindings in the last 5 minutes, 3 of them in the last minute:
    // ⌊7 / 5⌋ + ⌊3 / 2⌋ = 1 + 1 = 2; score 50 − int(2 · 10) = 30.
    let mut records = BindingRecords::new(DEFAULT_BINDING_HEAP_SIZE, &policy);
    for ago in [250, 200, 150, 100, 50, 30, 10] {
        records.add("n1", now - ago * S);
    }
    records.add("n2", now - 5 * S);
    let hot = hot_value_of(&records, &policy, "n1", now);
    assert_eq!(hot, 2);
    a.hot_value = Some(Annotation { value: hot as f64, written_at_secs: unix_secs(now) });
    assert_eq!(score(&policy, &a, now), 30);
}

#[test]
fn a_stale_metric_counts_as_fully_used() {
    // All six at 0.5: Σ 0.5·w·100 = 50·(0.2+0.3+0.5)·2 = 100; 100 / 2.0 = 50.
    let policy = Policy::default();
    let mut a = six([0.5; 3], [0.5; 3], 1_000);
    assert_eq!(node_score(&policy, &a, 1_000 * S), 50);
    // cpu_usage_avg_5m written 3 m + 5 m = 480 s before now is expired: its term 0.5·0.2·100
    // = 10 drops out of the sum, its weight stays: (100 − 10) / 2.0 = 45.
    a.metrics.get_mut("cpu_usage_avg_5m").unwrap().written_at_secs = 1_000 - 480;
    assert_eq!(node_score(&policy, &a, 1_000 * S), 45);
    // A missing annotation is the same as an expired one.
    a.metrics.remove("cpu_usage_avg_5m");
    assert_eq!(node_score(&policy, &a, 1_000 * S), 45);
    // No annotations at all: 0 / 2.0 = 0.
    assert_eq!(score(&policy, &NodeAnnotations::default(), 1_000 * S), 0);
}

#[test]
fn active_period_is_sync_period_plus_five_minutes_strictly_before() {
    let sync = Policy::default().sync_period;
    assert_eq!(active_duration_ms(&sync, "cpu_usage_avg_5m"), Some(480 * S));
    assert_eq!(active_duration_ms(&sync, "cpu_usage_max_avg_1d"), Some(11_100 * S));
    assert_eq!(active_duration_ms(&sync, "disk"), None);
    // Written at 1000 s: valid until, not at, 1480 s.
    assert!(in_active_period(1_000, 480 * S, 1_479_999));
    assert!(!in_active_period(1_000, 480 * S, 1_480_000));
}

#[test]
fn filter_rejects_strictly_above_the_limit_and_passes_unknown_data() {
    let policy = Policy::default();
    let now = 2_000 * S;
    let ok = six([0.65, 0.75, 0.99], [0.1; 3], 2_000);
    assert_eq!(filter(&policy, "n1", &ok, false, now), Ok(()));
    let hot = six([0.65001, 0.1, 0.1], [0.1; 3], 2_000);
    assert_eq!(
        filter(&policy, "n1", &hot, false, now),
        Err("Load[cpu_usage_avg_5m] of node[n1] is too high".into())
    );
    // DaemonSet pods bypass the filter.
    assert_eq!(filter(&policy, "n1", &hot, true, now), Ok(()));
    // Expired annotations cannot reject: the node passes. At 480 s the 5 m metrics have
    // expired (3 m + 5 m) but the 1 h ones (15 m + 5 m = 1200 s) still hold.
    let stale = six([0.9; 3], [0.1; 3], 2_000 - 480);
    assert_eq!(
        filter(&policy, "n1", &stale, false, now),
        Err("Load[cpu_usage_max_avg_1h] of node[n1] is too high".into())
    );
    let stale = six([0.9; 3], [0.9; 3], 2_000 - 1_200);
    assert_eq!(filter(&policy, "n1", &stale, false, now), Ok(()));
}

#[test]
fn annotation_value_is_the_rule_over_100_with_five_decimals() {
    // 65.4321 / 100 = 0.654321 → "0.65432"
    assert_eq!(annotation_value(65.4321), 0.65432);
    assert_eq!(annotation_value(12.5), 0.125);
    assert_eq!(annotation_value(-3.0), 0.0);
    assert_eq!(annotation_value(f64::NAN), 0.0);
    // Timestamps keep whole seconds.
    assert_eq!(annotate(50.0, 1_234_567), Annotation { value: 0.5, written_at_secs: 1_234 });
}

#[test]
fn hot_value_ignores_pod_size_and_subtracts_ten_per_unit() {
    // 10 bindings in the last minute: ⌊10/5⌋ + ⌊10/2⌋ = 2 + 5 = 7 → 70 off the score.
    let policy = Policy::default();
    let now = 5_000 * S;
    let mut records = BindingRecords::new(DEFAULT_BINDING_HEAP_SIZE, &policy);
    for i in 0..10 {
        records.add("n1", now - i * S);
    }
    assert_eq!(hot_value_of(&records, &policy, "n1", now), 7);
    let mut a = six([0.0; 3], [0.0; 3], 5_000); // node score 100
    a.hot_value = Some(Annotation { value: 7.0, written_at_secs: 5_000 });
    assert_eq!(score(&policy, &a, now), 30);
    // 11 or more units clamp at 0.
    a.hot_value = Some(Annotation { value: 11.0, written_at_secs: 5_000 });
    assert_eq!(score(&policy, &a, now), 0);
    // A hot value older than 5 minutes (no extra period) is ignored: 100.
    a.hot_value = Some(Annotation { value: 7.0, written_at_secs: 5_000 - 300 });
    assert_eq!(score(&policy, &a, now), 100);
}

#[test]
fn binding_windows_are_strict_in_whole_seconds() {
    let policy = Policy::default();
    let now = 1_000 * S + 999; // 1000.999 s is second 1000
    let mut r = BindingRecords::new(DEFAULT_BINDING_HEAP_SIZE, &policy);
    r.add("n1", 700 * S); // exactly now − 300 s: not counted (timestamp > timeline)
    r.add("n1", 701 * S + 500); // second 701: counted
    assert_eq!(r.count("n1", 300 * S, now), 1);
    // GC keeps only bindings newer than the longest window.
    r.gc(now);
    assert_eq!(r.len(), 1);
}

#[test]
fn a_full_binding_heap_drops_the_oldest() {
    let policy = Policy::default();
    let mut r = BindingRecords::new(2, &policy);
    r.add("old", 10 * S);
    r.add("n1", 20 * S);
    r.add("n1", 30 * S);
    assert_eq!(r.len(), 2);
    assert_eq!(r.count("old", 300 * S, 40 * S), 0);
    assert_eq!(r.count("n1", 300 * S, 40 * S), 2);
}

#[test]
fn usage_above_one_drives_the_score_negative_then_clamped() {
    // All six at 1.2: Σ (1 − 1.2)·w·100 ≈ −20·2 = −40, but 1 − 1.2 is −0.19999999999999996
    // in float64, so the sum is −39.99999999999999 and int(−19.999999999999996) truncates
    // toward zero to −19 (Go's int() and Rust's `as` agree); the score clamps to 0.
    let policy = Policy::default();
    let a = six([1.2; 3], [1.2; 3], 100);
    assert_eq!(node_score(&policy, &a, 100 * S), -19);
    assert_eq!(score(&policy, &a, 100 * S), 0);
}
