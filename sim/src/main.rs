//! `waterline-sim`: see sim/README.md.
#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use waterline_sim::report::{markdown, run_all};
use waterline_sim::scenario::{SHIPPED, parse_scenario, shipped};
use waterline_sim::strategy::{self, Strategy, Waterline};

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
    let mut list: Vec<Box<dyn Strategy>> = Vec::new();
    for file in &args.policies {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let policy = waterline_core::policy::parse_policy(&text)
            .with_context(|| format!("{}", file.display()))?;
        let label = file.file_stem().map_or("policy".into(), |s| s.to_string_lossy().into_owned());
        list.push(Box::new(Waterline::new(&label, policy)?));
    }
    let names: Vec<String> = if args.compare.is_empty() && args.policies.is_empty() {
        vec!["waterline".into(), "kube-default".into()]
    } else {
        args.compare.clone()
    };
    for name in names {
        list.push(strategy::by_name(name.trim())?);
    }
    Ok(list)
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    let text = load_scenario(&args.scenario)?;
    let scenario = parse_scenario(&text, args.seed).with_context(|| args.scenario.clone())?;
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

fn main() -> anyhow::Result<()> {
    match Args::parse().command {
        Command::Run(args) => run(args),
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
