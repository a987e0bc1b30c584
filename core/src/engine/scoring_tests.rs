//! Per-metric scoring: units, `maxOfCandidates`, direction, per-metric curves and rounding,
//! each with the arithmetic of the reference it reproduces written out.

use super::reference::*;
use crate::pod::Pod;
use crate::policy::Policy;
use crate::policy::parse_policy;
use crate::snapshot::Sample;
use crate::snapshot::{Capacity, Snapshot};
use crate::time::Millis;
use crate::time::UnixMillis;

const NOW: UnixMillis = UnixMillis(1_800_000_000_000);
const HUGE: Capacity = Capacity { cpu_millis: 1 << 50, memory_bytes: 1 << 60 };

fn fresh(value: f64) -> Sample {
    Sample { value, at: NOW.minus(Millis::from_secs(10)) }
}

fn names(nodes: &[&str]) -> Vec<String> {
    nodes.iter().map(|n| n.to_string()).collect()
}

fn scores(policy: &Policy, snap: &Snapshot, pod: &Pod, nodes: &[&str]) -> Vec<i64> {
    score(policy, snap, pod, &names(nodes), NOW, false).scores.iter().map(|s| s.score).collect()
}

const NETWORK: &str = "metrics:
  - {name: net, resource: other, query: q, period: 30s, weight: 1, unit: bytesPerSecond, normalize: maxOfCandidates}
curve: {kind: leastUsed}
";

#[test]
fn max_of_candidates_scores_the_busiest_candidate_0_and_an_idle_one_100() {
    let policy = parse_policy(NETWORK).unwrap();
    let mut snap = Snapshot::default();
    for (node, bytes) in [("idle", 0.0), ("quarter", 250e6), ("busiest", 1e9), ("half", 500e6)] {
        snap.upsert_node(node, HUGE, [("net", fresh(bytes))]);
    }
    // A stale sample far above the others is not the maximum: it is old news.
    let old = Sample { value: 9e9, at: NOW.minus(Millis::from_mins(10)) };
    snap.upsert_node("stale", HUGE, [("net", old)]);
    // 100 − v × 100 / highest (highest = 1e9 among the fresh candidates):
    // idle 100 − 0 = 100; quarter 100 − 25 = 75; busiest 100 − 100 = 0; half 100 − 50 = 50;
    // stale and unknown nodes get the stale score, 50.
    let all = ["idle", "quarter", "busiest", "half", "stale", "ghost"];
    assert_eq!(scores(&policy, &snap, &Pod::default(), &all), vec![100, 75, 0, 50, 50, 50]);
    // The set is this request's candidates: without the busiest, half is the highest.
    assert_eq!(
        scores(&policy, &snap, &Pod::default(), &["idle", "quarter", "half"]),
        vec![100, 50, 0]
    );
    // One candidate is its own maximum.
    assert_eq!(scores(&policy, &snap, &Pod::default(), &["quarter"]), vec![0]);
    // A highest value of 0: every candidate reads 0 % (idle), none divides by zero.
    assert_eq!(scores(&policy, &snap, &Pod::default(), &["idle", "idle"]), vec![100, 100]);
    let explained = score(&policy, &snap, &Pod::default(), &names(&["half", "busiest"]), NOW, true);
    assert_eq!(explained.scores[0].terms[0].observed, 50.0);
    assert_eq!(explained.scores[0].terms[0].predicted, 50.0);
}

#[test]
fn higher_is_better_reads_headroom_and_max_of_candidates_gives_the_most_headroom_100() {
    // The multi-resource scheduler: NormalizeScore = score × 100 / highest, weights 3/4/3/2,
    // cpu/memory/disk as headroom, network as traffic (lower is better).
    let policy = parse_policy(
        "metrics:
  - {name: cpu_free, resource: other, query: q, period: 30s, weight: 3, normalize: maxOfCandidates, direction: higherIsBetter}
  - {name: mem_free, resource: other, query: q, period: 30s, weight: 4, normalize: maxOfCandidates, direction: higherIsBetter}
  - {name: disk_free, resource: other, query: q, period: 30s, weight: 3, normalize: maxOfCandidates, direction: higherIsBetter}
  - {name: net, resource: other, query: q, period: 30s, weight: 2, unit: bytesPerSecond, normalize: maxOfCandidates}
curve: {kind: leastUsed}
",
    )
    .unwrap();
    let mut snap = Snapshot::default();
    let node = |cpu, mem, disk, net| {
        [
            ("cpu_free", fresh(cpu)),
            ("mem_free", fresh(mem)),
            ("disk_free", fresh(disk)),
            ("net", fresh(net)),
        ]
    };
    snap.upsert_node("a", HUGE, node(80.0, 50.0, 40.0, 100e6));
    snap.upsert_node("b", HUGE, node(40.0, 25.0, 80.0, 400e6));
    // a: cpu 80/80 → 100, mem 50/50 → 100, disk 40/80 → 50, net 100 − 25 = 75:
    //    (3·100 + 4·100 + 3·50 + 2·75) / 12 = 1000 / 12 = 83.33 → 83
    // b: cpu 50, mem 50, disk 100, net 0: (150 + 200 + 300 + 0) / 12 = 54.17 → 54
    assert_eq!(scores(&policy, &snap, &Pod::default(), &["a", "b"]), vec![83, 54]);
}

