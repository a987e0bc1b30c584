//! The fleet staleness breaker through the real binaries: a collector reads a static node
//! file where most nodes' cpu samples are old, and the scorer leaves cpu out for every node
//! (Score and Filter), exports `waterline_stale_breaker_open{metric}`, logs the opening once,
//! and closes by itself when the file brings fresh samples.

use std::time::Duration;

use anyhow::{Result, ensure};
use waterline_api::v1 as pb;
use waterline_tests::procs::{Service, write_file};
use waterline_tests::prometheus::wait_until;

const POLICY: &str = "metrics:
  - {name: cpu, resource: cpu, query: q, period: 30s, weight: 1, filterAbove: 65}
  - {name: mem, resource: memory, query: q, period: 30s, weight: 1}
curve: {kind: leastUsed}
stale: {filter: reject}
";

/// Ten nodes at mem 20 %; cpu 90 % and `cpu_age` old on the first `old` of them, else 20 %.
fn nodes(old: usize, cpu_age: &str) -> String {
    let mut text = String::from("nodes:\n");
    for i in 0..10 {
        let cpu = if i < old { format!("{{value: 90, age: {cpu_age}}}") } else { "20".into() };
        text.push_str(&format!(
            "  - {{name: n{i}, capacity: {{cpu: 1e9, memory: 1Ei}}, metrics: {{cpu: {cpu}, mem: 20}}}}\n"
        ));
    }
    text
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn most_nodes_stale_leaves_the_metric_out_for_everyone_until_fresh_samples_return()
-> Result<()> {
    let dir = tempfile::tempdir()?;
    let policy = write_file(dir.path(), "policy.yaml", POLICY);
    // 7 of 10 cpu samples 10 minutes old (max age 2m30s): 70 % > 50 %.
    let static_path = write_file(dir.path(), "nodes.yaml", &nodes(7, "10m"));
    let collector =
        Service::collector(&strings(&["--static", &static_path, "--policy", &policy])).await?;
    let scorer = Service::scorer(collector.grpc, &strings(&["--policy", &policy])).await?;
    let mut client = scorer.scorer_client().await?;
    let all: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
    let pod = pb::PodInfo {
        namespace: "default".into(),
        name: "p".into(),
        uid: "p".into(),
        cpu_request_millis: 1,
        ..Default::default()
    };

    let open = r#"waterline_stale_breaker_open{metric="cpu"}"#;
    wait_until(Duration::from_secs(10), || async {
        ensure!(scorer.metric_value(open).await? == 1.0, "breaker not open yet");
        Ok(())
    })
    .await?;
    ensure!(scorer.metric_value(r#"waterline_stale_breaker_open{metric="mem"}"#).await? == 0.0);

    // Only memory counts: least used 100 − 20 = 80 everywhere, the stale 90 % nodes too.
    let scores = client
        .score(pb::ScoreRequest {
            pod: Some(pod.clone()),
            node_names: all.clone(),
            explain: true,
            ..Default::default()
        })
        .await?
        .into_inner();
    let got: Vec<i64> = scores.scores.iter().map(|s| i64::from(s.score)).collect();
    assert_eq!(got, vec![80; 10]);
    let cpu_term = &scores.scores[0].terms[0];
    assert_eq!((cpu_term.metric.as_str(), cpu_term.weight, cpu_term.stale), ("cpu", 0.0, true));
    // No filtering on cpu: neither the 90 % threshold nor `stale.filter: reject`.
    let filtered = client
        .filter(pb::FilterRequest {
            policy: String::new(),
            pod: Some(pod.clone()),
            node_names: all.clone(),
            all_nodes: false,
        })
        .await?
        .into_inner();
    assert_eq!(filtered.feasible_nodes, all);
    let log = scorer.log_text();
    assert_eq!(log.matches("stale breaker open").count(), 1, "{log}");

    // Fresh samples for all but two: 20 % stale, the breaker closes by itself.
    std::fs::write(&static_path, nodes(2, "10m"))?;
    wait_until(Duration::from_secs(15), || async {
        ensure!(scorer.metric_value(open).await? == 0.0, "breaker still open");
        Ok(())
    })
    .await?;
    let log = scorer.log_text();
    assert_eq!(log.matches("stale breaker open").count(), 1, "{log}");
    assert_eq!(log.matches("stale breaker closed").count(), 1, "{log}");
    // Per node again: the two stale nodes are rejected and score cpu at the stale score 50
    // ((50 + 80) / 2 = 65); the fresh ones score (80 + 80) / 2 = 80.
    let filtered = client
        .filter(pb::FilterRequest {
            policy: String::new(),
            pod: Some(pod.clone()),
            node_names: all.clone(),
            all_nodes: false,
        })
        .await?
        .into_inner();
    assert_eq!(filtered.feasible_nodes, all[2..].to_vec());
    let scores = client
        .score(pb::ScoreRequest { pod: Some(pod), node_names: all, ..Default::default() })
        .await?
        .into_inner();
    let got: Vec<i64> = scores.scores.iter().map(|s| i64::from(s.score)).collect();
    assert_eq!(got, [vec![65; 2], vec![80; 8]].concat());
    Ok(())
}
