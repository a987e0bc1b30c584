//! `kubectl waterline` (also `waterline`): what the scorer and the collector know, read over
//! their gRPC APIs. `top` for every node's load and rank, `explain` for one pod's verdicts
//! and score terms, `ledger` for a node's recent placements. Tables on a terminal are
//! coloured and fit its width; through a pipe they are plain; `-o json` everywhere.
#![forbid(unsafe_code)]

pub mod connect;
pub mod explain;
pub mod fetch;
pub mod format;
pub mod learned;
pub mod ledger;
pub mod pod;
pub mod table;
pub mod top;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::connect::{Clients, Endpoints};
use crate::pod::PodFlags;
use crate::table::{ColourChoice, Render};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "What waterline's scorer and collector know: node load, a pod's verdicts, the ledger"
)]
pub struct Cli {
    #[command(flatten)]
    pub endpoints: Endpoints,

    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,

    /// Colour the table: auto colours a terminal only (and never with NO_COLOR set).
    #[arg(long, global = true, value_enum, default_value_t = ColourChoice::Auto)]
    pub color: ColourChoice,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned columns (coloured and cut to the width on a terminal).
    Table,
    /// Every field, one JSON document (one per line with --watch).
    Json,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    Top(TopArgs),
    Explain(ExplainArgs),
    Ledger(LedgerArgs),
    Learned(LearnedArgs),
}

/// Every node's observed, ledger and predicted cpu and memory, staleness and rank.
///
/// Where each column comes from: the scorer's Evaluate over all its nodes gives FILTER
/// (accepted, or Filter's reason) and the node set; its Score with explain gives SCORE and,
/// for the --cpu-metric and --memory-metric terms, OBS% (last observed utilisation), LEDGER%
/// (recent placements the metric does not show yet) and PRED% (observed + ledger + the probe
/// pod); STALE counts the metrics with no fresh sample (their curve gives the stale score).
/// RANK orders the nodes Filter accepts by score (1 = the scorer's pick; ties share a rank).
/// The collector's ListNodes gives AGE (the older of the two metrics' samples) and PODS
/// (its ledger entries on the node), and adds nodes the scorer does not know yet. The probe
/// pod is best-effort (the policy's estimator sizes it) unless --cpu/--memory say otherwise.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct TopArgs {
    /// Row order.
    #[arg(long, value_enum, default_value_t = top::SortBy::Predicted)]
    pub sort: top::SortBy,

    /// Refresh every SECONDS (2 when given without a value) until interrupted.
    #[arg(short = 'w', long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "2",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub watch: Option<u64>,

    /// The policy metric the CPU columns show.
    #[arg(long, default_value = "cpu_usage_avg_5m")]
    pub cpu_metric: String,

    /// The policy metric the MEM columns show.
    #[arg(long, default_value = "mem_usage_avg_5m")]
    pub memory_metric: String,

    #[command(flatten)]
    pub probe: PodFlags,
}

/// Each node's verdict for a pod and the terms of its score, as the scorer computes them now.
///
/// The pod is a v1.Pod manifest (YAML or JSON; `-` reads stdin) and/or the flags (which
/// override the manifest's values). VERDICT and REASON are the scorer's Evaluate (Filter);
/// SCORE and the per-metric lines are its Score with explain: OBS% observed, LEDGER% recent
/// placements, POD% this pod's estimate, PRED% their sum, CURVE the curve's score of it (the
/// stale score when no fresh sample exists) and WEIGHT its share of SCORE.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct ExplainArgs {
    /// Pod manifest file (YAML or JSON), or `-` for stdin.
    #[arg(value_name = "POD")]
    pub manifest: Option<PathBuf>,

    #[command(flatten)]
    pub pod: PodFlags,

    /// Only this node (repeatable).
    #[arg(long = "node", value_name = "NODE")]
    pub nodes: Vec<String>,

    /// At most this many nodes, best first; 0: all.
    #[arg(long, default_value_t = 0)]
    pub limit: usize,
}

/// Recent placements on a node (the collector's ledger) and when each hands over to the
/// metrics.
///
/// From the collector's ListNodes: SOURCE is how the placement was learnt (reserve, watch,
/// provisional), PLACED its PodScheduled or Reserve time, CPU/MEMORY the estimator's usage the
/// ledger adds, HANDS OVER IN how long it still counts toward the slowest metric (each
/// metric's absorb window), FIRST METRIC DONE IN the quickest, EXPIRES IN when an unconfirmed
/// provisional guess leaves.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct LedgerArgs {
    pub node: String,
}

/// What each workload's running pods use, as the collector learned it from Prometheus
/// (estimator.learn), and so how its next pods are priced.
///
/// From the collector's ListNodes: one line per workload (namespace/Kind/name, a Deployment
/// rather than its ReplicaSets), per resource the RATIO of usage to request its new pods
/// are priced by (the policy's quantile across its pods; `-` when they request none: they
/// are priced at USAGE), USAGE the same quantile of their absolute usage, SPREAD highest
/// minus lowest pod, and the evidence, PODS and SAMPLES. A workload not listed, or a
/// resource shown as `-`, is priced by the policy's factors.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct LearnedArgs {
    /// Only this namespace.
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
}

