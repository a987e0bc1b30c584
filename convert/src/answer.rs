//! The engine's answers as Filter and Score responses.

use waterline_api::v1 as pb;
use waterline_core::engine::Evaluation;
use waterline_core::{Millis, ScoreTerm};

use crate::ToProto;
use crate::time::duration;

/// The Filter answer from an evaluation of `names`, the candidates in the evaluation's
/// order; with `rejected_only` (Filter's `all_nodes`) the feasible ones are left out. A name
/// becomes a `String` only when it goes into the answer.
pub fn filter_response<S: Into<String>>(
    names: impl IntoIterator<Item = S>,
    evaluation: &Evaluation,
    rejected_only: bool,
    snapshot_age: Millis,
) -> pb::FilterResponse {
    let mut response =
        pb::FilterResponse { snapshot_age: Some(duration(snapshot_age)), ..Default::default() };
    for (name, verdict) in names.into_iter().zip(evaluation.verdicts()) {
        match verdict {
            Some(reason) => {
                response.rejected.insert(name.into(), reason.to_owned());
            }
            None if !rejected_only => response.feasible_nodes.push(name.into()),
            None => {}
        }
    }
    response
}

impl ToProto for ScoreTerm {
    type Proto = pb::ScoreTerm;

    fn to_proto(&self) -> pb::ScoreTerm {
        pb::ScoreTerm {
            metric: self.metric.clone(),
            observed_percent: self.observed,
            ledger_percent: self.ledger,
            incoming_percent: self.incoming,
            predicted_percent: self.predicted,
            curve_score: self.curve_score,
            weight: self.weight,
            stale: self.stale,
        }
    }
}

/// The Score answer for `names`, the candidates `evaluation` scored (`Ask::Score`), in the
/// same order: bare scores in request order when `scores_only`, else named scores whose
/// names move in from the request, with the terms and the pod's estimate when they were
/// explained.
pub fn score_response(
    names: Vec<String>,
    evaluation: Evaluation,
    scores_only: bool,
    snapshot_age: Millis,
) -> pb::ScoreResponse {
    let snapshot_age = Some(duration(snapshot_age));
    if scores_only {
        return pb::ScoreResponse {
            scores: Vec::new(),
            snapshot_age,
            ordered_scores: evaluation
                .scores
                .iter()
                .map(|s| wire_score(s.unwrap_or_default()))
                .collect(),
            estimate: None,
        };
    }
    let estimate = evaluation.estimate.as_ref().map(ToProto::to_proto);
    pb::ScoreResponse {
        estimate,
        scores: names
            .into_iter()
            .zip(evaluation.scores)
            .enumerate()
            .map(|(i, (node_name, score))| pb::NodeScore {
                node_name,
                score: wire_score(score.unwrap_or_default()),
                terms: evaluation
                    .terms
                    .get(i)
                    .map_or_else(Vec::new, |terms| terms.iter().map(ToProto::to_proto).collect()),
            })
            .collect(),
        snapshot_age,
        ordered_scores: Vec::new(),
    }
}

/// A score as the wire carries it (int32). Scores are 0..100 (the curves' range);
/// saturating rather than wrapping keeps even a broken curve's answer ordered.
pub fn wire_score(score: i64) -> i32 {
    score.clamp(i32::MIN.into(), i32::MAX.into()) as i32
}
