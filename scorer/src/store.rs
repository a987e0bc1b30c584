//! The scorer's snapshot: nodes and ledger as last streamed by the collector, plus the
//! Reserves and Unreserves this replica took that the collector has not confirmed yet
//! (re-applied after a full resync, so it cannot lose them). Each pending op carries a
//! sequence number, so the forwarder confirms by `(uid, seq)` without keeping its own copy
//! of the entry. With several collectors an op stays pending until every one of them has
//! taken it: a failover to a collector that has not seen it yet must not undo it.
//!
//! Snapshot, the engine's precomputed rows and the Session node table change together, as
//! one [`Generation`], published so that a request reads one whole generation and never
//! waits for a writer (`published.rs`): a full resync no longer blocks every Score.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::Guard;
use waterline_core::engine::Prepared;
use waterline_core::{Delta, LedgerEntry, Millis, Policy, Snapshot, UnixMillis};
use waterline_runtime::policy::{Policies, PolicyHandle};

use crate::unconfirmed::{Answer, Op, OutcomeMetrics, Unconfirmed};

mod published;
use published::{Change, Published};

#[derive(Clone, Debug, PartialEq)]
pub enum PendingOp {
    Reserve(LedgerEntry),
    Unreserve { uid: String },
}

/// The names of the snapshot's nodes in a fixed order, for Session answers that refer to
/// nodes by index. A new generation whenever the set of names changes (values do not).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeTable {
    pub generation: u64,
    pub names: Vec<String>,
}

/// One consistent state of the scorer: the snapshot, the engine's rows precomputed from it
/// for each policy the scorer serves (in node-table order) and the node table, all from the
/// same changes. Requests read one generation from start to end; writers publish the next
/// one without waiting for them.
#[derive(Clone, Debug)]
pub struct Generation {
    snapshot: Snapshot,
    /// One table per policy, indexed as `Policies` (0: the default). Every table has the
    /// same rows (the snapshot's nodes in name order); the columns follow each policy.
    prepared: Vec<Prepared>,
    table: Arc<NodeTable>,
}

impl Generation {
    fn new(policies: usize) -> Self {
        let mut snapshot = Snapshot::default();
        snapshot.track_changes();
        let prepared = vec![Prepared::default(); policies.max(1)];
        Generation { snapshot, prepared, table: Arc::default() }
    }
}

impl Deref for Generation {
    type Target = Snapshot;
    fn deref(&self) -> &Snapshot {
        &self.snapshot
    }
}

impl Generation {
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The engine's rows for the default policy, in the order of `node_table().names`.
    pub fn prepared(&self) -> &Prepared {
        &self.prepared[0]
    }

    /// The engine's rows for policy `index` of the store's `Policies`.
    pub fn prepared_for(&self, index: usize) -> &Prepared {
        &self.prepared[index]
    }

    pub fn node_table(&self) -> &Arc<NodeTable> {
        &self.table
    }

    /// After a change to the snapshot: the changed rows of every policy's table (each told
    /// the same changes), and a new node table when the names changed.
    fn settle(&mut self, policies: &[Arc<Policy>], now: UnixMillis) {
        let changes = self.snapshot.take_changes();
        let mut renamed = false;
        for (table, policy) in self.prepared.iter_mut().zip(policies) {
            renamed |= table.apply(policy, &self.snapshot, &changes, now);
        }
        if renamed && self.table.names != self.prepared[0].names() {
            let names = self.prepared[0].names().to_vec();
            self.table = Arc::new(NodeTable { generation: self.table.generation + 1, names });
        }
    }
}

pub struct Store {
    current: Published<Generation>,
    /// The policies the rows are prepared for, one table each (requests check it:
    /// `Prepared::fits`).
    policies: Policies,
    /// uid → the latest unconfirmed op of each pod.
    pending: Mutex<HashMap<String, Pending>>,
    /// Collectors every op is forwarded to: how many confirmations retire it.
    collectors: usize,
    next_seq: AtomicU64,
    synced: AtomicBool,
    /// Whether the collector stream is open: while it is, the snapshot is current.
    connected: AtomicBool,
    /// Unix millis of the last moment the snapshot was known to be current.
    last_contact: AtomicI64,
    /// Local changes the stream has not confirmed, and how each ended (`unconfirmed.rs`);
    /// locked inside the writer's lock only.
    unconfirmed: Mutex<Unconfirmed>,
}

