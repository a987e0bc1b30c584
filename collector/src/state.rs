//! The collector's state: every node's latest samples and capacity, the ledger, and the
//! health of each metric source — one mutex, never held across an `.await`. Every change
//! is published once as a ready-made `WatchNodesResponse` delta on a broadcast channel;
//! a subscriber that lags behind the channel gets a fresh full snapshot instead.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::broadcast;
use waterline_api::v1 as pb;
use waterline_core::snapshot::{Capacity, Sample};
use waterline_core::{Ledger, LedgerEntry, Millis, UnixMillis};
use waterline_runtime::convert::{capacity_to_proto, duration, entry_to_proto, timestamp};

/// Deltas buffered per subscriber before it counts as lagging.
const EVENT_BUFFER: usize = 1024;

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

#[derive(Default)]
struct Inner {
    nodes: BTreeMap<String, NodeRecord>,
    ledger: Ledger,
    metrics: BTreeMap<String, MetricHealth>,
}

#[derive(Clone)]
pub struct ClusterState {
    inner: Arc<Mutex<Inner>>,
    events: broadcast::Sender<Arc<pb::WatchNodesResponse>>,
}

impl Default for ClusterState {
    fn default() -> Self {
        ClusterState { inner: Arc::default(), events: broadcast::channel(EVENT_BUFFER).0 }
    }
}

fn node_to_proto(name: &str, node: &NodeRecord) -> pb::NodeState {
    pb::NodeState {
        name: name.to_owned(),
        capacity: Some(capacity_to_proto(node.capacity)),
        metrics: node
            .samples
            .iter()
            .map(|(metric, s)| pb::MetricSample {
                metric: metric.clone(),
                value_percent: s.value,
                sampled_at: Some(timestamp(s.at)),
            })
            .collect(),
    }
}

