//! `recording-rules`: what the shipped recording rules cost a real Prometheus
//! (`/usr/bin/prometheus`, started with the integration tests' harness) at N fake nodes.
//!
//! For each size: a fake node-exporter (the tests' [`FakeExporter`], with the eight CPU modes
//! of a real one) serves N nodes of `--cpus` CPUs, scraped every `--scrape-interval`; a day of
//! history (node-exporter series and the recorded 5 m series, [`history`]) is backfilled with
//! promtool in time windows; then every rule file given is loaded in turn (`/-/reload`) and
//! Prometheus's own `/metrics` is polled every second for each group's
//! `prometheus_rule_group_last_duration_seconds`, `process_resident_memory_bytes` and
//! `go_memstats_heap_inuse_bytes`, until every group has been evaluated `--evaluations` times
//! after warm-up. Each rule's query is then run once more through `/api/v1/query?stats=all`
//! for the samples it loads (`peakSamples`, which `--query.max-samples` limits). After the
//! last size, a least-squares line per group through (series, median evaluation time) is
//! extrapolated to 5,000 nodes.

mod fit;
mod history;
mod queries;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::time::Instant;
use waterline_core::time::parse_std_duration;
use waterline_tests::exporter::{CpuModes, FakeExporter, FakeNode};
use waterline_tests::prometheus::{Prometheus, PrometheusConfig, backfill_file, repo_path};

use crate::args::RecordingRulesArgs;
use fit::{Line, median};
use history::{Curve, History};

/// The records compared between rule files (same names, different expressions).
const MAXIMA: [&str; 4] = [
    "waterline:node_cpu_usage:max_avg1h",
    "waterline:node_cpu_usage:max_avg1d",
    "waterline:node_memory_usage:max_avg1h",
    "waterline:node_memory_usage:max_avg1d",
];
const MIB: f64 = 1024.0 * 1024.0;

