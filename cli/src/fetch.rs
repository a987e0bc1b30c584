//! The calls behind each command. The scorer is asked twice for one pod: `Evaluate` over
//! all of its nodes (the verdicts, and the node set itself) and `Score` with `explain` over
//! those names (the terms). Both read the same in-memory snapshot, which a collector update
//! may replace between the two calls.

use std::collections::HashMap;

use anyhow::Result;
use waterline_api::v1 as pb;

use crate::connect::{Clients, Peer};
use crate::format;

/// The scorer's answer for one pod.
#[derive(Clone, Debug, Default)]
pub struct ScorerView {
    /// Every node of the scorer's snapshot.
    pub nodes: Vec<String>,
    /// Rejected node -> Filter's reason.
    pub rejected: HashMap<String, String>,
    /// Score with explain, for `nodes` and any `extra` names.
    pub scores: Vec<pb::NodeScore>,
    pub snapshot_age_seconds: Option<f64>,
    /// The pod's estimate and how each resource was priced (Score with explain).
    pub estimate: Option<pb::PodEstimate>,
}

/// The scorer refuses a Score naming more nodes than its --max-nodes (10,000 by default).
const SCORE_BATCH: usize = 5_000;

/// Evaluate over every node, then Score with explain over those and `extra` (nodes the
/// caller knows from elsewhere, e.g. the collector).
pub async fn scorer_view(
    clients: &Clients,
    pod: &pb::PodInfo,
    extra: &[String],
) -> Result<ScorerView> {
    let evaluate =
        // The scorer's default policy (a --policy flag for named ones is not there yet).
        pb::EvaluateRequest { pod: Some(pod.clone()), all_nodes: true, ..Default::default() };
    let evaluated = clients
        .scorer()
        .evaluate(clients.request(evaluate))
        .await
        .map_err(|status| clients.fail(Peer::Scorer, "Evaluate", status))?
        .into_inner();
    let mut nodes: Vec<String> = evaluated.feasible_nodes;
    nodes.extend(evaluated.rejected.keys().cloned());
    nodes.sort();
    let mut names = nodes.clone();
    names.extend(extra.iter().filter(|n| nodes.binary_search(n).is_err()).cloned());
    let mut scores = Vec::with_capacity(names.len());
    let mut snapshot_age = evaluated.snapshot_age;
    let mut estimate = None;
    for batch in names.chunks(SCORE_BATCH) {
        let request = pb::ScoreRequest {
            pod: Some(pod.clone()),
            node_names: batch.to_vec(),
            explain: true,
            scores_only: false,
            policy: String::new(),
        };
        let answer = clients
            .scorer()
            .score(clients.request(request))
            .await
            .map_err(|status| clients.fail(Peer::Scorer, "Score", status))?
            .into_inner();
        scores.extend(answer.scores);
        snapshot_age = answer.snapshot_age.or(snapshot_age);
        estimate = estimate.or(answer.estimate);
    }
    Ok(ScorerView {
        nodes,
        rejected: evaluated.rejected,
        scores,
        snapshot_age_seconds: snapshot_age.as_ref().map(format::proto_duration_secs),
        estimate,
    })
}

/// The collector's ListNodes, for `nodes` (empty: all).
pub async fn list_nodes(clients: &Clients, nodes: Vec<String>) -> Result<pb::ListNodesResponse> {
    let request = pb::ListNodesRequest { node_names: nodes };
    Ok(clients
        .collector()
        .list_nodes(clients.request(request))
        .await
        .map_err(|status| clients.fail(Peer::Collector, "ListNodes", status))?
        .into_inner())
}
