//! The four verbs of the extender protocol, on decoded requests: each makes at most one
//! scorer call, and a pod at most one over filter and prioritize together (filter's
//! `Evaluate` leaves the scores in [`ScoreCache`] for prioritize; a miss costs a Score call).
//! Answers are in the scheduler's wire types. Bad input is a [`BadRequest`]
//! (the HTTP layer makes it a 400); a scorer that cannot answer in time gets a neutral
//! answer (every node passes, every node scores the same), recorded by the scorer client.
//! Pods of other schedulers are answered neutrally without a call.
//!
//! Filter splits the rejections by what preemption could do about them: load rejections are
//! unresolvable, anti-colocation conflicts resolvable (see the crate doc).

use std::collections::{HashMap, HashSet};

use tokio::time::Instant;
use waterline_core::extender_score::{best_candidate, map_scores, single_out};
use waterline_runtime::policy::Policies;

use crate::bind::Binder;
use crate::cache::ScoreCache;
use crate::mapping::{eviction_may_resolve, neutral_priorities, short_reason};
use crate::metrics::{CacheLabels, Metrics, VerbLabels};
use crate::pod::Pod;
use crate::provisional::Provisional;
use crate::scorer::{Evaluated, ScorerClient};
use crate::wire::{
    BindingArgs, ErrorResult, ExtenderArgs, FailedNodesMap, FilterResult, HostPriority, NodeList,
    PreemptionArgs, PreemptionResult, node_name,
};

/// A request the protocol does not allow; the message is the wire's `Error`.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadRequest {
    /// Malformed or inconsistent (400).
    #[error("{0}")]
    Invalid(String),
    /// Past a configured limit, `--max-nodes` (413, like a body past `--max-body`).
    #[error("{0}")]
    TooLarge(String),
}

/// Everything the verbs share.
pub struct Extender {
    pub scorer: ScorerClient,
    pub scheduler_names: HashSet<String>,
    pub max_nodes: usize,
    /// The default policy (index 0, the verbs under the prefix) and the named ones (the
    /// verbs under `<prefix>/<name>/`): each route's score mapping, and the name the scorer
    /// is asked to answer with.
    pub policies: Policies,
    pub metrics: Metrics,
    pub binder: Option<Binder>,
    /// Filter's scores for prioritize, by pod uid.
    pub cache: ScoreCache,
    /// Provisional Reserves at prioritize (`--provisional-reserve`).
    pub provisional: Option<Provisional>,
}

/// A decoded filter or prioritize request: the pod, the candidate names in request order,
/// and the raw node objects when the scheduler sent a NodeList.
struct Candidates<'a> {
    pod: Pod,
    names: Vec<String>,
    /// Set when the request carried `NodeNames` (answer with names).
    by_name: bool,
    /// Set when the request carried `Nodes` (answer with node objects); parallel to `names`
    /// unless `by_name` is also set.
    nodes: Option<NodeList<'a>>,
}

impl Candidates<'_> {
    fn pod_key(&self) -> String {
        format!("{}/{}", self.pod.metadata.namespace, self.pod.metadata.name)
    }
}

impl Extender {
    fn gated_out(&self, pod: &Pod, verb: &'static str) -> bool {
        if self.scheduler_names.contains(pod.scheduler_name()) {
            return false;
        }
        self.metrics.gated.get_or_create(&VerbLabels { verb: verb.to_owned() }).inc();
        true
    }

