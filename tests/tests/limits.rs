//! The gRPC servers' limits (RELIABILITY.md): a message past `--max-request-bytes`, more
//! candidates than `--max-nodes`, a unary RPC past `--max-concurrent-rpcs`, and a stream
//! past `--max-streams-per-client` are each answered RESOURCE_EXHAUSTED at once and counted
//! by limit; the server stays SERVING and answers the next normal request.

use std::time::Duration;

use anyhow::{Result, ensure};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
use waterline_api::v1 as pb;
use waterline_tests::procs::{Service, write_file};
use waterline_tests::prometheus::wait_until;

const NODES: &str =
    "nodes:\n  - {name: n1, capacity: {cpu: 8, memory: 32Gi}, metrics: {cpu_usage_avg_5m: 30}}\n";

async fn collector(dir: &std::path::Path, extra: &[&str]) -> Result<Service> {
    let mut args = vec!["--static".to_string(), write_file(dir, "nodes.yaml", NODES)];
    args.extend(extra.iter().map(|s| s.to_string()));
    Service::collector(&args).await
}

async fn scorer(collector: &Service, extra: &[&str]) -> Result<Service> {
    let args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    Service::scorer(collector.grpc, &args).await
}

fn pod() -> pb::PodInfo {
    pb::PodInfo {
        name: "p".into(),
        uid: "u".into(),
        namespace: "default".into(),
        ..Default::default()
    }
}

fn score(names: &[&str]) -> pb::ScoreRequest {
    pb::ScoreRequest {
        pod: Some(pod()),
        node_names: names.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn rejections(metrics: &str, limit: &str) -> f64 {
    let series = format!("waterline_grpc_limit_rejections_total{{limit=\"{limit}\"}} ");
    metrics.lines().find_map(|l| l.strip_prefix(&series)?.parse().ok()).unwrap_or(0.0)
}

/// SERVING for `service`, and a normal Score answered.
async fn still_healthy(scorer: &Service, service: &str) -> Result<()> {
    scorer.check_running()?;
    let status = HealthClient::new(scorer.channel().await?)
        .check(HealthCheckRequest { service: service.into() })
        .await?
        .into_inner()
        .status;
    ensure!(status == ServingStatus::Serving as i32, "health {status}");
    Ok(())
}

async fn score_ok(scorer: &Service) -> Result<()> {
    let scores = scorer.scorer_client().await?.score(score(&["n1"])).await?.into_inner().scores;
    ensure!(scores.len() == 1, "{scores:?}");
    Ok(())
}

#[tokio::test]
async fn a_message_past_max_request_bytes_is_resource_exhausted() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let collector = collector(dir.path(), &[]).await?;
    let scorer = scorer(&collector, &["--max-request-bytes", "1024"]).await?;
    // 200 names of 9-10 bytes each, plus 2 bytes of framing per name: over 2 KiB.
    let names: Vec<String> = (0..200).map(|i| format!("node-{i:04}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let status = scorer.scorer_client().await?.score(score(&refs)).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("--max-request-bytes (1024)"), "{}", status.message());
    assert!(status.message().contains("the limit is: 1024 bytes"), "{}", status.message());
    assert_eq!(rejections(&scorer.metrics().await?, "request_bytes"), 1.0);
    still_healthy(&scorer, "waterline.v1.ScorerService").await?;
    score_ok(&scorer).await?;

    // The collector's limit works the same way (a Reserve with a 2 KiB pod name).
    let collector = self::collector(dir.path(), &["--max-request-bytes", "1024"]).await?;
    let mut client = collector.collector_client().await?;
    let reserve = pb::CollectorServiceReserveRequest {
        pod: Some(pb::PodInfo { name: "x".repeat(2048), ..pod() }),
        node_name: "n1".into(),
        ..Default::default()
    };
    let status = client.reserve(reserve).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(rejections(&collector.metrics().await?, "request_bytes"), 1.0);
    still_healthy(&collector, "waterline.v1.CollectorService").await?;
    client.list_nodes(pb::ListNodesRequest::default()).await?;
    Ok(())
}

#[tokio::test]
async fn more_nodes_than_max_nodes_is_resource_exhausted() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let collector = collector(dir.path(), &[]).await?;
    let scorer = scorer(&collector, &["--max-nodes", "3"]).await?;
    let mut client = scorer.scorer_client().await?;
    let four = score(&["a", "b", "c", "d"]);
    let reason = "4 node names exceed the limit of 3 (--max-nodes)";
    let score = client.score(four.clone()).await.unwrap_err();
    let filter = pb::FilterRequest {
        pod: four.pod.clone(),
        node_names: four.node_names.clone(),
        ..Default::default()
    };
    let filter = client.filter(filter).await.unwrap_err();
    let evaluate =
        pb::EvaluateRequest { pod: four.pod, node_names: four.node_names, ..Default::default() };
    let evaluate = client.evaluate(evaluate).await.unwrap_err();
    for status in [score, filter, evaluate] {
        assert_eq!((status.code(), status.message()), (Code::ResourceExhausted, reason));
    }
    assert_eq!(rejections(&scorer.metrics().await?, "nodes"), 3.0);
    still_healthy(&scorer, "waterline.v1.ScorerService").await?;
    // Three names are within the limit.
    let scores = client.score(self::score(&["n1", "b", "c"])).await?.into_inner().scores;
    assert_eq!(scores.len(), 3);
    Ok(())
}

/// A Score whose request body never arrives: the server has started the RPC (it holds an
/// in-flight slot) and waits for the message.
fn stalled_score(channel: Channel) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut grpc = tonic::client::Grpc::new(channel);
        if grpc.ready().await.is_err() {
            return;
        }
        let path = http::uri::PathAndQuery::from_static("/waterline.v1.ScorerService/Score");
        let never = tokio_stream::pending::<pb::ScoreRequest>();
        let codec = tonic_prost::ProstCodec::<pb::ScoreRequest, pb::ScoreResponse>::default();
        let _ = grpc.client_streaming(tonic::Request::new(never), path, codec).await;
    })
}

