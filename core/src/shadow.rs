//! Shadow judgement (docs/design.md#shadow-mode): how waterline would have judged a placement that
//! another scheduler made — the chosen node's score and Filter verdict against waterline's best
//! node among those that fit the pod's requests.
//!
//! A [`ShadowView`] is the cluster as a scorer sees it (a [`Snapshot`] fed by the same
//! deltas) plus the requests of the pods bound to each node, for request fit. Judging runs
//! the one engine ([`crate::engine::evaluate`]: Evaluate for the verdicts, Score for every
//! candidate's score); nothing here re-implements a formula.
//!
//! **Request fit** approximates kube-scheduler's NodeResourcesFit for cpu and memory only:
//! a pod fits a node when, for each of cpu and memory it requests (a zero request always
//! fits, as upstream), `request <= allocatable − Σ requests of the pods bound there`. It
//! does not check the pod count, extended resources, ephemeral storage, host ports, taints
//! and tolerations, node affinity or selectors, topology spread or inter-pod affinity, so
//! it can count a node as fitting that kube-scheduler would not (never the reverse, for cpu
//! and memory, when allocatable and the bound pods are the same).

use std::collections::HashMap;

use crate::FastMap;
use crate::delta::Delta;
use crate::engine::{self, Ask, Candidates};
use crate::pod::Pod;
use crate::policy::{Curve, Policy};
use crate::snapshot::Snapshot;
use crate::time::UnixMillis;

/// Requested cpu and memory (`resources.requests`, the pod rule's effective requests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
}

impl Requests {
    fn add(&mut self, other: Requests, sign: i64) {
        self.cpu_millis = self.cpu_millis.saturating_add(sign * other.cpu_millis);
        self.memory_bytes = self.memory_bytes.saturating_add(sign * other.memory_bytes);
    }

    pub fn of(pod: &Pod) -> Requests {
        Requests { cpu_millis: pod.cpu_request_millis, memory_bytes: pod.memory_request_bytes }
    }
}

/// A pod another scheduler bound, to judge.
#[derive(Clone, Debug, PartialEq)]
pub struct Bind {
    pub pod: Pod,
    pub scheduler: String,
    pub node: String,
    /// The pod's PodScheduled time (what the ledger stamps it with).
    pub bound_at: UnixMillis,
}

/// The chosen node's predicted level of one water-level metric against its target.
#[derive(Clone, Debug, PartialEq)]
pub struct Level {
    pub metric: String,
    pub predicted: f64,
    pub target: f64,
}

/// What waterline makes of one bind.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub scheduler: String,
    pub chosen_node: String,
    pub chosen_score: i64,
    /// Filter's reason for rejecting the chosen node, as Filter words it; `None`: accepted.
    pub rejection: Option<String>,
    /// The metrics (or `anti-colocation`) the rejection names, in its order.
    pub rejected_by: Vec<String>,
    /// Whether the chosen node fits the pod's requests by this view's approximation.
    pub chosen_fits: bool,
    /// Whether the snapshot knows the chosen node (else Filter passes and Score gives it
    /// the stale score, as for any unknown node).
    pub chosen_known: bool,
    /// Waterline's best node and its score: the highest-scored node that fits and passes
    /// Filter (the chosen node on a tie). `None`: no node would have taken the pod.
    pub best: Option<(String, i64)>,
    /// `best score − chosen score`, at least 0; 0 without a best node.
    pub regret: i64,
    /// The chosen node's predicted level per water-level metric with a fresh sample.
    pub levels: Vec<Level>,
    /// Nodes judged (every node the snapshot holds a state for, and the chosen one).
    pub candidates: usize,
    /// Of those, the nodes that fit the requests, and the ones that also pass Filter.
    pub fitting: usize,
    pub feasible: usize,
    pub bound_at: UnixMillis,
    pub judged_at: UnixMillis,
}

