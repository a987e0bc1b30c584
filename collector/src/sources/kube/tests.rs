//! The watches against kube-rs' mock API server (tower-test): the test answers each request
//! the watcher makes, in order. Time is paused, so the watcher's backoff costs nothing.
//!
//! A watch response is a finite body: once its events are consumed the watcher asks for the
//! next watch, so receiving the next request proves the previous events were handled.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::kube::Client;
use ::kube::client::Body;
use http::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tower_test::mock::{self, Handle, SendResponse};
use waterline_core::estimate::Usage;
use waterline_core::{LedgerEntry, LedgerSource, Millis, Policy, UnixMillis};
use waterline_runtime::policy::PolicyHandle;

use super::*;
use crate::state::ClusterState;

const PODS: &str = "/api/v1/pods";
const NODES: &str = "/api/v1/nodes";
/// The watches' request timeout in these tests (as `--kube-watch-timeout 45s`).
const WATCH_TIMEOUT: Duration = Duration::from_secs(45);

struct ApiServer(Handle<Request<Body>, Response<Body>>);

fn respond(send: SendResponse<Response<Body>>, status: StatusCode, body: String) {
    let response = Response::builder().status(status).body(Body::from(body.into_bytes())).unwrap();
    send.send_response(response);
}

impl ApiServer {
    fn client() -> (Client, ApiServer) {
        let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
        (Client::new(service, "default"), ApiServer(handle))
    }

    /// The next request: (path, query, reply handle).
    async fn next(&mut self) -> (String, String, SendResponse<Response<Body>>) {
        let (request, send) = self.0.next_request().await.expect("the watcher stopped");
        let uri = request.uri();
        (uri.path().to_owned(), uri.query().unwrap_or_default().to_owned(), send)
    }

    /// Answers the next request, which must be a list of `path`; returns its query.
    async fn list(&mut self, path: &str, resource_version: &str, items: Vec<Value>) -> String {
        let (got, query, send) = self.next().await;
        assert_eq!(got, path);
        assert!(!query.contains("watch=true"), "expected a list, got a watch: {query}");
        let list = json!({"apiVersion": "v1", "kind": "List",
                          "metadata": {"resourceVersion": resource_version}, "items": items});
        respond(send, StatusCode::OK, list.to_string());
        query
    }

    /// Answers the next request, which must be a watch of `path`, with `lines` (watch
    /// events, or anything else to test malformed input); returns its query.
    async fn watch(&mut self, path: &str, lines: Vec<String>) -> String {
        let (got, query, send) = self.next().await;
        assert_eq!(got, path);
        assert!(query.contains("watch=true"), "expected a watch, got: {query}");
        let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
        respond(send, StatusCode::OK, body);
        query
    }

    /// Answers the next request with an API error.
    async fn fail(&mut self, status: StatusCode) -> String {
        let (_, query, send) = self.next().await;
        let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Failure", "message": "try again", "reason": "InternalError",
                          "code": status.as_u16()});
        respond(send, status, body.to_string());
        query
    }
}

fn event(kind: &str, object: &Value) -> String {
    json!({"type": kind, "object": object}).to_string()
}

fn gone() -> String {
    json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": "too old resource version", "reason": "Expired",
        "code": 410}})
    .to_string()
}

/// A running pod bound to `node`, scheduled `minute` minutes past 10:00.
fn pod(name: &str, node: &str, minute: u32, resource_version: u32) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                     "resourceVersion": resource_version.to_string(),
                     "creationTimestamp": "2026-11-29T09:00:00Z",
                     "labels": {"app": name}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x",
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True",
                   "lastTransitionTime": format!("2026-11-29T10:{minute:02}:00Z")}]}
    })
}

fn scheduled(minute: i64) -> UnixMillis {
    UnixMillis(1_795_946_400_000 + minute * 60_000)
}

/// The whole ledger, as ListNodes shows it (sorted by placement time, then uid).
fn entries(state: &ClusterState) -> Vec<LedgerEntry> {
    let listed = state.list(&[], UnixMillis(0), &[]);
    listed.ledger.into_iter().map(|(entry, _)| entry).collect()
}

/// uid → (node, placed_at, source) of the whole ledger.
fn ledger(state: &ClusterState) -> BTreeMap<String, (String, UnixMillis, LedgerSource)> {
    entries(state).into_iter().map(|e| (e.uid, (e.node, e.placed_at, e.source))).collect()
}

fn start_pods(client: Client) -> (ClusterState, watch::Receiver<bool>) {
    let state = ClusterState::default();
    let synced = spawn_pod_watch(
        client,
        state.clone(),
        PolicyHandle::new(Policy::default()),
        WATCH_TIMEOUT,
        None,
        None,
    );
    (state, synced)
}

