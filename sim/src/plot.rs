//! Pictures of a run, drawn as SVG by `plotters` from the `<label>.csv`
//! time series a run writes, so a kept out dir can be redrawn without re-running:
//!
//! - `heatmap-<label>.svg` per strategy: node × time, coloured by utilisation (the larger
//!   of cpu and memory, true usage, as every measure counts it), on one fixed colour scale
//!   for every strategy so two maps compare at a glance;
//! - `hottest.svg`: the hottest node's utilisation over time, one line per strategy;
//! - `cdf.svg`: the distribution of node utilisation over all node-samples, one line per
//!   strategy.
//!
//! The pictures are kept small enough to commit (docs/sim/): a heat map shows at most
//! [`HEATMAP_COLUMNS`] time columns, each the *maximum* of the samples it covers (a short
//! peak must stay visible), quantised into [`BIN_PP`]-pp colour bins and drawn as one
//! rectangle per run of equal bins; the lines are thinned to at most [`LINE_POINTS`] points
//! (the hottest line keeps each bucket's maximum, and flat runs are two points) and the CDF
//! to its percentiles.

mod draw;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::measure::Summary;
use crate::report::file_stem;

/// Time columns of a heat map, at most.
pub const HEATMAP_COLUMNS: usize = 40;
/// Width of a heat map's colour bins, percentage points.
pub const BIN_PP: f64 = 5.0;
/// Points of a line on the hottest-node chart, at most.
pub const LINE_POINTS: usize = 240;

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: line {line}: {why}")]
    Csv { path: PathBuf, line: usize, why: String },
    #[error("{path}: drawing failed: {why}")]
    Draw { path: PathBuf, why: String },
}

/// One strategy's time series as its CSV holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    pub label: String,
    /// In the order of their first appearance (the scenario's order).
    pub nodes: Vec<String>,
    /// Sample times, seconds from the start of the measured run.
    pub times_s: Vec<f64>,
    /// `util[t][n]`: node n's utilisation at `times_s[t]` (max of cpu and memory, %).
    pub util: Vec<Vec<f64>>,
}

impl Trace {
    /// Parses `time_s,node,cpu_pct,mem_pct` rows (header first), as `sim.rs` writes them.
    pub fn parse(label: &str, text: &str, path: &Path) -> Result<Trace, PlotError> {
        let err = |line: usize, why: String| PlotError::Csv { path: path.to_owned(), line, why };
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, "time_s,node,cpu_pct,mem_pct")) => {}
            other => return Err(err(1, format!("expected the header, got {other:?}"))),
        }
        let mut trace = Trace {
            label: label.to_owned(),
            nodes: Vec::new(),
            times_s: Vec::new(),
            util: Vec::new(),
        };
        let mut index: HashMap<String, usize> = HashMap::new();
        for (i, line) in lines {
            let fields: Vec<&str> = line.split(',').collect();
            let [time, node, cpu, mem] = fields.as_slice() else {
                return Err(err(i + 1, format!("expected 4 fields, got {}", fields.len())));
            };
            let number = |s: &str| s.parse::<f64>().map_err(|e| err(i + 1, format!("{s:?}: {e}")));
            let (time, cpu, mem) = (number(time)?, number(cpu)?, number(mem)?);
            if trace.times_s.last() != Some(&time) {
                if trace.times_s.last().is_some_and(|&t| t > time) {
                    return Err(err(i + 1, format!("time {time} goes backwards")));
                }
                trace.times_s.push(time);
                trace.util.push(vec![f64::NAN; trace.nodes.len()]);
            }
            let n = *index.entry((*node).to_owned()).or_insert_with(|| {
                trace.nodes.push((*node).to_owned());
                trace.nodes.len() - 1
            });
            let row = trace.util.last_mut().expect("a row was pushed for this time");
            if row.len() <= n {
                row.resize(n + 1, f64::NAN);
            }
            row[n] = cpu.max(mem);
        }
        for row in &mut trace.util {
            row.resize(trace.nodes.len(), f64::NAN);
        }
        Ok(trace)
    }

    pub fn read(label: &str, path: &Path) -> Result<Trace, PlotError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| PlotError::Io { path: path.to_owned(), source })?;
        Trace::parse(label, &text, path)
    }

    /// The hottest node's utilisation at every sample.
    pub fn hottest(&self) -> Vec<f64> {
        self.util.iter().map(|row| row.iter().copied().fold(0.0, f64::max)).collect()
    }

    /// Every node-sample's utilisation, sorted.
    pub fn sorted_samples(&self) -> Vec<f64> {
        let mut all: Vec<f64> =
            self.util.iter().flatten().copied().filter(|u| !u.is_nan()).collect();
        all.sort_by(f64::total_cmp);
        all
    }
}

