//! SIMULATION.md's generated part (`waterline-sim report`): the target check (target.rs)
//! across scenarios and paths, then per scenario and path the measures with one column per
//! strategy and its pictures. The default policy is the strategy labelled `waterline`; the
//! peers are the other registered strategies ([`NAMES`]); any other label (a `--policy` run,
//! such as the old combination rule) is shown for context and never counts.

use std::path::{Path as FsPath, PathBuf};

use super::target::{self, DEFAULT, PendingCheck, Score, Verdict};
use super::{ReportError, file_stem, io};
use crate::measure::{StrategySummary, Summary};
use crate::strategy::{NAMES, Path as SimPath};

type Measure<'a> = &'a dyn Fn(&StrategySummary) -> f64;
type Cell<'a> = &'a dyn Fn(&StrategySummary) -> String;

fn registered(s: &StrategySummary) -> bool {
    target::registered(&s.strategy)
}

/// The strategies of a summary in column order: the registered ones in [`NAMES`] order, then
/// the others as they ran.
fn columns(summary: &Summary) -> Vec<&StrategySummary> {
    let mut out: Vec<&StrategySummary> =
        NAMES.iter().filter_map(|n| summary.strategies.iter().find(|s| s.strategy == *n)).collect();
    out.extend(summary.strategies.iter().filter(|s| !registered(s)));
    out
}

/// The heat maps worth committing for a run: the default's, on the extender path (the
/// default install) and for clusters of at most [`HEATMAP_MAX_NODES`] nodes — a 100-node map
/// is 110–150 KB; the others stay in the run's directory, and the hottest-node chart (every
/// run) and the CDF (extender runs) show the peers' worst nodes and the whole distribution.
pub fn chosen_heatmaps(summary: &Summary) -> Vec<String> {
    if summary.path == SimPath::Extender && summary.nodes <= HEATMAP_MAX_NODES {
        vec![DEFAULT.to_owned()]
    } else {
        Vec::new()
    }
}

/// Above this many nodes no heat map is committed.
pub const HEATMAP_MAX_NODES: usize = 40;

/// The target's verdict of one run.
pub fn run_verdict(summary: &Summary) -> Option<Verdict> {
    let scores: Vec<Score> = summary.strategies.iter().map(Score::from).collect();
    target::verdict(&scores, summary.room.suffices())
}

fn path_name(summary: &Summary) -> &'static str {
    match summary.path {
        SimPath::Plugin => "plugin",
        SimPath::Extender => "extender",
    }
}

/// "cpu 0.82 / memory 0.45" — the peak of demand over room.
pub fn room_cell(summary: &Summary) -> String {
    let r = &summary.room;
    let peak = |x: f64| if x >= 1e5 { "∞".to_owned() } else { format!("{x:.2}") };
    format!("{} / {}", peak(r.cpu_peak), peak(r.memory_peak))
}

fn pareto_cell(summary: &Summary, v: &Verdict) -> String {
    if v.pareto_met() {
        return "yes".into();
    }
    let who: Vec<String> = v
        .dominated_by
        .iter()
        .filter_map(|name| summary.strategies.iter().find(|s| &s.strategy == name))
        .map(|s| {
            format!(
                "{} ({:.0} / {:.0})",
                s.strategy, s.overload_node_seconds, s.pending_pod_seconds
            )
        })
        .collect();
    format!("**no**: {}", who.join(", "))
}

/// (b)'s cell; where the room does not suffice, the numbers say so.
pub fn pending_cell(summary: &Summary, v: &Verdict) -> String {
    match v.pending {
        PendingCheck::Checked { waterline, kube_default, met } => {
            let verdict = if met { "yes" } else { "**no**" };
            format!("{verdict} ({waterline:.0} vs {kube_default:.0})")
        }
        PendingCheck::NotApplicable => {
            format!("n/a: demand above room for {:.0} s", summary.room.short_s)
        }
    }
}

