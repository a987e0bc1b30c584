//! `waterline-bench soak`: a bounded run of a steady mixed load against a spawned collector
//! (`--synthetic-nodes`), scorer and extender — gRPC Score, extender filter + prioritize
//! (Evaluate, then a provisional Reserve), gRPC Reserve of a new pod with the Unreserve of
//! the oldest (`--live-pods` stay placed) — while RSS and CPU of the three processes are
//! sampled from `/proc`. The ledger grows until its entries retire, so pods are deleted as
//! fast as they come and the built-in policy retires every entry nobody deletes within
//! [`LONGEST_WINDOW`]; after the warm-up the run is judged on RSS per live ledger entry and
//! RSS per node, each flat within `--max-drift` (the median of the last third of the judged
//! samples against that of the first third), not on raw RSS.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::time::{Instant, MissedTickBehavior};
use waterline_tests::procs::Service;

use crate::args::{LoadArgs, SoakArgs, SpawnArgs};
use crate::procs::{ProcStat, Stack};
use crate::targets::{self, Extender, Grpc, RequestFlags};

/// Every metric's absorb window in the built-in policy: a placement stops counting after it.
pub const ABSORB_WINDOW: &str = "40s";
/// The built-in policy's longest window, the Reserve TTL: an unconfirmed entry nobody
/// deletes retires after it (the soak deletes its pods sooner; the extender's provisional
/// entries expire after 15 s).
pub const LONGEST_WINDOW: &str = "120s";

/// The default six metrics (docs/design.md#metrics-and-recording-rules) with every window cut
/// short, so ledger entries stop counting and retire within the run.
fn soak_policy() -> String {
    format!(
        "# waterline-bench soak: every metric's absorb window is {a}, the Reserve TTL (the\n\
         # longest window) {w}: every ledger entry retires within {w} of its placement.\n\
         metrics:\n\
         \x20 - {{name: cpu_usage_avg_5m,     resource: cpu,    query: q, period: 30s, weight: 0.2, filterAbove: 65}}\n\
         \x20 - {{name: cpu_usage_max_avg_1h, resource: cpu,    query: q, period: 5m,  weight: 0.3, filterAbove: 75}}\n\
         \x20 - {{name: cpu_usage_max_avg_1d, resource: cpu,    query: q, period: 30m, weight: 0.5}}\n\
         \x20 - {{name: mem_usage_avg_5m,     resource: memory, query: q, period: 30s, weight: 0.2, filterAbove: 65}}\n\
         \x20 - {{name: mem_usage_max_avg_1h, resource: memory, query: q, period: 5m,  weight: 0.3, filterAbove: 75}}\n\
         \x20 - {{name: mem_usage_max_avg_1d, resource: memory, query: q, period: 30m, weight: 0.5}}\n\
         curve: {{kind: waterLevel, target: 40}}\n\
         ledger: {{enabled: true, lag: 5s, reserveTtl: {w}, absorbWindow: {a}}}\n",
        a = ABSORB_WINDOW,
        w = LONGEST_WINDOW
    )
}

/// Outcomes of one kind of request.
#[derive(Default)]
struct Counters {
    ok: AtomicU64,
    errors: AtomicU64,
    /// Ticks that found `--max-in-flight` requests still running.
    skipped: AtomicU64,
    kinds: Mutex<BTreeMap<String, u64>>,
}

impl Counters {
    fn record(&self, result: Result<Result<(), String>, tokio::time::error::Elapsed>) {
        match result {
            Ok(Ok(())) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Err(kind)) => self.error(kind),
            Err(_) => self.error("timeout".into()),
        }
    }

    fn error(&self, kind: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self.kinds.lock().unwrap_or_else(PoisonError::into_inner).entry(kind).or_default() += 1;
    }

    fn snapshot(&self) -> (u64, u64, u64) {
        (
            self.ok.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
            self.skipped.load(Ordering::Relaxed),
        )
    }

    fn json(&self, seconds: f64) -> Value {
        let (ok, errors, skipped) = self.snapshot();
        let kinds = self.kinds.lock().unwrap_or_else(PoisonError::into_inner).clone();
        json!({"ok": ok, "errors": errors, "skipped": skipped, "ok_per_s": ok as f64 / seconds,
               "error_kinds": kinds})
    }
}

