//! The ledger of recent placements (docs/design.md#the-ledger): which pods were placed on which
//! node, when, and how much they are estimated to use. An entry's load counts toward predicted
//! utilisation until the metrics have absorbed the pod; the entry itself lives until the pod
//! is gone, so anti-colocation rules can see every pod on a node.
//!
//! Shaped like kubert's index: `apply` / `delete` / `reset(live)`, where a re-list replaces
//! the view of live pods and so drops pods deleted while disconnected.
//!
//! Three sources, in rising order of trust: a **provisional** entry is a guess (the HTTP
//! extender records the node it scored best, because kube-scheduler never tells it which one
//! it chose), a **Reserve** is a scheduler's decision, a **Watch** entry is the pod bound.
//! An entry is only ever replaced by one at least as trusted: a guess never overrides a
//! decision, while a decision or the watch on the same node confirms a guess (keeping its
//! earlier time) and on another node replaces it. Unconfirmed entries expire
//! ([`Ledger::prune_unconfirmed`]): a Reserve after the policy's `reserve_ttl`, a
//! provisional entry at its own, much shorter, `expires_at`.

use std::collections::{BTreeMap, HashSet};

use crate::FastMap;
use crate::estimate::Usage;
use crate::time::{Millis, UnixMillis};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LedgerSource {
    /// A scheduler called Reserve.
    Reserve,
    /// The pod watch saw `spec.nodeName` set.
    Watch,
    /// A guess at the scheduler's choice (a Reserve with a provisional TTL), dropped at
    /// `expires_at` unless a Reserve or the watch confirms it first.
    Provisional { expires_at: UnixMillis },
}

impl LedgerSource {
    /// Provisional < Reserve < Watch: an entry is replaced only by one at least as trusted.
    fn trust(self) -> u8 {
        match self {
            LedgerSource::Provisional { .. } => 0,
            LedgerSource::Reserve => 1,
            LedgerSource::Watch => 2,
        }
    }

    pub fn is_provisional(self) -> bool {
        matches!(self, LedgerSource::Provisional { .. })
    }

    /// Whether an unconfirmed entry placed at `placed_at` has expired at `now`: a Reserve
    /// after `reserve_ttl`, a provisional entry at its own expiry; watched ones never.
    pub fn expired(self, placed_at: UnixMillis, now: UnixMillis, reserve_ttl: Millis) -> bool {
        match self {
            LedgerSource::Watch => false,
            LedgerSource::Reserve => now.since(placed_at) >= reserve_ttl,
            LedgerSource::Provisional { expires_at } => now >= expires_at,
        }
    }
}

/// What became of a provisional guess (the extender adapter's Reserve of its best-scored
/// node at prioritize, made before kube-scheduler decides): counted by whoever sees the
/// decision arrive, to tell how often the guess and the decision differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GuessOutcome {
    /// A Reserve or the watch placed the pod on the guessed node.
    Confirmed,
    /// A Reserve or the watch placed the pod on another node.
    Moved,
    /// Nothing placed the pod before the guess expired.
    Expired,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LedgerEntry {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub node: String,
    /// PodScheduled condition time or Reserve time, never the time an event arrived.
    pub placed_at: UnixMillis,
    pub usage: Usage,
    pub source: LedgerSource,
    pub labels: BTreeMap<String, String>,
}

impl LedgerEntry {
    /// Whether the entry still counts toward predicted load at `now`.
    pub fn counts_at(&self, now: UnixMillis, absorb_window: Millis) -> bool {
        now.since(self.placed_at) < absorb_window
    }

    /// Time left until the metrics have absorbed the pod (zero once they have).
    pub fn absorb_remaining(&self, now: UnixMillis, absorb_window: Millis) -> Millis {
        Millis((absorb_window.0 - now.since(self.placed_at).0).max(0))
    }
}

#[derive(Clone, Debug, Default)]
pub struct Ledger {
    by_node: FastMap<String, Vec<LedgerEntry>>,
    node_of: FastMap<String, String>,
}

impl Ledger {
    pub fn len(&self) -> usize {
        self.node_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.node_of.is_empty()
    }

    pub fn get(&self, uid: &str) -> Option<&LedgerEntry> {
        let node = self.node_of.get(uid)?;
        self.by_node.get(node)?.iter().find(|e| e.uid == uid)
    }

    pub fn iter(&self) -> impl Iterator<Item = &LedgerEntry> {
        self.by_node.values().flatten()
    }