#[test]
fn units_turn_raw_values_into_percent() {
    let policy = parse_policy(
        "metrics:
  - {name: r, resource: other, query: q, period: 30s, weight: 1, unit: ratio}
  - {name: b, resource: other, query: q, period: 30s, weight: 1, unit: bytesPerSecond, max: 1.25e9}
  - {name: s, resource: other, query: q, period: 30s, weight: 1, unit: raw, scale: 10}
curve: {kind: leastUsed}
",
    )
    .unwrap();
    let mut snap = Snapshot::default();
    snap.upsert_node("n", HUGE, [("r", fresh(0.3)), ("b", fresh(250e6)), ("s", fresh(4.0))]);
    let out = score(&policy, &snap, &Pod::default(), &names(&["n"]), NOW, true);
    let observed: Vec<f64> = out.scores[0].terms.iter().map(|t| t.observed).collect();
    // 0.3 × 100 = 30; 250e6 / 1.25e9 × 100 = 20; 4 × 10 = 40. Least used: (70 + 80 + 60) / 3.
    assert_eq!(observed, vec![30.0, 20.0, 40.0]);
    assert_eq!(out.scores[0].score, 70);
}

#[test]
fn available_memory_in_percent_gets_the_pod_added_to_its_usage() {
    let policy = parse_policy(
        "metrics:
  - {name: mem_available, resource: memory, query: q, period: 30s, weight: 1, filterAbove: 80, direction: higherIsBetter}
curve: {kind: leastUsed}
",
    )
    .unwrap();
    let mut snap = Snapshot::default();
    let node = Capacity { cpu_millis: 8000, memory_bytes: 10 << 30 };
    snap.upsert_node("n", node, [("mem_available", fresh(25.0))]);
    // 25 % available → 75 % used; a 2 GiB request × 0.7 = 1.4 GiB = 14 % → predicted 89 %.
    let pod = Pod { memory_request_bytes: 2 << 30, ..Pod::default() };
    let out = score(&policy, &snap, &pod, &names(&["n"]), NOW, true);
    let term = &out.scores[0].terms[0];
    assert_eq!((term.observed, term.incoming), (75.0, 14.0));
    assert_eq!(out.scores[0].score, 11);
    let f = filter(&policy, &snap, &pod, &names(&["n"]), NOW).with_names(names(&["n"]));
    assert_eq!(f.rejected[0].1, "mem_available 89.0% > 80%");
}

#[test]
fn a_metric_curve_overrides_the_policy_curve_and_only_water_levels_cap() {
    let policy = parse_policy(
        "metrics:
  - {name: cpu, resource: cpu, query: q, period: 30s, weight: 1}
  - {name: disk, resource: other, query: q, period: 30s, weight: 1, curve: {kind: leastUsed}}
  - {name: io, resource: other, query: q, period: 30s, weight: 1, curve: {kind: waterLevel, target: 20}}
curve: {kind: waterLevel, target: 40}
",
    )
    .unwrap();
    let mut snap = Snapshot::default();
    snap.upsert_node("a", HUGE, [("cpu", fresh(30.0)), ("disk", fresh(90.0)), ("io", fresh(10.0))]);
    snap.upsert_node("b", HUGE, [("cpu", fresh(30.0)), ("disk", fresh(10.0)), ("io", fresh(50.0))]);
    // a: cpu 60·30/40 + 40 = 85; disk 100 − 90 = 10 (least used: past no target, no cap);
    //    io at target 20: 80·10/20 + 20 = 60. (85 + 10 + 60) / 3 = 51.67 → 52.
    // b: cpu 85; disk 90; io 50 > its own target 20: 20·50/80 = 12.5, which caps the node:
    //    mean (85 + 90 + 12.5) / 3 = 62.5, capped at 12.5 → 13.
    assert_eq!(scores(&policy, &snap, &Pod::default(), &["a", "b"]), vec![52, 13]);
}

#[test]
fn truncate_reproduces_koordinators_integer_score() {
    // Koordinator load_aware_test.go TestScore "score load node": 96 cpu / 512 Gi, usage
    // 32 cpu / 10 Gi, a 16 cpu / 32 Gi guaranteed pod estimated at 13600 m / 22.4 Gi.
    // cpu: 32000 + 13600 = 45600 → (96000 − 45600) × 100 / 96000 = 52 (52.5 truncated);
    // memory: 32.4 Gi → 93 (93.67 truncated); (52 + 93) / 2 = 72 (72.5 truncated).
    let text = "metrics:
  - {name: cpu, resource: cpu, query: q, period: 30s, weight: 1}
  - {name: mem, resource: memory, query: q, period: 30s, weight: 1}
curve: {kind: leastUsed}
";
    let node = Capacity { cpu_millis: 96_000, memory_bytes: 512 << 30 };
    let mut snap = Snapshot::default();
    let mem = 10.0 * 100.0 / 512.0;
    snap.upsert_node("n", node, [("cpu", fresh(32_000.0 * 100.0 / 96_000.0)), ("mem", fresh(mem))]);
    let pod = Pod {
        cpu_request_millis: 16_000,
        cpu_limit_millis: 16_000,
        memory_request_bytes: 32 << 30,
        memory_limit_bytes: 32 << 30,
        ..Pod::default()
    };
    let truncated = parse_policy(&format!("{text}rounding: truncate\n")).unwrap();
    assert_eq!(scores(&truncated, &snap, &pod, &["n"]), vec![72]);
    // Rounded to nearest: (52.5 + 93.67) / 2 = 73.09 → 73.
    assert_eq!(scores(&parse_policy(text).unwrap(), &snap, &pod, &["n"]), vec![73]);
}
