//! The collector's state: every node's latest samples and capacity, the ledger, and the
//! health of each metric source — one mutex, never held across an `.await`. Every change
//! is published once as a domain [`Delta`] to the state's [`Publish`]er (in the order the
//! changes happened: publishing happens under the lock); a subscriber that lags behind the
//! channel gets a fresh full snapshot instead. This module knows no wire format: the service
//! encodes each delta, once, for all subscribers ([`crate::published`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::broadcast;
use waterline_core::learn::LearnedUsage;
use waterline_core::ledger::{GuessOutcome, LedgerWindow};
use waterline_core::shadow::{Bind, Requests};
use waterline_core::snapshot::{Capacity, Sample};
use waterline_core::{Delta, Ledger, LedgerEntry, Millis, NodeReport, UnixMillis};

use crate::published::{Deltas, Publish, Published, Unwatched};
use crate::shadow::feed::{ShadowEvent, ShadowFeed, ShadowTap};

/// What a source knows about one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeRecord {
    pub capacity: Capacity,
    pub samples: BTreeMap<String, Sample>,
}

/// Health of one metric source, for ListNodes and /metrics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricHealth {
    pub last_success: Option<UnixMillis>,
    pub last_error: String,
    pub series: i64,
    pub nodes_covered: i64,
}

/// What ListNodes shows, in the domain's terms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Listing {
    pub nodes: Vec<NodeReport>,
    /// Each entry with how long it still counts toward each metric.
    pub ledger: Vec<(LedgerEntry, Vec<(String, Millis)>)>,
    pub metrics: BTreeMap<String, MetricHealth>,
    /// The learned usage per workload.
    pub learned: Arc<LearnedUsage>,
}

#[derive(Default)]
struct Inner {
    nodes: BTreeMap<String, NodeRecord>,
    ledger: Ledger,
    metrics: BTreeMap<String, MetricHealth>,
    /// Shadow mode's judge, when on: every change in order, plus the pod watch's binds.
    shadow: Option<ShadowTap>,
    guesses: GuessTally,
    /// The workloads' learned usage, which prices the placements this collector records.
    learned: Arc<LearnedUsage>,
}

/// What became of the provisional guesses this collector held, since it started: the
/// collector is where the decision (a Reserve or the pod watch) meets the guess.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GuessTally {
    pub confirmed: u64,
    pub moved: u64,
    pub expired: u64,
}

impl GuessTally {
    fn count(&mut self, outcome: GuessOutcome, n: u64) {
        match outcome {
            GuessOutcome::Confirmed => self.confirmed += n,
            GuessOutcome::Moved => self.moved += n,
            GuessOutcome::Expired => self.expired += n,
        }
    }
}

#[derive(Clone)]
pub struct ClusterState {
    inner: Arc<Mutex<Inner>>,
    publisher: Arc<dyn Publish>,
}

/// A state nobody subscribes to (tests, benchmarks).
impl Default for ClusterState {
    fn default() -> Self {
        ClusterState::new(Arc::new(Unwatched))
    }
}

fn report(name: &str, node: &NodeRecord) -> NodeReport {
    NodeReport {
        name: name.to_owned(),
        capacity: node.capacity,
        samples: node.samples.iter().map(|(metric, s)| (metric.clone(), *s)).collect(),
    }
}