fn target_table(summaries: &[Summary]) -> String {
    let mut out = String::from(
        "| scenario | path | peak demand / room (cpu / mem) | overload node·s: waterline / \
         best peer | pending pod·s: waterline / kube-default | (a) no peer dominates \
         (overload / pending) | (b) pending ≤ 1.1 × kube-default |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for s in summaries {
        // the rebalancing scenarios are judged by their own target (report/rebalance.rs)
        if s.strategies.iter().any(|x| x.rebalance.is_some()) {
            continue;
        }
        let Some(v) = run_verdict(s) else { continue };
        let value = |name: &str, m: Measure| {
            s.strategies.iter().find(|x| x.strategy == name).map_or(f64::NAN, m)
        };
        let best = s
            .strategies
            .iter()
            .filter(|x| x.strategy != DEFAULT && registered(x))
            .min_by(|a, b| a.overload_node_seconds.total_cmp(&b.overload_node_seconds));
        let best = best
            .map_or("—".into(), |b| format!("{:.0} ({})", b.overload_node_seconds, b.strategy));
        out.push_str(&format!(
            "| [{0}](#{0}) | {1} | {2} | {3:.0} / {best} | {4:.0} / {5:.0} | {6} | {7} |\n",
            s.scenario,
            path_name(s),
            room_cell(s),
            value(DEFAULT, &|x| x.overload_node_seconds),
            value(DEFAULT, &|x| x.pending_pod_seconds),
            value("kube-default", &|x| x.pending_pod_seconds),
            pareto_cell(s, &v),
            pending_cell(s, &v),
        ));
    }
    out
}

/// The measures of one run, one column per strategy; the fewest overload node-seconds, hot
/// placements, pending pod-seconds and pods never placed among the registered strategies in
/// bold.
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
        "pending pod·s".into(),
        &|s| format!("{:.0}", s.pending_pod_seconds),
        Some(&|s| s.pending_pod_seconds),
    );
    row(
        "pods never placed".into(),
        &|s| s.pods_never_placed.to_string(),
        Some(&|s| s.pods_never_placed as f64),
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
        "cpu / memory spread sd pp".into(),
        &|s| format!("{:.1} / {:.1}", s.spread_cpu.stddev, s.spread_memory.stddev),
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
    row(
        "unwatched pods at a decision, mean / max".into(),
        &|s| format!("{:.1} / {}", s.unwatched_at_decision.mean, s.unwatched_at_decision.max),
        None,
    );
    if summary.strategies.iter().any(|s| s.pricing.is_some()) {
        row(
            "pods bound priced by learned usage / by factor (workloads learned)".into(),
            &|s| {
                s.pricing.map_or("—".into(), |p| {
                    format!("{} / {} ({})", p.learned, p.factor, p.workloads)
                })
            },
            None,
        );
    }
    if summary.strategies.iter().any(|s| s.provisional_guesses.is_some()) {
        row(
            "provisional guesses made / confirmed / moved / expired".into(),
            &|s| {
                s.provisional_guesses.map_or("—".into(), |g| {
                    format!("{} / {} / {} / {}", g.made, g.confirmed, g.moved, g.expired)
                })
            },
            None,
        );
    }
    out
}

/// The summaries of `dirs` (each holding a summary.json), in order.
pub fn read_summaries(dirs: &[PathBuf]) -> Result<Vec<Summary>, ReportError> {
    dirs.iter()
        .map(|dir| {
            let path = dir.join("summary.json");
            let text = std::fs::read_to_string(&path).map_err(io(&path))?;
            serde_json::from_str(&text)
                .map_err(|e| ReportError::Summary { path: path.clone(), why: e.to_string() })
        })
        .collect()
}

