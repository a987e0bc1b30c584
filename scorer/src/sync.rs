//! Streams a collector's WatchNodes into the store, forever. Collectors are active-active
//! replicas holding the same state, so the scorer streams from one and, when that stream
//! breaks or cannot be opened, moves to the next (its first message is a full snapshot,
//! which the store lays this replica's unconfirmed ops over). Once every collector has
//! failed in a row it waits with capped, jittered exponential backoff; the store keeps
//! serving its last snapshot meanwhile.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tonic::transport::Channel;
use waterline_api::v1 as pb;
use waterline_api::v1::collector_service_client::CollectorServiceClient;
use waterline_convert::delta_from_proto;
use waterline_core::UnixMillis;
use waterline_runtime::backoff::Backoff;

use crate::store::Store;

/// The wait after every collector failed in a row: from 100 ms up to 5 s. Forwarding a
/// placement retries on the same schedule.
pub const BACKOFF: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));

#[derive(Clone, Default)]
pub struct SyncMetrics {
    pub connected: Gauge,
    pub reconnects: Counter,
    pub messages: Counter,
    /// Ledger entries of the stream the domain cannot hold (no uid or node).
    pub dropped_entries: Counter,
    /// Streams given up because they went silent past `--collector-silence`.
    pub silent: Counter,
    /// Learned workloads of the stream with a bad number (their pods priced by the factors).
    pub dropped_workloads: Counter,
}

impl SyncMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let s = SyncMetrics::default();
        registry.register(
            "waterline_collector_connected",
            "1 while streaming from the collector",
            s.connected.clone(),
        );
        registry.register(
            "waterline_collector_reconnects",
            "Times the collector stream was (re)opened after a failure",
            s.reconnects.clone(),
        );
        registry.register(
            "waterline_collector_messages",
            "WatchNodes messages applied",
            s.messages.clone(),
        );
        registry.register(
            "waterline_collector_dropped_entries",
            "Streamed ledger entries skipped because they had no pod_uid or node_name",
            s.dropped_entries.clone(),
        );
        registry.register(
            "waterline_collector_silent_streams",
            "Collector streams given up after --collector-silence without a message",
            s.silent.clone(),
        );
        registry.register(
            "waterline_collector_dropped_learned_workloads",
            "Streamed learned workloads skipped because a number was NaN, infinite or negative",
            s.dropped_workloads.clone(),
        );
        s
    }
}

/// One collector the scorer streams from and forwards to.
#[derive(Clone)]
pub struct Collector {
    pub url: String,
    pub channel: Channel,
}

pub async fn run(
    collectors: Vec<Collector>,
    store: Arc<Store>,
    subscriber: String,
    silence: Duration,
    metrics: SyncMetrics,
) {
    let mut clients: Vec<_> = collectors
        .iter()
        .map(|c| {
            CollectorServiceClient::new(c.channel.clone()).max_decoding_message_size(usize::MAX)
        })
        .collect();
    if clients.is_empty() {
        tracing::error!("no collector to stream from");
        return;
    }
    let mut backoff = BACKOFF;
    let mut current = 0;
    // Collectors tried in a row without a message: after a whole round, back off.
    let mut failed_in_a_row = 0;
    loop {
        let url = &collectors[current].url;
        let streamed =
            stream_from(&mut clients[current], url, &store, &subscriber, silence, &metrics).await;
        metrics.reconnects.inc();
        if streamed {
            failed_in_a_row = 0;
            backoff.reset();
        } else {
            failed_in_a_row += 1;
        }
        current = (current + 1) % clients.len();
        if failed_in_a_row >= clients.len() {
            tracing::warn!(retry_in = ?backoff.delay(), "no collector reachable; serving the last snapshot");
            backoff.wait().await;
            failed_in_a_row = 0;
        } else if clients.len() > 1 {
            tracing::info!(next = %collectors[current].url, "failing over to the next collector");
        } else {
            tokio::time::sleep(backoff.delay()).await;
        }
    }
}

/// Streams from one collector until the stream ends or is silent for `silence`; whether
/// any message arrived.
async fn stream_from(
    client: &mut CollectorServiceClient<Channel>,
    url: &str,
    store: &Store,
    subscriber: &str,
    silence: Duration,
    metrics: &SyncMetrics,
) -> bool {
    let request = pb::WatchNodesRequest { subscriber: subscriber.to_owned() };
    let mut stream = match client.watch_nodes(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => {
            tracing::warn!(collector = %url, error = %status.message(), code = ?status.code(), "cannot reach the collector");
            return false;
        }
    };
    metrics.connected.set(1);
    tracing::info!(collector = %url, "streaming from the collector");
    let mut received = false;
    // The last sign of life: a silent stream was dead since then, not since the timeout.
    let mut last_message = UnixMillis::now();
    loop {
        let Ok(next) = tokio::time::timeout(silence, stream.message()).await else {
            metrics.silent.inc();
            tracing::warn!(collector = %url, ?silence, "collector stream silent (no message, not even a heartbeat); taking it for dead");
            break;
        };
        match next {
            Ok(Some(message)) => {
                let (delta, dropped) = delta_from_proto(&message);
                if dropped.entries > 0 {
                    metrics.dropped_entries.inc_by(dropped.entries as u64);
                    tracing::warn!(
                        entries = dropped.entries,
                        "collector sent ledger entries without pod_uid or node_name; skipped"
                    );
                }
                if let Some(error) = &dropped.workload_error {
                    metrics.dropped_workloads.inc_by(dropped.workloads as u64);
                    tracing::warn!(
                        workloads = dropped.workloads,
                        %error,
                        "collector sent learned workloads the scorer cannot use; skipped"
                    );
                }
                // A heartbeat changes nothing: only the contact is fresh.
                if !delta.is_empty() {
                    store.apply(&delta, UnixMillis::now());
                }
                store.set_connected(true, UnixMillis::now());
                metrics.messages.inc();
                received = true;
                last_message = UnixMillis::now();
            }
            Ok(None) => {
                tracing::warn!(collector = %url, "collector closed the stream");
                break;
            }
            Err(status) => {
                tracing::warn!(collector = %url, error = %status, "collector stream failed");
                break;
            }
        }
    }
    metrics.connected.set(0);
    store.set_connected(false, last_message);
    received
}
