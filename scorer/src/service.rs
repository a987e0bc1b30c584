//! What `waterline.v1.ScorerService` answers (`grpc.rs` serves it): Filter, Score and
//! Evaluate read the in-memory snapshot (no I/O); Reserve and Unreserve change it at once and
//! queue the change for the collector. A Session stream (`session.rs`) asks the same.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use tonic::Status;
use waterline_api::v1 as pb;
use waterline_convert::{
    ConvertError, FromProto, check_node_names, duration, filter_response, provisional_ttl,
    required_pod, score_response,
};
use waterline_core::engine::{self, Ask, Candidates, Stats};
use waterline_core::placement::placement;
use waterline_core::{LedgerSource, Pod, UnixMillis};
use waterline_runtime::limits::Limits;
use waterline_runtime::policy::Policies;
use waterline_runtime::rpc_metrics::RpcMetrics;

use crate::forward::{Call, Forward, Forwarder};
use crate::store::{Generation, PendingOp, Store};

#[derive(Clone, Default)]
pub struct RequestCounters {
    pub unknown_nodes: Counter,
    pub capped_estimates: Counter,
}

/// Cheap to clone (shared handles only): a Session stream's task holds its own.
#[derive(Clone)]
pub struct Scorer {
    pub store: Arc<Store>,
    /// The default policy and the named ones a request may ask for (`policy`), one
    /// prepared table each in the store.
    pub policies: Policies,
    pub forwarder: Forwarder,
    pub max_nodes: usize,
    /// Counts a `--max-nodes` refusal with the server's other limits.
    pub limits: Limits,
    pub rpc: RpcMetrics,
    pub counters: RequestCounters,
}

impl Scorer {
    fn require_synced(&self) -> Result<(), Status> {
        if self.store.is_synced() {
            Ok(())
        } else {
            Err(Status::unavailable("waiting for the first snapshot from the collector"))
        }
    }

    /// The index in `policies` of the policy a request names (empty: the default); an
    /// unknown name is INVALID_ARGUMENT naming the ones served.
    pub(crate) fn policy_index(&self, name: &str) -> Result<usize, Status> {
        self.policies.index_of(name).map_err(Status::invalid_argument)
    }

    fn candidates(&self, pod: Option<&pb::PodInfo>, nodes: &[String]) -> Result<Pod, Status> {
        let pod = required_pod(pod)?;
        if nodes.len() > self.max_nodes {
            let limit = self.max_nodes;
            let message = ConvertError::TooManyNodes { count: nodes.len(), limit }.to_string();
            return Err(self.limits.reject("nodes", message));
        }
        check_node_names(nodes, self.max_nodes)?;
        Ok(pod)
    }

    /// Filter and Score of `candidates` in one pass over the generation's precomputed rows
    /// (`engine::evaluate`): each candidate's score, or `None` when it is rejected (and
    /// why, in `rejected`). The same numbers as Filter, then Score of the feasible nodes.
    pub(crate) fn evaluate(
        &self,
        generation: &Generation,
        policy: usize,
        pod: &Pod,
        candidates: Candidates<'_>,
        now: UnixMillis,
    ) -> Evaluation {
        let table = generation.prepared_for(policy);
        let policy = self.policies.get(policy);
        let evaluation = engine::evaluate(
            &policy,
            generation.snapshot(),
            Some(table),
            pod,
            Ask::Evaluate,
            candidates,
            now,
        );
        self.count(evaluation.stats);
        Evaluation {
            scores: evaluation.scores.into_iter().map(|s| s.map(clamp_score)).collect(),
            rejected: evaluation.rejected,
            unknown_node_score: clamp_score(evaluation.unknown_node_score),
        }
    }

    pub(crate) fn evaluate_now(
        &self,
        request: pb::EvaluateRequest,
    ) -> Result<pb::EvaluateResponse, Status> {
        self.require_synced()?;
        let policy = self.policy_index(&request.policy)?;
        let now = UnixMillis::now();
        let all_nodes = request.all_nodes;
        let generation = self.store.read();
        let (pod, names) = if all_nodes {
            if !request.node_names.is_empty() {
                return Err(Status::invalid_argument(
                    "node_names must be empty when all_nodes is set",
                ));
            }
            (required_pod(request.pod.as_ref())?, generation.node_table().names.clone())
        } else {
            (self.candidates(request.pod.as_ref(), &request.node_names)?, request.node_names)
        };
        let candidates = if all_nodes { Candidates::All } else { Candidates::Names(&names) };
        let evaluation = self.evaluate(&generation, policy, &pod, candidates, now);
        drop(generation);
        let rejected = evaluation.rejected.iter().map(|(i, r)| (names[i].clone(), r.to_owned()));
        let mut response = pb::EvaluateResponse {
            rejected: rejected.collect(),
            unknown_node_score: evaluation.unknown_node_score,
            snapshot_age: Some(duration(self.store.age(now))),
            ..Default::default()
        };
        if all_nodes {
            for (name, score) in names.into_iter().zip(&evaluation.scores) {
                if let Some(score) = score {
                    response.feasible_nodes.push(name);
                    response.feasible_scores.push(*score);
                }
            }
        } else {
            response.ordered_scores = evaluation.scores.iter().map(|s| s.unwrap_or(-1)).collect();
        }
        Ok(response)
    }