/// An op not every collector has confirmed yet.
struct Pending {
    seq: u64,
    op: PendingOp,
    unconfirmed: usize,
}

impl Default for Store {
    fn default() -> Self {
        Store::new(1)
    }
}

impl Store {
    /// A store whose ops are forwarded to `collectors` collectors, rows prepared for the
    /// default policy.
    pub fn new(collectors: usize) -> Self {
        Store::with_policy(collectors, PolicyHandle::new(Policy::default()))
    }

    /// A store whose rows are prepared for the policy in `policy` (and follow its reloads:
    /// [`Store::refresh`]).
    pub fn with_policy(collectors: usize, policy: PolicyHandle) -> Self {
        Store::with_policies(collectors, Policies::single(policy))
    }

    /// A store with one table per policy of `policies`, each following its reloads.
    pub fn with_policies(collectors: usize, policies: Policies) -> Self {
        Store {
            current: Published::new(Generation::new(policies.len())),
            policies,
            pending: Mutex::default(),
            collectors: collectors.max(1),
            next_seq: AtomicU64::default(),
            synced: AtomicBool::default(),
            connected: AtomicBool::default(),
            last_contact: AtomicI64::default(),
            unconfirmed: Mutex::new(Unconfirmed::new(collectors, OutcomeMetrics::default())),
        }
    }

    /// The current generation, for Filter, Score and Evaluate: no lock, never waits for a
    /// writer. Hold it for one request, never across an `.await`.
    pub fn read(&self) -> Guard<Arc<Generation>> {
        self.current.load()
    }

    /// The current node table (a cheap clone of an `Arc`).
    pub fn node_table(&self) -> Arc<NodeTable> {
        self.read().table.clone()
    }

    /// Writes that copied a whole generation because readers still held the previous one.
    pub fn generation_copies(&self) -> u64 {
        self.current.copies()
    }

    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// How out of date the snapshot may be: zero while the collector stream is open (it
    /// pushes every change), else the time since the stream was last known to be healthy.
    pub fn age(&self, now: UnixMillis) -> Millis {
        if self.connected.load(Ordering::Acquire) {
            return Millis(0);
        }
        match self.last_contact.load(Ordering::Relaxed) {
            0 => Millis(0),
            at => now.since(UnixMillis(at)).max(Millis(0)),
        }
    }

