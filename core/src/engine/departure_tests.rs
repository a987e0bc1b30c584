//! Departures through the engine (docs/design.md#departures), with the arithmetic written
//! out: one 8-CPU node, a pod requesting 2 CPUs (2000 m × 0.85 = 1700 m, 21.25 % of 8000 m).

use std::collections::BTreeMap;

use super::reference::score;
use super::*;
use crate::estimate::estimate;
use crate::ledger::{DepartureCredit, LedgerEntry, LedgerSource};
use crate::pod::Pod;
use crate::policy::{Policy, parse_policy};
use crate::snapshot::{Capacity, Sample, Snapshot};
use crate::time::{Millis, UnixMillis};

const NOW: UnixMillis = UnixMillis(1_800_000_000_000);
const EIGHT_CPU: Capacity = Capacity { cpu_millis: 8000, memory_bytes: 32 << 30 };

fn two_cpu_pod() -> Pod {
    Pod { uid: "web-1".into(), name: "web-1".into(), cpu_request_millis: 2000, ..Pod::default() }
}

/// The pod's watched entry, placed `ago` before `NOW` and priced by the estimator (the one
/// home for the estimate, as the pod watch prices it).
fn watched(policy: &Policy, node: &str, ago: Millis) -> LedgerEntry {
    let pod = two_cpu_pod();
    LedgerEntry {
        uid: pod.uid.clone(),
        namespace: "default".into(),
        name: pod.name.clone(),
        node: node.into(),
        placed_at: NOW.minus(ago),
        usage: estimate(&policy.estimator, &Default::default(), &pod),
        source: LedgerSource::Watch,
        labels: BTreeMap::new(),
    }
}

/// A node observed at `percent` on every metric of `policy`, sampled at `at`.
fn node_at(policy: &Policy, snap: &mut Snapshot, percent: f64, at: UnixMillis) {
    let samples = policy.metrics.iter().map(|m| (m.name.as_str(), Sample { value: percent, at }));
    snap.upsert_node("n", EIGHT_CPU, samples);
}

/// Per metric: (ledger share, observed + ledger with the floor), at `now`, as Score explains.
fn levels(policy: &Policy, snap: &Snapshot, now: UnixMillis) -> Vec<(String, f64, f64)> {
    let names = vec!["n".to_string()];
    let scored = score(policy, snap, &Pod::default(), &names, now, true);
    let explained = evaluate(
        policy,
        snap,
        None,
        &Pod::default(),
        Ask::Score { explain: true },
        Candidates::Names(&names),
        now,
    );
    // The engine's own path agrees with the reference, term for term.
    assert_eq!(explained.terms[0], scored.scores[0].terms);
    scored.scores[0]
        .terms
        .iter()
        .map(|t| (t.metric.clone(), t.ledger, settled_level(t.observed, t.ledger)))
        .collect()
}

fn cpu(levels: &[(String, f64, f64)], metric: &str) -> (f64, f64) {
    let (_, ledger, level) = levels.iter().find(|(m, ..)| m == metric).expect("a policy metric");
    (*ledger, *level)
}

