//! Forwards this replica's Reserves and Unreserves to the collector, in order, retrying
//! until the collector accepts each one, so every other scorer learns of them. The RPC
//! itself has already been answered: the local store applied the change at once.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::mpsc;
use tonic::transport::Channel;
use waterline_api::v1 as pb;
use waterline_api::v1::collector_service_client::CollectorServiceClient;
use waterline_runtime::convert::timestamp;

use crate::store::{PendingOp, Store};
use crate::sync::next_backoff;

/// Placements waiting for the collector before new ones are dropped (and counted).
pub const QUEUE_LEN: usize = 65_536;
const RPC_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone, Default)]
pub struct ForwardMetrics {
    pub queued: Gauge,
    pub dropped: Counter,
    pub retries: Counter,
}

#[derive(Clone)]
pub struct Forwarder {
    tx: mpsc::Sender<(PendingOp, pb::PodInfo)>,
    metrics: ForwardMetrics,
}

impl Forwarder {
    pub fn spawn(channel: Channel, store: Arc<Store>, metrics: ForwardMetrics) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_LEN);
        tokio::spawn(run(channel, store, rx, metrics.clone()));
        Forwarder { tx, metrics }
    }

    /// Queues `op`; never waits. A full queue drops it (the local store still has it).
    pub fn send(&self, op: PendingOp, pod: pb::PodInfo) {
        match self.tx.try_send((op, pod)) {
            Ok(()) => {
                self.metrics.queued.inc();
            }
            Err(_) => {
                self.metrics.dropped.inc();
                tracing::warn!("forward queue full; the collector will not see this placement");
            }
        };
    }
}

async fn run(
    channel: Channel,
    store: Arc<Store>,
    mut rx: mpsc::Receiver<(PendingOp, pb::PodInfo)>,
    metrics: ForwardMetrics,
) {
    let mut client = CollectorServiceClient::new(channel);
    while let Some((op, pod)) = rx.recv().await {
        let mut backoff = Duration::from_millis(100);
        loop {
            let call = async {
                match &op {
                    PendingOp::Reserve(entry) => client
                        .reserve(pb::CollectorServiceReserveRequest {
                            pod: Some(pod.clone()),
                            node_name: entry.node.clone(),
                            placed_at: Some(timestamp(entry.placed_at)),
                        })
                        .await
                        .map(|_| ()),
                    PendingOp::Unreserve { .. } => client
                        .unreserve(pb::CollectorServiceUnreserveRequest {
                            pod: Some(pod.clone()),
                            node_name: String::new(),
                        })
                        .await
                        .map(|_| ()),
                }
            };
            match tokio::time::timeout(RPC_TIMEOUT, call).await {
                Ok(Ok(())) => break,
                // The collector judged it invalid; retrying cannot help.
                Ok(Err(status)) if status.code() == tonic::Code::InvalidArgument => {
                    tracing::warn!(error = %status, "collector rejected a forwarded placement");
                    break;
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
        store.confirm(&op);
        metrics.queued.dec();
    }
}
