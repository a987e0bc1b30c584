//! The collector and scorer binaries over loopback gRPC: the worked examples of docs/design.md,
//! Filter reasons, explain terms, bad input, policy reload, and a scorer that outlives a
//! collector restart.

use std::time::Duration;

use anyhow::Result;
use tonic::Code;
use waterline_api::v1 as pb;
use waterline_tests::procs::{Service, write_file};
use waterline_tests::prometheus::wait_until;

const SINGLE_METRIC_TARGET_20: &str = "metrics:
  - {name: cpu_usage_avg_5m, resource: cpu, query: q, period: 30s, weight: 1, filterAbove: 65}
curve: {kind: waterLevel, target: 20}
";

fn huge_nodes(levels: &[(&str, f64)]) -> String {
    let mut text = String::from("nodes:\n");
    for (name, level) in levels {
        text.push_str(&format!(
            "  - {{name: {name}, capacity: {{cpu: 1e9, memory: 1Ei}}, metrics: {{cpu_usage_avg_5m: {level}}}}}\n"
        ));
    }
    text
}

fn pod(uid: &str, cpu_millis: i64) -> pb::PodInfo {
    pb::PodInfo {
        namespace: "default".into(),
        name: format!("pod-{uid}"),
        uid: uid.into(),
        cpu_request_millis: cpu_millis,
        ..Default::default()
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

struct Pair {
    _dir: tempfile::TempDir,
    policy_path: String,
    static_path: String,
    collector: Service,
    scorer: Service,
}

async fn start_pair(policy: &str, nodes: &str, scorer_args: &[&str]) -> Result<Pair> {
    let dir = tempfile::tempdir()?;
    let policy_path = write_file(dir.path(), "policy.yaml", policy);
    let static_path = write_file(dir.path(), "nodes.yaml", nodes);
    let collector =
        Service::collector(&names(&["--static", &static_path, "--policy", &policy_path])).await?;
    let mut args = names(&["--policy", &policy_path]);
    args.extend(scorer_args.iter().map(|s| s.to_string()));
    let scorer = Service::scorer(collector.grpc, &args).await?;
    Ok(Pair { _dir: dir, policy_path, static_path, collector, scorer })
}

#[tokio::test]
async fn water_level_worked_example_through_grpc() -> Result<()> {
    let levels =
        [("n01", 1.0), ("n05", 5.0), ("n20", 20.0), ("n25", 25.0), ("n50", 50.0), ("n99", 99.0)];
    let pair = start_pair(SINGLE_METRIC_TARGET_20, &huge_nodes(&levels), &[]).await?;
    let mut client = pair.scorer.scorer_client().await?;
    let nodes: Vec<String> = levels.iter().map(|(n, _)| n.to_string()).collect();
    let response = client
        .score(pb::ScoreRequest {
            pod: Some(pod("p1", 500)),
            node_names: nodes.clone(),
            explain: false,
            ..Default::default()
        })
        .await?
        .into_inner();
    let got: Vec<(String, i64)> =
        response.scores.iter().map(|s| (s.node_name.clone(), i64::from(s.score))).collect();
    let want: Vec<(String, i64)> = nodes.into_iter().zip([24, 40, 100, 19, 13, 0]).collect();
    assert_eq!(got, want);
    assert_eq!(
        response.snapshot_age.unwrap_or_default().seconds,
        0,
        "connected: snapshot is current"
    );

    // scores_only: the same scores, bare and in request order, no names echoed.
    let bare = client
        .score(pb::ScoreRequest {
            pod: Some(pod("p1", 500)),
            node_names: want.iter().map(|(n, _)| n.clone()).collect(),
            scores_only: true,
            ..Default::default()
        })
        .await?
        .into_inner();
    assert!(bare.scores.is_empty());
    assert_eq!(bare.ordered_scores, want.iter().map(|(_, s)| *s as i32).collect::<Vec<_>>());
    assert!(bare.snapshot_age.is_some());
    Ok(())
}

#[tokio::test]
async fn filter_reasons_explain_terms_and_unknown_nodes() -> Result<()> {
    let nodes = "nodes:
  - {name: cool, capacity: {cpu: 8, memory: 32Gi}, metrics: {cpu_usage_avg_5m: 20}}
  - {name: hot, capacity: {cpu: 8, memory: 32Gi}, metrics: {cpu_usage_avg_5m: 60.675}}
";
    let pair = start_pair(SINGLE_METRIC_TARGET_20, nodes, &[]).await?;
    let mut client = pair.scorer.scorer_client().await?;
    let filtered = client
        .filter(pb::FilterRequest {
            policy: String::new(),
            pod: Some(pod("p1", 1000)),
            node_names: names(&["cool", "hot", "ghost"]),
            all_nodes: false,
        })
        .await?
        .into_inner();
    assert_eq!(filtered.feasible_nodes, names(&["cool", "ghost"]));
    assert_eq!(
        filtered.rejected.get("hot").map(String::as_str),
        Some("cpu_usage_avg_5m 71.3% > 65%")
    );

    // all_nodes: the scorer judges every node it knows and sends back the rejected only.
    let every = client
        .filter(pb::FilterRequest {
            policy: String::new(),
            pod: Some(pod("p1", 1000)),
            node_names: vec![],
            all_nodes: true,
        })
        .await?
        .into_inner();
    assert!(every.feasible_nodes.is_empty());
    assert_eq!(every.rejected, filtered.rejected);
    assert!(every.snapshot_age.is_some());
    let status = client
        .filter(pb::FilterRequest {
            policy: String::new(),
            pod: Some(pod("p1", 1000)),
            node_names: names(&["cool"]),
            all_nodes: true,
        })
        .await
        .unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (Code::InvalidArgument, "node_names must be empty when all_nodes is set")
    );

    let scored = client
        .score(pb::ScoreRequest {
            pod: Some(pod("p1", 1000)),
            node_names: names(&["cool", "ghost"]),
            explain: true,
            ..Default::default()
        })
        .await?
        .into_inner();
    let cool = &scored.scores[0].terms[0];
    assert_eq!(
        (cool.observed_percent, cool.incoming_percent, cool.ledger_percent),
        (20.0, 10.625, 0.0)
    );
    assert_eq!(cool.predicted_percent, 30.625);
    assert!(!cool.stale);
    // target 20, U = 30.625: 20 × 69.375 / 80 = 17.34
    assert_eq!(scored.scores[0].score, 17);
    let ghost = &scored.scores[1];
    assert_eq!(ghost.score, 50, "unknown node gets the stale score");
    assert!(ghost.terms[0].stale);
    assert!(pair.scorer.metric_value("waterline_unknown_nodes_total").await? >= 2.0);
    Ok(())
}

#[tokio::test]
async fn bad_requests_are_invalid_argument_with_a_reason() -> Result<()> {
    let pair = start_pair(SINGLE_METRIC_TARGET_20, &huge_nodes(&[("n1", 10.0)]), &[]).await?;
    let mut client = pair.scorer.scorer_client().await?;
    let cases: Vec<(pb::ScoreRequest, &str)> = vec![
        (
            pb::ScoreRequest {
                pod: Some(pod("p", 1)),
                node_names: vec![],
                explain: false,
                ..Default::default()
            },
            "node_names must not be empty",
        ),
        (
            pb::ScoreRequest {
                pod: None,
                node_names: names(&["n1"]),
                explain: false,
                ..Default::default()
            },
            "pod is required",
        ),
        (
            pb::ScoreRequest {
                pod: Some(pod("p", -5)),
                node_names: names(&["n1"]),
                explain: false,
                ..Default::default()
            },
            "pod.cpu_request_millis must not be negative (got -5)",
        ),
    ];
    for (request, reason) in cases {
        let status = client.score(request.clone()).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{reason}");
        assert_eq!(status.message(), reason);
        let filter = pb::FilterRequest {
            pod: request.pod,
            node_names: request.node_names,
            ..Default::default()
        };
        let status = client.filter(filter).await.unwrap_err();
        assert_eq!((status.code(), status.message()), (Code::InvalidArgument, reason));
    }
    let status = client
        .score(pb::ScoreRequest {
            policy: String::new(),
            pod: Some(pod("p", 1)),
            node_names: names(&["n1"]),
            explain: true,
            scores_only: true,
        })
        .await
        .unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (
            Code::InvalidArgument,
            "scores_only cannot be combined with explain (the terms need NodeScore)"
        )
    );
    let status = client
        .reserve(pb::ReserveRequest {
            pod: Some(pod("p", 1)),
            node_name: String::new(),
            provisional_ttl: None,
        })
        .await
        .unwrap_err();
    assert_eq!((status.code(), status.message()), (Code::InvalidArgument, "node_name is required"));
    let status = client
        .reserve(pb::ReserveRequest {
            pod: Some(pod("", 1)),
            node_name: "n1".into(),
            provisional_ttl: None,
        })
        .await
        .unwrap_err();
    assert_eq!((status.code(), status.message()), (Code::InvalidArgument, "pod.uid is required"));
    // unknown pod: a no-op, not an error
    client
        .unreserve(pb::UnreserveRequest { pod: Some(pod("never-seen", 1)), node_name: "n1".into() })
        .await?;
    Ok(())
}

