//! The ledger of recent placements (docs/design.md#the-ledger): which pods were placed on which
//! node, when, and how much they are estimated to use. An entry's load counts toward predicted
//! utilisation until the metrics have absorbed the pod; the entry itself lives until the pod
//! is gone, so anti-colocation rules can see every pod on a node.
//!
//! Shaped like kubert's index: `apply` / `delete` / `reset(live)`, where a re-list replaces
//! the view of live pods and so drops pods deleted while disconnected.
//!
//! Three sources of arrivals, in rising order of trust: a **provisional** entry is a guess
//! (the HTTP extender records the node it scored best, because kube-scheduler never tells it
//! which one it chose), a **Reserve** is a scheduler's decision, a **Watch** entry is the pod
//! bound. An entry is only ever replaced by one at least as trusted: a guess never overrides
//! a decision, while a decision or the watch on the same node confirms a guess (keeping its
//! earlier time) and on another node replaces it. Unconfirmed entries expire
//! ([`Ledger::prune_unconfirmed`]): a Reserve after the policy's `reserve_ttl`, a
//! provisional entry at its own, much shorter, `expires_at`.
//!
//! A fourth, the most trusted, is the **departure** (docs/design.md#departures): a watched
//! pod deleted or finished becomes one ([`Ledger::depart`]), keyed by the same uid, so its
//! load leaves the prediction at once — its un-absorbed arrival is cancelled, and where the
//! metric had absorbed the arrival already, the pod's estimate is credited (subtracted)
//! until the metric has absorbed the departure too ([`credit_counts`]). Nothing replaces a
//! departure but a departure: a late Reserve or watch event never brings the pod back.
//! Departures leave at [`Ledger::prune_departed`], once no metric counts them.

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
    /// The pod left the node at `departed_at` (deleted, evicted or finished). The entry's
    /// `placed_at` is its arrival when `arrival_known`; otherwise the pod was never in a
    /// ledger (the caller knew only its node and estimate), `placed_at` equals
    /// `departed_at`, and every metric gets the credit.
    Departure { departed_at: UnixMillis, arrival_known: bool },
}

impl LedgerSource {
    /// Provisional < Reserve < Watch < Departure: an entry is replaced only by one at least
    /// as trusted, and a pod that left never comes back under the same uid.
    fn trust(self) -> u8 {
        match self {
            LedgerSource::Provisional { .. } => 0,
            LedgerSource::Reserve => 1,
            LedgerSource::Watch => 2,
            LedgerSource::Departure { .. } => 3,
        }
    }

    pub fn is_provisional(self) -> bool {
        matches!(self, LedgerSource::Provisional { .. })
    }

    pub fn is_departure(self) -> bool {
        matches!(self, LedgerSource::Departure { .. })
    }

