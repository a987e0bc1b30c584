//! The scheduler's `v1.Pod` reduced to `waterline.v1.PodInfo`, reading only the fields
//! load-aware scheduling needs (everything else in the object is skipped unparsed). Requests
//! and limits are not computed here: the pod's resource fields become core's
//! [`PodSpecResources`] and [`effective_resources`] applies the one rule the collector and
//! (through `tests/fixtures/pod-resources.json`) the Go plugin share.

use std::collections::HashMap;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use waterline_api::v1 as pb;
use waterline_core::pod::{
    ANNOTATION_PREFIX, ContainerResources, EffectiveResources, InitContainerResources,
    PodSpecResources, ResourceList, effective_resources,
};
use waterline_core::quantity::{QuantityError, parse_bytes, parse_cpu_millis};

/// Go marshals nil slices, maps and pointers as `null`: treat `null` like an absent field.
pub(crate) fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// `metadata.annotations` keeping only the `waterline.io/` keys, the only ones `PodInfo`
/// carries: the others (a `last-applied-configuration` can be the size of the pod) are
/// skipped without being copied.
fn waterline_annotations<'de, D>(deserializer: D) -> Result<HashMap<String, String>, D::Error>
where
    D: Deserializer<'de>,
{
    struct Kept;
    impl<'de> Visitor<'de> for Kept {
        type Value = HashMap<String, String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of annotations")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(HashMap::new())
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(HashMap::new())
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_map(Kept)
        }
        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut kept = HashMap::new();
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key.starts_with(ANNOTATION_PREFIX) {
                    kept.insert(key.into_owned(), map.next_value::<String>()?);
                } else {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
            Ok(kept)
        }
    }
    deserializer.deserialize_option(Kept)
}

/// A `resource.Quantity`: a string (`"500m"`, `"2Gi"`), or a bare number, which Go's
/// `Quantity.UnmarshalJSON` accepts too.
fn quantity<'de, D>(
    deserializer: D,
    parse: fn(&str) -> Result<i64, QuantityError>,
) -> Result<i64, D::Error>
where
    D: Deserializer<'de>,
{
    struct QuantityVisitor(fn(&str) -> Result<i64, QuantityError>);

    impl Visitor<'_> for QuantityVisitor {
        type Value = i64;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a Kubernetes quantity")
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
            (self.0)(v).map_err(E::custom)
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
            self.visit_str(&v.to_string())
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            self.visit_str(&v.to_string())
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
            self.visit_str(&v.to_string())
        }
    }

    deserializer.deserialize_any(QuantityVisitor(parse))
}

fn cpu<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    Option::<Cpu>::deserialize(deserializer).map(|q| q.map(|c| c.0))
}

fn memory<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    Option::<Memory>::deserialize(deserializer).map(|q| q.map(|m| m.0))
}

struct Cpu(i64);

impl<'de> Deserialize<'de> for Cpu {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        quantity(deserializer, parse_cpu_millis).map(Cpu)
    }
}

struct Memory(i64);

impl<'de> Deserialize<'de> for Memory {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        quantity(deserializer, parse_bytes).map(Memory)
    }
}

/// The cpu and memory of a `ResourceList`; other resources are ignored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Resources {
    #[serde(deserialize_with = "cpu")]
    pub cpu: Option<i64>,
    #[serde(deserialize_with = "memory")]
    pub memory: Option<i64>,
}