    fn candidates<'a>(&self, args: ExtenderArgs<'a>) -> Result<Candidates<'a>, BadRequest> {
        let pod = args.pod.ok_or_else(|| BadRequest::Invalid("Pod is required".into()))?;
        let (names, by_name) = match (args.node_names, &args.nodes) {
            (Some(names), _) => (names, true),
            (None, Some(list)) => {
                let names = list
                    .items()
                    .iter()
                    .enumerate()
                    .map(|(i, raw)| match node_name(raw) {
                        Ok(name) if !name.is_empty() => Ok(name),
                        Ok(_) => Err(BadRequest::Invalid(format!(
                            "Nodes.items[{i}].metadata.name is missing"
                        ))),
                        Err(e) => Err(BadRequest::Invalid(format!("Nodes.items[{i}]: {e}"))),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                (names, false)
            }
            (None, None) => {
                return Err(BadRequest::Invalid("request has neither Nodes nor NodeNames".into()));
            }
        };
        if names.len() > self.max_nodes {
            return Err(BadRequest::TooLarge(format!(
                "{} candidate nodes exceed --max-nodes {}",
                names.len(),
                self.max_nodes
            )));
        }
        Ok(Candidates { pod, names, by_name, nodes: args.nodes })
    }

    /// Filter with policy `policy` (an index of `policies`).
    pub async fn filter<'a>(
        &self,
        policy: usize,
        args: ExtenderArgs<'a>,
    ) -> Result<FilterResult<'a>, BadRequest> {
        let c = self.candidates(args)?;
        let rejected = if c.names.is_empty() || self.gated_out(&c.pod, "filter") {
            HashMap::new()
        } else {
            if let Some(provisional) = &self.provisional {
                // The previous pod's guess must be in the ledger this pod is judged on.
                provisional.settled(self.scorer.timeout() / 2).await;
            }
            let name = self.policies.name(policy);
            match self.scorer.evaluate(name, c.pod.to_info(), &c.names).await {
                Ok(Evaluated { rejected, scores }) => {
                    if let Some(scores) = scores {
                        self.cache.insert(&c.pod.metadata.uid, scores, Instant::now());
                    }
                    rejected
                }
                Err(failure) => {
                    self.scorer.fall_back("filter", &c.pod_key(), &failure);
                    HashMap::new()
                }
            }
        };
        // Load rejections are unresolvable: evicting pods does not lower the measured load
        // within the cycle, so kube-scheduler must not preempt there. An anti-colocation
        // conflict goes away with the other pod, so preemption may consider that node.
        let mut failed_nodes = FailedNodesMap::new();
        let mut unresolvable = FailedNodesMap::new();
        for name in &c.names {
            if let Some(reason) = rejected.get(name) {
                let map = if eviction_may_resolve(reason) {
                    &mut failed_nodes
                } else {
                    &mut unresolvable
                };
                map.insert(name.clone(), short_reason(reason));
            }
        }
        if !rejected.is_empty() {
            tracing::debug!(pod = %c.pod.metadata.name, ?rejected, "nodes rejected");
        }
        let passes = |name: &String| !rejected.contains_key(name);
        let nodes = c.nodes.as_ref().map(|list| {
            let items = if c.by_name {
                // Both forms sent (only the upstream codec fixture does that): keep the
                // objects whose names pass.
                list.items()
                    .iter()
                    .copied()
                    .filter(|raw| node_name(raw).map(|n| passes(&n)).unwrap_or(true))
                    .collect()
            } else {
                list.items()
                    .iter()
                    .zip(&c.names)
                    .filter(|(_, name)| passes(name))
                    .map(|(raw, _)| *raw)
                    .collect()
            };
            list.with_items(items)
        });
        let node_names = c.by_name.then(|| c.names.iter().filter(|n| passes(n)).cloned().collect());
        Ok(FilterResult {
            nodes,
            node_names,
            failed_nodes,
            // Go's nil map when empty, as before.
            failed_and_unresolvable_nodes: (!unresolvable.is_empty()).then_some(unresolvable),
            error: String::new(),
        })
    }

    /// Prioritize with policy `policy` (an index of `policies`).
    pub async fn prioritize(
        &self,
        policy: usize,
        args: ExtenderArgs<'_>,
    ) -> Result<Vec<HostPriority>, BadRequest> {
        let c = self.candidates(args)?;
        if c.names.is_empty() || self.gated_out(&c.pod, "prioritize") {
            return Ok(neutral_priorities(c.names));
        }
        let cached = self.cache.take(&c.pod.metadata.uid, &c.names, Instant::now());
        let labels = match &cached {
            Ok(_) => CacheLabels { result: "hit".into(), reason: String::new() },
            Err(miss) => CacheLabels { result: "miss".into(), reason: miss.label().into() },
        };
        self.metrics.score_cache.get_or_create(&labels).inc();
        let scores = match cached {
            Ok(scores) => Ok(scores),
            Err(_) => {
                self.scorer.scores(self.policies.name(policy), c.pod.to_info(), &c.names).await
            }
        };
        Ok(match scores {
            Ok(scores) => {
                let mapping = self.policies.get(policy).extender_score_mapping;
                let mut mapped = map_scores(mapping, &scores);
                if let (Some(provisional), Some(at)) = (&self.provisional, best_candidate(&scores))
                {
                    provisional.record(&self.scorer, c.pod.to_info(), c.names[at].clone());
                    // The guess is worth making only if the scheduler follows it on a tie.
                    single_out(&mut mapped, at);
                }
                c.names
                    .into_iter()
                    .zip(mapped)
                    .map(|(host, score)| HostPriority { host, score })
                    .collect()
            }
            Err(failure) => {
                self.scorer.fall_back("prioritize", &c.pod_key(), &failure);
                neutral_priorities(c.names)
            }
        })
    }

    /// Every candidate stays a candidate: waterline has no view on victims.
    pub fn preempt(&self, args: &PreemptionArgs) -> PreemptionResult {
        args.unchanged()
    }

    /// Binds through the Kubernetes API when `--enable-bind` is on; the answer's `Error` is
    /// empty on success.
    pub async fn bind(&self, args: &BindingArgs) -> ErrorResult {
        let error = match &self.binder {
            None => "binding is not enabled on this extender (start it with --enable-bind, or \
                     remove bindVerb from the scheduler's extender configuration)"
                .to_owned(),
            Some(binder) => match binder.bind(&self.scorer, args).await {
                Ok(()) => String::new(),
                Err(error) => {
                    tracing::warn!(
                        pod = %format_args!("{}/{}", args.pod_namespace, args.pod_name),
                        node = %args.node,
                        %error,
                        "bind failed"
                    );
                    error.to_string()
                }
            },
        };
        ErrorResult { error }
    }
}
