//! Two active-active collectors behind one scorer: every Reserve reaches both, and when the
//! one the scorer streams from dies the scorer fails over to the other with the whole
//! ledger — nothing placed before or after the kill is lost.

use std::time::Duration;

use anyhow::Result;
use waterline_api::v1 as pb;
use waterline_tests::procs::{Service, write_file};
use waterline_tests::prometheus::wait_until;

fn nodes() -> String {
    let metrics = "{cpu_usage_avg_5m: 10, cpu_usage_max_avg_1h: 10, cpu_usage_max_avg_1d: 10, mem_usage_avg_5m: 10, mem_usage_max_avg_1h: 10, mem_usage_max_avg_1d: 10}";
    ["node-a", "node-b"]
        .iter()
        .map(|n| {
            format!("  - {{name: {n}, capacity: {{cpu: 8, memory: 32Gi}}, metrics: {metrics}}}\n")
        })
        .fold(String::from("nodes:\n"), |text, line| text + &line)
}

fn pod(i: usize) -> pb::PodInfo {
    pb::PodInfo {
        namespace: "default".into(),
        name: format!("burst-{i}"),
        uid: format!("uid-{i}"),
        cpu_request_millis: 400,
        ..Default::default()
    }
}

async fn ledger_len(collector: &Service) -> Result<usize> {
    let mut client = collector.collector_client().await?;
    Ok(client.list_nodes(pb::ListNodesRequest::default()).await?.into_inner().ledger.len())
}

/// The scorer's own ledger share of node-a's 5 m cpu metric, in percent.
async fn scorer_ledger_on_a(scorer: &Service) -> Result<f64> {
    let mut client = scorer.scorer_client().await?;
    let request = pb::ScoreRequest {
        pod: Some(pod(999)),
        node_names: vec!["node-a".into()],
        explain: true,
        ..Default::default()
    };
    Ok(client.score(request).await?.into_inner().scores[0].terms[0].ledger_percent)
}

#[tokio::test]
async fn a_killed_collector_loses_no_placement() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let nodes = write_file(dir.path(), "nodes.yaml", &nodes());
    let mut first = Service::collector(&["--static".into(), nodes.clone()]).await?;
    let second = Service::collector(&["--static".into(), nodes]).await?;
    let urls = format!("{},{}", first.url(), second.url());
    let scorer = Service::spawn("waterline-scorer", &["--collector-url".into(), urls])?;
    scorer.wait_ready(Duration::from_secs(20)).await?;
    let mut client = scorer.scorer_client().await?;

    let reserve = |i: usize| pb::ReserveRequest {
        pod: Some(pod(i)),
        node_name: "node-a".into(),
        provisional_ttl: None,
    };
    for i in 0..5 {
        client.reserve(reserve(i)).await?;
    }
    for collector in [&first, &second] {
        wait_until(Duration::from_secs(10), || async {
            let n = ledger_len(collector).await?;
            anyhow::ensure!(n == 5, "{} holds {n} of 5 entries", collector.url());
            Ok(())
        })
        .await?;
    }

    // The scorer streams from the first collector; kill it and keep placing.
    first.stop();
    for i in 5..10 {
        client.reserve(reserve(i)).await?;
    }
    wait_until(Duration::from_secs(10), || async {
        let n = ledger_len(&second).await?;
        anyhow::ensure!(n == 10, "the surviving collector holds {n} of 10 entries");
        Ok(())
    })
    .await?;
    // Failed over: streaming again (from the second), and the snapshot it streamed has every
    // placement — 10 × 400 m × 0.85 = 3400 m of 8000 m = 42.5 % on node-a.
    wait_until(Duration::from_secs(20), || async {
        let connected = scorer.metric_value("waterline_collector_connected").await?;
        anyhow::ensure!(connected == 1.0, "not streaming again yet");
        let share = scorer_ledger_on_a(&scorer).await?;
        anyhow::ensure!(share == 42.5, "ledger share on node-a {share} != 42.5");
        Ok(())
    })
    .await?;
    let reconnects = scorer.metric_value("waterline_collector_reconnects_total").await?;
    assert!(reconnects >= 1.0, "the stream was reopened: {reconnects}");
    Ok(())
}