/// The cluster as the judge sees it; see the module docs.
#[derive(Debug, Default)]
pub struct ShadowView {
    snapshot: Snapshot,
    /// Bound pods: uid → (node, requests).
    bound: HashMap<String, (String, Requests)>,
    requested: FastMap<String, Requests>,
    /// Every node with a state, sorted; rebuilt when the node set changes.
    names: Vec<String>,
    names_stale: bool,
}

impl ShadowView {
    /// A view of `snapshot` with no bound pods yet.
    pub fn new(snapshot: Snapshot) -> Self {
        ShadowView { snapshot, names_stale: true, ..ShadowView::default() }
    }

    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Applies a change of the collector's state (what every scorer applies too).
    pub fn apply(&mut self, delta: &Delta) {
        delta.apply_to(&mut self.snapshot);
        let named = |n: &str| self.names.binary_search_by(|x| x.as_str().cmp(n)).is_ok();
        self.names_stale |= delta.reset
            || !delta.removed_nodes.is_empty()
            || delta.nodes.iter().any(|n| !named(&n.name));
    }

    /// A pod is bound to `node` with `requests` (replacing what was known of it).
    pub fn bind(&mut self, uid: &str, node: &str, requests: Requests) {
        self.unbind(uid);
        self.requested.entry(node.to_owned()).or_default().add(requests, 1);
        self.bound.insert(uid.to_owned(), (node.to_owned(), requests));
    }

    /// A pod no longer holds its node; a no-op for an unknown pod.
    pub fn unbind(&mut self, uid: &str) {
        if let Some((node, requests)) = self.bound.remove(uid)
            && let Some(sum) = self.requested.get_mut(&node)
        {
            sum.add(requests, -1);
            if *sum == Requests::default() {
                self.requested.remove(&node);
            }
        }
    }

    /// Replaces every bound pod (a fresh pod list).
    pub fn reset_bound(&mut self, bound: impl IntoIterator<Item = (String, String, Requests)>) {
        self.bound.clear();
        self.requested.clear();
        for (uid, node, requests) in bound {
            self.bind(&uid, &node, requests);
        }
    }

    /// The requests of the pods bound to `node`.
    pub fn requested(&self, node: &str) -> Requests {
        self.requested.get(node).copied().unwrap_or_default()
    }

    /// Request fit of `pod` on `node` (see the module docs): a node the snapshot does not
    /// know has no allocatable, so only a pod requesting nothing fits it.
    pub fn fits(&self, pod: &Pod, node: &str) -> bool {
        let capacity = self.snapshot.node(node).map(|n| n.capacity).unwrap_or_default();
        let requested = self.requested(node);
        let fits = |want: i64, allocatable: i64, used: i64| {
            want <= 0 || want <= allocatable.saturating_sub(used)
        };
        fits(pod.cpu_request_millis, capacity.cpu_millis, requested.cpu_millis)
            && fits(pod.memory_request_bytes, capacity.memory_bytes, requested.memory_bytes)
    }

    fn refresh_names(&mut self) {
        if self.names_stale {
            self.names = self.snapshot.nodes().map(|n| n.name.clone()).collect();
            self.names.sort_unstable();
            self.names_stale = false;
        }
    }

    /// Judges `bind` against the view as it is: call it before the bind's own placement
    /// and requests are applied. An entry the ledger already holds for the pod (a
    /// scheduler's Reserve or a provisional guess) is left out while judging and put back
    /// after, so the pod is never counted against itself.
    pub fn judge(&mut self, policy: &Policy, bind: &Bind, now: UnixMillis) -> Decision {
        self.refresh_names();
        let own = self.snapshot.delete_placement(&bind.pod.uid);
        let decision = self.judge_without_own(policy, bind, now);
        if let Some(entry) = own {
            self.snapshot.apply_placement(entry);
        }
        decision
    }

