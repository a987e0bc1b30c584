//! Evaluate and Session through the real binaries: Evaluate answers exactly what Filter and
//! Score answer, and on a Session a Reserve written without waiting is seen by the next
//! Evaluate, nodes cross the stream once (a node table), and Reserves are acknowledged.

use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use waterline_api::v1 as pb;
use waterline_api::v1::session_request::Message as In;
use waterline_api::v1::session_response::Message as Out;
use waterline_tests::procs::{Service, write_file};

/// Four 8-CPU nodes at 10, 25, 50 and 70 % cpu (the last is past the 65 % filter).
fn nodes() -> String {
    let mut text = String::from("nodes:\n");
    for (name, level) in [("node-a", 10), ("node-b", 25), ("node-c", 50), ("node-d", 70)] {
        let metrics = format!(
            "{{cpu_usage_avg_5m: {level}, cpu_usage_max_avg_1h: {level}, cpu_usage_max_avg_1d: {level}, mem_usage_avg_5m: 10, mem_usage_max_avg_1h: 10, mem_usage_max_avg_1d: 10}}"
        );
        text.push_str(&format!(
            "  - {{name: {name}, capacity: {{cpu: 8, memory: 32Gi}}, metrics: {metrics}}}\n"
        ));
    }
    text
}

fn pod(i: usize) -> pb::PodInfo {
    pb::PodInfo {
        namespace: "default".into(),
        name: format!("p-{i}"),
        uid: format!("uid-{i}"),
        cpu_request_millis: 1000,
        ..Default::default()
    }
}

fn names() -> Vec<String> {
    ["node-a", "node-b", "node-c", "node-d"].map(String::from).to_vec()
}

async fn stack() -> Result<(tempfile::TempDir, Service, Service)> {
    let dir = tempfile::tempdir()?;
    let file = write_file(dir.path(), "nodes.yaml", &nodes());
    let collector = Service::collector(&["--static".into(), file]).await?;
    let scorer = Service::scorer(collector.grpc, &[]).await?;
    Ok((dir, collector, scorer))
}

#[tokio::test]
async fn evaluate_answers_what_filter_and_score_answer() -> Result<()> {
    let (_dir, _collector, scorer) = stack().await?;
    let mut client = scorer.scorer_client().await?;
    let filter = client
        .filter(pb::FilterRequest {
            policy: String::new(),
            pod: Some(pod(1)),
            node_names: names(),
            all_nodes: false,
        })
        .await?
        .into_inner();
    let score = client
        .score(pb::ScoreRequest {
            pod: Some(pod(1)),
            node_names: names(),
            scores_only: true,
            ..Default::default()
        })
        .await?
        .into_inner();
    let evaluated = client
        .evaluate(pb::EvaluateRequest {
            policy: String::new(),
            pod: Some(pod(1)),
            node_names: names(),
            all_nodes: false,
        })
        .await?
        .into_inner();
    assert_eq!(evaluated.rejected, filter.rejected);
    assert_eq!(filter.rejected.keys().collect::<Vec<_>>(), ["node-d"]);
    // Feasible nodes score what Score says; the rejected one answers -1.
    let expected: Vec<i32> = names()
        .iter()
        .zip(&score.ordered_scores)
        .map(|(n, s)| if filter.rejected.contains_key(n) { -1 } else { *s })
        .collect();
    assert_eq!(evaluated.ordered_scores, expected);

    let all = client
        .evaluate(pb::EvaluateRequest {
            policy: String::new(),
            pod: Some(pod(1)),
            node_names: vec![],
            all_nodes: true,
        })
        .await?
        .into_inner();
    assert_eq!(all.feasible_nodes, ["node-a", "node-b", "node-c"]);
    assert_eq!(all.feasible_scores, expected[..3]);
    assert_eq!(all.rejected, filter.rejected);
    // An unknown node scores the stale score (50 by default) and is never rejected.
    assert_eq!(all.unknown_node_score, 50);

    let bad = pb::EvaluateRequest {
        policy: String::new(),
        pod: Some(pod(1)),
        node_names: names(),
        all_nodes: true,
    };
    let status = client.evaluate(bad).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    Ok(())
}

