//! `prometheus-refresh`: a real Prometheus (`/usr/bin/prometheus`, started with the
//! integration tests' harness) holding the default policy's six recorded series for N fake
//! nodes (backfilled from OpenMetrics with `promtool`), and a collector with `--prometheus-url` reading it. Reports the first full
//! refresh (wall time until every metric covers every node, PromQL requests sent, collector
//! CPU time and RSS) and the steady state (requests and CPU over a window).

use std::fmt::Write as _;
use std::fs;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Result, bail};
use serde_json::{Value, json};
use tokio::time::Instant;
use waterline_core::Policy;
use waterline_tests::procs::Service;
use waterline_tests::prometheus::{Prometheus, PrometheusConfig};

use crate::args::PrometheusArgs;
use crate::procs::{ProcStat, launch, log_dir};
use crate::targets::node_name;

/// The six recorded series of the default policy for `nodes` nodes, one sample every 30 s
/// over the last 6 minutes (so an instant query at "now" sees them within the 5-minute
/// lookback). Values are percent, as the recording rules give them.
pub fn openmetrics(policy: &Policy, nodes: usize, now_secs: i64) -> String {
    let mut text = String::with_capacity(nodes * policy.metrics.len() * 12 * 60);
    for (m, metric) in policy.metrics.iter().enumerate() {
        let name = &metric.query;
        let _ = writeln!(text, "# TYPE {name} gauge");
        for i in 0..nodes {
            let base = ((i * 37 + m * 11) % 80) as f64 + 5.0;
            for step in 0..12 {
                let at = now_secs - 360 + step * 30;
                let _ = writeln!(text, "{name}{{node=\"{}\"}} {base:.1} {at}", node_name(i));
            }
        }
    }
    text.push_str("# EOF\n");
    text
}

/// A Prometheus that only serves the backfilled series: no scrape targets, no rules.
async fn start_prometheus(openmetrics: String) -> Result<Prometheus> {
    Prometheus::start(PrometheusConfig {
        scrape_interval: Duration::from_secs(15),
        evaluation_interval: Duration::from_secs(15),
        rule_interval: None,
        backfill: vec![openmetrics],
        ready_timeout: Duration::from_secs(60),
        ..PrometheusConfig::default()
    })
    .await
}

/// The collector's per-metric coverage and the total PromQL requests, from `/metrics`.
async fn collector_progress(collector: &Service) -> Result<(Vec<f64>, f64)> {
    let text = collector.metrics().await?;
    let value = |l: &str| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let covered = text
        .lines()
        .filter(|l| l.starts_with("waterline_metric_nodes_covered{"))
        .map(value)
        .collect();
    let requests =
        text.lines().filter(|l| l.starts_with("waterline_promql_requests_total")).map(value).sum();
    Ok((covered, requests))
}

pub async fn refresh(args: &PrometheusArgs) -> Result<Value> {
    let policy = Policy::default();
    let nodes = args.spawn.cluster_nodes;
    let dir = log_dir(&args.spawn, "-prom")?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
    let t0 = Instant::now();
    let text = openmetrics(&policy, nodes, now);
    let prom = start_prometheus(text).await?;
    println!(
        "prometheus-refresh: {nodes} nodes × {} metrics backfilled and served in {:.1} s ({})",
        policy.metrics.len(),
        t0.elapsed().as_secs_f64(),
        prom.url()
    );

    let started = Instant::now();
    let collector = launch("waterline-collector", &args.spawn, &dir).spawn(&[
        format!("--prometheus-url={}", prom.url()),
        "--prometheus-capacity=false".into(),
    ])?;
    let want = policy.metrics.len();
    let deadline = started + Duration::from_secs(120);
    let (wall, first_cpu, first_requests) = loop {
        if Instant::now() > deadline {
            bail!(
                "collector never covered {nodes} nodes for {want} metrics; log {}",
                collector.log_path().display()
            );
        }
        collector.check_running()?;
        if let Ok((covered, requests)) = collector_progress(&collector).await
            && covered.len() >= want
            && covered.iter().all(|c| *c >= nodes as f64)
        {
            break (started.elapsed(), ProcStat::of(&collector)?, requests);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    println!(
        "  first full refresh: {:.0} ms wall from start, {first_requests} PromQL requests, \
         collector CPU {:.0} ms (incl. start-up), VmRSS {:.1} MiB",
        wall.as_secs_f64() * 1e3,
        first_cpu.cpu_secs * 1e3,
        first_cpu.rss_kib as f64 / 1024.0
    );

    let (_, r0) = collector_progress(&collector).await?;
    let c0 = ProcStat::of(&collector)?;
    tokio::time::sleep(args.steady).await;
    let (_, r1) = collector_progress(&collector).await?;
    let c1 = ProcStat::of(&collector)?;
    let queries = r1 - r0;
    let cpu_ms = (c1.cpu_secs - c0.cpu_secs) * 1e3;
    println!(
        "  steady {:.0} s: {queries} PromQL requests, collector CPU {cpu_ms:.0} ms ({:.1} ms per query), VmRSS {:.1} MiB",
        args.steady.as_secs_f64(),
        if queries > 0.0 { cpu_ms / queries } else { f64::NAN },
        c1.rss_kib as f64 / 1024.0
    );
    drop(collector);
    drop(prom);
    if args.spawn.log_dir.is_none() {
        let _ = fs::remove_dir_all(&dir);
    }
    Ok(json!({
        "cluster_nodes": nodes,
        "metrics": want,
        "first_refresh_ms": wall.as_secs_f64() * 1e3,
        "first_refresh_promql_requests": first_requests,
        "first_refresh_collector_cpu_ms": first_cpu.cpu_secs * 1e3,
        "collector_rss_mib": c1.rss_kib as f64 / 1024.0,
        "steady_seconds": args.steady.as_secs_f64(),
        "steady_promql_requests": queries,
        "steady_collector_cpu_ms": cpu_ms,
    }))
}