#[tokio::test(start_paused = true)]
async fn list_then_watch_events_fill_move_and_empty_the_ledger() {
    let (client, mut api) = ApiServer::client();
    let (state, synced) = start_pods(client);

    let query =
        api.list(PODS, "10", vec![pod("a", "node-1", 1, 5), pod("b", "node-2", 2, 6)]).await;
    assert!(query.contains("fieldSelector=spec.nodeName%21%3D"), "{query}");
    let query = api
        .watch(
            PODS,
            vec![
                event("ADDED", &pod("c", "node-1", 3, 11)),
                // b moves (a re-created binding under the same uid)
                event("MODIFIED", &pod("b", "node-3", 2, 12)),
                event("MODIFIED", &{
                    let mut done = pod("a", "node-1", 1, 13);
                    done["status"]["phase"] = json!("Succeeded");
                    done
                }),
            ],
        )
        .await;
    assert!(query.contains("resourceVersion=10"), "{query}");
    // --kube-watch-timeout: kube-rs' default (290 s) would leave a silently lost watch, and
    // the ledger, blind for five minutes (found by the e2e fault apiserver-watch-stranded).
    assert!(query.contains("timeoutSeconds=45"), "{query}");
    assert!(*synced.borrow(), "ready after the first list");

    // The next watch resumes after the last event; by now every event was handled.
    let query = api.watch(PODS, vec![event("DELETED", &pod("c", "node-1", 3, 14))]).await;
    assert!(query.contains("resourceVersion=13"), "{query}");
    let seen = ledger(&state);
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen["uid-b"], ("node-3".into(), scheduled(2), LedgerSource::Watch));
    assert_eq!(seen["uid-c"].1, scheduled(3));
    // a finished: its entry is its departure (docs/design.md#departures), arrival kept.
    assert_eq!(seen["uid-a"].1, scheduled(1));
    assert!(matches!(seen["uid-a"].2, LedgerSource::Departure { arrival_known: true, .. }));

    api.watch(PODS, vec![]).await;
    // c deleted: departed too. Both leave once no metric counts them (`prune_departed`).
    let seen = ledger(&state);
    assert_eq!(seen.keys().collect::<Vec<_>>(), vec!["uid-a", "uid-b", "uid-c"]);
    assert!(seen["uid-c"].2.is_departure());
    let longest = Policy::default().longest_absorb_window();
    assert_eq!(state.prune_departed(UnixMillis::now().plus(longest), longest), 2);
    assert_eq!(ledger(&state).keys().collect::<Vec<_>>(), vec!["uid-b"]);
}

#[tokio::test(start_paused = true)]
async fn gone_relists_and_drops_pods_deleted_meanwhile() {
    let (client, mut api) = ApiServer::client();
    let (state, _synced) = start_pods(client);
    let reserve = |uid: &str, placed_at: UnixMillis| LedgerEntry {
        uid: uid.into(),
        namespace: "ns".into(),
        name: uid.into(),
        node: "node-2".into(),
        placed_at,
        usage: Usage::default(),
        source: LedgerSource::Reserve,
        labels: Default::default(),
    };

    api.list(PODS, "10", vec![pod("a", "node-1", 1, 5), pod("b", "node-1", 2, 6)]).await;
    api.watch(PODS, vec![event("ADDED", &pod("c", "node-2", 3, 11)), gone()]).await;
    // A scheduler reserves while the watch is down: one bind still under way, one longer ago
    // than the longest absorb window (the default 1 d metric's 36.5 m).
    state.place(reserve("uid-binding", UnixMillis::now()));
    state.place(reserve("uid-stale", UnixMillis::now().minus(Millis::from_mins(60))));

    // 410: after the backoff the watcher lists again; b was deleted meanwhile.
    api.list(PODS, "20", vec![pod("a", "node-1", 1, 5), pod("c", "node-2", 3, 11)]).await;
    let query = api.watch(PODS, vec![]).await;
    assert!(query.contains("resourceVersion=20"), "{query}");
    let seen = ledger(&state);
    assert_eq!(
        seen.keys().map(String::as_str).collect::<Vec<_>>(),
        vec!["uid-a", "uid-binding", "uid-c"],
        "b and the stale reservation left, the bind under way stayed"
    );
    assert_eq!(seen["uid-a"].1, scheduled(1));
}

