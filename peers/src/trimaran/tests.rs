//! Worked examples. The four Score cases are kubernetes-sigs/scheduler-plugins
//! `pkg/trimaran/targetloadpacking/targetloadpacking_test.go` TestTargetLoadPackingScoring (a
//! node of 1000m cpu, `st.MakePod()` pods that have no containers); the cache cases are
//! `pkg/trimaran/handler_test.go` TestHandlerCacheCleanup; the rest is computed by hand.

use super::*;

const S: i64 = 1000;

fn cpu(value: f64, operator: Operator) -> Metric {
    Metric { kind: MetricType::Cpu, operator, value }
}

fn limited(millis: i64) -> Pod {
    Pod {
        containers: vec![Container {
            cpu_request_millis: Some(millis),
            cpu_limit_millis: Some(millis),
        }],
        overhead_cpu_millis: 0,
    }
}

#[test]
fn defaults_are_defaults_go() {
    assert_eq!(
        Args::default(),
        Args {
            target_utilization: 40,
            default_requests_millicores: 1000,
            default_requests_multiplier: 1.5
        }
    );
}

#[test]
fn upstream_case_new_node() {
    // "new node": cpu 0 % (Latest), empty pod → U = 0 → round(60·0/40 + 40) = 40.
    let m = [cpu(0.0, Operator::Latest)];
    assert_eq!(score(&Args::default(), Some(&m), 0, 1000, &Pod::default(), &[]), 40);
}

#[test]
fn upstream_case_hot_node() {
    // "hot node": cpu 40 + 10 = 50 % → round(40·(100 − 50)/(100 − 40)) = round(33.33) = 33.
    let m = [cpu(50.0, Operator::Latest)];
    assert_eq!(score(&Args::default(), Some(&m), 0, 1000, &Pod::default(), &[]), 33);
}

#[test]
fn upstream_case_excess_utilization_returns_min_score() {
    // "excess utilization returns min score": 30 % of 1000m = 300m + a 1000m-limit container
    // → U = 130 > 100 → MinNodeScore.
    let m = [cpu(30.0, Operator::Latest)];
    assert_eq!(score(&Args::default(), Some(&m), 0, 1000, &limited(1000), &[]), 0);
}

#[test]
fn upstream_case_404_resp_from_watcher() {
    // "404 resp from watcher": no metrics at all → MinNodeScore.
    assert_eq!(score(&Args::default(), None, 0, 1000, &Pod::default(), &[]), 0);
    // A node with metrics but none for cpu scores the same.
    let mem = [Metric { kind: MetricType::Memory, operator: Operator::Average, value: 10.0 }];
    assert_eq!(score(&Args::default(), Some(&mem), 0, 1000, &Pod::default(), &[]), 0);
}

#[test]
fn prediction_is_limit_else_request_times_one_and_a_half_else_one_core() {
    let a = Args::default();
    let c = |req, lim| Container { cpu_request_millis: req, cpu_limit_millis: lim };
    assert_eq!(predict_container(&a, &c(Some(500), Some(800))), 800);
    // 333 × 1.5 = 499.5 → math.Round → 500
    assert_eq!(predict_container(&a, &c(Some(333), None)), 500);
    assert_eq!(predict_container(&a, &c(None, None)), 1000);
    // A limit of 0 is a limit: predicted 0.
    assert_eq!(predict_container(&a, &c(Some(500), Some(0))), 0);
    // 800 + 500 + 1000 + overhead 100 = 2400
    let pod = Pod {
        containers: vec![c(Some(500), Some(800)), c(Some(333), None), c(None, None)],
        overhead_cpu_millis: 100,
    };
    assert_eq!(predict_pod(&a, &pod), 2400);
}

#[test]
fn target_curve_at_40() {
    // u ≤ 40: round(60·u/40 + 40); 40 < u ≤ 100: round(40·(100 − u)/60); u > 100: 0.
    let cases =
        [(0.0, 40), (10.0, 55), (20.0, 70), (40.0, 100), (41.0, 39), (70.0, 20), (100.0, 0)];
    for (u, want) in cases {
        assert_eq!(target_curve(40, u), want, "u = {u}");
    }
    assert_eq!(target_curve(40, 100.5), 0);
}

#[test]
fn prometheus_average_is_read_and_std_ignored() {
    // The Prometheus provider sends Average and Std for cpu; the last Average/Latest counts.
    let m = [cpu(20.0, Operator::Average), cpu(35.0, Operator::Std)];
    assert_eq!(node_cpu_percent(&m), Some(20.0));
}

#[test]
fn cached_pods_count_until_sixty_seconds_before_the_window_end() {
    // Window end 1000 s. Assigned at 940 s: 1000 − 940 = 60, not < 60 → not counted.
    // 941 s: 59 → counted. 1005 s (after the end) → counted. 940.999 s is second 940.
    let a = Args::default();
    let at = |ms| CachedPod { uid: format!("{ms}"), at: ms, pod: limited(500) };
    let cached = [at(940 * S), at(940 * S + 999), at(941 * S), at(1005 * S)];
    assert_eq!(missing_cpu_millis(&a, &cached, 1000), 1000);
    // Node 4000m at 25 % = 1000m; incoming 1000m; missing 1000m → U = 75 →
    // round(40·25/60) = round(16.67) = 17.
    let m = [cpu(25.0, Operator::Average)];
    assert_eq!(score(&a, Some(&m), 1000, 4000, &limited(1000), &cached), 17);
}

#[test]
fn upstream_cache_case_cleanup_deletes_old_pods() {
    // "cleanupCache deletes old pods": entries 5 m, 10 s and 5 s old → the last two stay.
    let now = 10_000 * S;
    let mut c = PodAssignCache::default();
    for (uid, ago) in [("Pod-1", 300), ("Pod-2", 10), ("Pod-3", 5)] {
        c.assigned("node-1", uid, Pod::default(), now - ago * S);
    }
    c.cleanup(now);
    let left: Vec<_> = c.on_node("node-1").iter().map(|p| p.uid.as_str()).collect();
    assert_eq!(left, ["Pod-2", "Pod-3"]);
}

#[test]
fn upstream_cache_case_cleanup_does_not_delete_newly_added_pods() {
    // "cleanupCache doesn't delete newly added pods": three zero-time entries, Pod-4 now,
    // Pod-5 added by OnUpdate now → Pod-4 and Pod-5 stay.
    let now = 10_000 * S;
    let mut c = PodAssignCache::default();
    for uid in ["Pod-1", "Pod-2", "Pod-3"] {
        c.assigned("node-1", uid, Pod::default(), i64::MIN / 2);
    }
    c.assigned("node-1", "Pod-4", Pod::default(), now);
    c.assigned("node-1", "Pod-5", Pod::default(), now);
    c.cleanup(now);
    let left: Vec<_> = c.on_node("node-1").iter().map(|p| p.uid.as_str()).collect();
    assert_eq!(left, ["Pod-4", "Pod-5"]);
    // Unassigned pods are not cached.
    c.assigned("", "Pod-6", Pod::default(), now);
    assert_eq!(c.by_node.len(), 1);
}

#[test]
fn cleanup_leaves_a_list_whose_entries_are_all_old() {
    // sort.Search finds no young entry (idx == len) and the loop `continue`s.
    let mut c = PodAssignCache::default();
    c.assigned("n1", "a", Pod::default(), 0);
    c.cleanup(3_600 * S);
    assert_eq!(c.on_node("n1").len(), 1);
    c.deleted("n1", "a");
    assert!(c.on_node("n1").is_empty());
}