    /// The stream opened (`true`) or broke (`false`) at `now`.
    pub fn set_connected(&self, connected: bool, now: UnixMillis) {
        if !connected && self.connected.load(Ordering::Acquire) {
            self.last_contact.store(now.0, Ordering::Relaxed);
        }
        self.connected.store(connected, Ordering::Release);
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every policy in force, in `Policies` order.
    fn policies_now(&self) -> Vec<Arc<Policy>> {
        (0..self.policies.len()).map(|i| self.policies.get(i)).collect()
    }

    /// Applies one change streamed by the collector.
    pub fn apply(&self, message: &Delta, now: UnixMillis) {
        let policy = self.policies_now();
        let delta = Arc::new(message.clone());
        self.current.write(|| {
            let pending = self.lock_pending();
            let lay_over: Vec<PendingOp> = if delta.reset {
                // A full snapshot may predate our unconfirmed ops: lay them over it again.
                pending.values().map(|p| p.op.clone()).collect()
            } else {
                // A delta can only re-add what we removed ourselves; re-applying every
                // pending op on every delta cost seconds per message with 50,000 queued.
                delta
                    .placed
                    .iter()
                    .filter_map(|entry| match pending.get(&entry.uid) {
                        Some(Pending { op: op @ PendingOp::Unreserve { .. }, .. }) => {
                            Some(op.clone())
                        }
                        _ => None,
                    })
                    .collect()
            };
            drop(pending);
            self.stream_confirms(&delta);
            let change: Change<Generation> = Arc::new(move |generation: &mut Generation| {
                delta.apply_to(&mut generation.snapshot);
                for op in &lay_over {
                    apply_op(&mut generation.snapshot, op);
                }
                generation.settle(&policy, now);
            });
            change
        });
        self.last_contact.store(now.0, Ordering::Relaxed);
        self.synced.store(true, Ordering::Release);
    }

    /// Applies a local Reserve/Unreserve at once (the next request sees it) and remembers
    /// it until confirmed; returns the sequence number to confirm it with.
    pub fn apply_local(&self, op: PendingOp) -> u64 {
        let policy = self.policies_now();
        let now = UnixMillis::now();
        let mut seq = 0;
        self.current.write(|| {
            let uid = match &op {
                PendingOp::Reserve(e) => e.uid.clone(),
                PendingOp::Unreserve { uid } => uid.clone(),
            };
            seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
            self.taken_locally(&uid, seq, &op, now);
            let pending = Pending { seq, op: op.clone(), unconfirmed: self.collectors };
            self.lock_pending().insert(uid, pending);
            let change: Change<Generation> = Arc::new(move |generation: &mut Generation| {
                apply_op(&mut generation.snapshot, &op);
                generation.settle(&policy, now);
            });
            change
        });
        seq
    }

    /// Keeps the rows on the fast path: rebuilds them after a policy reload of another
    /// shape, and recomputes those whose ledger shares expired (a placement aged out of
    /// its absorb window). A no-op when neither happened.
    pub fn refresh(&self, now: UnixMillis) {
        let policy = self.policies_now();
        let current = self.read();
        let current_enough = current
            .prepared
            .iter()
            .zip(&policy)
            .all(|(table, policy)| table.fits(policy) && !table.expired(now));
        if current_enough {
            return;
        }
        drop(current);
        self.current.write(|| {
            let change: Change<Generation> =
                Arc::new(move |generation: &mut Generation| generation.settle(&policy, now));
            change
        });
    }

    /// A collector accepted op `seq` of pod `uid`; once every collector has, their streams
    /// carry it from then on. A later op of the same pod stays pending.
    pub fn confirm(&self, uid: &str, seq: u64) {
        let mut pending = self.lock_pending();
        let Some(op) = pending.get_mut(uid).filter(|op| op.seq == seq) else { return };
        op.unconfirmed = op.unconfirmed.saturating_sub(1);
        if op.unconfirmed == 0 {
            pending.remove(uid);
            if pending.is_empty() {
                // A burst of 50,000 Reserves leaves a table sized for them; give it back.
                pending.shrink_to_fit();
            }
        }
    }

    pub fn pending_len(&self) -> usize {
        self.lock_pending().len()
    }
}

/// The bound on local changes the stream has not confirmed (`unconfirmed.rs`): kept apart
/// from the rest of the store, which only calls into it under the writer's lock.
impl Store {
    fn lock_unconfirmed(&self) -> std::sync::MutexGuard<'_, Unconfirmed> {
        self.unconfirmed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `waterline_forward_outcomes_total` and `waterline_forward_unconfirmed`, to register.
    pub fn outcome_metrics(&self) -> OutcomeMetrics {
        self.lock_unconfirmed().metrics().clone()
    }

    /// Pods whose latest local op the stream has not confirmed.
    pub fn unconfirmed_len(&self) -> usize {
        self.lock_unconfirmed().len()
    }

