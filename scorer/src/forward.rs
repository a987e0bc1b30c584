//! Forwards this replica's Reserves and Unreserves to the collector, retrying until the
//! collector accepts each one, so every other scorer learns of them. The RPC itself has
//! already been answered: the local store applied the change at once.
//!
//! Up to [`LANES`] calls are in flight at once. A pod's operations always take the same lane
//! (a hash of its uid) and a lane sends one call at a time, so each pod's Reserve and
//! Unreserve reach the collector in the order this replica took them, while different pods
//! do not wait for each other. A single lane (one call per round trip) left 50,000 Reserves
//! queued for minutes, holding their pods and entries in memory (BENCHMARKS.md §4).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::mpsc;
use tonic::transport::Channel;
use waterline_api::v1 as pb;
use waterline_api::v1::collector_service_client::CollectorServiceClient;
use waterline_convert::timestamp;
use waterline_core::UnixMillis;

use crate::store::Store;
use crate::sync::next_backoff;

/// Placements waiting for the collector, over all lanes, before new ones are dropped (and
/// counted).
pub const QUEUE_LEN: usize = 65_536;
/// Calls in flight at once (all on the one HTTP/2 connection to the collector).
pub const LANES: usize = 16;
const RPC_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone, Default)]
pub struct ForwardMetrics {
    pub queued: Gauge,
    pub dropped: Counter,
    pub retries: Counter,
}

/// What to tell the collector about `pod`.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    Reserve { node: String, placed_at: UnixMillis },
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
    lanes: Vec<mpsc::Sender<Forward>>,
    metrics: ForwardMetrics,
}

impl Forwarder {
    pub fn spawn(channel: Channel, store: Arc<Store>, metrics: ForwardMetrics) -> Self {
        Self::spawn_lanes(LANES, QUEUE_LEN, channel, store, metrics)
    }

    fn spawn_lanes(
        lanes: usize,
        queue_len: usize,
        channel: Channel,
        store: Arc<Store>,
        metrics: ForwardMetrics,
    ) -> Self {
        let senders = (0..lanes.max(1))
            .map(|_| {
                let (tx, rx) = mpsc::channel((queue_len / lanes.max(1)).max(1));
                let client = CollectorServiceClient::new(channel.clone());
                tokio::spawn(run_lane(client, store.clone(), rx, metrics.clone()));
                tx
            })
            .collect();
        Forwarder { lanes: senders, metrics }
    }

    /// Queues `forward` on its pod's lane; never waits. A full lane drops it (the local
    /// store still has it).
    pub fn send(&self, forward: Forward) {
        let lane = &self.lanes[lane_of(&forward.pod.uid, self.lanes.len())];
        match lane.try_send(forward) {
            Ok(()) => {
                self.metrics.queued.inc();
            }
            Err(_) => {
                self.metrics.dropped.inc();
                tracing::warn!("forward queue full; the collector will not see this placement");
            }
        }
    }
}

async fn run_lane(
    mut client: CollectorServiceClient<Channel>,
    store: Arc<Store>,
    mut rx: mpsc::Receiver<Forward>,
    metrics: ForwardMetrics,
) {
    while let Some(forward) = rx.recv().await {
        deliver(&mut client, &forward, &metrics).await;
        store.confirm(&forward.pod.uid, forward.seq);
        metrics.queued.dec();
    }
}

/// Sends one call until the collector accepts (or rejects as invalid) it.
async fn deliver(
    client: &mut CollectorServiceClient<Channel>,
    forward: &Forward,
    metrics: &ForwardMetrics,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let call = async {
            match &forward.call {
                Call::Reserve { node, placed_at } => client
                    .reserve(pb::CollectorServiceReserveRequest {
                        pod: Some(forward.pod.clone()),
                        node_name: node.clone(),
                        placed_at: Some(timestamp(*placed_at)),
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
        tokio::time::sleep(backoff).await;
        backoff = next_backoff(backoff);
    }
}

#[cfg(test)]
mod tests;
