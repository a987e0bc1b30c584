//! `evaluate`'s pass for the usual request — no `maxOfCandidates` metric and no Crane
//! curve, so nothing but the row decides a node's answer — over the table's
//! columns: candidates are taken in chunks, and each metric's prediction, curve score,
//! weighted sum and threshold are computed for the whole chunk in one loop over that
//! metric's column, with everything that depends only on the metric (curve, resource,
//! window, threshold, whether the whole column is fresh at `now`) decided before the
//! loop. The arithmetic is `Request::predict_into` + `combine` + `load_rejection`'s,
//! operation for operation, so the answers are the same bit for bit. Candidates the
//! columns cannot answer (no row, a row whose node lost its state, ledger shares that no
//! longer hold at `now`) take `Rows::judge_one`, in their place in the order.

use super::answer::Evaluation;
use super::plan::{
    MetricPlan, PlanCurve, Request, colocation_conflict, observed_level, push_breach,
    settled_level, truncate,
};
use super::prepared::Column;
use super::rows::Rows;
use crate::curve::{least_used, water_level};
use crate::policy::{Curve, Resource, StaleFilter};
use crate::time::UnixMillis;

/// Candidates per chunk: the chunk's scratch (8 bytes × metrics × CHUNK) stays in L1.
const CHUNK: usize = 64;

/// Whether `evaluate` below answers `request` (else `Rows::judge_one` per candidate).
pub(super) fn apply(request: &Request<'_>) -> bool {
    !request.has_relative
        && !matches!(request.policy.curve, Curve::Crane { .. })
        && request.metrics.iter().all(|m| !matches!(m.curve, PlanCurve::Crane))
}

/// One policy metric's columns, resolved once per request.
struct Metric<'t> {
    plan: &'t MetricPlan,
    column: Column<'t>,
    /// Every row's sample is there and fresh at `now`.
    all_fresh: bool,
    /// The ledger's share column of the metric's resource and window (`None`: `Other`).
    ledger: Option<&'t [f64]>,
    resource: Resource,
    /// `filterAbove`, unless the metric's breaker is open.
    limit: Option<f64>,
    /// The curve score of a metric without a fresh sample (Crane's 0 is never one here).
    stale_score: f64,
}

/// The incoming pod's share per capacity class of the table.
struct Incoming {
    cpu: Vec<f64>,
    memory: Vec<f64>,
    capped: Vec<bool>,
}

/// One chunk's work, per fast candidate `j` (metric `k` at `k * CHUNK + j`).
struct Scratch {
    rows: [usize; CHUNK],
    /// The incoming pod's cpu and memory share of the row's capacity.
    cpu_incoming: [f64; CHUNK],
    memory_incoming: [f64; CHUNK],
    /// A column's values at `rows` (unless the rows are consecutive: then a slice of it).
    gathered: [f64; CHUNK],
    /// Per candidate of the chunk: its `j`, or `usize::MAX` for one `Rows::judge_one` answers.
    slots: [usize; CHUNK],
    predicted: Vec<f64>,
    fresh: Vec<bool>,
    weighted: [f64; CHUNK],
    cap: [f64; CHUNK],
    breach: [bool; CHUNK],
    stale: [bool; CHUNK],
}