#[tokio::test]
async fn health_and_readiness_are_served() -> Result<()> {
    let pair = start_pair(SINGLE_METRIC_TARGET_20, &huge_nodes(&[("n1", 10.0)]), &[]).await?;
    for (service, name) in [
        (&pair.scorer, "waterline.v1.ScorerService"),
        (&pair.collector, "waterline.v1.CollectorService"),
    ] {
        let mut health =
            tonic_health::pb::health_client::HealthClient::new(service.channel().await?);
        let status = health
            .check(tonic_health::pb::HealthCheckRequest { service: name.into() })
            .await?
            .into_inner()
            .status;
        assert_eq!(
            status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32,
            "{name}"
        );
        let live = reqwest::get(format!("http://{}/live", service.admin)).await?;
        assert!(live.status().is_success());
    }
    let metrics = pair.scorer.metrics().await?;
    assert!(metrics.contains("waterline_snapshot_age_seconds"), "{metrics}");
    assert!(metrics.contains("waterline_stale_nodes"));
    Ok(())
}

#[tokio::test]
async fn policy_reload_applies_good_edits_and_keeps_the_old_policy_on_bad_ones() -> Result<()> {
    let pair = start_pair(SINGLE_METRIC_TARGET_20, &huge_nodes(&[("n50", 50.0)]), &[]).await?;
    let mut client = pair.scorer.scorer_client().await?;
    let request = pb::ScoreRequest {
        pod: Some(pod("p", 1)),
        node_names: names(&["n50"]),
        explain: false,
        ..Default::default()
    };
    assert_eq!(client.score(request.clone()).await?.into_inner().scores[0].score, 13);

    std::fs::write(&pair.policy_path, SINGLE_METRIC_TARGET_20.replace("target: 20", "target: 50"))?;
    wait_until(Duration::from_secs(10), || {
        let (mut client, request) = (client.clone(), request.clone());
        async move {
            let score = client.score(request).await?.into_inner().scores[0].score;
            anyhow::ensure!(score == 100, "score {score}, reload not seen yet");
            Ok(())
        }
    })
    .await?;

    std::fs::write(&pair.policy_path, "curve: {kind: waterLevel, target: 500}\n")?;
    wait_until(Duration::from_secs(10), || async {
        let errors = pair.scorer.metric_value("waterline_policy_reload_errors_total").await?;
        anyhow::ensure!(errors >= 1.0, "no reload error yet");
        Ok(())
    })
    .await?;
    assert_eq!(client.score(request).await?.into_inner().scores[0].score, 100, "old policy stays");
    assert!(pair.scorer.log_text().contains("curve.target"), "the log names the field");
    Ok(())
}

