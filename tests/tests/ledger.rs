//! The placement ledger through the real binaries, acting as a scheduler would: Filter,
//! Score, pick the best node (ties by name), Reserve — pod after pod.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use waterline_api::v1 as pb;
use waterline_tests::procs::{Service, write_file};
use waterline_tests::prometheus::wait_until;

const NODES: [&str; 4] = ["node-a", "node-b", "node-c", "node-d"];

/// Four equal 8-CPU nodes, every default metric at 10 %.
fn four_nodes() -> String {
    let metrics = "{cpu_usage_avg_5m: 10, cpu_usage_max_avg_1h: 10, cpu_usage_max_avg_1d: 10, mem_usage_avg_5m: 10, mem_usage_max_avg_1h: 10, mem_usage_max_avg_1d: 10}";
    let mut text = String::from("nodes:\n");
    for name in NODES {
        text.push_str(&format!(
            "  - {{name: {name}, capacity: {{cpu: 8, memory: 32Gi}}, metrics: {metrics}}}\n"
        ));
    }
    text
}

fn one_cpu_pod(i: usize) -> pb::PodInfo {
    pb::PodInfo {
        namespace: "default".into(),
        name: format!("burst-{i}"),
        uid: format!("uid-{i}"),
        cpu_request_millis: 1000,
        ..Default::default()
    }
}

/// Places 20 pods one by one; returns the per-node counts after each placement.
async fn burst(policy: &str) -> Result<Vec<Vec<usize>>> {
    let dir = tempfile::tempdir()?;
    let policy = write_file(dir.path(), "policy.yaml", policy);
    let nodes = write_file(dir.path(), "nodes.yaml", &four_nodes());
    let collector =
        Service::collector(&["--static".into(), nodes, "--policy".into(), policy.clone()]).await?;
    let scorer = Service::scorer(collector.grpc, &["--policy".into(), policy]).await?;
    let mut client = scorer.scorer_client().await?;
    let all: Vec<String> = NODES.iter().map(|n| n.to_string()).collect();
    let mut counts = vec![0usize; NODES.len()];
    let mut history = Vec::new();
    for i in 0..20 {
        let pod = one_cpu_pod(i);
        let feasible = client
            .filter(pb::FilterRequest {
                pod: Some(pod.clone()),
                node_names: all.clone(),
                ..Default::default()
            })
            .await?
            .into_inner()
            .feasible_nodes;
        anyhow::ensure!(!feasible.is_empty(), "pod {i}: no feasible node");
        let scores = client
            .score(pb::ScoreRequest {
                pod: Some(pod.clone()),
                node_names: feasible,
                explain: false,
                ..Default::default()
            })
            .await?
            .into_inner()
            .scores;
        let best = scores
            .iter()
            .max_by(|x, y| x.score.cmp(&y.score).then(y.node_name.cmp(&x.node_name)))
            .expect("at least one score");
        client
            .reserve(pb::ReserveRequest {
                pod: Some(pod),
                node_name: best.node_name.clone(),
                provisional_ttl: None,
            })
            .await?;
        counts[NODES.iter().position(|n| *n == best.node_name).expect("known node")] += 1;
        history.push(counts.clone());
    }
    Ok(history)
}

fn spread(counts: &[usize]) -> usize {
    counts.iter().max().unwrap() - counts.iter().min().unwrap()
}

#[tokio::test]
async fn burst_spreads_evenly_under_water_level() -> Result<()> {
    let history = burst("curve: {kind: waterLevel, target: 40}\n").await?;
    let last = history.last().unwrap();
    assert_eq!(last.iter().sum::<usize>(), 20);
    assert!(spread(last) <= 1, "{last:?}");
    for counts in &history {
        let (max, min) = (*counts.iter().max().unwrap(), *counts.iter().min().unwrap());
        assert!(!(max >= 3 && min < 2), "a third pod before every node had two: {counts:?}");
    }
    Ok(())
}

#[tokio::test]
async fn burst_spreads_evenly_under_least_used() -> Result<()> {
    let history = burst("curve: {kind: leastUsed}\n").await?;
    let last = history.last().unwrap();
    assert_eq!(last.iter().sum::<usize>(), 20);
    assert!(spread(last) <= 1, "{last:?}");
    Ok(())
}

#[tokio::test]
async fn burst_piles_up_without_the_ledger() -> Result<()> {
    let history =
        burst("curve: {kind: waterLevel, target: 40}\nledger: {enabled: false}\n").await?;
    assert_eq!(history.last().unwrap(), &vec![20, 0, 0, 0]);
    Ok(())
}

