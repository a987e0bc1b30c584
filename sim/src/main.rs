//! `waterline-sim`: see sim/README.md.
#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use waterline_sim::report::{markdown, run_all};
use waterline_sim::scenario::{SHIPPED, Timing, parse_scenario, shipped};
use waterline_sim::strategy::{self, Strategy};

/// Placement-quality simulator: replays a cluster through waterline's engine and other
/// strategies, judging placements by true usage.
#[derive(Parser)]
#[command(name = "waterline-sim", version)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one scenario through several strategies; print a Markdown table and write
    /// summary.json, one <strategy>.csv (time_s,node,cpu_pct,mem_pct) per strategy and the
    /// pictures (heatmap-<strategy>.svg, hottest.svg, cdf.svg).
    Run(RunArgs),
    /// List the shipped scenarios, one line each.
    Scenarios,
    /// Print SIMULATION.md's generated part from the out dirs of earlier runs: the target
    /// check (the default policy `waterline` against the peers), then per scenario the
    /// measures, one column per strategy (others than the registered ones are context).
    Report(ReportArgs),
    /// Run scenarios across seeds, paths and scheduler timings and print, per scenario, one
    /// Markdown row per path and timing with every strategy's overload node·s and pending
    /// pod·s totalled over the seeds, and the target's verdict on the totals.
    Sweep(SweepArgs),
    /// Build an explicit-list scenario from a real Prometheus: nodes (kube-state-metrics
    /// allocatable, usage from the policy's own 5 m queries), pods (kube-state-metrics v2)
    /// and their true usage (cAdvisor). Gaps are listed in the file's header.
    Import(ImportArgs),
}

#[derive(Parser)]
struct ImportArgs {
    /// Prometheus base URL (http or https), e.g. http://prometheus:9090.
    #[arg(long, env = "WATERLINE_PROMETHEUS_URL", value_name = "URL")]
    prometheus_url: String,
    /// Start of the window: RFC 3339 (2026-11-30T08:00:00Z) or Unix seconds.
    #[arg(long, value_name = "TIME")]
    from: String,
    /// End of the window (same forms).
    #[arg(long, value_name = "TIME")]
    to: String,
    /// Resolution of the range queries and the scenario's series.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    step: String,
    /// The policy whose cpu and memory 5 m queries (and nodeMapping labels) read node usage;
    /// its water level and cpu filter become the scenario's target and threshold. Default:
    /// the built-in policy.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The scenario's name.
    #[arg(long, default_value = "imported")]
    name: String,
    /// The pipeline's warm-up before the window (pods running before it start then).
    #[arg(long, default_value = "1h", value_name = "DURATION")]
    warmup: String,
    /// Where to write the scenario (YAML).
    #[arg(long, value_name = "SCENARIO.yaml")]
    out: PathBuf,
}

