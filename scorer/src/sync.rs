//! Streams the collector's WatchNodes into the store, forever: every failure is logged and
//! retried with capped, jittered exponential backoff; the store keeps serving its last
//! snapshot meanwhile.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use rand::Rng;
use tonic::transport::Channel;
use waterline_api::v1 as pb;
use waterline_api::v1::collector_service_client::CollectorServiceClient;
use waterline_convert::delta_from_proto;
use waterline_core::UnixMillis;

use crate::store::Store;

const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

#[derive(Clone, Default)]
pub struct SyncMetrics {
    pub connected: Gauge,
    pub reconnects: Counter,
    pub messages: Counter,
    /// Ledger entries of the stream the domain cannot hold (no uid or node).
    pub dropped_entries: Counter,
}

/// Doubles the delay up to the cap, with ±20 % jitter so replicas do not reconnect in step.
pub fn next_backoff(current: Duration) -> Duration {
    let doubled = (current * 2).min(BACKOFF_MAX);
    let jitter = rand::rng().random_range(0.8..1.2);
    doubled.mul_f64(jitter).min(BACKOFF_MAX)
}

pub async fn run(channel: Channel, store: Arc<Store>, subscriber: String, metrics: SyncMetrics) {
    let mut client = CollectorServiceClient::new(channel).max_decoding_message_size(usize::MAX);
    let mut backoff = BACKOFF_START;
    loop {
        let request = pb::WatchNodesRequest { subscriber: subscriber.clone() };
        match client.watch_nodes(request).await {
            Ok(response) => {
                let mut stream = response.into_inner();
                metrics.connected.set(1);
                tracing::info!("streaming from the collector");
                loop {
                    match stream.message().await {
                        Ok(Some(message)) => {
                            let (delta, dropped) = delta_from_proto(&message);
                            if dropped.entries > 0 {
                                metrics.dropped_entries.inc_by(dropped.entries as u64);
                                tracing::warn!(
                                    entries = dropped.entries,
                                    "collector sent ledger entries without pod_uid or node_name; skipped"
                                );
                            }
                            store.apply(&delta, UnixMillis::now());
                            store.set_connected(true, UnixMillis::now());
                            metrics.messages.inc();
                            backoff = BACKOFF_START;
                        }
                        Ok(None) => {
                            tracing::warn!("collector closed the stream");
                            break;
                        }
                        Err(status) => {
                            tracing::warn!(error = %status, "collector stream failed");
                            break;
                        }
                    }
                }
                metrics.connected.set(0);
                store.set_connected(false, UnixMillis::now());
            }
            Err(status) => {
                tracing::warn!(error = %status.message(), code = ?status.code(), retry_in = ?backoff, "cannot reach the collector; serving the last snapshot");
            }
        }
        metrics.reconnects.inc();
        tokio::time::sleep(backoff).await;
        backoff = next_backoff(backoff);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let mut delay = BACKOFF_START;
        for _ in 0..20 {
            let next = next_backoff(delay);
            assert!(next <= BACKOFF_MAX);
            assert!(next >= (delay * 2).min(BACKOFF_MAX).mul_f64(0.8));
            delay = next;
        }
        assert!(delay >= BACKOFF_MAX.mul_f64(0.8));
    }
}
