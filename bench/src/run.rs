//! One function per subcommand: start the stack when asked, drive the load, report.

use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::args::{Args, Command, FootprintArgs, HttpArgs, LoadArgs, RpcArgs, SessionArgs};
use crate::load::{self, Outcome};
use crate::procs::{ProcStat, Stack};
use crate::report;
use crate::targets::{self, Extender, Grpc, RequestFlags};

const SCORER_HISTOGRAM: &str = "waterline_scorer_grpc_request_duration_seconds";

pub async fn run(args: Args) -> Result<()> {
    let progress = !args.no_progress;
    let (kind, mut result) = match &args.command {
        Command::Score(rpc) => ("score", grpc(rpc, Verb::Score, progress).await?),
        Command::Filter(rpc) => ("filter", grpc(rpc, Verb::Filter, progress).await?),
        Command::Evaluate(rpc) => ("evaluate", grpc(rpc, Verb::Evaluate, progress).await?),
        Command::Reserve(rpc) => ("reserve", grpc(rpc, Verb::Reserve, progress).await?),
        Command::Session(s) => ("session", session(s, progress).await?),
        Command::ExtenderPrioritize(h) => {
            ("extender-prioritize", extender(h, true, progress).await?)
        }
        Command::ExtenderFilter(h) => ("extender-filter", extender(h, false, progress).await?),
        Command::Footprint(f) => ("footprint", footprint(f, progress).await?),
        Command::PrometheusRefresh(p) => {
            ("prometheus-refresh", crate::prometheus::refresh(p).await?)
        }
        Command::Soak(s) => ("soak", crate::soak::soak(s).await?),
        Command::RecordingRules(r) => ("recording-rules", crate::recording_rules::run(r).await?),
        Command::Table(_) | Command::Record(_) => anyhow::bail!("main runs table and record"),
    };
    result["kind"] = json!(kind);
    result["label"] = json!(args.label);
    report::append_json(args.json_out.as_deref(), &result)?;
    // A soak is also a test (scripts/test.sh): its verdict is the exit status.
    if result["passed"] == json!(false) {
        anyhow::bail!("soak failed: {}", result["failures"]);
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Verb {
    Score,
    Filter,
    Evaluate,
    Reserve,
}

fn load_json(load: &LoadArgs, cluster: usize) -> Value {
    json!({
        "nodes": load.nodes, "cluster_nodes": cluster, "concurrency": load.concurrency,
        "connections": load.connections,
    })
}

/// Drives `verb` against a scorer; with `admin`, also reports the scorer's own histogram.
async fn drive_grpc(
    url: &str,
    admin: Option<&str>,
    verb: Verb,
    load: &LoadArgs,
    cluster: usize,
    flags: RequestFlags,
    progress: bool,
) -> Result<(Outcome, Option<Value>)> {
    let clients = targets::connect(url, load.connections).await?;
    let target = Grpc::new(clients, load.nodes, cluster, flags);
    let method = match verb {
        Verb::Score => "Score",
        Verb::Filter => "Filter",
        Verb::Evaluate => "Evaluate",
        Verb::Reserve => "Reserve",
    };
    let before = scrape_scorer(admin, method).await?;
    let outcome = load::drive(load, method, progress, move |i| {
        let target = target.clone();
        async move {
            match verb {
                Verb::Score => target.score(i).await,
                Verb::Filter => target.filter(i).await,
                Verb::Evaluate => target.evaluate(i).await,
                Verb::Reserve => target.reserve(i).await,
            }
        }
    })
    .await;
    let server = scorer_since(admin, method, before).await?;
    Ok((outcome, server))
}

fn print_procs(stack: &Stack) -> Value {
    println!("  (server logs in {})", stack.log_dir.display());
    let mut out = serde_json::Map::new();
    for proc in stack.procs() {
        if let (Some(pid), Ok(stat)) = (proc.pid(), ProcStat::of(proc)) {
            println!(
                "  process   {:<20} pid {:>7}  VmRSS {:>7.1} MiB  CPU {:>7.2} s",
                proc.name(),
                pid,
                stat.rss_kib as f64 / 1024.0,
                stat.cpu_secs
            );
            out.insert(
                proc.name().into(),
                json!({"rss_mib": stat.rss_kib as f64 / 1024.0, "cpu_s": stat.cpu_secs}),
            );
        }
    }
    Value::Object(out)
}

async fn grpc(rpc: &RpcArgs, verb: Verb, progress: bool) -> Result<Value> {
    let stack = if rpc.spawn.spawn { Some(Stack::start(&rpc.spawn, false).await?) } else { None };
    let url = stack.as_ref().map(|s| s.scorer.url()).unwrap_or_else(|| rpc.scorer_url.clone());
    let admin = stack.as_ref().map(|s| s.scorer.admin_url()).or_else(|| rpc.scorer_admin.clone());
    let cluster = rpc.spawn.cluster_nodes;
    let flags = RequestFlags {
        explain: rpc.explain,
        all_nodes: rpc.all_nodes,
        scores_only: rpc.scores_only,
    };
    if rpc.all_nodes && !matches!(verb, Verb::Filter | Verb::Evaluate) {
        anyhow::bail!("--all-nodes applies to filter and evaluate only");
    }
    if rpc.scores_only && verb != Verb::Score {
        anyhow::bail!("--scores-only applies to score only");
    }
    let (outcome, server) =
        drive_grpc(&url, admin.as_deref(), verb, &rpc.load, cluster, flags, progress).await?;
    let candidates = if rpc.all_nodes {
        "all_nodes".to_string()
    } else {
        format!("{} candidates", rpc.load.nodes)
    };
    let title = format!(
        "{} {candidates} of {cluster} nodes, concurrency {}{}",
        match verb {
            Verb::Score => "Score",
            Verb::Filter => "Filter",
            Verb::Evaluate => "Evaluate",
            Verb::Reserve => "Reserve",
        },
        rpc.load.concurrency,
        if rpc.explain {
            ", explain"
        } else if rpc.scores_only {
            ", scores_only"
        } else {
            ""
        }
    );
    let mut result = report_run(
        &title,
        &outcome,
        load_json(&rpc.load, cluster),
        server.as_ref(),
        stack.as_ref(),
    );
    result["explain"] = json!(rpc.explain);
    result["all_nodes"] = json!(rpc.all_nodes);
    result["scores_only"] = json!(rpc.scores_only);
    Ok(result)
}

/// Session cycles over --concurrency streams (one per worker: a worker takes a free stream,
/// runs one cycle on it and gives it back).
async fn session(s: &SessionArgs, progress: bool) -> Result<Value> {
    let stack = if s.spawn.spawn { Some(Stack::start(&s.spawn, false).await?) } else { None };
    let url = stack.as_ref().map(|st| st.scorer.url()).unwrap_or_else(|| s.scorer_url.clone());
    let admin = stack.as_ref().map(|st| st.scorer.admin_url()).or_else(|| s.scorer_admin.clone());
    let cluster = s.spawn.cluster_nodes;
    let streams = s.load.concurrency.max(1);
    let clients = targets::connect(&url, s.load.connections).await?;
    let mut free = Vec::with_capacity(streams);
    for k in 0..streams {
        free.push(
            targets::Session::open(clients[k % clients.len()].clone(), cluster, !s.without_reserve)
                .await?,
        );
    }
    let free = std::sync::Arc::new(std::sync::Mutex::new(free));
    let method = "Session.Evaluate";
    let before = scrape_scorer(admin.as_deref(), method).await?;
    let outcome = load::drive(&s.load, "Session", progress, move |i| {
        let free = free.clone();
        async move {
            // As many streams as workers: one is free unless a timed-out cycle took it.
            let taken = free.lock().map_err(|_| "session: pool poisoned".to_owned())?.pop();
            let mut stream = taken.ok_or("session: no stream left (an earlier cycle timed out)")?;
            let result = stream.cycle(i).await;
            if result.is_ok() {
                free.lock().map_err(|_| "session: pool poisoned".to_owned())?.push(stream);
            }
            result
        }
    })
    .await;
    let server = scorer_since(admin.as_deref(), method, before).await?;
    let title = format!(
        "Session {}Evaluate of all {cluster} nodes, {streams} stream(s)",
        if s.without_reserve { "" } else { "Reserve + " }
    );
    let mut result =
        report_run(&title, &outcome, load_json(&s.load, cluster), server.as_ref(), stack.as_ref());
    result["without_reserve"] = json!(s.without_reserve);
    Ok(result)
}

/// Prints a run (client, scorer histogram, processes) and gives its JSON result.
fn report_run(
    title: &str,
    outcome: &Outcome,
    load: Value,
    server: Option<&Value>,
    stack: Option<&Stack>,
) -> Value {
    report::print_outcome(title, outcome);
    let mut result = report::outcome_json(outcome);
    result["load"] = load;
    if let Some(server) = server {
        report::print_server(server);
        result["scorer"] = server.clone();
    }
    if let Some(stack) = stack {
        result["processes"] = print_procs(stack);
    }
    result
}

/// The scorer's histogram for `method` now, when its admin URL is known.
async fn scrape_scorer(admin: Option<&str>, method: &str) -> Result<Option<report::Buckets>> {
    match admin {
        Some(a) => Ok(Some(report::scrape_buckets(a, SCORER_HISTOGRAM, method).await?)),
        None => Ok(None),
    }
}

/// What the scorer's histogram for `method` says about the requests since `before`.
async fn scorer_since(
    admin: Option<&str>,
    method: &str,
    before: Option<report::Buckets>,
) -> Result<Option<Value>> {
    match (scrape_scorer(admin, method).await?, before) {
        (Some(after), Some(before)) => Ok(report::server_summary(&before, &after)),
        _ => Ok(None),
    }
}

async fn extender(h: &HttpArgs, prioritize: bool, progress: bool) -> Result<Value> {
    let stack = if h.spawn.spawn { Some(Stack::start(&h.spawn, true).await?) } else { None };
    let base = stack
        .as_ref()
        .and_then(|s| s.extender.as_ref())
        .map(|e| e.url())
        .unwrap_or_else(|| h.extender_url.clone());
    let cluster = h.spawn.cluster_nodes;
    let verb = if prioritize { "prioritize" } else { "filter" };
    let target = Extender::new(
        &base,
        &h.prefix,
        verb,
        h.load.nodes,
        cluster,
        &h.scheduler_name,
        h.load.timeout,
    )?;
    let outcome = load::drive(&h.load, verb, progress, move |i| {
        let target = target.clone();
        async move { if prioritize { target.prioritize(i).await } else { target.filter(i).await } }
    })
    .await;
    report::print_outcome(
        &format!(
            "extender {verb}: {} names of {cluster} nodes, concurrency {}",
            h.load.nodes, h.load.concurrency
        ),
        &outcome,
    );
    let mut result = report::outcome_json(&outcome);
    result["load"] = load_json(&h.load, cluster);

    if h.compare_grpc {
        let url = stack
            .as_ref()
            .map(|s| s.scorer.url())
            .or_else(|| h.scorer_url.clone())
            .context("--compare-grpc needs --spawn or --scorer-url")?;
        let admin = stack.as_ref().map(|s| s.scorer.admin_url());
        let grpc_verb = if prioritize { Verb::Score } else { Verb::Filter };
        let (direct, server) = drive_grpc(
            &url,
            admin.as_deref(),
            grpc_verb,
            &h.load,
            cluster,
            // The same call the adapter makes for prioritize.
            RequestFlags { scores_only: prioritize, ..RequestFlags::default() },
            progress,
        )
        .await?;
        report::print_outcome(
            &format!("gRPC {} directly, same load", if prioritize { "Score" } else { "Filter" }),
            &direct,
        );
        let overhead = report::p50_ms(&outcome) - report::p50_ms(&direct);
        println!("  adapter overhead (p50 extender − p50 gRPC): {overhead:.3} ms");
        result["grpc"] = report::outcome_json(&direct);
        if let Some(server) = server {
            result["grpc"]["scorer"] = server;
        }
        result["overhead_p50_ms"] = json!(overhead);
    }
    if let Some(stack) = &stack {
        result["processes"] = print_procs(stack);
    }
    Ok(result)
}

/// Waits until the scorer has forwarded everything (`waterline_forward_queued` 0) and the
/// collector's ledger gauge (refreshed every 5 s) shows `entries`; the seconds that took,
/// or `None` after `timeout`.
async fn settle(stack: &Stack, entries: f64, timeout: Duration) -> Option<f64> {
    let start = tokio::time::Instant::now();
    while start.elapsed() < timeout {
        let queued = stack.scorer.metric_value("waterline_forward_queued").await.ok();
        let ledger = stack.collector.metric_value("waterline_ledger_entries").await.ok();
        if queued == Some(0.0) && ledger.is_some_and(|l| l >= entries) {
            return Some(start.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

async fn footprint(f: &FootprintArgs, progress: bool) -> Result<Value> {
    let mut spawn = f.spawn.clone();
    if f.collector_shadow {
        spawn.collector_flags.push("--shadow".into());
    }
    let stack = Stack::start(&spawn, false).await?;
    let cluster = f.spawn.cluster_nodes;
    let shadow = if f.collector_shadow { "on" } else { "off" };
    println!(
        "footprint: {cluster} synthetic nodes, {} Reserves, collector shadow {shadow}",
        f.reserves
    );
    let idle = print_procs(&stack);

    let load = LoadArgs {
        nodes: 1,
        concurrency: f.concurrency,
        connections: 1,
        duration: Duration::from_secs(3600),
        requests: Some(f.reserves),
        warmup: Duration::ZERO,
        timeout: Duration::from_secs(5),
    };
    let (reserves, _) = drive_grpc(
        &stack.scorer.url(),
        None,
        Verb::Reserve,
        &load,
        cluster,
        RequestFlags::default(),
        progress,
    )
    .await?;
    report::print_outcome("Reserve to the scorer (its local ledger)", &reserves);
    // The scorer forwards its Reserves to the collector one at a time; so that the
    // collector's ledger fills without waiting for that queue, the same placements (same
    // uids, so the forwarded copies change nothing) also go to the collector directly.
    let collector = targets::connect_collector(&stack.collector.url()).await?;
    let direct = load::drive(&load, "collector Reserve", progress, move |i| {
        let collector = collector.clone();
        async move { targets::collector_reserve(collector, i, cluster).await }
    })
    .await;
    report::print_outcome("Reserve to the collector directly (its ledger)", &direct);
    let drained = settle(&stack, f.reserves as f64, f.drain_timeout).await;
    match drained {
        Some(secs) => println!(
            "  scorer's forward queue empty and collector ledger full {secs:.1} s after the Reserves"
        ),
        None => {
            println!("  not settled after {:?} (forward queue or ledger gauge)", f.drain_timeout)
        }
    }
    tokio::time::sleep(f.settle).await;
    let ledger = stack.collector.metric_value("waterline_ledger_entries").await.ok();
    println!("  collector ledger entries: {}", ledger.map(|v| v.to_string()).unwrap_or("?".into()));
    let filled = print_procs(&stack);

    // CPU over an idle window: the synthetic source refreshes every node each interval and
    // streams the update to the scorer; nothing else runs.
    let interval = waterline_core::time::parse_std_duration(&f.spawn.synthetic_interval)?;
    let (c0, s0) = (ProcStat::of(&stack.collector)?, ProcStat::of(&stack.scorer)?);
    tokio::time::sleep(f.duration).await;
    let (c1, s1) = (ProcStat::of(&stack.collector)?, ProcStat::of(&stack.scorer)?);
    let refreshes = f.duration.as_secs_f64() / interval.as_secs_f64();
    let collector_ms = (c1.cpu_secs - c0.cpu_secs) * 1e3 / refreshes;
    let scorer_ms = (s1.cpu_secs - s0.cpu_secs) * 1e3 / refreshes;
    println!(
        "  CPU per refresh over {:.0} s ({refreshes:.1} refreshes of {cluster} nodes): \
         collector {collector_ms:.1} ms, scorer {scorer_ms:.1} ms",
        f.duration.as_secs_f64()
    );
    let end = print_procs(&stack);
    let mut result = json!({
        "cluster_nodes": cluster,
        "collector_shadow": f.collector_shadow,
        "reserves": report::outcome_json(&reserves),
        "collector_reserves": report::outcome_json(&direct),
        "ledger_entries": ledger,
        "settled_secs": drained,
        "idle": idle, "filled": filled, "end": end,
        "refreshes": refreshes,
        "collector_cpu_ms_per_refresh": collector_ms,
        "scorer_cpu_ms_per_refresh": scorer_ms,
    });
    result["processes"] = result["end"].clone();
    Ok(result)
}
