//! The plan of one request: what a policy asks of each candidate, resolved once per pod
//! (metric ids, curves, weights, thresholds, the incoming pod's estimate), and the
//! arithmetic every path of `evaluate` shares — a node's prediction per metric (observed +
//! ledger + incoming, docs/design.md#predicted-utilisation), its curve score and weighted
//! sum (docs/design.md#node-score), Filter's thresholds and reasons (docs/design.md#filter).

use std::fmt::Write;

use smallvec::SmallVec;

use super::answer::{ScoreTerm, Stats};
use super::breaker::breaker_open;
use crate::curve::{least_used, round_half_away, round_score, water_level};
use crate::estimate::{Usage, estimate};
use crate::ledger::LedgerWindow;
use crate::pod::Pod;
use crate::policy::{
    Combine, Curve, Direction, Normalize, Policy, Resource, Rounding, StaleFilter,
};
use crate::snapshot::{Capacity, NodeSlot, NodeState, Snapshot};
use crate::time::UnixMillis;

/// One metric on one node, before the curve.
#[derive(Clone, Copy, Debug)]
pub(super) struct Prediction {
    /// `None` when the sample is missing or older than the metric's max age.
    pub(super) observed: Option<f64>,
    pub(super) ledger: f64,
    pub(super) incoming: f64,
}

impl Prediction {
    pub(super) const UNKNOWN: Prediction =
        Prediction { observed: None, ledger: 0.0, incoming: 0.0 };

    pub(super) fn predicted(&self) -> f64 {
        settled_level(self.observed.unwrap_or(0.0), self.ledger) + self.incoming
    }
}

/// `observed + ledger`, the level a node is predicted at before any incoming pod, with the
/// floor departures need (docs/design.md#departures): a negative ledger (departures' credits
/// outweighing recent arrivals) takes the level down to 0 at most, never below — nor below
/// an observed level that is negative already (a `higherIsBetter` value above 100). With a
/// ledger of 0 or more it is exactly `observed + ledger`. Every path of the engine and the
/// collector's published prediction go through it.
#[inline]
pub fn settled_level(observed: f64, ledger: f64) -> f64 {
    let sum = observed + ledger;
    if ledger < 0.0 && sum < 0.0 { observed.min(0.0) } else { sum }
}

/// A metric's curve, resolved once per request (the policy's, or the metric's own).
#[derive(Clone, Copy, Debug)]
pub(super) enum PlanCurve {
    WaterLevel(f64),
    LeastUsed,
    /// Least-used of the observed value; recent placements enter as the hot value.
    Crane,
}

/// A policy metric resolved against the snapshot once per request.
pub(super) struct MetricPlan {
    /// The snapshot's id for the metric name (`None`: no node ever reported it).
    pub(super) id: Option<usize>,
    pub(super) resource: Resource,
    pub(super) max_age: crate::time::Millis,
    /// 0 while the fleet breaker is open: the metric then adds nothing to any node.
    pub(super) weight: f64,
    pub(super) curve: PlanCurve,
    /// Query value → percent (`MetricSpec::to_percent`).
    pub(super) to_percent: f64,
    /// `Normalize::MaxOfCandidates`: divided by `relative_max`.
    pub(super) relative: bool,
    /// The highest fresh value among this request's candidates (Score only).
    pub(super) relative_max: f64,
    pub(super) higher_is_better: bool,
    /// The fleet breaker is open: no score, no filtering.
    pub(super) absent: bool,
    /// Filter's threshold for this pod: the metric's `filterAbove`, or its priority tier's
    /// (`Policy::filter_above`).
    pub(super) filter_above: Option<f64>,
    /// Index of the metric's ledger window in `Request::absorb_windows`.
    pub(super) window: usize,
    /// The metric's name, and the start of a rejection reason, `cpu_usage_avg_5m `.
    pub(super) name: String,
    pub(super) name_space: String,
    /// The end of a rejection reason, `% > 65%`, formatted once per request (float
    /// formatting per rejected node was a tenth of a Filter).
    pub(super) over_limit: String,
}

