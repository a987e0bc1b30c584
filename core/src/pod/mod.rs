//! The pod being placed, as the domain sees it.

mod resources;

use std::collections::BTreeMap;

pub use resources::{
    ContainerResources, EffectiveResources, InitContainerResources, PodSpecResources, ResourceList,
    effective_resources,
};

/// A pod reduced to what load-aware scheduling reads. Quantities are non-negative
/// (adapters reject negative values before building one); zero means "not set".
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub cpu_request_millis: i64,
    pub cpu_limit_millis: i64,
    pub memory_request_bytes: i64,
    pub memory_limit_bytes: i64,
    pub owner_kind: String,
}

impl Pod {
    /// DaemonSet pods must run on their node whatever its load.
    pub fn bypasses_load_filters(&self) -> bool {
        self.owner_kind == "DaemonSet"
    }

    /// `namespace/name`, for messages.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