    /// Records a local op (under the writer's lock, before it is applied): is the entry it
    /// leaves only ours, or does the stream's own entry already stand there?
    fn taken_locally(&self, uid: &str, seq: u64, op: &PendingOp, now: UnixMillis) {
        let (kind, guess, stream_holds) = match op {
            PendingOp::Reserve(entry) => {
                let current = self.current.load();
                let held = current.snapshot().ledger().get(uid).is_some_and(|held| {
                    held.source.is_departure()
                        || (held.node == entry.node
                            && (!held.source.is_provisional() || entry.source.is_provisional()))
                });
                (Op::Reserve, entry.source.is_provisional(), held)
            }
            PendingOp::Unreserve { .. } => (Op::Unreserve, false, false),
        };
        self.lock_unconfirmed().taken(uid, seq, kind, guess, stream_holds, now);
    }

    /// What a streamed change confirms (under the writer's lock).
    fn stream_confirms(&self, delta: &Delta) {
        let mut unconfirmed = self.lock_unconfirmed();
        if unconfirmed.is_empty() {
            return;
        }
        for entry in &delta.placed {
            unconfirmed.stream_placed(&entry.uid, entry.source.is_provisional());
        }
        for uid in &delta.released {
            unconfirmed.stream_released(uid);
        }
    }

    /// One collector's answer to op `seq` of pod `uid`: counted, then [`Store::confirm`].
    pub fn answered(&self, uid: &str, seq: u64, answer: Answer) {
        self.lock_unconfirmed().answered(uid, seq, answer);
        self.confirm(uid, seq);
    }

