use std::collections::HashMap;
use std::sync::Arc;

use waterline_core::Millis;

use super::descheduler::{Deployed, LowNodeUtilization};
use super::lownodeload::{Args, LowNodeLoad};
use super::signal::Signal;
use super::*;
use crate::model::{Resources, SimPod};

#[test]
fn the_deployed_descheduler_is_read_from_deploy_descheduler() {
    // deploy/descheduler/policy.yaml: thresholds 40, targetThresholds 65, evictionLimits.node
    // 1 and maxNoOfPodsToEvictPerNode 1, maxNoOfPodsToEvictTotal 5, DefaultEvictor minReplicas
    // 2, minPodAge 10m, nodeFit; deployment.yaml --descheduling-interval=10m.
    let d = Deployed::shipped();
    assert_eq!(
        d,
        Deployed {
            under_pct: 40,
            over_pct: 65,
            per_node: 1,
            per_cycle: 5,
            min_replicas: 2,
            min_pod_age: Millis::from_mins(10),
            node_fit: true,
            interval: Millis::from_mins(10),
        }
    );
    // the over threshold is the default policy's cpu filter: one home, two readers
    let policy = waterline_core::Policy::default();
    let filter = policy.metrics.iter().find_map(|m| m.filter_above).unwrap();
    assert_eq!(d.over_pct as f64, filter);
}

#[test]
fn a_policy_without_the_plugin_is_refused_by_name() {
    let err = Deployed::parse("profiles: [{pluginConfig: []}]", "- --descheduling-interval=1m")
        .unwrap_err();
    assert!(err.to_string().contains("no LowNodeUtilization args"), "{err}");
}

fn pod(uid: &str, controller: &str, cpu: i64) -> SimPod {
    SimPod {
        uid: uid.into(),
        namespace: "default".into(),
        name: uid.into(),
        labels: Default::default(),
        owner_kind: "ReplicaSet".into(),
        owner_name: String::new(),
        controller: Some(controller.into()),
        requests: Resources::new(cpu, 1 << 30),
        limits: Resources::default(),
    }
}

/// Three 16-core nodes; `pods[i]` bound to node i.
fn cluster<'a>(pods: &'a [Vec<(usize, Arc<SimPod>)>], now: SimTime) -> ClusterState<'a> {
    let nodes = ["a", "b", "c"]
        .iter()
        .zip(pods)
        .map(|(name, list)| NodeState {
            name,
            allocatable: Resources::new(16_000, 64 << 30),
            requested: Resources::new(list.iter().map(|(_, p)| p.requests.cpu_millis).sum(), 0),
            pods: list
                .iter()
                .map(|(i, p)| BoundPod {
                    index: *i,
                    pod: p,
                    created: -3_600_000,
                    usage: (5000.0, 0.0),
                })
                .collect(),
        })
        .collect();
    let mut replicas = HashMap::new();
    replicas.insert("web".to_owned(), 4);
    ClusterState { now, nodes, replicas, prometheus_up: true }
}

#[test]
fn low_node_utilization_fails_its_cycle_without_a_sample_or_prometheus() {
    let web = |i: usize| (i, Arc::new(pod(&format!("p{i}"), "web", 1000)));
    let pods = vec![vec![web(0), web(1)], vec![web(2)], vec![web(3)]];
    // the raw signal with no sample yet: "unable to find metric entry", the cycle fails
    let mut d = LowNodeUtilization::new(Deployed::shipped(), Signal::raw(), 1);
    let c = cluster(&pods, 0);
    assert_eq!(d.cycle(&c), CycleOutcome { evict: vec![], failed: true });
    // Prometheus down: fails too
    let mut down = cluster(&pods, 0);
    down.prometheus_up = false;
    assert!(d.cycle(&down).failed);
}

#[test]
fn low_node_load_waits_for_six_abnormal_cycles_then_moves_the_busiest_pod() {
    // node a at 80 % cpu (> 75), b and c at 20 % (≤ 45 and memory 10 ≤ 55)
    let mut l = LowNodeLoad::new(Args::CHART);
    let sample = |v: f64| Some(waterline_core::Sample { value: v, at: crate::model::instant(0) });
    l.on_node_report(0, 0, &[sample(80.0), sample(10.0)]);
    l.on_node_report(1, 0, &[sample(20.0), sample(10.0)]);
    l.on_node_report(2, 0, &[sample(20.0), sample(10.0)]);
    let big = (0, Arc::new(pod("big", "web", 1000)));
    let small = (1, Arc::new(pod("small", "web", 1000)));
    let pods = vec![vec![small.clone(), big.clone()], vec![], vec![]];
    let mut c = cluster(&pods, 10_000);
    c.nodes[0].pods[0].usage = (800.0, 0.0); // small: 5 % of the node
    // consecutiveAbnormalities 5: sources from the 6th consecutive high cycle on
    for k in 1..=5 {
        assert_eq!(l.cycle(&c).evict, Vec::<usize>::new(), "cycle {k}");
    }
    // the 6th: the 5-core pod (31 pp) brings a to 49 % ≤ 75 and it stops
    assert_eq!(l.cycle(&c).evict, vec![0]);
    // marked normal afterwards: five more quiet cycles
    assert_eq!(l.cycle(&c).evict, Vec::<usize>::new());
    // a NodeMetric older than 180 s leaves the node out: nothing is high any more
    let mut late = cluster(&pods, 200_000);
    late.nodes[0].pods[0].usage = (800.0, 0.0);
    for _ in 0..7 {
        assert!(l.cycle(&late).evict.is_empty());
    }
}