    fn count(&self, stats: Stats) {
        self.counters.unknown_nodes.inc_by(stats.unknown_nodes as u64);
        self.counters.capped_estimates.inc_by(stats.capped_estimates as u64);
    }

    pub(crate) fn filter_now(
        &self,
        request: pb::FilterRequest,
    ) -> Result<pb::FilterResponse, Status> {
        self.require_synced()?;
        let index = self.policy_index(&request.policy)?;
        let policy = self.policies.get(index);
        let now = UnixMillis::now();
        let generation = self.store.read();
        let (snapshot, table) = (generation.snapshot(), Some(generation.prepared_for(index)));
        let response = if request.all_nodes {
            if !request.node_names.is_empty() {
                return Err(Status::invalid_argument(
                    "node_names must be empty when all_nodes is set",
                ));
            }
            // Every node the snapshot holds anything for, only the rejected ones answered.
            let pod = required_pod(request.pod.as_ref())?;
            let evaluation = engine::evaluate(
                &policy,
                snapshot,
                table,
                &pod,
                Ask::Evaluate,
                Candidates::Slots,
                now,
            );
            self.count(evaluation.stats);
            let names = snapshot.slots().map(|(name, _)| name);
            filter_response(names, &evaluation, true, self.store.age(now))
        } else {
            let pod = self.candidates(request.pod.as_ref(), &request.node_names)?;
            let candidates = Candidates::Names(&request.node_names);
            let evaluation =
                engine::evaluate(&policy, snapshot, table, &pod, Ask::Evaluate, candidates, now);
            self.count(evaluation.stats);
            filter_response(request.node_names, &evaluation, false, self.store.age(now))
        };
        Ok(response)
    }

    pub(crate) fn score_now(&self, request: pb::ScoreRequest) -> Result<pb::ScoreResponse, Status> {
        self.require_synced()?;
        if request.scores_only && request.explain {
            return Err(Status::invalid_argument(
                "scores_only cannot be combined with explain (the terms need NodeScore)",
            ));
        }
        let index = self.policy_index(&request.policy)?;
        let pod = self.candidates(request.pod.as_ref(), &request.node_names)?;
        let policy = self.policies.get(index);
        let now = UnixMillis::now();
        let generation = self.store.read();
        let evaluation = engine::evaluate(
            &policy,
            generation.snapshot(),
            Some(generation.prepared_for(index)),
            &pod,
            Ask::Score { explain: request.explain },
            Candidates::Names(&request.node_names),
            now,
        );
        drop(generation);
        self.count(evaluation.stats);
        let age = self.store.age(now);
        Ok(score_response(request.node_names, evaluation, request.scores_only, age))
    }

    /// A Reserve, or with `provisional_ttl` a provisional one (expiring at now + TTL unless
    /// confirmed; see `Ledger::apply` for what it may replace).
    pub(crate) fn reserve_now(
        &self,
        request: pb::ReserveRequest,
    ) -> Result<pb::ReserveResponse, Status> {
        let pod_info = request.pod.unwrap_or_default();
        let pod = Pod::from_proto(&pod_info)?;
        let provisional = provisional_ttl(request.provisional_ttl.as_ref())?;
        let now = UnixMillis::now();
        let source = match provisional {
            Some(ttl) => LedgerSource::Provisional { expires_at: now.plus(ttl) },
            None => LedgerSource::Reserve,
        };
        // The ledger is one for every policy: a placement is priced by the default
        // policy's estimator (and the pod's own estimate-factor), as the collector prices it.
        // The learned usage is the snapshot's, which the collector prices by too.
        let learned = self.store.read().snapshot().learned_handle();
        let entry =
            placement(&self.policies.get(0), &learned, pod, &request.node_name, now, source)
                .map_err(ConvertError::from)?;
        let call = Call::Reserve {
            node: entry.node.clone(),
            placed_at: entry.placed_at,
            provisional_ttl: provisional,
        };
        let seq = self.store.apply_local(PendingOp::Reserve(entry));
        // The collector gets the pod as sent: it estimates (and keeps labels) by its policy.
        self.forwarder.send(Forward { seq, call, pod: pod_info }, &self.store);
        Ok(pb::ReserveResponse {})
    }

    pub(crate) fn unreserve_now(
        &self,
        request: pb::UnreserveRequest,
    ) -> Result<pb::UnreserveResponse, Status> {
        let pod_info = request.pod.unwrap_or_default();
        if pod_info.uid.is_empty() {
            return Err(Status::invalid_argument("pod.uid is required"));
        }
        let seq = self.store.apply_local(PendingOp::Unreserve { uid: pod_info.uid.clone() });
        self.forwarder.send(Forward { seq, call: Call::Unreserve, pod: pod_info }, &self.store);
        Ok(pb::UnreserveResponse {})
    }
}

/// One pod's Evaluate over a list of names.
pub(crate) struct Evaluation {
    /// Per name: its score, `None` when rejected.
    pub scores: Vec<Option<i32>>,
    /// The rejected names (by index) and why, in index order.
    pub rejected: engine::Rejections,
    pub unknown_node_score: i32,
}

/// Scores are 0..100 (the curves' range); saturating rather than wrapping keeps even a
/// broken curve's answer ordered.
fn clamp_score(score: i64) -> i32 {
    score.clamp(i32::MIN.into(), i32::MAX.into()) as i32
}