/// The generated Markdown for the runs in `dirs` (each holding a summary.json; a scenario may
/// come once per path); with `docs`, each run's pictures worth committing are copied to
/// `docs/<scenario>/<path>/` and linked from there (the path as given, relative to where
/// the Markdown lives).
pub fn simulation_md(dirs: &[PathBuf], docs: Option<&FsPath>) -> Result<String, ReportError> {
    let summaries = read_summaries(dirs)?;
    let mut out = String::from("### The target, scenario by scenario and path\n\n");
    out.push_str(&target_table(&summaries));
    let mut shown: Vec<&str> = Vec::new();
    for (dir, s) in dirs.iter().zip(&summaries) {
        if !shown.contains(&s.scenario.as_str()) {
            shown.push(&s.scenario);
            out.push_str(&format!(
                "\n### {}\n\nseed {}, {} nodes, {} pods, {} s measured, threshold {} %, target {} \
                 %; peak demand / room (cpu / memory) {}, demand above room for {:.0} s; the \
                 backgrounds alone are above the threshold for {:.0} node·s\n",
                s.scenario,
                s.seed,
                s.nodes,
                s.pods,
                s.duration_s,
                s.threshold_pct,
                s.target_pct,
                room_cell(s),
                s.room.short_s,
                s.room.background_overload_node_s,
            ));
        }
        let t = s.timing_ms;
        out.push_str(&format!(
            "\n{} path (cycle {} ms, bind delay {} ms, watch lag {} ms)\n\n",
            path_name(s),
            t.cycle,
            t.bind_delay,
            t.watch_lag
        ));
        out.push_str(&comparison(s));
        out.push_str(&super::rebalance::rebalance_table(s));
        let Some(docs) = docs else { continue };
        let target = docs.join(&s.scenario).join(path_name(s));
        std::fs::create_dir_all(&target).map_err(io(&target))?;
        // The peers' lines are the same on both paths (they run as plugins); the CDF is
        // committed for the extender path, the default install, to keep docs/sim small.
        let mut pictures: Vec<(String, String)> =
            vec![("hottest.svg".into(), "hottest node".into())];
        if s.path == SimPath::Extender {
            pictures.push(("cdf.svg".into(), "CDF".into()));
        }
        for label in chosen_heatmaps(s) {
            pictures
                .push((format!("heatmap-{}.svg", file_stem(&label)), format!("heat map, {label}")));
        }
        out.push('\n');
        for (file, alt) in &pictures {
            let from = dir.join(file);
            let to = target.join(file);
            std::fs::copy(&from, &to).map_err(io(&from))?;
            out.push_str(&format!(
                "![{}, {}: {alt}]({})\n",
                s.scenario,
                path_name(s),
                to.display()
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{RoomVsDemand, StrategySummary, Timing};

    fn strategy(name: &str, overload: f64, pending: f64) -> StrategySummary {
        let mut s: StrategySummary = serde_json::from_value(serde_json::json!({
            "strategy": name, "pods_arrived": 0, "pods_placed": 0, "pods_pending_end": 0,
            "pods_never_placed": 0, "pending_pod_seconds": 0.0, "unschedulable_attempts": 0,
            "overload_node_seconds": 0.0, "placed_on_hot_nodes": 0,
            "hottest_pct": {"p50": 0.0, "p99": 0.0, "max": 0.0},
            "hottest_pct_when_mean_above_target": null, "mean_above_target_s": 0.0,
            "above_water_node_seconds": 0.0, "spread_cpu": {"stddev": 0.0, "range": 0.0},
            "spread_memory": {"stddev": 0.0, "range": 0.0}, "nodes_in_use": 0,
            "nodes_receiving_pods": 0, "placements_per_node": {},
            "unwatched_at_decision": {"mean": 0.0, "max": 0}
        }))
        .unwrap();
        s.overload_node_seconds = overload;
        s.pending_pod_seconds = pending;
        s
    }

    fn summary(short_s: f64) -> Summary {
        Summary {
            scenario: "s".into(),
            seed: 1,
            duration_s: 60.0,
            threshold_pct: 65.0,
            target_pct: 40.0,
            nodes: 1,
            pods: 1,
            path: SimPath::Extender,
            room: RoomVsDemand { cpu_peak: 1.2, memory_peak: 0.4, short_s, ..Default::default() },
            timing_ms: Timing::default(),
            strategies: vec![
                strategy("waterline", 100.0, 500.0),
                strategy("kube-default", 900.0, 0.0),
                strategy("koordinator", 80.0, 500.0),
                strategy("old", 0.0, 0.0),
            ],
        }
    }

    #[test]
    fn the_target_row_names_the_dominating_peer_and_the_room() {
        let table = target_table(&[summary(120.0)]);
        let row = table.lines().nth(2).unwrap();
        // the best peer on overload is koordinator (80); it dominates (80 ≤ 100, 500 ≤ 500);
        // the context strategy never counts; the room is short: (b) does not apply
        assert!(
            row.contains("| extender | 1.20 / 0.40 | 100 / 80 (koordinator) | 500 / 0 |"),
            "{row}"
        );
        assert!(row.contains("**no**: koordinator (80 / 500)"), "{row}");
        assert!(row.ends_with("n/a: demand above room for 120 s |"), "{row}");
        let row = target_table(&[summary(0.0)]).lines().nth(2).unwrap().to_owned();
        assert!(row.ends_with("**no** (500 vs 0) |"), "{row}");
    }
}