async fn next(stream: &mut tonic::Streaming<pb::SessionResponse>) -> Result<Out> {
    let message = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .context("no answer within 10 s")??
        .context("stream ended")?;
    message.message.context("empty response")
}

async fn evaluation(
    stream: &mut tonic::Streaming<pb::SessionResponse>,
) -> Result<pb::SessionEvaluation> {
    loop {
        if let Out::Evaluation(e) = next(stream).await? {
            return Ok(e);
        }
    }
}

/// A Session stream to `scorer`: the sender of its requests (holding `buffer`) and its answers.
async fn open_session(
    scorer: &Service,
    buffer: usize,
) -> Result<(mpsc::Sender<pb::SessionRequest>, tonic::Streaming<pb::SessionResponse>)> {
    let (tx, rx) = mpsc::channel(buffer);
    let answers = scorer.scorer_client().await?.session(ReceiverStream::new(rx)).await?;
    Ok((tx, answers.into_inner()))
}

#[tokio::test]
async fn a_session_orders_reserves_before_the_next_evaluate() -> Result<()> {
    let (_dir, _collector, scorer) = stack().await?;
    let (tx, mut answers) = open_session(&scorer, 16).await?;
    let send = |message| pb::SessionRequest { message: Some(message) };

    tx.send(send(In::Evaluate(pb::SessionEvaluate {
        policy: String::new(),
        request_id: 1,
        pod: Some(pod(1)),
        node_table_generation: 0,
    })))
    .await?;
    let Out::NodeTable(table) = next(&mut answers).await? else {
        anyhow::bail!("the first answer must be the node table");
    };
    assert_eq!(table.node_names, names());
    let first = evaluation(&mut answers).await?;
    assert_eq!((first.request_id, first.node_table_generation), (1, table.generation));
    assert_eq!(first.rejected_indexes, [3]);
    assert!(
        first.rejected_reasons[0].starts_with("cpu_usage_avg_5m 80.6% > 65%"),
        "{:?}",
        first.rejected_reasons
    );
    assert_eq!(first.scores[3], -1);
    // A one-CPU pod is 850 m = 10.6 pp of 8 CPUs: node-b at 25 % + 10.6 = 35.6 % is
    // nearest the water level (40) without passing it.
    let best = (0..3).max_by_key(|&i| first.scores[i]).unwrap();
    assert_eq!(table.node_names[best], "node-b");

    // Reserve three pods on node-b without waiting, then evaluate: the answer sees them
    // (25 % + 3 × 10.6 % + the next pod's 10.6 % = 67.5 % > 65 %: node-b is rejected now),
    // and the table does not cross the stream again.
    for i in 0..3u64 {
        tx.send(send(In::Reserve(pb::SessionReserve {
            sequence: 10 + i,
            pod: Some(pod(100 + i as usize)),
            node_name: "node-b".into(),
            provisional_ttl: None,
        })))
        .await?;
    }
    tx.send(send(In::Evaluate(pb::SessionEvaluate {
        policy: String::new(),
        request_id: 2,
        pod: Some(pod(2)),
        node_table_generation: table.generation,
    })))
    .await?;
    let Out::Ack(ack) = next(&mut answers).await? else {
        anyhow::bail!("the Reserves are acknowledged before the next answer");
    };
    assert_eq!(ack.up_to_sequence, 12);
    let Out::Evaluation(second) = next(&mut answers).await? else {
        anyhow::bail!("no node table when the client's is current");
    };
    assert_eq!(second.request_id, 2);
    assert_eq!(second.rejected_indexes, [1, 3], "{:?}", second.rejected_reasons);
    assert_eq!(second.scores[1], -1);
    let best = (0..3).max_by_key(|&i| second.scores[i]).unwrap();
    assert_ne!(table.node_names[best], "node-b");

    // A bad pod is answered with the reason and the stream stays open.
    let negative = pb::PodInfo { cpu_request_millis: -1, ..pod(3) };
    tx.send(send(In::Evaluate(pb::SessionEvaluate {
        policy: String::new(),
        request_id: 3,
        pod: Some(negative),
        node_table_generation: table.generation,
    })))
    .await?;
    let third = evaluation(&mut answers).await?;
    assert!(third.error.contains("must not be negative"), "{}", third.error);
    tx.send(send(In::Evaluate(pb::SessionEvaluate {
        policy: String::new(),
        request_id: 4,
        pod: Some(pod(4)),
        node_table_generation: table.generation,
    })))
    .await?;
    assert_eq!(evaluation(&mut answers).await?.request_id, 4);
    Ok(())
}

