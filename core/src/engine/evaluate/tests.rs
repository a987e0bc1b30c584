//! `evaluate` against the reference walk (`reference.rs`): Evaluate against
//! `evaluate_reference` (filter, then score of the feasible names), Score against `score`,
//! with and without a `Prepared` table, for every kind of candidate list: random snapshots,
//! ledgers (arrivals and departures, cancelled and credited), pods and policies, the table kept up to date through random changes, asked at
//! random times — the same answer, score for score, term for term and reason for reason. Cases: `WATERLINE_FUZZ_CASES`
//! (default 256).

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::engine::reference::evaluate_reference;
use crate::estimate::Usage;
use crate::ledger::{LedgerEntry, LedgerSource};
use crate::pod::Pod;
use crate::policy::Policy;
use crate::policy::parse_policy;
use crate::snapshot::Sample;
use crate::snapshot::{Capacity, Snapshot};
use crate::time::Millis;
use crate::time::UnixMillis;

const NOW: UnixMillis = UnixMillis(1_800_000_000_000);
/// Node names: the first ones get metrics, all may carry ledger entries or be asked for.
const NODES: usize = 12;

/// The shipped policy, the six example policies, and shapes none of them has: Crane with
/// hot values, a stale filter that rejects, anti-colocation, truncation, the ledger off;
/// and the same without a Crane policy curve or a maxOfCandidates metric, which the
/// column pass (`columns.rs`) answers: per-metric curves,
/// higherIsBetter, a metric of no resource with a threshold, a zero weight.
fn policies() -> Vec<Policy> {
    let texts = [
        include_str!("../../../../deploy/policy/policy.yaml"),
        include_str!("../../../../deploy/examples/policies/crane-dynamic.yaml"),
        include_str!("../../../../deploy/examples/policies/hellobike-waterlevel.yaml"),
        include_str!("../../../../deploy/examples/policies/koordinator-loadaware.yaml"),
        include_str!("../../../../deploy/examples/policies/multi-resource-3432.yaml"),
        include_str!("../../../../deploy/examples/policies/network-traffic.yaml"),
        include_str!("../../../../deploy/examples/policies/trimaran-tlp.yaml"),
        "\
metrics:
  - {name: cpu_usage_avg_5m, resource: cpu, query: q, period: 30s, weight: 0.2, filterAbove: 65, departures: credit}
  - {name: mem_usage_avg_5m, resource: memory, query: q, period: 30s, weight: 0.2, filterAbove: 65, window: 5m, departures: credit}
  - {name: net, resource: other, query: q, period: 1m, weight: 1, unit: bytesPerSecond, normalize: maxOfCandidates}
curve: {kind: crane, hotValue: [{window: 5m, count: 5}, {window: 1m, count: 2}]}
stale: {filter: reject, score: 50}
antiColocation: [{labelKey: app}]
",
        "\
metrics:
  - {name: cpu_usage_avg_5m, resource: cpu, query: q, period: 30s, weight: 1, filterAbove: 40}
  - {name: mem_free, resource: other, query: q, period: 2m, weight: 2, direction: higherIsBetter, normalize: maxOfCandidates}
  - {name: mem_used, resource: memory, query: q, period: 1m, weight: 1, direction: higherIsBetter}
curve: {kind: leastUsed}
rounding: truncate
ledger: {enabled: false}
",
        "\
metrics:
  - {name: cpu_usage_avg_5m, resource: cpu, query: q, period: 30s, weight: 0.5, filterAbove: 65, departures: credit}
  - {name: mem_usage_avg_5m, resource: memory, query: q, period: 30s, weight: 0.5, departures: hold}
priorities:
  - {minPriority: 9000, filterAbove: {cpu_usage_avg_5m: 40, mem_usage_avg_5m: 50}}
  - {minPriority: 0, filterAbove: {cpu_usage_avg_5m: 80}}
",
        "\
metrics:
  - {name: cpu_usage_avg_5m, resource: cpu, query: q, period: 30s, weight: 0.3, filterAbove: 50}
  - {name: mem_used, resource: memory, query: q, period: 1m, weight: 1, filterAbove: 60, window: 5m, direction: higherIsBetter, curve: {kind: leastUsed}, departures: credit}
  - {name: net, resource: other, query: q, period: 1m, weight: 0.5, unit: bytesPerSecond, max: 1e8, filterAbove: 80, curve: {kind: leastUsed}}
  - {name: cpu_1h, resource: cpu, query: q, period: 5m, weight: 0.2, curve: {kind: waterLevel, target: 70}}
curve: {kind: waterLevel, target: 30}
stale: {filter: reject, score: 30}
antiColocation: [{labelKey: app}]
rounding: truncate
",
        "\
metrics:
  - {name: cpu, resource: cpu, query: q, period: 30s, weight: 0, filterAbove: 20, departures: credit}
  - {name: memory, resource: memory, query: q, period: 30s, weight: 1, filterAbove: 30, departures: credit}
curve: {kind: leastUsed}
combine: weightedMean
stale: {filter: reject, score: 70}
",
    ];
    let mut policies: Vec<Policy> = texts.iter().map(|t| parse_policy(t).unwrap()).collect();
    policies.push(Policy::default());
    policies.push(Policy::default().crediting_departures());
    policies
}

