//! `k8s.io/kube-scheduler/extender/v1` on the wire (docs/design.md): the Go types have no
//! json tags, so keys are the Go field names (PascalCase), and nil pointers, slices and maps
//! are sent as explicit `null`s. Embedded `v1.Node` objects stay raw JSON: they are passed
//! back unchanged, and only their `metadata.name` is read.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::pod::{NameOnly, Pod, nullable};

/// `ExtenderArgs`, the request of filter and prioritize. `Nodes` is set when the scheduler's
/// `nodeCacheCapable` is false, `NodeNames` when it is true; the other one is `null`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ExtenderArgs<'a> {
    #[serde(default)]
    pub pod: Option<Pod>,
    #[serde(borrow, default)]
    pub nodes: Option<NodeList<'a>>,
    #[serde(default)]
    pub node_names: Option<Vec<String>>,
}

/// A `v1.NodeList` whose items are kept as the exact bytes the scheduler sent.
#[derive(Debug, Deserialize, Serialize)]
pub struct NodeList<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "apiVersion", skip_serializing_if = "Option::is_none")]
    pub api_version: Option<&'a RawValue>,
    /// `ListMeta` is a struct without omitempty effect in Go: always present, `{}` when empty.
    #[serde(borrow, default, serialize_with = "object_or_empty")]
    pub metadata: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub items: Option<Vec<&'a RawValue>>,
}

static EMPTY_OBJECT: LazyLock<Box<RawValue>> =
    LazyLock::new(|| RawValue::from_string("{}".to_owned()).expect("{} is JSON"));

fn object_or_empty<S: serde::Serializer>(
    value: &Option<&RawValue>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(raw) if raw.get() != "null" => raw.serialize(serializer),
        _ => EMPTY_OBJECT.serialize(serializer),
    }
}

impl<'a> NodeList<'a> {
    /// The same list holding only `items`.
    pub fn with_items(&self, items: Vec<&'a RawValue>) -> NodeList<'a> {
        NodeList {
            kind: self.kind,
            api_version: self.api_version,
            metadata: self.metadata,
            items: Some(items),
        }
    }

    pub fn items(&self) -> &[&'a RawValue] {
        self.items.as_deref().unwrap_or_default()
    }
}

/// `metadata.name` of a raw node object.
pub fn node_name(raw: &RawValue) -> Result<String, serde_json::Error> {
    let node: NameOnly = serde_json::from_str(raw.get())?;
    Ok(node.metadata.name)
}

pub type FailedNodesMap = BTreeMap<String, String>;

/// `ExtenderFilterResult`. Answered in the form the scheduler asked in: `NodeNames` for a
/// names-only request, `Nodes` for a NodeList request.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct FilterResult<'a> {
    pub nodes: Option<NodeList<'a>>,
    pub node_names: Option<Vec<String>>,
    pub failed_nodes: FailedNodesMap,
    pub failed_and_unresolvable_nodes: Option<FailedNodesMap>,
    pub error: String,
}

/// `HostPriority`; prioritize answers a bare JSON array of them (`HostPriorityList`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct HostPriority {
    pub host: String,
    pub score: i64,
}

/// `ExtenderBindingArgs`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct BindingArgs {
    #[serde(rename = "PodName", deserialize_with = "nullable")]
    pub pod_name: String,
    #[serde(rename = "PodNamespace", deserialize_with = "nullable")]
    pub pod_namespace: String,
    #[serde(rename = "PodUID", deserialize_with = "nullable")]
    pub pod_uid: String,
    #[serde(rename = "Node", deserialize_with = "nullable")]
    pub node: String,
}

/// `ExtenderBindingResult` (also the body of every error answer).
#[derive(Debug, Serialize, Deserialize)]
pub struct ErrorResult {
    #[serde(rename = "Error")]
    pub error: String,
}

/// `ExtenderPreemptionArgs`: `NodeNameToMetaVictims` when `nodeCacheCapable`, else
/// `NodeNameToVictims` with full victim pods.
#[derive(Debug, Deserialize)]
pub struct PreemptionArgs {
    #[serde(rename = "Pod", default)]
    pub pod: Option<serde::de::IgnoredAny>,
    #[serde(rename = "NodeNameToVictims", default)]
    pub node_name_to_victims: Option<BTreeMap<String, Victims>>,
    #[serde(rename = "NodeNameToMetaVictims", default)]
    pub node_name_to_meta_victims: Option<BTreeMap<String, MetaVictims>>,
}

/// `Victims`: the full victim pods; only their uids are read.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Victims {
    #[serde(rename = "Pods")]
    pub pods: Option<Vec<Option<NameOnly>>>,
    #[serde(rename = "NumPDBViolations", deserialize_with = "nullable")]
    pub num_pdb_violations: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MetaVictims {
    #[serde(rename = "Pods")]
    pub pods: Option<Vec<Option<MetaPod>>>,
    #[serde(rename = "NumPDBViolations", deserialize_with = "nullable")]
    pub num_pdb_violations: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MetaPod {
    #[serde(rename = "UID", deserialize_with = "nullable")]
    pub uid: String,
}

/// `ExtenderPreemptionResult`: always the Meta form.
#[derive(Debug, Serialize)]
pub struct PreemptionResult {
    #[serde(rename = "NodeNameToMetaVictims")]
    pub node_name_to_meta_victims: Option<BTreeMap<String, MetaVictims>>,
}

impl Victims {
    pub fn to_meta(&self) -> MetaVictims {
        MetaVictims {
            pods: self.pods.as_ref().map(|pods| {
                pods.iter()
                    .map(|p| p.as_ref().map(|p| MetaPod { uid: p.metadata.uid.clone() }))
                    .collect()
            }),
            num_pdb_violations: self.num_pdb_violations,
        }
    }
}

impl PreemptionArgs {
    /// The candidates unchanged, in the Meta form the scheduler reads back.
    pub fn unchanged(&self) -> PreemptionResult {
        let meta = match (&self.node_name_to_meta_victims, &self.node_name_to_victims) {
            (Some(meta), _) => Some(meta.clone()),
            (None, Some(full)) => {
                Some(full.iter().map(|(node, v)| (node.clone(), v.to_meta())).collect())
            }
            (None, None) => None,
        };
        PreemptionResult { node_name_to_meta_victims: meta }
    }
}

#[cfg(test)]
mod tests;