    fn judge_without_own(&self, policy: &Policy, bind: &Bind, now: UnixMillis) -> Decision {
        let pod = &bind.pod;
        let extra;
        let names: &[String] = match self.names.binary_search(&bind.node) {
            Ok(_) => &self.names,
            Err(_) => {
                extra = self.names.iter().cloned().chain([bind.node.clone()]).collect::<Vec<_>>();
                &extra
            }
        };
        // Filter's verdict and Score's score of every candidate, the chosen node's even when
        // the policy rejects it (its regret is still worth knowing).
        let candidates = Candidates::Names(names);
        let filtered =
            engine::evaluate(policy, &self.snapshot, None, pod, Ask::Evaluate, candidates, now);
        let verdicts = filtered.verdicts();
        let score = Ask::Score { explain: false };
        let scored = engine::evaluate(policy, &self.snapshot, None, pod, score, candidates, now);
        let mut best: Option<(usize, i64)> = None;
        let (mut fitting, mut feasible) = (0, 0);
        let mut chosen = None;
        for (i, name) in names.iter().enumerate() {
            let score = scored.scores[i].unwrap_or_default();
            if *name == bind.node {
                chosen = Some(i);
            }
            if !self.fits(pod, name) {
                continue;
            }
            fitting += 1;
            if verdicts[i].is_some() {
                continue;
            }
            feasible += 1;
            let better = match best {
                None => true,
                // The chosen node wins a tie: the other scheduler picked a best node.
                Some((b, s)) => score > s || (score == s && *name == bind.node && b != i),
            };
            if better {
                best = Some((i, score));
            }
        }
        let chosen = chosen.expect("the chosen node is a candidate");
        let chosen_score = scored.scores[chosen].unwrap_or_default();
        let rejection = verdicts[chosen].map(str::to_owned);
        let best = best.map(|(i, score)| (names[i].clone(), score));
        Decision {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
            scheduler: bind.scheduler.clone(),
            chosen_node: bind.node.clone(),
            chosen_score,
            rejected_by: rejection.as_deref().map(|r| rejected_by(policy, r)).unwrap_or_default(),
            rejection,
            chosen_fits: self.fits(pod, &bind.node),
            chosen_known: self.snapshot.node(&bind.node).is_some(),
            regret: best.as_ref().map_or(0, |(_, s)| (s - chosen_score).max(0)),
            best,
            levels: levels(policy, &self.snapshot, pod, &bind.node, now),
            candidates: names.len(),
            fitting,
            feasible,
            bound_at: bind.bound_at,
            judged_at: now,
        }
    }
}

/// The chosen node's predicted level against the target of each water-level metric, from
/// Score's own explanation.
fn levels(
    policy: &Policy,
    snapshot: &Snapshot,
    pod: &Pod,
    node: &str,
    now: UnixMillis,
) -> Vec<Level> {
    let names = [node.to_owned()];
    let explain = Ask::Score { explain: true };
    let explained =
        engine::evaluate(policy, snapshot, None, pod, explain, Candidates::Names(&names), now);
    let Some(terms) = explained.terms.first() else { return Vec::new() };
    policy
        .metrics
        .iter()
        .zip(terms)
        .filter(|(_, term)| !term.stale)
        .filter_map(|(metric, term)| match policy.curve_of(metric) {
            Curve::WaterLevel { target } => Some(Level {
                metric: metric.name.clone(),
                predicted: term.predicted,
                target: *target,
            }),
            _ => None,
        })
        .collect()
}

/// What a Filter reason names: each `; `-separated part is a policy metric's breach
/// (`cpu_usage_avg_5m 71.3% > 65%`, `mem_usage_avg_5m has no fresh sample`) or an
/// anti-colocation conflict; anything else is `other`.
pub fn rejected_by(policy: &Policy, reason: &str) -> Vec<String> {
    reason
        .split("; ")
        .map(|part| {
            if part.starts_with("anti-colocation ") {
                return "anti-colocation".to_owned();
            }
            policy
                .metrics
                .iter()
                .find(|m| part.strip_prefix(m.name.as_str()).is_some_and(|r| r.starts_with(' ')))
                .map_or_else(|| "other".to_owned(), |m| m.name.clone())
        })
        .collect()
}

#[cfg(test)]
mod tests;
