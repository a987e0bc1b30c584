use super::*;

#[test]
fn a_bad_value_names_the_field_and_the_line() {
    let text = "name: x\nduration: 1h\nnodeGroups:\n  - count: 2\n    prefix: n\n    cpu: lots\n    memory: 1Gi\n";
    let err = parse_scenario(text, None).unwrap_err().0;
    assert!(err.starts_with("nodeGroups[0].cpu:"), "{err}");
    assert!(err.ends_with("(line 6)"), "{err}");
    let err = parse_scenario("name: x\nduration: 1h\nnodez: []\n", None).unwrap_err().0;
    assert!(err.contains("nodez") && err.contains("line 3"), "{err}");
    let err = parse_scenario("name: x\nduration: 1h\n", None).unwrap_err().0;
    assert!(err.starts_with("nodes:"), "{err}");
}

#[test]
fn arrival_needs_exactly_one_shape() {
    let text = "name: x\nduration: 1h\nnodes: [{name: a, cpu: 1, memory: 1Gi}]\n\
                podGroups: [{prefix: p, count: 1, arrival: {at: 1m, perMinute: 2}}]\n";
    let err = parse_scenario(text, None).unwrap_err().0;
    assert!(err.starts_with("podGroups[0].arrival:") && err.contains("line 4"), "{err}");
}

#[test]
fn explicit_lists_replay_as_written() {
    let text = "
name: trace
duration: 1h
nodes:
  - name: a
    cpu: 4
    memory: 8Gi
    background: {series: {cpu: [[0s, 10], [10m, 30]], memory: [[0s, 20]]}}
pods:
  - name: web-1
    namespace: shop
    arrival: -5m
    deletion: 30m
    node: a
    cpu: 500m
    memory: 1Gi
    limits: {cpu: 1, memory: 1Gi}
    ownerKind: DaemonSet
    usage: {series: {cpu: [[0s, 100m], [5m, 800m]], memory: [[0s, 256Mi]]}}
";
    let s = parse_scenario(text, None).unwrap();
    assert_eq!(s.nodes[0].background.at(5 * 60_000, s.nodes[0].allocatable).0, 800.0);
    let p = &s.pods[0];
    assert_eq!((p.arrival, p.deletion, p.node.as_deref()), (-300_000, Some(1_800_000), Some("a")));
    assert_eq!(p.pod.uid, "shop/web-1");
    assert_eq!(p.pod.limits, Resources::new(1000, 1 << 30));
    assert_eq!(p.pod.owner_kind, "DaemonSet");
    // 150 s after start: 100 m + (800 − 100) × 150 / 300 = 450 m (the 1 m ramp is over)
    assert_eq!(p.usage.at(150_000, 0, p.pod.limits).0, 450.0);
}

#[test]
fn generators_are_seeded() {
    let text = crate::scenario::shipped("hot-and-uneven").unwrap();
    let a = parse_scenario(text, None).unwrap();
    let b = parse_scenario(text, None).unwrap();
    let c = parse_scenario(text, Some(5)).unwrap();
    let arrivals = |s: &Scenario| s.pods.iter().map(|p| p.arrival).collect::<Vec<_>>();
    assert_eq!(arrivals(&a), arrivals(&b));
    assert_ne!(arrivals(&a), arrivals(&c));
    assert_eq!(a.nodes.len(), 20);
}

#[test]
fn every_shipped_scenario_parses() {
    for (name, text) in crate::scenario::SHIPPED {
        let s = parse_scenario(text, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&s.name, name);
    }
}

#[test]
fn koordlet_gaps_and_controllers_are_read() {
    let text = "
name: k
duration: 1h
koordlet: {gaps: [{from: 10m, to: 20m}]}
pipeline: {outages: [{from: 30m, to: 40m}]}
nodes: [{name: a, cpu: 1, memory: 1Gi}]
podGroups:
  - {prefix: web, count: 1, arrival: {at: 0s}, namespace: shop}
  - {prefix: agent, count: 1, arrival: {at: 0s}, ownerKind: DaemonSet}
pods:
  - {name: lone, arrival: 0s}
  - {name: db-0, arrival: 0s, ownerKind: StatefulSet, owner: db}
";
    let s = parse_scenario(text, None).unwrap();
    assert_eq!(s.pipeline.koordlet_gaps, [(600_000, 1_200_000)]);
    assert_eq!(s.pipeline.outages, [(1_800_000, 2_400_000)]);
    assert!(s.pipeline.koordlet_down_at(600_000) && !s.pipeline.koordlet_down_at(1_200_000));
    assert!(!s.pipeline.down_at(600_000));
    let controller = |name: &str| {
        s.pods.iter().find(|p| p.pod.name == name).and_then(|p| p.pod.controller.clone())
    };
    // a pod group is one ReplicaSet, `<workload>-<hash>` (the workload defaults to the
    // prefix); a DaemonSet's pods and a pod without `owner` have none
    let web = &s.pods.iter().find(|p| p.pod.name == "web-1").unwrap().pod;
    let hash = web.labels["pod-template-hash"].clone();
    assert_eq!(hash.len(), 10);
    assert_eq!(controller("web-1"), Some(format!("shop/web-{hash}")));
    assert_eq!(web.owner_name, format!("web-{hash}"));
    assert_eq!(controller("agent-1"), None);
    assert_eq!(controller("lone"), None);
    assert_eq!(controller("db-0").as_deref(), Some("default/db"));
    let err = parse_scenario("name: x\nduration: 1h\nkoordlet: {gapz: []}\n", None).unwrap_err();
    assert!(err.0.contains("gapz") && err.0.contains("line 3"), "{}", err.0);
}