#[derive(Parser)]
struct SweepArgs {
    /// Scenario files or shipped names.
    #[arg(required = true, value_name = "SCENARIO")]
    scenarios: Vec<String>,
    /// As for `run`.
    #[arg(long = "policy", value_name = "FILE")]
    policies: Vec<PathBuf>,
    /// As for `run` (default: every registered strategy).
    #[arg(long, value_delimiter = ',', value_name = "STRATEGY,...")]
    compare: Vec<String>,
    /// Seeds, e.g. `1-10` or `1,4,7` (default: each scenario's own).
    #[arg(long, value_name = "SEEDS")]
    seeds: Option<String>,
    /// Paths to run (default: each scenario's own).
    #[arg(long, value_delimiter = ',', value_name = "PATH,...")]
    path: Vec<PathArg>,
    /// Watch lags to sweep, e.g. `20ms,200ms,2s` (default: the scenario's).
    #[arg(long, value_name = "DURATIONS")]
    watch_lag: Option<String>,
    /// Cycle times to sweep, e.g. `10ms,40ms` (default: the scenario's).
    #[arg(long, value_name = "DURATIONS")]
    cycle: Option<String>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum PathArg {
    Plugin,
    Extender,
}

impl From<PathArg> for strategy::Path {
    fn from(p: PathArg) -> Self {
        match p {
            PathArg::Plugin => strategy::Path::Plugin,
            PathArg::Extender => strategy::Path::Extender,
        }
    }
}

#[derive(Parser)]
struct ReportArgs {
    /// Out dirs of `waterline-sim run`, each holding a summary.json, in the order to show.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Copy each scenario's hottest.svg, cdf.svg and waterline's heat map into
    /// DOCS/<scenario>/, and link them (DOCS as given, relative to the Markdown file).
    #[arg(long, value_name = "DOCS")]
    docs: Option<PathBuf>,
}

#[derive(Parser)]
struct RunArgs {
    /// A scenario file (YAML, see sim/README.md) or the name of a shipped scenario
    /// (`waterline-sim scenarios` lists them).
    scenario: String,
    /// A waterline policy file; each one runs as a waterline strategy labelled by the
    /// file's stem. Repeatable.
    #[arg(long = "policy", value_name = "FILE")]
    policies: Vec<PathBuf>,
    /// Comma-separated strategies to run as well (waterline = the default policy,
    /// kube-default = kube-scheduler's request scoring). Without --compare and --policy:
    /// waterline,kube-default.
    #[arg(long, value_delimiter = ',', value_name = "STRATEGY,...")]
    compare: Vec<String>,
    /// Seed for the scenario's generators and the tie-breaking (default: the file's seed).
    #[arg(long)]
    seed: Option<u64>,
    /// Directory for summary.json, the per-strategy CSV files and the pictures (created if
    /// missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Skip the pictures (SVG): only summary.json, the CSV files and the table.
    #[arg(long)]
    no_plots: bool,
    /// Run on this path instead of the scenario's.
    #[arg(long, value_name = "PATH")]
    path: Option<PathArg>,
    /// Override the scheduler's timing, e.g. `cycle=40ms,bindDelay=200ms,watchLag=2s` (any
    /// subset; the rest stays the scenario's).
    #[arg(long, value_name = "KEY=DURATION,...")]
    timing: Option<String>,
}

fn load_scenario(arg: &str) -> anyhow::Result<String> {
    let path = Path::new(arg);
    if path.exists() {
        return std::fs::read_to_string(path).with_context(|| format!("reading {arg}"));
    }
    match shipped(arg) {
        Some(text) => Ok(text.to_owned()),
        None => bail!(
            "{arg}: no such file and no shipped scenario of that name (shipped: {})",
            SHIPPED.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn strategies(args: &RunArgs) -> anyhow::Result<Vec<Box<dyn Strategy>>> {
    let names: Vec<String> = if args.compare.is_empty() && args.policies.is_empty() {
        vec!["waterline".into(), "kube-default".into()]
    } else {
        args.compare.clone()
    };
    build(&args.policies, &names)
}

/// The `--policy` runs, then the named strategies.
fn build(policies: &[PathBuf], names: &[String]) -> anyhow::Result<Vec<Box<dyn Strategy>>> {
    let mut list: Vec<Box<dyn Strategy>> = Vec::new();
    for file in policies {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let policy = waterline_core::policy::parse_policy(&text)
            .with_context(|| format!("{}", file.display()))?;
        let label = file.file_stem().map_or("policy".into(), |s| s.to_string_lossy().into_owned());
        list.push(strategy::waterline_deployed(&label, policy)?);
    }
    for name in names {
        list.push(strategy::by_name(name.trim())?);
    }
    Ok(list)
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    let text = load_scenario(&args.scenario)?;
    let mut scenario = parse_scenario(&text, args.seed).with_context(|| args.scenario.clone())?;
    if let Some(path) = args.path {
        scenario.scheduler.path = path.into();
    }
    if let Some(timing) = &args.timing {
        Timing::parse(timing)?.apply(&mut scenario.scheduler);
    }
    let mut list = strategies(&args)?;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(1000);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {percent}% ({eta})")
                .expect("a valid template"),
        );
        bar.set_message(scenario.name.clone());
        bar
    });
    let mut progress = |done: i64, total: i64| {
        if let Some(bar) = &bar {
            bar.set_position((done.max(0) * 1000 / total.max(1)) as u64);
        }
    };
    let summary = run_all(&scenario, &mut list, Some(&args.out), &mut progress)?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if !args.no_plots {
        waterline_sim::plot::write_plots(&args.out, &summary)?;
    }
    println!("{}", markdown(&summary));
    Ok(())
}

fn import(args: ImportArgs) -> anyhow::Result<()> {
    use waterline_sim::import::{Window, assemble, fetch, parse_time, to_yaml, usage_queries};
    let policy = match &args.policy {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            waterline_core::policy::parse_policy(&text)
                .with_context(|| format!("{}", file.display()))?
        }
        None => waterline_core::Policy::default(),
    };
    let seconds = |text: &str, flag: &str| -> anyhow::Result<f64> {
        Ok(waterline_core::time::parse_duration(text).with_context(|| format!("--{flag}"))?.0
            as f64
            / 1000.0)
    };
    let window = Window {
        from: parse_time(&args.from)?,
        to: parse_time(&args.to)?,
        step: seconds(&args.step, "step")?.max(1.0),
    };
    if window.to <= window.from {
        bail!(waterline_sim::import::ImportError::EmptyWindow);
    }
    let warmup = seconds(&args.warmup, "warmup")?;
    let queries = usage_queries(&policy)?;
    let fetched = fetch(&args.prometheus_url, &window, &queries)?;
    let mut imported = assemble(&fetched, &window, warmup);
    imported.source = args.prometheus_url.clone();
    imported.target = match policy.curve {
        waterline_core::policy::Curve::WaterLevel { target } => target,
        _ => 40.0,
    };
    imported.threshold = policy
        .metrics
        .iter()
        .find(|m| m.resource == waterline_core::policy::Resource::Cpu && m.filter_above.is_some())
        .and_then(|m| m.filter_above)
        .unwrap_or(65.0);
    let text = to_yaml(&imported, &args.name, warmup);
    // What we write must be a scenario the simulator reads.
    waterline_sim::scenario::parse_scenario(&text, None).context("the imported scenario")?;
    std::fs::write(&args.out, &text).with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!(
        "{}: {} nodes, {} pods, {} notes",
        args.out.display(),
        imported.nodes.len(),
        imported.pods.len(),
        imported.notes.len()
    );
    Ok(())
}

