//! What a scorer answers from: every node's latest samples and capacity, plus the ledger.
//! Metric names are interned so the request path indexes samples instead of comparing
//! strings for every node.

use smallvec::SmallVec;

use crate::FastMap;
use crate::ledger::Ledger;

/// Metrics per node stored inline (the default policy has six).
const INLINE_METRICS: usize = 6;
use crate::time::UnixMillis;

/// Allocatable resources; zero when unknown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capacity {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
}

/// One observed value (percent) and when it was sampled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub value: f64,
    pub at: UnixMillis,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeState {
    pub name: String,
    pub capacity: Capacity,
    /// Indexed by the snapshot's metric id; inline for the usual handful of metrics, so
    /// a Score reads a node's samples from the same cache lines as its capacity.
    samples: SmallVec<[Option<Sample>; INLINE_METRICS]>,
}

impl NodeState {
    pub fn sample(&self, metric_id: usize) -> Option<Sample> {
        self.samples.get(metric_id).copied().flatten()
    }
}

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    metric_ids: FastMap<String, usize>,
    metric_names: Vec<String>,
    nodes: FastMap<String, NodeState>,
    pub ledger: Ledger,
}

impl Snapshot {
    /// The id of a metric name, if any node ever reported it.
    pub fn metric_id(&self, name: &str) -> Option<usize> {
        self.metric_ids.get(name).copied()
    }

    fn intern(&mut self, name: &str) -> usize {
        if let Some(&id) = self.metric_ids.get(name) {
            return id;
        }
        let id = self.metric_names.len();
        self.metric_names.push(name.to_owned());
        self.metric_ids.insert(name.to_owned(), id);
        id
    }

    /// Replaces a node's state with `samples` (metric name, sample).
    pub fn upsert_node<'a>(
        &mut self,
        name: &str,
        capacity: Capacity,
        samples: impl IntoIterator<Item = (&'a str, Sample)>,
    ) {
        let mut by_id = SmallVec::new();
        for (metric, sample) in samples {
            let id = self.intern(metric);
            if by_id.len() <= id {
                by_id.resize(id + 1, None);
            }
            by_id[id] = Some(sample);
        }
        self.nodes
            .insert(name.to_owned(), NodeState { name: name.to_owned(), capacity, samples: by_id });
    }

    pub fn remove_node(&mut self, name: &str) -> bool {
        self.nodes.remove(name).is_some()
    }

    /// Drops every node (the ledger is left alone).
    pub fn clear_nodes(&mut self) {
        self.nodes.clear();
    }

    pub fn node(&self, name: &str) -> Option<&NodeState> {
        self.nodes.get(name)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &NodeState> {
        self.nodes.values()
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// A node's samples by metric name.
    pub fn samples_of<'a>(
        &'a self,
        node: &'a NodeState,
    ) -> impl Iterator<Item = (&'a str, Sample)> {
        node.samples
            .iter()
            .enumerate()
            .filter_map(|(id, s)| s.map(|s| (self.metric_names[id].as_str(), s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upsert_replaces_all_samples_of_a_node() {
        let mut snap = Snapshot::default();
        let s = |v| Sample { value: v, at: UnixMillis(1) };
        snap.upsert_node("n1", Capacity::default(), [("cpu", s(10.0)), ("mem", s(20.0))]);
        snap.upsert_node("n1", Capacity::default(), [("mem", s(30.0))]);
        let node = snap.node("n1").unwrap();
        assert_eq!(node.sample(snap.metric_id("cpu").unwrap()), None);
        assert_eq!(node.sample(snap.metric_id("mem").unwrap()), Some(s(30.0)));
        assert_eq!(snap.samples_of(node).collect::<Vec<_>>(), vec![("mem", s(30.0))]);
        assert!(snap.remove_node("n1"));
        assert_eq!(snap.node_count(), 0);
    }
}