pub async fn run(args: &RecordingRulesArgs) -> Result<Value> {
    let files: Vec<PathBuf> = if args.rules.is_empty() {
        vec![repo_path("deploy/prometheus/rules.yml")]
    } else {
        args.rules.clone()
    };
    check_files(&files)?;
    let mut sizes = Vec::new();
    for &nodes in &args.nodes {
        let size = measure_size(args, &files, nodes).await?;
        // Each size as it completes, so a later size that fails loses nothing.
        println!("size result: {size}");
        sizes.push(size);
    }
    let fits = print_fits(args, &files, &sizes);
    Ok(json!({ "cpus": args.cpus, "sizes": sizes, "fits": fits }))
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn mem_available_mib() -> Option<f64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    let kib: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

/// `text` with every `interval:` longer than `cap` set to `cap` (the 1 d group's 5 min would
/// make several evaluations take a quarter of an hour per size).
fn cap_intervals(text: &str, cap: Option<Duration>) -> String {
    let Some(cap) = cap else { return text.to_owned() };
    text.lines()
        .map(|line| {
            let body = line.trim_start();
            let body = body.strip_prefix("- ").unwrap_or(body);
            match body.strip_prefix("interval:").map(str::trim) {
                Some(v) if parse_std_duration(v).is_ok_and(|d| d > cap) => {
                    format!("{}interval: {}s", &line[..line.len() - body.len()], cap.as_secs())
                }
                _ => line.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The rule file the harness copied into its directory (listed under `rule_files:`).
fn loaded_rule_file(prom: &Prometheus) -> Result<PathBuf> {
    let config = fs::read_to_string(prom.config_path())?;
    let line = config
        .lines()
        .skip_while(|l| !l.starts_with("rule_files:"))
        .nth(1)
        .context("no rule file in the generated prometheus.yml")?;
    Ok(PathBuf::from(line.trim().trim_start_matches("- ").trim_matches('\'')))
}

async fn get_text(http: &reqwest::Client, url: &str) -> Result<String> {
    let resp = http.get(url).send().await.with_context(|| format!("GET {url}"))?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        bail!("GET {url}: HTTP {status}: {text}");
    }
    Ok(text)
}

/// One line of the text exposition format: name, the `rule_group` label's group name (after
/// the file path and `;`), value.
fn sample(line: &str) -> Option<(&str, Option<&str>, f64)> {
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    match head.split_once('{') {
        None => Some((head, None, value)),
        Some((name, labels)) => {
            let group = labels
                .split_once("rule_group=\"")
                .and_then(|(_, rest)| rest.split_once('"'))
                .map(|(g, _)| g.rsplit_once(';').map_or(g, |(_, name)| name));
            Some((name, group, value))
        }
    }
}

#[derive(Default, Debug)]
struct Group {
    last_eval: f64,
    durations: Vec<f64>,
    failures: f64,
    missed: f64,
}

/// One poll of Prometheus's `/metrics`.
#[derive(Default)]
struct Poll {
    groups: BTreeMap<String, (f64, f64, f64, f64)>, // last eval ts, last duration, failures, missed
    rss: f64,
    heap: f64,
    head_series: f64,
    cpu_seconds: f64,
    rule_eval_quantiles: BTreeMap<String, f64>,
}

fn parse_poll(text: &str) -> Poll {
    let mut p = Poll::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, group, v)) = sample(line) else { continue };
        let slot = match name {
            "prometheus_rule_group_last_evaluation_timestamp_seconds" => Some(0),
            "prometheus_rule_group_last_duration_seconds" => Some(1),
            "prometheus_rule_evaluation_failures_total" => Some(2),
            "prometheus_rule_group_iterations_missed_total" => Some(3),
            _ => None,
        };
        if let (Some(slot), Some(group)) = (slot, group) {
            let e = p.groups.entry(group.to_owned()).or_default();
            match slot {
                0 => e.0 = v,
                1 => e.1 = v,
                2 => e.2 = v,
                _ => e.3 = v,
            }
            continue;
        }
        match name {
            "process_resident_memory_bytes" => p.rss = v,
            "go_memstats_heap_inuse_bytes" => p.heap = v,
            "prometheus_tsdb_head_series" => p.head_series = v,
            "process_cpu_seconds_total" => p.cpu_seconds = v,
            "prometheus_rule_evaluation_duration_seconds" => {
                if let Some(q) = line.split_once("quantile=\"").and_then(|(_, r)| r.split_once('"'))
                {
                    p.rule_eval_quantiles.insert(q.0.to_owned(), v);
                }
            }
            _ => {}
        }
    }
    p
}

async fn measure_size(args: &RecordingRulesArgs, files: &[PathBuf], n: usize) -> Result<Value> {
    if let Some(avail) = mem_available_mib()
        && avail < args.min_free_mib as f64
    {
        bail!(
            "only {avail:.0} MiB of memory available (--min-free-mib {}): not starting {n} nodes",
            args.min_free_mib
        );
    }
    let load_start = loadavg();
    let now = unix_now();
    let nodes: Vec<(FakeNode, Curve)> = (0..n)
        .map(|i| {
            let curve = Curve::of(i);
            let node = FakeNode::new(format!("node-{i:05}"))
                .with_cores(args.cpus)
                .with_cpu_modes(CpuModes::NodeExporter)
                .with_memory_bytes(128 << 30)
                .with_cpu_busy(curve.busy(now as f64))
                .with_memory_used(curve.memory_used(now as f64));
            (node, curve)
        })
        .collect();
    let exporter = FakeExporter::start(nodes.iter().map(|(n, _)| n.clone()).collect()).await?;

    let staging = tempfile::Builder::new().prefix("waterline-rules-").suffix(".yml").tempfile()?;
    fs::write(staging.path(), cap_intervals(&fs::read_to_string(&files[0])?, args.interval_cap()))?;
    let mut prom = Prometheus::start(PrometheusConfig {
        scrape_configs: exporter.scrape_configs(),
        // --isolated: no rule evaluates on its own; each query runs alone.
        rule_files: if args.isolated { Vec::new() } else { vec![staging.path().to_owned()] },
        scrape_interval: args.scrape_interval,
        evaluation_interval: args.scrape_interval,
        rule_interval: None,
        extra_args: vec![
            format!("--query.max-samples={}", args.query_max_samples),
            "--query.timeout=15m".into(),
            // No compaction of the backfilled blocks while measuring (it would compete for
            // the CPU): blocks stay as promtool wrote them.
            "--storage.tsdb.min-block-duration=2h".into(),
            "--storage.tsdb.max-block-duration=2h".into(),
        ],
        ready_timeout: Duration::from_secs(600),
        ..PrometheusConfig::default()
    })
    .await?;
    prom.stop()?;
    println!(
        "recording-rules: {n} nodes × {} CPUs × 8 modes = {} cpu series; backfilling {} of history every {} s (load {load_start})",
        args.cpus,
        n * args.cpus as usize * 8,
        humanize(args.history),
        args.history_step.as_secs()
    );
    let t0 = Instant::now();
    backfill(args, &prom, nodes, now).await?;
    println!("  backfill done in {:.0} s; starting Prometheus on it", t0.elapsed().as_secs_f64());
    prom.restart().await?;

    let http = reqwest::Client::builder().timeout(Duration::from_secs(1200)).build()?;
    let cpu_series = n * args.cpus as usize * 8;
    let mut per_file = Vec::new();
    let mut maxima: Vec<BTreeMap<String, BTreeMap<String, f64>>> = Vec::new();
    if args.isolated {
        // One scrape on top of the history, so every 5 m window holds two samples.
        tokio::time::sleep(args.scrape_interval + Duration::from_secs(5)).await;
        for file in files {
            let mut result = queries::measure_file(&prom, &http, file, args.evaluations, n).await?;
            result["file"] = json!(file.display().to_string());
            per_file.push(result);
        }
    } else {
        let loaded = loaded_rule_file(&prom)?;
        for (k, file) in files.iter().enumerate() {
            if k > 0 {
                fs::write(&loaded, cap_intervals(&fs::read_to_string(file)?, args.interval_cap()))?;
                let resp = http.post(format!("{}/-/reload", prom.url())).send().await?;
                if !resp.status().is_success() {
                    bail!(
                        "reloading {}: HTTP {}: {}",
                        file.display(),
                        resp.status(),
                        resp.text().await?
                    );
                }
            }
            println!(
                "  rules {} (intervals capped at {})",
                file.display(),
                args.interval_cap().map_or("none".into(), humanize)
            );
            let mut result = watch(args, &prom, &http, n).await?;
            result["rules"] = rule_details(&prom, &http).await?;
            maxima.push(read_maxima(&prom, &http).await?);
            result["file"] = json!(file.display().to_string());
            per_file.push(result);
        }
    }
    let agreement = (maxima.len() > 1).then(|| compare_maxima(&maxima));
    drop(prom);
    drop(exporter);
    Ok(json!({
        "nodes": n,
        "cpu_series": cpu_series,
        "history_seconds": args.history.as_secs(),
        "history_step_seconds": args.history_step.as_secs(),
        "scrape_interval_seconds": args.scrape_interval.as_secs(),
        "load_at_start": load_start,
        "load_at_end": loadavg(),
        "files": per_file,
        "maxima_max_abs_difference": agreement,
    }))
}

fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// Writes the history in windows of `--backfill-chunk` (the last ones up to "now", until
/// caught up) and runs promtool on each while the next is written.
async fn backfill(
    args: &RecordingRulesArgs,
    prom: &Prometheus,
    nodes: Vec<(FakeNode, Curve)>,
    now: i64,
) -> Result<()> {
    let step = args.history_step.as_secs() as i64;
    let chunk = args.backfill_chunk.as_secs().max(1) as i64;
    let start = (now - args.history.as_secs() as i64).div_euclid(step) * step;
    let data_dir = prom.data_dir();
    let work = data_dir.parent().context("data dir has a parent")?.to_owned();
    let mut history = History::new(nodes, start, step);
    let mut next = start;
    let mut pending: Option<(tokio::task::JoinHandle<Result<()>>, PathBuf)> = None;
    for k in 0.. {
        let now = unix_now();
        if next > now {
            break;
        }
        let end = ((next.div_euclid(chunk) + 1) * chunk - 1).min(now);
        let path = work.join(format!("history-{k}.om"));
        let p = path.clone();
        let written = Instant::now();
        let (h, c) = tokio::task::spawn_blocking(move || {
            let c = history.write_chunk(&p, end);
            (history, c)
        })
        .await?;
        history = h;
        let c = c?;
        println!(
            "  history window {k}: {} .. {} ({:.1} M samples, {:.2} GB) written in {:.0} s (load {})",
            next - now,
            end - now,
            c.samples as f64 / 1e6,
            c.bytes as f64 / 1e9,
            written.elapsed().as_secs_f64(),
            loadavg()
        );
        next = (end.div_euclid(step) + 1) * step;
        if let Some((task, p)) = pending.take() {
            task.await??;
            let _ = fs::remove_file(p);
        }
        let dir = data_dir.clone();
        let input = path.clone();
        let block = Duration::from_secs(chunk as u64);
        pending = Some((
            tokio::spawn(async move { backfill_file(&dir, &input, Some(block)).await }),
            path,
        ));
    }
    if let Some((task, p)) = pending.take() {
        task.await??;
        let _ = fs::remove_file(p);
    }
    Ok(())
}

/// Polls `/metrics` every second until every group has `--warmup-evaluations` +
/// `--evaluations` evaluations since now (or `--max-wait`), and summarises them.
async fn watch(
    args: &RecordingRulesArgs,
    prom: &Prometheus,
    http: &reqwest::Client,
    n: usize,
) -> Result<Value> {
    let since = unix_now() as f64;
    let want = args.warmup_evaluations + args.evaluations;
    let deadline = Instant::now() + args.max_wait;
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    let (mut rss, mut heap) = (Vec::new(), Vec::new());
    let mut last: Poll;
    // Prometheus's CPU time from the end of the warm-up on (less load-dependent than wall time).
    let mut cpu_from: Option<(Instant, f64)> = None;
    let load_begin = loadavg();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let poll = parse_poll(&get_text(http, &format!("{}/metrics", prom.url())).await?);
        for (name, &(ts, dur, failures, missed)) in &poll.groups {
            let g = groups.entry(name.clone()).or_default();
            g.failures = failures;
            g.missed = missed;
            if ts > since && ts != g.last_eval {
                g.last_eval = ts;
                g.durations.push(dur);
                println!(
                    "  [{n} nodes] {name} evaluation {}: {dur:.3} s (RSS {:.0} MiB, heap in use {:.0} MiB, load {})",
                    g.durations.len(),
                    poll.rss / MIB,
                    poll.heap / MIB,
                    loadavg()
                );
            }
        }
        let warmed = groups.values().all(|g| g.durations.len() > args.warmup_evaluations);
        if warmed && !groups.is_empty() {
            cpu_from.get_or_insert((Instant::now(), poll.cpu_seconds));
            rss.push(poll.rss);
            heap.push(poll.heap);
        }
        if poll.rss / MIB > args.max_rss_mib as f64 {
            bail!(
                "Prometheus RSS {:.0} MiB is above --max-rss-mib {}: stopped",
                poll.rss / MIB,
                args.max_rss_mib
            );
        }
        if let Some(avail) = mem_available_mib()
            && avail < args.min_free_mib as f64
        {
            bail!(
                "machine memory available fell to {avail:.0} MiB (--min-free-mib {}): stopped",
                args.min_free_mib
            );
        }
        last = poll;
        if !groups.is_empty() && groups.values().all(|g| g.durations.len() >= want) {
            break;
        }
        if Instant::now() > deadline {
            println!("  --max-wait reached: reporting what was evaluated");
            break;
        }
    }
    let groups_json: BTreeMap<&String, Value> = groups
        .iter()
        .map(|(name, g)| {
            let measured: Vec<f64> =
                g.durations.iter().skip(args.warmup_evaluations).copied().collect();
            (
                name,
                json!({
                    "evaluations_s": g.durations,
                    "median_s": median(&measured),
                    "failures_total": g.failures,
                    "iterations_missed_total": g.missed,
                }),
            )
        })
        .collect();
    let max = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::max) / MIB;
    let cpu_share = cpu_from.map(|(at, cpu)| {
        let wall = at.elapsed().as_secs_f64();
        if wall > 0.0 { (last.cpu_seconds - cpu) / wall } else { f64::NAN }
    });
    println!(
        "  Prometheus CPU after warm-up: {} cores on average; RSS median {:.0} MiB, heap in use median {:.0} MiB",
        cpu_share.map_or("n/a".into(), |c| format!("{c:.2}")),
        median(&rss) / MIB,
        median(&heap) / MIB
    );
    Ok(json!({
        "groups": groups_json,
        "head_series": last.head_series,
        "rss_mib": { "median": median(&rss) / MIB, "max": max(&rss) },
        "heap_inuse_mib": { "median": median(&heap) / MIB, "max": max(&heap) },
        "prometheus_cpu_cores_after_warmup": cpu_share,
        "rule_evaluation_duration_seconds": last.rule_eval_quantiles,
        "load_begin": load_begin,
        "load_end": loadavg(),
    }))
}

