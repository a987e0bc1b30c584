//! The request's view of the prepared table, one candidate at a time: a node's
//! predictions from its row, or from the snapshot for a candidate the table has no
//! (current) row for; its verdict and score. `columns.rs` answers most requests a chunk of
//! rows at a time and hands the candidates it cannot answer to these.

use smallvec::SmallVec;

use super::answer::{Evaluation, Stats};
use super::plan::{Prediction, Request, observed_level};
use super::prepared::Prepared;
use crate::policy::{Curve, Resource};
use crate::snapshot::Capacity;

/// The request's view of the table: predictions from a row, or from the snapshot for a
/// candidate the table has no (current) row for.
pub(super) struct Rows<'t> {
    pub(super) table: &'t Prepared,
    pub(super) incoming: Incoming,
}

/// The incoming pod's shares of the last capacity seen: nodes of one shape share a
/// capacity, so the two divisions are made once per shape rather than once per node.
#[derive(Default)]
pub(super) struct Incoming {
    capacity: Option<Capacity>,
    shares: (f64, f64),
    capped: bool,
}

impl Rows<'_> {
    /// `Request::predict_into` for a candidate: false for a node the snapshot does not know.
    #[inline]
    pub(super) fn predict(
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
    pub(super) fn judge_one(
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

    /// Candidate `i`'s score as Score gives it — feasible or not, no verdict — and with
    /// `explain` its terms, appended to `out`: the reference `score`'s arithmetic.
    pub(super) fn score_any(
        &mut self,
        request: &Request<'_>,
        node: &str,
        row: Option<usize>,
        explain: bool,
        predictions: &mut Vec<Prediction>,
        out: &mut Evaluation,
    ) {
        let known = self.predict(request, node, row, predictions, &mut out.stats);
        out.stats.unknown_nodes += usize::from(!known);
        let predictions = known.then_some(predictions.as_slice());
        out.scores.push(Some(self.score(request, node, predictions)));
        if explain {
            out.terms.push(request.terms(predictions));
        }
    }

    /// A feasible candidate's score from its predictions (`score`'s arithmetic).
    #[inline]
    pub(super) fn score(
        &self,
        request: &Request<'_>,
        node: &str,
        predictions: Option<&[Prediction]>,
    ) -> i64 {
        // `combine` reads the slot only for Crane's hot value.
        let slot = match request.policy.curve {
            Curve::Crane { .. } => request.snapshot.slot(node),
            _ => None,
        };
        request.rounded(request.combine(slot, predictions))
    }

    /// `Request::find_relative_maxima` over candidates `0..count` for which `include(i)`
    /// holds: the feasible ones for Evaluate, every one for Score.
    pub(super) fn find_relative_maxima<'n>(
        &self,
        request: &mut Request<'_>,
        count: usize,
        include: impl Fn(usize) -> bool,
        candidate: impl Fn(usize) -> (&'n str, Option<usize>),
    ) {
        let mut maxima: SmallVec<[f64; 4]> = SmallVec::from_elem(0.0, request.metrics.len());
        for i in (0..count).filter(|&i| include(i)) {
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
