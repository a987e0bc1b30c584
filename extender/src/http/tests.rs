//! The verbs through the real router (`Router::oneshot`) against an in-process fake scorer:
//! HTTP plumbing, verbs and scorer client together.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request as HttpRequest, header};
use prometheus_client::registry::Registry;
use tonic::{Request as GrpcRequest, Response as GrpcResponse, Status};
use tower::ServiceExt;
use waterline_api::v1 as pb;
use waterline_api::v1::scorer_service_server::{ScorerService, ScorerServiceServer};
use waterline_core::Policy;
use waterline_core::policy::ScoreMapping;
use waterline_runtime::policy::Policies;

use super::*;
use crate::cache::ScoreCache;
use crate::metrics::{CacheLabels, FallbackLabels, Metrics, VerbLabels};
use crate::provisional::Provisional;
use crate::scorer::ScorerClient;

/// Answers from fixed tables; counts calls (in all and per RPC); optionally slow.
#[derive(Default)]
struct FakeScorer {
    scores: HashMap<String, i64>,
    rejected: HashMap<String, String>,
    delay: Duration,
    /// Behaves like a scorer older than `scores_only`: always answers by name.
    names_only: bool,
    /// Behaves like a scorer older than `Evaluate`: UNIMPLEMENTED.
    no_evaluate: bool,
    calls: Arc<AtomicUsize>,
    by_rpc: Arc<Mutex<HashMap<&'static str, usize>>>,
    last_pod: Arc<Mutex<Option<pb::PodInfo>>>,
    /// Every (RPC, policy name) asked, in order.
    policies: Arc<Mutex<Vec<(&'static str, String)>>>,
    reserves: Reserves,
}

/// Every Reserve: (pod uid, node, provisional TTL in seconds).
type Reserves = Arc<Mutex<Vec<(String, String, Option<i64>)>>>;

impl FakeScorer {
    async fn called(&self, rpc: &'static str) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        *self.by_rpc.lock().unwrap().entry(rpc).or_default() += 1;
        tokio::time::sleep(self.delay).await;
    }

    fn score_of(&self, node: &str) -> i64 {
        self.scores.get(node).copied().unwrap_or(50)
    }
}

#[tonic::async_trait]
impl ScorerService for FakeScorer {
    type SessionStream = std::pin::Pin<
        Box<dyn tokio_stream::Stream<Item = Result<pb::SessionResponse, Status>> + Send>,
    >;

    async fn evaluate(
        &self,
        request: GrpcRequest<pb::EvaluateRequest>,
    ) -> Result<GrpcResponse<pb::EvaluateResponse>, Status> {
        self.called("Evaluate").await;
        if self.no_evaluate {
            return Err(Status::unimplemented("an older scorer"));
        }
        let request = request.into_inner();
        *self.last_pod.lock().unwrap() = request.pod.clone();
        self.policies.lock().unwrap().push(("Evaluate", request.policy.clone()));
        let mut response = pb::EvaluateResponse::default();
        for name in &request.node_names {
            match self.rejected.get(name) {
                Some(reason) => {
                    response.ordered_scores.push(-1);
                    response.rejected.insert(name.clone(), reason.clone());
                }
                None => response.ordered_scores.push(self.score_of(name) as i32),
            }
        }
        Ok(GrpcResponse::new(response))
    }

    async fn session(
        &self,
        _: GrpcRequest<tonic::Streaming<pb::SessionRequest>>,
    ) -> Result<GrpcResponse<Self::SessionStream>, Status> {
        Err(Status::unimplemented("the fake plays Filter and Score"))
    }

    async fn filter(
        &self,
        request: GrpcRequest<pb::FilterRequest>,
    ) -> Result<GrpcResponse<pb::FilterResponse>, Status> {
        self.called("Filter").await;
        let request = request.into_inner();
        *self.last_pod.lock().unwrap() = request.pod.clone();
        let (rejected, feasible): (Vec<String>, Vec<String>) =
            request.node_names.into_iter().partition(|n| self.rejected.contains_key(n));
        Ok(GrpcResponse::new(pb::FilterResponse {
            feasible_nodes: feasible,
            rejected: rejected
                .into_iter()
                .map(|n| (n.clone(), self.rejected[&n].clone()))
                .collect(),
            snapshot_age: None,
        }))
    }

