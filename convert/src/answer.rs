//! The engine's answers as Filter and Score responses.

use waterline_api::v1 as pb;
use waterline_core::engine::{FilterVerdicts, ScoreOutcome};
use waterline_core::{Millis, ScoreTerm};

use crate::ToProto;
use crate::time::duration;

pub fn filter_response(verdicts: FilterVerdicts, snapshot_age: Millis) -> pb::FilterResponse {
    pb::FilterResponse {
        feasible_nodes: verdicts.feasible,
        rejected: verdicts.rejected.into_iter().collect(),
        snapshot_age: Some(duration(snapshot_age)),
    }
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

/// The Score answer for `names`, the candidates the outcome was computed for, in the same
/// order: bare scores in request order when `scores_only`, else named scores whose names
/// move in from the request.
pub fn score_response(
    names: Vec<String>,
    outcome: ScoreOutcome,
    scores_only: bool,
    snapshot_age: Millis,
) -> pb::ScoreResponse {
    let snapshot_age = Some(duration(snapshot_age));
    if scores_only {
        return pb::ScoreResponse {
            scores: Vec::new(),
            snapshot_age,
            // Scores are 0..100 (the curves' range); saturating rather than wrapping keeps
            // even a broken curve's answer ordered.
            ordered_scores: outcome
                .scores
                .iter()
                .map(|s| s.score.clamp(i32::MIN.into(), i32::MAX.into()) as i32)
                .collect(),
        };
    }
    pb::ScoreResponse {
        scores: names
            .into_iter()
            .zip(outcome.scores)
            .map(|(node_name, s)| pb::NodeScore {
                node_name,
                score: s.score,
                terms: s.terms.iter().map(ToProto::to_proto).collect(),
            })
            .collect(),
        snapshot_age,
        ordered_scores: Vec::new(),
    }
}
