//! The pod being placed, as the domain sees it.

mod overrides;
mod resources;

use std::collections::BTreeMap;

pub use overrides::{
    ANNOTATION_PREFIX, ESTIMATE_FACTOR, LOAD_FILTER, OverrideError, Overrides,
    waterline_annotations,
};
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
    /// The controlling owner's name (empty for a bare pod): with `owner_kind` and the
    /// namespace, the pod's workload.
    pub owner_name: String,
    /// The resolved priority (`spec.priority`); 0 when unset. Picks the policy's
    /// `priorities` tier (docs/policy.md#thresholds-per-priority).
    pub priority: i32,
    /// What the pod's `waterline.io/` annotations ask, parsed once at the boundary.
    pub overrides: Overrides,
}

impl Pod {
    /// DaemonSet pods must run on their node whatever its load; a pod annotated
    /// `waterline.io/load-filter: "off"` opts out the same way.
    pub fn bypasses_load_filters(&self) -> bool {
        self.owner_kind == "DaemonSet" || self.overrides.load_filter_off
    }

    /// `namespace/name`, for messages.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
