//! The Kubernetes nodes the collector knows, with their addresses (InternalIP, Hostname, …),
//! and the mapping of a metric series to one of them.
//!
//! Fed by the Kubernetes node watch (`replace` on every re-list, `upsert`/`remove` on
//! events) or by a static file (`--node-map`). With no source at all, a series' label value
//! (port stripped) is taken as the node name as it is; once a source is attached
//! ([`NodeDirectory::attach_source`], or any `replace`/`upsert`), only its nodes are
//! names, so series that arrive before the first node list map to nothing instead of
//! creating nodes named after IPs.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::Deserialize;

#[derive(Default)]
struct Inner {
    /// node name → its addresses as given.
    nodes: BTreeMap<String, Vec<String>>,
    /// lower-cased address or node name → node name.
    by_address: HashMap<String, String>,
    /// A source owns the node list (even while it is still empty).
    sourced: bool,
}

impl Inner {
    fn reindex(&mut self) {
        self.by_address.clear();
        for name in self.nodes.keys() {
            // A node's own name is one of its addresses (the usual hostname).
            self.by_address.insert(name.to_ascii_lowercase(), name.clone());
        }
        for (name, addresses) in &self.nodes {
            for address in addresses {
                let key = strip_port(address).to_ascii_lowercase();
                if !key.is_empty() {
                    // A node name wins over another node's address of the same spelling.
                    self.by_address.entry(key).or_insert_with(|| name.clone());
                }
            }
        }
    }
}

/// Cheap to clone; every clone sees the same nodes. Locks are held only inside these
/// methods, never across an `.await`.
#[derive(Clone, Default)]
pub struct NodeDirectory {
    inner: Arc<RwLock<Inner>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFile {
    nodes: Vec<MapNode>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapNode {
    name: String,
    #[serde(default)]
    addresses: Vec<String>,
}

impl NodeDirectory {
    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Declares that a source (the Kubernetes node watch) will fill the directory: from
    /// now on an empty directory means "no nodes yet", not "map by identity". Call it before
    /// the metric sources start.
    pub fn attach_source(&self) {
        self.write().sourced = true;
    }

    /// Replaces every node (a fresh list from the API server or a file).
    pub fn replace(&self, nodes: impl IntoIterator<Item = (String, Vec<String>)>) {
        let mut inner = self.write();
        inner.nodes = nodes.into_iter().collect();
        inner.sourced = true;
        inner.reindex();
    }

    /// Adds a node or replaces its addresses.
    pub fn upsert(&self, name: impl Into<String>, addresses: Vec<String>) {
        let mut inner = self.write();
        inner.nodes.insert(name.into(), addresses);
        inner.sourced = true;
        inner.reindex();
    }

    pub fn remove(&self, name: &str) {
        let mut inner = self.write();
        if inner.nodes.remove(name).is_some() {
            inner.reindex();
        }
    }

    pub fn len(&self) -> usize {
        self.read().nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().nodes.is_empty()
    }

    /// The node a label value (`IP`, `IP:port`, `host`, `host:port`, `[v6]:port`, or a node
    /// name) names: by address when a source gives nodes, the value itself (port stripped)
    /// when there is no source; `None` for a value no known node has.
    pub fn resolve(&self, value: &str) -> Option<String> {
        let host = strip_port(value.trim());
        if host.is_empty() {
            return None;
        }
        let inner = self.read();
        if !inner.sourced {
            return Some(host.to_owned());
        }
        let key = host.to_ascii_lowercase();
        if let Some(name) = inner.by_address.get(&key) {
            return Some(name.clone());
        }
        // `node-a.example.internal` for a node registered as `node-a`.
        if key.parse::<std::net::IpAddr>().is_err()
            && let Some((short, _)) = key.split_once('.')
        {
            return inner.by_address.get(short).cloned();
        }
        None
    }

    /// Parses a `--node-map` file: `nodes: [{name, addresses: [..]}]`.
    pub fn parse_map(text: &str) -> Result<Vec<(String, Vec<String>)>, NodeMapError> {
        let file: MapFile = serde_yaml::from_str(text)?;
        let mut seen = BTreeMap::new();
        for (i, node) in file.nodes.into_iter().enumerate() {
            if node.name.trim().is_empty() {
                return Err(NodeMapError::Invalid(format!("nodes[{i}].name must not be empty")));
            }
            if let Some(j) = node.addresses.iter().position(|a| strip_port(a.trim()).is_empty()) {
                return Err(NodeMapError::Invalid(format!("nodes[{i}].addresses[{j}] is empty")));
            }
            if seen.insert(node.name.clone(), node.addresses).is_some() {
                let why = format!("nodes[{i}].name: '{}' appears twice", node.name);
                return Err(NodeMapError::Invalid(why));
            }
        }
        Ok(seen.into_iter().collect())
    }

    /// Loads a `--node-map` file into the directory (replacing what it held).
    pub fn load_file(&self, path: &Path) -> Result<usize, NodeMapError> {
        let at = || path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|source| NodeMapError::Read { path: at(), source })?;
        let nodes =
            Self::parse_map(&text).map_err(|e| NodeMapError::Invalid(format!("{}: {e}", at())))?;
        let count = nodes.len();
        self.replace(nodes);
        Ok(count)
    }
}

/// Why a `--node-map` file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NodeMapError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("{0}")]
    Invalid(String),
}