fn name(i: usize) -> String {
    format!("n{i:02}")
}

#[derive(Clone, Debug)]
struct NodeGen {
    node: usize,
    capacity: Capacity,
    /// Per metric slot: a value and an age in seconds (`None`: no sample).
    samples: Vec<Option<(f64, i64)>>,
}

#[derive(Clone, Debug)]
enum Change {
    Upsert(NodeGen),
    Remove(usize),
    Place {
        uid: usize,
        node: usize,
        age_s: i64,
        cpu: i64,
        memory: i64,
        app: bool,
    },
    Release(usize),
    /// The pod's watched entry departs `age_s` before `NOW` (nothing when it has none).
    Depart {
        uid: usize,
        age_s: i64,
    },
    /// A departure of a pod no ledger held, on `node`.
    DepartUnknown {
        uid: usize,
        node: usize,
        age_s: i64,
        cpu: i64,
        memory: i64,
    },
    /// Departures older than `horizon_s` leave.
    Prune {
        horizon_s: i64,
    },
}

fn capacity() -> impl Strategy<Value = Capacity> {
    prop_oneof![
        Just(Capacity { cpu_millis: 8000, memory_bytes: 32 << 30 }),
        Just(Capacity { cpu_millis: 16_000, memory_bytes: 64 << 30 }),
        Just(Capacity::default()),
        (1i64..4000, 1i64..(4 << 30))
            .prop_map(|(cpu_millis, memory_bytes)| Capacity { cpu_millis, memory_bytes }),
    ]
}

fn node() -> impl Strategy<Value = NodeGen> {
    let sample = prop_oneof![
        1 => Just(None),
        6 => (prop_oneof![0.0..120.0, -5.0..0.0, 0.0..2e9], -60i64..7200).prop_map(Some),
    ];
    (0..NODES, capacity(), proptest::collection::vec(sample, 8))
        .prop_map(|(node, capacity, samples)| NodeGen { node, capacity, samples })
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => node().prop_map(Change::Upsert),
        1 => (0..NODES).prop_map(Change::Remove),
        4 => (0usize..40, 0..NODES, -120i64..3600, 0i64..6000, 0i64..(8 << 30), any::<bool>())
            .prop_map(|(uid, node, age_s, cpu, memory, app)| Change::Place {
                uid, node, age_s, cpu, memory, app
            }),
        1 => (0usize..40).prop_map(Change::Release),
        2 => (0usize..40, -120i64..3600).prop_map(|(uid, age_s)| Change::Depart { uid, age_s }),
        1 => (0usize..40, 0..NODES, -120i64..3600, 0i64..6000, 0i64..(8 << 30))
            .prop_map(|(uid, node, age_s, cpu, memory)| Change::DepartUnknown {
                uid, node, age_s, cpu, memory
            }),
        1 => (0i64..3600).prop_map(|horizon_s| Change::Prune { horizon_s }),
    ]
}