/// Each rule's own last evaluation time and health (`/api/v1/rules`), and the samples its
/// query loads (`/api/v1/query?stats=all`: `peakSamples` is what `--query.max-samples`
/// bounds).
async fn rule_details(prom: &Prometheus, http: &reqwest::Client) -> Result<Value> {
    let rules: Value =
        serde_json::from_str(&get_text(http, &format!("{}/api/v1/rules", prom.url())).await?)?;
    let mut out = Vec::new();
    for group in rules["data"]["groups"].as_array().into_iter().flatten() {
        for rule in group["rules"].as_array().into_iter().flatten() {
            let query = rule["query"].as_str().unwrap_or_default();
            let url = reqwest::Url::parse_with_params(
                &format!("{}/api/v1/query", prom.url()),
                [("query", query), ("stats", "all"), ("timeout", "15m")],
            )?;
            let started = Instant::now();
            let answer: Value = serde_json::from_str(&http.get(url).send().await?.text().await?)?;
            let stats = &answer["data"]["stats"];
            let entry = json!({
                "group": group["name"],
                "record": rule["name"],
                "health": rule["health"],
                "last_error": rule["lastError"],
                "evaluation_s": rule["evaluationTime"],
                "query_status": answer["status"],
                "query_error": answer["error"],
                "peak_samples": stats["samples"]["peakSamples"],
                "total_queryable_samples": stats["samples"]["totalQueryableSamples"],
                "query_eval_s": stats["timings"]["evalTotalTime"],
            });
            println!(
                "    {} ({}): rule {:.3} s, health {}; as a query: peak {} samples, {} queryable, {:.1} s wall",
                rule["name"].as_str().unwrap_or("?"),
                group["name"].as_str().unwrap_or("?"),
                rule["evaluationTime"].as_f64().unwrap_or(f64::NAN),
                rule["health"].as_str().unwrap_or("?"),
                entry["peak_samples"],
                entry["total_queryable_samples"],
                started.elapsed().as_secs_f64()
            );
            out.push(entry);
        }
    }
    Ok(Value::Array(out))
}

