//! Forwards this replica's Reserves and Unreserves to every collector, retrying until each
//! accepts it, so every other scorer learns of them. The RPC itself has already been
//! answered: the local store applied the change at once.
//!
//! Every collector gets every op, not only the one this replica streams from: collectors
//! are active-active replicas, each with its own pod watch, and the watch only shows a pod
//! once it is bound — seconds after the Reserve, which is exactly when a burst is decided.
//! A collector that learned the Reserves only through its watch would, after a failover,
//! stream a ledger without the binds still under way. Each collector has its own lanes, so a
//! dead one delays nobody; an op that a collector has not taken within the give-up bound
//! (`--forward-give-up`, [`GIVE_UP`] by default: the collector's unconfirmed-Reserve TTL
//! would have pruned it by then), counted from when the scorer took it, is given up and
//! counted. Every answer goes to the store, which tells how each local change ended
//! (`unconfirmed.rs`); [`give_up_unconfirmed`] removes the scorer's own entries the stream
//! has not confirmed within the same bound.
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
use crate::unconfirmed::Answer;

/// Placements waiting for the collector, over all lanes, before new ones are dropped (and
/// counted).
pub const QUEUE_LEN: usize = 65_536;
/// Calls in flight at once (all on the one HTTP/2 connection to the collector).
pub const LANES: usize = 16;
const RPC_TIMEOUT: Duration = Duration::from_secs(2);
/// The default `--forward-give-up`: how long one op is retried against one collector, and
/// how long the scorer keeps its own change the stream has not confirmed (the default
/// `ledger.reserveTtl`).
pub const GIVE_UP: Duration = Duration::from_secs(15 * 60);

#[derive(Clone, Default)]
pub struct ForwardMetrics {
    pub queued: Gauge,
    pub dropped: Counter,
    pub retries: Counter,
    /// Ops a collector did not take within the give-up bound.
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
            "Reserves/Unreserves dropped for one collector because its queue was full",
            f.dropped.clone(),
        );
        registry.register(
            "waterline_forward_retries",
            "Failed attempts to forward to the collector",
            f.retries.clone(),
        );
        registry.register(
            "waterline_forward_expired",
            "Reserves/Unreserves a collector did not take within --forward-give-up (15 minutes by default), given up",
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

/// A queued op and the moment its forward is given up (from when the scorer took it, so
/// an op that waited in the queue behind a stuck one gets no longer than the bound).
struct Queued {
    forward: Forward,
    deadline: tokio::time::Instant,
}

#[derive(Clone)]
pub struct Forwarder {
    /// Per collector, its lanes.
    collectors: Vec<Vec<mpsc::Sender<Queued>>>,
    give_up: Duration,
    metrics: ForwardMetrics,
}

impl Forwarder {
    /// Forwards to every one of `collectors` (the store must expect as many
    /// confirmations: `Store::new(collectors.len())`), each op given up `give_up` after it
    /// was sent.
    pub fn spawn(
        collectors: Vec<Collector>,
        store: Arc<Store>,
        metrics: ForwardMetrics,
        give_up: Duration,
    ) -> Self {
        Self::spawn_lanes(LANES, QUEUE_LEN, give_up, collectors, store, metrics)
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
                        let lane = Lane { client, metrics: metrics.clone() };
                        tokio::spawn(lane.run(store.clone(), rx).instrument(span));
                        tx
                    })
                    .collect()
            })
            .collect();
        Forwarder { collectors, give_up, metrics }
    }

    /// Queues `forward` on its pod's lane of every collector; never waits. A full lane drops
    /// it for that collector (the local store still has it, and takes the drop as that
    /// collector's answer, so the op does not stay pending forever; the entry itself stays
    /// until the stream confirms it or the give-up bound removes it).
    pub fn send(&self, forward: Forward, store: &Store) {
        let deadline = tokio::time::Instant::now() + self.give_up;
        for lanes in &self.collectors {
            let lane = &lanes[lane_of(&forward.pod.uid, lanes.len())];
            match lane.try_send(Queued { forward: forward.clone(), deadline }) {
                Ok(()) => {
                    self.metrics.queued.inc();
                }
                Err(_) => {
                    self.metrics.dropped.inc();
                    store.answered(&forward.pod.uid, forward.seq, Answer::Dropped);
                    tracing::warn!("forward queue full; a collector will not see this placement");
                }
            }
        }
    }
}

/// How often [`give_up_unconfirmed`] looks: an eighth of the bound, between 100 ms and 10 s,
/// so an entry leaves at most that long after its bound (15 min + 10 s by default).
pub fn give_up_period(bound: Duration) -> Duration {
    (bound / 8).clamp(Duration::from_millis(100), Duration::from_secs(10))
}

/// Forever: removes the scorer's own ledger changes the stream has not confirmed within
/// `bound` of being taken ([`Store::give_up`]), every [`give_up_period`].
pub async fn give_up_unconfirmed(store: Arc<Store>, bound: Duration) {
    let millis = Millis(bound.as_millis().min(i64::MAX as u128) as i64);
    let mut ticker = tokio::time::interval(give_up_period(bound));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let given_up = store.give_up(UnixMillis::now(), millis);
        if given_up > 0 {
            tracing::warn!(given_up, bound = ?bound, "gave up local changes the collector never confirmed");
        }
    }
}

/// One lane to one collector: one call at a time, in order.
struct Lane {
    client: CollectorServiceClient<Channel>,
    metrics: ForwardMetrics,
}

impl Lane {
    async fn run(mut self, store: Arc<Store>, mut rx: mpsc::Receiver<Queued>) {
        while let Some(Queued { forward, deadline }) = rx.recv().await {
            let answer = match tokio::time::timeout_at(
                deadline,
                deliver(&mut self.client, &forward, &self.metrics),
            )
            .await
            {
                Ok(answer) => answer,
                Err(_) => {
                    self.metrics.expired.inc();
                    tracing::warn!(pod = %forward.pod.uid, "a collector did not take a placement in time; given up");
                    Answer::Expired
                }
            };
            store.answered(&forward.pod.uid, forward.seq, answer);
            self.metrics.queued.dec();
        }
    }
}

/// Sends one call until the collector accepts it ([`Answer::Taken`]) or rejects it as
/// invalid ([`Answer::Rejected`]).
async fn deliver(
    client: &mut CollectorServiceClient<Channel>,
    forward: &Forward,
    metrics: &ForwardMetrics,
) -> Answer {
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
            Ok(Ok(())) => return Answer::Taken,
            // The collector judged it invalid; retrying cannot help.
            Ok(Err(status)) if status.code() == tonic::Code::InvalidArgument => {
                tracing::warn!(error = %status, "collector rejected a forwarded placement");
                return Answer::Rejected;
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
