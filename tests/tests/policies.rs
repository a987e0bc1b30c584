//! Named policies through the real binaries (docs/operations.md#policies-per-profile): one
//! scorer started with a default policy and two named ones answers the same pod on the
//! same snapshot differently per name — on Score, Evaluate and a Session's Evaluate — applies
//! a named policy's priority tiers, and refuses a name it does not serve with
//! INVALID_ARGUMENT naming the ones it does.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use waterline_api::v1 as pb;
use waterline_api::v1::session_request::Message as In;
use waterline_api::v1::session_response::Message as Out;
use waterline_tests::procs::{Service, write_file};

/// Spreads: least used, and prod pods (priority 9000 and up) kept below 50 % cpu.
const SPREAD: &str = "metrics:
  - {name: cpu, resource: cpu, query: q, period: 30s, weight: 1, filterAbove: 90}
curve: {kind: leastUsed}
priorities:
  - {minPriority: 9000, filterAbove: {cpu: 50}}
";

/// Packs: a water level at 70 %, so the busier node is preferred.
const PACK: &str = "metrics:
  - {name: cpu, resource: cpu, query: q, period: 30s, weight: 1, filterAbove: 90}
curve: {kind: waterLevel, target: 70}
";

/// Two nodes far larger than the pod (its estimate adds nothing measurable): cpu 30 % and 60 %.
const NODES: &str = "nodes:
  - {name: cool, capacity: {cpu: 1e9, memory: 1Ei}, metrics: {cpu: 30}}
  - {name: busy, capacity: {cpu: 1e9, memory: 1Ei}, metrics: {cpu: 60}}
";

fn names() -> Vec<String> {
    vec!["cool".into(), "busy".into()]
}

fn pod(priority: i32) -> pb::PodInfo {
    pb::PodInfo {
        namespace: "default".into(),
        name: "p".into(),
        uid: "p".into(),
        cpu_request_millis: 100,
        priority,
        ..Default::default()
    }
}

async fn scores(client: &mut Client, policy: &str) -> Result<Vec<i32>> {
    let request = pb::ScoreRequest {
        pod: Some(pod(0)),
        node_names: names(),
        scores_only: true,
        policy: policy.into(),
        ..Default::default()
    };
    Ok(client.score(request).await?.into_inner().ordered_scores)
}

type Client =
    waterline_api::v1::scorer_service_client::ScorerServiceClient<tonic::transport::Channel>;

#[tokio::test]
async fn two_named_policies_answer_the_same_pod_differently_and_an_unknown_name_is_refused()
-> Result<()> {
    let dir = tempfile::tempdir()?;
    let spread = write_file(dir.path(), "spread.yaml", SPREAD);
    let pack = write_file(dir.path(), "pack.yaml", PACK);
    let nodes = write_file(dir.path(), "nodes.yaml", NODES);
    let collector =
        Service::collector(&["--static".into(), nodes, "--policy".into(), spread.clone()]).await?;
    let scorer = Service::scorer(
        collector.grpc,
        &[
            "--policy".into(),
            spread.clone(),
            "--policy".into(),
            format!("pack={pack}"),
            "--policy".into(),
            format!("spread={spread}"),
        ],
    )
    .await?;
    let mut client = scorer.scorer_client().await?;

    // [cool, busy]. Least used: 100 − 30 and 100 − 60. The water level at 70 rewards the
    // node nearer it: busy.
    let spread_scores = scores(&mut client, "spread").await?;
    let pack_scores = scores(&mut client, "pack").await?;
    assert_eq!(spread_scores, [70, 40]);
    ensure!(pack_scores[1] > pack_scores[0], "pack prefers busy: {pack_scores:?}");
    assert_eq!(scores(&mut client, "").await?, spread_scores, "the empty name is the default");

    // Evaluate with the spread policy: a prod pod is held to 50 % and busy is rejected; a
    // pod of priority 0 may go to either. The pack policy has no tiers.
    let evaluate = |priority: i32, policy: &str| pb::EvaluateRequest {
        pod: Some(pod(priority)),
        node_names: names(),
        policy: policy.into(),
        ..Default::default()
    };
    let prod = client.evaluate(evaluate(9000, "spread")).await?.into_inner();
    assert_eq!(prod.ordered_scores, [70, -1]);
    let reason = prod.rejected.get("busy").context("busy not rejected")?;
    ensure!(reason.starts_with("cpu 60.0") && reason.ends_with("> 50%"), "{reason}");
    let batch = client.evaluate(evaluate(0, "spread")).await?.into_inner();
    assert_eq!(batch.ordered_scores, [70, 40]);
    let prod_packed = client.evaluate(evaluate(9000, "pack")).await?.into_inner();
    assert!(prod_packed.rejected.is_empty(), "{:?}", prod_packed.rejected);

    // A name the scorer does not serve: INVALID_ARGUMENT naming those it does, on every RPC.
    let status = client.evaluate(evaluate(0, "batch")).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    ensure!(
        status.message().contains("'batch'") && status.message().contains("pack, spread"),
        "{}",
        status.message()
    );
    let filter = pb::FilterRequest {
        pod: Some(pod(0)),
        all_nodes: true,
        policy: "batch".into(),
        ..Default::default()
    };
    assert_eq!(client.filter(filter).await.unwrap_err().code(), tonic::Code::InvalidArgument);
    let score = pb::ScoreRequest {
        pod: Some(pod(0)),
        node_names: names(),
        policy: "batch".into(),
        ..Default::default()
    };
    assert_eq!(client.score(score).await.unwrap_err().code(), tonic::Code::InvalidArgument);

    // A Session carries the name per Evaluate: two profiles may share one stream.
    let (tx, rx) = mpsc::channel(4);
    let mut answers = client.session(ReceiverStream::new(rx)).await?.into_inner();
    let mut by_policy = Vec::new();
    for (id, policy) in [(1, "pack"), (2, "spread"), (3, "batch")] {
        let evaluate = pb::SessionEvaluate {
            request_id: id,
            pod: Some(pod(0)),
            node_table_generation: 0,
            policy: policy.into(),
        };
        tx.send(pb::SessionRequest { message: Some(In::Evaluate(evaluate)) }).await?;
        let mut table = Vec::new();
        let answer = loop {
            let message = tokio::time::timeout(Duration::from_secs(10), answers.message())
                .await
                .context("no answer within 10 s")??
                .context("stream ended")?;
            match message.message.context("empty response")? {
                Out::NodeTable(t) => table = t.node_names,
                Out::Evaluation(e) => break e,
                Out::Ack(_) => {}
            }
        };
        assert_eq!(answer.request_id, id);
        assert_eq!(table, ["busy", "cool"], "the table, in name order, precedes each answer");
        by_policy.push((answer.scores, answer.error));
    }
    // Table order [busy, cool].
    assert_eq!(by_policy[0], (vec![pack_scores[1], pack_scores[0]], String::new()));
    assert_eq!(by_policy[1], (vec![40, 70], String::new()));
    ensure!(by_policy[2].0.is_empty() && by_policy[2].1.contains("'batch'"), "{:?}", by_policy[2]);
    Ok(())
}