impl From<Resources> for ResourceList {
    fn from(r: Resources) -> Self {
        ResourceList { cpu_millis: r.cpu, memory_bytes: r.memory }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ResourceRequirements {
    #[serde(deserialize_with = "nullable")]
    pub requests: Resources,
    #[serde(deserialize_with = "nullable")]
    pub limits: Resources,
}

impl From<&ResourceRequirements> for ContainerResources {
    fn from(r: &ResourceRequirements) -> Self {
        ContainerResources { requests: r.requests.into(), limits: r.limits.into() }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Container {
    #[serde(deserialize_with = "nullable")]
    pub resources: ResourceRequirements,
    /// Only init containers set it; `Always` makes one a sidecar.
    #[serde(deserialize_with = "nullable")]
    pub restart_policy: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct OwnerReference {
    #[serde(deserialize_with = "nullable")]
    pub kind: String,
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable")]
    pub controller: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable")]
    pub namespace: String,
    #[serde(deserialize_with = "nullable")]
    pub uid: String,
    #[serde(deserialize_with = "nullable")]
    pub labels: HashMap<String, String>,
    /// Only the `waterline.io/` keys.
    #[serde(deserialize_with = "waterline_annotations")]
    pub annotations: HashMap<String, String>,
    #[serde(deserialize_with = "nullable")]
    pub owner_references: Vec<OwnerReference>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(deserialize_with = "nullable")]
    pub scheduler_name: String,
    #[serde(deserialize_with = "nullable")]
    pub priority_class_name: String,
    /// Resolved by admission from the priority class; absent: 0.
    #[serde(deserialize_with = "nullable")]
    pub priority: i32,
    #[serde(deserialize_with = "nullable")]
    pub containers: Vec<Container>,
    #[serde(deserialize_with = "nullable")]
    pub init_containers: Vec<Container>,
    #[serde(deserialize_with = "nullable")]
    pub overhead: Resources,
    /// Pod-level resources (`PodLevelResources`, beta and on by default since 1.34).
    #[serde(deserialize_with = "nullable")]
    pub resources: ResourceRequirements,
}

/// The fields of a `v1.Pod` the extender reads.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Pod {
    #[serde(deserialize_with = "nullable")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "nullable")]
    pub spec: PodSpec,
}

/// What the API server defaults an empty `spec.schedulerName` to.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

impl Pod {
    pub fn scheduler_name(&self) -> &str {
        match self.spec.scheduler_name.as_str() {
            "" => DEFAULT_SCHEDULER,
            name => name,
        }
    }

    fn controller(&self) -> Option<&OwnerReference> {
        self.metadata.owner_references.iter().find(|o| o.controller)
    }

    /// Kind of the controlling owner reference, if any.
    pub fn owner_kind(&self) -> &str {
        self.controller().map_or("", |o| o.kind.as_str())
    }

    /// Name of the controlling owner reference, if any.
    pub fn owner_name(&self) -> &str {
        self.controller().map_or("", |o| o.name.as_str())
    }

    /// What of the spec decides the pod's resources, in core's terms.
    pub fn spec_resources(&self) -> PodSpecResources {
        let spec = &self.spec;
        PodSpecResources {
            containers: spec.containers.iter().map(|c| (&c.resources).into()).collect(),
            init_containers: spec
                .init_containers
                .iter()
                .map(|c| InitContainerResources {
                    resources: (&c.resources).into(),
                    sidecar: c.restart_policy == "Always",
                })
                .collect(),
            pod_level: (&spec.resources).into(),
            overhead: spec.overhead.into(),
        }
    }

    /// The pod's effective requests and limits (core's rule; a limit of 0 is unbounded).
    pub fn resources(&self) -> EffectiveResources {
        effective_resources(&self.spec_resources())
    }

    pub fn to_info(&self) -> pb::PodInfo {
        let resources = self.resources();
        pb::PodInfo {
            namespace: self.metadata.namespace.clone(),
            name: self.metadata.name.clone(),
            uid: self.metadata.uid.clone(),
            labels: self.metadata.labels.clone(),
            cpu_request_millis: resources.cpu_request_millis,
            cpu_limit_millis: resources.cpu_limit_millis,
            memory_request_bytes: resources.memory_request_bytes,
            memory_limit_bytes: resources.memory_limit_bytes,
            priority_class: self.spec.priority_class_name.clone(),
            owner_kind: self.owner_kind().to_owned(),
            scheduler_name: self.scheduler_name().to_owned(),
            owner_name: self.owner_name().to_owned(),
            annotations: self.metadata.annotations.clone(),
            priority: self.spec.priority,
        }
    }
}

/// Only `metadata.name` of a node (full `v1.Node` objects stay raw JSON).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct NameOnly {
    #[serde(deserialize_with = "nullable")]
    pub metadata: NameMeta,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct NameMeta {
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable")]
    pub uid: String,
}

#[cfg(test)]
mod tests;
