//! The fleet staleness breaker (docs/design.md): when most nodes' samples of a metric are
//! stale, the metric is left out for every node instead of scoring half the cluster from old
//! data.

use super::reference::*;
use super::*;
use crate::pod::Pod;
use crate::policy::Policy;
use crate::policy::{StaleFilter, parse_policy};
use crate::snapshot::Sample;
use crate::snapshot::{Capacity, Snapshot};
use crate::time::Millis;
use crate::time::UnixMillis;

const NOW: UnixMillis = UnixMillis(1_800_000_000_000);
const EIGHT_CPU: Capacity = Capacity { cpu_millis: 8000, memory_bytes: 32 << 30 };

/// cpu (filter above 65, max age 2m30s) weighs 1, mem weighs 1; water level 40.
fn policy() -> Policy {
    parse_policy(
        "metrics:
  - {name: cpu, resource: cpu, query: q, period: 30s, weight: 1, filterAbove: 65}
  - {name: mem, resource: memory, query: q, period: 30s, weight: 1}
curve: {kind: waterLevel, target: 40}
",
    )
    .unwrap()
}

fn at(age_secs: i64) -> UnixMillis {
    NOW.minus(Millis::from_secs(age_secs))
}

/// `n` nodes; the first `stale` of them have a 10-minute-old cpu sample at 90 %, the rest a
/// fresh one at 20 %; memory is fresh at 20 % everywhere.
fn fleet(n: usize, stale: usize) -> (Snapshot, Vec<String>) {
    let mut snap = Snapshot::default();
    let mut names = Vec::new();
    for i in 0..n {
        let name = format!("n{i:02}");
        let cpu = if i < stale {
            Sample { value: 90.0, at: at(600) }
        } else {
            Sample { value: 20.0, at: at(10) }
        };
        snap.upsert_node(
            &name,
            EIGHT_CPU,
            [("cpu", cpu), ("mem", Sample { value: 20.0, at: at(10) })],
        );
        names.push(name);
    }
    (snap, names)
}

#[test]
fn more_than_half_stale_leaves_the_metric_out_for_everyone() {
    let mut policy = policy();
    policy.stale.filter = StaleFilter::Reject;
    let (snap, nodes) = fleet(10, 6);
    assert_eq!(breakers(&policy, &snap, NOW), vec![true, false]);
    // Only memory counts: 20 % + the best-effort 140 MiB of 32 GiB (0.4272 %) →
    // 60 × 20.4272 / 40 + 40 = 70.64 → 71 for every node, stale or not.
    let out = score(&policy, &snap, &Pod::default(), &nodes, NOW, true);
    assert!(out.scores.iter().all(|s| s.score == 71), "{:?}", out.scores);
    let cpu = &out.scores[9].terms[0];
    assert_eq!((cpu.weight, cpu.stale), (0.0, true), "explain shows the metric left out");
    // No filtering on it either, not even stale.filter: reject.
    let f = filter(&policy, &snap, &Pod::default(), &nodes, NOW).with_names(nodes.clone());
    assert!(f.rejected.is_empty(), "{:?}", f.rejected);
    let all = filter_all(&policy, &snap, &Pod::default(), NOW);
    assert!(all.rejected.is_empty(), "{:?}", all.rejected);
}

#[test]
fn half_or_fewer_stale_keeps_the_per_node_stale_policy() {
    let mut policy = policy();
    let (snap, nodes) = fleet(10, 5);
    // 5 of 10 is not more than 50 %.
    assert_eq!(breakers(&policy, &snap, NOW), vec![false, false]);
    let out = score(&policy, &snap, &Pod::default(), &nodes, NOW, false);
    // Stale node: cpu at the stale score 50, mem 70 → 60. Fresh: cpu 20 % + best-effort
    // 213 m of 8 CPUs (2.6625 %) → 60 × 22.6625 / 40 + 40 = 73.99; mem 20 % + 140 MiB of
    // 32 GiB (0.4272 %) → 70.64; mean 72.3 → 72.
    assert_eq!(out.scores[0].score, 60);
    assert_eq!(out.scores[9].score, 72);
    policy.stale.filter = StaleFilter::Reject;
    let f = filter(&policy, &snap, &Pod::default(), &nodes, NOW).with_names(nodes.clone());
    assert_eq!(f.rejected.len(), 5);
}

