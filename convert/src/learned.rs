//! The learned usage per workload (`WorkloadUsage`, `LearnedResource`) and a pod's priced
//! estimate (`PodEstimate`, `EstimateSource`) on the wire.

use waterline_api::v1 as pb;
use waterline_core::estimate::{Estimate, Source};
use waterline_core::learn::{Learned, LearnedUsage, WorkloadUsage};
use waterline_core::workload::WorkloadKey;

use crate::{ConvertError, FromProto, ToProto};

impl ToProto for Learned {
    type Proto = pb::LearnedResource;

    fn to_proto(&self) -> pb::LearnedResource {
        pb::LearnedResource {
            ratio: self.ratio,
            usage: self.usage,
            spread: self.spread,
            pods: self.pods,
            samples: self.samples,
        }
    }
}

/// The table in key order (`LearnedUsage::sorted`), so the same table is the same message.
impl ToProto for LearnedUsage {
    type Proto = Vec<pb::WorkloadUsage>;

    fn to_proto(&self) -> Vec<pb::WorkloadUsage> {
        self.sorted()
            .into_iter()
            .map(|(key, usage)| pb::WorkloadUsage {
                namespace: key.namespace.clone(),
                kind: key.kind.clone(),
                name: key.name.clone(),
                cpu: usage.cpu.as_ref().map(ToProto::to_proto),
                memory: usage.memory.as_ref().map(ToProto::to_proto),
            })
            .collect()
    }
}

/// `learned[index]`'s `resource`, checked: every number finite and not negative.
fn learned(
    index: usize,
    row: &pb::WorkloadUsage,
    resource: &str,
    wire: Option<&pb::LearnedResource>,
) -> Result<Option<Learned>, ConvertError> {
    let Some(wire) = wire else { return Ok(None) };
    let check = |name: &str, value: f64| {
        if value.is_finite() && value >= 0.0 {
            Ok(value)
        } else {
            Err(ConvertError::BadLearned {
                field: format!("learned[{index}].{resource}.{name}"),
                workload: format!("{}/{}/{}", row.namespace, row.kind, row.name),
                value: value.to_string(),
            })
        }
    };
    Ok(Some(Learned {
        ratio: wire.ratio.map(|r| check("ratio", r)).transpose()?,
        usage: check("usage", wire.usage)?,
        spread: check("spread", wire.spread)?,
        pods: wire.pods,
        samples: wire.samples,
    }))
}

/// One row of the table, `index` naming it in errors: a kind and a name are required (the
/// namespace is empty for no workload the collector derives, but harmless).
pub fn workload_from_proto(
    index: usize,
    row: &pb::WorkloadUsage,
) -> Result<(WorkloadKey, WorkloadUsage), ConvertError> {
    for (field, value) in [("kind", &row.kind), ("name", &row.name)] {
        if value.is_empty() {
            return Err(ConvertError::MissingField(format!("learned[{index}].{field}")));
        }
    }
    let usage = WorkloadUsage {
        cpu: learned(index, row, "cpu", row.cpu.as_ref())?,
        memory: learned(index, row, "memory", row.memory.as_ref())?,
    };
    Ok((WorkloadKey::new(&row.namespace, &row.kind, &row.name), usage))
}

/// Strict: the first bad row fails the whole table.
impl FromProto for LearnedUsage {
    type Proto = Vec<pb::WorkloadUsage>;

    fn from_proto(rows: &Vec<pb::WorkloadUsage>) -> Result<LearnedUsage, ConvertError> {
        rows.iter().enumerate().map(|(i, row)| workload_from_proto(i, row)).collect()
    }
}

impl ToProto for Source {
    type Proto = pb::EstimateSource;

    fn to_proto(&self) -> pb::EstimateSource {
        use pb::EstimateSourceKind as Kind;
        match *self {
            Source::Factor { factor } => {
                pb::EstimateSource { kind: Kind::Factor as i32, factor, ..Default::default() }
            }
            Source::Override { factor } => {
                pb::EstimateSource { kind: Kind::Override as i32, factor, ..Default::default() }
            }
            Source::Learned { ratio, pods, samples } => {
                pb::EstimateSource { kind: Kind::Learned as i32, factor: 0.0, ratio, pods, samples }
            }
        }
    }
}

