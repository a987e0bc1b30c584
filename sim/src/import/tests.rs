use std::collections::BTreeMap;

use super::prom::{PodInfo, ResourceRow};
use super::*;

#[test]
fn times_in_rfc_3339_and_unix_seconds() {
    assert_eq!(parse_time("0").unwrap(), 0.0);
    assert_eq!(parse_time("1700000000.5").unwrap(), 1_700_000_000.5);
    assert_eq!(parse_time("1970-01-01T00:00:00Z").unwrap(), 0.0);
    // 2023-11-14T22:13:20Z is Unix 1,700,000,000.
    assert_eq!(parse_time("2023-11-14T22:13:20Z").unwrap(), 1_700_000_000.0);
    assert_eq!(parse_time("2023-11-14T23:13:20+01:00").unwrap(), 1_700_000_000.0);
    assert_eq!(parse_time("2024-02-29T12:00:00.25Z").unwrap(), 1_709_208_000.25);
    for bad in ["yesterday", "2023-13-01T00:00:00Z", "2023-11-14T22:13Z", "2023-11-14"] {
        assert!(parse_time(bad).is_err(), "{bad}");
    }
}

fn row(pod: &str, container: &str, resource: &str, unit: &str, value: f64) -> ResourceRow {
    ResourceRow {
        namespace: "ns".into(),
        pod: pod.into(),
        container: container.into(),
        resource: resource.into(),
        unit: unit.into(),
        value,
    }
}

fn info(pod: &str, node: Option<&str>, first: f64, last: f64) -> PodInfo {
    PodInfo {
        namespace: "ns".into(),
        pod: pod.into(),
        node: node.map(Into::into),
        owner_kind: Some("ReplicaSet".into()),
        first_seen: first,
        last_seen: last,
    }
}

fn key(pod: &str) -> (String, String) {
    ("ns".into(), pod.into())
}

/// Window 1000..1600 s, step 60 s. Node a (4 cores, 8 GiB) at 30 % cpu throughout with pod
/// old (0.4 cores = 10 %) on it; node b without a memory series; node c without
/// allocatable. Pod new arrives at 1300 on b and is deleted at 1500; pod quiet has no
/// usage series.
fn fetched() -> Fetched {
    let gib = 1024.0 * 1024.0 * 1024.0;
    let flat = |v: f64| (0..=10).map(|k| (1000.0 + 60.0 * k as f64, v)).collect::<Vec<_>>();
    Fetched {
        allocatable_cpu: [("a".into(), 4.0), ("b".into(), 8.0)].into(),
        allocatable_memory: [("a".into(), 8.0 * gib), ("b".into(), 16.0 * gib)].into(),
        node_cpu: [("a".into(), flat(30.0)), ("b".into(), flat(50.0)), ("c".into(), flat(5.0))]
            .into(),
        node_memory: [("a".into(), flat(40.0))].into(),
        pod_info: vec![
            info("old", Some("a"), 1000.0, 1600.0),
            info("new", None, 1300.0, 1300.0),
            info("new", Some("b"), 1320.0, 1440.0),
            info("quiet", Some("a"), 1000.0, 1600.0),
            info("gone", Some("a"), 1000.0, 1000.0),
        ],
        created: [
            (key("old"), 400.0),
            (key("new"), 1300.0),
            (key("quiet"), 900.0),
            (key("gone"), 100.0),
        ]
        .into(),
        deleted: [(key("new"), 1500.0), (key("gone"), 990.0)].into(),
        requests: vec![
            row("old", "app", "cpu", "core", 0.5),
            row("old", "side", "cpu", "core", 0.1),
            row("old", "app", "memory", "byte", gib),
            row("new", "app", "cpu", "core", 1.0),
            row("quiet", "app", "cpu", "core", 0.25),
            row("quiet", "app", "memory", "byte", 0.5 * gib),
        ],
        limits: vec![
            // old: both containers bound their cpu, only app its memory → memory unbounded.
            row("old", "app", "cpu", "core", 1.0),
            row("old", "side", "cpu", "core", 0.2),
            row("old", "app", "memory", "byte", 2.0 * gib),
            row("new", "app", "nvidia_com_gpu", "integer", 1.0),
        ],
        pod_cpu: [(key("old"), flat(0.4)), (key("new"), vec![(1320.0, 0.5), (1440.0, 0.8)])].into(),
        pod_memory: [(key("old"), flat(0.8 * gib))].into(),
    }
}

