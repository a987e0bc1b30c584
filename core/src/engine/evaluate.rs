//! Evaluate: Filter and Score of one pod in one pass — the rejected candidates
//! with reasons, and the score of every feasible one — over the precomputed rows of a
//! [`Prepared`] table. [`evaluate_reference`] is the same answer the way the scorer gave it
//! before: `filter`, then `score` of the feasible names, then the score of an unknown node.
//! `evaluate` is bit for bit equal to it (the property test `evaluate_matches_reference`
//! compares them over random snapshots, ledgers, pods and policies), and falls back to it
//! for a table prepared for a policy of another shape. Most requests are answered over the
//! table's columns (`columns.rs`); a `maxOfCandidates` metric or a Crane curve takes the
//! row path here.

use smallvec::SmallVec;

use super::prepared::Prepared;
use super::{Prediction, Request, Stats, filter, observed_level, score};
use crate::pod::Pod;
use crate::policy::{Curve, Policy, Resource};
use crate::snapshot::{Capacity, Snapshot};
use crate::time::UnixMillis;

/// Which nodes an Evaluate judges.
#[derive(Clone, Copy, Debug)]
pub enum Candidates<'a> {
    /// Every row of the table, in row order (`Prepared::names`).
    All,
    /// These names, in this order (unknown names are answered as unknown nodes).
    Names(&'a [String]),
}

/// One pod's Evaluate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evaluation {
    /// Per candidate, in order: its score, `None` when rejected.
    pub scores: Vec<Option<i64>>,
    /// The rejected candidates and why, in index order.
    pub rejected: Rejections,
    /// The score of a node the snapshot does not know.
    pub unknown_node_score: i64,
    /// Filter's counters (what the scorer counted for an Evaluate before).
    pub stats: Stats,
}

/// The rejected candidates of an Evaluate, each with its reason: all the reasons in one
/// string (at 5,000 nodes a string per rejected node was a malloc and its growth each, a
/// quarter of an Evaluate), handed out as `&str`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rejections {
    /// Per rejected candidate: its index and where its reason ends in `text`.
    ends: Vec<(usize, usize)>,
    text: String,
}

impl Rejections {
    /// (index into the candidates, reason), in index order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (usize, &str)> + '_ {
        (0..self.ends.len()).map(|k| {
            let start = k.checked_sub(1).map_or(0, |before| self.ends[before].1);
            let (index, end) = self.ends[k];
            (index, &self.text[start..end])
        })
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Appends candidate `index`'s reason, which `write` appends to the string it is given;
    /// `write` returns whether the candidate is rejected (nothing is kept when it is not).
    #[inline]
    fn push_with(&mut self, index: usize, write: impl FnOnce(&mut String) -> bool) -> bool {
        let rejected = write(&mut self.text);
        if rejected {
            self.ends.push((index, self.text.len()));
        }
        rejected
    }
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
    Evaluation { scores, rejected, unknown_node_score, stats: verdicts.stats }
}

/// Filter and Score of `candidates` in one pass over `table`'s rows, which must be up to
/// date with `snapshot` (`Prepared::update` after every change). Same answer as
/// [`evaluate_reference`].
pub fn evaluate(
    policy: &Policy,
    snapshot: &Snapshot,
    table: &Prepared,
    pod: &Pod,
    candidates: Candidates<'_>,
    now: UnixMillis,
) -> Evaluation {
    if !table.fits(policy) {
        let names = match candidates {
            Candidates::All => table.names(),
            Candidates::Names(names) => names,
        };
        return evaluate_reference(policy, snapshot, pod, names, now);
    }
    let count = match candidates {
        Candidates::All => table.len(),
        Candidates::Names(names) => names.len(),
    };
    let candidate = |i: usize| candidate(table, candidates, i);
    let mut request = Request::new(policy, snapshot, pod, now);
    let mut rows = Rows { table, incoming: Incoming::default() };
    let mut out = Evaluation {
        scores: Vec::with_capacity(count),
        rejected: Rejections::default(),
        unknown_node_score: 0,
        stats: Stats::default(),
    };
    let mut predictions = Vec::with_capacity(policy.metrics.len());
    // Filter reads a maxOfCandidates metric against 0 (its maximum is Score's, over the
    // feasible candidates): with one, judge everything first, then score; without, the
    // predictions are the same for both and one pass does.
    let two_pass = request.has_relative;
    if columns::apply(&request) {
        let all = matches!(candidates, Candidates::All);
        columns::evaluate(&request, &mut rows, count, all, candidate, &mut out);
    } else {
        for i in 0..count {
            let (node, row) = candidate(i);
            rows.judge_one(&request, i, node, row, two_pass, &mut predictions, &mut out);
        }
    }
    if two_pass {
        rows.find_relative_maxima(&mut request, &out.scores, candidate);
        let mut ignored = Stats::default();
        for (i, score) in out.scores.iter_mut().enumerate() {
            let Some(score) = score else { continue };
            let (node, row) = candidate(i);
            let known = rows.predict(&request, node, row, &mut predictions, &mut ignored);
            *score = rows.score(&request, node, known.then_some(predictions.as_slice()));
        }
    }
    out.unknown_node_score = request.rounded(request.combine(None, None));
    out
}

/// Candidate `i`'s name and row (`None`: the table has no row for it).
#[inline]
fn candidate<'a>(
    table: &'a Prepared,
    candidates: Candidates<'a>,
    i: usize,
) -> (&'a str, Option<usize>) {
    match candidates {
        Candidates::All => (table.names()[i].as_str(), Some(i)),
        Candidates::Names(names) => (names[i].as_str(), table.index_of(&names[i])),
    }
}

