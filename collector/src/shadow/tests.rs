//! The judge on the collector's state, driven through the pod watch's index with plain pod
//! objects (no API server): what it judges, on which state, and what a full queue does.

use std::collections::BTreeMap;
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::Pod as KubePod;
use serde_json::json;
use waterline_core::policy::parse_policy;
use waterline_core::snapshot::{Capacity, Sample};

use super::*;
use crate::sources::kube::{Index, PodIndex};
use crate::state::NodeRecord;

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    shadow: ShadowArgs,
}

fn args(flags: &[&str]) -> ShadowArgs {
    Flags::parse_from(std::iter::once("collector").chain(flags.iter().copied())).shadow
}

/// One cpu metric, water level at 40, Filter above 65 (as core's shadow tests).
fn policy() -> PolicyHandle {
    PolicyHandle::new(
        parse_policy(
            "metrics:\n  - {name: cpu_usage_avg_5m, resource: cpu, query: q, period: 30s, weight: 1, filterAbove: 65}\n\
             curve: {kind: waterLevel, target: 40}\n",
        )
        .unwrap(),
    )
}

/// hot 80 %, warm 30 %, cool 20 % cpu, 8 cores each, sampled now.
fn state() -> ClusterState {
    let state = ClusterState::default();
    let record = |cpu: f64| NodeRecord {
        capacity: Capacity { cpu_millis: 8000, memory_bytes: 32 << 30 },
        samples: [("cpu_usage_avg_5m".into(), Sample { value: cpu, at: UnixMillis::now() })].into(),
    };
    state.replace_nodes(BTreeMap::from([
        ("hot".into(), record(80.0)),
        ("warm".into(), record(30.0)),
        ("cool".into(), record(20.0)),
    ]));
    state
}

/// A pod requesting 1 cpu (estimate 850m, 10.625 % of a node), bound to `node` by
/// `scheduler` just now.
fn bound(name: &str, node: &str, scheduler: &str) -> KubePod {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                     "creationTimestamp": now},
        "spec": {"nodeName": node, "schedulerName": scheduler,
                 "containers": [{"name": "c", "image": "x",
                                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}]}
    }))
    .unwrap()
}

async fn wait_judged(decisions: &Decisions, count: u64) {
    for _ in 0..500 {
        if decisions.judged() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} of {count} binds judged", decisions.judged());
}

#[test]
fn every_scheduler_but_waterlines_is_judged_unless_a_list_is_given() {
    let all = SchedulerFilter::new(&args(&[]));
    assert!(all.judges("default-scheduler") && all.judges("volcano"));
    assert!(!all.judges("waterline-scheduler"));
    let only = SchedulerFilter::new(&args(&["--shadow-schedulers", "default-scheduler, volcano"]));
    assert!(only.judges("volcano") && !only.judges("other"));
    assert_eq!(SchedulerFilter::name(None), "default-scheduler");
    assert_eq!(SchedulerFilter::name(Some("")), "default-scheduler");
    assert!(Flags::try_parse_from(["collector", "--shadow-queue", "0"]).is_err());
}

