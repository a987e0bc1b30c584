//! `waterline.v1.CollectorService` over the cluster state.

use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use tracing::Instrument;
use waterline_api::v1 as pb;
use waterline_api::v1::collector_service_server::CollectorService;
use waterline_convert::{
    ToProto, listed_entry, provisional_ttl, required_pod, timestamp, unix_millis,
};
use waterline_core::ledger::LedgerWindow;
use waterline_core::placement::placement;
use waterline_core::{Delta, LedgerSource, UnixMillis};
use waterline_runtime::policy::PolicyHandle;
use waterline_runtime::rpc_metrics::RpcMetrics;

use crate::published::{Deltas, Published};
use crate::shadow::Decisions;
use crate::state::ClusterState;

/// Messages queued per subscriber before its sender waits; a subscriber this far behind
/// stops draining the broadcast channel and is resynced from a full snapshot.
const STREAM_BUFFER: usize = 16;

/// A published delta as WatchNodes sends it.
pub type WireDelta = Published<pb::WatchNodesResponse>;

pub struct Collector {
    pub state: ClusterState,
    /// The channel `state` publishes to, in WatchNodes' encoding.
    pub deltas: Deltas<pb::WatchNodesResponse>,
    pub policy: PolicyHandle,
    pub rpc: RpcMetrics,
    /// Shadow mode's judgements; `None` when it is off.
    pub shadow: Option<Arc<Decisions>>,
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::WatchNodesResponse, Status>> + Send>>;

/// The wire form of a published delta. This subscriber moves the message out when it holds
/// the last reference (the broadcast channel drops its copy once every receiver has read
/// it), else it shares the one encoding: a refresh of 5,000 nodes is ~2 MB of messages, and
/// encoding or copying it once more per subscriber doubled that.
fn wire(published: Arc<WireDelta>) -> pb::WatchNodesResponse {
    match Arc::try_unwrap(published) {
        Ok(last) => last.into_encoded(Delta::to_proto),
        Err(shared) => shared.encoded(Delta::to_proto),
    }
}

/// Folds every delta that is already waiting into `first`, so a subscriber that wakes up
/// late gets one message instead of a burst.
fn coalesce(
    first: Arc<WireDelta>,
    rx: &mut broadcast::Receiver<Arc<WireDelta>>,
) -> Result<pb::WatchNodesResponse, broadcast::error::TryRecvError> {
    let mut merged: Option<Delta> = None;
    loop {
        match rx.try_recv() {
            Ok(next) => {
                let delta = merged.get_or_insert_with(|| Delta::clone(&first.delta));
                delta.merge(Delta::clone(&next.delta));
            }
            // Nothing else waiting, the usual case: the shared encoding.
            Err(broadcast::error::TryRecvError::Empty) => {
                return Ok(match merged {
                    None => wire(first),
                    Some(delta) => delta.to_proto(),
                });
            }
            Err(e) => return Err(e),
        }
    }
}

/// A stream with nothing to say still carries a message this often: an empty delta with
/// only `sent_at`, so a subscriber can tell a quiet collector from a connection that went
/// silent (a scorer fails over after `--collector-silence`, docs/design.md#the-contract).
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(2);

async fn feed(
    state: ClusterState,
    deltas: Deltas<pb::WatchNodesResponse>,
    subscriber: String,
    tx: mpsc::Sender<Result<pb::WatchNodesResponse, Status>>,
) {
    'resync: loop {
        let (full, mut rx) = state.subscribe(&deltas);
        tracing::debug!(%subscriber, nodes = full.nodes.len(), "sending full snapshot");
        if tx.send(Ok(full.to_proto())).await.is_err() {
            return;
        }
        loop {
            let received = match tokio::time::timeout(HEARTBEAT, rx.recv()).await {
                Ok(received) => received,
                Err(_idle) => {
                    let heartbeat = pb::WatchNodesResponse {
                        sent_at: Some(timestamp(UnixMillis::now())),
                        ..Default::default()
                    };
                    if tx.send(Ok(heartbeat)).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            let next = match received {
                Ok(first) => coalesce(first, &mut rx),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    Err(broadcast::error::TryRecvError::Lagged(n))
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            match next {
                Ok(delta) => {
                    if tx.send(Ok(delta)).await.is_err() {
                        tracing::info!(%subscriber, "subscriber left");
                        return;
                    }
                }
                Err(broadcast::error::TryRecvError::Lagged(missed)) => {
                    tracing::warn!(%subscriber, missed, "subscriber lagged; resending a full snapshot");
                    continue 'resync;
                }
                Err(_) => return,
            }
        }
    }
}

#[tonic::async_trait]
impl CollectorService for Collector {
    type WatchNodesStream = WatchStream;

    async fn watch_nodes(
        &self,
        request: Request<pb::WatchNodesRequest>,
    ) -> Result<Response<Self::WatchNodesStream>, Status> {
        let peer = request.remote_addr().map(|a| a.to_string()).unwrap_or_default();
        let name = request.into_inner().subscriber;
        let subscriber = if name.is_empty() { peer } else { format!("{name} ({peer})") };
        tracing::info!(%subscriber, "scorer subscribed");
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let span = tracing::info_span!("watch_nodes", %subscriber);
        let feed = feed(self.state.clone(), self.deltas.clone(), subscriber, tx);
        tokio::spawn(feed.instrument(span));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn list_nodes(
        &self,
        request: Request<pb::ListNodesRequest>,
    ) -> Result<Response<pb::ListNodesResponse>, Status> {
        let timer = self.rpc.start("ListNodes");
        let policy = self.policy.get();
        let names = request.into_inner().node_names;
        let windows: Vec<(String, LedgerWindow)> =
            policy.metrics.iter().map(|m| (m.name.clone(), m.ledger_window())).collect();
        let listing = self.state.list(&names, UnixMillis::now(), &windows);
        let result = Ok(pb::ListNodesResponse {
            nodes: listing.nodes.iter().map(ToProto::to_proto).collect(),
            ledger: listing
                .ledger
                .iter()
                .map(|(e, remaining)| listed_entry(e, remaining))
                .collect(),
            metrics: listing
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
            learned: listing.learned.to_proto(),
        });
        timer.finish_grpc(&result);
        result.map(Response::new)
    }

    async fn reserve(
        &self,
        request: Request<pb::CollectorServiceReserveRequest>,
    ) -> Result<Response<pb::CollectorServiceReserveResponse>, Status> {
        let timer = self.rpc.start("Reserve");
        let request = request.into_inner();
        let now = UnixMillis::now();
        let result = required_pod(request.pod.as_ref())
            .and_then(|pod| {
                let placed_at = request.placed_at.as_ref().map_or(now, unix_millis);
                // A provisional Reserve expires at its own time, counted from the decision.
                let source = match provisional_ttl(request.provisional_ttl.as_ref())? {
                    Some(ttl) => LedgerSource::Provisional { expires_at: placed_at.plus(ttl) },
                    None => LedgerSource::Reserve,
                };
                let (policy, learned) = (self.policy.get(), self.state.learned());
                Ok(placement(&policy, &learned, pod, &request.node_name, placed_at, source)?)
            })
            .map(|entry| {
                tracing::debug!(pod = %entry.uid, node = %entry.node, source = ?entry.source, "reserve");
                // A guess forwarded after its expiry (the collector was away, or the
                // forwarder behind) is not placed; the scorers still hear that it is gone.
                let stale = matches!(
                    entry.source,
                    LedgerSource::Provisional { expires_at } if expires_at <= now
                );
                if stale {
                    self.state.drop_expired_guess(&entry.uid);
                } else {
                    self.state.place(entry);
                }
                pb::CollectorServiceReserveResponse {}
            })
            .map_err(Status::from);
        timer.finish_grpc(&result);
        result.map(Response::new)
    }

    async fn unreserve(
        &self,
        request: Request<pb::CollectorServiceUnreserveRequest>,
    ) -> Result<Response<pb::CollectorServiceUnreserveResponse>, Status> {
        let timer = self.rpc.start("Unreserve");
        let request = request.into_inner();
        let result = match request.pod.as_ref().map(|p| p.uid.as_str()) {
            None | Some("") => Err(Status::invalid_argument("pod.uid is required")),
            Some(uid) => {
                self.state.release(uid);
                Ok(pb::CollectorServiceUnreserveResponse {})
            }
        };
        timer.finish_grpc(&result);
        result.map(Response::new)
    }

    async fn shadow_decisions(
        &self,
        request: Request<pb::ShadowDecisionsRequest>,
    ) -> Result<Response<pb::ShadowDecisionsResponse>, Status> {
        let timer = self.rpc.start("ShadowDecisions");
        let request = request.into_inner();
        let result = match &self.shadow {
            None => Err(Status::failed_precondition(
                "shadow mode is off: start the collector with --shadow",
            )),
            Some(shadow) => Ok(pb::ShadowDecisionsResponse {
                decisions: shadow
                    .recent(request.limit as usize, &request.scheduler_name)
                    .iter()
                    .map(ToProto::to_proto)
                    .collect(),
                judged: shadow.judged(),
                dropped: shadow.dropped(),
            }),
        };
        timer.finish_grpc(&result);
        result.map(Response::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(uid: &str) -> Arc<WireDelta> {
        let delta = Delta { released: vec![uid.to_string()], ..Delta::default() };
        Arc::new(Published::new(Arc::new(delta)))
    }

    #[test]
    fn waiting_deltas_are_folded_into_one_message_in_order() {
        let (tx, mut rx) = broadcast::channel(16);
        for uid in ["a", "b", "c"] {
            tx.send(delta(uid)).unwrap();
        }
        let first = rx.try_recv().unwrap();
        let merged = coalesce(first, &mut rx).unwrap();
        assert_eq!(merged.released_pod_uids, ["a", "b", "c"]);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn the_last_reader_takes_the_message_and_others_share_one_encoding() {
        let (tx, mut one) = broadcast::channel(16);
        let mut two = tx.subscribe();
        tx.send(delta("a")).unwrap();
        let first = one.try_recv().unwrap();
        assert_eq!(Arc::strong_count(&first), 2, "the channel still holds it for `two`");
        assert_eq!(wire(first).released_pod_uids, ["a"]);
        let last = two.try_recv().unwrap();
        assert_eq!(Arc::strong_count(&last), 1, "read by every receiver: the channel let go");
        assert_eq!(wire(last).released_pod_uids, ["a"]);
    }
}