    async fn score(
        &self,
        request: GrpcRequest<pb::ScoreRequest>,
    ) -> Result<GrpcResponse<pb::ScoreResponse>, Status> {
        self.called("Score").await;
        let request = request.into_inner();
        *self.last_pod.lock().unwrap() = request.pod.clone();
        self.policies.lock().unwrap().push(("Score", request.policy.clone()));
        let score_of = |n: &String| self.score_of(n);
        if request.scores_only && !self.names_only {
            return Ok(GrpcResponse::new(pb::ScoreResponse {
                ordered_scores: request.node_names.iter().map(|n| score_of(n) as i32).collect(),
                ..pb::ScoreResponse::default()
            }));
        }
        // Answer in reverse order: the extender must match by name.
        let scores = request
            .node_names
            .iter()
            .rev()
            .map(|n| pb::NodeScore {
                node_name: n.clone(),
                score: score_of(n) as i32,
                terms: vec![],
            })
            .collect();
        Ok(GrpcResponse::new(pb::ScoreResponse { scores, ..pb::ScoreResponse::default() }))
    }

    async fn reserve(
        &self,
        request: GrpcRequest<pb::ReserveRequest>,
    ) -> Result<GrpcResponse<pb::ReserveResponse>, Status> {
        self.called("Reserve").await;
        let request = request.into_inner();
        let uid = request.pod.unwrap_or_default().uid;
        let ttl = request.provisional_ttl.map(|d| d.seconds);
        self.reserves.lock().unwrap().push((uid, request.node_name, ttl));
        Ok(GrpcResponse::new(pb::ReserveResponse {}))
    }

    async fn unreserve(
        &self,
        _: GrpcRequest<pb::UnreserveRequest>,
    ) -> Result<GrpcResponse<pb::UnreserveResponse>, Status> {
        Ok(GrpcResponse::new(pb::UnreserveResponse {}))
    }
}

struct Setup {
    router: axum::Router,
    extender: Arc<Extender>,
    calls: Arc<AtomicUsize>,
    by_rpc: Arc<Mutex<HashMap<&'static str, usize>>>,
    last_pod: Arc<Mutex<Option<pb::PodInfo>>>,
    reserves: Reserves,
}

impl Setup {
    /// Calls per RPC so far, e.g. `[("Evaluate", 1)]`, sorted by name.
    fn rpcs(&self) -> Vec<(&'static str, usize)> {
        let mut calls: Vec<_> = self.by_rpc.lock().unwrap().clone().into_iter().collect();
        calls.sort();
        calls
    }

    fn cache_count(&self, result: &str, reason: &str) -> u64 {
        let labels = CacheLabels { result: result.into(), reason: reason.into() };
        self.extender.metrics.score_cache.get_or_create(&labels).get()
    }
}

async fn start_fake(fake: FakeScorer) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ScorerServiceServer::new(fake))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    format!("http://{addr}")
}

/// Nothing listens on port 1 (tcpmux is never served here); unlike a port freed after a
/// bind, no parallel test can take it.
fn dead_url() -> String {
    "http://127.0.0.1:1".to_owned()
}

/// The verbs on a scorer at `url`, and the router in front of them.
fn extender(
    url: String,
    mapping: ScoreMapping,
    timeout: Duration,
    max_body: usize,
) -> (Arc<Extender>, axum::Router) {
    extender_with(url, mapping, timeout, max_body, Duration::from_secs(30), None)
}

fn extender_with(
    url: String,
    mapping: ScoreMapping,
    timeout: Duration,
    max_body: usize,
    cache_ttl: Duration,
    provisional_ttl: Option<Duration>,
) -> (Arc<Extender>, axum::Router) {
    let channel = tonic::transport::Endpoint::from_shared(url).unwrap().connect_lazy();
    let policy = Policy { extender_score_mapping: mapping, ..Policy::default() };
    // A named policy beside the default, its verbs under /waterline/v1/batch/.
    let batch = Policy { extender_score_mapping: ScoreMapping::Rescale, ..Policy::default() };
    let metrics = Metrics::register(&mut Registry::default());
    let extender = Arc::new(Extender {
        scorer: ScorerClient::new(channel, timeout, &metrics),
        scheduler_names: ["waterline-scheduler".to_owned()].into(),
        max_nodes: 5,
        policies: Policies::from_policies(policy, vec![("batch".into(), batch)]),
        metrics,
        binder: None,
        cache: ScoreCache::new(cache_ttl, 100),
        provisional: provisional_ttl.map(Provisional::new),
    });
    let router = crate::router(extender.clone(), "/waterline/v1", max_body);
    (extender, router)
}

