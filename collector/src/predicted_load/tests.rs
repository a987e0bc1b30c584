use std::collections::BTreeMap;

use waterline_core::estimate::Usage;
use waterline_core::policy::parse_policy;
use waterline_core::snapshot::{Capacity, Sample};
use waterline_core::{LedgerEntry, LedgerSource};

use super::*;
use crate::state::NodeRecord;

const NOW: UnixMillis = UnixMillis(10 * 60_000);

/// Two metrics of 30 s period (max age 3 × 30 s + 60 s = 150 s), one per resource.
fn policy() -> Policy {
    parse_policy(
        "metrics:\n\
         - {name: cpu_usage_avg_5m, resource: cpu, query: q1, period: 30s, weight: 1, filterAbove: 65}\n\
         - {name: mem_usage_avg_5m, resource: memory, query: q2, period: 30s, weight: 1}\n\
         curve: {kind: waterLevel, target: 40}\n",
    )
    .unwrap()
}

fn record(cpu: f64, memory: f64, at: UnixMillis) -> NodeRecord {
    NodeRecord {
        capacity: Capacity { cpu_millis: 8000, memory_bytes: 8 << 30 },
        samples: [
            ("cpu_usage_avg_5m".to_owned(), Sample { value: cpu, at }),
            ("mem_usage_avg_5m".to_owned(), Sample { value: memory, at }),
        ]
        .into(),
    }
}

fn placed(
    uid: &str,
    node: &str,
    cpu_millis: i64,
    memory_bytes: i64,
    at: UnixMillis,
) -> LedgerEntry {
    LedgerEntry {
        uid: uid.into(),
        namespace: "ns".into(),
        name: uid.into(),
        node: node.into(),
        placed_at: at,
        usage: Usage { cpu_millis, memory_bytes },
        source: LedgerSource::Watch,
        labels: BTreeMap::new(),
    }
}

fn snapshot_of(state: &ClusterState) -> Snapshot {
    let mut snapshot = Snapshot::default();
    state.full_delta().apply_to(&mut snapshot);
    snapshot
}

fn value(loads: &[(LoadLabels, f64)], node: &str, metric: &str) -> Option<f64> {
    loads.iter().find(|(l, _)| l.node == node && l.metric == metric).map(|(_, v)| *v)
}

fn assert_near(got: Option<f64>, want: f64) {
    let got = got.expect("a series");
    assert!((got - want).abs() < 1e-9, "got {got}, want {want}");
}

#[test]
fn observed_plus_ledger_as_a_fraction_without_an_incoming_pod() {
    let state = ClusterState::default();
    let fresh = UnixMillis(NOW.0 - 20_000);
    state.replace_nodes(
        [("a".to_owned(), record(30.0, 50.0, fresh)), ("b".to_owned(), record(10.0, 20.0, fresh))]
            .into(),
    );
    // 800m of 8000m = 10 % cpu; 1 GiB of 8 GiB = 12.5 % memory, placed a minute ago (inside
    // the 5 m + 30 s + 90 s = 7 m absorb window).
    state.place(placed("p1", "a", 800, 1 << 30, UnixMillis(NOW.0 - 60_000)));
    let loads = predicted_loads(&policy(), &snapshot_of(&state), NOW);
    assert_near(value(&loads, "a", "cpu_usage_avg_5m"), 0.40);
    assert_near(value(&loads, "a", "mem_usage_avg_5m"), 0.625);
    // No ledger on b, and no best-effort default for the empty pod (the estimator would give
    // 250m × 0.85 = 212.5m = 2.66 % of 8 cores).
    assert_near(value(&loads, "b", "cpu_usage_avg_5m"), 0.10);
    assert_near(value(&loads, "b", "mem_usage_avg_5m"), 0.20);
    let labels: Vec<_> = loads.iter().map(|(l, _)| (l.node.as_str(), l.resource)).collect();
    assert_eq!(labels, [("a", "cpu"), ("a", "memory"), ("b", "cpu"), ("b", "memory")]);
}

#[test]
fn an_absorbed_placement_no_longer_counts() {
    let state = ClusterState::default();
    state.replace_nodes([("a".to_owned(), record(30.0, 50.0, UnixMillis(NOW.0 - 1000)))].into());
    // Placed 8 minutes ago: past the 7 m absorb window, the sample shows it.
    state.place(placed("p1", "a", 800, 0, UnixMillis(NOW.0 - 8 * 60_000)));
    let loads = predicted_loads(&policy(), &snapshot_of(&state), NOW);
    assert_near(value(&loads, "a", "cpu_usage_avg_5m"), 0.30);
}

