//! The engine's one entry point: [`evaluate`] answers Evaluate (Filter, then Score of the
//! feasible candidates, in one pass) and Score (every candidate scored, optionally with the
//! terms that explain it) over a [`Prepared`] table. The scorer's RPCs, the collector's
//! shadow judge and the simulator all call it; the arithmetic is `plan.rs`'s, walked a
//! candidate at a time (`rows.rs`) or a chunk of rows at a time (`columns.rs`). It is bit for
//! bit the reference walk (`reference.rs`), which the property tests in `evaluate/tests.rs`
//! compare it with over random snapshots, ledgers, pods and policies.

use super::answer::{Evaluation, Stats};
use super::columns;
use super::plan::{Prediction, Request};
use super::prepared::Prepared;
use super::rejections::Rejections;
use super::rows::{Incoming, Rows};
use crate::estimate::price;
use crate::pod::Pod;
use crate::policy::Policy;
use crate::snapshot::Snapshot;
use crate::time::UnixMillis;

/// Which nodes an evaluation judges.
#[derive(Clone, Copy, Debug)]
pub enum Candidates<'a> {
    /// Every node of the snapshot with a state, in name order: the table's rows
    /// (`Prepared::names`).
    All,
    /// These names, in this order (unknown names are answered as unknown nodes).
    Names(&'a [String]),
    /// Every node the snapshot holds anything for — metrics, ledger entries or both — in the
    /// snapshot's own order (`Snapshot::slots`): Filter's `all_nodes`.
    Slots,
}

/// What an evaluation answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// Filter's verdict for every candidate and the score of each feasible one
    /// (`maxOfCandidates` metrics take their maximum over the feasible candidates).
    Evaluate,
    /// The score of every candidate and no verdicts, as kube-scheduler's score phase asks
    /// for nodes it already filtered (`maxOfCandidates` maxima over all of them); with
    /// `explain`, each candidate's terms.
    Score { explain: bool },
}

/// Answers `ask` for `pod` on `candidates` from `snapshot` at `now`.
///
/// `table` is the snapshot's prepared rows, up to date with it (`Prepared::update` after
/// every change); candidates without a row (or all of them, for `None` or a table prepared
/// for a policy of another shape) are answered from the snapshot, with the same result.
pub fn evaluate(
    policy: &Policy,
    snapshot: &Snapshot,
    table: Option<&Prepared>,
    pod: &Pod,
    ask: Ask,
    candidates: Candidates<'_>,
    now: UnixMillis,
) -> Evaluation {
    let empty;
    let table = match table {
        Some(table) if table.fits(policy) => table,
        _ => {
            empty = Prepared::default();
            &empty
        }
    };
    // The candidates as (name, row): rows are the table's for `All` when it has them;
    // anything else is looked up once, for every pass.
    let listed: Vec<(&str, Option<usize>)> = match candidates {
        Candidates::All if !table.is_empty() || snapshot.nodes().next().is_none() => Vec::new(),
        Candidates::All => {
            let mut names: Vec<&str> = snapshot.nodes().map(|n| n.name.as_str()).collect();
            names.sort_unstable();
            names.into_iter().map(|n| (n, None)).collect()
        }
        Candidates::Names(names) => names.iter().map(|n| (n.as_str(), table.index_of(n))).collect(),
        Candidates::Slots => snapshot.slots().map(|(n, _)| (n, table.index_of(n))).collect(),
    };
    let all = matches!(candidates, Candidates::All) && listed.is_empty();
    let count = if all { table.len() } else { listed.len() };
    let candidate = |i: usize| -> (&str, Option<usize>) {
        if all { (table.names()[i].as_str(), Some(i)) } else { listed[i] }
    };
    let mut request = Request::new(policy, snapshot, pod, now);
    let mut rows = Rows { table, incoming: Incoming::default() };
    let mut out = Evaluation {
        scores: Vec::with_capacity(count),
        terms: Vec::new(),
        // The same pricing as the request's `incoming` (`estimate` is `price`'s usage).
        estimate: matches!(ask, Ask::Score { explain: true })
            .then(|| price(&policy.estimator, snapshot.learned(), pod)),
        rejected: Rejections::default(),
        unknown_node_score: 0,
        stats: Stats::default(),
    };
    let mut predictions: Vec<Prediction> = Vec::with_capacity(policy.metrics.len());
    match ask {
        Ask::Evaluate => evaluate_into(&mut request, &mut rows, count, all, candidate, &mut out),
        Ask::Score { explain } => {
            // A maxOfCandidates metric needs every candidate's value before any score.
            if request.has_relative {
                rows.find_relative_maxima(&mut request, count, |_| true, candidate);
            }
            for i in 0..count {
                let (node, row) = candidate(i);
                rows.score_any(&request, node, row, explain, &mut predictions, &mut out);
            }
        }
    }
    out.unknown_node_score = request.rounded(request.combine(None, None));
    out
}

/// `Ask::Evaluate`: every candidate judged, the feasible ones scored.
fn evaluate_into<'n>(
    request: &mut Request<'_>,
    rows: &mut Rows<'_>,
    count: usize,
    all: bool,
    candidate: impl Fn(usize) -> (&'n str, Option<usize>) + Copy,
    out: &mut Evaluation,
) {
    let mut predictions = Vec::with_capacity(request.metrics.len());
    // Filter reads a maxOfCandidates metric against 0 (its maximum is Score's, over the
    // feasible candidates): with one, judge everything first, then score; without, the
    // predictions are the same for both and one pass does.
    let two_pass = request.has_relative;
    if !rows.table.is_empty() && columns::apply(request) {
        columns::evaluate(request, rows, count, all, candidate, out);
    } else {
        for i in 0..count {
            let (node, row) = candidate(i);
            rows.judge_one(request, i, node, row, two_pass, &mut predictions, out);
        }
    }
    if two_pass {
        let feasible: Vec<bool> = out.scores.iter().map(Option::is_some).collect();
        rows.find_relative_maxima(request, count, |i| feasible[i], candidate);
        let mut ignored = Stats::default();
        for (i, score) in out.scores.iter_mut().enumerate() {
            let Some(score) = score else { continue };
            let (node, row) = candidate(i);
            let known = rows.predict(request, node, row, &mut predictions, &mut ignored);
            *score = rows.score(request, node, known.then_some(predictions.as_slice()));
        }
    }
}

#[cfg(test)]
mod tests;