/// The worked example of docs/design.md#departures: a node at 70 % cpu, the pod placed an
/// hour ago (every metric shows it), deleted now. The 5 m average drops by its share at once,
/// 70 − 1700 / 8000 × 100 = 70 − 21.25 = 48.75, and comes back to the metric's own value once
/// the 5 m + 30 s + 90 s = 7 m absorb window has passed; the 1 h and 1 d maxima hold at 70.
#[test]
fn a_departure_credits_the_average_at_once_and_holds_the_maxima() {
    let policy = Policy::default().crediting_departures();
    assert_eq!(estimate(&policy.estimator, &Default::default(), &two_cpu_pod()).cpu_millis, 1700);
    let mut snap = Snapshot::default();
    node_at(&policy, &mut snap, 70.0, NOW);
    snap.apply_placement(watched(&policy, "n", Millis::from_mins(60)));
    // Before: absorbed by every metric (60 m > 36.5 m), so the ledger adds nothing.
    let before = levels(&policy, &snap, NOW);
    assert_eq!(cpu(&before, "cpu_usage_avg_5m"), (0.0, 70.0));
    assert_eq!(cpu(&before, "cpu_usage_max_avg_1h"), (0.0, 70.0));

    let departure = snap.depart_placement("web-1", NOW).expect("a watched pod departs");
    assert_eq!(departure.source, LedgerSource::Departure { departed_at: NOW, arrival_known: true });
    let after = levels(&policy, &snap, NOW);
    assert_eq!(cpu(&after, "cpu_usage_avg_5m"), (-21.25, 48.75));
    assert_eq!(cpu(&after, "cpu_usage_max_avg_1h"), (0.0, 70.0));
    assert_eq!(cpu(&after, "cpu_usage_max_avg_1d"), (0.0, 70.0));
    // The pod had no memory request: 200 MiB best effort × 0.7 = 140 MiB of 32 GiB.
    let memory = after.iter().find(|(m, ..)| m == "mem_usage_avg_5m").unwrap().1;
    // 140 / 32768 × 100 = 0.42724609375 %, rounded to a millionth.
    assert_eq!(memory, -0.427246);

    // The credit lasts until the metric starts to show the departure: the absorb window
    // (5 m + 30 s + 90 s = 7 m) less the 5 m averaging window = 2 m. 1 m 59 s on, still
    // credited; at 2 m the credit ends and the metric speaks alone — it has begun to fall and
    // reads the pod gone in full 5 m later, at 7 m (here it still reads 70, so 70).
    let spec = policy.metric("cpu_usage_avg_5m").unwrap();
    assert_eq!(spec.absorb_window, Millis::from_mins(7));
    let window = spec.credit_window();
    assert_eq!(window, Millis::from_mins(2));
    let just_before = NOW.plus(window).minus(Millis(1_000));
    node_at(&policy, &mut snap, 70.0, just_before);
    assert_eq!(cpu(&levels(&policy, &snap, just_before), "cpu_usage_avg_5m"), (-21.25, 48.75));
    let ended = NOW.plus(window);
    node_at(&policy, &mut snap, 70.0, ended);
    assert_eq!(cpu(&levels(&policy, &snap, ended), "cpu_usage_avg_5m"), (0.0, 70.0));
    let absorbed = NOW.plus(spec.absorb_window);
    node_at(&policy, &mut snap, 48.75, absorbed);
    assert_eq!(cpu(&levels(&policy, &snap, absorbed), "cpu_usage_avg_5m"), (0.0, 48.75));
}

/// A pod deleted 2 minutes after it was placed: no metric showed it yet, the ledger did
/// (+21.25 on every cpu metric). The departure cancels that and credits nothing.
#[test]
fn a_departure_cancels_its_own_unabsorbed_arrival_and_credits_nothing() {
    let policy = Policy::default().crediting_departures();
    let mut snap = Snapshot::default();
    node_at(&policy, &mut snap, 70.0, NOW);
    snap.apply_placement(watched(&policy, "n", Millis::from_mins(2)));
    let before = levels(&policy, &snap, NOW);
    assert_eq!(cpu(&before, "cpu_usage_avg_5m"), (21.25, 91.25));
    assert_eq!(cpu(&before, "cpu_usage_max_avg_1h"), (21.25, 91.25));
    snap.depart_placement("web-1", NOW);
    for (metric, ledger, level) in levels(&policy, &snap, NOW) {
        assert_eq!((ledger, level), (0.0, 70.0), "{metric}");
    }
}

/// Each metric decides by its own absorb window: 10 minutes after placement the 7 m
/// average had absorbed the arrival (credit), a crediting 11.5 m metric had not (cancel).
#[test]
fn cancel_or_credit_is_decided_per_metric() {
    let policy = parse_policy(
        "metrics:\n\
         - {name: cpu_usage_avg_5m, resource: cpu, query: q, period: 30s, weight: 1, departures: credit}\n\
         - {name: cpu_slow_avg, resource: cpu, query: q, period: 5m, weight: 1, departures: credit}\n",
    )
    .unwrap();
    let windows: Vec<Millis> = policy.metrics.iter().map(|m| m.absorb_window).collect();
    assert_eq!(windows, [Millis::from_mins(7), Millis(11 * 60_000 + 30_000)]);
    let mut snap = Snapshot::default();
    node_at(&policy, &mut snap, 70.0, NOW);
    snap.apply_placement(watched(&policy, "n", Millis::from_mins(10)));
    snap.depart_placement("web-1", NOW);
    let after = levels(&policy, &snap, NOW);
    assert_eq!(cpu(&after, "cpu_usage_avg_5m"), (-21.25, 48.75));
    assert_eq!(cpu(&after, "cpu_slow_avg"), (0.0, 70.0));
}

