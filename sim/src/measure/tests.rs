use super::*;
use waterline_core::Millis;

fn recorder() -> Recorder {
    let text = "name: t\nduration: 30s\nmeasureInterval: 10s\nthreshold: 65\ntarget: 40\n\
                nodes: [{name: a, cpu: 1, memory: 1Gi}]\n";
    let scenario = crate::scenario::parse_scenario(text, None).unwrap();
    assert_eq!(scenario.measure_interval, Millis::from_secs(10));
    Recorder::new(&scenario)
}

#[test]
fn measures_of_a_hand_made_trace() {
    let mut r = recorder();
    // two nodes, three samples 10 s apart: (cpu %, memory %)
    r.record(&[(70.0, 10.0), (30.0, 20.0)], 2);
    r.record(&[(60.0, 55.0), (20.0, 10.0)], 1);
    r.record(&[(40.0, 80.0), (50.0, 52.0)], 0);
    r.placed_on_hot = 1;
    // 5 pods to schedule, 3 placed; decisions with 0, 3 and 1 unwatched pods
    (r.to_schedule, r.placed) = (5, 3);
    for n in [0, 3, 1] {
        r.decided_unwatched(n);
    }
    let s = r.finish("x".into(), 0, 2, 1, [("a".to_string(), 1)].into());
    // node utilisation = max(cpu, mem): 70/30, 60/20, 80/52.
    // above 65: a at samples 1 and 3 → 2 × 10 s
    assert_eq!(s.overload_node_seconds, 20.0);
    // above 40 + 10 = 50: a (70), a (60), a (80) and b (52) → 4 × 10 s
    assert_eq!(s.above_water_node_seconds, 40.0);
    // hottest 70, 60, 80 → sorted 60, 70, 80: p50 = rank ceil(1.5) = 2 → 70,
    // p99 = rank ceil(2.97) = 3 → 80
    assert_eq!(s.hottest_pct, Percentiles { p50: 70.0, p99: 80.0, max: 80.0 });
    // mean utilisation 50, 40, 66: above the target 40 at samples 1 and 3 (40 is not above)
    // → hottest 70, 80: p50 = rank ceil(1) = 1 → 70, p99 = rank ceil(1.98) = 2 → 80
    assert_eq!(
        s.hottest_pct_when_mean_above_target,
        Some(Percentiles { p50: 70.0, p99: 80.0, max: 80.0 })
    );
    assert_eq!(s.mean_above_target_s, 20.0);
    // cpu: {70, 30} sd 20 range 40; {60, 20} sd 20 range 40; {40, 50} sd 5 range 10
    assert_eq!(s.spread_cpu, Spread { stddev: 15.0, range: 30.0 });
    // memory: {10, 20} sd 5 range 10; {55, 10} sd 22.5 range 45; {80, 52} sd 14 range 28
    // → sd 41.5 / 3 = 13.83, range 83 / 3 = 27.67
    assert_eq!(s.spread_memory, Spread { stddev: 13.83, range: 27.67 });
    // pending 2 + 1 + 0 pods × 10 s
    assert_eq!(s.pending_pod_seconds, 30.0);
    assert_eq!(s.placed_on_hot_nodes, 1);
    assert_eq!((s.nodes_in_use, s.nodes_receiving_pods), (2, 1));
    assert_eq!(s.pods_never_placed, 5 - 3);
    // (0 + 3 + 1) / 3 = 1.33
    assert_eq!(s.unwatched_at_decision, Unwatched { mean: 1.33, max: 3 });
}
