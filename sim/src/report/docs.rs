//! SIMULATION.md's generated part (`waterline-sim report`): the target check across
//! scenarios, then per scenario the measures with one column per strategy and its pictures.
//! The default policy is the strategy labelled `waterline`; the peers are the other
//! registered strategies ([`NAMES`]); any other label (a `--policy` run, such as the old
//! combination rule) is shown for context and never counts in the target check.

use std::path::{Path, PathBuf};

use super::{ReportError, file_stem, io};
use crate::measure::{StrategySummary, Summary};
use crate::strategy::NAMES;

const DEFAULT: &str = "waterline";

type Measure<'a> = &'a dyn Fn(&StrategySummary) -> f64;
type Cell<'a> = &'a dyn Fn(&StrategySummary) -> String;

fn registered(s: &StrategySummary) -> bool {
    NAMES.contains(&s.strategy.as_str())
}

/// The strategies of a summary in column order: the registered ones in [`NAMES`] order, then
/// the others as they ran.
fn columns(summary: &Summary) -> Vec<&StrategySummary> {
    let mut out: Vec<&StrategySummary> =
        NAMES.iter().filter_map(|n| summary.strategies.iter().find(|s| s.strategy == *n)).collect();
    out.extend(summary.strategies.iter().filter(|s| !registered(s)));
    out
}

fn peers(summary: &Summary) -> impl Iterator<Item = &StrategySummary> {
    summary.strategies.iter().filter(|s| s.strategy != DEFAULT && registered(s))
}

/// The heat map worth committing for a scenario: the default's (the others stay in the run's
/// directory — all of them would make docs/sim/ about 0.5 MB; the hottest-node chart shows
/// the peers' worst nodes).
pub fn chosen_heatmaps(_summary: &Summary) -> Vec<String> {
    vec![DEFAULT.to_owned()]
}

/// The default's value of `measure`, the best peer's value and name, and whether the default
/// has no more than any peer (ties count as met).
fn check(summary: &Summary, measure: Measure) -> Option<(f64, f64, String, bool)> {
    let mine = summary.strategies.iter().find(|s| s.strategy == DEFAULT).map(measure)?;
    let best = peers(summary).min_by(|a, b| measure(a).total_cmp(&measure(b)))?;
    Some((mine, measure(best), best.strategy.clone(), mine <= measure(best)))
}

fn target_table(summaries: &[Summary]) -> String {
    let mut out = String::from(
        "| scenario | overload node·s: waterline / best peer | met | \
         placed on hot: waterline / best peer | met |\n|---|---|:-:|---|:-:|\n",
    );
    let cell = |c: Option<(f64, f64, String, bool)>| match c {
        Some((mine, best, who, met)) => {
            (format!("{mine:.0} / {best:.0} ({who})"), if met { "yes" } else { "**no**" })
        }
        None => ("—".into(), "—"),
    };
    for s in summaries {
        let (o, om) = cell(check(s, &|x| x.overload_node_seconds));
        let (h, hm) = cell(check(s, &|x| x.placed_on_hot_nodes as f64));
        out.push_str(&format!("| [{0}](#{0}) | {o} | {om} | {h} | {hm} |\n", s.scenario));
    }
    out
}