/// Credits never take a level below 0: a node observed at 10 % loses at most those 10 pp
/// (two 2-CPU pods leaving would be 42.5 pp).
#[test]
fn the_floor_keeps_observed_plus_ledger_at_zero_or_more() {
    let policy = Policy::default().crediting_departures();
    let mut snap = Snapshot::default();
    node_at(&policy, &mut snap, 10.0, NOW);
    for uid in ["a", "b"] {
        let entry = LedgerEntry { uid: uid.into(), ..watched(&policy, "n", Millis::from_mins(60)) };
        snap.apply_placement(entry);
        snap.depart_placement(uid, NOW);
    }
    let after = levels(&policy, &snap, NOW);
    assert_eq!(cpu(&after, "cpu_usage_avg_5m"), (-42.5, 0.0));
    // And Filter and Score read the same floor: the predicted value with a 2-CPU incoming
    // pod is 0 + 21.25, not 10 − 42.5 + 21.25.
    let names = vec!["n".to_string()];
    let scored = score(&policy, &snap, &two_cpu_pod(), &names, NOW, true);
    let term = &scored.scores[0].terms[0];
    assert_eq!((term.metric.as_str(), term.predicted), ("cpu_usage_avg_5m", 21.25));
}

/// A pod no ledger held (only its node and estimate are known, as a simulator knows them):
/// the full credit on every crediting metric, none on the maxima.
#[test]
fn a_pod_never_in_the_ledger_gets_the_full_credit() {
    let policy = Policy::default().crediting_departures();
    let mut snap = Snapshot::default();
    node_at(&policy, &mut snap, 70.0, NOW);
    let unknown = watched(&policy, "n", Millis(0)).departure(NOW);
    assert_eq!(unknown.source, LedgerSource::Departure { departed_at: NOW, arrival_known: false });
    snap.apply_placement(unknown);
    let after = levels(&policy, &snap, NOW);
    assert_eq!(cpu(&after, "cpu_usage_avg_5m"), (-21.25, 48.75));
    assert_eq!(cpu(&after, "cpu_usage_max_avg_1h"), (0.0, 70.0));
}

/// The marker: `hold` on an average keeps it at 70 too; the default policy's maxima hold.
#[test]
fn a_holding_metric_is_never_credited() {
    let policy = parse_policy(
        "metrics:\n  - {name: cpu_usage_avg_5m, resource: cpu, query: q, period: 30s, weight: 1, departures: hold}\n",
    )
    .unwrap();
    assert_eq!(policy.metrics[0].departures, DepartureCredit::Hold);
    let mut snap = Snapshot::default();
    node_at(&policy, &mut snap, 70.0, NOW);
    snap.apply_placement(watched(&policy, "n", Millis::from_mins(60)));
    snap.depart_placement("web-1", NOW);
    assert_eq!(cpu(&levels(&policy, &snap, NOW), "cpu_usage_avg_5m"), (0.0, 70.0));
}

/// The prepared table follows a departure like any ledger change, and its rows stop being
/// valid when the credit ends: the same answers as the reference before, at and after.
#[test]
fn the_prepared_table_follows_a_departure_and_its_end() {
    // The default policy's 5 m average with its threshold, crediting, and a 1 h maximum
    // (holding) without one.
    let policy = parse_policy(
        "metrics:\n\
         - {name: cpu_usage_avg_5m, resource: cpu, query: q, period: 30s, weight: 0.2, filterAbove: 65, departures: credit}\n\
         - {name: cpu_usage_max_avg_1h, resource: cpu, query: q, period: 5m, weight: 0.3}\n",
    )
    .unwrap();
    let mut snap = Snapshot::default();
    snap.track_changes();
    let window = policy.metric("cpu_usage_avg_5m").unwrap().credit_window();
    // Sampled at the end of the credit, so the samples stay fresh throughout.
    node_at(&policy, &mut snap, 70.0, NOW.plus(window));
    snap.apply_placement(watched(&policy, "n", Millis::from_mins(60)));
    let mut table = Prepared::build(&policy, &snap, NOW);
    snap.take_changes();
    snap.depart_placement("web-1", NOW);
    table.update(&policy, &mut snap, NOW);
    let small = Pod { cpu_request_millis: 1000, ..two_cpu_pod() }; // 850 m: 10.625 %
    let names = vec!["n".to_string()];
    for pod in [two_cpu_pod(), small.clone()] {
        for at in [NOW, NOW.plus(window).minus(Millis(1)), NOW.plus(window)] {
            let fast =
                evaluate(&policy, &snap, Some(&table), &pod, Ask::Evaluate, Candidates::All, at);
            let slow = reference::evaluate_reference(&policy, &snap, &pod, &names, at);
            assert_eq!(fast, slow, "at {at:?}");
        }
    }
    // While the credit lasts the 1-CPU pod fits: 48.75 + 10.625 = 59.375 <= 65; once it has
    // ended (the metric, here, not moved) 70 + 10.625 = 80.625 > 65.
    let rejected = |at| {
        evaluate(&policy, &snap, Some(&table), &small, Ask::Evaluate, Candidates::All, at).scores[0]
            .is_none()
    };
    assert!(!rejected(NOW));
    assert!(!rejected(NOW.plus(window).minus(Millis(1))));
    assert!(rejected(NOW.plus(window)));
}
