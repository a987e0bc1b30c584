//! The recording rules of `deploy/prometheus/` on a real Prometheus (Debian's 2.42, see
//! `scripts/deps/prometheus.sh`) scraping a fake node-exporter every second, with rule groups
//! evaluated every second.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, ensure};
use waterline_tests::exporter::{
    FakeExporter, FakeNode, openmetrics_history, two_nodes_with_a_spike_3h_ago, wall_now,
};
use waterline_tests::prometheus::{
    PROMTOOL_BIN, Prometheus, PrometheusConfig, repo_path, value_for, wait_until,
};

use waterline_tests::prometheus::records::{ALL, CPU_1D, CPU_1H, CPU_5M, MEM_1D, MEM_1H, MEM_5M};

/// Tolerance in percentage points.
const TOL: f64 = 2.0;

fn rules_yml() -> std::path::PathBuf {
    repo_path("deploy/prometheus/rules.yml")
}

async fn value(prom: &Prometheus, metric: &str, node: &FakeNode) -> Result<f64> {
    let rows = prom.query(metric).await?;
    value_for(&rows, node).with_context(|| metric.to_string())
}

fn assert_near(metric: &str, node: &FakeNode, got: f64, want: f64) -> Result<()> {
    ensure!(
        (got - want).abs() <= TOL,
        "{metric}{}: got {got:.3}, want {want} ± {TOL}",
        node.selector()
    );
    Ok(())
}