/// Groups of consecutive sample indices, at most `max` groups of equal size (the last may
/// be shorter): the columns of a heat map, the buckets of a thinned line.
pub fn buckets(samples: usize, max: usize) -> Vec<std::ops::Range<usize>> {
    let per = samples.div_ceil(max.max(1)).max(1);
    (0..samples).step_by(per).map(|start| start..(start + per).min(samples)).collect()
}

/// `points` without the inner points of flat runs (equal y before and after): the same line,
/// fewer bytes — most of a hottest-node line is flat between placements.
pub fn drop_flat(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(points.len());
    for (k, p) in points.iter().enumerate() {
        let flat =
            k > 0 && k + 1 < points.len() && points[k - 1].1 == p.1 && points[k + 1].1 == p.1;
        if !flat {
            out.push(*p);
        }
    }
    out
}

/// The colour bin of a utilisation: 0 for [0, BIN_PP), …, capped so that everything at or
/// above 100 % shares the last bin.
pub fn bin(util: f64) -> usize {
    let top = (100.0 / BIN_PP) as usize;
    if util.is_nan() { 0 } else { ((util.max(0.0) / BIN_PP) as usize).min(top) }
}

/// The colour of a utilisation: pale below the target, green at it, yellow to red between
/// the target and the overload threshold, dark red at 100 % and beyond (piecewise linear).
pub fn colour(util: f64, target: f64, threshold: f64) -> (u8, u8, u8) {
    let stops: [(f64, (u8, u8, u8)); 5] = [
        (0.0, (0xf7, 0xfc, 0xf5)),
        (target, (0x41, 0xab, 0x5d)),
        ((target + threshold) / 2.0, (0xfe, 0xe0, 0x8b)),
        (threshold, (0xf4, 0x6d, 0x43)),
        (100.0_f64.max(threshold + 1.0), (0x67, 0x00, 0x0d)),
    ];
    let u = util.clamp(0.0, stops[4].0);
    let k = stops.windows(2).position(|w| u <= w[1].0).unwrap_or(3);
    let ((a, ca), (b, cb)) = (stops[k], stops[k + 1]);
    let f = if b > a { (u - a) / (b - a) } else { 1.0 };
    let mix = |x: u8, y: u8| (x as f64 + (y as f64 - x as f64) * f).round() as u8;
    (mix(ca.0, cb.0), mix(ca.1, cb.1), mix(ca.2, cb.2))
}

/// Draws every picture of a run into `dir` from the `<label>.csv` files there; returns the
/// paths written.
pub fn write_plots(dir: &Path, summary: &Summary) -> Result<Vec<PathBuf>, PlotError> {
    let traces = summary
        .strategies
        .iter()
        .map(|s| {
            let path = dir.join(format!("{}.csv", file_stem(&s.strategy)));
            Trace::read(&s.strategy, &path)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let frame = draw::Frame {
        scenario: &summary.scenario,
        duration_s: summary.duration_s,
        target: summary.target_pct,
        threshold: summary.threshold_pct,
    };
    let mut written = Vec::new();
    for trace in &traces {
        let path = dir.join(format!("heatmap-{}.svg", file_stem(&trace.label)));
        draw::heatmap(&path, &frame, trace)?;
        written.push(path);
    }
    let path = dir.join("hottest.svg");
    draw::hottest(&path, &frame, &traces)?;
    written.push(path);
    let path = dir.join("cdf.svg");
    draw::cdf(&path, &frame, &traces)?;
    written.push(path);
    Ok(written)
}

#[cfg(test)]
mod tests;