/// Where output goes and how it is drawn.
#[derive(Clone, Copy, Debug)]
struct Out {
    render: Render,
    json: bool,
    terminal: bool,
}

/// The program's name as invoked: `kubectl waterline` for the kubectl plugin binary.
pub fn program_name(argv0: Option<&std::ffi::OsStr>) -> &'static str {
    let file = argv0.and_then(|a| std::path::Path::new(a).file_name()).and_then(|f| f.to_str());
    match file {
        Some(name) if name.starts_with("kubectl-") => "kubectl waterline",
        _ => "waterline",
    }
}

/// The main of both binaries.
pub fn main() -> ExitCode {
    let name = program_name(std::env::args_os().next().as_deref());
    let matches = Cli::command().name(name).bin_name(name).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: starting the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    let terminal = std::io::stdout().is_terminal();
    let colour = table::colour_enabled(
        cli.color,
        terminal,
        std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        std::env::var_os("TERM").is_some_and(|t| t == "dumb"),
    );
    let columns = terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| w.0);
    let out = Out {
        render: Render { colour, width: table::width_limit(terminal, columns) },
        json: cli.output == Output::Json,
        terminal,
    };
    let clients = Clients::new(&cli.endpoints)?;
    match cli.command {
        Command::Top(args) => run_top(&clients, &args, out).await,
        Command::Explain(args) => print(&explain_text(&clients, &args, out).await?),
        Command::Ledger(args) => print(&ledger_text(&clients, &args, out).await?),
        Command::Learned(args) => print(&learned_text(&clients, &args, out).await?),
    }
}

fn print(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        // `| head` closing the pipe is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    }
}

fn json(value: &impl serde::Serialize, compact: bool) -> Result<String> {
    let mut text =
        if compact { serde_json::to_string(value)? } else { serde_json::to_string_pretty(value)? };
    text.push('\n');
    Ok(text)
}

async fn run_top(clients: &Clients, args: &TopArgs, out: Out) -> Result<()> {
    let pod = pod::pod_info(None, &args.probe, "waterline-cli-probe")?;
    let Some(every) = args.watch else {
        return print(&top_text(clients, args, &pod, out, false).await?);
    };
    loop {
        let frame = match top_text(clients, args, &pod, out, true).await {
            Ok(text) => text,
            // A watch outlives a restart of either service: the error is this frame.
            Err(error) => format!("error: {error:#}\n"),
        };
        let clear = if out.terminal && !out.json { "\x1b[H\x1b[2J" } else { "" };
        let stamp =
            if out.json { String::new() } else { format!("every {every}s (Ctrl-C stops)\n") };
        print(&format!("{clear}{stamp}{frame}"))?;
        tokio::time::sleep(Duration::from_secs(every)).await;
    }
}

async fn top_text(
    clients: &Clients,
    args: &TopArgs,
    pod: &waterline_api::v1::PodInfo,
    out: Out,
    watching: bool,
) -> Result<String> {
    let listing = fetch::list_nodes(clients, vec![]).await?;
    let collector_nodes: Vec<String> = listing.nodes.iter().map(|n| n.name.clone()).collect();
    let view = fetch::scorer_view(clients, pod, &collector_nodes).await?;
    let headline = top::Headline {
        cpu_metric: args.cpu_metric.clone(),
        memory_metric: args.memory_metric.clone(),
    };
    let mut rows = top::rows(&view, &listing, &headline, SystemTime::now());
    top::sort(&mut rows, args.sort);
    let metric_errors: std::collections::BTreeMap<String, String> = listing
        .metrics
        .iter()
        .filter(|m| !m.last_error.is_empty())
        .map(|m| (m.metric.clone(), m.last_error.clone()))
        .collect();
    if out.json {
        let report = top::TopReport {
            scorer: clients.scorer_url.clone(),
            collector: clients.collector_url.clone(),
            scorer_snapshot_age_seconds: view.snapshot_age_seconds,
            probe: pod::describe(pod),
            metric_errors,
            nodes: rows,
        };
        return json(&report, watching);
    }
    let mut text = format!(
        "scorer {}: {} nodes, snapshot {} old · collector {}: {} nodes, {} ledger entries\nprobe pod {}\n",
        clients.scorer_url,
        view.nodes.len(),
        view.snapshot_age_seconds.map_or("-".into(), format::secs),
        clients.collector_url,
        listing.nodes.len(),
        listing.ledger.len(),
        pod::describe(pod),
    );
    for (metric, error) in &metric_errors {
        text.push_str(&format!("collector: last poll of {metric} failed: {error}\n"));
    }
    text.push('\n');
    text.push_str(&top::table(&rows).render(out.render));
    Ok(text)
}