async fn setup_with(fake: FakeScorer, mapping: ScoreMapping) -> Setup {
    setup_cached(fake, mapping, Duration::from_secs(30)).await
}

async fn setup_cached(fake: FakeScorer, mapping: ScoreMapping, cache_ttl: Duration) -> Setup {
    setup_full(fake, mapping, cache_ttl, None).await
}

async fn setup_full(
    fake: FakeScorer,
    mapping: ScoreMapping,
    cache_ttl: Duration,
    provisional_ttl: Option<Duration>,
) -> Setup {
    let calls = fake.calls.clone();
    let by_rpc = fake.by_rpc.clone();
    let last_pod = fake.last_pod.clone();
    let reserves = fake.reserves.clone();
    let url = start_fake(fake).await;
    let (extender, router) =
        extender_with(url, mapping, Duration::from_secs(2), 1 << 20, cache_ttl, provisional_ttl);
    Setup { router, extender, calls, by_rpc, last_pod, reserves }
}

async fn setup() -> Setup {
    let fake = FakeScorer {
        scores: [("n1".into(), 24), ("n2".into(), 45), ("n3".into(), 100)].into(),
        rejected: [("n2".into(), "cpu_usage_avg_5m 70.1% > 65%".into())].into(),
        ..FakeScorer::default()
    };
    setup_with(fake, ScoreMapping::Round).await
}

async fn post(router: &axum::Router, verb: &str, body: impl Into<Body>) -> (StatusCode, String) {
    let request = HttpRequest::post(format!("/waterline/v1/{verb}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

const POD: &str = r#"{"metadata":{"name":"web-0","namespace":"shop","uid":"u-1","labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"i","resources":{"requests":{"cpu":"500m","memory":"1Gi"},"limits":{"cpu":"1"}}}],"schedulerName":"waterline-scheduler","priorityClassName":"high"},"status":{"phase":"Pending"}}"#;
const OTHER_POD: &str = r#"{"metadata":{"name":"x","namespace":"d","uid":"u-2"},"spec":{"containers":null,"schedulerName":"default-scheduler"},"status":{}}"#;

fn names_body(pod: &str, names: &[&str]) -> String {
    format!(r#"{{"Pod":{pod},"Nodes":null,"NodeNames":{}}}"#, serde_json::to_string(names).unwrap())
}

fn node(name: &str) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","uid":"{name}-uid","labels":{{"kubernetes.io/hostname":"{name}"}},"managedFields":[{{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:status":{{}}}}}}]}},"spec":{{"podCIDR":"10.0.0.0/24"}},"status":{{"capacity":{{"cpu":"4","memory":"16Gi","pods":"110"}},"allocatable":{{"cpu":"4","memory":"16Gi","pods":"110"}},"conditions":[{{"type":"Ready","status":"True","lastHeartbeatTime":"2026-01-01T00:00:00Z","lastTransitionTime":null,"reason":"KubeletReady","message":"ok \u003c3"}}],"daemonEndpoints":{{"kubeletEndpoint":{{"Port":10250}}}}}}}}"#
    )
}

fn list_body(pod: &str, names: &[&str]) -> String {
    let items: Vec<String> = names.iter().map(|n| node(n)).collect();
    format!(
        r#"{{"Pod":{pod},"Nodes":{{"metadata":{{"resourceVersion":"7"}},"items":[{}]}},"NodeNames":null}}"#,
        items.join(",")
    )
}

#[tokio::test]
async fn names_filter_answers_names_and_short_reasons() {
    let s = setup().await;
    let (status, body) = post(&s.router, "filter", names_body(POD, &["n1", "n2", "n3"])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        // A load rejection: unresolvable (preemption cannot help on a hot node).
        r#"{"Nodes":null,"NodeNames":["n1","n3"],"FailedNodes":{},"FailedAndUnresolvableNodes":{"n2":"waterline: cpu_usage_avg_5m above 65 percent"},"Error":""}"#
    );
    let pod = s.last_pod.lock().unwrap().clone().unwrap();
    assert_eq!(
        (pod.namespace.as_str(), pod.name.as_str(), pod.uid.as_str()),
        ("shop", "web-0", "u-1")
    );
    assert_eq!(
        (pod.cpu_request_millis, pod.cpu_limit_millis, pod.memory_request_bytes),
        (500, 1000, 1 << 30)
    );
    assert_eq!(pod.priority_class, "high");
    assert_eq!(s.calls.load(Ordering::SeqCst), 1);
}