/// The 1 h / 1 d records of every node, now.
async fn read_maxima(
    prom: &Prometheus,
    http: &reqwest::Client,
) -> Result<BTreeMap<String, BTreeMap<String, f64>>> {
    let mut all = BTreeMap::new();
    for record in MAXIMA {
        let url = reqwest::Url::parse_with_params(
            &format!("{}/api/v1/query", prom.url()),
            [("query", record)],
        )?;
        let answer: Value = serde_json::from_str(&http.get(url).send().await?.text().await?)?;
        let mut by_node = BTreeMap::new();
        for row in answer["data"]["result"].as_array().into_iter().flatten() {
            let node = row["metric"]["node"].as_str().unwrap_or_default().to_owned();
            if let Some(v) = row["value"][1].as_str().and_then(|v| v.parse().ok()) {
                by_node.insert(node, v);
            }
        }
        all.insert(record.to_owned(), by_node);
    }
    Ok(all)
}

/// Largest |first file − other file| per record over the nodes both have, and how many
/// nodes each has.
fn compare_maxima(maxima: &[BTreeMap<String, BTreeMap<String, f64>>]) -> Value {
    let (first, rest) = maxima.split_first().expect("two or more");
    let mut out = serde_json::Map::new();
    for other in rest {
        for (record, a) in first {
            let b = other.get(record).cloned().unwrap_or_default();
            let diff = a
                .iter()
                .filter_map(|(node, va)| b.get(node).map(|vb| (va - vb).abs()))
                .fold(0.0, f64::max);
            println!(
                "  {record}: max |difference| {diff:.2} points ({} vs {} nodes)",
                a.len(),
                b.len()
            );
            out.insert(
                record.clone(),
                json!({ "max_abs_difference": diff, "nodes": [a.len(), b.len()] }),
            );
        }
    }
    Value::Object(out)
}

