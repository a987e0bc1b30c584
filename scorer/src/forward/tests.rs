use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Mutex;

use tokio::sync::Barrier;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};
use waterline_api::v1::collector_service_server::{CollectorService, CollectorServiceServer};

use super::*;
use crate::store::PendingOp;
use crate::store::tests::entry;
use crate::unconfirmed::Op;
use waterline_core::Delta;

#[test]
fn a_pod_always_takes_the_same_lane_and_pods_spread_over_all_lanes() {
    let mut used = [false; LANES];
    for i in 0..1000 {
        let uid = format!("pod-{i}");
        let lane = lane_of(&uid, LANES);
        assert!(lane < LANES);
        assert_eq!(lane, lane_of(&uid, LANES));
        used[lane] = true;
    }
    assert!(used.iter().all(|u| *u));
    assert_eq!(lane_of("anything", 1), 0);
    assert_eq!(lane_of("anything", 0), 0);
}

/// A collector that records every call in arrival order; Reserves of pods named `wait-*`
/// wait for each other at a barrier, so they only finish if they are in flight together.
struct FakeCollector {
    calls: Arc<Mutex<Vec<(String, &'static str)>>>,
    barrier: Arc<Barrier>,
}

type Never = Pin<Box<dyn Stream<Item = Result<pb::WatchNodesResponse, Status>> + Send>>;

#[tonic::async_trait]
impl CollectorService for FakeCollector {
    type WatchNodesStream = Never;

    async fn watch_nodes(
        &self,
        _: Request<pb::WatchNodesRequest>,
    ) -> Result<Response<Never>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn list_nodes(
        &self,
        _: Request<pb::ListNodesRequest>,
    ) -> Result<Response<pb::ListNodesResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn reserve(
        &self,
        request: Request<pb::CollectorServiceReserveRequest>,
    ) -> Result<Response<pb::CollectorServiceReserveResponse>, Status> {
        let uid = request.into_inner().pod.unwrap_or_default().uid;
        if uid.starts_with("bad-") {
            return Err(Status::invalid_argument("fake: a pod this collector refuses"));
        }
        if uid.starts_with("wait-") {
            self.barrier.wait().await;
        }
        self.calls.lock().unwrap().push((uid, "reserve"));
        Ok(Response::new(pb::CollectorServiceReserveResponse {}))
    }

    async fn unreserve(
        &self,
        request: Request<pb::CollectorServiceUnreserveRequest>,
    ) -> Result<Response<pb::CollectorServiceUnreserveResponse>, Status> {
        let uid = request.into_inner().pod.unwrap_or_default().uid;
        self.calls.lock().unwrap().push((uid, "unreserve"));
        Ok(Response::new(pb::CollectorServiceUnreserveResponse {}))
    }

