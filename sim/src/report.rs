//! Running several strategies through one scenario and writing what a run produces:
//! `summary.json`, one `<label>.csv` time series per strategy, and the Markdown table.

mod docs;
pub mod rebalance;
pub mod sweep;
pub mod target;

pub use docs::{chosen_heatmaps, comparison, read_summaries, run_verdict, simulation_md};

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path as FsPath, PathBuf};

use crate::measure::{Summary, table};
use crate::model::SimTime;
use crate::scenario::Scenario;
use crate::sim::{Outputs, run};
use crate::strategy::Strategy;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("two strategies are labelled '{0}'; their files would collide")]
    DuplicateLabel(String),
    #[error("{path}: not a summary.json: {why}")]
    Summary { path: PathBuf, why: String },
    #[error(transparent)]
    Scenario(#[from] crate::scenario::ScenarioError),
    #[error(transparent)]
    Strategy(#[from] crate::strategy::StrategyError),
}

fn io(path: &FsPath) -> impl FnOnce(std::io::Error) -> ReportError + '_ {
    move |source| ReportError::Io { path: path.to_owned(), source }
}

/// A file-name-safe form of a label.
pub fn file_stem(label: &str) -> String {
    label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect()
}

/// Runs every strategy (each through its own copy of the world), writing `<label>.csv` into
/// `out` when given; `progress(done, total)` is called with simulated milliseconds.
pub fn run_all(
    scenario: &Scenario,
    strategies: &mut [Box<dyn Strategy>],
    out: Option<&FsPath>,
    progress: &mut dyn FnMut(i64, i64),
) -> Result<Summary, ReportError> {
    let mut labels: Vec<String> = Vec::new();
    for s in strategies.iter() {
        if labels.iter().any(|l| l == s.label()) {
            return Err(ReportError::DuplicateLabel(s.label().to_owned()));
        }
        labels.push(s.label().to_owned());
    }
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let per = scenario.duration.0;
    let total = per * strategies.len() as i64;
    let mut results = Vec::new();
    for (k, strategy) in strategies.iter_mut().enumerate() {
        let mut tick = |t: SimTime| progress(per * k as i64 + t, total);
        let summary = match out {
            Some(dir) => {
                let path = dir.join(format!("{}.csv", file_stem(strategy.label())));
                let file = File::create(&path).map_err(io(&path))?;
                let mut csv = BufWriter::new(file);
                writeln!(csv, "time_s,node,cpu_pct,mem_pct").map_err(io(&path))?;
                let summary = run(
                    scenario,
                    strategy.as_mut(),
                    Outputs { csv: Some(&mut csv), progress: Some(&mut tick) },
                );
                csv.flush().map_err(io(&path))?;
                summary
            }
            None => {
                run(scenario, strategy.as_mut(), Outputs { csv: None, progress: Some(&mut tick) })
            }
        };
        results.push(summary);
    }
    let summary = Summary {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        duration_s: scenario.duration.as_secs_f64(),
        threshold_pct: scenario.threshold,
        target_pct: scenario.target,
        nodes: scenario.nodes.len(),
        pods: scenario.pods.len(),
        path: scenario.scheduler.path,
        room: crate::measure::room_vs_demand(scenario),
        timing_ms: crate::measure::Timing {
            cycle: scenario.scheduler.cycle.0,
            bind_delay: scenario.scheduler.bind_delay.0,
            watch_lag: scenario.scheduler.watch_lag.0,
        },
        strategies: results,
    };
    if let Some(dir) = out {
        let path = dir.join("summary.json");
        let text = serde_json::to_string_pretty(&summary).expect("a summary serializes");
        std::fs::write(&path, text + "\n").map_err(io(&path))?;
    }
    Ok(summary)
}

/// The Markdown table of a summary.
pub fn markdown(summary: &Summary) -> String {
    table(summary) + &rebalance::rebalance_table(summary)
}