/// `1-10`, `1,4,7` or a mix.
fn parse_seeds(text: &str) -> anyhow::Result<Vec<u64>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.trim().parse::<u64>()?..=b.trim().parse::<u64>()?),
            None => out.push(part.parse()?),
        }
    }
    Ok(out)
}

fn sweep(args: SweepArgs) -> anyhow::Result<()> {
    use waterline_sim::report::sweep::{Axes, markdown, parse_list, sweep};
    let texts: Vec<String> =
        args.scenarios.iter().map(|s| load_scenario(s)).collect::<anyhow::Result<_>>()?;
    let list = |flag: &str, v: &Option<String>| -> anyhow::Result<Vec<waterline_core::Millis>> {
        v.as_deref()
            .map_or(Ok(Vec::new()), |t| parse_list(t).map_err(|e| anyhow::anyhow!("--{flag}: {e}")))
    };
    let (lags, cycles) = (list("watch-lag", &args.watch_lag)?, list("cycle", &args.cycle)?);
    let mut timings = Vec::new();
    for cycle in cycles.iter().map(|c| Some(*c)).chain(cycles.is_empty().then_some(None)) {
        for lag in lags.iter().map(|l| Some(*l)).chain(lags.is_empty().then_some(None)) {
            timings.push(Timing { cycle, watch_lag: lag, bind_delay: None });
        }
    }
    let axes = Axes {
        seeds: args.seeds.as_deref().map(parse_seeds).transpose()?.unwrap_or_default(),
        paths: args.path.iter().map(|p| (*p).into()).collect(),
        timings,
    };
    let names: Vec<String> = if args.compare.is_empty() {
        strategy::NAMES.iter().map(|n| n.to_string()).collect()
    } else {
        args.compare.clone()
    };
    // Fail early on a bad policy file or name.
    build(&args.policies, &names)?;
    let make = || {
        build(&args.policies, &names).map_err(|e| {
            waterline_sim::report::ReportError::Scenario(waterline_sim::scenario::ScenarioError(
                e.to_string(),
            ))
        })
    };
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let rows = sweep(&refs, &axes, &parse_scenario, &make)?;
    print!("{}", markdown(&rows));
    Ok(())
}

fn main() -> anyhow::Result<()> {
    match Args::parse().command {
        Command::Run(args) => run(args),
        Command::Sweep(args) => sweep(args),
        Command::Import(args) => import(args),
        Command::Report(args) => {
            print!("{}", waterline_sim::report::simulation_md(&args.dirs, args.docs.as_deref())?);
            Ok(())
        }
        Command::Scenarios => {
            for (name, text) in SHIPPED {
                let description = parse_scenario(text, None)
                    .map(|s| s.description)
                    .unwrap_or_else(|e| format!("(does not parse: {e})"));
                println!("{name:<22} {description}");
            }
            Ok(())
        }
    }
}
