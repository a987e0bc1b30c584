//! Forwards this replica's Reserves and Unreserves to every collector, retrying until each
//! accepts it, so every other scorer learns of them. The RPC itself has already been
//! answered: the local store applied the change at once.
//!
//! Every collector gets every op, not only the one this replica streams from: collectors
//! are active-active replicas, each with its own pod watch, and the watch only shows a pod
//! once it is bound — seconds after the Reserve, which is exactly when a burst is decided.
//! A collector that learned the Reserves only through its watch would, after a failover,
//! stream a ledger without the binds still under way. Each collector has its own lanes, so a
//! dead one delays nobody; an op that a collector has not taken within [`GIVE_UP`] (its
//! unconfirmed-Reserve TTL would have pruned it by then) is given up and counted.
//!
//! Up to [`LANES`] calls are in flight at once. A pod's operations always take the same lane
//! (a hash of its uid) and a lane sends one call at a time, so each pod's Reserve and
//! Unreserve reach the collector in the order this replica took them, while different pods
//! do not wait for each other. A single lane (one call per round trip) left 50,000 Reserves
//! queued for minutes, holding their pods and entries in memory (docs/benchmarks-history.md §4).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::mpsc;
use tonic::transport::Channel;
use tracing::Instrument;
use waterline_api::v1 as pb;
use waterline_api::v1::collector_service_client::CollectorServiceClient;
use waterline_convert::{duration, timestamp};
use waterline_core::{Millis, UnixMillis};

use crate::store::Store;
use crate::sync::{BACKOFF, Collector};

/// Placements waiting for the collector, over all lanes, before new ones are dropped (and
/// counted).
pub const QUEUE_LEN: usize = 65_536;
/// Calls in flight at once (all on the one HTTP/2 connection to the collector).
pub const LANES: usize = 16;
const RPC_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one op is retried against one collector (the default `ledger.reserveTtl`).
pub const GIVE_UP: Duration = Duration::from_secs(15 * 60);

#[derive(Clone, Default)]
pub struct ForwardMetrics {
    pub queued: Gauge,
    pub dropped: Counter,
    pub retries: Counter,
    /// Ops a collector did not take within [`GIVE_UP`].
    pub expired: Counter,
}

impl ForwardMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let f = ForwardMetrics::default();
        registry.register(
            "waterline_forward_queued",
            "Reserves/Unreserves waiting for the collector",
            f.queued.clone(),
        );
        registry.register(
            "waterline_forward_dropped",
            "Reserves/Unreserves dropped because the queue was full",
            f.dropped.clone(),
        );
        registry.register(
            "waterline_forward_retries",
            "Failed attempts to forward to the collector",
            f.retries.clone(),
        );
        registry.register(
            "waterline_forward_expired",
            "Reserves/Unreserves a collector did not take within 15 minutes, given up",
            f.expired.clone(),
        );
        f
    }
}

/// What to tell the collector about `pod`.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `provisional_ttl` set: a provisional Reserve, which the collector expires at
    /// `placed_at + provisional_ttl` unless confirmed.
    Reserve {
        node: String,
        placed_at: UnixMillis,
        provisional_ttl: Option<Millis>,
    },
    Unreserve,
}

/// One queued call: the pod as the scheduler sent it (the collector estimates its own
/// usage from it) and the store's sequence number of the op, to confirm it by.
#[derive(Clone, Debug, PartialEq)]
pub struct Forward {
    pub seq: u64,
    pub call: Call,
    pub pod: pb::PodInfo,
}

/// The lane of a pod: the same uid always gets the same lane.
pub fn lane_of(uid: &str, lanes: usize) -> usize {
    let mut hasher = DefaultHasher::new();
    uid.hash(&mut hasher);
    (hasher.finish() % lanes.max(1) as u64) as usize
}

#[derive(Clone)]
pub struct Forwarder {
    /// Per collector, its lanes.
    collectors: Vec<Vec<mpsc::Sender<Forward>>>,
    metrics: ForwardMetrics,
}

impl Forwarder {
    /// Forwards to every one of `collectors` (the store must expect as many
    /// confirmations: `Store::new(collectors.len())`).
    pub fn spawn(collectors: Vec<Collector>, store: Arc<Store>, metrics: ForwardMetrics) -> Self {
        Self::spawn_lanes(LANES, QUEUE_LEN, GIVE_UP, collectors, store, metrics)
    }