/// Filter and Score of candidates `0..count` (`candidate(i)`: name and row, row `i` for
/// every `i` when `all`) into `out`, in order; `apply(request)` must hold.
pub(super) fn evaluate<'n>(
    request: &Request<'_>,
    rows: &mut Rows<'_>,
    count: usize,
    all: bool,
    candidate: impl Fn(usize) -> (&'n str, Option<usize>),
    out: &mut Evaluation,
) {
    let table = rows.table;
    let now = request.now;
    let incoming = incoming(request, table.capacities());
    let metrics: Vec<Metric<'_>> = request
        .metrics
        .iter()
        .enumerate()
        .map(|(k, plan)| {
            let column = table.column(k);
            let (cpu, memory) = table.share_columns(plan.window);
            let ledger = match plan.resource {
                Resource::Cpu => Some(cpu),
                Resource::Memory => Some(memory),
                Resource::Other => None,
            };
            Metric {
                all_fresh: column.all_fresh(now, plan.max_age),
                column,
                ledger,
                resource: plan.resource,
                limit: plan.filter_above.filter(|_| !plan.absent),
                stale_score: request.policy.stale.score,
                plan,
            }
        })
        .collect();
    let stale_reject = request.policy.stale.filter == StaleFilter::Reject;
    let mut scratch = Scratch {
        rows: [0; CHUNK],
        cpu_incoming: [0.0; CHUNK],
        memory_incoming: [0.0; CHUNK],
        gathered: [0.0; CHUNK],
        slots: [usize::MAX; CHUNK],
        predicted: vec![0.0; metrics.len() * CHUNK],
        fresh: vec![false; metrics.len() * CHUNK],
        weighted: [0.0; CHUNK],
        cap: [f64::INFINITY; CHUNK],
        breach: [false; CHUNK],
        stale: [false; CHUNK],
    };
    let mut predictions = Vec::with_capacity(metrics.len());
    for start in (0..count).step_by(CHUNK) {
        let end = (start + CHUNK).min(count);
        let mut fast = 0;
        for i in start..end {
            let (_, row) = candidate(i);
            let row = row.filter(|&r| {
                let head = table.head(r);
                head.known && head.shares_valid_at(now)
            });
            scratch.slots[i - start] = match row {
                Some(r) => {
                    let class = table.head(r).class as usize;
                    scratch.rows[fast] = r;
                    scratch.cpu_incoming[fast] = incoming.cpu[class];
                    scratch.memory_incoming[fast] = incoming.memory[class];
                    fast += 1;
                    fast - 1
                }
                None => usize::MAX,
            };
        }
        // Every candidate of the chunk has its row, each the one after the one before.
        let consecutive = all && fast == end - start;
        predict_chunk(request, &metrics, stale_reject, fast, consecutive, &mut scratch);
        for i in start..end {
            let (node, row) = candidate(i);
            let j = scratch.slots[i - start];
            if j == usize::MAX {
                rows.judge_one(request, i, node, row, false, &mut predictions, out);
                continue;
            }
            let conflict = request.colocation_applies
                && out.rejected.push_with(i, |reasons| {
                    colocation_conflict(
                        request.policy,
                        request.snapshot,
                        request.pod,
                        node,
                        reasons,
                    )
                });
            if conflict {
                out.scores.push(None);
                continue;
            }
            let head = table.head(scratch.rows[j]);
            out.stats.capped_estimates +=
                usize::from(head.ledger_capped || incoming.capped[head.class as usize]);
            out.stats.stale_nodes += usize::from(scratch.stale[j]);
            if !request.bypasses_load_filters && scratch.breach[j] {
                out.rejected.push_with(i, |reasons| {
                    let first = reasons.len();
                    for (k, metric) in metrics.iter().enumerate() {
                        let Some(limit) = metric.limit else { continue };
                        let (fresh, predicted) =
                            (scratch.fresh[k * CHUNK + j], scratch.predicted[k * CHUNK + j]);
                        if if fresh { predicted > limit } else { stale_reject } {
                            let more = reasons.len() > first;
                            push_breach(metric.plan, fresh.then_some(predicted), more, reasons);
                        }
                    }
                    true
                });
                out.scores.push(None);
                continue;
            }
            // `combine` without Crane's hot value (`apply` excludes a Crane policy curve).
            let score = if request.total_weight > 0.0 {
                (scratch.weighted[j] / request.total_weight).min(scratch.cap[j])
            } else {
                request.unknown_score()
            };
            out.scores.push(Some(request.rounded(score)));
        }
    }
}

/// The incoming pod's shares of each capacity class (`Request::incoming_shares`).
fn incoming(request: &Request<'_>, capacities: &[crate::snapshot::Capacity]) -> Incoming {
    let mut incoming = Incoming {
        cpu: Vec::with_capacity(capacities.len()),
        memory: Vec::with_capacity(capacities.len()),
        capped: Vec::with_capacity(capacities.len()),
    };
    for capacity in capacities {
        let mut capped = false;
        let (cpu, memory) = request.incoming_shares(*capacity, &mut capped);
        incoming.cpu.push(cpu);
        incoming.memory.push(memory);
        incoming.capped.push(capped);
    }
    incoming
}