impl ToProto for Estimate {
    type Proto = pb::PodEstimate;

    fn to_proto(&self) -> pb::PodEstimate {
        pb::PodEstimate {
            cpu_millis: self.usage.cpu_millis,
            memory_bytes: self.usage.memory_bytes,
            cpu: Some(self.cpu.to_proto()),
            memory: Some(self.memory.to_proto()),
            workload: self.workload.as_ref().map(ToString::to_string).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use waterline_core::estimate::Usage;

    fn table() -> LearnedUsage {
        let cpu = Learned { ratio: Some(2.0), usage: 1000.0, spread: 0.25, pods: 3, samples: 360 };
        let memory = Learned { ratio: None, usage: 5e8, spread: 1e7, pods: 2, samples: 240 };
        [
            (
                WorkloadKey::new("shop", "Deployment", "web"),
                WorkloadUsage { cpu: Some(cpu), memory: None },
            ),
            (
                WorkloadKey::new("batch", "CronJob", "report"),
                WorkloadUsage { cpu: None, memory: Some(memory) },
            ),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn the_table_round_trips_in_key_order() {
        let wire = table().to_proto();
        let names: Vec<&str> = wire.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["report", "web"], "batch/… sorts before shop/…");
        assert_eq!(wire[1].cpu.as_ref().and_then(|c| c.ratio), Some(2.0));
        assert_eq!(wire[0].memory.as_ref().map(|m| m.ratio), Some(None));
        assert_eq!(LearnedUsage::from_proto(&wire).unwrap(), table());
    }

    #[test]
    fn a_bad_row_names_its_field_and_workload() {
        let mut wire = table().to_proto();
        wire[1].cpu.as_mut().unwrap().ratio = Some(f64::NAN);
        let error = LearnedUsage::from_proto(&wire).unwrap_err();
        assert_eq!(
            error.to_string(),
            "learned[1].cpu.ratio of shop/Deployment/web must be a finite number, not negative (got NaN)"
        );
        let mut wire = table().to_proto();
        wire[0].memory.as_mut().unwrap().usage = f64::INFINITY;
        let error = workload_from_proto(0, &wire[0]).unwrap_err().to_string();
        assert!(error.starts_with("learned[0].memory.usage of batch/CronJob/report"), "{error}");
        let mut wire = table().to_proto();
        wire[0].kind.clear();
        let error = workload_from_proto(0, &wire[0]).unwrap_err();
        assert_eq!(error.to_string(), "learned[0].kind is required");
        assert_eq!(tonic::Status::from(error).code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn an_estimate_says_which_rule_priced_each_resource() {
        let estimate = Estimate {
            usage: Usage { cpu_millis: 2000, memory_bytes: 700 },
            cpu: Source::Learned { ratio: Some(2.0), pods: 3, samples: 360 },
            memory: Source::Factor { factor: 0.7 },
            workload: Some(WorkloadKey::new("shop", "Deployment", "web")),
        };
        let wire = estimate.to_proto();
        assert_eq!((wire.cpu_millis, wire.memory_bytes), (2000, 700));
        assert_eq!(wire.workload, "shop/Deployment/web");
        let cpu = wire.cpu.unwrap();
        assert_eq!(cpu.kind(), pb::EstimateSourceKind::Learned);
        assert_eq!((cpu.ratio, cpu.pods, cpu.samples), (Some(2.0), 3, 360));
        let memory = wire.memory.unwrap();
        assert_eq!(
            (memory.kind(), memory.factor, memory.ratio),
            (pb::EstimateSourceKind::Factor, 0.7, None)
        );
        let over = Source::Override { factor: 1.7 }.to_proto();
        assert_eq!((over.kind(), over.factor), (pb::EstimateSourceKind::Override, 1.7));
    }
}
