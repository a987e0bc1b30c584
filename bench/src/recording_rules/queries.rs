//! `--isolated`: each rule's expression run alone through `/api/v1/query?stats=all` on a
//! Prometheus that evaluates no rules, `--evaluations` times, with Prometheus's own CPU time
//! around each run (scraping included; its scrape-only rate is reported beside it) and its peak RSS and heap while it runs.
//! On a machine shared with other work, CPU seconds per evaluation say more than a group's
//! wall-clock duration, which mostly measures how much of a core Prometheus was given.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use tokio::time::Instant;
use waterline_core::rule_file::RuleFile;
use waterline_core::time::parse_std_duration;
use waterline_tests::prometheus::Prometheus;

use super::fit::median;
use super::{MIB, get_text, loadavg, parse_poll};

/// Prometheus's process CPU seconds, RSS and heap in use, now.
async fn proc_now(prom: &Prometheus, http: &reqwest::Client) -> Result<(f64, f64, f64)> {
    let p = parse_poll(&get_text(http, &format!("{}/metrics", prom.url())).await?);
    Ok((p.cpu_seconds, p.rss, p.heap))
}

/// Runs every rule of `file` `reps` times; returns per-group and per-rule figures.
pub async fn measure_file(
    prom: &Prometheus,
    http: &reqwest::Client,
    file: &Path,
    reps: usize,
    n: usize,
) -> Result<Value> {
    let rule_groups = RuleFile::parse(&std::fs::read_to_string(file)?)
        .with_context(|| format!("parsing {}", file.display()))?;
    // Scrape-only CPU rate, subtracted from each query's CPU time.
    let (c0, rss0, heap0) = proc_now(prom, http).await?;
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (c1, _, _) = proc_now(prom, http).await?;
    let baseline = (c1 - c0) / t0.elapsed().as_secs_f64();
    println!(
        "  {}: Prometheus idle (scraping only): {baseline:.3} cores, RSS {:.0} MiB, heap in use {:.0} MiB (load {})",
        file.display(),
        rss0 / MIB,
        heap0 / MIB,
        loadavg()
    );
    let mut groups = BTreeMap::new();
    let mut rules_out = Vec::new();
    for group in &rule_groups {
        let interval = group.interval.as_deref().map(parse_std_duration).transpose()?;
        let (mut cpu_sum, mut eval_sum, mut peak_rss, mut peak_heap) = (0.0, 0.0, 0.0_f64, 0.0_f64);
        for rule in &group.rules {
            let name = rule.record.clone().or_else(|| rule.alert.clone()).unwrap_or_default();
            let (mut cpus, mut evals, mut walls) = (Vec::new(), Vec::new(), Vec::new());
            let mut last = Value::Null;
            for rep in 0..reps {
                let (before, _, _) = proc_now(prom, http).await?;
                // Peak RSS / heap while the query runs, polled every 250 ms.
                let done = Arc::new(AtomicBool::new(false));
                let poller = {
                    let (done, http, url) =
                        (done.clone(), http.clone(), format!("{}/metrics", prom.url()));
                    tokio::spawn(async move {
                        let (mut rss, mut heap) = (0.0_f64, 0.0_f64);
                        while !done.load(Ordering::Relaxed) {
                            if let Ok(text) = get_text(&http, &url).await {
                                let p = parse_poll(&text);
                                rss = rss.max(p.rss);
                                heap = heap.max(p.heap);
                            }
                            tokio::time::sleep(Duration::from_millis(250)).await;
                        }
                        (rss, heap)
                    })
                };
                let started = Instant::now();
                let url = reqwest::Url::parse_with_params(
                    &format!("{}/api/v1/query", prom.url()),
                    [("query", rule.expr.as_str()), ("stats", "all"), ("timeout", "15m")],
                )?;
                let answer: Value =
                    serde_json::from_str(&http.get(url).send().await?.text().await?)?;
                let wall = started.elapsed().as_secs_f64();
                done.store(true, Ordering::Relaxed);
                let (rss, heap) = poller.await?;
                let (after, _, _) = proc_now(prom, http).await?;
                // Raw process CPU over the query (scraping included: `idle_cpu_cores` × wall
                // of it, but a 10 s baseline right after start-up or a big query is noisy, so
                // it is reported, not subtracted).
                let cpu = after - before;
                let stats = &answer["data"]["stats"];
                let eval = stats["timings"]["evalTotalTime"].as_f64().unwrap_or(f64::NAN);
                println!(
                    "  [{n} nodes] {} / {name} run {}: {} — eval {eval:.3} s, {wall:.1} s wall, Prometheus CPU {cpu:.2} s, peak {} samples ({} queryable), RSS ≤ {:.0} MiB, heap ≤ {:.0} MiB (load {})",
                    group.name,
                    rep + 1,
                    answer["status"].as_str().unwrap_or("?"),
                    stats["samples"]["peakSamples"],
                    stats["samples"]["totalQueryableSamples"],
                    rss / MIB,
                    heap / MIB,
                    loadavg()
                );
                peak_rss = peak_rss.max(rss);
                peak_heap = peak_heap.max(heap);
                cpus.push(cpu);
                evals.push(eval);
                walls.push(wall);
                last = json!({
                    "status": answer["status"],
                    "error": answer["error"],
                    "series": answer["data"]["result"].as_array().map(Vec::len),
                    "peak_samples": stats["samples"]["peakSamples"],
                    "total_queryable_samples": stats["samples"]["totalQueryableSamples"],
                });
            }
            cpu_sum += median(&cpus);
            eval_sum += median(&evals);
            rules_out.push(json!({
                "group": group.name, "record": name,
                "cpu_s": cpus, "eval_s": evals, "wall_s": walls,
                "cpu_median_s": median(&cpus), "eval_median_s": median(&evals),
                "last": last,
            }));
        }
        let share = interval.map(|i| cpu_sum / i.as_secs_f64());
        println!(
            "  [{n} nodes] group {}: {cpu_sum:.2} CPU s and {eval_sum:.2} s of evaluation per run (medians summed over its rules){}",
            group.name,
            share.map_or(String::new(), |s| format!(
                ", {:.1} % of a core at its {} interval",
                100.0 * s,
                group.interval.as_deref().unwrap_or("")
            ))
        );
        groups.insert(
            group.name.clone(),
            json!({
                "interval": group.interval,
                "cpu_median_s": cpu_sum,
                "median_s": eval_sum,
                "core_share_at_interval": share,
                "peak_rss_mib": peak_rss / MIB,
                "peak_heap_inuse_mib": peak_heap / MIB,
            }),
        );
    }
    Ok(json!({
        "groups": groups,
        "rules": rules_out,
        "idle_cpu_cores": baseline,
        "rss_mib": { "median": rss0 / MIB, "max": groups_max(&groups, "peak_rss_mib") },
        "heap_inuse_mib": { "median": heap0 / MIB, "max": groups_max(&groups, "peak_heap_inuse_mib") },
    }))
}

fn groups_max(groups: &BTreeMap<String, Value>, key: &str) -> f64 {
    groups.values().filter_map(|g| g[key].as_f64()).fold(f64::NAN, f64::max)
}
