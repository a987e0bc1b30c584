use std::collections::BTreeMap;

use super::*;
use crate::delta::NodeReport;
use crate::estimate::Usage;
use crate::ledger::{LedgerEntry, LedgerSource};
use crate::policy::parse_policy;
use crate::snapshot::{Capacity, Sample};
use crate::time::Millis;

const NOW: UnixMillis = UnixMillis(1_800_000_000_000);
const EIGHT_CPU: Capacity = Capacity { cpu_millis: 8000, memory_bytes: 32 << 30 };

/// One cpu metric, water level at 40, Filter above 65; the ledger on (absorb window
/// 5 m + 30 s + 90 s = 7 m).
fn policy() -> Policy {
    parse_policy(
        "metrics:\n  - {name: cpu_usage_avg_5m, resource: cpu, query: q, period: 30s, weight: 1, filterAbove: 65}\n\
         curve: {kind: waterLevel, target: 40}\n",
    )
    .unwrap()
}

fn node(name: &str, cpu_percent: f64) -> NodeReport {
    NodeReport {
        name: name.into(),
        capacity: EIGHT_CPU,
        samples: vec![(
            "cpu_usage_avg_5m".into(),
            Sample { value: cpu_percent, at: NOW.minus(Millis::from_secs(10)) },
        )],
    }
}

/// hot 80 %, warm 30 %, cool 20 % cpu, 8 cores each.
fn view() -> ShadowView {
    let mut view = ShadowView::default();
    view.apply(&Delta {
        reset: true,
        nodes: vec![node("hot", 80.0), node("warm", 30.0), node("cool", 20.0)],
        ..Delta::default()
    });
    view
}

/// 1 cpu requested, no limit: the estimate is 1000m × 0.85 = 850m, 10.625 % of 8 cores.
fn pod(uid: &str) -> Pod {
    Pod {
        uid: uid.into(),
        namespace: "default".into(),
        name: uid.into(),
        cpu_request_millis: 1000,
        memory_request_bytes: 1 << 30,
        ..Pod::default()
    }
}

fn bind(uid: &str, node: &str) -> Bind {
    Bind {
        pod: pod(uid),
        scheduler: "default-scheduler".into(),
        node: node.into(),
        bound_at: NOW.minus(Millis::from_secs(1)),
    }
}

fn entry(uid: &str, node: &str, source: LedgerSource) -> LedgerEntry {
    LedgerEntry {
        uid: uid.into(),
        namespace: "default".into(),
        name: uid.into(),
        node: node.into(),
        placed_at: NOW.minus(Millis::from_secs(30)),
        usage: Usage { cpu_millis: 850, memory_bytes: 0 },
        source,
        labels: BTreeMap::new(),
    }
}

#[test]
fn a_bind_onto_a_node_above_the_threshold_is_rejected_with_the_metric_as_reason() {
    let mut view = view();
    let d = view.judge(&policy(), &bind("p", "hot"), NOW);
    // hot: U = 80 + 10.625 = 90.625 > 65: rejected. Score past the target:
    // 40 × (100 − 90.625) / (100 − 40) = 6.25 → 6.
    assert_eq!(d.rejection.as_deref(), Some("cpu_usage_avg_5m 90.6% > 65%"));
    assert_eq!(d.rejected_by, ["cpu_usage_avg_5m"]);
    assert_eq!(d.chosen_score, 6);
    // cool: U = 20 + 10.625 = 30.625 ≤ 40: (100 − 40) × 30.625 / 40 + 40 = 85.9375 → 86.
    // warm: U = 40.625 > 40: 40 × 59.375 / 60 = 39.58 → 40. Best: cool.
    assert_eq!(d.best, Some(("cool".to_string(), 86)));
    assert_eq!(d.regret, 86 - 6);
    assert_eq!((d.candidates, d.fitting, d.feasible), (3, 3, 2));
    assert!(d.chosen_fits && d.chosen_known);
    // Predicted level against the water level, on the chosen node.
    assert_eq!(d.levels.len(), 1);
    assert_eq!(d.levels[0].metric, "cpu_usage_avg_5m");
    assert!((d.levels[0].predicted - 90.625).abs() < 1e-9);
    assert_eq!(d.levels[0].target, 40.0);
    assert_eq!((d.scheduler.as_str(), d.chosen_node.as_str()), ("default-scheduler", "hot"));
    assert_eq!((d.bound_at, d.judged_at), (NOW.minus(Millis::from_secs(1)), NOW));
}

#[test]
fn regret_is_zero_when_the_other_scheduler_picked_waterlines_best() {
    let mut view = view();
    let d = view.judge(&policy(), &bind("p", "cool"), NOW);
    assert_eq!(d.rejection, None);
    assert!(d.rejected_by.is_empty());
    assert_eq!(d.chosen_score, 86);
    assert_eq!(d.best, Some(("cool".to_string(), 86)));
    assert_eq!(d.regret, 0);
}

#[test]
fn a_tie_with_the_best_is_no_regret_and_names_the_chosen_node() {
    let mut view = ShadowView::default();
    view.apply(&Delta {
        reset: true,
        nodes: vec![node("a", 20.0), node("b", 20.0)],
        ..Delta::default()
    });
    // Both score 86; "a" sorts first, but the chosen "b" is named best.
    let d = view.judge(&policy(), &bind("p", "b"), NOW);
    assert_eq!(d.best, Some(("b".to_string(), 86)));
    assert_eq!(d.regret, 0);
}

