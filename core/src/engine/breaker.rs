//! The fleet staleness breaker (docs/design.md). A Prometheus or recording-rule outage
//! ages one metric on most nodes at once; judging node by node would then score the nodes
//! whose samples happen to be fresher against the rest, and `stale.filter: reject` would
//! reject nearly everything. When more than `stale.breakerShare` of the nodes that report a
//! metric hold a stale sample of it, the metric is left out for every node: no score
//! contribution (its weight leaves the mean), no filtering on it. It closes by itself once
//! fresh samples bring the share back down.
//!
//! The share is read from the snapshot's multiset of sample times per metric, which every
//! snapshot change keeps up to date, so a request pays a few B-tree steps per metric, not a
//! walk over the nodes.

use crate::policy::{MetricSpec, Policy};
use crate::snapshot::Snapshot;
use crate::time::UnixMillis;

/// Whether the fleet staleness breaker is open for `metric` at `now`: more than
/// `stale.breakerShare` of the nodes holding a sample of it (and at least
/// `stale.breakerMinNodes` of them) hold one older than its max age. Reads the snapshot's
/// index of sample times, never the nodes.
pub fn breaker_open(
    policy: &Policy,
    snapshot: &Snapshot,
    metric: &MetricSpec,
    now: UnixMillis,
) -> bool {
    let Some(id) = snapshot.metric_id(&metric.name) else { return false };
    let (_, reporting) = snapshot.samples_before(id, UnixMillis(i64::MIN), 0);
    if reporting == 0 || reporting < policy.stale.breaker_min_nodes {
        return false;
    }
    let share = policy.stale.breaker_share;
    // Open when stale > share × reporting; counting can stop one past that.
    let limit = (share * reporting as f64).floor() as usize;
    let (stale, _) = snapshot.samples_before(id, now.minus(metric.max_age), limit);
    stale as f64 > share * reporting as f64
}

/// `breaker_open` for every policy metric, in policy order (what the scorer exports).
pub fn breakers(policy: &Policy, snapshot: &Snapshot, now: UnixMillis) -> Vec<bool> {
    policy.metrics.iter().map(|m| breaker_open(policy, snapshot, m, now)).collect()
}