impl ClusterState {
    /// An empty state that publishes every change to `publisher`.
    pub fn new(publisher: Arc<dyn Publish>) -> Self {
        ClusterState { inner: Arc::default(), publisher }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Broadcasts a change (called under the lock, so changes go out in order), and queues
    /// it for the shadow judge when one is attached.
    fn publish(&self, inner: &mut Inner, delta: Delta) {
        if !delta.is_empty() {
            let delta = Arc::new(Delta { sent_at: UnixMillis::now(), ..delta });
            if let Some(tap) = inner.shadow.as_mut() {
                tap.send(ShadowEvent::Delta(delta.clone()));
            }
            self.publisher.publish(delta);
        }
    }

    /// Replaces the whole node set (a source that owns every node: static or synthetic).
    pub fn replace_nodes(&self, nodes: BTreeMap<String, NodeRecord>) {
        let mut delta = Delta::default();
        {
            let mut inner = self.lock();
            delta.removed_nodes =
                inner.nodes.keys().filter(|n| !nodes.contains_key(*n)).cloned().collect();
            for (name, node) in &nodes {
                if inner.nodes.get(name) != Some(node) {
                    delta.nodes.push(report(name, node));
                }
            }
            inner.nodes = nodes;
            // Publish under the lock so deltas reach the channel in the order they happened.
            self.publish(&mut inner, delta);
        }
    }

    /// Merges one metric's samples for many nodes (a cluster-wide query's answer).
    pub fn update_metric(&self, metric: &str, samples: &BTreeMap<String, Sample>) {
        let mut inner = self.lock();
        let mut delta = Delta::default();
        for (name, sample) in samples {
            // Look up before inserting: every refresh touches every node, and `entry` would
            // allocate a key (and the metric name) per node only to drop it again.
            let node = match inner.nodes.get_mut(name) {
                Some(node) => node,
                None => inner.nodes.entry(name.clone()).or_default(),
            };
            match node.samples.get_mut(metric) {
                Some(stored) if stored == sample => continue,
                Some(stored) => *stored = *sample,
                None => {
                    node.samples.insert(metric.to_owned(), *sample);
                }
            }
            delta.nodes.push(report(name, node));
        }
        self.publish(&mut inner, delta);
    }

    /// Sets node capacities (from Kubernetes or Prometheus).
    pub fn update_capacity(&self, capacities: &BTreeMap<String, Capacity>) {
        let mut inner = self.lock();
        let mut delta = Delta::default();
        for (name, capacity) in capacities {
            let node = inner.nodes.entry(name.clone()).or_default();
            if node.capacity != *capacity {
                node.capacity = *capacity;
                delta.nodes.push(report(name, node));
            }
        }
        self.publish(&mut inner, delta);
    }

    /// Forgets a node (deleted from the cluster). Its ledger entries stay until their pods
    /// are deleted too, so a node that comes back under the same name loses nothing.
    pub fn remove_node(&self, name: &str) {
        let mut inner = self.lock();
        if inner.nodes.remove(name).is_some() {
            self.publish(
                &mut inner,
                Delta { removed_nodes: vec![name.to_owned()], ..Delta::default() },
            );
        }
    }

    pub fn set_metric_health(&self, metric: &str, health: MetricHealth) {
        self.lock().metrics.insert(metric.to_owned(), health);
    }

    pub fn metric_health(&self) -> BTreeMap<String, MetricHealth> {
        self.lock().metrics.clone()
    }

    /// The learned usage that prices a placement recorded now.
    pub fn learned(&self) -> Arc<LearnedUsage> {
        Arc::clone(&self.lock().learned)
    }

    /// Replaces the learned table (the learner's refresh) and publishes it whole, so every
    /// scorer prices by the same table; `false` (nothing sent) when it did not change.
    pub fn set_learned(&self, learned: LearnedUsage) -> bool {
        let mut inner = self.lock();
        if *inner.learned == learned {
            return false;
        }
        let learned = Arc::new(learned);
        inner.learned = Arc::clone(&learned);
        self.publish(&mut inner, Delta { learned: Some(learned), ..Delta::default() });
        true
    }

    /// Records a placement; broadcasts it when anything changed.
    pub fn place(&self, entry: LedgerEntry) {
        let mut inner = self.lock();
        self.place_locked(&mut inner, entry);
    }

    fn place_locked(&self, inner: &mut Inner, entry: LedgerEntry) {
        if let Some(outcome) = inner.ledger.guess_outcome(&entry) {
            inner.guesses.count(outcome, 1);
        }
        if let Some(stored) = inner.ledger.apply(entry) {
            self.publish(inner, Delta { placed: vec![stored], ..Delta::default() });
        }
    }

    /// The pod watch's placement of a bound pod with its requests. With shadow mode on,
    /// `judge` (a bind another scheduler made) is queued for the judge *before* the
    /// placement and the requests, so it is judged on the state as it was just before the
    /// bind; then the placement enters the ledger as any other.
    pub fn place_bound(&self, entry: LedgerEntry, requests: Requests, judge: Option<Bind>) {
        let mut inner = self.lock();
        if let Some(tap) = inner.shadow.as_mut() {
            if let Some(bind) = judge {
                tap.send(ShadowEvent::Judge(Box::new(bind)));
            }
            tap.bind(&entry.uid, &entry.node, requests);
        }
        self.place_locked(&mut inner, entry);
    }

    /// Forgets a placement (an Unreserve); a no-op for an unknown pod, and for a departed
    /// one: an Unreserve takes back a reservation, never a departure's credit.
    pub fn release(&self, uid: &str) {
        let mut inner = self.lock();
        if inner.ledger.get(uid).is_some_and(|e| e.source.is_departure()) {
            return;
        }
        if inner.ledger.delete(uid).is_some() {
            self.publish(&mut inner, Delta { released: vec![uid.to_owned()], ..Delta::default() });
        }
    }

    /// A provisional Reserve that arrived after its expiry: not placed, but its release is
    /// streamed when the ledger holds nothing for the pod, because the scorer that forwarded
    /// it applied it locally and only a release from here removes it there (without one,
    /// every late guess stayed in that scorer's ledger for good; found by the soak).
    pub fn drop_expired_guess(&self, uid: &str) {
        let mut inner = self.lock();
        if inner.ledger.get(uid).is_none() {
            inner.guesses.count(GuessOutcome::Expired, 1);
            self.publish(&mut inner, Delta { released: vec![uid.to_owned()], ..Delta::default() });
        }
    }

    /// The pod watch's release of a pod that no longer holds a node (deleted, evicted or
    /// finished at `departed_at`): its requests leave the node too. A pod the watch had seen
    /// bound departs (docs/design.md#departures): its entry becomes a departure, streamed
    /// like any placement, so every scorer's prediction drops at once. A pod only reserved
    /// or guessed, never seen bound, never ran there: its entry is released.
    pub fn release_bound(&self, uid: &str, departed_at: UnixMillis) {
        let mut inner = self.lock();
        if let Some(tap) = inner.shadow.as_mut() {
            tap.unbind(uid);
        }
        if let Some(departure) = inner.ledger.depart(uid, departed_at) {
            self.publish(&mut inner, Delta { placed: vec![departure], ..Delta::default() });
        } else if inner.ledger.get(uid).is_some_and(|e| !e.source.is_departure()) {
            inner.ledger.delete(uid);
            self.publish(&mut inner, Delta { released: vec![uid.to_owned()], ..Delta::default() });
        }
    }

    /// The pod watch's departure of a bound pod (`departure`: its entry as a
    /// `LedgerSource::Departure`), whatever the ledger held for it: a watched entry, a
    /// Reserve, or nothing (a pod this collector never saw arrive gets the full credit).
    pub fn depart_bound(&self, departure: LedgerEntry) {
        let mut inner = self.lock();
        if let Some(tap) = inner.shadow.as_mut() {
            tap.unbind(&departure.uid);
        }
        self.place_locked(&mut inner, departure);
    }

    /// Drops the departures that left `horizon` (the policy's longest absorb window) or
    /// longer before `now`: no metric counts them any more.
    pub fn prune_departed(&self, now: UnixMillis, horizon: Millis) -> usize {
        let mut inner = self.lock();
        let released: Vec<String> =
            inner.ledger.prune_departed(now, horizon).into_iter().map(|e| e.uid).collect();
        let count = released.len();
        self.publish(&mut inner, Delta { released, ..Delta::default() });
        count
    }

    /// A fresh list of placed pods replaces the watched view of the ledger; `bound` (uid,
    /// node, requests of each listed pod) replaces the shadow judge's bound requests, which
    /// resyncs from a full snapshot.
    pub fn reset_ledger(
        &self,
        live: Vec<LedgerEntry>,
        bound: Vec<(String, String, Requests)>,
        now: UnixMillis,
        reserve_grace: Millis,
    ) {
        let mut inner = self.lock();
        if let Some(tap) = inner.shadow.as_mut() {
            tap.reset_bound(bound);
        }
        let released = inner.ledger.reset(live.clone(), now, reserve_grace);
        let placed = live.iter().filter_map(|e| inner.ledger.get(&e.uid)).cloned().collect();
        self.publish(&mut inner, Delta { placed, released, ..Delta::default() });
    }

    /// Attaches the shadow judge: every later change is queued for it (up to `queue`
    /// events; past that it is dropped — binds counted in `dropped_binds` — and the judge
    /// resyncs once it has caught up). Also returns the state at this point (as
    /// [`ClusterState::shadow_resync`]), for the judge to start from. `binds`: whether bound
    /// pods' requests are queued too (the judge's; a view followed only for its snapshot
    /// does without).
    pub fn attach_shadow(
        &self,
        queue: usize,
        dropped_binds: prometheus_client::metrics::counter::Counter,
        binds: bool,
    ) -> (ShadowFeed, Delta) {
        let (tap, feed) = ShadowTap::new(queue, dropped_binds, binds);
        let mut inner = self.lock();
        inner.shadow = Some(tap);
        (feed, full_snapshot(&inner))
    }

    /// Whether the shadow judge missed changes and must resync.
    pub fn shadow_gap(&self) -> bool {
        self.lock().shadow.as_ref().is_some_and(ShadowTap::gap)
    }

    /// The full state for the shadow judge (a snapshot as WatchNodes sends one, and every
    /// bound pod's requests), taken under the lock; changes are queued again from here on.
    pub fn shadow_resync(&self) -> (Delta, Vec<(String, String, Requests)>) {
        let mut inner = self.lock();
        let full = full_snapshot(&inner);
        let bound = inner.shadow.as_mut().map(ShadowTap::resume).unwrap_or_default();
        (full, bound)
    }

    /// Drops Reserve entries no pod watch confirmed within `ttl`.
    pub fn prune_unconfirmed(&self, now: UnixMillis, ttl: Millis) -> usize {
        let mut inner = self.lock();
        let expired_guesses = inner.ledger.expired_guesses(now) as u64;
        inner.guesses.count(GuessOutcome::Expired, expired_guesses);
        let released = inner.ledger.prune_unconfirmed(now, ttl);
        let count = released.len();
        self.publish(&mut inner, Delta { released, ..Delta::default() });
        count
    }

    /// A full snapshot plus a receiver for every later change on `deltas` (the channel this
    /// state publishes to), taken atomically so no change falls between the two.
    pub fn subscribe<W: Clone>(
        &self,
        deltas: &Deltas<W>,
    ) -> (Delta, broadcast::Receiver<Arc<Published<W>>>) {
        let inner = self.lock();
        let receiver = deltas.receiver();
        (full_snapshot(&inner), receiver)
    }

    /// Nodes (optionally only `names`), the ledger and metric health, for ListNodes.
    /// `absorb_windows`: each metric's ledger window (`MetricSpec::ledger_window`).
    pub fn list(
        &self,
        names: &[String],
        now: UnixMillis,
        absorb_windows: &[(String, LedgerWindow)],
    ) -> Listing {
        let inner = self.lock();
        let wanted = |n: &str| names.is_empty() || names.iter().any(|w| w == n);
        let mut ledger: Vec<&LedgerEntry> =
            inner.ledger.iter().filter(|e| wanted(&e.node)).collect();
        ledger.sort_by(|a, b| (a.placed_at, &a.uid).cmp(&(b.placed_at, &b.uid)));
        Listing {
            nodes: inner
                .nodes
                .iter()
                .filter(|(n, _)| wanted(n))
                .map(|(n, node)| report(n, node))
                .collect(),
            ledger: ledger
                .into_iter()
                .map(|e| {
                    let remaining = absorb_windows
                        .iter()
                        .map(|(metric, window)| (metric.clone(), e.absorb_remaining(now, *window)))
                        .collect();
                    (e.clone(), remaining)
                })
                .collect(),
            metrics: inner.metrics.clone(),
            learned: Arc::clone(&inner.learned),
        }
    }

    /// The whole state as one reset delta (nodes and ledger), taken under the lock: what a
    /// reader that keeps no snapshot of its own applies to an empty one.
    pub fn full_delta(&self) -> Delta {
        full_snapshot(&self.lock())
    }

    /// Every node's capacity (zero where no source gave one yet).
    pub fn capacities(&self) -> BTreeMap<String, Capacity> {
        self.lock().nodes.iter().map(|(name, node)| (name.clone(), node.capacity)).collect()
    }

    pub fn node_count(&self) -> usize {
        self.lock().nodes.len()
    }

    pub fn ledger_len(&self) -> usize {
        self.lock().ledger.len()
    }

    pub fn guesses(&self) -> GuessTally {
        self.lock().guesses
    }

    pub fn subscribers(&self) -> usize {
        self.publisher.subscribers()
    }
}

fn full_snapshot(inner: &Inner) -> Delta {
    Delta {
        reset: true,
        nodes: inner.nodes.iter().map(|(n, node)| report(n, node)).collect(),
        removed_nodes: Vec::new(),
        placed: inner.ledger.iter().cloned().collect(),
        released: Vec::new(),
        learned: Some(Arc::clone(&inner.learned)),
        sent_at: UnixMillis::now(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::published::EVENT_BUFFER;
    use waterline_core::LedgerSource;
    use waterline_core::estimate::Usage;

    /// A state and the channel it publishes to, in the encoding `W`.
    fn watched<W: Clone + Send + Sync + 'static>() -> (ClusterState, Deltas<W>) {
        let deltas = Deltas::default();
        (ClusterState::new(Arc::new(deltas.clone())), deltas)
    }

    fn record(value: f64) -> NodeRecord {
        NodeRecord {
            capacity: Capacity { cpu_millis: 8000, memory_bytes: 1 << 30 },
            samples: [("cpu".to_string(), Sample { value, at: UnixMillis(1) })].into(),
        }
    }

    fn entry(uid: &str) -> LedgerEntry {
        LedgerEntry {
            uid: uid.into(),
            namespace: "ns".into(),
            name: uid.into(),
            node: "a".into(),
            placed_at: UnixMillis(5),
            usage: Usage::default(),
            source: LedgerSource::Reserve,
            labels: Default::default(),
        }
    }

    #[test]
    fn subscribers_get_a_full_snapshot_then_only_changes() {
        let (state, deltas) = watched::<()>();
        state.replace_nodes([("a".into(), record(10.0)), ("b".into(), record(20.0))].into());
        let (full, mut rx) = state.subscribe(&deltas);
        assert!(full.reset);
        assert_eq!(full.nodes.len(), 2);

        // same data again: nothing to say
        state.replace_nodes([("a".into(), record(10.0)), ("b".into(), record(20.0))].into());
        // b changes, a disappears
        state.replace_nodes([("b".into(), record(30.0))].into());
        let published = rx.try_recv().unwrap();
        let delta = &published.delta;
        assert!(!delta.reset);
        assert_eq!(delta.removed_nodes, vec!["a".to_string()]);
        assert_eq!(delta.nodes.len(), 1);
        assert_eq!(delta.nodes[0].samples[0].1.value, 30.0);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn place_and_release_are_idempotent_and_broadcast_once() {
        let (state, deltas) = watched::<()>();
        let (_, mut rx) = state.subscribe(&deltas);
        state.place(entry("p1"));
        state.place(entry("p1"));
        state.release("p1");
        state.release("p1");
        state.release("unknown");
        assert_eq!(rx.try_recv().unwrap().delta.placed.len(), 1);
        assert_eq!(rx.try_recv().unwrap().delta.released, vec!["p1".to_string()]);
        assert!(rx.try_recv().is_err());
        assert_eq!(state.ledger_len(), 0);
    }

    #[test]
    fn an_expired_guess_is_released_to_subscribers_unless_the_ledger_holds_the_pod() {
        let (state, deltas) = watched::<()>();
        let (_, mut rx) = state.subscribe(&deltas);
        state.drop_expired_guess("late");
        assert_eq!(rx.try_recv().unwrap().delta.released, vec!["late".to_string()]);
        // A pod the ledger holds (a Reserve, more trusted than a guess) keeps its entry.
        state.place(entry("p1"));
        let _ = rx.try_recv();
        state.drop_expired_guess("p1");
        assert!(rx.try_recv().is_err());
        assert_eq!(state.ledger_len(), 1);
        // Only the guess nothing decided counts as expired.
        assert_eq!(state.guesses(), GuessTally { expired: 1, ..GuessTally::default() });
    }

    #[test]
    fn guesses_are_tallied_where_the_decision_meets_them() {
        let guess = |uid: &str, node: &str| LedgerEntry {
            node: node.into(),
            source: LedgerSource::Provisional { expires_at: UnixMillis(10_000) },
            ..entry(uid)
        };
        let state = ClusterState::default();
        for uid in ["kept", "moved", "dropped"] {
            state.place(guess(uid, "n1"));
        }
        // The watch on the guessed node, a Reserve on another; the third guess expires.
        state.place(LedgerEntry {
            node: "n1".into(),
            source: LedgerSource::Watch,
            ..entry("kept")
        });
        state.place(LedgerEntry { node: "n2".into(), ..entry("moved") });
        assert_eq!(state.prune_unconfirmed(UnixMillis(10_000), Millis::from_mins(15)), 1);
        assert_eq!(state.guesses(), GuessTally { confirmed: 1, moved: 1, expired: 1 });
    }

    #[test]
    fn a_delta_is_encoded_once_for_every_subscriber() {
        let (state, deltas) = watched::<usize>();
        let (_, mut a) = state.subscribe(&deltas);
        let (_, mut b) = state.subscribe(&deltas);
        state.place(entry("p1"));
        let encodings = std::sync::atomic::AtomicUsize::new(0);
        let encode = |d: &Delta| {
            encodings.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            d.placed.len()
        };
        assert_eq!(a.try_recv().unwrap().encoded(encode), 1);
        assert_eq!(b.try_recv().unwrap().encoded(encode), 1);
        assert_eq!(encodings.into_inner(), 1);
    }

    #[test]
    fn a_lagging_subscriber_is_told_so_instead_of_blocking_others() {
        let (state, deltas) = watched::<()>();
        let (_, mut slow) = state.subscribe(&deltas);
        for i in 0..(EVENT_BUFFER + 10) {
            state.place(entry(&format!("p{i}")));
        }
        assert!(matches!(slow.try_recv(), Err(broadcast::error::TryRecvError::Lagged(_))));
    }

    #[test]
    fn a_changed_learned_table_is_published_whole_and_in_every_full_snapshot() {
        use waterline_core::learn::{Learned, WorkloadUsage};
        use waterline_core::workload::WorkloadKey;
        let table = |ratio| -> LearnedUsage {
            let cpu = Learned { ratio: Some(ratio), usage: 0.0, spread: 0.0, pods: 2, samples: 9 };
            let key = WorkloadKey::new("shop", "Deployment", "web");
            [(key, WorkloadUsage { cpu: Some(cpu), memory: None })].into_iter().collect()
        };
        let (state, deltas) = watched::<()>();
        let (full, mut rx) = state.subscribe(&deltas);
        assert_eq!(full.learned, Some(Arc::default()), "a full snapshot always carries it");
        assert!(state.set_learned(table(2.0)));
        assert!(!state.set_learned(table(2.0)), "the same table again: nothing to send");
        assert!(state.set_learned(table(2.5)));
        let first = rx.try_recv().unwrap();
        assert_eq!(first.delta.learned.as_deref(), Some(&table(2.0)));
        assert_eq!(rx.try_recv().unwrap().delta.learned.as_deref(), Some(&table(2.5)));
        assert!(rx.try_recv().is_err());
        assert_eq!(*state.learned(), table(2.5));
        assert_eq!(state.full_delta().learned.as_deref(), Some(&table(2.5)));
        assert_eq!(*state.list(&[], UnixMillis(0), &[]).learned, table(2.5));
    }

    #[test]
    fn remove_node_broadcasts_once_and_keeps_the_ledger() {
        let (state, deltas) = watched::<()>();
        state.replace_nodes([("a".into(), record(10.0)), ("b".into(), record(20.0))].into());
        state.place(entry("p1"));
        let (_, mut rx) = state.subscribe(&deltas);
        state.remove_node("a");
        state.remove_node("a");
        state.remove_node("unknown");
        assert_eq!(rx.try_recv().unwrap().delta.removed_nodes, vec!["a".to_string()]);
        assert!(rx.try_recv().is_err());
        assert_eq!(state.node_count(), 1);
        assert_eq!(state.ledger_len(), 1);
    }

    #[test]
    fn list_filters_nodes_and_reports_absorb_time() {
        let state = ClusterState::default();
        state.replace_nodes([("a".into(), record(10.0)), ("b".into(), record(20.0))].into());
        state.place(entry("p1"));
        let windows = [
            ("short".to_string(), Millis::from_mins(7).into()),
            ("long".into(), Millis::from_mins(12).into()),
        ];
        let listed = state.list(&["a".into()], UnixMillis(60_005), &windows);
        assert_eq!(listed.nodes.len(), 1);
        assert_eq!(listed.ledger.len(), 1);
        // Placed at 5 ms, listed a minute later: 6 m left of 7 m, 11 m of 12 m.
        let (entry, remaining) = &listed.ledger[0];
        assert_eq!(entry.uid, "p1");
        let by_metric = [("short".to_string(), Millis(360_000)), ("long".into(), Millis(660_000))];
        assert_eq!(remaining, &by_metric);
        assert_eq!(state.list(&["b".into()], UnixMillis(0), &windows).ledger.len(), 0);
    }
}