#[test]
fn the_ledger_counts_earlier_binds_and_never_the_pod_itself() {
    let mut view = view();
    // An earlier bind on cool, 30 s ago, still within the 7 m absorb window: cool's
    // U = 20 + 10.625 (ledger) + 10.625 (incoming) = 41.25 → 40 × 58.75 / 60 = 39.17 → 39,
    // so warm (40) is now the best.
    view.apply(&Delta {
        placed: vec![entry("earlier", "cool", LedgerSource::Watch)],
        ..Delta::default()
    });
    // The judged pod's own Reserve (here on cool) is left out while judging.
    view.apply(&Delta {
        placed: vec![entry("p", "cool", LedgerSource::Reserve)],
        ..Delta::default()
    });
    let d = view.judge(&policy(), &bind("p", "cool"), NOW);
    assert_eq!(d.chosen_score, 39);
    assert_eq!(d.best, Some(("warm".to_string(), 40)));
    assert_eq!(d.regret, 1);
    // ... and put back after: the view still matches the collector's ledger.
    assert_eq!(view.snapshot().ledger().len(), 2);
    assert!(view.snapshot().ledger().get("p").is_some());
}

#[test]
fn the_best_node_must_fit_the_requests_of_the_pods_bound_there() {
    let mut view = view();
    // cool has 7.5 of its 8 cores requested: 1000m > 8000 − 7500 = 500m does not fit.
    view.bind("big", "cool", Requests { cpu_millis: 7500, memory_bytes: 0 });
    let d = view.judge(&policy(), &bind("p", "hot"), NOW);
    assert_eq!(d.best, Some(("warm".to_string(), 40)));
    assert_eq!(d.regret, 40 - 6);
    assert_eq!((d.fitting, d.feasible), (2, 1));
    // Exactly the rest fits (request ≤ allocatable − requested); a zero request always does.
    assert!(!view.fits(&pod("x"), "cool"));
    let half_cpu = Pod { cpu_request_millis: 500, ..pod("x") };
    assert!(view.fits(&half_cpu, "cool"));
    assert!(view.fits(&Pod::default(), "cool"));
    // Unbinding gives the room back; rebinding elsewhere moves it.
    view.bind("big", "warm", Requests { cpu_millis: 7500, memory_bytes: 0 });
    assert_eq!(view.requested("cool"), Requests::default());
    assert!(!view.fits(&pod("x"), "warm"));
    view.unbind("big");
    assert!(view.fits(&pod("x"), "warm"));
    view.unbind("never-bound");
}

#[test]
fn no_best_when_every_node_is_rejected_or_full() {
    let mut view = ShadowView::default();
    view.apply(&Delta { reset: true, nodes: vec![node("hot", 80.0)], ..Delta::default() });
    let d = view.judge(&policy(), &bind("p", "hot"), NOW);
    assert_eq!(d.best, None);
    assert_eq!(d.regret, 0);
    assert_eq!(d.feasible, 0);
}

#[test]
fn a_node_the_snapshot_does_not_know_is_judged_as_the_engine_does() {
    let mut view = view();
    let d = view.judge(&policy(), &bind("p", "elsewhere"), NOW);
    // Unknown: Filter passes, Score gives the stale score (50); no allocatable, no fit.
    assert!(!d.chosen_known && !d.chosen_fits);
    assert_eq!((d.rejection.as_deref(), d.chosen_score), (None, 50));
    assert_eq!(d.best, Some(("cool".to_string(), 86)));
    assert_eq!(d.regret, 36);
    assert_eq!(d.candidates, 4);
    assert!(d.levels.is_empty());
}

#[test]
fn a_reset_replaces_nodes_and_bound_pods() {
    let mut view = view();
    view.bind("a", "cool", Requests { cpu_millis: 8000, memory_bytes: 0 });
    view.reset_bound([(
        "b".to_string(),
        "warm".to_string(),
        Requests { cpu_millis: 100, memory_bytes: 0 },
    )]);
    assert_eq!(view.requested("cool"), Requests::default());
    assert_eq!(view.requested("warm").cpu_millis, 100);
    view.apply(&Delta { reset: true, nodes: vec![node("cool", 20.0)], ..Delta::default() });
    let d = view.judge(&policy(), &bind("p", "cool"), NOW);
    assert_eq!(d.candidates, 1);
}

#[test]
fn rejection_reasons_name_their_metrics() {
    let policy = parse_policy(
        "metrics:\n  - {name: cpu, resource: cpu, query: q, period: 30s, weight: 1, filterAbove: 65}\n  \
         - {name: cpu_max, resource: cpu, query: q2, period: 30s, weight: 1, filterAbove: 75}\n",
    )
    .unwrap();
    assert_eq!(rejected_by(&policy, "cpu_max 80.0% > 75%; cpu 70.0% > 65%"), ["cpu_max", "cpu"]);
    assert_eq!(rejected_by(&policy, "cpu has no fresh sample"), ["cpu"]);
    assert_eq!(
        rejected_by(&policy, "anti-colocation app=db with default/db-0"),
        ["anti-colocation"]
    );
    assert_eq!(rejected_by(&policy, "something new"), ["other"]);
}
