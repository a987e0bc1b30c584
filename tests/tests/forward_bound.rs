//! `--forward-give-up` through the real binaries: a Reserve the collector's stream never
//! confirms leaves the scorer's own ledger at the bound, counted, and one the stream
//! confirmed stays (docs/operations.md#forwarded-placements-and-their-bound).

use std::time::Duration;

use anyhow::{Result, ensure};
use waterline_api::v1 as pb;
use waterline_tests::exporter::wall_now;
use waterline_tests::procs::{Service, write_file};
use waterline_tests::prometheus::wait_until;

/// One metric, so each Score term is that metric's.
const POLICY: &str = "metrics:
  - {name: cpu_usage_avg_5m, resource: cpu, query: q, period: 30s, weight: 1}
curve: {kind: waterLevel, target: 50}
";

/// Two 8-CPU nodes at 10 %.
const NODES: &str = "nodes:
  - {name: node-a, capacity: {cpu: 8, memory: 32Gi}, metrics: {cpu_usage_avg_5m: 10}}
  - {name: node-b, capacity: {cpu: 8, memory: 32Gi}, metrics: {cpu_usage_avg_5m: 10}}
";

/// The bound under test, and how often the scorer looks (an eighth of it:
/// `forward::give_up_period`, 3 s / 8 = 375 ms).
const GIVE_UP: Duration = Duration::from_secs(3);
const PERIOD: Duration = Duration::from_millis(375);
/// What the test allows on top, for its own polling (every 100 ms) and a loaded machine.
const SLACK: Duration = Duration::from_secs(2);

/// A 1,000 m pod: estimated 1,000 × 0.85 = 850 m, which on an 8,000 m node is
/// 850 / 8,000 = 10.625 % of ledger load.
const LEDGER_PERCENT: f64 = 10.625;

fn pod(uid: &str) -> pb::PodInfo {
    pb::PodInfo {
        namespace: "default".into(),
        name: uid.into(),
        uid: uid.into(),
        cpu_request_millis: 1000,
        ..Default::default()
    }
}

async fn reserve(scorer: &Service, uid: &str, node: &str) -> Result<()> {
    let mut client = scorer.scorer_client().await?;
    client
        .reserve(pb::ReserveRequest {
            pod: Some(pod(uid)),
            node_name: node.into(),
            provisional_ttl: None,
        })
        .await?;
    Ok(())
}

/// The scorer's ledger load on `node`, from its explained Score.
async fn ledger_percent(scorer: &Service, node: &str) -> Result<f64> {
    let mut client = scorer.scorer_client().await?;
    let scored = client
        .score(pb::ScoreRequest {
            pod: Some(pb::PodInfo { uid: "probe".into(), ..Default::default() }),
            node_names: vec![node.into()],
            explain: true,
            ..Default::default()
        })
        .await?
        .into_inner();
    Ok(scored.scores[0].terms[0].ledger_percent)
}

async fn outcome(scorer: &Service, outcome: &str) -> Result<f64> {
    scorer
        .metric_value(&format!(
            "waterline_forward_outcomes_total{{op=\"reserve\",outcome=\"{outcome}\"}}"
        ))
        .await
}

#[tokio::test]
async fn an_unconfirmed_entry_leaves_at_the_bound_and_a_confirmed_one_stays() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let policy = write_file(dir.path(), "policy.yaml", POLICY);
    let nodes = write_file(dir.path(), "nodes.yaml", NODES);
    let mut collector =
        Service::collector(&["--static".into(), nodes, "--policy".into(), policy.clone()]).await?;
    let give_up = format!("{}s", GIVE_UP.as_secs());
    let scorer = Service::scorer(
        collector.grpc,
        &["--policy".into(), policy, "--forward-give-up".into(), give_up],
    )
    .await?;

    // With the collector up: forwarded, then confirmed by its stream.
    reserve(&scorer, "confirmed", "node-a").await?;
    wait_until(Duration::from_secs(20), || async {
        let confirmed = outcome(&scorer, "confirmed").await?;
        ensure!(confirmed == 1.0, "confirmed {confirmed}");
        Ok(())
    })
    .await?;
    assert_eq!(outcome(&scorer, "forwarded").await?, 1.0);
    assert_eq!(scorer.metric_value("waterline_forward_unconfirmed").await?, 0.0);

    // The collector gone, a Reserve can be neither forwarded nor confirmed. The scorer
    // applies it to its own ledger at once all the same.
    collector.stop();
    // The wall clock: the scorer is another process, whose bound runs on real time.
    let before = wall_now();
    reserve(&scorer, "orphan", "node-b").await?;
    assert_eq!(ledger_percent(&scorer, "node-b").await?, LEDGER_PERCENT);
    assert_eq!(scorer.metric_value("waterline_forward_unconfirmed").await?, 1.0);
    assert_eq!(outcome(&scorer, "expired").await?, 0.0);

    // It leaves between the bound (3 s) and the bound + one period + the slack
    // (3 s + 0.375 s + 2 s = 5.375 s) after the Reserve.
    wait_until(GIVE_UP + PERIOD + SLACK, || async {
        let percent = ledger_percent(&scorer, "node-b").await?;
        ensure!(percent == 0.0, "node-b still has {percent} % of ledger load");
        Ok(())
    })
    .await?;
    let left_after = before.elapsed();
    assert!(left_after >= GIVE_UP, "removed before the bound: {left_after:?}");
    assert!(left_after <= GIVE_UP + PERIOD + SLACK, "removed after {left_after:?}");
    // Counted: no collector took it, its forward ran out of time with the bound.
    assert_eq!(outcome(&scorer, "expired").await?, 1.0);
    assert_eq!(outcome(&scorer, "forwarded").await?, 1.0, "only the first was forwarded");
    assert_eq!(scorer.metric_value("waterline_forward_expired_total").await?, 1.0);
    assert_eq!(scorer.metric_value("waterline_forward_unconfirmed").await?, 0.0);

    // The confirmed entry is the stream's: past the bound (and with no collector to resync
    // from) it still counts on node-a.
    assert!(before.elapsed() >= GIVE_UP);
    assert_eq!(ledger_percent(&scorer, "node-a").await?, LEDGER_PERCENT);
    assert_eq!(outcome(&scorer, "confirmed").await?, 1.0);
    Ok(())
}