/// Predictions, weighted curve sums, overshoot caps and breaches of the chunk's `fast`
/// candidates (`scratch.rows[..fast]`), one metric column at a time. Each step is its own
/// loop with the metric's choices (direction, resource, freshness, curve, threshold) made
/// before it, so each loop is straight-line arithmetic.
fn predict_chunk(
    request: &Request<'_>,
    metrics: &[Metric<'_>],
    stale_reject: bool,
    fast: usize,
    consecutive: bool,
    scratch: &mut Scratch,
) {
    let now = request.now;
    let Scratch { rows, cpu_incoming, memory_incoming, gathered, predicted, fresh, .. } = scratch;
    let (weighted, cap, breach, stale) =
        (&mut scratch.weighted, &mut scratch.cap, &mut scratch.breach, &mut scratch.stale);
    let rows = &rows[..fast];
    let (weighted, cap) = (&mut weighted[..fast], &mut cap[..fast]);
    let (breach, stale) = (&mut breach[..fast], &mut stale[..fast]);
    weighted.fill(0.0);
    cap.fill(f64::INFINITY);
    breach.fill(false);
    stale.fill(false);
    for (k, metric) in metrics.iter().enumerate() {
        let plan = metric.plan;
        let predicted = &mut predicted[k * CHUNK..k * CHUNK + fast];
        let fresh = &mut fresh[k * CHUNK..k * CHUNK + fast];
        let levels = metric.column.levels;
        // settled(observed, ledger) + incoming, as `Prediction::predicted` adds them.
        let observed = at_rows(levels, rows, consecutive, gathered);
        if plan.relative || plan.higher_is_better {
            for (p, &level) in predicted.iter_mut().zip(observed) {
                *p = observed_level(plan, level);
            }
        } else {
            predicted.copy_from_slice(observed);
        }
        let incoming = match metric.resource {
            Resource::Cpu => &cpu_incoming[..fast],
            Resource::Memory => &memory_incoming[..fast],
            Resource::Other => &[][..],
        };
        match metric.ledger {
            Some(ledger) => {
                let ledger = at_rows(ledger, rows, consecutive, gathered);
                for ((p, &ledger), &incoming) in predicted.iter_mut().zip(ledger).zip(incoming) {
                    *p = settled_level(*p, ledger) + incoming;
                }
            }
            None => {
                for p in predicted.iter_mut() {
                    *p = settled_level(*p, 0.0) + 0.0;
                }
            }
        }
        if metric.all_fresh {
            fresh.fill(true);
        } else {
            let ats = metric.column.ats;
            for ((f, &r), s) in fresh.iter_mut().zip(rows).zip(stale.iter_mut()) {
                *f = !levels[r].is_nan() && now.since(UnixMillis(ats[r])) <= plan.max_age;
                *s |= !*f;
            }
        }
        // `Request::metric_score`, weighted into the sum, and the overshoot cap.
        let capped_above = match plan.curve {
            PlanCurve::WaterLevel(target) if request.overshoot_caps && !plan.absent => target,
            _ => f64::INFINITY,
        };
        let weight = plan.weight;
        let stale_score = metric.stale_score;
        let truncate_scores = request.truncate;
        // One loop per curve, and one without the freshness test for a column fresh
        // throughout (the usual case: a metric refresh stamps every node alike).
        macro_rules! scores {
            ($curve:expr, $fresh:expr) => {
                for (j, &p) in predicted.iter().enumerate() {
                    let f = $fresh(j);
                    let score = if f {
                        let score = $curve(p);
                        if truncate_scores { truncate(score) } else { score }
                    } else {
                        stale_score
                    };
                    weighted[j] += weight * score;
                    if f && p > capped_above {
                        cap[j] = cap[j].min(score);
                    }
                }
            };
        }
        let all_fresh = metric.all_fresh;
        match plan.curve {
            PlanCurve::WaterLevel(target) if all_fresh => {
                scores!(|p| water_level(target, p), |_| true)
            }
            PlanCurve::WaterLevel(target) => scores!(|p| water_level(target, p), |j| fresh[j]),
            PlanCurve::LeastUsed if all_fresh => scores!(least_used, |_| true),
            PlanCurve::LeastUsed => scores!(least_used, |j| fresh[j]),
            // Scores observed values only: `apply` leaves such requests to `Rows::judge_one`.
            PlanCurve::Crane => {}
        }
        match metric.limit {
            Some(limit) if all_fresh => {
                for (b, &p) in breach.iter_mut().zip(predicted.iter()) {
                    *b |= p > limit;
                }
            }
            Some(limit) => {
                for ((b, &p), &f) in breach.iter_mut().zip(predicted.iter()).zip(fresh.iter()) {
                    *b |= if f { p > limit } else { stale_reject };
                }
            }
            None => {}
        }
    }
}

/// `column`'s values at `rows`: a slice of it when the rows are `consecutive`, else copied
/// into `gathered`.
#[inline]
fn at_rows<'a>(
    column: &'a [f64],
    rows: &[usize],
    consecutive: bool,
    gathered: &'a mut [f64; CHUNK],
) -> &'a [f64] {
    if consecutive {
        let first = rows.first().copied().unwrap_or(0);
        &column[first..first + rows.len()]
    } else {
        for (g, &r) in gathered.iter_mut().zip(rows) {
            *g = column[r];
        }
        &gathered[..rows.len()]
    }
}