#[tokio::test]
async fn a_session_reserve_with_provisional_ttl_expires_and_a_negative_one_places_nothing()
-> Result<()> {
    let (_dir, _collector, scorer) = stack().await?;
    let (tx, mut answers) = open_session(&scorer, 16).await?;
    let send = |message| pb::SessionRequest { message: Some(message) };
    let reserve = |sequence: u64, uid: usize, ttl: waterline_api::ProtoDuration| {
        send(In::Reserve(pb::SessionReserve {
            sequence,
            pod: Some(pod(uid)),
            node_name: "node-b".into(),
            provisional_ttl: Some(ttl),
        }))
    };
    let evaluate = |request_id: u64| {
        send(In::Evaluate(pb::SessionEvaluate {
            policy: String::new(),
            request_id,
            pod: Some(pod(request_id as usize)),
            node_table_generation: 0,
        }))
    };
    // A negative TTL is refused (acknowledged, not placed): node-b stays feasible.
    tx.send(reserve(1, 100, waterline_api::ProtoDuration { seconds: -1, nanos: 0 })).await?;
    tx.send(evaluate(1)).await?;
    assert_eq!(evaluation(&mut answers).await?.rejected_indexes, [3]);
    // Three guesses of 2 s on node-b: 25 % + 3 × 10.6 % + 10.6 % = 67.5 % > 65 %, rejected
    // (as the ordinary Reserves of the test above) ...
    for i in 0..3u64 {
        tx.send(reserve(
            10 + i,
            200 + i as usize,
            waterline_api::ProtoDuration { seconds: 2, nanos: 0 },
        ))
        .await?;
    }
    tx.send(evaluate(2)).await?;
    assert_eq!(evaluation(&mut answers).await?.rejected_indexes, [1, 3]);
    // ... until they expire unconfirmed (the collector prunes them and streams the release).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut request_id = 3;
    loop {
        tx.send(evaluate(request_id)).await?;
        let answer = evaluation(&mut answers).await?;
        if answer.rejected_indexes == [3] {
            break;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "provisional entries still counted after 10 s: {:?}",
            answer.rejected_reasons
        );
        request_id += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

#[tokio::test]
async fn a_session_acks_in_batches_and_when_quiet_and_ends_when_the_client_does() -> Result<()> {
    let (_dir, _collector, scorer) = stack().await?;
    let (tx, mut answers) = open_session(&scorer, 256).await?;
    // 130 Reserves and no Evaluate: the scorer's ACK_EVERY is 128, so one ack may cover at
    // most 128 of them (a batch ack, or an earlier idle one if the sends pause for
    // ACK_IDLE), and the last two are acknowledged only by the stream going quiet.
    const RESERVES: u64 = 130;
    for sequence in 1..=RESERVES {
        let reserve = In::Reserve(pb::SessionReserve {
            sequence,
            pod: Some(pod(1000 + sequence as usize)),
            node_name: "node-a".into(),
            provisional_ttl: None,
        });
        tx.send(pb::SessionRequest { message: Some(reserve) }).await?;
    }
    let mut acked = Vec::new();
    while acked.last() != Some(&RESERVES) {
        let Out::Ack(ack) = next(&mut answers).await? else {
            anyhow::bail!("only acks answer Reserves");
        };
        acked.push(ack.up_to_sequence);
    }
    let mut previous = 0;
    for &up_to in &acked {
        assert!(up_to > previous && up_to - previous <= 128, "acks {acked:?}");
        previous = up_to;
    }
    assert!(acked.len() >= 2, "130 Reserves need a batch ack and a quiet one: {acked:?}");
    // The client closes its side: the answers end cleanly (no error status).
    drop(tx);
    let end = tokio::time::timeout(Duration::from_secs(10), answers.message()).await?;
    assert!(matches!(end, Ok(None)), "{end:?}");
    Ok(())
}
