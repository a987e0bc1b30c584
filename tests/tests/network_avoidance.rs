//! The network-traffic example policy end to end, in the integration tier (the real
//! control plane is the aim; tests/e2e is being reworked by another engineer, so this runs
//! the same path minus kube-scheduler): a fake node-exporter serving three nodes whose
//! physical interfaces carry different traffic (and whose loopback and veth decoys carry far
//! more, identically), a real Prometheus evaluating the shipped recording rules, a collector
//! polling it with `deploy/examples/policies/network-traffic.yaml` (raw bytes per second,
//! never clamped to a percent), and a scorer. The scheduler's choice — the best score — is
//! never the busiest interface's node.

use std::time::Duration;

use anyhow::{Result, ensure};
use waterline_api::v1 as pb;
use waterline_tests::exporter::FakeNode;
use waterline_tests::procs::Service;
use waterline_tests::prometheus::{exporter_with_shipped_rules, repo_path, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_busiest_interface_s_node_scores_0_and_is_never_chosen() -> Result<()> {
    // eth0 received + transmitted: quiet 10 MB/s, medium 40 MB/s, busy 80 MB/s.
    let nodes = vec![
        FakeNode::new("quiet").with_network(6e6, 4e6),
        FakeNode::new("medium").with_network(20e6, 20e6),
        FakeNode::new("busy").with_network(50e6, 30e6),
    ];
    let (_exporter, prom) =
        exporter_with_shipped_rules(nodes, Duration::from_secs(20 * 60)).await?;
    wait_until(Duration::from_secs(20), || async {
        let rows = prom.query("waterline:node_network_bytes:rate5m").await?;
        ensure!(rows.len() == 3, "{rows:?}");
        Ok(())
    })
    .await?;

    let policy = repo_path("deploy/examples/policies/network-traffic.yaml");
    let policy = policy.to_str().expect("utf-8 path").to_string();
    let url = prom.url();
    let collector = Service::collector(&[
        "--prometheus-url".into(),
        url,
        "--no-kube".into(),
        "--policy".into(),
        policy.clone(),
    ])
    .await?;
    let scorer = Service::scorer(collector.grpc, &["--policy".into(), policy]).await?;
    let mut client = scorer.scorer_client().await?;
    let names: Vec<String> = ["quiet", "medium", "busy"].map(String::from).to_vec();
    let pod = pb::PodInfo {
        namespace: "default".into(),
        name: "web".into(),
        uid: "web".into(),
        cpu_request_millis: 500,
        ..Default::default()
    };
    // 100 − traffic × 100 / highest: quiet 100 − 12.5 = 87.5 → 88, medium 100 − 50 = 50,
    // busy 0 (± a point for the rate's sampling).
    let scores = wait_until(Duration::from_secs(20), || async {
        let response = client
            .clone()
            .score(pb::ScoreRequest {
                pod: Some(pod.clone()),
                node_names: names.clone(),
                explain: true,
                ..Default::default()
            })
            .await?
            .into_inner();
        let scores: Vec<i64> = response.scores.iter().map(|s| i64::from(s.score)).collect();
        ensure!(response.scores.iter().all(|s| !s.terms[0].stale), "not all fresh: {response:?}");
        Ok(scores)
    })
    .await?;
    ensure!(scores[2] == 0, "busy scores {scores:?}");
    ensure!((86..=90).contains(&scores[0]), "quiet {scores:?}");
    ensure!((48..=52).contains(&scores[1]), "medium {scores:?}");
    let best = (0..3).max_by_key(|&i| scores[i]).unwrap_or(2);
    ensure!(names[best] == "quiet", "chose {} from {scores:?}", names[best]);
    // Without the quiet node among the candidates, medium is chosen and busy still scores 0.
    let response = client
        .score(pb::ScoreRequest {
            pod: Some(pod.clone()),
            node_names: names[1..].to_vec(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let two: Vec<i64> = response.scores.iter().map(|s| i64::from(s.score)).collect();
    ensure!(two[1] == 0 && two[0] >= 48, "{two:?}");
    // The policy has no Filter: every node stays feasible.
    let filtered = client
        .filter(pb::FilterRequest {
            policy: String::new(),
            pod: Some(pod),
            node_names: names.clone(),
            all_nodes: false,
        })
        .await?
        .into_inner();
    ensure!(filtered.feasible_nodes == names, "{filtered:?}");
    Ok(())
}
