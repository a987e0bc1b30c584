//! A change of the collector's state as it travels to scorers (`WatchNodes`), in the
//! domain's types: the collector's state publishes these, the scorer's store applies them,
//! and only the edges (`waterline-convert`) know their wire form.

use std::sync::Arc;

use crate::learn::LearnedUsage;
use crate::ledger::LedgerEntry;
use crate::snapshot::{Capacity, Sample, Snapshot};
use crate::time::UnixMillis;

/// One node as the collector knows it: capacity and the latest sample per metric.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeReport {
    pub name: String,
    pub capacity: Capacity,
    /// (metric name, sample), one per metric.
    pub samples: Vec<(String, Sample)>,
}

/// A change — or, with `reset`, the whole state — of the collector.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Delta {
    /// Everything the collector knows: nodes and ledger replace the receiver's.
    pub reset: bool,
    /// Nodes added or changed (each replaces the receiver's node of that name).
    pub nodes: Vec<NodeReport>,
    pub removed_nodes: Vec<String>,
    /// Ledger entries added or changed.
    pub placed: Vec<LedgerEntry>,
    /// Uids of ledger entries removed.
    pub released: Vec<String>,
    /// The workloads' learned usage, whole, when it replaces the receiver's table (the
    /// collector's refresh changed it); `None` leaves the table as it is, except that a reset
    /// without one empties it (a reset replaces everything).
    pub learned: Option<Arc<LearnedUsage>>,
    pub sent_at: UnixMillis,
}

impl Delta {
    /// Nothing changed (a reset is never empty: it says "this is all").
    pub fn is_empty(&self) -> bool {
        !self.reset
            && self.nodes.is_empty()
            && self.removed_nodes.is_empty()
            && self.placed.is_empty()
            && self.released.is_empty()
            && self.learned.is_none()
    }

    /// Folds a later delta into this one. Applying the result equals applying both in
    /// order, because a receiver applies `placed`, `removed_nodes`, `nodes` and then
    /// `released` (see `apply_to`), and each list keeps its order.
    ///
    /// Only for deltas without `reset` after this one: a later reset replaces everything.
    pub fn merge(&mut self, later: Delta) {
        if later.reset {
            *self = later;
            return;
        }
        self.nodes.extend(later.nodes);
        self.removed_nodes.extend(later.removed_nodes);
        self.placed.extend(later.placed);
        self.released.extend(later.released);
        if later.learned.is_some() {
            self.learned = later.learned;
        }
        self.sent_at = later.sent_at;
    }

    /// Applies the delta to a snapshot (a reset first clears nodes and replaces the
    /// ledger and the learned table).
    pub fn apply_to(&self, snapshot: &mut Snapshot) {
        match &self.learned {
            Some(learned) => snapshot.set_learned(Arc::clone(learned)),
            None if self.reset => snapshot.set_learned(Arc::default()),
            None => {}
        }
        if self.reset {
            snapshot.clear_nodes();
            snapshot.replace_placements(self.placed.iter().cloned());
        } else {
            for entry in &self.placed {
                snapshot.apply_placement(entry.clone());
            }
        }
        for name in &self.removed_nodes {
            snapshot.remove_node(name);
        }
        for node in &self.nodes {
            snapshot.upsert_node(
                &node.name,
                node.capacity,
                node.samples.iter().map(|(metric, s)| (metric.as_str(), *s)),
            );
        }
        for uid in &self.released {
            snapshot.delete_placement(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::{Learned, WorkloadUsage};
    use crate::workload::WorkloadKey;

    fn table(ratio: f64) -> Arc<LearnedUsage> {
        let cpu = Learned { ratio: Some(ratio), usage: 0.0, spread: 0.0, pods: 2, samples: 120 };
        let key = WorkloadKey::new("shop", "Deployment", "web");
        Arc::new([(key, WorkloadUsage { cpu: Some(cpu), memory: None })].into_iter().collect())
    }

    #[test]
    fn a_learned_table_replaces_the_snapshots_and_a_reset_without_one_empties_it() {
        let mut snapshot = Snapshot::default();
        let delta = Delta { learned: Some(table(2.0)), ..Delta::default() };
        assert!(!delta.is_empty());
        delta.apply_to(&mut snapshot);
        assert_eq!(snapshot.learned().len(), 1);
        // A delta without a table leaves it; a reset without one empties it.
        Delta { released: vec!["u".into()], ..Delta::default() }.apply_to(&mut snapshot);
        assert_eq!(snapshot.learned().len(), 1);
        Delta { reset: true, ..Delta::default() }.apply_to(&mut snapshot);
        assert!(snapshot.learned().is_empty());
    }

    #[test]
    fn merging_keeps_the_latest_table() {
        let mut first = Delta { learned: Some(table(2.0)), ..Delta::default() };
        first.merge(Delta { released: vec!["u".into()], ..Delta::default() });
        assert_eq!(first.learned, Some(table(2.0)));
        first.merge(Delta { learned: Some(table(3.0)), ..Delta::default() });
        assert_eq!(first.learned, Some(table(3.0)));
    }
}
