//! `waterline-sim sweep`: scenarios run across seeds, paths and scheduler timings, one
//! Markdown row per (scenario, path, timing) with every strategy's totals over the seeds and
//! the target's verdict on those totals (target.rs). What the 10-seed totals and the timing
//! sensitivity tables of SIMULATION.md are made of (scripts/simulation.sh `seeds`,
//! `sensitivity`).

use waterline_core::Millis;

use super::target::{self, PendingCheck, Score};
use super::{ReportError, run_all};
use crate::measure::Summary;
use crate::scenario::{Scenario, ScenarioError, Timing};
use crate::strategy::{Path, Strategy};

/// What varies; an empty list keeps the scenario's own value.
#[derive(Clone, Debug, Default)]
pub struct Axes {
    pub seeds: Vec<u64>,
    pub paths: Vec<Path>,
    pub timings: Vec<Timing>,
}

/// Totals of one strategy over the seeds of a row.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    pub strategy: String,
    pub overload: f64,
    pub pending: f64,
    pub never_placed: usize,
    pub placed_on_hot: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub scenario: String,
    pub path: Path,
    pub timing: crate::measure::Timing,
    pub seeds: usize,
    /// Whether the room sufficed in every seed's run.
    pub room_suffices: bool,
    /// waterline's unwatched pods at a decision, mean over decisions and seeds, and max.
    pub unwatched: (f64, usize),
    pub totals: Vec<Totals>,
}

impl Row {
    fn from_runs(runs: &[Summary]) -> Row {
        let first = &runs[0];
        let mut totals: Vec<Totals> = first
            .strategies
            .iter()
            .map(|s| Totals { strategy: s.strategy.clone(), ..Totals::default() })
            .collect();
        let (mut unwatched_sum, mut unwatched_max) = (0.0, 0);
        for run in runs {
            for (t, s) in totals.iter_mut().zip(&run.strategies) {
                t.overload += s.overload_node_seconds;
                t.pending += s.pending_pod_seconds;
                t.never_placed += s.pods_never_placed;
                t.placed_on_hot += s.placed_on_hot_nodes;
                if s.strategy == target::DEFAULT {
                    unwatched_sum += s.unwatched_at_decision.mean;
                    unwatched_max = unwatched_max.max(s.unwatched_at_decision.max);
                }
            }
        }
        Row {
            scenario: first.scenario.clone(),
            path: first.path,
            timing: first.timing_ms,
            seeds: runs.len(),
            room_suffices: runs.iter().all(|r| r.room.suffices()),
            unwatched: (unwatched_sum / runs.len() as f64, unwatched_max),
            totals,
        }
    }

    fn verdict(&self) -> Option<target::Verdict> {
        let scores: Vec<Score> = self
            .totals
            .iter()
            .map(|t| Score {
                strategy: t.strategy.clone(),
                overload: t.overload,
                pending: t.pending,
            })
            .collect();
        target::verdict(&scores, self.room_suffices)
    }
}

/// Reads a scenario with an optional seed (`parse_scenario`).
pub type Parse<'a> = &'a dyn Fn(&str, Option<u64>) -> Result<Scenario, ScenarioError>;
/// A fresh set of strategies for one run.
pub type Make<'a> = &'a dyn Fn() -> Result<Vec<Box<dyn Strategy>>, ReportError>;

/// Runs every scenario (parsed by `parse(text, seed)`) across `axes`, with a fresh set of
/// strategies from `make` for each run.
pub fn sweep(
    scenarios: &[&str],
    axes: &Axes,
    parse: Parse<'_>,
    make: Make<'_>,
) -> Result<Vec<Row>, ReportError> {
    let seeds: Vec<Option<u64>> = if axes.seeds.is_empty() {
        vec![None]
    } else {
        axes.seeds.iter().map(|s| Some(*s)).collect()
    };
    let paths: Vec<Option<Path>> = if axes.paths.is_empty() {
        vec![None]
    } else {
        axes.paths.iter().map(|p| Some(*p)).collect()
    };
    let timings: Vec<Timing> =
        if axes.timings.is_empty() { vec![Timing::default()] } else { axes.timings.clone() };
    let mut rows = Vec::new();
    for text in scenarios {
        for path in &paths {
            for timing in &timings {
                let mut runs = Vec::new();
                for seed in &seeds {
                    let mut s = parse(text, *seed).map_err(ReportError::Scenario)?;
                    if let Some(p) = path {
                        s.scheduler.path = *p;
                    }
                    timing.apply(&mut s.scheduler);
                    let mut list = make()?;
                    runs.push(run_all(&s, &mut list, None, &mut |_, _| {})?);
                }
                rows.push(Row::from_runs(&runs));
            }
        }
    }
    Ok(rows)
}