#[tokio::test]
async fn scorer_serves_through_a_collector_restart_and_resyncs() -> Result<()> {
    let mut pair = start_pair(SINGLE_METRIC_TARGET_20, &huge_nodes(&[("n1", 20.0)]), &[]).await?;
    let mut client = pair.scorer.scorer_client().await?;
    let request = pb::ScoreRequest {
        pod: Some(pod("p", 1)),
        node_names: names(&["n1"]),
        explain: false,
        ..Default::default()
    };
    assert_eq!(client.score(request.clone()).await?.into_inner().scores[0].score, 100);

    pair.collector.stop();
    // Still answering from the last snapshot, which now ages.
    let aged = wait_until(Duration::from_secs(10), || {
        let (mut client, request) = (client.clone(), request.clone());
        async move {
            let response = client.score(request).await?.into_inner();
            let age = response.snapshot_age.unwrap_or_default();
            anyhow::ensure!(age.seconds >= 1, "age {age:?}");
            Ok(response)
        }
    })
    .await?;
    assert_eq!(aged.scores[0].score, 100);
    assert!(pair.scorer.metric_value("waterline_snapshot_age_seconds").await? > 0.0);

    // The collector comes back with new data; the scorer reconnects on its own.
    std::fs::write(&pair.static_path, huge_nodes(&[("n1", 5.0)]))?;
    pair.collector.restart()?;
    wait_until(Duration::from_secs(20), || {
        let (mut client, request) = (client.clone(), request.clone());
        async move {
            let score = client.score(request).await?.into_inner().scores[0].score;
            anyhow::ensure!(score == 40, "score {score}: not resynced yet");
            Ok(())
        }
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn static_file_edits_reach_the_scorer() -> Result<()> {
    let pair = start_pair(SINGLE_METRIC_TARGET_20, &huge_nodes(&[("n1", 20.0)]), &[]).await?;
    let client = pair.scorer.scorer_client().await?;
    std::fs::write(&pair.static_path, huge_nodes(&[("n1", 1.0), ("n2", 99.0)]))?;
    wait_until(Duration::from_secs(10), || {
        let mut client = client.clone();
        async move {
            let request = pb::ScoreRequest {
                pod: Some(pod("p", 1)),
                node_names: names(&["n1", "n2"]),
                explain: false,
                ..Default::default()
            };
            let scores: Vec<i64> = client
                .score(request)
                .await?
                .into_inner()
                .scores
                .iter()
                .map(|s| i64::from(s.score))
                .collect();
            anyhow::ensure!(scores == vec![24, 0], "{scores:?}");
            Ok(())
        }
    })
    .await?;
    Ok(())
}

/// Service names listed by server reflection; the two protocol versions have identical
/// shapes in different modules, hence the macro.
macro_rules! list_services {
    ($version:ident, $channel:expr) => {{
        use tonic_reflection::pb::$version::{
            ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
            server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        };
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut stream = ServerReflectionClient::new($channel)
            .server_reflection_info(tokio_stream::iter([request]))
            .await?
            .into_inner();
        match stream.message().await?.and_then(|m| m.message_response) {
            Some(MessageResponse::ListServicesResponse(list)) => {
                list.service.into_iter().map(|s| s.name).collect::<Vec<String>>()
            }
            other => anyhow::bail!("unexpected reflection answer {other:?}"),
        }
    }};
}

async fn reflected_services(service: &Service, v1alpha: bool) -> Result<Vec<String>> {
    let channel = service.channel().await?;
    let mut names =
        if v1alpha { list_services!(v1alpha, channel) } else { list_services!(v1, channel) };
    names.sort();
    Ok(names)
}

/// What `grpcurl list` shows: both protocol versions, since grpcurl builds before 1.8.7
/// speak only v1alpha.
#[tokio::test]
async fn reflection_lists_the_services_in_both_protocol_versions() -> Result<()> {
    let pair = start_pair(SINGLE_METRIC_TARGET_20, &huge_nodes(&[("n1", 10.0)]), &[]).await?;
    for (service, own) in [
        (&pair.scorer, "waterline.v1.ScorerService"),
        (&pair.collector, "waterline.v1.CollectorService"),
    ] {
        for v1alpha in [false, true] {
            let names = reflected_services(service, v1alpha).await?;
            assert!(names.contains(&own.to_string()), "{own} missing from {names:?}");
            assert!(names.contains(&"grpc.health.v1.Health".to_string()), "{names:?}");
        }
    }
    Ok(())
}

/// The collector counts what became of each provisional guess where the decision meets it:
/// a Reserve on the guessed node confirms, on another node moves, none before the TTL lets it
/// expire (the collector's housekeeping runs every second).
#[tokio::test]
async fn provisional_guesses_are_counted_confirmed_moved_and_expired() -> Result<()> {
    let pair = start_pair(SINGLE_METRIC_TARGET_20, &huge_nodes(&[("n1", 10.0), ("n2", 10.0)]), &[])
        .await?;
    let mut client = pair.scorer.scorer_client().await?;
    let reserve = |uid: &str, node: &str, ttl: Option<Duration>| pb::ReserveRequest {
        pod: Some(pod(uid, 100)),
        node_name: node.into(),
        provisional_ttl: ttl.map(|t| waterline_api::ProtoDuration::try_from(t).unwrap()),
    };
    let long = Some(Duration::from_secs(60));
    client.reserve(reserve("kept", "n1", long)).await?;
    client.reserve(reserve("moved", "n1", long)).await?;
    client.reserve(reserve("dropped", "n1", Some(Duration::from_secs(1)))).await?;
    // The decisions come after the guesses reached the collector (forwarded in order).
    let series = |outcome: &str| {
        format!(r#"waterline_collector_provisional_guesses_total{{outcome="{outcome}"}}"#)
    };
    client.reserve(reserve("kept", "n1", None)).await?;
    client.reserve(reserve("moved", "n2", None)).await?;
    let counted = wait_until(Duration::from_secs(10), || async {
        let counts = (
            pair.collector.metric_value(&series("confirmed")).await?,
            pair.collector.metric_value(&series("moved")).await?,
            pair.collector.metric_value(&series("expired")).await?,
        );
        anyhow::ensure!(counts == (1.0, 1.0, 1.0), "not yet: {counts:?}");
        Ok(counts)
    })
    .await?;
    assert_eq!(counted, (1.0, 1.0, 1.0));
    Ok(())
}