impl ClusterState {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, delta: pb::WatchNodesResponse) {
        let empty = delta.nodes.is_empty()
            && delta.removed_nodes.is_empty()
            && delta.placed.is_empty()
            && delta.released_pod_uids.is_empty();
        if !empty {
            // No receivers is fine: scorers subscribe whenever they like.
            let _ = self.events.send(Arc::new(pb::WatchNodesResponse {
                sent_at: Some(timestamp(UnixMillis::now())),
                ..delta
            }));
        }
    }

    /// Replaces the whole node set (a source that owns every node: static or synthetic).
    pub fn replace_nodes(&self, nodes: BTreeMap<String, NodeRecord>) {
        let mut delta = pb::WatchNodesResponse::default();
        {
            let mut inner = self.lock();
            delta.removed_nodes =
                inner.nodes.keys().filter(|n| !nodes.contains_key(*n)).cloned().collect();
            for (name, node) in &nodes {
                if inner.nodes.get(name) != Some(node) {
                    delta.nodes.push(node_to_proto(name, node));
                }
            }
            inner.nodes = nodes;
            // Publish under the lock so deltas reach the channel in the order they happened.
            self.publish(delta);
        }
    }

    /// Merges one metric's samples for many nodes (a cluster-wide query's answer).
    pub fn update_metric(&self, metric: &str, samples: &BTreeMap<String, Sample>) {
        let mut inner = self.lock();
        let mut delta = pb::WatchNodesResponse::default();
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
            delta.nodes.push(node_to_proto(name, node));
        }
        self.publish(delta);
    }

    /// Sets node capacities (from Kubernetes or Prometheus).
    pub fn update_capacity(&self, capacities: &BTreeMap<String, Capacity>) {
        let mut inner = self.lock();
        let mut delta = pb::WatchNodesResponse::default();
        for (name, capacity) in capacities {
            let node = inner.nodes.entry(name.clone()).or_default();
            if node.capacity != *capacity {
                node.capacity = *capacity;
                delta.nodes.push(node_to_proto(name, node));
            }
        }
        self.publish(delta);
    }

    /// Forgets a node (deleted from the cluster). Its ledger entries stay until their pods
    /// are deleted too, so a node that comes back under the same name loses nothing.
    pub fn remove_node(&self, name: &str) {
        let mut inner = self.lock();
        if inner.nodes.remove(name).is_some() {
            self.publish(pb::WatchNodesResponse {
                removed_nodes: vec![name.to_owned()],
                ..Default::default()
            });
        }
    }

    pub fn set_metric_health(&self, metric: &str, health: MetricHealth) {
        self.lock().metrics.insert(metric.to_owned(), health);
    }

    pub fn metric_health(&self) -> BTreeMap<String, MetricHealth> {
        self.lock().metrics.clone()
    }

    /// Records a placement; broadcasts it when anything changed.
    pub fn place(&self, entry: LedgerEntry) {
        let mut inner = self.lock();
        if let Some(stored) = inner.ledger.apply(entry) {
            self.publish(pb::WatchNodesResponse {
                placed: vec![entry_to_proto(&stored, None)],
                ..Default::default()
            });
        }
    }

    /// Forgets a placement; a no-op for an unknown pod.
    pub fn release(&self, uid: &str) {
        let mut inner = self.lock();
        if inner.ledger.delete(uid).is_some() {
            self.publish(pb::WatchNodesResponse {
                released_pod_uids: vec![uid.to_owned()],
                ..Default::default()
            });
        }
    }

    /// A fresh list of placed pods replaces the watched view of the ledger.
    pub fn reset_ledger(&self, live: Vec<LedgerEntry>, now: UnixMillis, reserve_grace: Millis) {
        let mut inner = self.lock();
        let removed = inner.ledger.reset(live.clone(), now, reserve_grace);
        let placed = live
            .iter()
            .filter_map(|e| inner.ledger.get(&e.uid))
            .map(|e| entry_to_proto(e, None))
            .collect();
        self.publish(pb::WatchNodesResponse {
            placed,
            released_pod_uids: removed,
            ..Default::default()
        });
    }

    /// Drops Reserve entries no pod watch confirmed within `ttl`.
    pub fn prune_unconfirmed(&self, now: UnixMillis, ttl: Millis) -> usize {
        let mut inner = self.lock();
        let removed = inner.ledger.prune_unconfirmed(now, ttl);
        let count = removed.len();
        self.publish(pb::WatchNodesResponse { released_pod_uids: removed, ..Default::default() });
        count
    }

    /// A full snapshot plus a receiver for every later change, taken atomically so no
    /// change falls between the two.
    pub fn subscribe(
        &self,
    ) -> (pb::WatchNodesResponse, broadcast::Receiver<Arc<pb::WatchNodesResponse>>) {
        let inner = self.lock();
        let receiver = self.events.subscribe();
        (full_snapshot(&inner), receiver)
    }

    /// Nodes (optionally only `names`), the ledger and metric health, for ListNodes.
    pub fn list(
        &self,
        names: &[String],
        now: UnixMillis,
        absorb_windows: &[(String, Millis)],
    ) -> pb::ListNodesResponse {
        let inner = self.lock();
        let wanted = |n: &str| names.is_empty() || names.iter().any(|w| w == n);
        let mut ledger: Vec<&LedgerEntry> =
            inner.ledger.iter().filter(|e| wanted(&e.node)).collect();
        ledger.sort_by(|a, b| (a.placed_at, &a.uid).cmp(&(b.placed_at, &b.uid)));
        pb::ListNodesResponse {
            nodes: inner
                .nodes
                .iter()
                .filter(|(n, _)| wanted(n))
                .map(|(n, node)| node_to_proto(n, node))
                .collect(),
            ledger: ledger
                .into_iter()
                .map(|e| {
                    let by_metric: BTreeMap<String, Millis> = absorb_windows
                        .iter()
                        .map(|(metric, window)| (metric.clone(), e.absorb_remaining(now, *window)))
                        .collect();
                    let longest = by_metric.values().copied().max().unwrap_or_default();
                    let mut entry = entry_to_proto(e, Some(longest));
                    entry.absorb_remaining_by_metric =
                        by_metric.into_iter().map(|(m, d)| (m, duration(d))).collect();
                    entry
                })
                .collect(),
            metrics: inner
                .metrics
                .iter()
                .map(|(metric, h)| pb::MetricStatus {
                    metric: metric.clone(),
                    last_success: h.last_success.map(timestamp),
                    last_error: h.last_error.clone(),
                    series: h.series,
                    nodes_covered: h.nodes_covered,
                })
                .collect(),
        }
    }

    pub fn node_count(&self) -> usize {
        self.lock().nodes.len()
    }

    pub fn ledger_len(&self) -> usize {
        self.lock().ledger.len()
    }

    pub fn subscribers(&self) -> usize {
        self.events.receiver_count()
    }
}