/// Load rejections go to `FailedAndUnresolvableNodes`: evicting pods does not lower the
/// measured load within the cycle, so kube-scheduler must not preempt on those nodes. An
/// anti-colocation conflict could be resolved by evicting the other pod: it stays in
/// `FailedNodes`, where preemption may consider the node.
#[tokio::test]
async fn load_rejections_are_unresolvable_and_anti_colocation_stays_resolvable() {
    let fake = FakeScorer {
        rejected: [
            ("hot".into(), "cpu_usage_avg_5m 70.1% > 65%".into()),
            ("stale".into(), "mem_usage_avg_5m has no fresh sample".into()),
            ("peer".into(), "anti-colocation app=web with shop/web-1".into()),
        ]
        .into(),
        ..FakeScorer::default()
    };
    let s = setup_with(fake, ScoreMapping::Round).await;
    let (status, body) =
        post(&s.router, "filter", names_body(POD, &["ok", "hot", "stale", "peer"])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        r#"{"Nodes":null,"NodeNames":["ok"],"FailedNodes":{"peer":"waterline: anti-colocation app"},"FailedAndUnresolvableNodes":{"hot":"waterline: cpu_usage_avg_5m above 65 percent","stale":"waterline: mem_usage_avg_5m stale"},"Error":""}"#
    );
    // The NodeList form splits the same way.
    let (_, body) = post(&s.router, "filter", list_body(POD, &["ok", "hot", "peer"])).await;
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer["FailedNodes"],
        serde_json::json!({"peer": "waterline: anti-colocation app"})
    );
    assert_eq!(
        answer["FailedAndUnresolvableNodes"],
        serde_json::json!({"hot": "waterline: cpu_usage_avg_5m above 65 percent"})
    );
}

#[tokio::test]
async fn node_list_filter_passes_node_objects_through() {
    let s = setup().await;
    let (status, body) = post(&s.router, "filter", list_body(POD, &["n1", "n2", "n3"])).await;
    assert_eq!(status, StatusCode::OK);
    let want = format!(
        r#"{{"Nodes":{{"metadata":{{"resourceVersion":"7"}},"items":[{},{}]}},"NodeNames":null,"FailedNodes":{{}},"FailedAndUnresolvableNodes":{{"n2":"waterline: cpu_usage_avg_5m above 65 percent"}},"Error":""}}"#,
        node("n1"),
        node("n3")
    );
    assert_eq!(body, want);
}