#[tokio::test(start_paused = true)]
async fn errors_are_logged_and_retried_and_never_end_the_watch() {
    let (client, mut api) = ApiServer::client();
    let (state, mut synced) = start_pods(client);

    // The API server is down at first: nothing is synced, the watcher keeps trying.
    for _ in 0..3 {
        api.fail(StatusCode::SERVICE_UNAVAILABLE).await;
    }
    assert!(!*synced.borrow());
    api.list(PODS, "10", vec![pod("a", "node-1", 1, 5)]).await;
    synced.wait_for(|s| *s).await.unwrap();

    // A watch that cannot start is retried from the same resource version.
    let query = api.fail(StatusCode::INTERNAL_SERVER_ERROR).await;
    assert!(query.contains("watch=true") && query.contains("resourceVersion=10"), "{query}");
    let mut bad_quantity = pod("bad", "node-1", 4, 12);
    bad_quantity["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("lots");
    let query = api
        .watch(
            PODS,
            vec![
                // not a pod at all, a pod with a bad quantity, then a good one
                json!({"type": "ADDED", "object": {"kind": "Pod", "metadata": "oops"}}).to_string(),
                event("ADDED", &bad_quantity),
                event("ADDED", &pod("b", "node-2", 5, 13)),
            ],
        )
        .await;
    assert!(query.contains("resourceVersion=10"), "{query}");
    let query = api.watch(PODS, vec![]).await;
    assert!(query.contains("resourceVersion=13"), "{query}");
    let seen = ledger(&state);
    assert_eq!(seen.keys().map(String::as_str).collect::<Vec<_>>(), vec!["uid-a", "uid-b"]);

    // Still alive after all that: the deletion is seen (a departs).
    api.watch(PODS, vec![event("DELETED", &pod("a", "node-1", 1, 14))]).await;
    api.watch(PODS, vec![]).await;
    assert!(ledger(&state)["uid-a"].2.is_departure());
}

#[tokio::test(start_paused = true)]
async fn a_restarted_collector_rebuilds_the_same_ledger() {
    let pods = vec![pod("a", "node-1", 1, 5), pod("b", "node-2", 7, 6), pod("c", "node-1", 9, 7)];
    let mut runs = Vec::new();
    for _restart in 0..2 {
        let (client, mut api) = ApiServer::client();
        let (state, _synced) = start_pods(client);
        api.list(PODS, "10", pods.clone()).await;
        api.watch(PODS, vec![]).await;
        runs.push(entries(&state));
        // The second process starts ten minutes later.
        tokio::time::advance(std::time::Duration::from_secs(600)).await;
    }
    assert_eq!(runs[0].len(), 3);
    assert_eq!(runs[0], runs[1], "same entries, same placement times");
    assert!(runs[0].iter().all(|e| e.source == LedgerSource::Watch));
}

/// Records what the node watch says about addresses.
#[derive(Clone, Default)]
struct Addresses(Arc<Mutex<BTreeMap<String, Vec<String>>>>);

impl NodeAddresses for Addresses {
    fn replace(&self, nodes: Vec<(String, Vec<String>)>) {
        *self.0.lock().unwrap() = nodes.into_iter().collect();
    }
    fn upsert(&self, node: &str, addresses: Vec<String>) {
        self.0.lock().unwrap().insert(node.into(), addresses);
    }
    fn remove(&self, node: &str) {
        self.0.lock().unwrap().remove(node);
    }
}

fn node(name: &str, cpu: &str, resource_version: u32) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "resourceVersion": resource_version.to_string()},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "addresses": [{"type": "Hostname", "address": name},
                          {"type": "InternalIP", "address": format!("10.0.0.{resource_version}")}]
        }
    })
}

#[tokio::test(start_paused = true)]
async fn nodes_give_capacity_and_addresses_and_leave_when_deleted() {
    let (client, mut api) = ApiServer::client();
    let state = ClusterState::default();
    let addresses = Addresses::default();
    spawn_node_watch(client, state.clone(), Some(Box::new(addresses.clone())), WATCH_TIMEOUT);
    let capacity = |name: &str| {
        let listed = state.list(&[name.to_string()], UnixMillis(0), &[]);
        listed.nodes.first().map(|n| n.capacity.cpu_millis)
    };

    api.list(NODES, "10", vec![node("n1", "4", 1), node("n2", "8", 2)]).await;
    api.watch(NODES, vec![event("MODIFIED", &node("n1", "3500m", 11))]).await;
    api.watch(NODES, vec![event("DELETED", &node("n2", "8", 12))]).await;
    api.watch(NODES, vec![gone()]).await;
    assert_eq!(capacity("n1"), Some(3500));
    assert_eq!(capacity("n2"), None);
    assert_eq!(
        addresses.0.lock().unwrap().clone(),
        BTreeMap::from([("n1".to_string(), vec!["10.0.0.11".to_string(), "n1".to_string()])])
    );

    // After the 410 the re-list no longer shows n1 but a new n3.
    api.list(NODES, "20", vec![node("n3", "2", 3)]).await;
    api.watch(NODES, vec![]).await;
    assert_eq!(capacity("n1"), None);
    assert_eq!(capacity("n3"), Some(2000));
    assert_eq!(state.node_count(), 1);
    assert_eq!(addresses.0.lock().unwrap().keys().collect::<Vec<_>>(), vec!["n3"]);
}

#[tokio::test]
async fn a_kubeconfig_file_gives_a_client_and_a_missing_one_an_error_naming_the_flag() {
    let dir = std::env::temp_dir().join(format!("waterline-kubeconfig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n\
         clusters: [{name: t, cluster: {server: 'http://127.0.0.1:1'}}]\n\
         users: [{name: t, user: {token: x}}]\n\
         contexts: [{name: t, context: {cluster: t, user: t, namespace: ns}}]\n",
    )
    .unwrap();
    let client = super::client(Some(&path)).await.unwrap();
    assert_eq!(client.default_namespace(), "ns");
    let Err(err) = super::client(Some(&dir.join("missing"))).await else {
        panic!("a missing kubeconfig must be an error");
    };
    let err = err.to_string();
    assert!(err.contains("--kubeconfig"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
