//! The node watch: a Node object gives the node's capacity (`status.allocatable`) and its
//! addresses, which map Prometheus series (`instance="10.0.0.7:9100"`) to node names.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use waterline_core::Capacity;
use waterline_core::quantity::{parse_bytes, parse_cpu_millis};

use super::Index;
use crate::state::ClusterState;

/// Address kinds kept, in the order a series label is most likely to carry them.
const ADDRESS_TYPES: [&str; 3] = ["InternalIP", "ExternalIP", "Hostname"];

/// Where node addresses go. The collector's node directory implements it; the watch knows
/// nothing else about it.
pub trait NodeAddresses: Send + 'static {
    /// Every node's addresses (a fresh list).
    fn replace(&self, nodes: Vec<(String, Vec<String>)>);
    fn upsert(&self, node: &str, addresses: Vec<String>);
    fn remove(&self, node: &str);
}

/// A Node reduced to what the collector uses.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeInfo {
    pub name: String,
    /// `None` when the node reports no allocatable cpu or memory yet.
    pub capacity: Option<Capacity>,
    pub addresses: Vec<String>,
}

/// Why a Node object cannot be converted (the node is then skipped, with this in the log).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    #[error("no metadata.name")]
    NoName,
    /// `resource` is `cpu` or `memory`.
    #[error("allocatable {resource}: {reason}")]
    Allocatable { resource: &'static str, reason: waterline_core::quantity::QuantityError },
}

/// Converts a Node object; `Err` names what is malformed (the node is then skipped).
pub fn node_info(node: &Node) -> Result<NodeInfo, NodeError> {
    let name = node.metadata.name.clone().filter(|n| !n.is_empty()).ok_or(NodeError::NoName)?;
    let status = node.status.as_ref();
    let allocatable = status.and_then(|s| s.allocatable.as_ref());
    let cpu = allocatable.and_then(|a| a.get("cpu"));
    let memory = allocatable.and_then(|a| a.get("memory"));
    let capacity = match (cpu, memory) {
        (Some(cpu), Some(memory)) => Some(Capacity {
            cpu_millis: parse_cpu_millis(&cpu.0)
                .map_err(|reason| NodeError::Allocatable { resource: "cpu", reason })?,
            memory_bytes: parse_bytes(&memory.0)
                .map_err(|reason| NodeError::Allocatable { resource: "memory", reason })?,
        }),
        _ => None,
    };
    let mut addresses = Vec::new();
    for kind in ADDRESS_TYPES {
        for a in status.and_then(|s| s.addresses.as_ref()).into_iter().flatten() {
            if a.type_ == kind && !a.address.is_empty() && !addresses.contains(&a.address) {
                addresses.push(a.address.clone());
            }
        }
    }
    Ok(NodeInfo { name, capacity, addresses })
}

/// Feeds the node watch into the cluster state and the address directory.
pub struct NodeIndex {
    state: ClusterState,
    addresses: Option<Box<dyn NodeAddresses>>,
    /// Nodes this watch reported, so a re-list removes only those (other sources may
    /// know nodes the API server does not).
    known: BTreeSet<String>,
    relist: Option<Vec<NodeInfo>>,
}

impl NodeIndex {
    pub fn new(state: ClusterState, addresses: Option<Box<dyn NodeAddresses>>) -> Self {
        NodeIndex { state, addresses, known: BTreeSet::new(), relist: None }
    }

    fn convert(node: &Node) -> Option<NodeInfo> {
        match node_info(node) {
            Ok(info) => Some(info),
            Err(error) => {
                let name = node.metadata.name.as_deref().unwrap_or("?");
                tracing::warn!(%error, node = %name, "skipping malformed node");
                None
            }
        }
    }

    fn set_capacity(&self, info: &NodeInfo) {
        if let Some(capacity) = info.capacity {
            self.state.update_capacity(&BTreeMap::from([(info.name.clone(), capacity)]));
        }
    }
}

impl Index<Node> for NodeIndex {
    fn apply(&mut self, node: Node) {
        let Some(info) = Self::convert(&node) else { return };
        self.set_capacity(&info);
        if let Some(sink) = &self.addresses {
            sink.upsert(&info.name, info.addresses.clone());
        }
        self.known.insert(info.name);
    }

    fn delete(&mut self, node: Node) {
        let Some(name) = node.metadata.name.as_deref() else { return };
        self.known.remove(name);
        self.state.remove_node(name);
        if let Some(sink) = &self.addresses {
            sink.remove(name);
        }
    }

    fn init(&mut self) {
        self.relist = Some(Vec::new());
    }

    fn init_apply(&mut self, node: Node) {
        if let Some(info) = Self::convert(&node) {
            self.relist.get_or_insert_with(Vec::new).push(info);
        }
    }

    fn init_done(&mut self) {
        let listed = self.relist.take().unwrap_or_default();
        let names: BTreeSet<String> = listed.iter().map(|n| n.name.clone()).collect();
        for gone in self.known.difference(&names) {
            self.state.remove_node(gone);
        }
        let capacities: BTreeMap<String, Capacity> =
            listed.iter().filter_map(|n| Some((n.name.clone(), n.capacity?))).collect();
        self.state.update_capacity(&capacities);
        if let Some(sink) = &self.addresses {
            sink.replace(listed.iter().map(|n| (n.name.clone(), n.addresses.clone())).collect());
        }
        tracing::info!(nodes = names.len(), "node list synced");
        self.known = names;
    }
}