/// The ledger's and the incoming pod's share of one node's capacity, per resource, in
/// percent. Six metrics read two resources and a few absorb windows, so this is computed
/// once per node and window, not per metric.
#[derive(Clone, Default)]
pub(super) struct Shares {
    pub(super) cpu_incoming: f64,
    pub(super) memory_incoming: f64,
    /// Per ledger window of the request: (cpu, memory) of the placements that still count,
    /// less the departures credited (negative when those outweigh).
    pub(super) ledger: SmallVec<[(f64, f64); 4]>,
}

impl Shares {
    pub(super) fn of(&self, resource: Resource, window: usize) -> (f64, f64) {
        let (cpu, memory) = self.ledger.get(window).copied().unwrap_or_default();
        match resource {
            Resource::Cpu => (cpu, self.cpu_incoming),
            Resource::Memory => (memory, self.memory_incoming),
            Resource::Other => (0.0, 0.0),
        }
    }
}

/// Per-request state resolved once: metric ids, weights and the incoming pod's estimate.
pub(super) struct Request<'a> {
    pub(super) policy: &'a Policy,
    pub(super) snapshot: &'a Snapshot,
    pub(super) pod: &'a Pod,
    pub(super) metrics: Vec<MetricPlan>,
    /// The distinct ledger windows (absorb window, departure credit) of the policy's metrics.
    pub(super) absorb_windows: SmallVec<[LedgerWindow; 4]>,
    /// Σ weight of the metrics whose breaker is closed.
    pub(super) total_weight: f64,
    pub(super) truncate: bool,
    pub(super) overshoot_caps: bool,
    pub(super) has_relative: bool,
    pub(super) uses_cpu: bool,
    pub(super) uses_memory: bool,
    /// Some anti-colocation rule reads a label the pod has (else no ledger lookup per node).
    pub(super) colocation_applies: bool,
    pub(super) bypasses_load_filters: bool,
    pub(super) incoming: Usage,
    pub(super) now: UnixMillis,
}

pub(super) fn percent_of(amount: i64, capacity: i64, capped: &mut bool) -> f64 {
    if capacity <= 0 || amount <= 0 {
        return 0.0;
    }
    // A millionth of a percent is noise, and rounding it away keeps a tiny pod on a huge
    // node from tipping a value that sits exactly on the curve's target.
    let pct = round_half_away(amount as f64 * 100.0 / capacity as f64 * 1e6) / 1e6;
    if pct > 100.0 {
        *capped = true;
        100.0
    } else {
        pct
    }
}

/// `percent_of` for a signed amount: a net credit (negative) is the same share below zero,
/// capped at −100 %.
pub(super) fn signed_percent_of(amount: i64, capacity: i64, capped: &mut bool) -> f64 {
    if amount < 0 {
        -percent_of(amount.saturating_neg(), capacity, capped)
    } else {
        percent_of(amount, capacity, capped)
    }
}

/// The distinct ledger windows of the policy's metrics, in order of first use.
pub(super) fn absorb_windows(policy: &Policy) -> SmallVec<[LedgerWindow; 4]> {
    let mut windows: SmallVec<[LedgerWindow; 4]> = SmallVec::new();
    for m in &policy.metrics {
        let window = m.ledger_window();
        if !windows.contains(&window) {
            windows.push(window);
        }
    }
    windows
}

