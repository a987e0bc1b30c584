//! What a scorer answers from: every node's latest samples and capacity, plus the ledger.
//!
//! Laid out for the request path, which looks up thousands of candidates by name per
//! request: one hash probe per candidate finds everything Score reads — capacity, samples
//! (metric names interned to ids, stored inline) and the loads of the node's ledger entries
//! (newest first, so the ones that still count are a prefix). The full ledger entries live
//! in the `Ledger` beside it; every change goes through `Snapshot` so the two agree.

use std::collections::BTreeMap;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::FastMap;
use crate::estimate::Usage;
use crate::learn::LearnedUsage;
use crate::ledger::{Ledger, LedgerEntry, LedgerSource, LedgerWindow, credit_counts};
use crate::time::{Millis, UnixMillis};

/// Metrics per node stored inline (the default policy has six).
const INLINE_METRICS: usize = 6;
/// Ledger loads per node stored inline (recent placements on one node are usually few).
const INLINE_LOADS: usize = 4;

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
    /// Indexed by the snapshot's metric id.
    samples: SmallVec<[Option<Sample>; INLINE_METRICS]>,
}

impl NodeState {
    pub fn sample(&self, metric_id: usize) -> Option<Sample> {
        self.samples.get(metric_id).copied().flatten()
    }
}

/// What the request path reads of one ledger entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Load {
    placed_at: UnixMillis,
    usage: Usage,
}

/// What the request path reads of one departure (`LedgerSource::Departure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Credit {
    arrived_at: Option<UnixMillis>,
    departed_at: UnixMillis,
    usage: Usage,
}

impl Credit {
    fn counts(&self, now: UnixMillis, window: LedgerWindow) -> bool {
        credit_counts(self.arrived_at, self.departed_at, now, window)
    }

    /// Whether the credit can count toward `window` at any time (not cancelled by an
    /// un-absorbed arrival, nor held by a maximum).
    fn credits(&self, window: LedgerWindow) -> bool {
        self.counts(self.departed_at, window)
    }
}

/// Everything known about one node name: its state once the collector has reported it,
/// and the loads of its ledger entries (a Reserve may name a node before its metrics do).
/// Arrivals and departures apart: arrivals sorted so the ones that count are a prefix,
/// departures (rare, and each counting by its own rule) in a plain list, empty — no
/// allocation — on most nodes.
#[derive(Clone, Debug, Default)]
pub struct NodeSlot {
    state: Option<NodeState>,
    loads_newest_first: SmallVec<[Load; INLINE_LOADS]>,
    credits: Vec<Credit>,
}

impl NodeSlot {
    pub fn state(&self) -> Option<&NodeState> {
        self.state.as_ref()
    }

    /// The loads placed less than `window` before `now`: a prefix, newest first.
    fn counting(&self, now: UnixMillis, window: Millis) -> &[Load] {
        let end = self.loads_newest_first.partition_point(|l| now.since(l.placed_at) < window);
        &self.loads_newest_first[..end]
    }

    fn is_empty(&self) -> bool {
        self.loads_newest_first.is_empty() && self.credits.is_empty()
    }

    /// `Ledger::unabsorbed` for this node, without walking its entries.
    pub fn unabsorbed(&self, now: UnixMillis, window: impl Into<LedgerWindow>) -> Usage {
        let window = window.into();
        let arrivals =
            self.counting(now, window.absorb).iter().fold(Usage::default(), |sum, l| Usage {
                cpu_millis: sum.cpu_millis + l.usage.cpu_millis,
                memory_bytes: sum.memory_bytes + l.usage.memory_bytes,
            });
        self.credits.iter().filter(|c| c.counts(now, window)).fold(arrivals, |sum, c| Usage {
            cpu_millis: sum.cpu_millis - c.usage.cpu_millis,
            memory_bytes: sum.memory_bytes - c.usage.memory_bytes,
        })
    }