/// The measures of one scenario, one column per strategy; the fewest overload node-seconds
/// and hot placements among the five in bold.
pub fn comparison(summary: &Summary) -> String {
    let cols = columns(summary);
    let mut out = String::from("| measure |");
    for c in &cols {
        let context = if registered(c) { "" } else { " (context)" };
        out.push_str(&format!(" {}{context} |", c.strategy));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(cols.len()));
    out.push('\n');
    let mut row = |name: String, cell: Cell, best: Option<Measure>| {
        let low = best.map(|m| {
            summary.strategies.iter().filter(|s| registered(s)).map(m).fold(f64::INFINITY, f64::min)
        });
        out.push_str(&format!("| {name} |"));
        for c in &cols {
            let text = cell(c);
            let bold = matches!((best, low), (Some(m), Some(low)) if registered(c) && m(c) == low);
            out.push_str(&if bold { format!(" **{text}** |") } else { format!(" {text} |") });
        }
        out.push('\n');
    };
    row(
        format!("overload node·s (> {} %)", summary.threshold_pct),
        &|s| format!("{:.0}", s.overload_node_seconds),
        Some(&|s| s.overload_node_seconds),
    );
    row(
        "pods placed on truly hot nodes".into(),
        &|s| s.placed_on_hot_nodes.to_string(),
        Some(&|s| s.placed_on_hot_nodes as f64),
    );
    let above = summary
        .strategies
        .iter()
        .find(|s| s.strategy == DEFAULT)
        .map_or(0.0, |s| s.mean_above_target_s);
    row(
        format!("hottest p99 % while mean > {} % (waterline: {above:.0} s)", summary.target_pct),
        &|s| {
            s.hottest_pct_when_mean_above_target
                .as_ref()
                .map_or("—".into(), |p| format!("{:.1}", p.p99))
        },
        None,
    );
    row(
        "hottest p50 / p99 / max %".into(),
        &|s| {
            format!(
                "{:.1} / {:.1} / {:.1}",
                s.hottest_pct.p50, s.hottest_pct.p99, s.hottest_pct.max
            )
        },
        None,
    );
    row(
        format!("node·s > target + 10 ({} %)", summary.target_pct + 10.0),
        &|s| format!("{:.0}", s.above_water_node_seconds),
        None,
    );
    row(
        "cpu spread sd / range pp".into(),
        &|s| format!("{:.1} / {:.1}", s.spread_cpu.stddev, s.spread_cpu.range),
        None,
    );
    row(
        "memory spread sd / range pp".into(),
        &|s| format!("{:.1} / {:.1}", s.spread_memory.stddev, s.spread_memory.range),
        None,
    );
    row(
        "nodes in use / receiving pods".into(),
        &|s| format!("{} / {}", s.nodes_in_use, s.nodes_receiving_pods),
        None,
    );
    row(
        "pods placed / pending at the end".into(),
        &|s| format!("{} / {}", s.pods_placed, s.pods_pending_end),
        None,
    );
    row("pending pod·s".into(), &|s| format!("{:.0}", s.pending_pod_seconds), None);
    out
}

/// The generated Markdown for the runs in `dirs` (each holding a summary.json); with `docs`,
/// each scenario's pictures worth committing are copied to `docs/<scenario>/` and linked
/// from there (the path as given, relative to where the Markdown lives).
pub fn simulation_md(dirs: &[PathBuf], docs: Option<&Path>) -> Result<String, ReportError> {
    let mut runs = Vec::new();
    for dir in dirs {
        let path = dir.join("summary.json");
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        let summary: Summary = serde_json::from_str(&text)
            .map_err(|e| ReportError::Summary { path: path.clone(), why: e.to_string() })?;
        runs.push((dir, summary));
    }
    let summaries: Vec<Summary> = runs.iter().map(|(_, s)| s.clone()).collect();
    let mut out = String::from("### The target, scenario by scenario\n\n");
    out.push_str(&target_table(&summaries));
    for (dir, s) in &runs {
        out.push_str(&format!(
            "\n### {}\n\nseed {}, {} nodes, {} pods, {:?} path, {} s measured, threshold {} %, \
             target {} %\n\n",
            s.scenario,
            s.seed,
            s.nodes,
            s.pods,
            s.path,
            s.duration_s,
            s.threshold_pct,
            s.target_pct
        ));
        out.push_str(&comparison(s));
        let Some(docs) = docs else { continue };
        let target = docs.join(&s.scenario);
        std::fs::create_dir_all(&target).map_err(io(&target))?;
        let mut pictures: Vec<(String, String)> =
            vec![("hottest.svg".into(), "hottest node".into()), ("cdf.svg".into(), "CDF".into())];
        for label in chosen_heatmaps(s) {
            pictures
                .push((format!("heatmap-{}.svg", file_stem(&label)), format!("heat map, {label}")));
        }
        out.push('\n');
        for (file, alt) in &pictures {
            let from = dir.join(file);
            let to = target.join(file);
            std::fs::copy(&from, &to).map_err(io(&from))?;
            out.push_str(&format!("![{}: {alt}]({})\n", s.scenario, to.display()));
        }
    }
    Ok(out)
}