#[test]
fn the_share_and_the_minimum_are_policy_keys() {
    let (snap, _) = fleet(10, 3);
    let text = "stale: {breakerShare: 0.25}\nmetrics:\n  - {name: cpu, resource: cpu, query: q, period: 30s, weight: 1}\n";
    let policy = parse_policy(text).unwrap();
    assert_eq!(breakers(&policy, &snap, NOW), vec![true], "3 of 10 > 25 %");
    // Two nodes, both stale: below the default minimum of 3 reporting nodes.
    let (small, _) = fleet(2, 2);
    assert_eq!(breakers(&policy, &small, NOW), vec![false]);
    let policy = parse_policy(
        &text.replace("{breakerShare: 0.25}", "{breakerShare: 0.25, breakerMinNodes: 2}"),
    )
    .unwrap();
    assert_eq!(breakers(&policy, &small, NOW), vec![true]);
    // A share of 1 never opens: no share of nodes is more than all of them.
    let never = parse_policy(&text.replace("0.25", "1")).unwrap();
    assert_eq!(breakers(&never, &fleet(10, 10).0, NOW), vec![false]);
}

#[test]
fn nodes_without_the_metric_are_not_counted_and_the_breaker_closes_by_itself() {
    let policy = policy();
    let (mut snap, nodes) = fleet(6, 4);
    // Four more nodes that never report cpu (a metric some nodes lack, like a GPU's): they
    // neither dilute nor add to the stale share, 4 of 6.
    for i in 0..4 {
        snap.upsert_node(
            &format!("m{i}"),
            EIGHT_CPU,
            [("mem", Sample { value: 20.0, at: at(10) })],
        );
    }
    assert_eq!(breakers(&policy, &snap, NOW), vec![true, false]);
    // Fresh samples arrive for two stale nodes: 2 of 6 stale, closed again.
    for node in &nodes[..2] {
        snap.upsert_node(
            node,
            EIGHT_CPU,
            [
                ("cpu", Sample { value: 30.0, at: at(5) }),
                ("mem", Sample { value: 20.0, at: at(5) }),
            ],
        );
    }
    assert_eq!(breakers(&policy, &snap, NOW), vec![false, false]);
    // Time passes with no new samples: everything ages past 2m30s and it opens for both.
    let later = NOW.plus(Millis::from_mins(5));
    assert_eq!(breakers(&policy, &snap, later), vec![true, true]);
    // Every metric left out: every node scores the stale score.
    let out = score(&policy, &snap, &Pod::default(), &nodes, later, false);
    assert!(out.scores.iter().all(|s| s.score == 50), "{:?}", out.scores);
}

/// The snapshot's index of sample times agrees with a walk over the nodes after upserts,
/// replacements, removals and a clear.
#[test]
fn the_sample_time_index_follows_every_snapshot_change() {
    let walk = |snap: &Snapshot, metric: &str, cutoff: UnixMillis| -> (usize, usize) {
        let Some(id) = snap.metric_id(metric) else { return (0, 0) };
        let samples: Vec<Sample> = snap.nodes().filter_map(|n| n.sample(id)).collect();
        (samples.iter().filter(|s| s.at < cutoff).count(), samples.len())
    };
    let check = |snap: &Snapshot| {
        for metric in ["cpu", "mem"] {
            let Some(id) = snap.metric_id(metric) else { continue };
            for cutoff in [at(1000), at(300), at(60), at(0), NOW.plus(Millis(1))] {
                assert_eq!(snap.samples_before(id, cutoff, usize::MAX), walk(snap, metric, cutoff));
            }
        }
    };
    let mut snap = Snapshot::default();
    for i in 0..20i64 {
        let name = format!("n{}", i % 7);
        let mut samples = vec![("cpu", Sample { value: 1.0, at: at(i * 37 % 400) })];
        if i % 3 != 0 {
            samples.push(("mem", Sample { value: 1.0, at: at(i * 53 % 700) }));
        }
        snap.upsert_node(&name, EIGHT_CPU, samples);
        check(&snap);
        if i % 5 == 4 {
            snap.remove_node(&format!("n{}", i % 4));
            check(&snap);
        }
    }
    snap.clear_nodes();
    check(&snap);
    snap.upsert_node("again", EIGHT_CPU, [("mem", Sample { value: 1.0, at: at(900) })]);
    check(&snap);
}