    /// The times either side of `unabsorbed`'s boundary at `now`, from which the window
    /// counts: the oldest placement or departure that counts and the newest that no longer
    /// does (`None` where there is none). While the first still counts and the second
    /// still does not, the same loads and credits count.
    pub(crate) fn absorb_boundary(
        &self,
        now: UnixMillis,
        window: LedgerWindow,
    ) -> (Option<UnixMillis>, Option<UnixMillis>) {
        let end = self.counting(now, window.absorb).len();
        let mut oldest_counting = end.checked_sub(1).map(|i| self.loads_newest_first[i].placed_at);
        let mut newest_absorbed = self.loads_newest_first.get(end).map(|l| l.placed_at);
        for credit in self.credits.iter().filter(|c| c.credits(window)) {
            // The caller adds `absorb` to these times; a credit ends `credit` after its
            // departure, so it is given as the arrival that would end at the same time.
            let at = Some(UnixMillis(credit.departed_at.0 - (window.absorb.0 - window.credit.0)));
            if credit.counts(now, window) {
                oldest_counting = oldest_counting.min(at).or(at);
            } else {
                newest_absorbed = newest_absorbed.max(at);
            }
        }
        (oldest_counting, newest_absorbed)
    }

    /// `Ledger::placements_within` for this node.
    pub fn placements_within(&self, now: UnixMillis, window: Millis) -> usize {
        self.counting(now, window).len()
    }
}

/// The sample times of one metric across the nodes that hold a sample of it, as a multiset:
/// what the fleet staleness breaker reads, so it never walks the nodes. A Prometheus poll
/// stamps every node's sample of a metric with the same evaluation time, so the map holds a
/// handful of distinct times however many nodes there are.
#[derive(Clone, Debug, Default)]
struct SampleTimes {
    by_time: BTreeMap<UnixMillis, u32>,
    /// Nodes holding a sample of the metric.
    nodes: usize,
}

impl SampleTimes {
    fn add(&mut self, at: UnixMillis) {
        *self.by_time.entry(at).or_default() += 1;
        self.nodes += 1;
    }

    fn remove(&mut self, at: UnixMillis) {
        if let Some(count) = self.by_time.get_mut(&at) {
            *count -= 1;
            if *count == 0 {
                self.by_time.remove(&at);
            }
            self.nodes -= 1;
        }
    }
}

/// What changed in a snapshot since the last [`Snapshot::take_changes`], for a caller that
/// keeps something derived from it per node (the engine's [`crate::engine::Prepared`] rows).
/// Only recorded after [`Snapshot::track_changes`]: nobody else pays for it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// The set of nodes with a state may differ (a node appeared, left, or all were dropped).
    pub names: bool,
    /// Everything may differ (a full resync of nodes or ledger): rebuild, don't patch.
    pub all: bool,
    /// Nodes whose state or ledger loads changed (may repeat; may name nodes with no state).
    pub nodes: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        !self.names && !self.all && self.nodes.is_empty()
    }
}

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// `Some` once `track_changes` was called.
    changes: Option<Changes>,
    metric_ids: FastMap<String, usize>,
    metric_names: Vec<String>,
    /// Indexed by metric id.
    sample_times: Vec<SampleTimes>,
    slots: FastMap<String, NodeSlot>,
    /// Slots with a state.
    node_count: usize,
    ledger: Ledger,
    /// The workloads' learned usage the collector last sent, replaced whole.
    learned: Arc<LearnedUsage>,
}

impl Snapshot {
    /// From now on, record what changes (see [`Changes`]) until taken.
    pub fn track_changes(&mut self) {
        self.changes.get_or_insert_with(Changes::default);
    }