/// The four kinds of load, in the order they are reported.
#[derive(Default)]
struct Load {
    score: Arc<Counters>,
    extender: Arc<Counters>,
    reserve: Arc<Counters>,
    unreserve: Arc<Counters>,
}

impl Load {
    fn kinds(&self) -> [(&'static str, &Arc<Counters>); 4] {
        [
            ("score", &self.score),
            ("extender", &self.extender),
            ("reserve", &self.reserve),
            ("unreserve", &self.unreserve),
        ]
    }
}

/// Calls `call(i)` `rate` times a second until `deadline`, each call its own task with a
/// `timeout`, at most `max_in_flight` at once (a tick finding none free is skipped).
fn steady<F, Fut>(
    rate: f64,
    deadline: Instant,
    a: &SoakArgs,
    counters: Arc<Counters>,
    call: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let (timeout, permits) = (a.timeout, Arc::new(Semaphore::new(a.max_in_flight.max(1))));
    tokio::spawn(async move {
        if rate <= 0.0 {
            return;
        }
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
        tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut i = 0u64;
        while tick.tick().await < deadline {
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                counters.skipped.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let (counters, request) = (counters.clone(), call(i));
            tokio::spawn(async move {
                counters.record(tokio::time::timeout(timeout, request).await);
                drop(permit);
            });
            i += 1;
        }
    })
}

/// One pod through the extender as kube-scheduler sends it: filter, then prioritize, with
/// the same body (a pod of its own uid, `--nodes` names).
async fn extender_pod(
    filter: Arc<Extender>,
    prioritize: Arc<Extender>,
    body: Bytes,
) -> Result<(), String> {
    filter.filter_body(body.clone()).await?;
    prioritize.prioritize_body(body).await
}

fn extender_body(names: &[String], run: u64, i: u64) -> Bytes {
    let mut args = targets::extender_args(names, "waterline-scheduler");
    args["Pod"]["metadata"]["uid"] = json!(format!("soak-{run}-{i}"));
    args["Pod"]["metadata"]["name"] = json!(format!("soak-{i}"));
    Bytes::from(args.to_string())
}

#[derive(Clone, Copy, Debug)]
struct ProcSample {
    rss_floor_kib: u64,
    rss_peak_kib: u64,
    cpu_pct: f64,
}

/// One sample of the three processes and the load.
#[derive(Clone, Debug)]
struct Sample {
    t: f64,
    load1: f64,
    /// Per process: VmRSS in KiB, the lowest and the highest of the once-a-second readings
    /// since the previous sample, and CPU % of one core over the same time. The lowest is
    /// judged: a leak raises it, while the peak also holds whatever a refresh of 5,000
    /// nodes has allocated at that moment (megabytes, freed a moment later).
    procs: Vec<ProcSample>,
    collector_ledger: f64,
    scorer_ledger: f64,
    /// The scorer's ops not yet taken by the collector (`waterline_forward_queued`).
    forward_queued: f64,
    requests: Vec<(u64, u64, u64)>,
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

async fn gauge(service: &Service, series: &str) -> f64 {
    service.metric_value(series).await.unwrap_or(f64::NAN)
}

const CSV_HEADER: &str = "t_s,load1,\
    collector_rss_floor_kib,collector_rss_peak_kib,collector_cpu_pct,\
    scorer_rss_floor_kib,scorer_rss_peak_kib,scorer_cpu_pct,\
    extender_rss_floor_kib,extender_rss_peak_kib,extender_cpu_pct,\
    collector_ledger,scorer_ledger,forward_queued,score_ok,extender_ok,reserve_ok,unreserve_ok,errors,skipped";

impl Sample {
    fn csv(&self) -> String {
        let mut row = vec![format!("{:.1}", self.t), format!("{:.2}", self.load1)];
        for p in &self.procs {
            row.push(p.rss_floor_kib.to_string());
            row.push(p.rss_peak_kib.to_string());
            row.push(format!("{:.1}", p.cpu_pct));
        }
        row.push(format!("{}", self.collector_ledger));
        row.push(format!("{}", self.scorer_ledger));
        row.push(format!("{}", self.forward_queued));
        row.extend(self.requests.iter().map(|(ok, _, _)| ok.to_string()));
        row.push(self.requests.iter().map(|r| r.1).sum::<u64>().to_string());
        row.push(self.requests.iter().map(|r| r.2).sum::<u64>().to_string());
        row.join(",")
    }