impl<'a> Request<'a> {
    pub(super) fn new(
        policy: &'a Policy,
        snapshot: &'a Snapshot,
        pod: &'a Pod,
        now: UnixMillis,
    ) -> Self {
        let uses = |r| policy.metrics.iter().any(|m| m.resource == r);
        let absorb_windows = absorb_windows(policy);
        let metrics: Vec<MetricPlan> = policy
            .metrics
            .iter()
            .enumerate()
            .map(|(k, m)| {
                let absent = breaker_open(policy, snapshot, m, now);
                let filter_above = policy.filter_above(k, pod.priority);
                MetricPlan {
                    id: snapshot.metric_id(&m.name),
                    resource: m.resource,
                    max_age: m.max_age,
                    weight: if absent { 0.0 } else { m.weight },
                    curve: match policy.curve_of(m) {
                        Curve::WaterLevel { target } => PlanCurve::WaterLevel(*target),
                        Curve::LeastUsed => PlanCurve::LeastUsed,
                        Curve::Crane { .. } => PlanCurve::Crane,
                    },
                    to_percent: m.to_percent,
                    relative: m.normalize == Normalize::MaxOfCandidates,
                    relative_max: 0.0,
                    higher_is_better: m.direction == Direction::HigherIsBetter,
                    absent,
                    filter_above,
                    window: absorb_windows
                        .iter()
                        .position(|w| *w == m.ledger_window())
                        .unwrap_or(0),
                    // `{}` of an f64 prints 65.0 as "65", as the policy file spells it.
                    over_limit: filter_above.map(|l| format!("% > {l}%")).unwrap_or_default(),
                    name: m.name.clone(),
                    name_space: format!("{} ", m.name),
                }
            })
            .collect();
        Request {
            policy,
            snapshot,
            pod,
            total_weight: metrics.iter().map(|m| m.weight).sum(),
            has_relative: metrics.iter().any(|m| m.relative && !m.absent),
            metrics,
            absorb_windows,
            truncate: policy.rounding == Rounding::Truncate,
            overshoot_caps: policy.combine == Combine::OvershootDominates,
            uses_cpu: uses(Resource::Cpu),
            uses_memory: uses(Resource::Memory),
            colocation_applies: policy
                .anti_colocation
                .iter()
                .any(|rule| pod.labels.contains_key(&rule.label_key)),
            bypasses_load_filters: pod.bypasses_load_filters(),
            incoming: estimate(&policy.estimator, snapshot.learned(), pod),
            now,
        }
    }

    /// A fresh sample's value in percent (its unit applied), or `None` when missing or stale.
    pub(super) fn fresh_level(&self, metric: &MetricPlan, state: &NodeState) -> Option<f64> {
        metric
            .id
            .and_then(|id| state.sample(id))
            .filter(|s| self.now.since(s.at) <= metric.max_age)
            .map(|s| (s.value * metric.to_percent).max(0.0))
    }

