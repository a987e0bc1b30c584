//! Shadow mode through the real collector binary: binds streamed by a fake API server's
//! pod watch are judged on the collector's state (nodes from a static file), shown by
//! `ShadowDecisions` and on `/metrics`; a collector without `--shadow` answers
//! FAILED_PRECONDITION. The real control plane is `tests/e2e/shadow_test.go`.

use std::time::Duration;

use anyhow::{Result, ensure};
use waterline_api::v1 as pb;
use waterline_tests::fake_kube::ShadowCollector;
use waterline_tests::procs::{Service, free_port, loopback};
use waterline_tests::prometheus::wait_until;

#[tokio::test]
async fn binds_by_another_scheduler_are_judged_and_shown() -> Result<()> {
    let shadow = ShadowCollector::start(loopback(free_port()), loopback(free_port())).await?;
    shadow.bind("web-0", "hot");
    shadow.bind("web-1", "cool");
    let mut client = shadow.collector.collector_client().await?;
    let answer = wait_until(Duration::from_secs(20), || {
        let mut client = client.clone();
        async move {
            let request = pb::ShadowDecisionsRequest { limit: 0, scheduler_name: String::new() };
            let answer = client.shadow_decisions(request).await?.into_inner();
            ensure!(answer.decisions.len() == 2, "{} decisions", answer.decisions.len());
            Ok(answer)
        }
    })
    .await?;
    assert_eq!((answer.judged, answer.dropped), (2, 0));
    // Newest first. The pod requests 1 cpu: estimate 850m, 10.625 % of 8 cores.
    let (cool, hot) = (&answer.decisions[0], &answer.decisions[1]);
    assert_eq!(
        (hot.pod_name.as_str(), hot.scheduler_name.as_str()),
        ("web-0", "default-scheduler")
    );
    // hot: U = 90 + 10.625 = 100.625 > 65 (rejected) and > 100 (score 0).
    assert_eq!(hot.rejected_reason, "cpu_usage_avg_5m 100.6% > 65%");
    assert_eq!(hot.rejected_by, ["cpu_usage_avg_5m"]);
    // cool: U = 30.625 → 60 × 30.625 / 40 + 40 = 85.9 → 86; warm: 40.625 → 39.6 → 40.
    assert_eq!((hot.chosen_score, hot.best_node.as_str(), hot.best_score), (0, "cool", 86));
    assert_eq!(hot.regret, 86);
    // web-1 on cool is judged with web-0 in the ledger, on hot: cool is still the best.
    assert_eq!((cool.chosen_node.as_str(), cool.chosen_score, cool.regret), ("cool", 86, 0));
    assert_eq!(cool.rejected_reason, "");
    assert_eq!((cool.candidate_nodes, cool.fitting_nodes, cool.feasible_nodes), (3, 3, 2));
    let only = pb::ShadowDecisionsRequest { limit: 1, scheduler_name: "default-scheduler".into() };
    assert_eq!(client.shadow_decisions(only).await?.into_inner().decisions.len(), 1);
    let other = pb::ShadowDecisionsRequest { limit: 0, scheduler_name: "volcano".into() };
    assert!(client.shadow_decisions(other).await?.into_inner().decisions.is_empty());

    let metrics = shadow.collector.metrics().await?;
    for line in [
        r#"waterline_shadow_rejected_binds_total{scheduler="default-scheduler",metric="cpu_usage_avg_5m"} 1"#,
        r#"waterline_shadow_binds_total{scheduler="default-scheduler",verdict="accepted"} 1"#,
        r#"waterline_shadow_regret_sum{scheduler="default-scheduler"} 86.0"#,
        "waterline_shadow_dropped_total 0",
    ] {
        ensure!(metrics.contains(line), "missing {line}");
    }

    let off = Service::collector(&["--synthetic-nodes".into(), "3".into()]).await?;
    let status = off
        .collector_client()
        .await?
        .shadow_decisions(pb::ShadowDecisionsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert!(status.message().contains("--shadow"), "{}", status.message());
    Ok(())
}