    fn progress(&self, names: &[&str]) -> String {
        let procs: Vec<String> = names
            .iter()
            .zip(&self.procs)
            .map(|(n, p)| {
                format!(
                    "{n} {:.1} MiB (peak {:.1}) {:.0} %",
                    p.rss_floor_kib as f64 / 1024.0,
                    p.rss_peak_kib as f64 / 1024.0,
                    p.cpu_pct
                )
            })
            .collect();
        let ok: Vec<String> = self.requests.iter().map(|r| r.0.to_string()).collect();
        format!(
            "[{:>5.0} s] {} | ledger collector {} scorer {} (forward queue {}) | ok score/extender/reserve/unreserve {} | errors {} skipped {} | load {:.2}",
            self.t,
            procs.join(" | "),
            self.collector_ledger,
            self.scorer_ledger,
            self.forward_queued,
            ok.join("/"),
            self.requests.iter().map(|r| r.1).sum::<u64>(),
            self.requests.iter().map(|r| r.2).sum::<u64>(),
            self.load1
        )
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// How far a judged series moved, in percent: the median of its last third against the
/// median of its first third. A leak is a trend and shows; the allocator's few-MiB swings
/// from one 10 s sample to the next (a 5,000-node refresh freed into an arena that keeps
/// it) do not, as a first-against-every-sample rule would let them.
fn drift(values: &[f64]) -> f64 {
    let third = values.len().div_ceil(3);
    let (start, end) = (median(&values[..third]), median(&values[values.len() - third..]));
    (end / start - 1.0).abs() * 100.0
}

/// The largest deviation of any sample from the median of the first third, in percent
/// (reported, not judged).
fn spread(values: &[f64]) -> f64 {
    let start = median(&values[..values.len().div_ceil(3)]);
    values.iter().map(|v| (v / start - 1.0).abs() * 100.0).fold(0.0, f64::max)
}

pub async fn soak(a: &SoakArgs) -> Result<Value> {
    if a.warmup + 2 * a.sample_every > a.duration {
        bail!("--duration must leave at least two samples after --warmup");
    }
    let mut spawn: SpawnArgs = a.spawn.clone();
    let log_dir = crate::procs::log_dir(&spawn, "-soak")?;
    spawn.log_dir = Some(log_dir.clone());
    if spawn.policy.is_none() {
        let path = log_dir.join("soak-policy.yaml");
        std::fs::write(&path, soak_policy()).context("writing the soak policy")?;
        spawn.policy = Some(path);
    }
    let stack = Stack::start(&spawn, true).await?;
    let extender_url = stack.extender.as_ref().context("the soak starts an extender")?.url();
    let cluster = spawn.cluster_nodes;
    println!(
        "soak: {cluster} synthetic nodes, {:?} (judged after {:?}), policy {} (longest window \
         {}); {} live pods; per second: {} Score, {} extender pods (filter + prioritize), {} \
         Reserve of a new pod + Unreserve of the oldest; {} candidates per request; logs in {}",
        a.duration,
        a.warmup,
        spawn.policy.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
        if a.spawn.policy.is_some() { "as in the file" } else { LONGEST_WINDOW },
        a.live_pods,
        a.score_rate,
        a.extender_rate,
        a.reserve_rate,
        a.nodes,
        log_dir.display()
    );

    let clients = targets::connect(&stack.scorer.url(), 1).await?;
    let grpc = Grpc::new(clients, a.nodes, cluster, RequestFlags::default());
    let filter = Arc::new(Extender::new(
        &extender_url,
        "/waterline/v1",
        "filter",
        a.nodes,
        cluster,
        "waterline-scheduler",
        a.timeout,
    )?);
    let prioritize = Arc::new(Extender::new(
        &extender_url,
        "/waterline/v1",
        "prioritize",
        a.nodes,
        cluster,
        "waterline-scheduler",
        a.timeout,
    )?);
    let windows = Arc::new(targets::windows(a.nodes, cluster));
    let run = std::process::id() as u64;

    // The live pods, placed at once (the scorer forwards them to the collector).
    let fill = LoadArgs {
        nodes: 1,
        concurrency: 32,
        connections: 1,
        duration: Duration::from_secs(600),
        requests: Some(a.live_pods),
        warmup: Duration::ZERO,
        timeout: a.timeout,
    };
    let g = grpc.clone();
    let placed = crate::load::drive(&fill, "live pods", false, move |i| g.clone().reserve(i)).await;
    if placed.errors > 0 {
        bail!("placing the {} live pods: {:?}", a.live_pods, placed.error_kinds);
    }
    println!("  {} live pods placed in {:.1} s", placed.ok, placed.elapsed.as_secs_f64());

    let load = Load::default();
    let start = Instant::now();
    let deadline = start + a.duration;
    let mut tasks = Vec::new();
    let g = grpc.clone();
    tasks.push(steady(a.score_rate, deadline, a, load.score.clone(), move |i| g.clone().score(i)));
    tasks.push(steady(a.extender_rate, deadline, a, load.extender.clone(), move |i| {
        let body = extender_body(&windows[i as usize % windows.len()], run, i);
        extender_pod(filter.clone(), prioritize.clone(), body)
    }));
    // Pod `live + i` is placed and pod `i`, the oldest, deleted: the churn.
    let (unreserve, live, timeout) = (load.unreserve.clone(), a.live_pods, a.timeout);
    tasks.push(steady(a.reserve_rate, deadline, a, load.reserve.clone(), move |i| {
        let (grpc, unreserve) = (grpc.clone(), unreserve.clone());
        async move {
            grpc.clone().reserve(live + i).await?;
            unreserve.record(tokio::time::timeout(timeout, grpc.unreserve(i)).await);
            Ok(())
        }
    }));

    let procs: Vec<&Service> = stack.procs().collect();
    let names: Vec<&str> =
        procs.iter().map(|p| p.name().trim_start_matches("waterline-")).collect();
    let mut csv = match &a.csv {
        Some(path) => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let mut file = std::fs::File::create(path)
                .with_context(|| format!("creating {}", path.display()))?;
            writeln!(file, "{CSV_HEADER}")?;
            Some(file)
        }
        None => None,
    };
    let read = || procs.iter().map(|p| ProcStat::of(p)).collect::<Result<Vec<_>>>();
    let mut last = read()?;
    let mut last_t = start;
    let mut floor: Vec<u64> = last.iter().map(|s| s.rss_kib).collect();
    let mut peak = floor.clone();
    let mut samples = Vec::new();
    let mut next = start + a.sample_every;
    let mut ticker = tokio::time::interval(Duration::from_secs(1).min(a.sample_every));
    // The sample at the deadline is the last one; Ctrl-C ends the run early, judged as far
    // as it went (and the spawned processes are stopped).
    let mut interrupted = std::pin::pin!(tokio::signal::ctrl_c());
    loop {
        let tick = tokio::select! {
            tick = ticker.tick() => tick,
            _ = &mut interrupted => {
                println!("interrupted: judging the samples so far");
                break;
            }
        };
        if tick > deadline + Duration::from_millis(500) {
            break;
        }
        let stats = read()?;
        for (k, s) in stats.iter().enumerate() {
            floor[k] = floor[k].min(s.rss_kib);
            peak[k] = peak[k].max(s.rss_kib);
        }
        let now = Instant::now();
        if now + Duration::from_millis(100) < next {
            continue;
        }
        next += a.sample_every;
        let secs = (now - last_t).as_secs_f64();
        let sample = Sample {
            t: (now - start).as_secs_f64(),
            load1: load_average(),
            procs: (0..stats.len())
                .map(|k| ProcSample {
                    rss_floor_kib: floor[k],
                    rss_peak_kib: peak[k],
                    cpu_pct: (stats[k].cpu_secs - last[k].cpu_secs) / secs * 100.0,
                })
                .collect(),
            collector_ledger: gauge(&stack.collector, "waterline_ledger_entries").await,
            scorer_ledger: gauge(&stack.scorer, "waterline_ledger_entries").await,
            forward_queued: gauge(&stack.scorer, "waterline_forward_queued").await,
            requests: load.kinds().iter().map(|(_, c)| c.snapshot()).collect(),
        };
        println!("{}", sample.progress(&names));
        if let Some(file) = csv.as_mut() {
            writeln!(file, "{}", sample.csv())?;
        }
        samples.push(sample);
        floor = stats.iter().map(|s| s.rss_kib).collect();
        peak = floor.clone();
        (last, last_t) = (stats, now);
    }
    for task in tasks {
        task.abort();
    }
    let seconds = start.elapsed().as_secs_f64();
    for service in &procs {
        service.check_running()?;
    }
    Ok(judge(a, cluster, &names, &samples, &load, seconds))
}

/// The summary and the verdict: RSS per live ledger entry and per node after the warm-up.
/// `passed` is false, and `failures` says why, when a judged ratio drifted, the ledger did not
/// stay steady, or a request failed other than by timing out.
fn judge(
    a: &SoakArgs,
    cluster: usize,
    names: &[&str],
    samples: &[Sample],
    load: &Load,
    seconds: f64,
) -> Value {
    // The warm-up also lasts until the collector holds the live pods: on a busy machine the
    // scorer's forwarder takes a while to hand it the first --live-pods Reserves.
    let filled = samples.iter().position(|s| s.collector_ledger >= a.live_pods as f64);
    let judged: Vec<&Sample> = samples
        .iter()
        .enumerate()
        .filter(|(k, s)| s.t >= a.warmup.as_secs_f64() - 0.5 && filled.is_some_and(|f| *k >= f))
        .map(|(_, s)| s)
        .collect();
    let nodes = cluster as f64;
    let mut failures = Vec::new();
    if judged.len() < 2 {
        return json!({"passed": false, "failures": [format!("only {} samples after the warm-up", judged.len())]});
    }
    let mut procs = serde_json::Map::new();
    println!(
        "\nsoak summary: {seconds:.0} s, {} samples judged ({:.0}–{:.0} s), max drift {} %",
        judged.len(),
        judged[0].t,
        judged[judged.len() - 1].t,
        a.max_drift
    );
    for (k, name) in names.iter().enumerate() {
        let rss: Vec<f64> =
            judged.iter().map(|s| s.procs[k].rss_floor_kib as f64 * 1024.0).collect();
        let peak =
            judged.iter().map(|s| s.procs[k].rss_peak_kib as f64 * 1024.0).fold(0.0, f64::max);
        let cpu: Vec<f64> = judged.iter().map(|s| s.procs[k].cpu_pct).collect();
        let ledger: Option<Vec<f64>> = match *name {
            "collector" => Some(judged.iter().map(|s| s.collector_ledger).collect()),
            "scorer" => Some(judged.iter().map(|s| s.scorer_ledger).collect()),
            _ => None,
        };
        let per_node: Vec<f64> = rss.iter().map(|r| r / nodes).collect();
        let node_drift = drift(&per_node);
        let node_spread = spread(&per_node);
        let (min, max) =
            (rss.iter().cloned().fold(f64::MAX, f64::min), rss.iter().cloned().fold(0.0, f64::max));
        let mean_cpu = cpu.iter().sum::<f64>() / cpu.len() as f64;
        let mut line = format!(
            "  {name:<9} RSS {:.1} → {:.1} MiB (min {:.1}, max {:.1}, peak {:.1}); per node {:.0} → {:.0} B, drift {node_drift:.1} % (samples within {node_spread:.1} %)",
            rss[0] / 1048576.0,
            rss[rss.len() - 1] / 1048576.0,
            min / 1048576.0,
            max / 1048576.0,
            peak / 1048576.0,
            per_node[0],
            per_node[per_node.len() - 1],
        );
        if node_drift > a.max_drift {
            failures.push(format!("{name}: RSS per node drifted {node_drift:.1} %"));
        }
        let mut entry = json!({
            "rss_mib_first": rss[0] / 1048576.0, "rss_mib_last": rss[rss.len() - 1] / 1048576.0,
            "rss_mib_min": min / 1048576.0, "rss_mib_max": max / 1048576.0,
            "rss_mib_peak": peak / 1048576.0,
            "rss_per_node_bytes_first": per_node[0],
            "rss_per_node_bytes_last": per_node[per_node.len() - 1],
            "rss_per_node_drift_pct": node_drift, "rss_per_node_spread_pct": node_spread, "cpu_pct_mean": mean_cpu,
        });
        if let Some(ledger) = ledger {
            if ledger.iter().any(|l| !l.is_finite() || *l <= 0.0) {
                failures.push(format!("{name}: no live ledger entries in a judged sample"));
            } else {
                let per_entry: Vec<f64> = rss.iter().zip(&ledger).map(|(r, l)| r / l).collect();
                let entry_drift = drift(&per_entry);
                let entry_spread = spread(&per_entry);
                let ledger_drift = drift(&ledger);
                line.push_str(&format!(
                    "; per live entry {:.0} → {:.0} B, drift {entry_drift:.1} % (samples within {entry_spread:.1} %; ledger {:.0} → {:.0}, drift {ledger_drift:.1} %)",
                    per_entry[0],
                    per_entry[per_entry.len() - 1],
                    ledger[0],
                    ledger[ledger.len() - 1]
                ));
                if entry_drift > a.max_drift {
                    failures.push(format!("{name}: RSS per live entry drifted {entry_drift:.1} %"));
                }
                if ledger_drift > a.max_drift {
                    failures.push(format!(
                        "{name}: the ledger is not steady ({ledger_drift:.1} %): entries do not retire as fast as they come"
                    ));
                }
                entry["rss_per_entry_bytes_first"] = json!(per_entry[0]);
                entry["rss_per_entry_bytes_last"] = json!(per_entry[per_entry.len() - 1]);
                entry["rss_per_entry_drift_pct"] = json!(entry_drift);
                entry["rss_per_entry_spread_pct"] = json!(entry_spread);
                entry["ledger_first"] = json!(ledger[0]);
                entry["ledger_last"] = json!(ledger[ledger.len() - 1]);
            }
        }
        line.push_str(&format!("; CPU {mean_cpu:.0} % of a core"));
        println!("{line}");
        procs.insert((*name).into(), entry);
    }
    let mut requests = serde_json::Map::new();
    for (kind, counters) in load.kinds() {
        let value = counters.json(seconds);
        println!(
            "  {kind:<9} {} ok ({:.1}/s), {} errors, {} skipped {}",
            value["ok"],
            value["ok_per_s"].as_f64().unwrap_or(0.0),
            value["errors"],
            value["skipped"],
            value["error_kinds"]
        );
        // Timeouts depend on the machine; any other failure is the services'.
        if let Some(kinds) = value["error_kinds"].as_object() {
            for (error, n) in kinds.iter().filter(|(k, _)| k.as_str() != "timeout") {
                failures.push(format!("{kind}: {n} × {error}"));
            }
        }
        requests.insert(kind.into(), value);
    }
    // Reported, not judged: how far behind the scorer's forwarder is depends on the CPU the
    // machine leaves it (a timing matter); a queue that keeps growing means the collector
    // (and every other scorer) learns of placements later and later.
    let queue: Vec<f64> = judged.iter().map(|s| s.forward_queued).collect();
    let third = queue.len().div_ceil(3);
    let (q0, q1) = (median(&queue[..third]), median(&queue[queue.len() - third..]));
    println!("  scorer's forward queue (median of the first / last third): {q0:.0} → {q1:.0} ops");
    let loads: Vec<f64> = samples.iter().map(|s| s.load1).collect();
    let (lmin, lmax) =
        (loads.iter().cloned().fold(f64::MAX, f64::min), loads.iter().cloned().fold(0.0, f64::max));
    println!("  load average (1 min) {lmin:.2}–{lmax:.2} during the run (a shared machine)");
    let passed = failures.is_empty();
    println!(
        "  verdict: {}",
        if passed { "PASS".to_owned() } else { format!("FAIL: {}", failures.join("; ")) }
    );
    let result = json!({
        "seconds": seconds, "warmup_s": a.warmup.as_secs_f64(), "cluster_nodes": nodes,
        "longest_window": if a.spawn.policy.is_some() { "as in the file" } else { LONGEST_WINDOW },
        "absorb_window": if a.spawn.policy.is_some() { "as in the file" } else { ABSORB_WINDOW },
        "live_pods": a.live_pods,
        "rates": {"score": a.score_rate, "extender": a.extender_rate, "reserve": a.reserve_rate},
        "processes": procs, "requests": requests, "load1_min": lmin, "load1_max": lmax,
        "forward_queued_first_third": q0, "forward_queued_last_third": q1,
        "passed": passed, "failures": failures,
    });
    result
}