    /// `Normalize::MaxOfCandidates`: each relative metric's highest fresh value among
    /// `slots`, the candidates of this request.
    pub(super) fn find_relative_maxima<'s>(
        &mut self,
        slots: impl Iterator<Item = Option<&'s NodeSlot>>,
    ) {
        let mut maxima: SmallVec<[f64; 4]> = SmallVec::from_elem(0.0, self.metrics.len());
        for state in slots.filter_map(|slot| slot?.state()) {
            for (metric, max) in self.metrics.iter().zip(maxima.iter_mut()) {
                if metric.relative
                    && !metric.absent
                    && let Some(level) = self.fresh_level(metric, state)
                {
                    *max = max.max(level);
                }
            }
        }
        for (metric, max) in self.metrics.iter_mut().zip(maxima) {
            metric.relative_max = max;
        }
    }

    pub(super) fn shares(&self, slot: &NodeSlot, capacity: Capacity, stats: &mut Stats) -> Shares {
        let mut capped = false;
        let ledger = self.ledger_shares(slot, capacity, &mut capped);
        let (cpu_incoming, memory_incoming) = self.incoming_shares(capacity, &mut capped);
        stats.capped_estimates += usize::from(capped);
        Shares { cpu_incoming, memory_incoming, ledger }
    }

    /// Per ledger window: the (cpu, memory) share of `capacity` the placements on the node
    /// that still count take, less the departures credited, in percent.
    pub(super) fn ledger_shares(
        &self,
        slot: &NodeSlot,
        capacity: Capacity,
        capped: &mut bool,
    ) -> SmallVec<[(f64, f64); 4]> {
        let mut percent = |amount, capacity, used| {
            if used { signed_percent_of(amount, capacity, capped) } else { 0.0 }
        };
        let mut ledger = SmallVec::new();
        for window in &self.absorb_windows {
            let load = if self.policy.ledger.enabled {
                slot.unabsorbed(self.now, *window)
            } else {
                Usage::default()
            };
            ledger.push((
                percent(load.cpu_millis, capacity.cpu_millis, self.uses_cpu),
                percent(load.memory_bytes, capacity.memory_bytes, self.uses_memory),
            ));
        }
        ledger
    }

    /// The incoming pod's (cpu, memory) share of `capacity`, in percent.
    pub(super) fn incoming_shares(&self, capacity: Capacity, capped: &mut bool) -> (f64, f64) {
        let mut percent = |amount, capacity, used| {
            if used { percent_of(amount, capacity, capped) } else { 0.0 }
        };
        (
            percent(self.incoming.cpu_millis, capacity.cpu_millis, self.uses_cpu),
            percent(self.incoming.memory_bytes, capacity.memory_bytes, self.uses_memory),
        )
    }

    /// Fills `out` with a prediction per policy metric of `node`; false for a node the
    /// snapshot does not know (`out` is then empty). `out` is reused across nodes so the
    /// loop allocates nothing per candidate.
    pub(super) fn predict_into(
        &self,
        slot: Option<&NodeSlot>,
        out: &mut Vec<Prediction>,
        stats: &mut Stats,
    ) -> bool {
        out.clear();
        let Some((slot, state)) = slot.and_then(|slot| Some((slot, slot.state()?))) else {
            return false;
        };
        let shares = self.shares(slot, state.capacity, stats);
        let mut stale = false;
        out.extend(self.metrics.iter().map(|metric| {
            let observed =
                self.fresh_level(metric, state).map(|level| observed_level(metric, level));
            stale |= observed.is_none();
            let (ledger, incoming) = shares.of(metric.resource, metric.window);
            Prediction { observed, ledger, incoming }
        }));
        stats.stale_nodes += usize::from(stale);
        true
    }

    /// Filter's verdict on a candidate whose prediction `predict` fills in (false: a node
    /// the snapshot does not know): true when the pod may not go there, with why appended
    /// to `reasons` (Evaluate keeps every candidate's reason in one string).
    pub(super) fn judge_into(
        &self,
        node: &str,
        predictions: &mut Vec<Prediction>,
        stats: &mut Stats,
        predict: impl FnOnce(&mut Vec<Prediction>, &mut Stats) -> bool,
        reasons: &mut String,
    ) -> bool {
        if self.colocation_applies
            && colocation_conflict(self.policy, self.snapshot, self.pod, node, reasons)
        {
            return true;
        }
        if !predict(predictions, stats) {
            stats.unknown_nodes += 1;
            false
        } else if self.bypasses_load_filters {
            false
        } else {
            self.load_rejection(predictions, reasons)
        }
    }

    /// One metric's curve score on one node.
    #[inline]
    pub(super) fn metric_score(&self, metric: &MetricPlan, prediction: &Prediction) -> f64 {
        let Some(observed) = prediction.observed else {
            // Crane counts a metric without a fresh sample as fully used.
            return match metric.curve {
                PlanCurve::Crane => 0.0,
                _ => self.policy.stale.score,
            };
        };
        let score = match metric.curve {
            PlanCurve::WaterLevel(target) => water_level(target, prediction.predicted()),
            PlanCurve::LeastUsed => least_used(prediction.predicted()),
            // Crane reads observed values only; recent placements enter as the hot value.
            PlanCurve::Crane => least_used(observed),
        };
        if self.truncate { truncate(score) } else { score }
    }

    pub(super) fn combine(
        &self,
        slot: Option<&NodeSlot>,
        predictions: Option<&[Prediction]>,
    ) -> f64 {
        let (weighted, cap) = match predictions {
            Some(p) if self.total_weight > 0.0 => self.weighted_curve_sum(p),
            // Unknown node, or every metric's breaker open: no data counts.
            _ => (self.unknown_score() * self.total_weight, f64::INFINITY),
        };
        let score = if self.total_weight > 0.0 {
            (weighted / self.total_weight).min(cap)
        } else {
            self.unknown_score()
        };
        match &self.policy.curve {
            Curve::Crane { hot_windows } => {
                let hot: usize = hot_windows
                    .iter()
                    .map(|w| {
                        slot.map_or(0, |s| s.placements_within(self.now, w.window))
                            / w.count as usize
                    })
                    .sum();
                // Crane truncates; the epsilon keeps 50.5000000001 and 50.4999999999 apart
                // from float noise in the weighted sum.
                ((score + 1e-9).floor() - 10.0 * hot as f64).clamp(0.0, 100.0)
            }
            _ => score,
        }
    }

    /// The node score as an integer: rounded half away from zero, or truncated.
    pub(super) fn rounded(&self, score: f64) -> i64 {
        if self.truncate { truncate(score) as i64 } else { round_score(score) }
    }

    /// Σ weight × curve score over the metrics, and the cap `Combine::OvershootDominates`
    /// puts on the node's score (∞ when nothing overshoots): the lowest curve score of a
    /// water-level metric (the policy's curve or its own) predicted above its target.
    pub(super) fn weighted_curve_sum(&self, predictions: &[Prediction]) -> (f64, f64) {
        let mut weighted = 0.0;
        let mut cap = f64::INFINITY;
        for (metric, p) in self.metrics.iter().zip(predictions) {
            let score = self.metric_score(metric, p);
            weighted += metric.weight * score;
            if self.overshoot_caps
                && !metric.absent
                && let PlanCurve::WaterLevel(target) = metric.curve
                && p.observed.is_some()
                && p.predicted() > target
            {
                cap = cap.min(score);
            }
        }
        (weighted, cap)
    }

    /// Curve score of a node with no data at all.
    pub(super) fn unknown_score(&self) -> f64 {
        match self.policy.curve {
            // Crane counts missing metrics as fully used.
            Curve::Crane { .. } => 0.0,
            _ => self.policy.stale.score,
        }
    }

    pub(super) fn terms(&self, predictions: Option<&[Prediction]>) -> Vec<ScoreTerm> {
        self.policy
            .metrics
            .iter()
            .enumerate()
            .map(|(i, metric)| {
                let p = predictions.map_or(Prediction::UNKNOWN, |p| p[i]);
                let plan = &self.metrics[i];
                let curve_score = self.metric_score(plan, &p);
                ScoreTerm {
                    metric: metric.name.clone(),
                    observed: p.observed.unwrap_or(0.0),
                    ledger: p.ledger,
                    incoming: p.incoming,
                    predicted: p.predicted(),
                    curve_score,
                    // 0 while the fleet breaker is open for the metric.
                    weight: plan.weight,
                    stale: p.observed.is_none() || plan.absent,
                }
            })
            .collect()
    }

    /// Filter's verdict on one candidate: `None` when the pod may go there (also for a node
    /// the snapshot does not know), else why not.
    pub(super) fn judge(
        &self,
        node: &str,
        slot: Option<&NodeSlot>,
        predictions: &mut Vec<Prediction>,
        stats: &mut Stats,
    ) -> Option<String> {
        let mut reason = String::new();
        let predict =
            |out: &mut Vec<Prediction>, stats: &mut Stats| self.predict_into(slot, out, stats);
        self.judge_into(node, predictions, stats, predict, &mut reason).then_some(reason)
    }

    /// Whether the pod may not go to a known node; if so, why is appended to `reasons`:
    /// every breached threshold, `; `-separated.
    pub(super) fn load_rejection(&self, predictions: &[Prediction], reasons: &mut String) -> bool {
        let start = reasons.len();
        for (plan, p) in self.metrics.iter().zip(predictions) {
            let Some(limit) = plan.filter_above.filter(|_| !plan.absent) else { continue };
            let breach = match p.observed {
                None => self.policy.stale.filter == StaleFilter::Reject,
                Some(_) => p.predicted() > limit,
            };
            if breach {
                let predicted = p.observed.map(|_| p.predicted());
                push_breach(plan, predicted, reasons.len() > start, reasons);
            }
        }
        reasons.len() > start
    }
}