/// Metric names the samples may carry: each policy's own, and one no policy reads.
fn metric_names(policy: &Policy) -> Vec<String> {
    let mut names: Vec<String> = policy.metrics.iter().map(|m| m.name.clone()).collect();
    names.push("unread".into());
    names
}

fn apply(snap: &mut Snapshot, change: &Change, metrics: &[String]) {
    match change {
        Change::Upsert(n) => {
            let samples = metrics.iter().zip(&n.samples).filter_map(|(metric, s)| {
                let (value, age) = (*s)?;
                Some((metric.as_str(), Sample { value, at: NOW.minus(Millis::from_secs(age)) }))
            });
            snap.upsert_node(&name(n.node), n.capacity, samples);
        }
        Change::Remove(n) => {
            snap.remove_node(&name(*n));
        }
        Change::Place { uid, node, age_s, cpu, memory, app } => {
            let uid = format!("p{uid}");
            let labels =
                if *app { BTreeMap::from([("app".into(), "a".into())]) } else { BTreeMap::new() };
            snap.apply_placement(LedgerEntry {
                uid: uid.clone(),
                namespace: "default".into(),
                name: uid,
                node: name(*node),
                placed_at: NOW.minus(Millis::from_secs(*age_s)),
                usage: Usage { cpu_millis: *cpu, memory_bytes: *memory },
                source: LedgerSource::Watch,
                labels,
            });
        }
        Change::Release(uid) => {
            snap.delete_placement(&format!("p{uid}"));
        }
        Change::Depart { uid, age_s } => {
            snap.depart_placement(&format!("p{uid}"), NOW.minus(Millis::from_secs(*age_s)));
        }
        Change::DepartUnknown { uid, node, age_s, cpu, memory } => {
            let uid = format!("p{uid}");
            let departed_at = NOW.minus(Millis::from_secs(*age_s));
            let entry = LedgerEntry {
                uid: uid.clone(),
                namespace: "default".into(),
                name: uid,
                node: name(*node),
                placed_at: departed_at,
                usage: Usage { cpu_millis: *cpu, memory_bytes: *memory },
                source: LedgerSource::Watch,
                labels: BTreeMap::new(),
            };
            snap.apply_placement(entry.departure(departed_at));
        }
        Change::Prune { horizon_s } => {
            snap.prune_departed(NOW, Millis::from_secs(*horizon_s));
        }
    }
}

fn pod() -> impl Strategy<Value = Pod> {
    (
        (0i64..4000, 0i64..4000, 0i64..(4 << 30), 0i64..(4 << 30), any::<bool>(), 0..8u8),
        (prop_oneof![Just(-1), Just(0), Just(8999), Just(9000), Just(20_000)], 0..6u8, 0..8u8),
    )
        .prop_map(
            |(
                (
                    cpu_request_millis,
                    cpu_limit_millis,
                    memory_request_bytes,
                    memory_limit_bytes,
                    app,
                    kind,
                ),
                (priority, factor, off),
            )| Pod {
                namespace: "default".into(),
                name: "incoming".into(),
                uid: "incoming".into(),
                labels: if app {
                    BTreeMap::from([("app".into(), "a".into())])
                } else {
                    BTreeMap::new()
                },
                cpu_request_millis,
                cpu_limit_millis,
                memory_request_bytes,
                memory_limit_bytes,
                owner_kind: if kind == 0 { "DaemonSet".into() } else { String::new() },
                owner_name: String::new(),
                priority,
                overrides: crate::pod::Overrides {
                    estimate_factor: [None, Some(0.5), Some(2.0), None, Some(1.0), Some(3.0)]
                        [usize::from(factor)],
                    load_filter_off: off == 0,
                },
            },
        )
}

