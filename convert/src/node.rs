//! Nodes: capacity and samples.

use waterline_api::v1 as pb;
use waterline_core::NodeReport;
use waterline_core::snapshot::{Capacity, Sample};

use crate::time::{timestamp, unix_millis};
use crate::{ConvertError, FromProto, ToProto};

impl ToProto for Capacity {
    type Proto = pb::Capacity;

    fn to_proto(&self) -> pb::Capacity {
        pb::Capacity { cpu_millis: self.cpu_millis, memory_bytes: self.memory_bytes }
    }
}

impl ToProto for NodeReport {
    type Proto = pb::NodeState;

    fn to_proto(&self) -> pb::NodeState {
        pb::NodeState {
            name: self.name.clone(),
            capacity: Some(self.capacity.to_proto()),
            metrics: self
                .samples
                .iter()
                .map(|(metric, s)| pb::MetricSample {
                    metric: metric.clone(),
                    value_percent: s.value,
                    sampled_at: Some(timestamp(s.at)),
                })
                .collect(),
        }
    }
}

impl FromProto for NodeReport {
    type Proto = pb::NodeState;

    /// Non-finite samples are dropped: a value the engine cannot compare is no sample.
    fn from_proto(node: &pb::NodeState) -> Result<NodeReport, ConvertError> {
        let capacity = node
            .capacity
            .map(|c| Capacity { cpu_millis: c.cpu_millis, memory_bytes: c.memory_bytes })
            .unwrap_or_default();
        let samples = node
            .metrics
            .iter()
            .filter(|m| m.value_percent.is_finite())
            .map(|m| {
                let at = m.sampled_at.as_ref().map(unix_millis).unwrap_or_default();
                (m.metric.clone(), Sample { value: m.value_percent, at })
            })
            .collect();
        Ok(NodeReport { name: node.name.clone(), capacity, samples })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use waterline_core::UnixMillis;

    #[test]
    fn nodes_round_trip_and_non_finite_samples_are_dropped() {
        let node = NodeReport {
            name: "n".into(),
            capacity: Capacity { cpu_millis: 8000, memory_bytes: 1 << 30 },
            samples: vec![("cpu".into(), Sample { value: 12.5, at: UnixMillis(1_000) })],
        };
        let mut wire = node.to_proto();
        assert_eq!(NodeReport::from_proto(&wire).unwrap(), node);
        wire.metrics.push(pb::MetricSample {
            metric: "bad".into(),
            value_percent: f64::NAN,
            sampled_at: None,
        });
        assert_eq!(NodeReport::from_proto(&wire).unwrap(), node);
    }
}