async fn explain_text(clients: &Clients, args: &ExplainArgs, out: Out) -> Result<String> {
    let pod = pod::pod_info(args.manifest.as_deref(), &args.pod, "waterline-cli-explain")?;
    let view = fetch::scorer_view(clients, &pod, &args.nodes).await?;
    let mut verdicts = explain::verdicts(&view);
    let estimate = view.estimate.as_ref().map(explain::Estimate::from);
    // Of the scorer's own nodes: a --node it does not know is neither.
    let feasible = verdicts.iter().filter(|v| v.feasible && v.known_to_scorer).count();
    let rejected = verdicts.iter().filter(|v| !v.feasible).count();
    if !args.nodes.is_empty() {
        verdicts.retain(|v| args.nodes.contains(&v.node));
    }
    if args.limit > 0 {
        verdicts.truncate(args.limit);
    }
    if out.json {
        let report = explain::ExplainReport {
            scorer: clients.scorer_url.clone(),
            pod: (&pod).into(),
            scorer_snapshot_age_seconds: view.snapshot_age_seconds,
            feasible,
            rejected,
            estimate,
            nodes: verdicts,
        };
        return json(&report, false);
    }
    let estimate = estimate.map(|e| format!("{}\n", explain::estimate_line(&e)));
    Ok(format!(
        "pod {}\nscorer {}: {feasible} feasible, {rejected} rejected, snapshot {} old\n{}\n{}",
        pod::describe(&pod),
        clients.scorer_url,
        view.snapshot_age_seconds.map_or("-".into(), format::secs),
        estimate.unwrap_or_default(),
        explain::table(&verdicts).render(out.render)
    ))
}

async fn ledger_text(clients: &Clients, args: &LedgerArgs, out: Out) -> Result<String> {
    let listing = fetch::list_nodes(clients, vec![args.node.clone()]).await?;
    let report = ledger::report(&clients.collector_url, &args.node, &listing, SystemTime::now());
    if out.json {
        return json(&report, false);
    }
    let mut text = format!("collector {}: node {}", clients.collector_url, args.node);
    match (report.known_to_collector, report.capacity_cpu_millis, report.capacity_memory_bytes) {
        (false, _, _) => text.push_str(" (not a node the collector knows)"),
        (true, Some(cpu), Some(memory)) if cpu > 0 || memory > 0 => text.push_str(&format!(
            ", allocatable cpu {} memory {}",
            format::cpu(cpu),
            format::bytes(memory)
        )),
        _ => {}
    }
    if report.placements.is_empty() {
        text.push_str("\nno recent placements in the ledger\n");
        return Ok(text);
    }
    text.push_str(&format!(", {} recent placements\n\n", report.placements.len()));
    text.push_str(&ledger::table(&report).render(out.render));
    Ok(text)
}

async fn learned_text(clients: &Clients, args: &LearnedArgs, out: Out) -> Result<String> {
    // Only the table is wanted: ask for a node no cluster has, so no node comes back.
    let listing = fetch::list_nodes(clients, vec![String::new()]).await?;
    let report = learned::report(&clients.collector_url, &listing, args.namespace.as_deref());
    if out.json {
        return json(&report, false);
    }
    let mut text = format!(
        "collector {}: {} workloads learned\n",
        clients.collector_url,
        report.workloads.len()
    );
    if report.workloads.is_empty() {
        text.push_str(
            "every pod is priced by the policy's factors (no workload has enough evidence, \
             or estimator.learn is off or its series are absent)\n",
        );
        return Ok(text);
    }
    text.push('\n');
    text.push_str(&learned::table(&report).render(out.render));
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn the_plugin_binary_calls_itself_kubectl_waterline() {
        assert_eq!(
            program_name(Some(OsStr::new("/usr/local/bin/kubectl-waterline"))),
            "kubectl waterline"
        );
        assert_eq!(program_name(Some(OsStr::new("target/debug/waterline"))), "waterline");
        assert_eq!(program_name(None), "waterline");
    }

    #[test]
    fn the_flags_parse() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(["waterline", "top", "--watch", "--sort", "score"]).unwrap();
        let Command::Top(top) = cli.command else { panic!("not top") };
        assert_eq!((top.watch, top.sort), (Some(2), top::SortBy::Score));
        assert!(Cli::try_parse_from(["waterline", "top", "--watch", "0"]).is_err());
        let cli = Cli::try_parse_from([
            "waterline",
            "-o",
            "json",
            "explain",
            "--cpu",
            "2",
            "--memory",
            "4Gi",
        ])
        .unwrap();
        let Command::Explain(explain) = cli.command else { panic!("not explain") };
        assert_eq!((explain.pod.cpu, explain.pod.memory), (Some(2000), Some(4 << 30)));
        assert_eq!(cli.output, Output::Json);
        let error =
            Cli::try_parse_from(["waterline", "explain", "--cpu", "lots"]).unwrap_err().to_string();
        assert!(error.contains("--cpu"), "{error}");
    }
}