/// One breached threshold's part of a rejection reason ("cpu 72.3% > 65%", or "cpu has no
/// fresh sample" for `predicted: None`), after a `; ` when it is not the first.
#[inline]
pub(super) fn push_breach(
    plan: &MetricPlan,
    predicted: Option<f64>,
    more: bool,
    reasons: &mut String,
) {
    if more {
        // Two pushes: cheaper than a copy of two bytes.
        reasons.push(';');
        reasons.push(' ');
    } else {
        // A typical reason ("mem_usage_max_avg_1h 91.3% > 75%") fits: one allocation for a
        // Filter's reason, none for most of Evaluate's shared string.
        reasons.reserve(64);
    }
    match predicted {
        None => {
            reasons.push_str(&plan.name);
            reasons.push_str(" has no fresh sample");
        }
        Some(predicted) => {
            reasons.push_str(&plan.name_space);
            push_one_decimal(reasons, predicted);
            reasons.push_str(&plan.over_limit);
        }
    }
}

/// A fresh sample's level as the curve reads it: relative to the request's highest
/// (`Normalize::MaxOfCandidates`) and turned round for `Direction::HigherIsBetter`.
#[inline]
pub(super) fn observed_level(metric: &MetricPlan, mut level: f64) -> f64 {
    if metric.relative {
        // 0 / 0: every candidate is idle (or the only fresh one is): 0 %.
        level = if metric.relative_max > 0.0 { level * 100.0 / metric.relative_max } else { 0.0 };
    }
    if metric.higher_is_better { 100.0 - level } else { level }
}

