//! The predicted load of every node with no pod incoming: what a descheduler should read
//! (docs/operations.md#rebalancing). One home for it: the collector publishes it as
//! `waterline_node_predicted_utilisation` (collector/src/predicted_load.rs) and the simulator's
//! descheduler signal reads the same values (sim/src/rebalance/signal.rs).

use super::{Ask, Candidates, evaluate, settled_level};
use crate::{Pod, Policy, Snapshot, UnixMillis};

/// One fresh (node, policy metric) prediction.
#[derive(Clone, Debug, PartialEq)]
pub struct PredictedLoad<'a> {
    pub node: &'a str,
    /// Index into `policy.metrics`.
    pub metric: usize,
    /// observed + ledger (departures' credits floored as the engine floors them), as a 0..1
    /// fraction of allocatable.
    pub fraction: f64,
}

/// Every fresh (node, metric) of `snapshot`, in node-name then policy order; a stale metric
/// has no entry (absent, never 0).
///
/// The terms come from [`evaluate`] with `Pod::default()`, whose zero requests the estimator
/// would still turn into a best-effort default (`core/src/estimate.rs`); the value is
/// `observed + ledger` without the term `incoming`, so what a node shows does not depend on a
/// pod that does not exist.
pub fn predicted_loads<'a>(
    policy: &Policy,
    snapshot: &'a Snapshot,
    now: UnixMillis,
) -> Vec<PredictedLoad<'a>> {
    let nobody = Pod::default();
    let ask = Ask::Score { explain: true };
    let evaluation = evaluate(policy, snapshot, None, &nobody, ask, Candidates::All, now);
    // `Candidates::All` without a table: the snapshot's nodes with a state, in name order.
    let mut names: Vec<&str> = snapshot.nodes().map(|n| n.name.as_str()).collect();
    names.sort_unstable();
    let mut out = Vec::new();
    for (node, terms) in names.into_iter().zip(&evaluation.terms) {
        for (metric, term) in terms.iter().enumerate() {
            if term.stale {
                continue;
            }
            let fraction = settled_level(term.observed, term.ledger) / 100.0;
            out.push(PredictedLoad { node, metric, fraction });
        }
    }
    out
}
