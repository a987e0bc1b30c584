//! What an evaluation answers (`evaluate`'s result) and what it ran into.

use super::Rejections;
use crate::estimate::Estimate;

/// How one metric contributed to a node's score.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoreTerm {
    pub metric: String,
    pub observed: f64,
    pub ledger: f64,
    pub incoming: f64,
    pub predicted: f64,
    pub curve_score: f64,
    pub weight: f64,
    pub stale: bool,
}

/// What a request ran into, for the caller's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Candidates the snapshot does not know.
    pub unknown_nodes: usize,
    /// Candidates with at least one stale metric.
    pub stale_nodes: usize,
    /// Estimates above a node's capacity that were capped at 100 %.
    pub capped_estimates: usize,
}

/// One pod's evaluation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evaluation {
    /// Per candidate, in order: its score, `None` when rejected (never for `Ask::Score`).
    pub scores: Vec<Option<i64>>,
    /// The rejected candidates and why, in index order (empty for `Ask::Score`).
    pub rejected: Rejections,
    /// Per candidate, with `Ask::Score { explain: true }`: how each policy metric
    /// contributed (empty otherwise).
    pub terms: Vec<Vec<ScoreTerm>>,
    /// With `Ask::Score { explain: true }`: the pod's estimate (every term's `incoming`) and
    /// the rule that priced each resource.
    pub estimate: Option<Estimate>,
    /// The score of a node the snapshot does not know.
    pub unknown_node_score: i64,
    /// What the request ran into, for the caller's counters.
    pub stats: Stats,
}

impl Evaluation {
    /// Per candidate, in order: `Some(reason)` when rejected, `None` when feasible.
    pub fn verdicts(&self) -> Vec<Option<&str>> {
        let mut verdicts = vec![None; self.scores.len()];
        for (i, reason) in self.rejected.iter() {
            verdicts[i] = Some(reason);
        }
        verdicts
    }
}