/// Reads one figure of one size's result for one rule file.
type Pick = Box<dyn Fn(&Value) -> Option<f64>>;

/// Per rule file and group: a line through (cpu series, median evaluation time), its
/// residuals, and the value at 5,000 nodes (extrapolated); likewise RSS and heap.
fn print_fits(args: &RecordingRulesArgs, files: &[PathBuf], sizes: &[Value]) -> Value {
    let at = 5000.0 * args.cpus as f64 * 8.0;
    let mut out = serde_json::Map::new();
    for (k, file) in files.iter().enumerate() {
        println!(
            "fits for {} (x = cpu series; extrapolated to 5,000 nodes = {at:.0} series):",
            file.display()
        );
        let point = |size: &Value, pick: &dyn Fn(&Value) -> Option<f64>| -> Option<(f64, f64)> {
            Some((size["cpu_series"].as_f64()?, pick(&size["files"][k])?))
        };
        let mut series: BTreeMap<String, Pick> = BTreeMap::new();
        if let Some(groups) = sizes.first().and_then(|s| s["files"][k]["groups"].as_object()) {
            for name in groups.keys() {
                let name = name.clone();
                series.insert(
                    format!("{name} median s"),
                    Box::new(move |f: &Value| f["groups"][&name]["median_s"].as_f64()),
                );
            }
        }
        series
            .insert("RSS median MiB".into(), Box::new(|f: &Value| f["rss_mib"]["median"].as_f64()));
        series.insert(
            "heap in use median MiB".into(),
            Box::new(|f: &Value| f["heap_inuse_mib"]["median"].as_f64()),
        );
        let mut fits = serde_json::Map::new();
        for (what, pick) in &series {
            let points: Vec<(f64, f64)> =
                sizes.iter().filter_map(|s| point(s, pick.as_ref())).collect();
            if let Some(line) = Line::fit(&points) {
                println!(
                    "  {what}: {:.4} + {:.4e} × series (R² {:.3}); residuals {:?}; at 5,000 nodes ≈ {:.2} (extrapolated)",
                    line.intercept,
                    line.slope,
                    line.r2,
                    line.residuals.iter().map(|r| format!("{r:.3}")).collect::<Vec<_>>(),
                    line.at(at)
                );
                let mut j = line.json();
                j["at_5000_nodes_extrapolated"] = json!(line.at(at));
                fits.insert(what.clone(), j);
            }
        }
        out.insert(file.display().to_string(), Value::Object(fits));
    }
    Value::Object(out)
}