#[test]
fn nodes_pods_and_the_notes_on_every_gap() {
    let w = Window { from: 1000.0, to: 1600.0, step: 60.0 };
    let imported = assemble(&fetched(), &w, 3600.0);
    let names: Vec<&str> = imported.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    let a = &imported.nodes[0];
    // 30 % − old's 0.4 of 4 cores (10 %) − quiet's request 0.25 (6.25 %) = 13.75 %.
    assert_eq!(a.cpu_background.as_ref().unwrap()[0], (0.0, 13.75));
    // 40 % − old's 0.8 GiB of 8 (10 %) − quiet's 0.5 GiB request (6.25 %) = 23.75 %.
    assert_eq!(a.memory_background.as_ref().unwrap()[0], (0.0, 23.75));
    let b = &imported.nodes[1];
    // 50 % before new arrives (t = 300); at t = 360 (Unix 1360) new uses 0.5 + 0.3 × 40/120
    // = 0.6 of 8 cores = 7.5 %; deleted at 500.
    let at = |t: f64| b.cpu_background.as_ref().unwrap().iter().find(|p| p.0 == t).unwrap().1;
    assert_eq!((at(240.0), at(360.0), at(600.0)), (50.0, 42.5, 50.0));
    assert_eq!(b.memory_background, None);

    let pods: Vec<&str> = imported.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(pods, ["old", "quiet", "new"], "gone was deleted before the window");
    let old = &imported.pods[0];
    assert_eq!((old.created, old.deleted, old.pre_bound), (-600.0, None, true));
    assert!((old.cpu_request_cores - 0.6).abs() < 1e-12);
    assert_eq!((old.cpu_limit_cores, old.memory_limit_bytes), (Some(1.2), None));
    let new = &imported.pods[2];
    assert_eq!((new.created, new.deleted, new.pre_bound), (300.0, Some(500.0), false));
    assert_eq!((new.node.as_deref(), new.cpu_limit_cores), (Some("b"), None));
    assert_eq!(
        imported.notes,
        [
            "node c: usage but no kube_node_status_allocatable, left out",
            "pod ns/new: no cAdvisor memory series, its memory request stands in as usage",
            "pod ns/quiet: no cAdvisor cpu series, its cpu request stands in as usage",
            "pod ns/quiet: no cAdvisor memory series, its memory request stands in as usage",
            "node b: no memory usage series, background 0",
        ]
    );
}

#[test]
fn the_yaml_is_a_scenario_the_simulator_reads() {
    let w = Window { from: 1000.0, to: 1600.0, step: 60.0 };
    let mut imported = assemble(&fetched(), &w, 3600.0);
    imported.source = "http://prometheus:9090".into();
    imported.target = 40.0;
    imported.threshold = 65.0;
    let text = to_yaml(&imported, "mine", 3600.0);
    let s = crate::scenario::parse_scenario(&text, None).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!((s.name.as_str(), s.duration.0, s.warmup.0), ("mine", 600_000, 3_600_000));
    let nodes: BTreeMap<&str, (i64, i64)> = s
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), (n.allocatable.cpu_millis, n.allocatable.memory_bytes)))
        .collect();
    assert_eq!(nodes, [("a", (4000, 8 << 30)), ("b", (8000, 16 << 30))].into());
    let old = s.pods.iter().find(|p| p.pod.name == "old").unwrap();
    assert_eq!((old.arrival, old.node.as_deref(), old.deletion), (-600_000, Some("a"), None));
    assert_eq!((old.pod.requests.cpu_millis, old.pod.limits.cpu_millis), (600, 1200));
    // Usage since its start (-600 s): 400m throughout.
    assert_eq!(old.usage.cpu_series.as_ref().unwrap().at(700_000), Some(400.0));
    let new = s.pods.iter().find(|p| p.pod.name == "new").unwrap();
    assert_eq!((new.arrival, new.node.as_deref(), new.deletion), (300_000, None, Some(500_000)));
    // 20 s after its start 0.5 cores, 140 s after 0.8.
    let cpu = new.usage.cpu_series.as_ref().unwrap();
    assert_eq!((cpu.at(20_000), cpu.at(140_000)), (Some(500.0), Some(800.0)));
    assert!(text.contains("# ran on \"b\""), "{text}");
    assert!(text.contains("#   node c: usage but no kube_node_status_allocatable"), "{text}");
}