/// `10.0.0.2:9100` → `10.0.0.2`, `[fd00::1]:9100` → `fd00::1`, `host:9100` → `host`; a bare
/// IPv6 address (`fd00::1`) and values without a port are returned unchanged.
pub fn strip_port(value: &str) -> &str {
    if let Some(rest) = value.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((host, _)) => host,
            None => value,
        };
    }
    match value.rsplit_once(':') {
        Some((host, port))
            if !host.contains(':')
                && !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit()) =>
        {
            host
        }
        _ => value,
    }
}

/// The node a series belongs to: each label of `node_labels` is tried in order, and the
/// first whose value the directory resolves wins.
pub fn map_series(
    labels: &BTreeMap<String, String>,
    node_labels: &[String],
    directory: &NodeDirectory,
) -> Option<String> {
    node_labels
        .iter()
        .filter_map(|label| labels.get(label))
        .filter(|value| !value.is_empty())
        .find_map(|value| directory.resolve(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn default_labels() -> Vec<String> {
        vec!["node".into(), "nodename".into(), "instance".into()]
    }

    fn cluster() -> NodeDirectory {
        let dir = NodeDirectory::default();
        dir.replace([
            ("node-a".to_string(), vec!["10.0.0.1".to_string(), "node-a.internal".to_string()]),
            ("node-b".to_string(), vec!["10.0.0.2".to_string(), "fd00::2".to_string()]),
        ]);
        dir
    }

    #[test]
    fn ports_are_stripped_from_every_shape() {
        assert_eq!(strip_port("10.0.0.2:9100"), "10.0.0.2");
        assert_eq!(strip_port("10.0.0.2"), "10.0.0.2");
        assert_eq!(strip_port("host-1:9100"), "host-1");
        assert_eq!(strip_port("host-1"), "host-1");
        assert_eq!(strip_port("[fd00::2]:9100"), "fd00::2");
        assert_eq!(strip_port("[fd00::2]"), "fd00::2");
        assert_eq!(strip_port("fd00::2"), "fd00::2");
        assert_eq!(strip_port("host:http"), "host:http");
        assert_eq!(strip_port("host:"), "host:");
    }

    #[test]
    fn empty_directory_means_identity_without_port() {
        let dir = NodeDirectory::default();
        let l = default_labels();
        assert_eq!(
            map_series(&labels(&[("instance", "worker-3:9100")]), &l, &dir),
            Some("worker-3".into())
        );
        assert_eq!(
            map_series(&labels(&[("instance", "x:9100"), ("node", "node-z")]), &l, &dir),
            Some("node-z".into())
        );
        assert_eq!(map_series(&labels(&[("job", "node")]), &l, &dir), None);
        assert_eq!(map_series(&labels(&[("node", "")]), &l, &dir), None);
    }

    #[test]
    fn addresses_map_ip_port_hostname_and_ipv6_to_node_names() {
        let dir = cluster();
        let l = default_labels();
        for (instance, node) in [
            ("10.0.0.1:9100", "node-a"),
            ("10.0.0.1", "node-a"),
            ("node-a.internal:9100", "node-a"),
            ("NODE-A:9100", "node-a"),
            ("node-a.cluster.example:9100", "node-a"),
            ("[fd00::2]:9100", "node-b"),
            ("fd00::2", "node-b"),
            ("10.0.0.2:9796", "node-b"),
        ] {
            assert_eq!(
                map_series(&labels(&[("instance", instance)]), &l, &dir).as_deref(),
                Some(node),
                "{instance}"
            );
        }
        // Known nodes: an unknown value maps to nothing.
        assert_eq!(map_series(&labels(&[("instance", "10.0.0.99:9100")]), &l, &dir), None);
        assert_eq!(map_series(&labels(&[("node", "node-q")]), &l, &dir), None);
    }

    #[test]
    fn labels_are_tried_in_order_and_unknown_ones_fall_through() {
        let dir = cluster();
        let both = labels(&[("node", "node-b"), ("instance", "10.0.0.1:9100")]);
        assert_eq!(map_series(&both, &default_labels(), &dir).as_deref(), Some("node-b"));
        let order = vec!["instance".to_string(), "node".to_string()];
        assert_eq!(map_series(&both, &order, &dir).as_deref(), Some("node-a"));
        // `node` names nothing known; `instance` still does.
        let stale_node = labels(&[("node", "gone"), ("instance", "10.0.0.2:9100")]);
        assert_eq!(map_series(&stale_node, &default_labels(), &dir).as_deref(), Some("node-b"));
    }

    #[test]
    fn upsert_remove_and_replace_keep_the_index_right() {
        let dir = cluster();
        let clone = dir.clone();
        clone.upsert("node-c", vec!["10.0.0.3".into()]);
        assert_eq!(dir.resolve("10.0.0.3:1").as_deref(), Some("node-c"));
        clone.upsert("node-c", vec!["10.0.0.4".into()]);
        assert_eq!(dir.resolve("10.0.0.3"), None);
        assert_eq!(dir.resolve("10.0.0.4").as_deref(), Some("node-c"));
        dir.remove("node-c");
        assert_eq!(dir.resolve("10.0.0.4"), None);
        assert_eq!(dir.len(), 2);
        // A source that lists no nodes: nothing maps (no identity fallback).
        dir.replace(Vec::new());
        assert!(dir.is_empty());
        assert_eq!(dir.resolve("10.0.0.4:9100"), None);
    }

    #[test]
    fn an_attached_source_stops_identity_before_its_first_list() {
        let dir = NodeDirectory::default();
        assert_eq!(dir.resolve("10.0.0.7:9100").as_deref(), Some("10.0.0.7"));
        dir.attach_source();
        assert_eq!(dir.resolve("10.0.0.7:9100"), None);
        assert_eq!(dir.resolve("node-7"), None);
        dir.upsert("node-7", vec!["10.0.0.7".into()]);
        assert_eq!(dir.resolve("10.0.0.7:9100").as_deref(), Some("node-7"));
    }

    #[test]
    fn map_file_parses_and_errors_name_the_entry() {
        let nodes = NodeDirectory::parse_map(
            "nodes:\n  - name: node-a\n    addresses: [10.0.0.1, node-a.internal]\n  - name: node-b\n",
        )
        .unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[0].1, vec!["10.0.0.1".to_string(), "node-a.internal".to_string()]);
        let err =
            NodeDirectory::parse_map("nodes:\n  - name: a\n  - name: a\n").unwrap_err().to_string();
        assert!(err.contains("nodes[1].name") && err.contains("twice"), "{err}");
        let err = NodeDirectory::parse_map("nodes:\n  - name: a\n    addresses: ['']\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("nodes[0].addresses[0]"), "{err}");
        let err = NodeDirectory::parse_map("nodez: []\n").unwrap_err().to_string();
        assert!(err.contains("nodez"), "{err}");
    }
}
