//! Shadow judgements (`ShadowDecisions`).

use waterline_api::v1 as pb;
use waterline_core::shadow::{Decision, Level};

use crate::ToProto;
use crate::answer::wire_score;
use crate::time::timestamp;

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl ToProto for Level {
    type Proto = pb::ShadowLevel;

    fn to_proto(&self) -> pb::ShadowLevel {
        pb::ShadowLevel {
            metric: self.metric.clone(),
            predicted_percent: self.predicted,
            target_percent: self.target,
        }
    }
}

impl ToProto for Decision {
    type Proto = pb::ShadowDecision;

    fn to_proto(&self) -> pb::ShadowDecision {
        let (best_node, best_score) = self.best.clone().unwrap_or_default();
        pb::ShadowDecision {
            pod_namespace: self.namespace.clone(),
            pod_name: self.name.clone(),
            pod_uid: self.uid.clone(),
            scheduler_name: self.scheduler.clone(),
            chosen_node: self.chosen_node.clone(),
            chosen_score: wire_score(self.chosen_score),
            rejected_reason: self.rejection.clone().unwrap_or_default(),
            rejected_by: self.rejected_by.clone(),
            chosen_fits_requests: self.chosen_fits,
            chosen_known: self.chosen_known,
            best_node,
            best_score: wire_score(best_score),
            regret: wire_score(self.regret),
            chosen_levels: self.levels.iter().map(ToProto::to_proto).collect(),
            candidate_nodes: count(self.candidates),
            fitting_nodes: count(self.fitting),
            feasible_nodes: count(self.feasible),
            bound_at: Some(timestamp(self.bound_at)),
            judged_at: Some(timestamp(self.judged_at)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use waterline_core::UnixMillis;

    #[test]
    fn a_decision_maps_field_by_field_and_no_best_is_empty() {
        let decision = Decision {
            namespace: "ns".into(),
            name: "web".into(),
            uid: "u1".into(),
            scheduler: "default-scheduler".into(),
            chosen_node: "hot".into(),
            chosen_score: 6,
            rejection: Some("cpu_usage_avg_5m 90.6% > 65%".into()),
            rejected_by: vec!["cpu_usage_avg_5m".into()],
            chosen_fits: true,
            chosen_known: true,
            best: Some(("cool".into(), 86)),
            regret: 80,
            levels: vec![Level {
                metric: "cpu_usage_avg_5m".into(),
                predicted: 90.625,
                target: 40.0,
            }],
            candidates: 3,
            fitting: 3,
            feasible: 2,
            bound_at: UnixMillis(1_500),
            judged_at: UnixMillis(2_000),
        };
        let wire = decision.to_proto();
        assert_eq!((wire.chosen_node.as_str(), wire.chosen_score), ("hot", 6));
        assert_eq!((wire.best_node.as_str(), wire.best_score, wire.regret), ("cool", 86, 80));
        assert_eq!(wire.rejected_reason, "cpu_usage_avg_5m 90.6% > 65%");
        assert_eq!(wire.rejected_by, ["cpu_usage_avg_5m"]);
        assert_eq!((wire.candidate_nodes, wire.fitting_nodes, wire.feasible_nodes), (3, 3, 2));
        assert_eq!(wire.chosen_levels[0].predicted_percent, 90.625);
        let bound = wire.bound_at.unwrap();
        assert_eq!((bound.seconds, bound.nanos), (1, 500_000_000));
        let accepted = Decision { rejection: None, rejected_by: vec![], best: None, ..decision };
        let wire = accepted.to_proto();
        assert_eq!((wire.rejected_reason.as_str(), wire.best_node.as_str()), ("", ""));
    }
}
