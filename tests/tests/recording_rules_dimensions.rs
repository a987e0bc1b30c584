//! The extra dimensions of `deploy/prometheus/rules.yml` (disk space, disk IO, network, the
//! 15 m cpu mean) on a real Prometheus scraping the fake node-exporter every second, whose
//! pages carry decoys the rules must leave out (tmpfs, overlay and non-root mounts; loop and
//! device-mapper disks; loopback and veth interfaces).

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use waterline_tests::exporter::{
    FakeExporter, FakeNode, NodeLoad, openmetrics_history_with_dimensions,
};
use waterline_tests::prometheus::{Prometheus, PrometheusConfig, Sample, repo_path, wait_until};

const DISK: &str = "waterline:node_filesystem_usage:root";
const IO: &str = "waterline:node_disk_io_busy:avg5m";
const NET: &str = "waterline:node_network_bytes:rate5m";
const CPU_15M: &str = "waterline:node_cpu_usage:avg15m";

fn value_for(rows: &[Sample], node: &FakeNode) -> Result<f64> {
    let matching: Vec<f64> = rows
        .iter()
        .filter(|(labels, _)| {
            labels.get("instance").map(String::as_str) == Some(node.instance().as_str())
                && labels.get("node").map(String::as_str) == node.node_label()
        })
        .map(|(_, v)| *v)
        .collect();
    match matching.as_slice() {
        [v] => Ok(*v),
        [] => bail!("no series for {} in {rows:?}", node.selector()),
        _ => bail!("several series for {} in {rows:?}", node.selector()),
    }
}

/// `got` within `tolerance` (absolute) of `want`.
fn near(what: &str, got: f64, want: f64, tolerance: f64) -> Result<()> {
    ensure!((got - want).abs() <= tolerance, "{what}: got {got}, want {want} ± {tolerance}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_io_and_network_rules_read_the_real_devices_only() -> Result<()> {
    let a = FakeNode::new("node-a")
        .with_cpu_busy(0.40)
        .with_disk_used(0.30)
        .with_disk_io_busy(0.25)
        .with_network(1e6, 2e6);
    let b = FakeNode::new("node-b")
        .with_instance("10.0.0.2:9100")
        .with_disk_used(0.80)
        .with_disk_io_busy(0.50);
    // 20 minutes of history at the same rates, so the 5 m and 15 m rates read full windows
    // at once (live scrapes alone would cover a few seconds of them).
    let now = std::time::SystemTime::now();
    let nodes = [a.clone(), b.clone()];
    let history = openmetrics_history_with_dimensions(
        &nodes,
        now - Duration::from_secs(20 * 60),
        now,
        Duration::from_secs(15),
        |n, _| NodeLoad { cpu_busy: n.cpu_busy, memory_used: n.memory_used },
    )?;
    let exporter = FakeExporter::start(nodes.to_vec()).await?;
    let rules = repo_path("deploy/prometheus/rules.yml");
    let prom = Prometheus::start(
        PrometheusConfig::new(exporter.scrape_configs()).rule_file(rules).backfill(history),
    )
    .await?;

    // Rates need two scrapes; rules evaluate every second in the test set-up.
    wait_until(Duration::from_secs(20), || async {
        let disk = prom.query(DISK).await?;
        let io = prom.query(IO).await?;
        let net = prom.query(NET).await?;
        let cpu = prom.query(CPU_15M).await?;
        for rows in [&disk, &io, &net, &cpu] {
            ensure!(rows.len() == 2, "one series per node, got {rows:?}");
        }
        // Root ext4 only: 30 % and 80 % used (tmpfs 50 %, overlay 99 %, /data 95 % ignored).
        near("disk a", value_for(&disk, &a)?, 30.0, 0.01)?;
        near("disk b", value_for(&disk, &b)?, 80.0, 0.01)?;
        // sda only (loop0 and dm-0 are busy all the time).
        near("io a", value_for(&io, &a)?, 25.0, 2.0)?;
        near("io b", value_for(&io, &b)?, 50.0, 2.0)?;
        // eth0 received + transmitted = 3 MB/s; lo and the veth carry 5 GB/s each way.
        near("net a", value_for(&net, &a)?, 3e6, 0.05 * 3e6)?;
        near("net b", value_for(&net, &b)?, 0.0, 1.0)?;
        near("cpu 15m a", value_for(&cpu, &a)?, 40.0, 2.0)?;
        near("cpu 15m b", value_for(&cpu, &b)?, 0.0, 2.0)
    })
    .await
    .with_context(|| format!("log:\n{}", prom.log_tail(2000)))?;

    // The rate follows the counter: node-b starts sending 10 MB/s, and its 5-minute average
    // climbs (10 s of it in a 5 m window is about 0.33 MB/s), far from the instant rate.
    exporter.set_network("node-b", 0.0, 10e6)?;
    let got = wait_until(Duration::from_secs(30), || async {
        let got = value_for(&prom.query(NET).await?, &b)?;
        ensure!(got > 2e5, "node-b network {got}");
        Ok(got)
    })
    .await?;
    ensure!(got < 5e6, "a 5 m rate jumped to {got} within seconds");
    Ok(())
}