#[tokio::test]
async fn binds_are_judged_on_the_state_just_before_them_and_then_enter_the_ledger() {
    let state = state();
    let mut registry = Registry::default();
    let metrics = ShadowMetrics::register(&mut registry);
    let (decisions, filter, _view, judge) = attach(&args(&[]), &state, policy(), metrics);
    tokio::spawn(judge);
    let mut index = PodIndex::new(state.clone(), policy()).with_shadow(Some(filter));

    // First bind on cool: U = 20 + 10.625 = 30.625 → 60 × 30.625 / 40 + 40 = 85.9 → 86,
    // waterline's best too. The pod does not count against itself.
    index.apply(bound("a", "cool", "default-scheduler"));
    wait_judged(&decisions, 1).await;
    // The second sees the first in the ledger: cool U = 20 + 10.625 + 10.625 = 41.25 →
    // 40 × 58.75 / 60 = 39.2 → 39, below warm's 40 × 59.375 / 60 = 39.6 → 40.
    index.apply(bound("b", "cool", "default-scheduler"));
    // Not judged: waterline's own scheduler, and a status update of a pod already judged.
    index.apply(bound("w", "hot", "waterline-scheduler"));
    index.apply(bound("a", "cool", "default-scheduler"));
    // Onto the hot node, after waterline's own pod "w" (not judged, but in the ledger):
    // U = 80 + 10.625 + 10.625 = 101.25 > 65, rejected, and past 100: score 0.
    index.apply(bound("c", "hot", ""));
    wait_judged(&decisions, 3).await;

    let recent = decisions.recent(0, "");
    let summary: Vec<_> = recent
        .iter()
        .map(|d| (d.name.as_str(), d.chosen_score, d.best.clone(), d.regret))
        .collect();
    assert_eq!(
        summary,
        [
            ("c", 0, Some(("warm".to_string(), 40)), 40),
            ("b", 39, Some(("warm".to_string(), 40)), 1),
            ("a", 86, Some(("cool".to_string(), 86)), 0),
        ],
        "newest first"
    );
    assert_eq!(recent[0].rejected_by, ["cpu_usage_avg_5m"]);
    assert_eq!(recent[0].scheduler, "default-scheduler", "an empty schedulerName");
    // Every placement entered the ledger as before.
    assert_eq!(state.ledger_len(), 4);
    assert_eq!(decisions.recent(1, "").len(), 1);
    assert!(decisions.recent(0, "volcano").is_empty());

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        r#"waterline_shadow_binds_total{scheduler="default-scheduler",verdict="accepted"} 2"#,
        r#"waterline_shadow_binds_total{scheduler="default-scheduler",verdict="rejected"} 1"#,
        r#"waterline_shadow_rejected_binds_total{scheduler="default-scheduler",metric="cpu_usage_avg_5m"} 1"#,
        r#"waterline_shadow_regret_sum{scheduler="default-scheduler"} 41.0"#,
        r#"waterline_shadow_regret_count{scheduler="default-scheduler"} 3"#,
        r#"waterline_shadow_judge_duration_seconds_count 3"#,
        r#"waterline_shadow_dropped_total 0"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_binds_and_the_judge_resyncs() {
    let state = state();
    let metrics = ShadowMetrics::register(&mut Registry::default());
    let (decisions, filter, _view, judge) =
        attach(&args(&["--shadow-queue", "2"]), &state, policy(), metrics);
    let mut index = PodIndex::new(state.clone(), policy()).with_shadow(Some(filter));
    // The judge is not running yet. A bind is three events (judge, requests, ledger
    // entry): p0's first two fit the queue of 2, its entry opens a gap, and the later
    // binds are dropped and counted, with nothing more queued until the judge resyncs.
    for i in 0..5 {
        index.apply(bound(&format!("p{i}"), "cool", "default-scheduler"));
    }
    assert_eq!(decisions.dropped(), 4);
    assert!(state.shadow_gap());
    tokio::spawn(judge);
    // After the resync the judge knows every bound pod's requests: cool holds 5 cpu of 8,
    // so a 4-cpu pod does not fit there any more (4000 > 8000 − 5000).
    let mut big = bound("big", "warm", "default-scheduler");
    let requests = json!({"cpu": "4", "memory": "1Gi"});
    big.spec.as_mut().unwrap().containers[0].resources =
        Some(serde_json::from_value(json!({"requests": requests})).unwrap());
    for _ in 0..500 {
        if !state.shadow_gap() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    index.apply(big);
    wait_judged(&decisions, 2).await;
    let d = &decisions.recent(1, "")[0];
    assert_eq!((d.candidates, d.fitting), (3, 2));
    assert_ne!(d.best.as_ref().map(|b| b.0.as_str()), Some("cool"));
}

#[tokio::test]
async fn the_predicted_load_reads_the_judges_view_which_matches_a_fresh_copy() {
    use crate::predicted_load::Source;
    let state = state();
    let metrics = ShadowMetrics::register(&mut Registry::default());
    let (decisions, filter, view, judge) = attach(&args(&[]), &state, policy(), metrics);
    tokio::spawn(judge);
    let mut index = PodIndex::new(state.clone(), policy()).with_shadow(Some(filter));
    index.apply(bound("a", "cool", "default-scheduler"));
    wait_judged(&decisions, 1).await;
    // The judgement comes first in the queue; the placement right after it.
    for _ in 0..500 {
        if view.read(|s| s.ledger().len()) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let now = UnixMillis::now();
    let policy = policy().get();
    let shared = Source::Shared(view).loads(&policy, now);
    let copied = Source::Copy(state).loads(&policy, now);
    assert_eq!(shared, copied);
    // cool: 20 % observed + 850 m of 8,000 m (10.625 %) = 30.625 % → 0.30625.
    let cool = shared.iter().find(|(l, _)| l.node == "cool").map(|(_, v)| *v);
    assert!(cool.is_some_and(|v| (v - 0.30625).abs() < 1e-9), "{cool:?}");
}

/// Waits (a hang guard, not a timing assertion) until the followed view's ledger holds
/// `entries`.
async fn view_has(view: &SharedView, entries: usize) {
    for _ in 0..500 {
        if view.read(|s| s.ledger().len()) == entries {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the view has {} entries, not {entries}", view.read(|s| s.ledger().len()));
}

#[tokio::test]
async fn with_shadow_off_a_followed_view_tracks_the_state_without_bound_requests() {
    use crate::predicted_load::Source;
    use waterline_core::LedgerEntry;
    use waterline_core::estimate::Usage;
    use waterline_core::ledger::LedgerSource;
    use waterline_core::shadow::Requests;
    let state = state();
    let resyncs = Counter::default();
    // A queue of one event: 200 changes in a row overflow it (the view's thread would have
    // to take each before the next is made), so the view catches up by a resync.
    let view = follow(&state, 1, resyncs.clone()).unwrap();
    let entry = |uid: &str| LedgerEntry {
        uid: uid.into(),
        namespace: "shop".into(),
        name: uid.into(),
        node: "cool".into(),
        placed_at: UnixMillis::now(),
        usage: Usage { cpu_millis: 850, memory_bytes: 0 },
        source: LedgerSource::Watch,
        labels: Default::default(),
    };
    let requests = Requests { cpu_millis: 1000, memory_bytes: 1 << 30 };
    for i in 0..200 {
        state.place_bound(entry(&format!("p{i}")), requests, None);
    }
    view_has(&view, 200).await;
    assert!(resyncs.get() >= 1, "a queue of one overflowed");
    let now = UnixMillis::now();
    let policy = policy().get();
    assert_eq!(
        Source::Shared(view.clone()).loads(&policy, now),
        Source::Copy(state).loads(&policy, now)
    );
    // No bound pod's requests are kept: nothing judges request fit here.
    assert_eq!(view.write().requested("cool"), Requests::default());
}
