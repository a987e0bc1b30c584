//! A change of the collector's state as it travels to scorers (`WatchNodes`), in the
//! domain's types: the collector's state publishes these, the scorer's store applies them,
//! and only the edges (`waterline-convert`) know their wire form.

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
        self.sent_at = later.sent_at;
    }

    /// Applies the delta to a snapshot (a reset first clears nodes and replaces the
    /// ledger).
    pub fn apply_to(&self, snapshot: &mut Snapshot) {
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