    /// What changed since the last call (or since `track_changes`); empty when not tracking.
    pub fn take_changes(&mut self) -> Changes {
        self.changes.as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn changed(&mut self, node: &str, names: bool) {
        if let Some(changes) = &mut self.changes {
            changes.names |= names;
            if !changes.all {
                changes.nodes.push(node.to_owned());
            }
        }
    }

    fn changed_all(&mut self, names: bool) {
        if let Some(changes) = &mut self.changes {
            changes.names |= names;
            changes.all = true;
            changes.nodes = Vec::new();
        }
    }

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
        self.sample_times.push(SampleTimes::default());
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
        let state = NodeState { name: name.to_owned(), capacity, samples: by_id };
        let slot = match self.slots.get_mut(name) {
            Some(slot) => slot,
            None => self.slots.entry(name.to_owned()).or_default(),
        };
        let old_samples = slot.state.as_ref().map(|old| &old.samples[..]).unwrap_or_default();
        for id in 0..old_samples.len().max(state.samples.len()) {
            let old = old_samples.get(id).copied().flatten().map(|s| s.at);
            let new = state.samples.get(id).copied().flatten().map(|s| s.at);
            if old != new {
                let times = &mut self.sample_times[id];
                old.inspect(|at| times.remove(*at));
                new.inspect(|at| times.add(*at));
            }
        }
        let appeared = slot.state.replace(state).is_none();
        if appeared {
            self.node_count += 1;
        }
        self.changed(name, appeared);
    }

    /// Of the nodes holding a sample of `metric_id`: how many hold one taken before `cutoff`
    /// (counting stops once it passes `enough`), and how many there are. Costs the number of
    /// distinct sample times before `cutoff`, not the number of nodes.
    pub fn samples_before(
        &self,
        metric_id: usize,
        cutoff: UnixMillis,
        enough: usize,
    ) -> (usize, usize) {
        let Some(times) = self.sample_times.get(metric_id) else { return (0, 0) };
        let mut older = 0;
        for (_, count) in times.by_time.range(..cutoff) {
            older += *count as usize;
            if older > enough {
                break;
            }
        }
        (older, times.nodes)
    }

    pub fn remove_node(&mut self, name: &str) -> bool {
        let Some(slot) = self.slots.get_mut(name) else { return false };
        if let Some(state) = &slot.state {
            for (id, sample) in state.samples.iter().enumerate() {
                if let Some(sample) = sample {
                    self.sample_times[id].remove(sample.at);
                }
            }
        }
        let removed = slot.state.take().is_some();
        if slot.is_empty() {
            self.slots.remove(name);
        }
        self.node_count -= usize::from(removed);
        if removed {
            self.changed(name, true);
        }
        removed
    }

    /// Drops every node (the ledger is left alone).
    pub fn clear_nodes(&mut self) {
        self.changed_all(self.node_count > 0);
        self.slots.retain(|_, slot| {
            slot.state = None;
            !slot.is_empty()
        });
        self.node_count = 0;
        self.sample_times.iter_mut().for_each(|times| *times = SampleTimes::default());
    }

    /// Everything the request path needs about `name`, in one lookup.
    pub fn slot(&self, name: &str) -> Option<&NodeSlot> {
        self.slots.get(name)
    }

    pub fn node(&self, name: &str) -> Option<&NodeState> {
        self.slot(name)?.state()
    }

    /// Every node the snapshot holds anything about — a state, ledger loads or both — with
    /// its slot: a walk over the table, no lookups by name.
    pub fn slots(&self) -> impl Iterator<Item = (&str, &NodeSlot)> {
        self.slots.iter().map(|(name, slot)| (name.as_str(), slot))
    }

    pub fn nodes(&self) -> impl Iterator<Item = &NodeState> {
        self.slots.values().filter_map(NodeSlot::state)
    }