/// Appends `value` with one decimal, rounded half away from zero ("72.3"). Integer
/// formatting: `{:.1}` of a float was a third of a Filter over thousands of rejected nodes.
pub(super) fn push_one_decimal(out: &mut String, value: f64) {
    let tenths = round_half_away(value * 10.0);
    if tenths.is_nan() || tenths.abs() >= 1e15 {
        let _ = write!(out, "{value:.1}");
        return;
    }
    let tenths = tenths as i64;
    let digit = |d: u64| char::from(b'0' + d as u8);
    if (0..10_000).contains(&tenths) {
        // 0.0 ..= 999.9, what a percentage over a threshold reads: digits pushed in order.
        let (whole, tenth) = ((tenths / 10) as u64, (tenths % 10) as u64);
        out.reserve(5);
        if whole >= 100 {
            out.push(digit(whole / 100));
        }
        if whole >= 10 {
            out.push(digit(whole / 10 % 10));
        }
        out.push(digit(whole % 10));
        out.push('.');
        out.push(digit(tenth));
        return;
    }
    let magnitude = tenths.unsigned_abs();
    // Back to front: the tenth, the point, the whole part, the sign.
    let mut text = [0u8; 24];
    let mut start = text.len() - 2;
    text[start + 1] = b'0' + (magnitude % 10) as u8;
    text[start] = b'.';
    start = write_digits(&mut text[..start], magnitude / 10);
    if tenths < 0 {
        start -= 1;
        text[start] = b'-';
    }
    out.extend(text[start..].iter().map(|&c| char::from(c)));
}

/// Writes `n`'s decimal digits at the end of `buf` (20 bytes hold any u64); returns where
/// they start. What `write!` does, without going through `fmt`'s machinery, which was a
/// tenth of a Filter that rejects many nodes.
pub(super) fn write_digits(buf: &mut [u8], mut n: u64) -> usize {
    let mut start = buf.len();
    loop {
        start -= 1;
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return start;
        }
    }
}

/// Whether a pod on `node` shares an anti-colocation label value with `pod`; the first
/// such pod is named in `reasons`.
pub(super) fn colocation_conflict(
    policy: &Policy,
    snapshot: &Snapshot,
    pod: &Pod,
    node: &str,
    reasons: &mut String,
) -> bool {
    for rule in &policy.anti_colocation {
        let Some(value) = pod.labels.get(&rule.label_key) else { continue };
        // A departed pod is no longer on the node.
        let other = snapshot.ledger().on_node(node).iter().find(|e| {
            !e.source.is_departure()
                && e.uid != pod.uid
                && e.namespace == pod.namespace
                && e.labels.get(&rule.label_key) == Some(value)
        });
        if let Some(other) = other {
            let _ = write!(
                reasons,
                "anti-colocation {}={} with {}/{}",
                rule.label_key, value, other.namespace, other.name
            );
            return true;
        }
    }
    false
}

/// Toward zero, with an epsilon so float noise below an integer (84.99999999) does not lose
/// a point the exact arithmetic has.
pub(super) fn truncate(score: f64) -> f64 {
    (score + 1e-9).trunc()
}