fn ms(m: i64) -> String {
    if m >= 1000 && m % 1000 == 0 { format!("{} s", m / 1000) } else { format!("{m} ms") }
}

/// One table per scenario: a row per path and timing, a column per strategy holding
/// "overload node·s / pending pod·s" totalled over the seeds, then the verdict.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < rows.len() {
        let scenario = &rows[i].scenario;
        let group: Vec<&Row> = rows[i..].iter().take_while(|r| &r.scenario == scenario).collect();
        i += group.len();
        let labels: Vec<&str> = group[0].totals.iter().map(|t| t.strategy.as_str()).collect();
        out.push_str(&format!(
            "\n#### {scenario} ({} seed{}; overload node·s / pending pod·s, totals)\n\n",
            group[0].seeds,
            if group[0].seeds == 1 { "" } else { "s" }
        ));
        out.push_str("| path | cycle | bind | watch lag | unwatched at a decision, mean / max |");
        for l in &labels {
            out.push_str(&format!(" {l} |"));
        }
        out.push_str(" (a) | (b) |\n|---|---|---|---|---|");
        out.push_str(&"---:|".repeat(labels.len()));
        out.push_str(":-:|:-:|\n");
        for r in group {
            let path = match r.path {
                Path::Plugin => "plugin",
                Path::Extender => "extender",
            };
            out.push_str(&format!(
                "| {path} | {} | {} | {} | {:.1} / {} |",
                ms(r.timing.cycle),
                ms(r.timing.bind_delay),
                ms(r.timing.watch_lag),
                r.unwatched.0,
                r.unwatched.1
            ));
            for t in &r.totals {
                out.push_str(&format!(" {:.0} / {:.0} |", t.overload, t.pending));
            }
            let (a, b) = match r.verdict() {
                Some(v) => {
                    let a = if v.pareto_met() {
                        "yes".to_owned()
                    } else {
                        format!("**no** ({})", v.dominated_by.join(", "))
                    };
                    let b = match v.pending {
                        PendingCheck::Checked { met: true, .. } => "yes",
                        PendingCheck::Checked { met: false, .. } => "**no**",
                        PendingCheck::NotApplicable => "n/a",
                    };
                    (a, b.to_owned())
                }
                None => ("—".into(), "—".into()),
            };
            out.push_str(&format!(" {a} | {b} |\n"));
        }
    }
    out
}

/// `20ms,200ms,2s` as durations.
pub fn parse_list(text: &str) -> Result<Vec<Millis>, String> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| waterline_core::time::parse_duration(s.trim()).map_err(|e| format!("{s}: {e}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse_scenario;
    use crate::strategy::by_name;

    #[test]
    fn rows_total_over_seeds_and_apply_the_timing() {
        let text = "
name: tiny
duration: 5m
warmup: 5m
nodeGroups: [{count: 2, prefix: n, cpu: 4, memory: 8Gi, background: {cpu: {min: 20, max: 60}, memory: 30}}]
podGroups: [{prefix: p, count: 8, arrival: {at: 1m}, cpu: 100m, memory: 128Mi}]
";
        let axes = Axes {
            seeds: vec![1, 2],
            paths: vec![Path::Extender],
            timings: vec![Timing { watch_lag: Some(Millis::from_secs(2)), ..Timing::default() }],
        };
        let make = || -> Result<Vec<Box<dyn Strategy>>, ReportError> {
            Ok(vec![by_name("waterline").unwrap(), by_name("kube-default").unwrap()])
        };
        let rows = sweep(&[text], &axes, &parse_scenario, &make).unwrap();
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.seeds, r.path, r.timing.watch_lag), (2, Path::Extender, 2000));
        // the totals are the sums of the two seeds' runs
        let one = |seed| {
            let mut s = parse_scenario(text, Some(seed)).unwrap();
            s.scheduler.path = Path::Extender;
            s.scheduler.watch_lag = Millis::from_secs(2);
            let mut list = make().unwrap();
            run_all(&s, &mut list, None, &mut |_, _| {}).unwrap()
        };
        let (a, b) = (one(1), one(2));
        let expect = a.strategies[1].pending_pod_seconds + b.strategies[1].pending_pod_seconds;
        assert_eq!(r.totals[1].pending, expect);
        // 8 pods at once, cycles 10 ms apart, a 2 s lag: the 8th decision has 7 unwatched
        assert_eq!(r.unwatched.1, 7);
        let md = markdown(&rows);
        assert!(
            md.contains("#### tiny (2 seeds") && md.contains("| extender | 10 ms | 100 ms | 2 s |"),
            "{md}"
        );
    }
}