/// A Reserve on one scorer reaches the collector (ListNodes shows it with its source and
/// absorb time) and every other scorer; Unreserve takes it away everywhere.
#[tokio::test]
async fn reserve_reaches_the_collector_and_other_scorers() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let nodes = write_file(dir.path(), "nodes.yaml", &four_nodes());
    let collector = Service::collector(&["--static".into(), nodes]).await?;
    let scorer_a = Service::scorer(collector.grpc, &[]).await?;
    let scorer_b = Service::scorer(collector.grpc, &[]).await?;
    let mut a = scorer_a.scorer_client().await?;
    let b = scorer_b.scorer_client().await?;

    let pod = one_cpu_pod(1);
    a.reserve(pb::ReserveRequest {
        pod: Some(pod.clone()),
        node_name: "node-b".into(),
        provisional_ttl: None,
    })
    .await?;
    // idempotent: a second Reserve changes nothing
    a.reserve(pb::ReserveRequest {
        pod: Some(pod.clone()),
        node_name: "node-b".into(),
        provisional_ttl: None,
    })
    .await?;

    let ledger_on_b = |expected: f64| {
        let b = b.clone();
        async move {
            let mut b = b.clone();
            let request = pb::ScoreRequest {
                pod: Some(one_cpu_pod(99)),
                node_names: vec!["node-b".into()],
                explain: true,
                ..Default::default()
            };
            let term = b.score(request).await?.into_inner().scores[0].terms[0].clone();
            anyhow::ensure!(
                term.ledger_percent == expected,
                "ledger {} != {expected}",
                term.ledger_percent
            );
            Ok(())
        }
    };
    // 1 CPU × 0.85 of 8 cores
    wait_until(Duration::from_secs(10), || ledger_on_b(10.625)).await?;

    let mut collector_client = collector.collector_client().await?;
    let listed = collector_client
        .list_nodes(pb::ListNodesRequest { node_names: vec!["node-b".into()] })
        .await?
        .into_inner();
    assert_eq!(listed.ledger.len(), 1);
    let entry = &listed.ledger[0];
    assert_eq!((entry.pod_uid.as_str(), entry.node_name.as_str()), ("uid-1", "node-b"));
    assert_eq!(entry.source, pb::LedgerSource::Reserve as i32);
    assert_eq!(entry.cpu_millis, 850);
    // Each default metric has its own absorb window: 7 m for the 5 m averages, 36.5 m for
    // the 1 d maxima (5 m window + 30 m poll period + 90 s lag), the entry's whole span.
    let remaining = entry.absorb_remaining.unwrap_or_default().seconds;
    assert!((2170..=2190).contains(&remaining), "absorb remaining {remaining}s of 36.5m");
    let short = entry.absorb_remaining_by_metric["cpu_usage_avg_5m"].seconds;
    assert!((400..=420).contains(&short), "5 m average: absorb remaining {short}s of 7m");

    a.unreserve(pb::UnreserveRequest { pod: Some(pod), node_name: "node-b".into() }).await?;
    wait_until(Duration::from_secs(10), || ledger_on_b(0.0)).await?;
    let listed = collector_client.list_nodes(pb::ListNodesRequest::default()).await?.into_inner();
    assert!(listed.ledger.is_empty());
    Ok(())
}

/// Anti-colocation across scorers: a Reserve on one scorer rejects the same group on that
/// node at another scorer.
#[tokio::test]
async fn anti_colocation_rejects_the_second_member_of_a_group() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let policy = write_file(
        dir.path(),
        "policy.yaml",
        "antiColocation: [{labelKey: waterline.io/spread-group}]\n",
    );
    let nodes = write_file(dir.path(), "nodes.yaml", &four_nodes());
    let collector =
        Service::collector(&["--static".into(), nodes, "--policy".into(), policy.clone()]).await?;
    let scorer_a = Service::scorer(collector.grpc, &["--policy".into(), policy.clone()]).await?;
    let scorer_b = Service::scorer(collector.grpc, &["--policy".into(), policy]).await?;
    let grouped = |i: usize, group: &str| pb::PodInfo {
        labels: BTreeMap::from([("waterline.io/spread-group".to_string(), group.to_string())])
            .into_iter()
            .collect(),
        ..one_cpu_pod(i)
    };
    let mut a = scorer_a.scorer_client().await?;
    a.reserve(pb::ReserveRequest {
        pod: Some(grouped(1, "redis-a")),
        node_name: "node-a".into(),
        provisional_ttl: None,
    })
    .await?;

    let b = scorer_b.scorer_client().await?;
    let all: Vec<String> = NODES.iter().map(|n| n.to_string()).collect();
    let filtered = wait_until(Duration::from_secs(10), || {
        let (mut b, all) = (b.clone(), all.clone());
        async move {
            let response = b
                .filter(pb::FilterRequest {
                    pod: Some(grouped(2, "redis-a")),
                    node_names: all,
                    ..Default::default()
                })
                .await?
                .into_inner();
            anyhow::ensure!(!response.rejected.is_empty(), "not rejected yet");
            Ok(response)
        }
    })
    .await?;
    assert_eq!(filtered.feasible_nodes, vec!["node-b", "node-c", "node-d"]);
    assert_eq!(
        filtered.rejected["node-a"],
        "anti-colocation waterline.io/spread-group=redis-a with default/burst-1"
    );
    // another group may share the node
    let mut b = b.clone();
    let other = b
        .filter(pb::FilterRequest {
            pod: Some(grouped(3, "redis-b")),
            node_names: all,
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(other.feasible_nodes.len(), 4);
    Ok(())
}
