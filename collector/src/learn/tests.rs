use std::collections::BTreeMap;

use waterline_core::workload::WorkloadKey;
use waterline_core::{Pod, UnixMillis};

use super::*;

fn series(namespace: &str, pod: &str, value: f64) -> answer::Series {
    let labels: BTreeMap<String, String> =
        [("namespace", namespace), ("pod", pod)].map(|(k, v)| (k.into(), v.into())).into();
    answer::Series { labels, at: UnixMillis(0), value: RawValue::Number(value) }
}

/// Three pods of shop/web requesting 500m and 100 MB, using 1 core (2×) and 150 MB
/// (1.5×) each, 30 samples of each in the window.
fn answers() -> Answers {
    let pods = ["web-a", "web-b", "web-c"];
    Answers {
        cpu: pods.map(|p| series("shop", p, 1.0)).to_vec(),
        memory: pods.map(|p| series("shop", p, 1.5e8)).to_vec(),
        cpu_samples: pods.map(|p| series("shop", p, 30.0)).to_vec(),
        memory_samples: pods.map(|p| series("shop", p, 30.0)).to_vec(),
    }
}

fn running() -> RunningPods {
    let pods = RunningPods::default();
    for name in ["web-a", "web-b", "web-c"] {
        pods.upsert(&Pod {
            namespace: "shop".into(),
            name: name.into(),
            uid: name.into(),
            owner_kind: "ReplicaSet".into(),
            owner_name: "web-5d8f".into(),
            labels: [("pod-template-hash".to_string(), "5d8f".to_string())].into(),
            cpu_request_millis: 500,
            memory_request_bytes: 100_000_000,
            ..Pod::default()
        });
    }
    pods
}

fn metrics() -> LearnMetrics {
    LearnMetrics::register(&mut Registry::default())
}

fn web() -> WorkloadKey {
    WorkloadKey::new("shop", "Deployment", "web")
}

fn policy() -> Learn {
    Learn { min_pods: 2, min_samples: 60, ..Learn::default() }
}

#[test]
fn series_become_milli_cores_bytes_and_counts_per_pod() {
    let mut answers = answers();
    // A series without its pod label and one with a NaN are left out and counted.
    answers.cpu.push(answer::Series { labels: BTreeMap::new(), ..series("shop", "x", 1.0) });
    answers.memory.push(series("shop", "web-d", f64::NAN));
    let (mut pods, unusable) = per_pod(&answers);
    pods.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(unusable, 2);
    assert_eq!(pods.len(), 3);
    let ((namespace, name), cpu, memory) = &pods[0];
    assert_eq!((*namespace, *name), ("shop", "web-a"));
    // 1 core = 1000 m; 30 samples each.
    assert_eq!(*cpu, Some(Series { usage: 1000.0, samples: 30 }));
    assert_eq!(*memory, Some(Series { usage: 1.5e8, samples: 30 }));
    // A usage without its count is a series without samples (no evidence).
    let only_usage = Answers { cpu: vec![series("shop", "web-a", 0.2)], ..Answers::default() };
    assert_eq!(per_pod(&only_usage).0[0].1, Some(Series { usage: 200.0, samples: 0 }));
}

#[test]
fn a_refresh_learns_the_ratio_and_publishes_the_table() {
    let (state, metrics, mut learner) = (ClusterState::default(), metrics(), Learner::default());
    let outcome = learner.refresh(&policy(), Ok(answers()), &running(), &state, &metrics);
    assert_eq!(outcome, Outcome::Learned { table_len: 1, active: true });
    let table = state.learned();
    let usage = table.get(&web()).unwrap();
    // 1000 m of 500 m; 150 MB of 100 MB; 3 pods × 30 samples.
    let cpu = usage.cpu.unwrap();
    assert_eq!((cpu.ratio, cpu.pods, cpu.samples), (Some(2.0), 3, 90));
    assert_eq!(usage.memory.unwrap().ratio, Some(1.5));
    assert_eq!((metrics.active.get(), metrics.workloads.get()), (1, 1));
    assert_eq!((metrics.observed_pods.get(), metrics.tracked_pods.get()), (3, 3));
}

#[test]
fn a_failed_query_keeps_the_table_and_no_series_empties_it() {
    let (state, metrics, mut learner) = (ClusterState::default(), metrics(), Learner::default());
    let pods = running();
    learner.refresh(&policy(), Ok(answers()), &pods, &state, &metrics);
    let error = QueryError::Timeout(Duration::from_secs(10));
    let outcome = learner.refresh(&policy(), Err(("memory", error)), &pods, &state, &metrics);
    assert_eq!(outcome, Outcome::Kept);
    assert_eq!(state.learned().len(), 1, "an error does not blank the table");
    assert_eq!(metrics.query_errors.get_or_create(&QueryLabel { query: "memory" }).get(), 1);
    assert_eq!(metrics.active.get(), 1);
    // The rules are gone: every query answers nothing, so nothing is learned.
    let outcome = learner.refresh(&policy(), Ok(Answers::default()), &pods, &state, &metrics);
    assert_eq!(outcome, Outcome::Learned { table_len: 0, active: false });
    assert!(state.learned().is_empty());
    assert_eq!((metrics.active.get(), metrics.workloads.get()), (0, 0));
    assert_eq!(learner.empty, ["cpu", "memory", "cpuSamples", "memorySamples"]);
    // Only cpu answers: cpu is learned, memory is not, and learning is active.
    let cpu_only = Answers { memory: vec![], memory_samples: vec![], ..answers() };
    learner.refresh(&policy(), Ok(cpu_only), &pods, &state, &metrics);
    let table = state.learned();
    let usage = table.get(&web()).unwrap();
    assert!(usage.cpu.is_some() && usage.memory.is_none());
    assert_eq!(metrics.active.get(), 1);
}

#[test]
fn learning_off_empties_the_table() {
    let (state, metrics, mut learner) = (ClusterState::default(), metrics(), Learner::default());
    learner.refresh(&policy(), Ok(answers()), &running(), &state, &metrics);
    learner.off(&state, &metrics);
    assert!(state.learned().is_empty());
    assert_eq!(metrics.active.get(), 0);
}