#[tokio::test]
async fn a_unary_rpc_past_max_concurrent_rpcs_is_shed_not_queued() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let collector = collector(dir.path(), &[]).await?;
    let scorer = scorer(&collector, &["--max-concurrent-rpcs", "1"]).await?;
    let stalled = stalled_score(scorer.channel().await?);
    // Once the stalled call holds the only slot, the next RPC is refused at once.
    // Any other refusal (UNAVAILABLE until the scorer has the collector's first snapshot,
    // which a loaded machine can delay) is not the one under test: ask again.
    let status = wait_until(Duration::from_secs(10), || async {
        match scorer.scorer_client().await?.score(score(&["n1"])).await {
            Ok(_) => anyhow::bail!("served: the stalled call does not hold the slot yet"),
            Err(status) if status.code() == Code::ResourceExhausted => Ok(status),
            Err(status) => anyhow::bail!("refused, but not shed: {status:?}"),
        }
    })
    .await?;
    assert!(status.message().contains("--max-concurrent-rpcs"), "{}", status.message());
    assert!(rejections(&scorer.metrics().await?, "concurrent_rpcs") >= 1.0);
    // Health checks are exempt: probes see SERVING while the server sheds load.
    still_healthy(&scorer, "waterline.v1.ScorerService").await?;
    // When the stalled call goes away, its slot comes back.
    stalled.abort();
    wait_until(Duration::from_secs(10), || score_ok(&scorer)).await?;
    Ok(())
}

#[tokio::test]
async fn a_stream_past_max_streams_per_client_is_resource_exhausted() -> Result<()> {
    let dir = tempfile::tempdir()?;
    // WatchNodes on the collector: two per client address.
    let collector = collector(dir.path(), &["--max-streams-per-client", "2"]).await?;
    let watch = || async {
        let request = pb::WatchNodesRequest { subscriber: "limits test".into() };
        collector.collector_client().await?.watch_nodes(request).await.map_err(anyhow::Error::from)
    };
    let first = watch().await?.into_inner();
    let _second = watch().await?.into_inner();
    let third = watch().await.unwrap_err();
    let status = third.downcast_ref::<tonic::Status>().expect("a gRPC status");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("--max-streams-per-client"), "{}", status.message());
    assert_eq!(rejections(&collector.metrics().await?, "streams_per_client"), 1.0);
    still_healthy(&collector, "waterline.v1.CollectorService").await?;
    // Unary RPCs are not streams: still served.
    collector.collector_client().await?.list_nodes(pb::ListNodesRequest::default()).await?;
    // A closed stream gives its slot back.
    drop(first);
    let mut again =
        wait_until(Duration::from_secs(10), || async { Ok(watch().await?.into_inner()) }).await?;
    assert!(again.message().await?.is_some(), "the reopened stream sends its snapshot");

    // Session on the scorer: one per client address.
    // A collector without a stream limit for the scorer's own WatchNodes.
    let plain = self::collector(dir.path(), &[]).await?;
    let scorer = scorer(&plain, &["--max-streams-per-client", "1"]).await?;
    let session = || async {
        let (tx, rx) = tokio::sync::mpsc::channel::<pb::SessionRequest>(1);
        let stream = scorer.scorer_client().await?.session(ReceiverStream::new(rx)).await;
        Ok::<_, anyhow::Error>((tx, stream))
    };
    let (_open, first) = session().await?;
    first?;
    let (_tx, second) = session().await?;
    let status = second.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(rejections(&scorer.metrics().await?, "streams_per_client"), 1.0);
    still_healthy(&scorer, "waterline.v1.ScorerService").await?;
    score_ok(&scorer).await?;
    Ok(())
}