    /// Whether an unconfirmed entry placed at `placed_at` has expired at `now`: a Reserve
    /// after `reserve_ttl`, a provisional entry at its own expiry; watched ones never.
    /// Departures leave by [`Ledger::prune_departed`] instead.
    pub fn expired(self, placed_at: UnixMillis, now: UnixMillis, reserve_ttl: Millis) -> bool {
        match self {
            LedgerSource::Watch | LedgerSource::Departure { .. } => false,
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

/// Whether a metric's prediction is lowered by a departure (docs/policy.md#departures): an
/// average drops as the pod's samples leave its window, a maximum keeps reading the pod's
/// peak until its whole span has passed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DepartureCredit {
    /// The departed pod's estimate is subtracted until the metric has absorbed the departure.
    #[default]
    Credit,
    /// A departure only cancels the pod's un-absorbed arrival; nothing is subtracted.
    Hold,
}

/// How one metric reads the ledger: how long an arrival (or a departure's credit) counts,
/// and whether departures are credited at all. The engine computes the ledger's share once
/// per distinct `LedgerWindow` of a policy, not per metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LedgerWindow {
    /// The metric's absorb window (`MetricSpec::absorb_window`).
    pub absorb: Millis,
    pub departures: DepartureCredit,
    /// How long a departure's credit lasts: until the metric *starts* to show the departure
    /// (`MetricSpec::credit_window`: the absorb window less the averaging window). From then
    /// on the average falls by itself, over its window; a credit kept until the average had
    /// absorbed the departure in full counted most of the pod twice and under-read churning
    /// nodes (SIMULATION.md "Departures").
    pub credit: Millis,
}

/// A bare absorb window credits departures (the default for an average).
impl From<Millis> for LedgerWindow {
    fn from(absorb: Millis) -> Self {
        LedgerWindow { absorb, departures: DepartureCredit::Credit, credit: absorb }
    }
}

/// Whether a departure's credit counts toward a metric read through `window` at `now`: the
/// one rule, shared by [`Ledger::unabsorbed`] and the snapshot's index of it.
///
/// - An arrival the metric had not absorbed when the pod left (`departed_at − arrived_at <
///   absorb`) was counted by the ledger, not by the metric: the departure cancels it and
///   there is nothing to credit, ever (the metric never showed the pod in full).
/// - Otherwise the metric shows the pod: while `now − departed_at < credit` (the metric does
///   not show the departure yet) the pod's estimate is subtracted — unless the metric holds
///   (a maximum).
pub fn credit_counts(
    arrived_at: Option<UnixMillis>,
    departed_at: UnixMillis,
    now: UnixMillis,
    window: LedgerWindow,
) -> bool {
    let arrival_counted = arrived_at.is_some_and(|at| departed_at.since(at) < window.absorb);
    window.departures == DepartureCredit::Credit
        && !arrival_counted
        && now.since(departed_at) < window.credit
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
    /// A departure of a pod no ledger holds (the caller knows its node and estimate, as a
    /// simulator does): every crediting metric gets the credit.
    pub fn departure(self, departed_at: UnixMillis) -> LedgerEntry {
        LedgerEntry {
            placed_at: departed_at,
            source: LedgerSource::Departure { departed_at, arrival_known: false },
            ..self
        }
    }

    /// This placement's departure at `departed_at`, its arrival (`placed_at`) known: a
    /// metric that has not absorbed the arrival yet cancels it, the others get the credit.
    pub fn departed(self, departed_at: UnixMillis) -> LedgerEntry {
        LedgerEntry { source: LedgerSource::Departure { departed_at, arrival_known: true }, ..self }
    }

    /// The arrival a departure cancels or follows (`None`: not known).
    pub(crate) fn arrived_at(&self) -> Option<UnixMillis> {
        match self.source {
            LedgerSource::Departure { arrival_known: false, .. } => None,
            _ => Some(self.placed_at),
        }
    }

    /// How the entry's usage counts toward a metric read through `window` at `now`: +1 an
    /// arrival not yet absorbed, −1 a departure's credit, 0 nothing.
    pub fn sign_at(&self, now: UnixMillis, window: impl Into<LedgerWindow>) -> i64 {
        let window = window.into();
        match self.source {
            LedgerSource::Departure { departed_at, .. } => {
                -i64::from(credit_counts(self.arrived_at(), departed_at, now, window))
            }
            _ => i64::from(now.since(self.placed_at) < window.absorb),
        }
    }

    /// Whether the entry still counts toward predicted load at `now` (either way).
    pub fn counts_at(&self, now: UnixMillis, window: impl Into<LedgerWindow>) -> bool {
        self.sign_at(now, window) != 0
    }

    /// Time left until the metric has absorbed the pod's arrival, or for a departure its
    /// departure (zero once it has, and for a departure that credits nothing).
    pub fn absorb_remaining(&self, now: UnixMillis, window: impl Into<LedgerWindow>) -> Millis {
        let window = window.into();
        let since = match self.source {
            LedgerSource::Departure { departed_at, .. } => {
                if !credit_counts(self.arrived_at(), departed_at, departed_at, window) {
                    return Millis(0);
                }
                return Millis((window.credit.0 - now.since(departed_at).0).max(0));
            }
            _ => now.since(self.placed_at),
        };
        Millis((window.absorb.0 - since.0).max(0))
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
    ///
    /// A departure is final: only another departure of the pod changes it (the earliest
    /// departure time and the arrival it knows are kept); it replaces any arrival of the
    /// pod, on its own node or another.
    pub fn apply(&mut self, entry: LedgerEntry) -> Option<LedgerEntry> {
        if let Some(existing) = self.get(&entry.uid) {
            if entry.source.is_provisional() && !existing.source.is_provisional() {
                return None;
            }
            if existing.source.is_departure() && !entry.source.is_departure() {
                return None;
            }
            if let (
                LedgerSource::Departure { departed_at: was, arrival_known: knew },
                LedgerSource::Departure { departed_at: now, arrival_known: knows },
            ) = (existing.source, entry.source)
            {
                // The one that knows the arrival keeps it; the earliest departure counts.
                let arrival = if knew { existing } else { &entry };
                let merged = LedgerEntry {
                    placed_at: arrival.placed_at,
                    source: LedgerSource::Departure {
                        departed_at: was.min(now),
                        arrival_known: knew || knows,
                    },
                    ..entry.clone()
                };
                if &merged == existing {
                    return None;
                }
                self.delete(&entry.uid);
                return self.apply_new(merged);
            }
            if existing.node == entry.node && !entry.source.is_departure() {
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
        self.apply_new(entry)
    }

    /// Stores an entry for a pod the ledger holds nothing for.
    fn apply_new(&mut self, entry: LedgerEntry) -> Option<LedgerEntry> {
        self.node_of.insert(entry.uid.clone(), entry.node.clone());
        self.by_node.entry(entry.node.clone()).or_default().push(entry.clone());
        Some(entry)
    }

    /// The pod `uid` left its node at `departed_at`: a watched entry becomes its departure
    /// (same node, estimate and arrival time), which is returned. `None` when the ledger
    /// holds no watched entry for it — nothing, a departure already, or only a Reserve or a
    /// guess, whose pod was never seen running: the caller deletes that instead.
    pub fn depart(&mut self, uid: &str, departed_at: UnixMillis) -> Option<LedgerEntry> {
        let existing = self.get(uid).filter(|e| e.source == LedgerSource::Watch)?;
        self.apply(existing.clone().departed(departed_at))
    }

    /// Drops the departures no metric counts any more: those that left `horizon` (the
    /// policy's longest absorb window) or longer before `now`. Returns them.
    pub fn prune_departed(&mut self, now: UnixMillis, horizon: Millis) -> Vec<LedgerEntry> {
        let gone: Vec<String> = self
            .iter()
            .filter(|e| match e.source {
                LedgerSource::Departure { departed_at, .. } => now.since(departed_at) >= horizon,
                _ => false,
            })
            .map(|e| e.uid.clone())
            .collect();
        gone.iter().filter_map(|uid| self.delete(uid)).collect()
    }

    /// What [`Ledger::apply`] of `entry` does to a provisional entry of the same pod: a
    /// Reserve or watched placement on the guessed node confirms it, on another node moves
    /// it. `None` when the pod has no provisional entry, or `entry` is a guess itself (a
    /// renewed guess decides nothing) or a departure (which says nothing of where the
    /// scheduler put the pod).
    pub fn guess_outcome(&self, entry: &LedgerEntry) -> Option<GuessOutcome> {
        let existing = self.get(&entry.uid)?;
        if !existing.source.is_provisional()
            || entry.source.is_provisional()
            || entry.source.is_departure()
        {
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
    /// may still be under way), provisional ones until they expire, departures until
    /// [`Ledger::prune_departed`] (a departed pod is in no list, and its credit must not
    /// vanish with a relist). Returns the uids that left the ledger.
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

    /// Estimated usage of the placements on `node` the metrics have not absorbed yet, less
    /// the credits of the departures they have not absorbed (negative when the credits
    /// outweigh). The definition; `Snapshot` keeps an index of it for the request path.
    pub fn unabsorbed(
        &self,
        node: &str,
        now: UnixMillis,
        window: impl Into<LedgerWindow>,
    ) -> Usage {
        let window = window.into();
        self.on_node(node).iter().fold(Usage::default(), |sum, e| {
            let sign = e.sign_at(now, window);
            Usage {
                cpu_millis: sum.cpu_millis + sign * e.usage.cpu_millis,
                memory_bytes: sum.memory_bytes + sign * e.usage.memory_bytes,
            }
        })
    }

    /// Placements (not departures) on `node` within the last `window` (Crane's bindings
    /// count).
    pub fn placements_within(&self, node: &str, now: UnixMillis, window: Millis) -> usize {
        self.on_node(node)
            .iter()
            .filter(|e| !e.source.is_departure() && now.since(e.placed_at) < window)
            .count()
    }
}

#[cfg(test)]
mod tests;
