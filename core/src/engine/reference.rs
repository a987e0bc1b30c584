//! The reference Filter and Score: the engine's arithmetic walked node by node over the
//! snapshot, the way the scorer answered before the prepared table (`prepared.rs`) and the
//! column pass (`columns.rs`). No service calls it: it is the oracle the property tests hold
//! [`super::evaluate`] to, bit for bit (`evaluate/tests.rs`), the baseline the engine's
//! criterion bench measures against, and what the worked examples in `tests.rs` and
//! `scoring_tests.rs` pin down.

use super::answer::{Evaluation, Stats};
use super::plan::Request;
use super::rejections::Rejections;
use crate::pod::Pod;
use crate::policy::Policy;
use crate::snapshot::{NodeSlot, Snapshot};
use crate::time::UnixMillis;

pub use super::answer::ScoreTerm;

/// One candidate's score; `ScoreOutcome::scores` is in the order of the candidates asked
/// for, so the caller can move its names into the answer instead of copying them.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeScore {
    pub score: i64,
    /// One per policy metric, only when explain was asked for.
    pub terms: Vec<ScoreTerm>,
}

/// Filter's verdict per candidate, in the order asked for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FilterOutcome {
    /// `None`: the node is feasible; `Some(reason)`: rejected, and why.
    pub rejections: Vec<Option<String>>,
    pub stats: Stats,
}

/// Filter's answer with the candidates' names moved in (what a scorer sends back).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FilterVerdicts {
    pub feasible: Vec<String>,
    /// Rejected node and why.
    pub rejected: Vec<(String, String)>,
    pub stats: Stats,
}

impl FilterOutcome {
    /// Pairs the verdicts with `nodes`, the same candidates in the same order.
    pub fn with_names(self, nodes: impl IntoIterator<Item = String>) -> FilterVerdicts {
        let mut verdicts = FilterVerdicts { stats: self.stats, ..FilterVerdicts::default() };
        for (node, rejection) in nodes.into_iter().zip(self.rejections) {
            match rejection {
                None => verdicts.feasible.push(node),
                Some(reason) => verdicts.rejected.push((node, reason)),
            }
        }
        verdicts
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScoreOutcome {
    pub scores: Vec<NodeScore>,
    pub stats: Stats,
}

pub fn filter(
    policy: &Policy,
    snapshot: &Snapshot,
    pod: &Pod,
    nodes: &[String],
    now: UnixMillis,
) -> FilterOutcome {
    let request = Request::new(policy, snapshot, pod, now);
    let mut outcome =
        FilterOutcome { rejections: Vec::with_capacity(nodes.len()), stats: Stats::default() };
    let mut predictions = Vec::with_capacity(policy.metrics.len());
    for node in nodes {
        let reason = request.judge(node, snapshot.slot(node), &mut predictions, &mut outcome.stats);
        outcome.rejections.push(reason);
    }
    outcome
}

/// Filter over every node the snapshot knows (`FilterRequest.all_nodes`): the same verdicts
/// as `filter` with every node of the snapshot — metrics, ledger entries or both — as a
/// candidate, but only the rejected ones come back (`feasible` stays empty), and the node
/// table is walked instead of probed per name.
pub fn filter_all(
    policy: &Policy,
    snapshot: &Snapshot,
    pod: &Pod,
    now: UnixMillis,
) -> FilterVerdicts {
    let request = Request::new(policy, snapshot, pod, now);
    let mut verdicts = FilterVerdicts::default();
    let mut predictions = Vec::with_capacity(policy.metrics.len());
    for (node, slot) in snapshot.slots() {
        if let Some(reason) = request.judge(node, Some(slot), &mut predictions, &mut verdicts.stats)
        {
            verdicts.rejected.push((node.to_owned(), reason));
        }
    }
    verdicts
}

pub fn score(
    policy: &Policy,
    snapshot: &Snapshot,
    pod: &Pod,
    nodes: &[String],
    now: UnixMillis,
    explain: bool,
) -> ScoreOutcome {
    let mut request = Request::new(policy, snapshot, pod, now);
    // A maxOfCandidates metric needs every candidate's value before any score: look the
    // candidates up once, for both passes.
    let slots: Vec<Option<&NodeSlot>> = if request.has_relative {
        let slots: Vec<_> = nodes.iter().map(|node| snapshot.slot(node)).collect();
        request.find_relative_maxima(slots.iter().copied());
        slots
    } else {
        Vec::new()
    };
    let mut stats = Stats::default();
    let mut predictions = Vec::with_capacity(policy.metrics.len());
    let scores = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let slot = if request.has_relative { slots[i] } else { snapshot.slot(node) };
            let known = request.predict_into(slot, &mut predictions, &mut stats);
            if !known {
                stats.unknown_nodes += 1;
            }
            let predictions = known.then_some(predictions.as_slice());
            let score = request.rounded(request.combine(slot, predictions));
            let terms = if explain { request.terms(predictions) } else { Vec::new() };
            NodeScore { score, terms }
        })
        .collect();
    ScoreOutcome { scores, stats }
}

/// Evaluate the way the scorer did before the prepared table: `filter` over `names`, then
/// `score` over the feasible ones, then `score` of an unknown node. The reference
/// `evaluate` is tested against, and its answer for a policy the table was not built for.
pub fn evaluate_reference(
    policy: &Policy,
    snapshot: &Snapshot,
    pod: &Pod,
    names: &[String],
    now: UnixMillis,
) -> Evaluation {
    let verdicts = filter(policy, snapshot, pod, names, now);
    let mut rejected = Rejections::default();
    let mut feasible = Vec::with_capacity(names.len());
    for (i, (name, verdict)) in names.iter().zip(verdicts.rejections).enumerate() {
        match verdict {
            Some(reason) => {
                rejected.push_with(i, |text| {
                    text.push_str(&reason);
                    true
                });
            }
            None => feasible.push(name.clone()),
        }
    }
    let scored = score(policy, snapshot, pod, &feasible, now, false);
    let mut feasible_scores = scored.scores.into_iter().map(|s| s.score);
    let scores =
        {
            let mut next_rejected = rejected.iter().map(|(i, _)| i).peekable();
            (0..names.len())
                .map(|i| {
                    if next_rejected.next_if_eq(&i).is_some() {
                        None
                    } else {
                        feasible_scores.next()
                    }
                })
                .collect()
        };
    // An empty name is never a node (the scorer refuses it), so this is the score the
    // engine gives any node it does not know.
    let unknown = score(policy, snapshot, pod, &[String::new()], now, false);
    let unknown_node_score = unknown.scores.first().map_or(0, |s| s.score);
    Evaluation {
        scores,
        rejected,
        terms: Vec::new(),
        estimate: None,
        unknown_node_score,
        stats: verdicts.stats,
    }
}