/// Labels of every series of `metric`, to check that nothing but the expected series exists.
async fn series_labels(prom: &Prometheus, metric: &str) -> Result<Vec<BTreeMap<String, String>>> {
    Ok(prom.query(metric).await?.into_iter().map(|(l, _)| l).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_5m_values_and_both_label_shapes() -> Result<()> {
    let by_node = FakeNode::new("node-a").with_cores(4).with_cpu_busy(0.30).with_memory_used(0.40);
    let by_instance = FakeNode::new("node-b")
        .with_instance("10.0.0.2:9100")
        .with_cores(2)
        .with_memory_bytes(8 << 30)
        .with_cpu_busy(0.60)
        .with_memory_used(0.75);
    let exporter = FakeExporter::start(vec![by_node.clone(), by_instance.clone()]).await?;
    let prom =
        Prometheus::start(PrometheusConfig::new(exporter.scrape_configs()).rule_file(rules_yml()))
            .await?;

    // The 5 m rules need two scrapes; at 1 s scrapes and 1 s evaluations that is seconds.
    let started = wall_now();
    wait_until(Duration::from_secs(15), || async {
        assert_near(CPU_5M, &by_node, value(&prom, CPU_5M, &by_node).await?, 30.0)?;
        assert_near(MEM_5M, &by_node, value(&prom, MEM_5M, &by_node).await?, 40.0)?;
        assert_near(CPU_5M, &by_instance, value(&prom, CPU_5M, &by_instance).await?, 60.0)?;
        assert_near(MEM_5M, &by_instance, value(&prom, MEM_5M, &by_instance).await?, 75.0)
    })
    .await
    .with_context(|| format!("log:\n{}", prom.log_tail(2000)))?;
    eprintln!("5m series right after {:?}", started.elapsed());

    // Exactly one series per node and exactly the labels of its shape: `node` + `instance`
    // for node-a, `instance` = IP:port and no `node` for node-b; nothing else survives the
    // `by (instance, node)`.
    for metric in [CPU_5M, MEM_5M] {
        let mut got = series_labels(&prom, metric).await?;
        got.sort();
        let mut want = vec![
            BTreeMap::from([
                ("__name__".to_string(), metric.to_string()),
                ("instance".to_string(), "node-a:9100".to_string()),
                ("node".to_string(), "node-a".to_string()),
            ]),
            BTreeMap::from([
                ("__name__".to_string(), metric.to_string()),
                ("instance".to_string(), "10.0.0.2:9100".to_string()),
            ]),
        ];
        want.sort();
        assert_eq!(got, want, "{metric}");
    }

    // Counters carry on when the load changes: the 5 m average moves to the time-weighted
    // mean of the two levels, not straight to the new one.
    exporter.set_cpu_busy("node-a", 0.90)?;
    exporter.set_memory_used("node-a", 0.80)?;
    let (cpu, mem) = wait_until(Duration::from_secs(20), || async {
        let cpu = value(&prom, CPU_5M, &by_node).await?;
        let mem = value(&prom, MEM_5M, &by_node).await?;
        ensure!(cpu > 50.0 && mem > 55.0, "cpu {cpu:.2}, mem {mem:.2}");
        Ok((cpu, mem))
    })
    .await?;
    ensure!(cpu < 88.0, "5m cpu jumped to {cpu:.2}: not a 5-minute average");
    ensure!(mem < 78.0, "5m memory jumped to {mem:.2}: not a 5-minute average");
    // node-b is untouched.
    assert_near(CPU_5M, &by_instance, value(&prom, CPU_5M, &by_instance).await?, 60.0)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfilled_spike_shows_in_the_1d_max_only() -> Result<()> {
    let now = SystemTime::now();
    // node-a: 20 % cpu / 30 % memory all day, 90 % / 85 % for half an hour three hours ago;
    // node-b, identified by IP:port: flat 50 % / 60 %.
    let (nodes, load) = two_nodes_with_a_spike_3h_ago(now);
    let (spiky, flat) = (nodes[0].clone(), nodes[1].clone());
    let history = openmetrics_history(
        &nodes,
        now - Duration::from_secs(24 * 3600),
        now,
        Duration::from_secs(60),
        load,
    )?;

    let exporter = FakeExporter::start(nodes).await?;
    let t0 = wall_now();
    let prom = Prometheus::start(
        PrometheusConfig::new(exporter.scrape_configs()).rule_file(rules_yml()).backfill(history),
    )
    .await?;
    eprintln!("backfill + start: {:?}", t0.elapsed());

    // All six series for both nodes within seconds (the history covers the 1 h and 1 d
    // subqueries' aligned steps), with the right values.
    let want: [(&str, f64, f64); 6] = [
        (CPU_5M, 20.0, 50.0),
        (CPU_1H, 20.0, 50.0),
        (CPU_1D, 90.0, 50.0),
        (MEM_5M, 30.0, 60.0),
        (MEM_1H, 30.0, 60.0),
        (MEM_1D, 85.0, 60.0),
    ];
    wait_until(Duration::from_secs(15), || async {
        for (metric, a, b) in want {
            assert_near(metric, &spiky, value(&prom, metric, &spiky).await?, a)?;
            assert_near(metric, &flat, value(&prom, metric, &flat).await?, b)?;
        }
        Ok(())
    })
    .await
    .with_context(|| format!("log:\n{}", prom.log_tail(2000)))?;
    eprintln!("all six series right after {:?}", t0.elapsed());

    // Each metric has exactly the two nodes' series.
    for metric in ALL {
        let n = series_labels(&prom, metric).await?.len();
        ensure!(n == 2, "{metric}: {n} series, want 2");
    }

    // The live scrapes continue the history: a few seconds later the values still hold (a
    // history/live seam counted twice or lost would move the 5 m average).
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (metric, a, b) in want {
        assert_near(metric, &spiky, value(&prom, metric, &spiky).await?, a)?;
        assert_near(metric, &flat, value(&prom, metric, &flat).await?, b)?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_come_back_after_prometheus_is_killed() -> Result<()> {
    let node = FakeNode::new("node-r").with_cpu_busy(0.45).with_memory_used(0.25);
    let exporter = FakeExporter::start(vec![node.clone()]).await?;
    let mut prom =
        Prometheus::start(PrometheusConfig::new(exporter.scrape_configs()).rule_file(rules_yml()))
            .await?;
    wait_until(Duration::from_secs(15), || async {
        assert_near(CPU_5M, &node, value(&prom, CPU_5M, &node).await?, 45.0)
    })
    .await?;
    // At least 15 s of the 45 % before the kill, so the 5 m rate after the restart stays
    // clearly below 65 % however long the restart takes (under ~4 min).
    let scraped = "max without(cpu) (count_over_time(node_cpu_seconds_total{mode=\"idle\"}[5m]))";
    wait_until(Duration::from_secs(60), || async {
        let samples = value(&prom, scraped, &node).await?;
        ensure!(samples >= 15.0, "{samples} samples before the kill, want 15");
        Ok(())
    })
    .await?;
    let url = prom.url();

    prom.stop()?;
    ensure!(!prom.is_running());
    ensure!(prom.query("up").await.is_err(), "a killed Prometheus still answers");

    exporter.set_cpu_busy("node-r", 0.65)?;
    prom.restart().await?;
    ensure!(prom.url() == url, "restart moved to another port");
    // Data written before the kill survived (WAL replay): the raw counter still reaches back
    // to before the restart.
    wait_until(Duration::from_secs(15), || async {
        let got = value(&prom, CPU_5M, &node).await?;
        ensure!(got > 46.0 && got < 64.0, "5m cpu {got:.2}, want between 45 and 65");
        assert_near(MEM_5M, &node, value(&prom, MEM_5M, &node).await?, 25.0)
    })
    .await
    .with_context(|| format!("log:\n{}", prom.log_tail(2000)))?;
    Ok(())
}

#[test]
fn rule_files_are_valid_and_the_same() -> Result<()> {
    let rules = std::fs::read_to_string(rules_yml())?;
    let object = std::fs::read_to_string(repo_path("deploy/prometheus/prometheus-rule.yaml"))?;

    // Exactly the six names, the four extra dimensions
    // (tests/tests/recording_rules_dimensions.rs) and the two per-pod series, each recorded
    // once.
    let mut records: Vec<&str> =
        rules.lines().filter_map(|l| l.trim().strip_prefix("- record: ")).collect();
    records.sort();
    let mut want = ALL.to_vec();
    want.extend([
        "waterline:node_filesystem_usage:root",
        "waterline:node_disk_io_busy:avg5m",
        "waterline:node_network_bytes:rate5m",
        "waterline:node_cpu_usage:avg15m",
        // The per-pod usage the learned estimate reads (tests/tests/learned.rs).
        waterline_core::policy::POD_CPU_SERIES,
        waterline_core::policy::POD_MEMORY_SERIES,
    ]);
    want.sort();
    assert_eq!(records, want);

    // The PrometheusRule's spec is rules.yml's `groups:` indented by two.
    ensure!(object.contains("apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\n"));
    let spec = object.split_once("\nspec:\n").context("prometheus-rule.yaml has no spec")?.1;
    let dedented: String =
        spec.lines().map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l))).collect();
    let groups = &rules[rules.find("groups:").context("rules.yml has no groups")?..];
    assert_eq!(
        dedented.trim_end(),
        groups.trim_end(),
        "prometheus-rule.yaml differs from rules.yml"
    );

    // promtool accepts both (the object's spec written out as a rule file).
    let dir = tempfile::tempdir()?;
    let spec_file = dir.path().join("spec.yml");
    std::fs::write(&spec_file, &dedented)?;
    for file in [rules_yml(), spec_file] {
        let out = std::process::Command::new(PROMTOOL_BIN)
            .args(["check", "rules"])
            .arg(&file)
            .output()
            .with_context(|| format!("{PROMTOOL_BIN} (run scripts/deps/prometheus.sh)"))?;
        ensure!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("12 rules found"),
            "promtool check rules {}: {}{}",
            file.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The `relabel_configs` that deploy/prometheus/README.md tells plain-Prometheus users to add,
/// taken from the README itself, give the series a `node` label from the discovery's
/// `__meta_kubernetes_*_node_name` (faked here as static target labels, which relabelling
/// sees the same way), and the rules keep it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_relabelling_adds_the_node_label() -> Result<()> {
    let readme = std::fs::read_to_string(repo_path("deploy/prometheus/README.md"))?;
    let block = readme
        .split("```yaml\n")
        .skip(1)
        .filter_map(|b| b.split_once("```").map(|(yaml, _)| yaml))
        .find(|yaml| yaml.starts_with("relabel_configs:"))
        .context("README has no ```yaml block starting with relabel_configs:")?;
    ensure!(block.contains("__meta_kubernetes_pod_node_name"));

    // Served without a node label, as a plain node-exporter.
    let node = FakeNode::new("worker-7")
        .with_instance("10.0.0.7:9100")
        .with_cpu_busy(0.35)
        .with_memory_used(0.55);
    let exporter = FakeExporter::start(vec![node.clone()]).await?;
    let mut scrape = format!(
        "- job_name: discovered\n  static_configs:\n    - targets: ['{}']\n      labels:\n        __metrics_path__: /nodes/worker-7/metrics\n        instance: '10.0.0.7:9100'\n        __meta_kubernetes_pod_node_name: worker-7\n",
        exporter.addr()
    );
    for line in block.lines() {
        scrape.push_str("  ");
        scrape.push_str(line);
        scrape.push('\n');
    }
    let prom = Prometheus::start(PrometheusConfig::new(scrape).rule_file(rules_yml())).await?;

    let relabelled = FakeNode::new("worker-7").with_instance("10.0.0.7:9100");
    wait_until(Duration::from_secs(15), || async {
        let rows = prom.query(CPU_5M).await?;
        ensure!(rows.len() == 1, "{rows:?}");
        let (labels, v) = &rows[0];
        ensure!(
            labels.get("node").map(String::as_str) == Some("worker-7")
                && labels.get("instance").map(String::as_str) == Some("10.0.0.7:9100"),
            "labels {labels:?}"
        );
        assert_near(CPU_5M, &relabelled, *v, 35.0)?;
        let mem = prom.query(&format!(r#"{MEM_5M}{{node="worker-7"}}"#)).await?;
        ensure!(mem.len() == 1, "{mem:?}");
        assert_near(MEM_5M, &relabelled, mem[0].1, 55.0)
    })
    .await
    .with_context(|| format!("log:\n{}", prom.log_tail(2000)))?;
    Ok(())
}
