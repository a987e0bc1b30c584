//! From the scorer's answers to the extender's: 0..100 scores to `MaxExtenderPriority`
//! (0..10) by core's `extender_score` (the simulator models the extender path with the same
//! rule), and the scorer's detailed rejection reasons to short, stable `FailedNodes`
//! messages.

use crate::wire::HostPriority;

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
