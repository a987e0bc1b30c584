//! The rebalancing signal end to end (docs/operations.md#rebalancing): the real collector
//! (static nodes) publishes `waterline_node_predicted_utilisation`, the real Prometheus
//! scrapes it and runs `deploy/prometheus/rebalance.yml`, and `waterline:node_predicted_load`
//! is what the descheduler would read — the busiest resource per node, `instance` = node —
//! and disappears when a node's metric goes stale. The rules' 30 s intervals run at 1 s
//! here, and their hysteresis window ([2m45s], six 30 s evaluations) is scaled the same
//! way ([5500ms], six 1 s evaluations), so "six evaluations including this one" still holds.
//! promtool's unit tests (`deploy/prometheus/rebalance_test.yaml`) cover the timing.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use waterline_tests::procs::{Service, free_port, loopback, write_file};
use waterline_tests::prometheus::{Prometheus, PrometheusConfig, repo_path, wait_until};

const POLICY: &str = "metrics:\n\
  - {name: cpu_usage_avg_5m, resource: cpu, query: unused_cpu, period: 1s, weight: 1, filterAbove: 65}\n\
  - {name: mem_usage_avg_5m, resource: memory, query: unused_mem, period: 1s, weight: 1, filterAbove: 65}\n\
curve: {kind: waterLevel, target: 40}\n";

fn nodes(b_memory: &str) -> String {
    format!(
        "nodes:\n\
         - {{name: node-a, capacity: {{cpu: 8, memory: 8Gi}}, metrics: {{cpu_usage_avg_5m: 70, mem_usage_avg_5m: 30}}}}\n\
         - {{name: node-b, capacity: {{cpu: 8, memory: 8Gi}}, metrics: {{cpu_usage_avg_5m: 20, mem_usage_avg_5m: {b_memory}}}}}\n"
    )
}

fn scrape_job(name: &str, target: SocketAddr) -> String {
    format!("- job_name: {name}\n  static_configs:\n    - targets: ['{target}']\n")
}

/// `(instance, node, value)` of every sample of `query`.
async fn rows(prom: &Prometheus, query: &str) -> Result<Vec<(String, String, f64)>> {
    let mut out: Vec<(String, String, f64)> = prom
        .query(query)
        .await?
        .into_iter()
        .map(|(labels, value)| {
            let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
            (label("instance"), label("node"), value)
        })
        .collect();
    out.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_descheduler_series_follows_the_collector_and_vanishes_when_stale() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let policy = write_file(dir.path(), "policy.yaml", POLICY);
    let static_file = write_file(dir.path(), "nodes.yaml", &nodes("50"));
    let shipped = std::fs::read_to_string(repo_path("deploy/prometheus/rebalance.yml"))?;
    // Both range selectors (min_over_time and count_over_time) carry the window.
    let expr_lines = shipped.lines().filter(|l| !l.trim_start().starts_with('#'));
    let windows = expr_lines.map(|l| l.matches("[2m45s]").count()).sum::<usize>();
    ensure!(windows == 2, "rebalance.yml's hysteresis window changed: {windows} [2m45s]");
    let rules = write_file(dir.path(), "rebalance.yml", &shipped.replace("[2m45s]", "[5500ms]"));

    let admin = loopback(free_port());
    let args: Vec<String> = ["--static", &static_file, "--no-kube", "--policy", &policy]
        .iter()
        .chain(&["--predicted-load-interval", "1s"])
        .map(|s| s.to_string())
        .collect();
    let collector = Service::spawn_on("waterline-collector", loopback(free_port()), admin, &args)?;
    collector.wait_ready(Duration::from_secs(30)).await?;
    let prom = Prometheus::start(
        PrometheusConfig::new(scrape_job("waterline-collector", admin)).rule_file(rules),
    )
    .await?;

    // node-a: cpu 70 % > memory 30 %; node-b: memory 50 % > cpu 20 %.
    wait_until(Duration::from_secs(40), || async {
        let got = rows(&prom, "waterline:node_predicted_load").await?;
        let want = [("node-a", 0.70), ("node-b", 0.50)];
        ensure!(got.len() == 2, "{got:?}");
        for ((instance, node, value), (name, expected)) in got.iter().zip(want) {
            ensure!(instance == name && node == name, "{got:?}");
            ensure!((value - expected).abs() < 1e-9, "{got:?}");
        }
        let per_resource = rows(&prom, "waterline:node_resource_predicted_load").await?;
        ensure!(per_resource.len() == 4, "{per_resource:?}");
        Ok(())
    })
    .await
    .with_context(|| format!("collector log:\n{}", collector.log_text()))?;

    // node-b's memory sample is now 10 minutes old: stale. Its series leaves the collector's
    // /metrics, and the descheduler's series for node-b disappears (not 0), node-a stays.
    write_file(dir.path(), "nodes.yaml", &nodes("{value: 50, age: 10m}"));
    wait_until(Duration::from_secs(30), || async {
        let got = rows(&prom, "waterline:node_predicted_load").await?;
        ensure!(got.len() == 1 && got[0].1 == "node-a", "{got:?}");
        let b = rows(&prom, r#"waterline:node_resource_predicted_load{node="node-b"}"#).await?;
        ensure!(b.len() == 1, "node-b keeps only its fresh cpu: {b:?}");
        let raw = rows(&prom, r#"waterline_node_predicted_utilisation{node="node-b"}"#).await?;
        ensure!(raw.len() == 1, "the collector publishes node-b's cpu only: {raw:?}");
        Ok(())
    })
    .await
    .with_context(|| format!("collector log:\n{}", collector.log_text()))?;
    Ok(())
}