#[test]
fn groups_naming_one_workload_are_one_deployment_and_series_can_be_missing() {
    use waterline_core::workload::WorkloadKey;
    let text = "
name: w
duration: 1h
nodes: [{name: a, cpu: 1, memory: 1Gi}]
podGroups:
  - {prefix: app-old, workload: app, count: 1, arrival: {at: 0s}, podSeries: missing}
  - {prefix: app-new, workload: app, count: 1, arrival: {at: 0s}}
  - {prefix: batch, count: 1, arrival: {at: 0s}}
  - {prefix: db, workload: store, ownerKind: StatefulSet, count: 1, arrival: {at: 0s}}
pods:
  - {name: lone, arrival: 0s, podSeries: recorded}
";
    let s = parse_scenario(text, None).unwrap();
    let pod = |name: &str| s.pods.iter().find(|p| p.pod.name == name).unwrap();
    let key = |name: &str| WorkloadKey::of(&pod(name).pod.to_core()).to_string();
    // Two releases (ReplicaSets) of one Deployment: one workload, two spread controllers.
    assert_eq!(key("app-old-1"), "default/Deployment/app");
    assert_eq!(key("app-new-1"), "default/Deployment/app");
    assert_ne!(pod("app-old-1").pod.controller, pod("app-new-1").pod.controller);
    // The default: one workload per group; another kind is named as the workload.
    assert_eq!(key("batch-1"), "default/Deployment/batch");
    assert_eq!(key("db-1"), "default/StatefulSet/store");
    assert_eq!(pod("db-1").pod.controller.as_deref(), Some("default/store"));
    assert_eq!(key("lone"), "default/Pod/lone");
    let recorded: Vec<bool> =
        ["app-old-1", "app-new-1", "lone"].iter().map(|n| pod(n).series_recorded).collect();
    assert_eq!(recorded, [false, true, true]);
    // A bad workload or series value names the field and its line.
    let bad = text.replace("workload: store", "workload: Store_1");
    let err = parse_scenario(&bad, None).unwrap_err().0;
    assert!(err.starts_with("podGroups[3].workload: 'Store_1' is not a controller"), "{err}");
    assert!(err.ends_with("(line 9)"), "{err}");
    let bad = text.replace("podSeries: missing", "podSeries: gone");
    let err = parse_scenario(&bad, None).unwrap_err().0;
    assert!(err.contains("podGroups[0].podSeries") && err.contains("line 6"), "{err}");
    let bad = text.replace("duration: 1h", "duration: 1h\npipeline: {podRuleInterval: 0s}");
    let err = parse_scenario(&bad, None).unwrap_err().0;
    assert!(err.starts_with("pipeline.podRuleInterval: must be longer than zero"), "{err}");
}

#[test]
fn timing_overrides_name_their_key() {
    let t = Timing::parse("watchLag=2s, cycle=40ms").unwrap();
    let mut s = Scheduler::default();
    t.apply(&mut s);
    assert_eq!((s.cycle, s.bind_delay, s.watch_lag), (Millis(40), Millis(100), Millis(2000)));
    assert!(Timing::parse("lag=2s").unwrap_err().0.contains("unknown key 'lag'"));
    assert!(Timing::parse("cycle").unwrap_err().0.contains("key=duration"));
    assert!(Timing::parse("cycle=soon").unwrap_err().0.contains("--timing cycle"));
}

#[test]
fn volatile_backgrounds_cover_the_run_and_bad_dwells_name_the_field() {
    let text = "
name: v
duration: 1h
warmup: 30m
nodeGroups:
  - count: 2
    prefix: n
    cpu: 8
    memory: 32Gi
    background:
      volatile:
        idle: {cpu: {min: 5, max: 15}, memory: 20}
        busy: {cpu: {min: 50, max: 70}, memory: 35}
        idleDwell: {median: 20m, sigma: 1.0}
        busyDwell: {min: 5m, alpha: 1.5}
        noise: {cpu: 2, memory: 0.5, correlation: 5m}
        step: 30s
";
    let s = parse_scenario(text, None).unwrap();
    let cpu = s.nodes[0].background.cpu_series.as_ref().unwrap();
    // one point every 30 s from −30 m to 60 m: 181 points
    assert_eq!(cpu.0.len(), 181);
    assert_eq!((cpu.0[0].0, cpu.0[180].0), (-1_800_000, 3_600_000));
    assert_ne!(s.nodes[0].background.cpu_series, s.nodes[1].background.cpu_series);
    let bad = text.replace("alpha: 1.5", "alpha: 0");
    let err = parse_scenario(&bad, None).unwrap_err().0;
    assert!(err.starts_with("nodeGroups[0].background.volatile.busyDwell:"), "{err}");
    assert!(err.ends_with("(line 15)"), "{err}");
    let bad = text.replace("sigma: 1.0", "sigma: 1.0, mode: 3");
    let err = parse_scenario(&bad, None).unwrap_err().0;
    assert!(err.contains("idleDwell") && err.contains("line 14"), "{err}");
}