proptest! {
    #![proptest_config(waterline_testkit::proptest_config(256))]

    #[test]
    fn evaluate_matches_reference(
        policy_index in 0..policies().len(),
        initial in proptest::collection::vec(change(), 0..40),
        later in proptest::collection::vec((change(), -600i64..1200), 0..12),
        pod in pod(),
        built_s in -600i64..600,
        asked_s in proptest::collection::vec(-900i64..3600, 1..4),
        asked_names in proptest::collection::vec(0..NODES + 2, 0..16),
    ) {
        let policy = &policies()[policy_index];
        let metrics = metric_names(policy);
        let mut snap = Snapshot::default();
        snap.track_changes();
        for c in &initial {
            apply(&mut snap, c, &metrics);
        }
        let mut table = Prepared::build(policy, &snap, NOW.plus(Millis::from_secs(built_s)));
        snap.take_changes();
        // Changes after the build, each followed by the update a scorer makes.
        for (c, at_s) in &later {
            apply(&mut snap, c, &metrics);
            table.update(policy, &mut snap, NOW.plus(Millis::from_secs(*at_s)));
        }
        let mut nodes: Vec<String> = snap.nodes().map(|n| n.name.clone()).collect();
        nodes.sort();
        prop_assert_eq!(table.names(), &nodes[..]);
        // Names beyond NODES are never nodes; the rest may be ledger-only or absent.
        let asked: Vec<String> = asked_names.iter().map(|&i| name(i)).collect();
        for s in asked_s {
            let now = NOW.plus(Millis::from_secs(s));
            let slots: Vec<String> = snap.slots().map(|(n, _)| n.to_owned()).collect();
            for (label, candidates, names) in [
                ("all nodes", Candidates::All, &nodes),
                ("names", Candidates::Names(&asked), &asked),
                ("slots", Candidates::Slots, &slots),
            ] {
                let old = evaluate_reference(policy, &snap, &pod, names, now);
                for table in [Some(&table), None] {
                    let new = evaluate(policy, &snap, table, &pod, Ask::Evaluate, candidates, now);
                    prop_assert_eq!(&new, &old, "evaluate {} {:?} at {}s, table {}", label, names, s, table.is_some());
                    for explain in [false, true] {
                        let new = evaluate(policy, &snap, table, &pod, Ask::Score { explain }, candidates, now);
                        let old = score_reference(policy, &snap, &pod, names, now, explain);
                        prop_assert_eq!(new, old, "score {} {:?} at {}s, table {}, explain {}", label, names, s, table.is_some(), explain);
                    }
                }
            }
        }
    }
}

/// `reference::score` as `evaluate` answers `Ask::Score`: every candidate scored, no
/// verdicts, the terms when explained.
fn score_reference(
    policy: &Policy,
    snap: &Snapshot,
    pod: &Pod,
    names: &[String],
    now: UnixMillis,
    explain: bool,
) -> Evaluation {
    let scored = crate::engine::reference::score(policy, snap, pod, names, now, explain);
    let unknown = crate::engine::reference::score(policy, snap, pod, &[String::new()], now, false);
    Evaluation {
        scores: scored.scores.iter().map(|s| Some(s.score)).collect(),
        rejected: Rejections::default(),
        terms: if explain {
            scored.scores.into_iter().map(|s| s.terms).collect()
        } else {
            Vec::new()
        },
        estimate: explain.then(|| crate::estimate::price(&policy.estimator, snap.learned(), pod)),
        unknown_node_score: unknown.scores[0].score,
        stats: scored.stats,
    }
}