    fn spawn_lanes(
        lanes: usize,
        queue_len: usize,
        give_up: Duration,
        collectors: Vec<Collector>,
        store: Arc<Store>,
        metrics: ForwardMetrics,
    ) -> Self {
        let collectors = collectors
            .into_iter()
            .map(|collector| {
                (0..lanes.max(1))
                    .map(|lane| {
                        let (tx, rx) = mpsc::channel((queue_len / lanes.max(1)).max(1));
                        let client = CollectorServiceClient::new(collector.channel.clone());
                        let span = tracing::info_span!("forward", collector = %collector.url, lane);
                        let lane = Lane { client, give_up, metrics: metrics.clone() };
                        tokio::spawn(lane.run(store.clone(), rx).instrument(span));
                        tx
                    })
                    .collect()
            })
            .collect();
        Forwarder { collectors, metrics }
    }

    /// Queues `forward` on its pod's lane of every collector; never waits. A full lane drops
    /// it for that collector (the local store still has it, and counts that collector's
    /// confirmation as given, so the op does not stay pending forever).
    pub fn send(&self, forward: Forward, store: &Store) {
        for lanes in &self.collectors {
            let lane = &lanes[lane_of(&forward.pod.uid, lanes.len())];
            match lane.try_send(forward.clone()) {
                Ok(()) => {
                    self.metrics.queued.inc();
                }
                Err(_) => {
                    self.metrics.dropped.inc();
                    store.confirm(&forward.pod.uid, forward.seq);
                    tracing::warn!("forward queue full; a collector will not see this placement");
                }
            }
        }
    }
}

/// One lane to one collector: one call at a time, in order.
struct Lane {
    client: CollectorServiceClient<Channel>,
    give_up: Duration,
    metrics: ForwardMetrics,
}

impl Lane {
    async fn run(mut self, store: Arc<Store>, mut rx: mpsc::Receiver<Forward>) {
        while let Some(forward) = rx.recv().await {
            let deadline = tokio::time::Instant::now() + self.give_up;
            if tokio::time::timeout_at(deadline, deliver(&mut self.client, &forward, &self.metrics))
                .await
                .is_err()
            {
                self.metrics.expired.inc();
                tracing::warn!(pod = %forward.pod.uid, "a collector did not take a placement in time; given up");
            }
            store.confirm(&forward.pod.uid, forward.seq);
            self.metrics.queued.dec();
        }
    }
}

/// Sends one call until the collector accepts (or rejects as invalid) it.
async fn deliver(
    client: &mut CollectorServiceClient<Channel>,
    forward: &Forward,
    metrics: &ForwardMetrics,
) {
    let mut backoff = BACKOFF;
    loop {
        let call = async {
            match &forward.call {
                Call::Reserve { node, placed_at, provisional_ttl } => client
                    .reserve(pb::CollectorServiceReserveRequest {
                        pod: Some(forward.pod.clone()),
                        node_name: node.clone(),
                        placed_at: Some(timestamp(*placed_at)),
                        provisional_ttl: provisional_ttl.map(duration),
                    })
                    .await
                    .map(|_| ()),
                Call::Unreserve => client
                    .unreserve(pb::CollectorServiceUnreserveRequest {
                        pod: Some(forward.pod.clone()),
                        node_name: String::new(),
                    })
                    .await
                    .map(|_| ()),
            }
        };
        match tokio::time::timeout(RPC_TIMEOUT, call).await {
            Ok(Ok(())) => return,
            // The collector judged it invalid; retrying cannot help.
            Ok(Err(status)) if status.code() == tonic::Code::InvalidArgument => {
                tracing::warn!(error = %status, "collector rejected a forwarded placement");
                return;
            }
            Ok(Err(status)) => {
                tracing::debug!(error = %status, "forwarding to the collector failed; retrying");
            }
            Err(_) => tracing::debug!("forwarding to the collector timed out; retrying"),
        }
        metrics.retries.inc();
        backoff.wait().await;
    }
}

#[cfg(test)]
mod tests;
