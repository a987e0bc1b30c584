use waterline_core::Pod;
use waterline_core::workload::WorkloadKey;

use super::*;

/// The JSON answer of one series per (namespace, pod, value).
fn body(rows: &[(&str, &str, f64)]) -> Vec<u8> {
    let result: Vec<String> = rows
        .iter()
        .map(|(n, p, v)| {
            format!(r#"{{"metric":{{"namespace":"{n}","pod":"{p}"}},"value":[1.5,"{v}"]}}"#)
        })
        .collect();
    format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
        result.join(",")
    )
    .into_bytes()
}

/// Answers read from `bodies`, in `QUERIES` order.
fn read(bodies: [Vec<u8>; 4]) -> Answers {
    let mut answers = Answers::default();
    for (slot, body) in bodies.iter().enumerate() {
        answers.read(slot, 200, "application/json", body).unwrap();
    }
    answers
}

/// Three pods of shop/web requesting 500m and 100 MB, using 1 core (2×) and 150 MB
/// (1.5×) each, 30 samples of each in the window.
fn answers() -> Answers {
    let pods = ["web-a", "web-b", "web-c"];
    let each = |value: f64| body(&pods.map(|p| ("shop", p, value)));
    read([each(1.0), each(1.5e8), each(30.0), each(30.0)])
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
fn answers_fold_per_pod_into_milli_cores_bytes_and_counts() {
    let pods: Vec<_> = answers().per_pod().collect();
    assert_eq!(pods.len(), 3);
    let web_a = pods.iter().find(|p| p.0 == pod_key("shop", "web-a")).unwrap();
    // 1 core = 1000 m; 30 samples each.
    assert_eq!(web_a.1, Some(Series { usage: 1000.0, samples: 30 }));
    assert_eq!(web_a.2, Some(Series { usage: 1.5e8, samples: 30 }));
    // A series without its pod label or with a NaN is unusable; a usage without its count
    // is a series without samples (no evidence); an empty answer names its query.
    let mut odd = body(&[("shop", "web-a", 0.2), ("shop", "web-b", f64::NAN)]);
    let text = String::from_utf8(odd.clone()).unwrap().replace(r#""pod":"web-b""#, r#""x":"y""#);
    odd = text.into_bytes();
    let only_cpu = read([odd, body(&[]), body(&[]), body(&[])]);
    assert_eq!(only_cpu.unusable(), 1);
    assert_eq!(only_cpu.empty(), ["memory", "cpuSamples", "memorySamples"]);
    assert!(!only_cpu.active(), "cpu without its counts learns nothing");
    let pods: Vec<_> = only_cpu.per_pod().collect();
    assert_eq!((pods[0].1, pods[0].2), (Some(Series { usage: 200.0, samples: 0 }), None));
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
    let each = |value: f64| body(&["web-a", "web-b", "web-c"].map(|p| ("shop", p, value)));
    let cpu_only = read([each(1.0), body(&[]), each(30.0), body(&[])]);
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