    /// Undoes every local change the stream has not confirmed within `bound` of being
    /// taken: a Reserve's entry leaves the ledger, an op's lay-over ends. Never touches an
    /// entry the stream confirmed (confirmation and removal both happen under the writer's
    /// lock). Returns how many were given up.
    pub fn give_up(&self, now: UnixMillis, bound: Millis) -> usize {
        if !self.lock_unconfirmed().any_due(now, bound) {
            return 0;
        }
        let policy = self.policies_now();
        let mut count = 0;
        self.current.write(|| {
            let given_up = self.lock_unconfirmed().give_up(now, bound);
            count = given_up.len();
            let mut pending = self.lock_pending();
            let mut removed = Vec::new();
            for g in given_up {
                if pending.get(&g.uid).is_some_and(|p| p.seq == g.seq) {
                    pending.remove(&g.uid);
                }
                if g.op == Op::Reserve {
                    removed.push(g.uid);
                }
            }
            let change: Change<Generation> = Arc::new(move |generation: &mut Generation| {
                for uid in &removed {
                    let departed = generation
                        .snapshot
                        .ledger()
                        .get(uid)
                        .is_some_and(|e| e.source.is_departure());
                    if !departed {
                        generation.snapshot.delete_placement(uid);
                    }
                }
                generation.settle(&policy, now);
            });
            change
        });
        count
    }
}

fn apply_op(snapshot: &mut Snapshot, op: &PendingOp) {
    match op {
        PendingOp::Reserve(entry) => {
            snapshot.apply_placement(entry.clone());
        }
        // An Unreserve takes back a reservation, never a departure: a pod that left keeps
        // its credit until the collector prunes it (docs/design.md#departures).
        PendingOp::Unreserve { uid } => {
            if !snapshot.ledger().get(uid).is_some_and(|e| e.source.is_departure()) {
                snapshot.delete_placement(uid);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use waterline_core::estimate::Usage;
    use waterline_core::{LedgerSource, NodeReport};

    /// A Reserve-made entry for `uid` on n1 (also the forwarder tests' fixture).
    pub(crate) fn entry(uid: &str) -> LedgerEntry {
        LedgerEntry {
            uid: uid.into(),
            namespace: "ns".into(),
            name: uid.into(),
            node: "n1".into(),
            placed_at: UnixMillis(1000),
            usage: Usage { cpu_millis: 100, memory_bytes: 0 },
            source: LedgerSource::Reserve,
            labels: Default::default(),
        }
    }

    fn node(name: &str) -> NodeReport {
        NodeReport { name: name.into(), ..NodeReport::default() }
    }

    #[test]
    fn reset_replaces_nodes_and_ledger_but_keeps_unconfirmed_local_ops() {
        let store = Store::default();
        assert!(!store.is_synced());
        store.apply(
            &Delta {
                reset: true,
                nodes: vec![node("n1"), node("n2")],
                placed: vec![entry("old")],
                ..Default::default()
            },
            UnixMillis(5000),
        );
        assert!(store.is_synced());
        let mine = store.apply_local(PendingOp::Reserve(entry("mine")));
        store.apply_local(PendingOp::Unreserve { uid: "old".into() });
        assert!(store.read().ledger().get("mine").is_some());
        assert!(store.read().ledger().get("old").is_none());

        // A resync from a collector that has not seen our ops yet must not undo them.
        store.apply(
            &Delta {
                reset: true,
                nodes: vec![node("n2")],
                placed: vec![entry("old")],
                ..Default::default()
            },
            UnixMillis(6000),
        );
        let snap = store.read();
        assert_eq!(snap.node_count(), 1);
        assert!(snap.ledger().get("mine").is_some());
        assert!(snap.ledger().get("old").is_none());
        drop(snap);

        store.confirm("old", mine); // not old's sequence number
        assert_eq!(store.pending_len(), 2);
        store.confirm("mine", mine);
        assert_eq!(store.pending_len(), 1);
        // age: the last message was at 6000; connected means current, disconnected ages
        assert_eq!(store.age(UnixMillis(9000)), Millis(3000));
        store.set_connected(true, UnixMillis(9000));
        assert_eq!(store.age(UnixMillis(20_000)), Millis(0));
        store.set_connected(false, UnixMillis(21_000));
        assert_eq!(store.age(UnixMillis(25_000)), Millis(4000));
    }

    /// The learned table the collector streams (docs/design.md#learned-estimate) is the
    /// one every generation prices by: kept across later deltas (which carry none) and the
    /// generation copies they make, replaced by the next table, emptied by a reset without.
    #[test]
    fn the_streamed_learned_table_stays_until_replaced() {
        use waterline_core::learn::{Learned, LearnedUsage, WorkloadUsage};
        use waterline_core::workload::WorkloadKey;
        let table = |ratio| -> Arc<LearnedUsage> {
            let cpu = Learned { ratio: Some(ratio), usage: 0.0, spread: 0.0, pods: 2, samples: 9 };
            let key = WorkloadKey::new("shop", "Deployment", "web");
            Arc::new([(key, WorkloadUsage { cpu: Some(cpu), memory: None })].into_iter().collect())
        };
        let ratio = |store: &Store| {
            let key = WorkloadKey::new("shop", "Deployment", "web");
            store.read().learned().get(&key).and_then(|u| u.cpu).and_then(|c| c.ratio)
        };
        let store = Store::default();
        let reset = Delta { reset: true, learned: Some(table(2.0)), ..Default::default() };
        store.apply(&reset, UnixMillis(1));
        // Readers holding a generation make the writer copy it: hold one across the writes.
        let held = store.read();
        for uid in ["a", "b", "c"] {
            store.apply(&Delta { placed: vec![entry(uid)], ..Default::default() }, UnixMillis(2));
        }
        store.apply_local(PendingOp::Reserve(entry("d")));
        assert_eq!(ratio(&store), Some(2.0));
        drop(held);
        store.apply(&Delta { learned: Some(table(3.0)), ..Default::default() }, UnixMillis(3));
        assert_eq!(ratio(&store), Some(3.0));
        store.apply(&Delta { reset: true, ..Default::default() }, UnixMillis(4));
        assert_eq!(ratio(&store), None);
    }

    /// docs/design.md#departures on the scorer: a departure streamed by the collector
    /// replaces the pod's arrival in the scorer's ledger copy and lowers the prediction at
    /// once (100 m of an 8-CPU node: 1.25 pp); a resync keeps it; a Reserve of the pod still
    /// pending here, laid over again, never brings the pod back; an Unreserve never removes
    /// the departure. Only the collector's release (its prune) does.
    #[test]
    fn a_streamed_departure_replaces_the_arrival_and_survives_lay_overs() {
        use waterline_core::engine::{self, Ask, Candidates};
        use waterline_core::snapshot::{Capacity, Sample};
        let store = Store::default();
        let now = UnixMillis(60 * 60_000);
        let sampled = Sample { value: 70.0, at: now };
        let n1 = NodeReport {
            name: "n1".into(),
            capacity: Capacity { cpu_millis: 8000, memory_bytes: 8 << 30 },
            samples: vec![("cpu_usage_avg_5m".into(), sampled)],
        };
        let watched = LedgerEntry { source: LedgerSource::Watch, ..entry("web") };
        let reset = Delta {
            reset: true,
            nodes: vec![n1],
            placed: vec![watched.clone()],
            ..Default::default()
        };
        store.apply(&reset, now);
        store.apply_local(PendingOp::Reserve(entry("web")));
        let departure = LedgerEntry {
            source: LedgerSource::Departure { departed_at: now, arrival_known: true },
            ..watched
        };
        store.apply(&Delta { placed: vec![departure.clone()], ..Default::default() }, now);
        let ledger_share = |store: &Store| {
            let generation = store.read();
            let policy = waterline_core::Policy::default().crediting_departures();
            let pod = waterline_core::Pod::default();
            let ask = Ask::Score { explain: true };
            let answer = engine::evaluate(
                &policy,
                generation.snapshot(),
                Some(generation.prepared()),
                &pod,
                ask,
                Candidates::All,
                now,
            );
            answer.terms[0][0].ledger
        };
        assert_eq!(store.read().ledger().get("web"), Some(&departure));
        assert_eq!(ledger_share(&store), -1.25);
        // A full resync that carries it, with the pending Reserve laid over: still departed.
        store.apply(&Delta { placed: vec![departure.clone()], ..reset }, now);
        assert_eq!(store.read().ledger().get("web"), Some(&departure));
        store.apply_local(PendingOp::Unreserve { uid: "web".into() });
        assert_eq!(store.read().ledger().get("web"), Some(&departure));
        assert_eq!(ledger_share(&store), -1.25);
        store.apply(&Delta { released: vec!["web".into()], ..Default::default() }, now);
        assert!(store.read().ledger().get("web").is_none());
    }

    #[test]
    fn the_node_table_changes_generation_only_when_names_change() {
        let store = Store::default();
        assert_eq!(store.node_table().generation, 0);
        let reset = Delta { reset: true, nodes: vec![node("b"), node("a")], ..Delta::default() };
        store.apply(&reset, UnixMillis(1));
        let first = store.node_table();
        assert_eq!((first.generation, first.names.clone()), (1, vec!["a".into(), "b".into()]));
        // New values for known nodes, and a placement: same table.
        store.apply(
            &Delta { nodes: vec![node("a")], placed: vec![entry("p")], ..Delta::default() },
            UnixMillis(2),
        );
        assert_eq!(store.node_table(), first);
        store.apply(
            &Delta { nodes: vec![node("c")], removed_nodes: vec!["a".into()], ..Delta::default() },
            UnixMillis(3),
        );
        let next = store.node_table();
        assert_eq!((next.generation, next.names.clone()), (2, vec!["b".into(), "c".into()]));
        // A full resync with the same names keeps the generation.
        store.apply(
            &Delta { reset: true, nodes: vec![node("c"), node("b")], ..Delta::default() },
            UnixMillis(4),
        );
        assert_eq!(store.node_table().generation, 2);
    }

    /// Every policy's table follows the one snapshot: a Reserve and a resync reach both,
    /// though the second policy has another shape (one metric, no ledger windows shared).
    #[test]
    fn each_policy_has_its_own_table_kept_up_to_date() {
        let narrow = waterline_core::policy::parse_policy(
            "metrics:\n  - {name: cpu, resource: cpu, query: q, period: 30s, weight: 1}\n",
        )
        .unwrap();
        let policies = Policies::from_policies(Policy::default(), vec![("narrow".into(), narrow)]);
        let store = Store::with_policies(1, policies.clone());
        let mut n1 = node("n1");
        n1.capacity = waterline_core::Capacity { cpu_millis: 1000, memory_bytes: 1 << 30 };
        store.apply(
            &Delta { reset: true, nodes: vec![n1, node("n2")], ..Delta::default() },
            UnixMillis(1),
        );
        let narrow_index = policies.index_of("narrow").unwrap();
        {
            let generation = store.read();
            assert!(generation.prepared_for(0).fits(&policies.get(0)));
            assert!(generation.prepared_for(narrow_index).fits(&policies.get(narrow_index)));
            assert!(!generation.prepared_for(narrow_index).fits(&policies.get(0)));
            assert_eq!(
                generation.prepared_for(narrow_index).names(),
                generation.prepared().names()
            );
        }
        let seq = store.apply_local(PendingOp::Reserve(entry("p")));
        let generation = store.read();
        // The Reserve's 100m of n1's 1000m: both tables see it (the narrow table's only
        // window is the default 7 m absorb window, the default table's first too).
        let pod = waterline_core::Pod::default();
        for index in [0, narrow_index] {
            let policy = policies.get(index);
            let with_table = waterline_core::engine::evaluate(
                &policy,
                generation.snapshot(),
                Some(generation.prepared_for(index)),
                &pod,
                waterline_core::engine::Ask::Score { explain: true },
                waterline_core::engine::Candidates::Names(&["n1".to_string()]),
                UnixMillis(1000),
            );
            assert_eq!(with_table.terms[0][0].ledger, 10.0, "policy {index}");
        }
        drop(generation);
        store.confirm("p", seq);
    }

    #[test]
    fn with_two_collectors_an_op_is_pending_until_both_confirm() {
        let store = Store::new(2);
        let seq = store.apply_local(PendingOp::Reserve(entry("p")));
        store.confirm("p", seq);
        assert_eq!(store.pending_len(), 1, "one collector still has to take it");
        // A failover to the collector that has not: its full snapshot lacks the pod.
        store.apply(&Delta { reset: true, ..Delta::default() }, UnixMillis(1));
        assert!(store.read().ledger().get("p").is_some());
        store.confirm("p", seq);
        assert_eq!(store.pending_len(), 0);
    }

    #[test]
    fn a_delta_cannot_resurrect_a_pod_we_unreserved() {
        let store = Store::default();
        let old = entry("old");
        store.apply(
            &Delta { reset: true, placed: vec![old.clone()], ..Default::default() },
            UnixMillis(1),
        );
        store.apply_local(PendingOp::Unreserve { uid: "old".into() });
        // the collector has not seen the Unreserve yet and re-sends the entry
        store.apply(&Delta { placed: vec![old], ..Default::default() }, UnixMillis(2));
        assert!(store.read().ledger().get("old").is_none());
    }

    #[test]
    fn confirming_an_older_op_keeps_the_newer_one_pending() {
        let store = Store::default();
        let reserve = store.apply_local(PendingOp::Reserve(entry("p")));
        let unreserve = store.apply_local(PendingOp::Unreserve { uid: "p".into() });
        store.confirm("p", reserve);
        assert_eq!(store.pending_len(), 1);
        store.confirm("p", unreserve);
        assert_eq!(store.pending_len(), 0);
    }

    #[test]
    fn deltas_upsert_and_remove() {
        let store = Store::default();
        store.apply(
            &Delta { reset: true, nodes: vec![node("a")], ..Default::default() },
            UnixMillis(1),
        );
        store.apply(
            &Delta {
                nodes: vec![node("b")],
                removed_nodes: vec!["a".into()],
                placed: vec![entry("p")],
                ..Default::default()
            },
            UnixMillis(2),
        );
        assert!(store.read().node("a").is_none());
        assert!(store.read().node("b").is_some());
        store.apply(&Delta { released: vec!["p".into()], ..Default::default() }, UnixMillis(3));
        assert!(store.read().ledger().is_empty());
    }
}