    pub fn on_node(&self, node: &str) -> &[LedgerEntry] {
        self.by_node.get(node).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Adds or updates an entry; returns the stored entry when anything changed.
    ///
    /// The same pod on the same node is one placement: the earliest placement time is kept
    /// (a Reserve followed by the watch's PodScheduled time must not restart the clock) and
    /// the more trusted source wins (a watch confirms a Reserve, either confirms a
    /// provisional entry). A different node is a move. A provisional entry never replaces a
    /// Reserve or watched entry of the same pod, on any node: it is a guess made before the
    /// decision, so it can only be older news (a forwarded guess arriving late).
    pub fn apply(&mut self, entry: LedgerEntry) -> Option<LedgerEntry> {
        if let Some(existing) = self.get(&entry.uid) {
            if entry.source.is_provisional() && !existing.source.is_provisional() {
                return None;
            }
            if existing.node == entry.node {
                let merged = LedgerEntry {
                    placed_at: existing.placed_at.min(entry.placed_at),
                    source: if existing.source.trust() > entry.source.trust() {
                        existing.source
                    } else {
                        entry.source
                    },
                    ..entry
                };
                if &merged == existing {
                    return None;
                }
                let slot = self
                    .by_node
                    .get_mut(&merged.node)
                    .and_then(|v| v.iter_mut().find(|e| e.uid == merged.uid))
                    .expect("indexed entry exists");
                *slot = merged.clone();
                return Some(merged);
            }
            self.delete(&entry.uid);
        }
        self.node_of.insert(entry.uid.clone(), entry.node.clone());
        self.by_node.entry(entry.node.clone()).or_default().push(entry.clone());
        Some(entry)
    }

    /// What [`Ledger::apply`] of `entry` does to a provisional entry of the same pod: a
    /// Reserve or watched placement on the guessed node confirms it, on another node moves
    /// it. `None` when the pod has no provisional entry, or `entry` is a guess itself (a
    /// renewed guess decides nothing).
    pub fn guess_outcome(&self, entry: &LedgerEntry) -> Option<GuessOutcome> {
        let existing = self.get(&entry.uid)?;
        if !existing.source.is_provisional() || entry.source.is_provisional() {
            return None;
        }
        Some(if existing.node == entry.node {
            GuessOutcome::Confirmed
        } else {
            GuessOutcome::Moved
        })
    }

    /// How many of the entries [`Ledger::prune_unconfirmed`] would drop at `now` are
    /// provisional guesses (expired ones).
    pub fn expired_guesses(&self, now: UnixMillis) -> usize {
        self.iter()
            .filter(|e| e.source.is_provisional() && e.source.expired(e.placed_at, now, Millis(0)))
            .count()
    }

    pub fn delete(&mut self, uid: &str) -> Option<LedgerEntry> {
        let node = self.node_of.remove(uid)?;
        let entries = self.by_node.get_mut(&node)?;
        let index = entries.iter().position(|e| e.uid == uid)?;
        let removed = entries.swap_remove(index);
        if entries.is_empty() {
            self.by_node.remove(&node);
        }
        Some(removed)
    }

    /// Replaces the watched view with `live` (a fresh list of placed pods). Reserve entries
    /// the list does not show yet are kept while younger than `reserve_grace` (their bind
    /// may still be under way), provisional ones until they expire. Returns the uids that
    /// left the ledger.
    pub fn reset(
        &mut self,
        live: impl IntoIterator<Item = LedgerEntry>,
        now: UnixMillis,
        reserve_grace: Millis,
    ) -> Vec<String> {
        let live: Vec<LedgerEntry> = live.into_iter().collect();
        let live_uids: HashSet<&str> = live.iter().map(|e| e.uid.as_str()).collect();
        let removed: Vec<String> = self
            .iter()
            .filter(|e| !live_uids.contains(e.uid.as_str()))
            .filter(|e| {
                e.source == LedgerSource::Watch || e.source.expired(e.placed_at, now, reserve_grace)
            })
            .map(|e| e.uid.clone())
            .collect();
        for uid in &removed {
            self.delete(uid);
        }
        for entry in live {
            self.apply(entry);
        }
        removed
    }

    /// Replaces everything with `entries` (a scorer receiving a full snapshot).
    pub fn replace(&mut self, entries: impl IntoIterator<Item = LedgerEntry>) {
        self.by_node.clear();
        self.node_of.clear();
        for entry in entries {
            self.apply(entry);
        }
    }

    /// Drops Reserve entries no watch has confirmed within `ttl`, and provisional entries
    /// past their own expiry. Returns their uids.
    pub fn prune_unconfirmed(&mut self, now: UnixMillis, ttl: Millis) -> Vec<String> {
        let expired: Vec<String> = self
            .iter()
            .filter(|e| e.source.expired(e.placed_at, now, ttl))
            .map(|e| e.uid.clone())
            .collect();
        for uid in &expired {
            self.delete(uid);
        }
        expired
    }

    /// Estimated usage of the placements on `node` the metrics have not absorbed yet. The
    /// definition; `Snapshot` keeps an index of it for the request path.
    pub fn unabsorbed(&self, node: &str, now: UnixMillis, absorb_window: Millis) -> Usage {
        self.on_node(node).iter().filter(|e| e.counts_at(now, absorb_window)).fold(
            Usage::default(),
            |sum, e| Usage {
                cpu_millis: sum.cpu_millis + e.usage.cpu_millis,
                memory_bytes: sum.memory_bytes + e.usage.memory_bytes,
            },
        )
    }

    /// Placements on `node` within the last `window` (Crane's bindings count).
    pub fn placements_within(&self, node: &str, now: UnixMillis, window: Millis) -> usize {
        self.on_node(node).iter().filter(|e| e.counts_at(now, window)).count()
    }
}

#[cfg(test)]
mod tests;
