//! The rebalancing scenarios' table and verdict: per strategy with a rebalancing actor, what
//! it evicted and how fast the hottest node came back; the target judged on them.

use crate::measure::Summary;
use crate::rebalance::RebalanceSummary;

/// The label whose rebalancing the target judges, and the alternatives it must beat.
pub const JUDGED: &str = "waterline+descheduler";

fn secs(v: Option<f64>) -> String {
    v.map_or("never".into(), |s| format!("{:.0} s", s))
}

/// The table (empty when no strategy of the run has a rebalancing actor).
pub fn rebalance_table(summary: &Summary) -> String {
    let rows: Vec<(&str, &RebalanceSummary)> = summary
        .strategies
        .iter()
        .filter_map(|s| s.rebalance.as_ref().map(|r| (s.strategy.as_str(), r)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n| with a descheduler | back under target+10 after the step | back under the \
         threshold | evictions | during an outage | re-placed onto a hot node | onto the same \
         node | cycles (failed) |\n|---|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for (label, r) in &rows {
        let back = |v: Option<f64>| if r.load_step_s.is_some() { secs(v) } else { "—".into() };
        out.push_str(&format!(
            "| {label} | {} | {} | {} | {} | {} | {} | {} ({}) |\n",
            back(r.back_under_water_s),
            back(r.back_under_threshold_s),
            r.evictions,
            r.evictions_during_outage,
            r.replaced_onto_hot,
            r.replaced_onto_same_node,
            r.cycles,
            r.cycles_failed
        ));
    }
    if let Some(verdict) = verdict(&rows) {
        out.push_str(&format!("\n{verdict}\n"));
    }
    out
}

/// The target: `waterline+descheduler` back under target + 10 pp strictly sooner than every
/// other actor, no recreated pod placed onto a hot node, no eviction during an outage.
fn verdict(rows: &[(&str, &RebalanceSummary)]) -> Option<String> {
    let (_, ours) = rows.iter().find(|(l, _)| *l == JUDGED)?;
    ours.load_step_s?;
    let Some(ours_t) = ours.back_under_water_s else {
        return Some(format!(
            "Target for `{JUDGED}`: **not met** — the hottest node is above target + 10 pp at the end."
        ));
    };
    let slower_or_equal: Vec<String> = rows
        .iter()
        .filter(|(l, _)| *l != JUDGED)
        .filter(|(_, r)| r.back_under_water_s.is_some_and(|t| t <= ours_t))
        .map(|(l, r)| format!("{l} ({})", secs(r.back_under_water_s)))
        .collect();
    let faster = if slower_or_equal.is_empty() {
        "faster than each alternative: met".to_owned()
    } else {
        format!(
            "faster than each alternative: **not met** — as fast or faster: {}",
            slower_or_equal.join(", ")
        )
    };
    Some(format!(
        "Target for `{JUDGED}`: back under target + 10 pp after {}; {faster}; re-placed onto \
         a hot node: {}; evictions during an outage: {}.",
        secs(Some(ours_t)),
        ours.replaced_onto_hot,
        ours.evictions_during_outage
    ))
}