#[tokio::test]
async fn prioritize_answers_a_bare_array_in_request_order() {
    let s = setup().await;
    let (status, body) = post(&s.router, "prioritize", names_body(POD, &["n3", "n1", "n2"])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        r#"[{"Host":"n3","Score":10},{"Host":"n1","Score":2},{"Host":"n2","Score":5}]"#
    );
    let (_, body) = post(&s.router, "prioritize", list_body(POD, &["n1", "n2"])).await;
    assert_eq!(body, r#"[{"Host":"n1","Score":2},{"Host":"n2","Score":5}]"#);
}

#[tokio::test]
async fn filter_then_prioritize_of_one_pod_is_one_scorer_call() {
    let s = setup().await;
    let (_, body) = post(&s.router, "filter", names_body(POD, &["n1", "n2", "n3"])).await;
    assert!(body.contains(r#""NodeNames":["n1","n3"]"#), "{body}");
    // The scheduler prioritizes the feasible nodes, in its own order.
    let (status, body) = post(&s.router, "prioritize", names_body(POD, &["n3", "n1"])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, r#"[{"Host":"n3","Score":10},{"Host":"n1","Score":2}]"#);
    assert_eq!(s.rpcs(), [("Evaluate", 1)]);
    assert_eq!(s.cache_count("hit", ""), 1);
    // The NodeList form too.
    let (_, _) = post(&s.router, "filter", list_body(POD, &["n1", "n2", "n3"])).await;
    let (_, body) = post(&s.router, "prioritize", list_body(POD, &["n1", "n3"])).await;
    assert_eq!(body, r#"[{"Host":"n1","Score":2},{"Host":"n3","Score":10}]"#);
    assert_eq!(s.rpcs(), [("Evaluate", 2)]);
}

#[tokio::test]
async fn cached_scores_rescale_over_the_candidates_prioritize_received() {
    let fake = FakeScorer {
        scores: [("a".into(), 40), ("b".into(), 42), ("c".into(), 44), ("d".into(), 90)].into(),
        ..FakeScorer::default()
    };
    let s = setup_with(fake, ScoreMapping::Rescale).await;
    post(&s.router, "filter", names_body(POD, &["a", "b", "c", "d"])).await;
    // d passed waterline's filter but not another plugin's: not a candidate any more.
    let (_, body) = post(&s.router, "prioritize", names_body(POD, &["a", "b", "c"])).await;
    assert_eq!(body, r#"[{"Host":"a","Score":0},{"Host":"b","Score":5},{"Host":"c","Score":10}]"#);
    assert_eq!(s.rpcs(), [("Evaluate", 1)]);
}

#[tokio::test]
async fn a_cache_miss_falls_back_to_score() {
    let s = setup().await;
    // No filter before.
    let (_, body) = post(&s.router, "prioritize", names_body(POD, &["n3", "n1"])).await;
    assert_eq!(body, r#"[{"Host":"n3","Score":10},{"Host":"n1","Score":2}]"#);
    assert_eq!(s.rpcs(), [("Score", 1)]);
    assert_eq!(s.cache_count("miss", "absent"), 1);
    // A candidate filter rejected (not in the entry).
    post(&s.router, "filter", names_body(POD, &["n1", "n2", "n3"])).await;
    let (_, body) = post(&s.router, "prioritize", names_body(POD, &["n1", "n2"])).await;
    assert_eq!(body, r#"[{"Host":"n1","Score":2},{"Host":"n2","Score":5}]"#);
    assert_eq!(s.rpcs(), [("Evaluate", 1), ("Score", 2)]);
    assert_eq!(s.cache_count("miss", "incomplete"), 1);
    // The entry was taken: a second prioritize of the same cycle misses.
    post(&s.router, "prioritize", names_body(POD, &["n1"])).await;
    assert_eq!(s.cache_count("miss", "absent"), 2);
}

#[tokio::test]
async fn an_expired_entry_falls_back_to_score() {
    let fake = FakeScorer {
        scores: [("n1".into(), 24), ("n3".into(), 100)].into(),
        ..FakeScorer::default()
    };
    // A zero TTL: every entry has expired by the time prioritize reads it.
    let s = setup_cached(fake, ScoreMapping::Round, Duration::ZERO).await;
    post(&s.router, "filter", names_body(POD, &["n1", "n3"])).await;
    let (_, body) = post(&s.router, "prioritize", names_body(POD, &["n1", "n3"])).await;
    assert_eq!(body, r#"[{"Host":"n1","Score":2},{"Host":"n3","Score":10}]"#);
    assert_eq!(s.rpcs(), [("Evaluate", 1), ("Score", 1)]);
    assert_eq!(s.cache_count("miss", "expired"), 1);
}

#[tokio::test]
async fn a_scorer_without_evaluate_gets_filter_and_score_as_before() {
    let fake = FakeScorer {
        scores: [("n1".into(), 24), ("n3".into(), 100)].into(),
        rejected: [("n2".into(), "cpu_usage_avg_5m 70.1% > 65%".into())].into(),
        no_evaluate: true,
        ..FakeScorer::default()
    };
    let s = setup_with(fake, ScoreMapping::Round).await;
    let (status, body) = post(&s.router, "filter", names_body(POD, &["n1", "n2", "n3"])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        r#"{"Nodes":null,"NodeNames":["n1","n3"],"FailedNodes":{},"FailedAndUnresolvableNodes":{"n2":"waterline: cpu_usage_avg_5m above 65 percent"},"Error":""}"#
    );
    let (_, body) = post(&s.router, "prioritize", names_body(POD, &["n3", "n1"])).await;
    assert_eq!(body, r#"[{"Host":"n3","Score":10},{"Host":"n1","Score":2}]"#);
    assert_eq!(s.rpcs(), [("Evaluate", 1), ("Filter", 1), ("Score", 1)]);
    // Not asked again for a while: the next pod goes straight to Filter.
    post(&s.router, "filter", names_body(POD, &["n1", "n3"])).await;
    assert_eq!(s.rpcs(), [("Evaluate", 1), ("Filter", 2), ("Score", 1)]);
    let labels = FallbackLabels { verb: "filter".into(), reason: "error".into() };
    assert_eq!(s.extender.metrics.fallbacks.get_or_create(&labels).get(), 0);
}

/// Waits (hang guard only, no timing assertion) until the fake has seen `count` Reserves.
async fn reserves_reach(s: &Setup, count: usize) -> Vec<(String, String, Option<i64>)> {
    let wait = async {
        loop {
            let seen = s.reserves.lock().unwrap().clone();
            if seen.len() >= count {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait).await.expect("no Reserve arrived")
}

#[tokio::test]
async fn prioritize_sends_one_provisional_reserve_for_the_best_node() {
    let fake = FakeScorer {
        scores: [("a".into(), 80), ("b".into(), 90), ("c".into(), 90)].into(),
        ..FakeScorer::default()
    };
    let ttl = Some(Duration::from_secs(15));
    let s = setup_full(fake, ScoreMapping::Round, Duration::from_secs(30), ttl).await;
    post(&s.router, "filter", names_body(POD, &["a", "b", "c"])).await;
    // b and c tie at the top: the first in the request's order is the guess, and the
    // scheduler is told so: b one level above the 9 that c keeps (`single_out`).
    let (_, body) = post(&s.router, "prioritize", names_body(POD, &["a", "b", "c"])).await;
    assert_eq!(body, r#"[{"Host":"a","Score":8},{"Host":"b","Score":10},{"Host":"c","Score":9}]"#);
    assert_eq!(reserves_reach(&s, 1).await, [("u-1".to_owned(), "b".to_owned(), Some(15))]);
    // The next filter waits for it (here it is long done) and is still the pod's only
    // other call.
    post(&s.router, "filter", names_body(POD, &["a", "c"])).await;
    assert_eq!(s.rpcs(), [("Evaluate", 2), ("Reserve", 1)]);
    // A miss answered by Score guesses the same way; the other order picks c.
    post(&s.router, "prioritize", names_body(POD, &["c", "b"])).await;
    assert_eq!(reserves_reach(&s, 2).await[1], ("u-1".to_owned(), "c".to_owned(), Some(15)));
    // No guess from a neutral answer: another scheduler's pod.
    post(&s.router, "prioritize", names_body(OTHER_POD, &["a", "b"])).await;
    post(&s.router, "filter", names_body(POD, &["a"])).await;
    assert_eq!(s.reserves.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn prioritize_matches_by_name_when_the_scorer_predates_scores_only() {
    let fake = FakeScorer {
        scores: [("n1".into(), 24), ("n2".into(), 45), ("n3".into(), 100)].into(),
        names_only: true,
        ..FakeScorer::default()
    };
    let s = setup_with(fake, ScoreMapping::Round).await;
    let (status, body) = post(&s.router, "prioritize", names_body(POD, &["n3", "n1", "n2"])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        r#"[{"Host":"n3","Score":10},{"Host":"n1","Score":2},{"Host":"n2","Score":5}]"#
    );
}

#[tokio::test]
async fn prioritize_rescales_when_the_policy_says_so() {
    let fake = FakeScorer {
        scores: [("a".into(), 40), ("b".into(), 42), ("c".into(), 44)].into(),
        ..FakeScorer::default()
    };
    let s = setup_with(fake, ScoreMapping::Rescale).await;
    let (_, body) = post(&s.router, "prioritize", names_body(POD, &["a", "b", "c"])).await;
    assert_eq!(body, r#"[{"Host":"a","Score":0},{"Host":"b","Score":5},{"Host":"c","Score":10}]"#);
}

#[tokio::test]
async fn other_schedulers_pods_get_neutral_answers_without_a_scorer_call() {
    let s = setup().await;
    let (_, body) = post(&s.router, "filter", names_body(OTHER_POD, &["n1", "n2"])).await;
    assert_eq!(
        body,
        r#"{"Nodes":null,"NodeNames":["n1","n2"],"FailedNodes":{},"FailedAndUnresolvableNodes":null,"Error":""}"#
    );
    let (_, body) = post(&s.router, "prioritize", names_body(OTHER_POD, &["n1", "n2"])).await;
    assert_eq!(body, r#"[{"Host":"n1","Score":0},{"Host":"n2","Score":0}]"#);
    assert_eq!(s.calls.load(Ordering::SeqCst), 0);
    let gated = s.extender.metrics.gated.get_or_create(&VerbLabels { verb: "filter".into() }).get();
    assert_eq!(gated, 1);
}

#[tokio::test]
async fn an_unreachable_scorer_gives_neutral_answers_and_counts_them() {
    let (ext, router) = extender(dead_url(), ScoreMapping::Round, Duration::from_secs(2), 1 << 20);
    let (status, body) = post(&router, "filter", list_body(POD, &["n1", "n2"])).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains(&node("n1")) && body.contains(&node("n2")), "{body}");
    assert!(
        body.ends_with(r#""FailedNodes":{},"FailedAndUnresolvableNodes":null,"Error":""}"#),
        "{body}"
    );
    let (_, body) = post(&router, "prioritize", names_body(POD, &["n1", "n2"])).await;
    assert_eq!(body, r#"[{"Host":"n1","Score":0},{"Host":"n2","Score":0}]"#);
    let labels = FallbackLabels { verb: "prioritize".into(), reason: "unavailable".into() };
    assert_eq!(ext.metrics.fallbacks.get_or_create(&labels).get(), 1);
}

#[tokio::test]
async fn a_slow_scorer_is_not_waited_for() {
    let fake = FakeScorer { delay: Duration::from_secs(5), ..FakeScorer::default() };
    let url = start_fake(fake).await;
    let (ext, router) = extender(url, ScoreMapping::Round, Duration::from_millis(100), 1 << 20);
    // A neutral answer plus a counted fallback (not a late answer from the scorer) shows it
    // was not waited for; no wall-clock threshold, which would be flaky on a loaded machine.
    let (_, body) = post(&router, "prioritize", names_body(POD, &["n1"])).await;
    assert_eq!(body, r#"[{"Host":"n1","Score":0}]"#);
    // Normally "timeout"; on a loaded machine the lazy connect may not finish within the
    // 100 ms budget ("unavailable"), or the deadline sent with the call fires on the server
    // side first (DeadlineExceeded, counted as "error"). Each is the same neutral fallback.
    let fallbacks: u64 = ["timeout", "unavailable", "error"]
        .iter()
        .map(|reason| {
            let labels = FallbackLabels { verb: "prioritize".into(), reason: (*reason).into() };
            ext.metrics.fallbacks.get_or_create(&labels).get()
        })
        .sum();
    assert_eq!(fallbacks, 1);
}

#[tokio::test]
async fn bad_requests_are_400_with_an_error_field() {
    let s = setup().await;
    let cases = [
        ("filter", "{".to_owned(), "malformed request"),
        ("filter", format!("{} trailing", names_body(POD, &["n1"])), "trailing"),
        ("filter", r#"{"Nodes":null,"NodeNames":["n1"]}"#.to_owned(), "Pod is required"),
        ("prioritize", format!(r#"{{"Pod":{POD},"Nodes":null,"NodeNames":null}}"#), "neither"),
        (
            "filter",
            names_body(
                r#"{"spec":{"containers":[{"resources":{"requests":{"cpu":"x"}}}]}}"#,
                &["n1"],
            ),
            "Pod.spec.containers[0].resources.requests.cpu",
        ),
        (
            "filter",
            format!(r#"{{"Pod":{POD},"Nodes":{{"items":[{{"metadata":{{}}}}]}}}}"#),
            "metadata.name",
        ),
        ("preempt", r#"{"NodeNameToMetaVictims":{"n":{"Pods":7}}}"#.to_owned(), "Pods"),
        ("bind", "[]".to_owned(), "malformed"),
    ];
    for (verb, body, needle) in cases {
        let (status, answer) = post(&s.router, verb, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{verb} {body} → {answer}");
        let error: ErrorResult = serde_json::from_str(&answer).unwrap();
        assert!(error.error.contains(needle), "{verb}: {:?} lacks {needle:?}", error.error);
    }
    assert_eq!(s.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn more_nodes_than_max_nodes_is_413_and_the_next_request_is_served() {
    let s = setup().await;
    // setup() allows 5 candidates; 6 are past the limit, for either verb.
    for verb in ["filter", "prioritize"] {
        let (status, answer) =
            post(&s.router, verb, names_body(POD, &["a", "b", "c", "d", "e", "f"])).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{verb} → {answer}");
        let error: ErrorResult = serde_json::from_str(&answer).unwrap();
        assert_eq!(error.error, "6 candidate nodes exceed --max-nodes 5");
    }
    assert_eq!(s.calls.load(Ordering::SeqCst), 0, "refused before any scorer call");
    let (status, answer) =
        post(&s.router, "prioritize", names_body(POD, &["a", "b", "c", "d", "e"])).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

#[tokio::test]
async fn oversized_bodies_are_413_with_or_without_content_length() {
    let (_, router) = extender(dead_url(), ScoreMapping::Round, Duration::from_millis(50), 64);
    let big = names_body(POD, &["n1"]);
    let (status, body) = post(&router, "filter", big.clone()).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(body.contains("--max-body"), "{body}");
    let request = HttpRequest::post("/waterline/v1/prioritize")
        .header(header::CONTENT_LENGTH, big.len())
        .body(Body::from(big))
        .unwrap();
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        response.headers()[header::CONNECTION],
        "close",
        "the unread body ends the connection"
    );
}

#[tokio::test]
async fn preempt_returns_candidates_in_meta_form() {
    let s = setup().await;
    let body = format!(
        r#"{{"Pod":{POD},"NodeNameToVictims":{{"n1":{{"Pods":[{OTHER_POD}],"NumPDBViolations":0}}}},"NodeNameToMetaVictims":null}}"#
    );
    let (status, answer) = post(&s.router, "preempt", body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        answer,
        r#"{"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"u-2"}],"NumPDBViolations":0}}}"#
    );
}

#[tokio::test]
async fn bind_without_enable_bind_is_a_clear_error() {
    let s = setup().await;
    let (status, answer) = post(
        &s.router,
        "bind",
        r#"{"PodName":"web-0","PodNamespace":"shop","PodUID":"u-1","Node":"n1"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let error: ErrorResult = serde_json::from_str(&answer).unwrap();
    assert!(error.error.contains("--enable-bind"), "{answer}");
}

#[tokio::test]
async fn empty_candidate_lists_and_unknown_paths() {
    let s = setup().await;
    let (_, body) = post(&s.router, "prioritize", names_body(POD, &[])).await;
    assert_eq!(body, "[]");
    let (_, body) = post(&s.router, "filter", names_body(POD, &[])).await;
    assert!(body.starts_with(r#"{"Nodes":null,"NodeNames":[],"#), "{body}");
    assert_eq!(s.calls.load(Ordering::SeqCst), 0);
    let (status, body) = post(&s.router, "nope", "{}").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("\"Error\""));
    let get = HttpRequest::get("/waterline/v1/filter").body(Body::empty()).unwrap();
    assert_eq!(
        s.router.clone().oneshot(get).await.unwrap().status(),
        StatusCode::METHOD_NOT_ALLOWED
    );
}

#[test]
fn prefixes_are_normalised() {
    assert_eq!(normalize_prefix("/waterline/v1"), "/waterline/v1");
    assert_eq!(normalize_prefix("waterline/v1/"), "/waterline/v1");
    assert_eq!(normalize_prefix("/"), "");
    assert_eq!(normalize_prefix(""), "");
}

/// One URL prefix per policy: the verbs under `/waterline/v1/batch/` ask the scorer for
/// policy `batch` and map scores by its `extender.scoreMapping`; the default prefix asks
/// for the default (the empty name); a name the extender does not serve is a 404.
#[tokio::test]
async fn each_policy_has_its_url_prefix_and_is_named_to_the_scorer() {
    let fake = FakeScorer {
        scores: [("n1".into(), 24), ("n2".into(), 45), ("n3".into(), 100)].into(),
        ..FakeScorer::default()
    };
    let asked = fake.policies.clone();
    let s = setup_with(fake, ScoreMapping::Round).await;
    let body = || names_body(POD, &["n1", "n2", "n3"]);
    let (status, round) = post(&s.router, "prioritize", body()).await;
    assert_eq!(status, StatusCode::OK);
    // round(score / 10)
    assert_eq!(
        round,
        r#"[{"Host":"n1","Score":2},{"Host":"n2","Score":5},{"Host":"n3","Score":10}]"#
    );
    let (status, rescaled) = post(&s.router, "batch/prioritize", body()).await;
    assert_eq!(status, StatusCode::OK);
    // Rescaled: 24 → 0, 100 → 10, 45 → 21/76 × 10 = 2.76 → 3.
    assert_eq!(
        rescaled,
        r#"[{"Host":"n1","Score":0},{"Host":"n2","Score":3},{"Host":"n3","Score":10}]"#
    );
    let (status, _) = post(&s.router, "batch/filter", body()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        *asked.lock().unwrap(),
        [
            ("Score", String::new()),
            ("Score", "batch".to_string()),
            ("Evaluate", "batch".to_string())
        ]
    );
    let (status, body) = post(&s.router, "web/filter", body()).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::NOT_FOUND, r#"{"Error":"no such extender verb"}"#)
    );
}