    async fn shadow_decisions(
        &self,
        _: Request<pb::ShadowDecisionsRequest>,
    ) -> Result<Response<pb::ShadowDecisionsResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
}

async fn fake_collector(barrier: usize) -> (Collector, Arc<Mutex<Vec<(String, &'static str)>>>) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let fake = FakeCollector { calls: calls.clone(), barrier: Arc::new(Barrier::new(barrier)) };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(CollectorServiceServer::new(fake))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let url = format!("http://{addr}");
    let channel = tonic::transport::Endpoint::from_shared(url.clone()).unwrap().connect_lazy();
    (Collector { url, channel }, calls)
}

fn pod(uid: &str) -> pb::PodInfo {
    pb::PodInfo { uid: uid.into(), namespace: "ns".into(), name: uid.into(), ..Default::default() }
}

fn reserve(store: &Store, forwarder: &Forwarder, uid: &str) {
    let seq = store.apply_local(PendingOp::Reserve(entry(uid)));
    let call =
        Call::Reserve { node: "n1".into(), placed_at: UnixMillis(1000), provisional_ttl: None };
    forwarder.send(Forward { seq, call, pod: pod(uid) }, store);
}

fn unreserve(store: &Store, forwarder: &Forwarder, uid: &str) {
    let seq = store.apply_local(PendingOp::Unreserve { uid: uid.into() });
    forwarder.send(Forward { seq, call: Call::Unreserve, pod: pod(uid) }, store);
}

/// Waits (hang guard only, no timing assertion) until the collector confirmed everything.
async fn drained(store: &Store) {
    let wait = async {
        while store.pending_len() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait).await.expect("forwarder stalled");
}

#[tokio::test]
async fn several_calls_are_in_flight_at_once() {
    // Four pods on four different lanes, whose Reserves only complete together.
    let mut uids = Vec::new();
    let mut lanes = Vec::new();
    for i in 0.. {
        let uid = format!("wait-{i}");
        let lane = lane_of(&uid, LANES);
        if !lanes.contains(&lane) {
            lanes.push(lane);
            uids.push(uid);
        }
        if uids.len() == 4 {
            break;
        }
    }
    let (channel, calls) = fake_collector(4).await;
    let store = Arc::new(Store::default());
    let forwarder =
        Forwarder::spawn(vec![channel], store.clone(), ForwardMetrics::default(), GIVE_UP);
    for uid in &uids {
        reserve(&store, &forwarder, uid);
    }
    drained(&store).await;
    assert_eq!(calls.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn each_pods_calls_reach_the_collector_in_order() {
    let (channel, calls) = fake_collector(1).await;
    let store = Arc::new(Store::default());
    let metrics = ForwardMetrics::default();
    let forwarder = Forwarder::spawn(vec![channel], store.clone(), metrics.clone(), GIVE_UP);
    for round in 0..3 {
        for i in 0..100usize {
            let uid = format!("pod-{i}");
            reserve(&store, &forwarder, &uid);
            if round < 2 || i.is_multiple_of(2) {
                unreserve(&store, &forwarder, &uid);
            }
        }
    }
    drained(&store).await;
    assert_eq!(metrics.queued.get(), 0);

    let mut per_pod: HashMap<String, Vec<&'static str>> = HashMap::new();
    for (uid, call) in calls.lock().unwrap().iter() {
        per_pod.entry(uid.clone()).or_default().push(call);
    }
    assert_eq!(per_pod.len(), 100);
    for (uid, seen) in per_pod {
        let i: usize = uid["pod-".len()..].parse().unwrap();
        let mut expected = vec!["reserve", "unreserve", "reserve", "unreserve", "reserve"];
        if i.is_multiple_of(2) {
            expected.push("unreserve");
        }
        assert_eq!(seen, expected, "{uid}");
    }
}

#[tokio::test]
async fn every_collector_gets_every_op_and_a_dead_one_delays_nobody() {
    let (a, calls_a) = fake_collector(1).await;
    let (b, calls_b) = fake_collector(1).await;
    let store = Arc::new(Store::new(2));
    let forwarder = Forwarder::spawn(vec![a, b], store.clone(), ForwardMetrics::default(), GIVE_UP);
    for i in 0..20 {
        reserve(&store, &forwarder, &format!("pod-{i}"));
    }
    drained(&store).await;
    assert_eq!(calls_a.lock().unwrap().len(), 20);
    assert_eq!(calls_b.lock().unwrap().len(), 20);

    // A collector that never answers (port 1: refused): the live one still gets every op at
    // once, and the dead one's share is given up after the deadline, not kept forever.
    let (live, calls) = fake_collector(1).await;
    let dead = Collector {
        url: "http://127.0.0.1:1".into(),
        channel: tonic::transport::Endpoint::from_static("http://127.0.0.1:1").connect_lazy(),
    };
    let store = Arc::new(Store::new(2));
    let metrics = ForwardMetrics::default();
    let give_up = Duration::from_millis(300);
    let forwarder = Forwarder::spawn_lanes(
        LANES,
        QUEUE_LEN,
        give_up,
        vec![live, dead],
        store.clone(),
        metrics.clone(),
    );
    for i in 0..5 {
        reserve(&store, &forwarder, &format!("pod-{i}"));
    }
    let wait = async {
        while calls.lock().unwrap().len() < 5 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait).await.expect("live collector starved");
    drained(&store).await;
    assert_eq!(metrics.expired.get(), 5);
}

const BOUND: Millis = Millis(60_000);

fn streamed(uid: &str) -> Delta {
    Delta { placed: vec![entry(uid)], ..Delta::default() }
}

#[test]
fn the_bound_removes_the_entry_the_stream_never_confirmed_and_keeps_the_confirmed_one() {
    let store = Store::default();
    store.apply(&Delta { reset: true, ..Delta::default() }, UnixMillis::now());
    let before = UnixMillis::now();
    store.apply_local(PendingOp::Reserve(entry("confirmed")));
    store.apply_local(PendingOp::Reserve(entry("never")));
    store.apply(&streamed("confirmed"), UnixMillis::now());
    let after = UnixMillis::now();
    assert_eq!(store.unconfirmed_len(), 1);
    let outcomes = store.outcome_metrics();
    assert_eq!(outcomes.count(Op::Reserve, "confirmed"), 1);

    // Taken at or after `before`: 1 ms short of before + 60 s, nothing is due yet.
    assert_eq!(store.give_up(before.plus(Millis(BOUND.0 - 1)), BOUND), 0);
    assert_eq!(store.read().ledger().len(), 2);
    // Taken at or before `after`: at after + 60 s it is.
    assert_eq!(store.give_up(after.plus(BOUND), BOUND), 1);
    let generation = store.read();
    assert!(generation.ledger().get("never").is_none(), "the unconfirmed entry left");
    assert!(generation.ledger().get("confirmed").is_some(), "the confirmed one stays");
    assert_eq!(outcomes.count(Op::Reserve, "expired"), 1);
    assert_eq!(outcomes.unconfirmed(), 0);
    // Its lay-over ended too: a full resync without it does not bring it back.
    drop(generation);
    assert_eq!(store.pending_len(), 1, "the confirmed op still waits for its collector");
    store
        .apply(&Delta { reset: true, placed: vec![entry("confirmed")], ..Delta::default() }, after);
    assert!(store.read().ledger().get("never").is_none());
}

#[test]
fn a_reserve_of_a_pod_the_stream_already_holds_there_is_confirmed_at_once() {
    let store = Store::default();
    store.apply(
        &Delta { reset: true, placed: vec![entry("p1")], ..Delta::default() },
        UnixMillis(0),
    );
    store.apply_local(PendingOp::Reserve(entry("p1")));
    assert_eq!(store.unconfirmed_len(), 0);
    assert_eq!(store.outcome_metrics().count(Op::Reserve, "confirmed"), 1);
    assert_eq!(store.give_up(UnixMillis::now().plus(BOUND), BOUND), 0);
    assert!(store.read().ledger().get("p1").is_some());
}

#[tokio::test]
async fn a_rejected_reserve_and_one_no_collector_took_end_at_the_bound_with_their_reason() {
    // One live collector that refuses `bad-*`, one dead one (port 1: refused) whose share
    // expires at 300 ms.
    let (live, calls) = fake_collector(1).await;
    let dead = Collector {
        url: "http://127.0.0.1:1".into(),
        channel: tonic::transport::Endpoint::from_static("http://127.0.0.1:1").connect_lazy(),
    };
    let store = Arc::new(Store::new(2));
    let metrics = ForwardMetrics::default();
    let forwarder = Forwarder::spawn_lanes(
        LANES,
        QUEUE_LEN,
        Duration::from_millis(300),
        vec![live, dead],
        store.clone(),
        metrics.clone(),
    );
    reserve(&store, &forwarder, "bad-1");
    reserve(&store, &forwarder, "good-1");
    drained(&store).await;
    assert_eq!(calls.lock().unwrap().len(), 1, "only good-1 was taken");
    assert_eq!(metrics.expired.get(), 2, "the dead collector took neither");
    let outcomes = store.outcome_metrics();
    assert_eq!(outcomes.count(Op::Reserve, "forwarded"), 1);
    // Both still in the ledger: the fake collector streams nothing, so neither is confirmed.
    assert_eq!(store.read().ledger().len(), 2);
    assert_eq!(store.give_up(UnixMillis::now().plus(BOUND), BOUND), 2);
    assert_eq!(store.read().ledger().len(), 0);
    // bad-1: the live collector refused it and the dead one never took it: rejected.
    // good-1: taken, never streamed back: expired.
    assert_eq!(outcomes.count(Op::Reserve, "rejected"), 1);
    assert_eq!(outcomes.count(Op::Reserve, "expired"), 1);
    assert_eq!(outcomes.count(Op::Reserve, "confirmed"), 0);
}

#[tokio::test]
async fn an_op_queued_behind_a_stuck_one_is_given_up_from_when_it_was_sent() {
    // A dead collector, one lane: the second op waits behind the first, but both are given
    // up 2 s after they were sent (not 2 s after the first gave up: 4 s).
    let dead = Collector {
        url: "http://127.0.0.1:1".into(),
        channel: tonic::transport::Endpoint::from_static("http://127.0.0.1:1").connect_lazy(),
    };
    let store = Arc::new(Store::new(1));
    let metrics = ForwardMetrics::default();
    let give_up = Duration::from_secs(2);
    let forwarder =
        Forwarder::spawn_lanes(1, QUEUE_LEN, give_up, vec![dead], store.clone(), metrics.clone());
    let sent = tokio::time::Instant::now();
    reserve(&store, &forwarder, "first");
    reserve(&store, &forwarder, "second");
    drained(&store).await;
    let took = sent.elapsed();
    assert_eq!(metrics.expired.get(), 2);
    // Both deadlines are 2 s after sending; the lane finds the second's already passed when
    // it gets to it. 4 s or more would mean the clock restarted in the queue (2 s of slack
    // for a loaded machine).
    assert!(took < 2 * give_up, "both given up by their own deadline, took {took:?}");
}

#[test]
fn the_give_up_period_is_an_eighth_of_the_bound_within_100_ms_and_10_s() {
    // 15 min / 8 = 112.5 s, capped at 10 s; 2 s / 8 = 250 ms; 400 ms / 8 = 50 ms, raised to 100 ms.
    assert_eq!(give_up_period(GIVE_UP), Duration::from_secs(10));
    assert_eq!(give_up_period(Duration::from_secs(2)), Duration::from_millis(250));
    assert_eq!(give_up_period(Duration::from_millis(400)), Duration::from_millis(100));
}