    pub fn node_count(&self) -> usize {
        self.node_count
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

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// What the workloads' running pods use, which prices their next pods.
    pub fn learned(&self) -> &LearnedUsage {
        &self.learned
    }

    /// The learned table, shared: to price a pod after the snapshot is released.
    pub fn learned_handle(&self) -> Arc<LearnedUsage> {
        Arc::clone(&self.learned)
    }

    /// Replaces the learned table (the collector sends it whole on each refresh).
    pub fn set_learned(&mut self, learned: Arc<LearnedUsage>) {
        self.learned = learned;
    }

    /// `Ledger::apply`, keeping the node table's loads in step.
    pub fn apply_placement(&mut self, entry: LedgerEntry) -> Option<LedgerEntry> {
        let previous_node = self.ledger.get(&entry.uid).map(|e| e.node.clone());
        let stored = self.ledger.apply(entry)?;
        if let Some(previous) = previous_node.filter(|n| *n != stored.node) {
            self.reindex_loads(&previous);
        }
        self.reindex_loads(&stored.node);
        Some(stored)
    }

    /// `Ledger::delete`, keeping the node table's loads in step.
    pub fn delete_placement(&mut self, uid: &str) -> Option<LedgerEntry> {
        let removed = self.ledger.delete(uid)?;
        self.reindex_loads(&removed.node);
        Some(removed)
    }

    /// `Ledger::depart` (the pod left its node at `departed_at`), keeping the node table's
    /// loads in step: the departure stored, or `None` when the ledger held no watched entry
    /// for the pod (then nothing changed; [`Snapshot::delete_placement`] drops a Reserve).
    pub fn depart_placement(&mut self, uid: &str, departed_at: UnixMillis) -> Option<LedgerEntry> {
        let departure = self.ledger.depart(uid, departed_at)?;
        self.reindex_loads(&departure.node);
        Some(departure)
    }

    /// `Ledger::prune_departed`, keeping the node table's loads in step; the uids dropped.
    pub fn prune_departed(&mut self, now: UnixMillis, horizon: Millis) -> Vec<String> {
        let gone = self.ledger.prune_departed(now, horizon);
        for entry in &gone {
            self.reindex_loads(&entry.node);
        }
        gone.into_iter().map(|e| e.uid).collect()
    }

    /// `Ledger::replace` (a full snapshot from the collector), then every node's loads.
    pub fn replace_placements(&mut self, entries: impl IntoIterator<Item = LedgerEntry>) {
        self.changed_all(false);
        self.ledger.replace(entries);
        self.slots.retain(|_, slot| {
            slot.loads_newest_first.clear();
            slot.credits.clear();
            slot.state.is_some()
        });
        for entry in self.ledger.iter() {
            let slot = match self.slots.get_mut(&entry.node) {
                Some(slot) => slot,
                None => self.slots.entry(entry.node.clone()).or_default(),
            };
            match credit_of(entry) {
                Some(credit) => slot.credits.push(credit),
                None => slot
                    .loads_newest_first
                    .push(Load { placed_at: entry.placed_at, usage: entry.usage }),
            }
        }
        for slot in self.slots.values_mut() {
            slot.loads_newest_first.sort_unstable_by_key(|l| std::cmp::Reverse(l.placed_at));
        }
    }

    /// Rebuilds `node`'s loads from its ledger entries (a handful: cheaper than patching).
    fn reindex_loads(&mut self, node: &str) {
        self.changed(node, false);
        let entries = self.ledger.on_node(node);
        let mut loads: SmallVec<[Load; INLINE_LOADS]> = entries
            .iter()
            .filter(|e| !e.source.is_departure())
            .map(|e| Load { placed_at: e.placed_at, usage: e.usage })
            .collect();
        loads.sort_unstable_by_key(|l| std::cmp::Reverse(l.placed_at));
        let credits: Vec<Credit> = entries.iter().filter_map(credit_of).collect();
        let empty = loads.is_empty() && credits.is_empty();
        match self.slots.get_mut(node) {
            Some(slot) if empty && slot.state.is_none() => {
                self.slots.remove(node);
            }
            Some(slot) => (slot.loads_newest_first, slot.credits) = (loads, credits),
            None if empty => {}
            None => {
                let slot = NodeSlot { state: None, loads_newest_first: loads, credits };
                self.slots.insert(node.to_owned(), slot);
            }
        }
    }
}

/// A departure's credit as the request path reads it; `None` for an arrival.
fn credit_of(entry: &LedgerEntry) -> Option<Credit> {
    let LedgerSource::Departure { departed_at, .. } = entry.source else {
        return None;
    };
    Some(Credit { arrived_at: entry.arrived_at(), departed_at, usage: entry.usage })
}

#[cfg(test)]
mod tests;
