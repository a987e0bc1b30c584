//! A departure on `/metrics`, end to end (docs/design.md#departures): the real collector
//! (its metrics from a static file, its pods from the fake Kubernetes API server), scraped by
//! a real Prometheus. Deleting a bound pod drops `waterline_node_predicted_utilisation` for its
//! node at once — the pod's estimate leaves the prediction before any metric could show it —
//! and the value comes back to the metric's own once the credit window has passed (the
//! absorb window less the averaging window: when the metric starts to show the departure).
//!
//! The numbers: node-a at 70 % cpu with 8 cores; the pod requests 1 cpu, estimated 1000 m ×
//! 0.85 = 850 m = 10.625 % of 8000 m, placed days ago (absorbed: the sample includes it).
//! Deleted: 70 − 10.625 = 59.375 %, i.e. 0.59375, for the credit window (here 8 s absorb −
//! 2 s averaging window = 6 s, set in the policy so the test need not wait 2 minutes), then
//! 0.70 again (the static sample does not move: in a real cluster it would have begun to fall
//! by then, and from there the metric itself shows the departure).

use std::time::Duration;

use tokio::time::Instant;

use anyhow::{Result, ensure};
use waterline_tests::fake_kube::{FakeKube, node, pod};
use waterline_tests::procs::{Service, free_port, loopback, write_file};
use waterline_tests::prometheus::{Prometheus, PrometheusConfig, wait_until};

const ABSORB: Duration = Duration::from_secs(8);
/// `absorbWindow` 8 s − `window` 2 s.
const CREDIT: Duration = Duration::from_secs(6);

const POLICY: &str = "metrics:\n\
  - {name: cpu_usage_avg_5m, resource: cpu, query: unused_cpu, period: 1s, weight: 1, window: 2s, absorbWindow: 8s, departures: credit}\n\
curve: {kind: waterLevel, target: 40}\n";

const NODES: &str = "nodes:\n\
  - {name: node-a, capacity: {cpu: 8, memory: 8Gi}, metrics: {cpu_usage_avg_5m: 70}}\n\
  - {name: node-b, capacity: {cpu: 8, memory: 8Gi}, metrics: {cpu_usage_avg_5m: 20}}\n";

const SERIES: &str = r#"waterline_node_predicted_utilisation{metric="cpu_usage_avg_5m"}"#;

/// node → the value Prometheus holds now.
async fn predicted(prom: &Prometheus) -> Result<Vec<(String, f64)>> {
    let mut rows: Vec<(String, f64)> = prom
        .query(SERIES)
        .await?
        .into_iter()
        .map(|(labels, value)| (labels.get("node").cloned().unwrap_or_default(), value))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(rows)
}

fn near(got: &[(String, f64)], node: &str, want: f64) -> bool {
    got.iter().any(|(n, v)| n == node && (v - want).abs() < 1e-9)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_bound_pod_drops_the_published_prediction_at_once() -> Result<()> {
    let kube = FakeKube::start(
        vec![pod("web", "node-a", "2026-11-29T10:00:00Z", "default-scheduler")],
        vec![node("node-a", "8", "10.0.0.1"), node("node-b", "8", "10.0.0.2")],
    )
    .await?;
    let dir = tempfile::tempdir()?;
    let admin = loopback(free_port());
    let args: Vec<String> = [
        "--static",
        &write_file(dir.path(), "nodes.yaml", NODES),
        "--policy",
        &write_file(dir.path(), "policy.yaml", POLICY),
        "--kube",
        "--kubeconfig",
        &kube.kubeconfig(dir.path()),
        "--predicted-load-interval",
        "1s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let collector = Service::spawn_on("waterline-collector", loopback(free_port()), admin, &args)?;
    collector.wait_ready(Duration::from_secs(30)).await?;
    wait_until(Duration::from_secs(20), || async {
        ensure!(kube.pod_watch_open(), "no pod watch yet");
        Ok(())
    })
    .await?;
    let scrape =
        format!("- job_name: waterline-collector\n  static_configs:\n    - targets: ['{admin}']\n");
    let prom = Prometheus::start(PrometheusConfig::new(scrape)).await?;

    // Before: the pod is absorbed, node-a reads its metric, 0.70.
    wait_until(Duration::from_secs(30), || async {
        let got = predicted(&prom).await?;
        ensure!(near(&got, "node-a", 0.70) && near(&got, "node-b", 0.20), "{got:?}");
        Ok(())
    })
    .await?;

    ensure!(kube.delete_pod("web"), "the fake has the pod");
    let deleted = Instant::now();
    // At once: the next refresh (1 s) and scrape (1 s) show 0.70 − 0.10625; node-b is
    // untouched. Well inside the 6 s credit, or it is not "at once".
    wait_until(CREDIT, || async {
        let got = predicted(&prom).await?;
        ensure!(near(&got, "node-a", 0.59375) && near(&got, "node-b", 0.20), "{got:?}");
        Ok(())
    })
    .await?;
    let dropped_after = deleted.elapsed();
    ensure!(dropped_after < CREDIT / 2, "dropped only after {dropped_after:?}");

    // Back to the metric's value once the credit window has passed, and not before.
    wait_until(CREDIT + Duration::from_secs(10), || async {
        let got = predicted(&prom).await?;
        ensure!(near(&got, "node-a", 0.70), "{got:?}");
        Ok(())
    })
    .await?;
    let back_after = deleted.elapsed();
    ensure!(back_after >= CREDIT, "the credit ended after {back_after:?}, before {CREDIT:?}");
    eprintln!("dropped after {dropped_after:?}, back after {back_after:?} (credit {CREDIT:?})");

    // The collector prunes the departure after the longest absorb window (8 s here), not
    // before: until then it still cancels nothing and credits nothing, but it is listed.
    let client = collector.collector_client().await?;
    wait_until(ABSORB + Duration::from_secs(5), || {
        let mut client = client.clone();
        async move {
            let listed = client.list_nodes(waterline_api::v1::ListNodesRequest::default()).await?;
            let remaining: Vec<_> =
                listed.into_inner().ledger.iter().map(|e| e.pod_uid.clone()).collect();
            ensure!(remaining.is_empty(), "the departure is pruned once absorbed: {remaining:?}");
            Ok(())
        }
    })
    .await?;
    let pruned_after = deleted.elapsed();
    ensure!(pruned_after >= ABSORB, "pruned after {pruned_after:?}, before {ABSORB:?}");
    Ok(())
}