#[test]
fn a_table_for_another_policy_shape_answers_from_the_snapshot() {
    let policies = policies();
    let (built_for, asked_with) = (&policies[0], &policies[4]);
    let mut snap = Snapshot::default();
    snap.upsert_node("a", Capacity { cpu_millis: 8000, memory_bytes: 32 << 30 }, []);
    let table = Prepared::build(built_for, &snap, NOW);
    assert!(!table.fits(asked_with));
    let pod = Pod::default();
    let names = vec!["a".to_string()];
    assert_eq!(
        evaluate(asked_with, &snap, Some(&table), &pod, Ask::Evaluate, Candidates::All, NOW),
        evaluate_reference(asked_with, &snap, &pod, &names, NOW)
    );
}

#[test]
fn a_reserve_updates_one_row_and_its_load_counts_until_absorbed() {
    // One metric at 30 % on two 8-cpu nodes; a 2-cpu placement on "a" adds 25 % there.
    let policy = parse_policy(
        "metrics:\n  - {name: cpu, resource: cpu, query: q, period: 30s, weight: 1, filterAbove: 50}\ncurve: {kind: leastUsed}\nledger: {lag: 0s}\n",
    )
    .unwrap();
    let window = policy.metrics[0].absorb_window;
    let mut snap = Snapshot::default();
    snap.track_changes();
    let eight = Capacity { cpu_millis: 8000, memory_bytes: 32 << 30 };
    // Sampled at the end of the window, so the sample is fresh throughout.
    let sample = Sample { value: 30.0, at: NOW.plus(window) };
    for node in ["a", "b"] {
        snap.upsert_node(node, eight, [("cpu", sample)]);
    }
    let mut table = Prepared::build(&policy, &snap, NOW);
    snap.take_changes();
    let pod = Pod { cpu_request_millis: 1000, ..Pod::default() }; // 850m estimated: 10.625 %
    let scores = |table: &Prepared, snap: &Snapshot, now| {
        evaluate(&policy, snap, Some(table), &pod, Ask::Evaluate, Candidates::All, now).scores
    };
    // 100 − (30 + 10.625) = 59.375 → 59 on both.
    assert_eq!(scores(&table, &snap, NOW), vec![Some(59), Some(59)]);
    snap.apply_placement(LedgerEntry {
        uid: "p".into(),
        namespace: "default".into(),
        name: "p".into(),
        node: "a".into(),
        placed_at: NOW,
        usage: Usage { cpu_millis: 2000, memory_bytes: 0 },
        source: LedgerSource::Reserve,
        labels: BTreeMap::new(),
    });
    assert_eq!(snap.take_changes().nodes, vec!["a".to_string()]);
    snap.apply_placement(LedgerEntry {
        uid: "q".into(),
        namespace: "default".into(),
        name: "q".into(),
        node: "a".into(),
        placed_at: NOW,
        usage: Usage { cpu_millis: 0, memory_bytes: 0 },
        source: LedgerSource::Reserve,
        labels: BTreeMap::new(),
    });
    assert!(!table.update(&policy, &mut snap, NOW), "no name changed: rows patched");
    // a: 30 + 25 + 10.625 = 65.625 > 50 → rejected; b unchanged.
    let at_now = evaluate(&policy, &snap, Some(&table), &pod, Ask::Evaluate, Candidates::All, NOW);
    assert_eq!(at_now.scores, vec![None, Some(59)]);
    assert_eq!(at_now.rejected.iter().collect::<Vec<_>>(), [(0, "cpu 65.6% > 50%")]);
    // Once the window has passed the placement no longer counts, whether or not the row
    // was refreshed since.
    let later = NOW.plus(window);
    assert_eq!(scores(&table, &snap, later), vec![Some(59), Some(59)]);
    table.refresh_expired(&policy, &snap, later);
    assert_eq!(scores(&table, &snap, later), vec![Some(59), Some(59)]);
    // A new node is a new name: the table is rebuilt.
    snap.upsert_node("c", eight, [("cpu", sample)]);
    assert!(table.update(&policy, &mut snap, NOW));
    assert_eq!(table.names(), ["a", "b", "c"]);
}