/// The request's view of the table: predictions from a row, or from the snapshot for a
/// candidate the table has no (current) row for.
struct Rows<'t> {
    table: &'t Prepared,
    incoming: Incoming,
}

/// The incoming pod's shares of the last capacity seen: nodes of one shape share a
/// capacity, so the two divisions are made once per shape rather than once per node.
#[derive(Default)]
struct Incoming {
    capacity: Option<Capacity>,
    shares: (f64, f64),
    capped: bool,
}

impl Rows<'_> {
    /// `Request::predict_into` for a candidate: false for a node the snapshot does not know.
    #[inline]
    fn predict(
        &mut self,
        request: &Request<'_>,
        node: &str,
        row: Option<usize>,
        out: &mut Vec<Prediction>,
        stats: &mut Stats,
    ) -> bool {
        let Some(row) = row.filter(|&r| self.table.head(r).known) else {
            return request.predict_into(request.snapshot.slot(node), out, stats);
        };
        out.clear();
        let head = self.table.head(row);
        let capacity = head.capacity;
        let mut capped = false;
        let ledger: SmallVec<[(f64, f64); 4]> = if head.shares_valid_at(request.now) {
            capped = head.ledger_capped;
            (0..request.absorb_windows.len())
                .map(|w| {
                    let (cpu, memory) = self.table.share_columns(w);
                    (cpu[row], memory[row])
                })
                .collect()
        } else {
            // The same placements no longer count as when the row was made: the snapshot's.
            let slot = request.snapshot.slot(node).expect("a known row has a slot");
            request.ledger_shares(slot, capacity, &mut capped)
        };
        if self.incoming.capacity != Some(capacity) {
            let mut incoming_capped = false;
            self.incoming.shares = request.incoming_shares(capacity, &mut incoming_capped);
            self.incoming.capped = incoming_capped;
            self.incoming.capacity = Some(capacity);
        }
        let (cpu_incoming, memory_incoming) = self.incoming.shares;
        stats.capped_estimates += usize::from(capped || self.incoming.capped);
        let mut stale = false;
        out.extend(request.metrics.iter().enumerate().map(|(k, metric)| {
            let observed = (self.table.column(k).fresh(row, request.now, metric.max_age))
                .map(|level| observed_level(metric, level));
            stale |= observed.is_none();
            let (cpu, memory) = ledger.get(metric.window).copied().unwrap_or_default();
            let (ledger, incoming) = match metric.resource {
                Resource::Cpu => (cpu, cpu_incoming),
                Resource::Memory => (memory, memory_incoming),
                Resource::Other => (0.0, 0.0),
            };
            Prediction { observed, ledger, incoming }
        }));
        stats.stale_nodes += usize::from(stale);
        true
    }

    /// Candidate `i`'s verdict, and its score unless `two_pass` (then 0 until the second
    /// pass), appended to `out`.
    #[allow(clippy::too_many_arguments)]
    fn judge_one(
        &mut self,
        request: &Request<'_>,
        i: usize,
        node: &str,
        row: Option<usize>,
        two_pass: bool,
        predictions: &mut Vec<Prediction>,
        out: &mut Evaluation,
    ) {
        let mut known = false;
        let stats = &mut out.stats;
        let rejected = out.rejected.push_with(i, |reasons| {
            let predict = |p: &mut Vec<Prediction>, stats: &mut Stats| {
                known = self.predict(request, node, row, p, stats);
                known
            };
            request.judge_into(node, predictions, stats, predict, reasons)
        });
        if rejected {
            out.scores.push(None);
        } else if two_pass {
            out.scores.push(Some(0));
        } else {
            let predictions = known.then_some(predictions.as_slice());
            out.scores.push(Some(self.score(request, node, predictions)));
        }
    }

    /// A feasible candidate's score from its predictions (`score`'s arithmetic).
    #[inline]
    fn score(&self, request: &Request<'_>, node: &str, predictions: Option<&[Prediction]>) -> i64 {
        // `combine` reads the slot only for Crane's hot value.
        let slot = match request.policy.curve {
            Curve::Crane { .. } => request.snapshot.slot(node),
            _ => None,
        };
        request.rounded(request.combine(slot, predictions))
    }

    /// `Request::find_relative_maxima` over the feasible candidates (`scores[i]` is `Some`).
    fn find_relative_maxima<'n>(
        &self,
        request: &mut Request<'_>,
        scores: &[Option<i64>],
        candidate: impl Fn(usize) -> (&'n str, Option<usize>),
    ) {
        let mut maxima: SmallVec<[f64; 4]> = SmallVec::from_elem(0.0, request.metrics.len());
        for i in (0..scores.len()).filter(|&i| scores[i].is_some()) {
            let (node, row) = candidate(i);
            let row = row.filter(|&r| self.table.head(r).known);
            let state = if row.is_some() { None } else { request.snapshot.node(node) };
            for (k, (metric, max)) in request.metrics.iter().zip(maxima.iter_mut()).enumerate() {
                if !metric.relative || metric.absent {
                    continue;
                }
                let level = match (row, state) {
                    (Some(r), _) => self.table.column(k).fresh(r, request.now, metric.max_age),
                    (None, Some(state)) => request.fresh_level(metric, state),
                    (None, None) => None,
                };
                if let Some(level) = level {
                    *max = max.max(level);
                }
            }
        }
        for (metric, max) in request.metrics.iter_mut().zip(maxima) {
            metric.relative_max = max;
        }
    }
}

mod columns;
#[cfg(test)]
mod tests;
