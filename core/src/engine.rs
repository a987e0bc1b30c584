//! Filter and Score (design.md §4): predicted utilisation per metric — observed + ledger +
//! incoming — run through the policy's curve and thresholds. Pure functions of a policy, a
//! snapshot, a pod, the candidate names and `now`.

use crate::curve::{least_used, round_score, water_level};
use crate::estimate::{Usage, estimate};
use crate::pod::Pod;
use crate::policy::{Curve, MetricSpec, Policy, Resource, StaleFilter};
use crate::snapshot::{Capacity, Snapshot};
use crate::time::UnixMillis;

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

#[derive(Clone, Debug, PartialEq)]
pub struct NodeScore {
    pub node: String,
    pub score: i64,
    /// One per policy metric, only when explain was asked for.
    pub terms: Vec<ScoreTerm>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct FilterOutcome {
    pub feasible: Vec<String>,
    /// Rejected node and why.
    pub rejected: Vec<(String, String)>,
    pub stats: Stats,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScoreOutcome {
    pub scores: Vec<NodeScore>,
    pub stats: Stats,
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

/// One metric on one node, before the curve.
#[derive(Clone, Copy, Debug)]
struct Prediction {
    /// `None` when the sample is missing or older than the metric's max age.
    observed: Option<f64>,
    ledger: f64,
    incoming: f64,
}

impl Prediction {
    fn predicted(&self) -> f64 {
        self.observed.unwrap_or(0.0) + self.ledger + self.incoming
    }
}

/// Per-request state resolved once: metric ids and the incoming pod's estimate.
struct Request<'a> {
    policy: &'a Policy,
    snapshot: &'a Snapshot,
    metric_ids: Vec<Option<usize>>,
    incoming: Usage,
    now: UnixMillis,
}

fn percent_of(amount: i64, capacity: i64, capped: &mut bool) -> f64 {
    if capacity <= 0 || amount <= 0 {
        return 0.0;
    }
    // A millionth of a percent is noise, and rounding it away keeps a tiny pod on a huge
    // node from tipping a value that sits exactly on the curve's target.
    let pct = (amount as f64 * 100.0 / capacity as f64 * 1e6).round() / 1e6;
    if pct > 100.0 {
        *capped = true;
        100.0
    } else {
        pct
    }
}

fn share(resource: Resource, usage: Usage, capacity: Capacity, capped: &mut bool) -> f64 {
    match resource {
        Resource::Cpu => percent_of(usage.cpu_millis, capacity.cpu_millis, capped),
        Resource::Memory => percent_of(usage.memory_bytes, capacity.memory_bytes, capped),
        Resource::Other => 0.0,
    }
}

impl<'a> Request<'a> {
    fn new(policy: &'a Policy, snapshot: &'a Snapshot, pod: &Pod, now: UnixMillis) -> Self {
        Request {
            policy,
            snapshot,
            metric_ids: policy.metrics.iter().map(|m| snapshot.metric_id(&m.name)).collect(),
            incoming: estimate(&policy.estimator, pod),
            now,
        }
    }

    /// Predictions for every policy metric of `node` (`None` for an unknown node).
    fn predict(&self, node: &str, stats: &mut Stats) -> Option<Vec<Prediction>> {
        let state = self.snapshot.node(node)?;
        let ledger = if self.policy.ledger.enabled {
            self.snapshot.ledger.unabsorbed(node, self.now, self.policy.ledger.absorb_window)
        } else {
            Usage::default()
        };
        let mut capped = false;
        let mut stale = false;
        let predictions = self
            .policy
            .metrics
            .iter()
            .zip(&self.metric_ids)
            .map(|(metric, id)| {
                let observed = id
                    .and_then(|id| state.sample(id))
                    .filter(|s| self.now.since(s.at) <= metric.max_age)
                    .map(|s| s.value);
                stale |= observed.is_none();
                Prediction {
                    observed,
                    ledger: share(metric.resource, ledger, state.capacity, &mut capped),
                    incoming: share(metric.resource, self.incoming, state.capacity, &mut capped),
                }
            })
            .collect();
        stats.capped_estimates += usize::from(capped);
        stats.stale_nodes += usize::from(stale);
        Some(predictions)
    }

    fn curve_score(&self, prediction: &Prediction) -> f64 {
        match (&self.policy.curve, prediction.observed) {
            // Crane counts a metric without a fresh sample as fully used.
            (Curve::Crane { .. }, None) => 0.0,
            (_, None) => self.policy.stale.score,
            (Curve::WaterLevel { target }, Some(_)) => water_level(*target, prediction.predicted()),
            (Curve::LeastUsed, Some(_)) => least_used(prediction.predicted()),
            // Crane reads observed values only; recent placements enter as the hot value.
            (Curve::Crane { .. }, Some(observed)) => least_used(observed),
        }
    }

    fn combine(&self, node: &str, predictions: Option<&[Prediction]>) -> f64 {
        let metrics = &self.policy.metrics;
        let total_weight: f64 = metrics.iter().map(|m| m.weight).sum();
        let weighted: f64 = match predictions {
            Some(p) => metrics.iter().zip(p).map(|(m, p)| m.weight * self.curve_score(p)).sum(),
            None => self.unknown_score() * total_weight,
        };
        let score = weighted / total_weight;
        match &self.policy.curve {
            Curve::Crane { hot_windows } => {
                let hot: usize = hot_windows
                    .iter()
                    .map(|w| {
                        self.snapshot.ledger.placements_within(node, self.now, w.window)
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

    /// Curve score of a node with no data at all.
    fn unknown_score(&self) -> f64 {
        match self.policy.curve {
            // Crane counts missing metrics as fully used.
            Curve::Crane { .. } => 0.0,
            _ => self.policy.stale.score,
        }
    }

    fn terms(&self, predictions: Option<&[Prediction]>) -> Vec<ScoreTerm> {
        self.policy
            .metrics
            .iter()
            .enumerate()
            .map(|(i, metric)| {
                let p = predictions.map(|p| p[i]).unwrap_or(Prediction {
                    observed: None,
                    ledger: 0.0,
                    incoming: 0.0,
                });
                let curve_score = self.curve_score(&p);
                ScoreTerm {
                    metric: metric.name.clone(),
                    observed: p.observed.unwrap_or(0.0),
                    ledger: p.ledger,
                    incoming: p.incoming,
                    predicted: p.predicted(),
                    curve_score,
                    weight: metric.weight,
                    stale: p.observed.is_none(),
                }
            })
            .collect()
    }

    /// Why the pod may not go to a known node, if it may not.
    fn load_rejection(&self, predictions: &[Prediction]) -> Option<String> {
        let reasons: Vec<String> = self
            .policy
            .metrics
            .iter()
            .zip(predictions)
            .filter_map(|(metric, p)| threshold_breach(metric, p, self.policy.stale.filter))
            .collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}

fn threshold_breach(metric: &MetricSpec, p: &Prediction, stale: StaleFilter) -> Option<String> {
    let limit = metric.filter_above?;
    match p.observed {
        None if stale == StaleFilter::Reject => {
            Some(format!("{} has no fresh sample", metric.name))
        }
        None => None,
        Some(_) => {
            let predicted = p.predicted();
            (predicted > limit).then(|| format!("{} {:.1}% > {}%", metric.name, predicted, limit))
        }
    }
}

/// The first pod on `node` that shares an anti-colocation label value with `pod`.
fn colocation_conflict(
    policy: &Policy,
    snapshot: &Snapshot,
    pod: &Pod,
    node: &str,
) -> Option<String> {
    for rule in &policy.anti_colocation {
        let Some(value) = pod.labels.get(&rule.label_key) else { continue };
        let other = snapshot.ledger.on_node(node).iter().find(|e| {
            e.uid != pod.uid
                && e.namespace == pod.namespace
                && e.labels.get(&rule.label_key) == Some(value)
        });
        if let Some(other) = other {
            return Some(format!(
                "anti-colocation {}={} with {}/{}",
                rule.label_key, value, other.namespace, other.name
            ));
        }
    }
    None
}

pub fn filter(
    policy: &Policy,
    snapshot: &Snapshot,
    pod: &Pod,
    nodes: &[String],
    now: UnixMillis,
) -> FilterOutcome {
    let request = Request::new(policy, snapshot, pod, now);
    let mut outcome = FilterOutcome::default();
    for node in nodes {
        let reason = colocation_conflict(policy, snapshot, pod, node).or_else(|| {
            match request.predict(node, &mut outcome.stats) {
                None => {
                    outcome.stats.unknown_nodes += 1;
                    None
                }
                Some(_) if pod.bypasses_load_filters() => None,
                Some(predictions) => request.load_rejection(&predictions),
            }
        });
        match reason {
            Some(reason) => outcome.rejected.push((node.clone(), reason)),
            None => outcome.feasible.push(node.clone()),
        }
    }
    outcome
}

pub fn score(
    policy: &Policy,
    snapshot: &Snapshot,
    pod: &Pod,
    nodes: &[String],
    now: UnixMillis,
    explain: bool,
) -> ScoreOutcome {
    let request = Request::new(policy, snapshot, pod, now);
    let mut stats = Stats::default();
    let scores = nodes
        .iter()
        .map(|node| {
            let predictions = request.predict(node, &mut stats);
            if predictions.is_none() {
                stats.unknown_nodes += 1;
            }
            let score = round_score(request.combine(node, predictions.as_deref()));
            let terms = if explain { request.terms(predictions.as_deref()) } else { Vec::new() };
            NodeScore { node: node.clone(), score, terms }
        })
        .collect();
    ScoreOutcome { scores, stats }
}

#[cfg(test)]
mod tests;