fn full_snapshot(inner: &Inner) -> pb::WatchNodesResponse {
    pb::WatchNodesResponse {
        reset: true,
        nodes: inner.nodes.iter().map(|(n, node)| node_to_proto(n, node)).collect(),
        removed_nodes: Vec::new(),
        placed: inner.ledger.iter().map(|e| entry_to_proto(e, None)).collect(),
        released_pod_uids: Vec::new(),
        sent_at: Some(timestamp(UnixMillis::now())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use waterline_core::LedgerSource;
    use waterline_core::estimate::Usage;

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
        let state = ClusterState::default();
        state.replace_nodes([("a".into(), record(10.0)), ("b".into(), record(20.0))].into());
        let (full, mut rx) = state.subscribe();
        assert!(full.reset);
        assert_eq!(full.nodes.len(), 2);

        // same data again: nothing to say
        state.replace_nodes([("a".into(), record(10.0)), ("b".into(), record(20.0))].into());
        // b changes, a disappears
        state.replace_nodes([("b".into(), record(30.0))].into());
        let delta = rx.try_recv().unwrap();
        assert!(!delta.reset);
        assert_eq!(delta.removed_nodes, vec!["a".to_string()]);
        assert_eq!(delta.nodes.len(), 1);
        assert_eq!(delta.nodes[0].metrics[0].value_percent, 30.0);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn place_and_release_are_idempotent_and_broadcast_once() {
        let state = ClusterState::default();
        let (_, mut rx) = state.subscribe();
        state.place(entry("p1"));
        state.place(entry("p1"));
        state.release("p1");
        state.release("p1");
        state.release("unknown");
        assert_eq!(rx.try_recv().unwrap().placed.len(), 1);
        assert_eq!(rx.try_recv().unwrap().released_pod_uids, vec!["p1".to_string()]);
        assert!(rx.try_recv().is_err());
        assert_eq!(state.ledger_len(), 0);
    }

    #[test]
    fn a_lagging_subscriber_is_told_so_instead_of_blocking_others() {
        let state = ClusterState::default();
        let (_, mut slow) = state.subscribe();
        for i in 0..(EVENT_BUFFER + 10) {
            state.place(entry(&format!("p{i}")));
        }
        assert!(matches!(slow.try_recv(), Err(broadcast::error::TryRecvError::Lagged(_))));
    }

    #[test]
    fn remove_node_broadcasts_once_and_keeps_the_ledger() {
        let state = ClusterState::default();
        state.replace_nodes([("a".into(), record(10.0)), ("b".into(), record(20.0))].into());
        state.place(entry("p1"));
        let (_, mut rx) = state.subscribe();
        state.remove_node("a");
        state.remove_node("a");
        state.remove_node("unknown");
        assert_eq!(rx.try_recv().unwrap().removed_nodes, vec!["a".to_string()]);
        assert!(rx.try_recv().is_err());
        assert_eq!(state.node_count(), 1);
        assert_eq!(state.ledger_len(), 1);
    }

    #[test]
    fn list_filters_nodes_and_reports_absorb_time() {
        let state = ClusterState::default();
        state.replace_nodes([("a".into(), record(10.0)), ("b".into(), record(20.0))].into());
        state.place(entry("p1"));
        let windows =
            [("short".to_string(), Millis::from_mins(7)), ("long".into(), Millis::from_mins(12))];
        let listed = state.list(&["a".into()], UnixMillis(60_005), &windows);
        assert_eq!(listed.nodes.len(), 1);
        assert_eq!(listed.ledger.len(), 1);
        // Placed at 5 ms, listed a minute later: 6 m left of 7 m, 11 m of 12 m; the entry
        // counts for the longest.
        let entry = &listed.ledger[0];
        assert_eq!(entry.absorb_remaining.unwrap().seconds, 660);
        assert_eq!(entry.absorb_remaining_by_metric["short"].seconds, 360);
        assert_eq!(entry.absorb_remaining_by_metric["long"].seconds, 660);
        assert_eq!(state.list(&["b".into()], UnixMillis(0), &windows).ledger.len(), 0);
    }
}