#[test]
fn a_stale_metric_has_no_series() {
    let state = ClusterState::default();
    let mut node = record(30.0, 50.0, UnixMillis(NOW.0 - 1000));
    // 151 s old: past the 150 s max age.
    node.samples.get_mut("mem_usage_avg_5m").unwrap().at = UnixMillis(NOW.0 - 151_000);
    state.replace_nodes([("a".to_owned(), node)].into());
    let loads = predicted_loads(&policy(), &snapshot_of(&state), NOW);
    assert_near(value(&loads, "a", "cpu_usage_avg_5m"), 0.30);
    assert_eq!(value(&loads, "a", "mem_usage_avg_5m"), None);
    assert_eq!(loads.len(), 1);
}

#[test]
fn a_node_without_samples_has_no_series_even_with_a_ledger() {
    let state = ClusterState::default();
    state.update_capacity(
        &[("a".to_owned(), Capacity { cpu_millis: 8000, memory_bytes: 1 << 30 })].into(),
    );
    state.place(placed("p1", "a", 800, 0, UnixMillis(NOW.0 - 1000)));
    assert!(predicted_loads(&policy(), &snapshot_of(&state), NOW).is_empty());
}

fn exposition(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

#[test]
fn a_series_that_goes_stale_is_removed_from_metrics_not_zeroed() {
    let mut registry = Registry::default();
    let metrics = LoadMetrics::register(&mut registry);
    let mut published = Published::default();
    let state = ClusterState::default();
    state.replace_nodes(
        [
            ("a".to_owned(), record(30.0, 50.0, UnixMillis(NOW.0 - 1000))),
            ("b".to_owned(), record(70.0, 20.0, UnixMillis(NOW.0 - 1000))),
        ]
        .into(),
    );
    published.apply(&metrics, predicted_loads(&policy(), &snapshot_of(&state), NOW));
    let text = exposition(&registry);
    let line = r#"waterline_node_predicted_utilisation{node="b",metric="cpu_usage_avg_5m",resource="cpu"} 0.7"#;
    assert!(text.contains(line), "{text}");
    assert_eq!(text.matches("waterline_node_predicted_utilisation{").count(), 4, "{text}");

    // Two minutes on, b's samples have not moved (151 s old): b is gone, a stays.
    let later = UnixMillis(NOW.0 + 150_000);
    state.replace_nodes(
        [
            ("a".to_owned(), record(35.0, 50.0, UnixMillis(later.0 - 1000))),
            ("b".to_owned(), record(70.0, 20.0, UnixMillis(NOW.0 - 1000))),
        ]
        .into(),
    );
    published.apply(&metrics, predicted_loads(&policy(), &snapshot_of(&state), later));
    let text = exposition(&registry);
    assert!(!text.contains(r#"node="b""#), "{text}");
    let line = r#"waterline_node_predicted_utilisation{node="a",metric="cpu_usage_avg_5m",resource="cpu"} 0.35"#;
    assert!(text.contains(line), "{text}");
    assert_eq!(text.matches("waterline_node_predicted_utilisation{").count(), 2, "{text}");
}

#[test]
fn an_open_fleet_breaker_removes_its_metric_from_every_node() {
    // cpu stale on 3 of 4 nodes: 3 > 0.5 × 4, the breaker opens (default share 0.5, at
    // least 3 nodes) and n0's fresh cpu sample is left out too; memory is fresh everywhere.
    let state = ClusterState::default();
    let old = UnixMillis(NOW.0 - 200_000);
    let fresh = UnixMillis(NOW.0 - 1000);
    let nodes = (0..4)
        .map(|i| {
            let mut node = record(30.0, 50.0, fresh);
            if i > 0 {
                node.samples.get_mut("cpu_usage_avg_5m").unwrap().at = old;
            }
            (format!("n{i}"), node)
        })
        .collect();
    state.replace_nodes(nodes);
    let loads = predicted_loads(&policy(), &snapshot_of(&state), NOW);
    assert_eq!(value(&loads, "n0", "cpu_usage_avg_5m"), None);
    assert_eq!(loads.len(), 4);
    assert!(loads.iter().all(|(l, _)| l.resource == "memory"));

    // Two of four stale: 2 ≤ 0.5 × 4, closed: n0 and n3 keep their cpu series.
    let mut nodes: BTreeMap<String, NodeRecord> =
        (0..4).map(|i| (format!("n{i}"), record(30.0, 50.0, fresh))).collect();
    for stale in ["n1", "n2"] {
        nodes.get_mut(stale).unwrap().samples.get_mut("cpu_usage_avg_5m").unwrap().at = old;
    }
    state.replace_nodes(nodes);
    let loads = predicted_loads(&policy(), &snapshot_of(&state), NOW);
    assert_near(value(&loads, "n0", "cpu_usage_avg_5m"), 0.30);
    assert_near(value(&loads, "n3", "cpu_usage_avg_5m"), 0.30);
    assert_eq!(value(&loads, "n1", "cpu_usage_avg_5m"), None);
    assert_eq!(loads.len(), 6);
}

#[tokio::test(start_paused = true)]
async fn the_ticker_publishes_the_state_and_times_each_refresh() {
    let mut registry = Registry::default();
    let metrics = LoadMetrics::register(&mut registry);
    let state = ClusterState::default();
    // `run` reads the wall clock: samples taken just now are fresh.
    let now = UnixMillis::now();
    state.replace_nodes([("a".to_owned(), record(20.0, 30.0, now))].into());
    state.place(placed("p1", "a", 400, 0, now));
    let handle = PolicyHandle::new(policy());
    let task =
        tokio::spawn(run(Source::Copy(state.clone()), handle, metrics, Duration::from_secs(15)));
    // The first tick fires at once; let it run.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let text = exposition(&registry);
    // 20 % observed + 400m of 8000m = 5 % from the ledger.
    let line = r#"waterline_node_predicted_utilisation{node="a",metric="cpu_usage_avg_5m",resource="cpu"} 0.25"#;
    assert!(text.contains(line), "{text}");
    assert!(text.contains("waterline_predicted_load_refresh_duration_seconds_count 1\n"), "{text}");
    // The node leaves the cluster: gone at the next tick, 15 s on.
    state.remove_node("a");
    tokio::time::sleep(Duration::from_secs(15)).await;
    let text = exposition(&registry);
    assert!(!text.contains(r#"node="a""#), "{text}");
    assert!(text.contains("waterline_predicted_load_refresh_duration_seconds_count 2\n"), "{text}");
    task.abort();
}

/// docs/design.md#departures on `/metrics`: a node at 70 % cpu, a 2-CPU pod (1700 m, 21.25 %
/// of 8 cores) placed an hour ago leaves through the pod watch's release. The published 5 m
/// average (`departures: credit`) drops at once to 0.4875 and comes back to the sample's
/// value when the credit window — 7 m absorb less the 5 m average = 2 m — has passed; the
/// maximum (`departures: hold`, the default) never moves.
#[test]
fn a_departure_drops_the_published_prediction_at_once_until_absorbed() {
    let policy = parse_policy(
        "metrics:\n\
         - {name: cpu_usage_avg_5m, resource: cpu, query: q1, period: 30s, weight: 1, departures: credit}\n\
         - {name: cpu_usage_max_avg_1h, resource: cpu, query: q2, period: 30s, weight: 1}\n",
    )
    .unwrap();
    let node = |at: UnixMillis| NodeRecord {
        capacity: Capacity { cpu_millis: 8000, memory_bytes: 8 << 30 },
        samples: [
            ("cpu_usage_avg_5m".to_owned(), Sample { value: 70.0, at }),
            ("cpu_usage_max_avg_1h".to_owned(), Sample { value: 70.0, at }),
        ]
        .into(),
    };
    let mut registry = Registry::default();
    let metrics = LoadMetrics::register(&mut registry);
    let mut published = Published::default();
    let state = ClusterState::default();
    state.replace_nodes([("a".to_owned(), node(NOW))].into());
    state.place(placed("web", "a", 1700, 0, UnixMillis(NOW.0 - 60 * 60_000)));
    let publish = |published: &mut Published, at| {
        published.apply(&metrics, predicted_loads(&policy, &snapshot_of(&state), at));
        exposition(&registry)
    };
    let avg = |v: &str| {
        format!(
            r#"waterline_node_predicted_utilisation{{node="a",metric="cpu_usage_avg_5m",resource="cpu"}} {v}"#
        )
    };
    let max = r#"waterline_node_predicted_utilisation{node="a",metric="cpu_usage_max_avg_1h",resource="cpu"} 0.7"#;
    let text = publish(&mut published, NOW);
    assert!(text.contains(&avg("0.7")) && text.contains(max), "{text}");

    state.release_bound("web", NOW);
    let text = publish(&mut published, NOW);
    assert!(text.contains(&avg("0.4875")) && text.contains(max), "{text}");

    // 1 m 59 s on (the sample refreshed, the pod's departure not in it yet): still credited.
    let absorbed = UnixMillis(NOW.0 + 2 * 60_000);
    state.replace_nodes([("a".to_owned(), node(UnixMillis(absorbed.0 - 1000)))].into());
    let text = publish(&mut published, UnixMillis(absorbed.0 - 1000));
    assert!(text.contains(&avg("0.4875")), "{text}");
    // At 2 m the credit ends: the published value is the metric's own again.
    let text = publish(&mut published, absorbed);
    assert!(text.contains(&avg("0.7")) && text.contains(max), "{text}");
}