/// Whether `path` exists (for a clear error before minutes of backfill).
pub fn check_files(files: &[PathBuf]) -> Result<()> {
    for f in files {
        if !Path::new(f).exists() {
            bail!("rule file {} not found", f.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_only_longer_intervals() {
        let text = "groups:\n  - name: a\n    interval: 30s\n  - name: b\n    interval: 5m\n";
        let out = cap_intervals(text, Some(Duration::from_secs(120)));
        assert_eq!(
            out,
            "groups:\n  - name: a\n    interval: 30s\n  - name: b\n    interval: 120s\n"
        );
        assert_eq!(cap_intervals(text, None), text);
    }

    #[test]
    fn reads_group_gauges_from_the_exposition() {
        let text = "# HELP x\nprometheus_rule_group_last_duration_seconds{rule_group=\"/tmp/a/rules-0-r.yml;waterline-node-usage-1d\"} 12.5\n\
                    prometheus_rule_group_last_evaluation_timestamp_seconds{rule_group=\"/tmp/a/rules-0-r.yml;waterline-node-usage-1d\"} 1.7e+09\n\
                    process_resident_memory_bytes 2.097152e+06\n\
                    prometheus_rule_evaluation_duration_seconds{quantile=\"0.9\"} 0.25\n";
        let p = parse_poll(text);
        assert_eq!(p.groups["waterline-node-usage-1d"].0, 1.7e9);
        assert_eq!(p.groups["waterline-node-usage-1d"].1, 12.5);
        assert_eq!(p.rss, 2.097152e6);
        assert_eq!(p.rule_eval_quantiles["0.9"], 0.25);
    }
}
