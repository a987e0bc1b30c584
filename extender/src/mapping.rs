//! From the scorer's answers to the extender's: 0..100 scores to `MaxExtenderPriority`
//! (0..10), and the scorer's detailed rejection reasons to short, stable `FailedNodes`
//! messages.
//!
//! **Round** (default): `round(score / 10)`, half away from zero, so a node's extender score
//! means the same whatever the other candidates are; nodes whose scores differ by less than 5
//! may tie. **Rescale**: the best candidate gets 10, the worst 0, linear in between, rounded;
//! the ranking survives the 11 levels better, but a score no longer says how good a node is
//! in absolute terms (two nearly identical nodes get 0 and 10, and the scheduler adds that gap
//! × weight × 10 to its own scores). When every candidate scores the same, Rescale gives all
//! of them 10: any constant keeps the (flat) ranking, and 10 matches "best → 10".

use waterline_core::policy::ScoreMapping;

use crate::wire::HostPriority;

pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// 0..100 → 0..10, half away from zero; out-of-range inputs are clamped.
pub fn round_score(score: i64) -> i64 {
    ((score as f64 / 10.0).round() as i64).clamp(0, MAX_EXTENDER_PRIORITY)
}

/// Extender scores for `scores` (0..100 each, in candidate order) under `mapping`.
pub fn map_scores(mapping: ScoreMapping, scores: &[i64]) -> Vec<i64> {
    match mapping {
        ScoreMapping::Round => scores.iter().map(|&s| round_score(s)).collect(),
        ScoreMapping::Rescale => {
            let (Some(&lo), Some(&hi)) = (scores.iter().min(), scores.iter().max()) else {
                return Vec::new();
            };
            if hi == lo {
                return vec![MAX_EXTENDER_PRIORITY; scores.len()];
            }
            let span = (hi - lo) as f64;
            scores
                .iter()
                .map(|&s| {
                    let scaled = (s - lo) as f64 * MAX_EXTENDER_PRIORITY as f64 / span;
                    (scaled.round() as i64).clamp(0, MAX_EXTENDER_PRIORITY)
                })
                .collect()
        }
    }
}

/// Every host with the same score: what the extender answers when it must not influence the
/// choice (another scheduler's pod, or no answer from the scorer in time).
pub fn neutral_priorities(hosts: Vec<String>) -> Vec<HostPriority> {
    hosts.into_iter().map(|host| HostPriority { host, score: 0 }).collect()
}

/// Whether evicting pods could make the node acceptable, so the rejection belongs in
/// `FailedNodes` (preemption may consider the node) rather than `FailedAndUnresolvableNodes`:
/// only when every part of the reason is an anti-colocation conflict (`anti-colocation
/// <key>=<value> with <ns>/<pod>`), which leaves with the other pod. Load rejections do
/// not: the measured load does not drop within the scheduling cycle.
pub fn eviction_may_resolve(reason: &str) -> bool {
    let mut parts = reason.split("; ").map(str::trim).filter(|p| !p.is_empty()).peekable();
    parts.peek().is_some() && parts.all(|p| p.starts_with("anti-colocation "))
}

/// The scheduler groups `FailedNodes` messages into its FailedScheduling event ("0/500 nodes
/// are available: 12 <message>, …"), so messages must not carry per-node numbers. The
/// scorer's reasons look like `cpu_usage_avg_5m 72.3% > 65%`, `mem_usage_avg_5m has no
/// fresh sample` or `anti-colocation app=redis with ns/pod`, joined by `; `; each becomes
/// `cpu_usage_avg_5m above 65 percent`, `mem_usage_avg_5m stale`, `anti-colocation app`.
pub fn short_reason(reason: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for part in reason.split("; ").map(str::trim).filter(|p| !p.is_empty()) {
        let short = if let Some(rest) = part.strip_prefix("anti-colocation ") {
            let key = rest.split(['=', ' ']).next().unwrap_or(rest);
            format!("anti-colocation {key}")
        } else if let Some(metric) = part.strip_suffix(" has no fresh sample") {
            format!("{metric} stale")
        } else if let Some((left, limit)) = part.split_once(" > ") {
            let metric = left.split_whitespace().next().unwrap_or(left);
            // kube-scheduler formats its FailedScheduling event with these messages as the
            // format string, so a '%' would come out as "%!(MISSING)": spell it out.
            format!("{metric} above {} percent", limit.trim_end_matches('%'))
        } else {
            part.chars().take(80).collect::<String>().replace('%', " percent")
        };
        if !parts.contains(&short) {
            parts.push(short);
        }
    }
    if parts.is_empty() {
        "waterline: rejected".to_owned()
    } else {
        format!("waterline: {}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_is_half_away_from_zero_and_clamped() {
        let cases = [(0, 0), (4, 0), (5, 1), (14, 1), (15, 2), (45, 5), (95, 10), (100, 10)];
        for (score, want) in cases {
            assert_eq!(round_score(score), want, "score {score}");
        }
        assert_eq!(round_score(-7), 0);
        assert_eq!(round_score(250), 10);
        assert_eq!(map_scores(ScoreMapping::Round, &[24, 40, 100, 19, 13, 0]), [2, 4, 10, 2, 1, 0]);
    }

    #[test]
    fn rescale_spreads_candidates_over_zero_to_ten() {
        assert_eq!(map_scores(ScoreMapping::Rescale, &[40, 42, 44, 41]), [0, 5, 10, 3]);
        // Half away from zero: 50 → 2.5 → 3.
        assert_eq!(map_scores(ScoreMapping::Rescale, &[0, 50, 200]), [0, 3, 10]);
        assert_eq!(map_scores(ScoreMapping::Rescale, &[60, 60, 60]), [10, 10, 10]);
        assert_eq!(map_scores(ScoreMapping::Rescale, &[37]), [10]);
        assert!(map_scores(ScoreMapping::Rescale, &[]).is_empty());
    }

    #[test]
    fn only_anti_colocation_may_be_resolved_by_eviction() {
        assert!(eviction_may_resolve("anti-colocation app=redis with ns/redis-0"));
        assert!(!eviction_may_resolve("cpu_usage_avg_5m 72.3% > 65%"));
        assert!(!eviction_may_resolve("mem_usage_avg_5m has no fresh sample"));
        assert!(!eviction_may_resolve(
            "anti-colocation app=redis with ns/redis-0; cpu_usage_avg_5m 72.3% > 65%"
        ));
        assert!(!eviction_may_resolve(""));
    }

    #[test]
    fn reasons_become_short_and_stable() {
        assert_eq!(
            short_reason("cpu_usage_avg_5m 72.3% > 65%"),
            "waterline: cpu_usage_avg_5m above 65 percent"
        );
        assert_eq!(
            short_reason("cpu_usage_avg_5m 70.0% > 65%; mem_usage_max_avg_1h 80.2% > 75%"),
            "waterline: cpu_usage_avg_5m above 65 percent, mem_usage_max_avg_1h above 75 percent"
        );
        assert_eq!(
            short_reason("mem_usage_avg_5m has no fresh sample"),
            "waterline: mem_usage_avg_5m stale"
        );
        assert_eq!(
            short_reason("anti-colocation app.kubernetes.io/instance=redis-a with ns/redis-0"),
            "waterline: anti-colocation app.kubernetes.io/instance"
        );
        // Two nodes over the same threshold by different amounts share one message.
        assert_eq!(
            short_reason("cpu_usage_avg_5m 66.0% > 65%"),
            short_reason("cpu_usage_avg_5m 99.9% > 65%")
        );
        assert_eq!(short_reason(""), "waterline: rejected");
    }
}
