//! A fake Kubernetes API server on loopback for the collector's Kubernetes source
//! (`--kubeconfig FILE`): pod and node lists answered from its current objects, and watches
//! held open that stream the pod events pushed with [`FakeKube::bind_pod`] while they are
//! open. The real kube-apiserver path is the end-to-end suite's job (tests/e2e).

use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use axum::extract::{RawQuery, State};
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_stream::StreamExt;

use crate::procs::write_file;

#[derive(Clone)]
pub struct FakeKube {
    pub pods: Arc<Mutex<Vec<Value>>>,
    pub nodes: Arc<Mutex<Vec<Value>>>,
    /// Every request, as `pods?<query>` or `nodes?<query>`.
    pub requests: Arc<Mutex<Vec<String>>>,
    pod_events: broadcast::Sender<String>,
    url: String,
}

fn list_or_watch(
    items: &Mutex<Vec<Value>>,
    query: &str,
    events: Option<broadcast::Receiver<String>>,
) -> axum::response::Response {
    if query.contains("watch=true") {
        // Open until the client leaves, with the pushed events if there are any.
        let never = tokio_stream::pending::<Result<String, std::io::Error>>();
        let body = match events {
            Some(rx) => axum::body::Body::from_stream(
                tokio_stream::wrappers::BroadcastStream::new(rx)
                    .filter_map(|line| line.ok().map(Ok::<String, std::io::Error>))
                    .chain(never),
            ),
            None => axum::body::Body::from_stream(never),
        };
        return body.into_response();
    }
    let items = items.lock().unwrap().clone();
    axum::Json(json!({"apiVersion": "v1", "kind": "List",
                      "metadata": {"resourceVersion": "100"}, "items": items}))
    .into_response()
}

async fn serve_pods(
    State(api): State<FakeKube>,
    RawQuery(q): RawQuery,
) -> axum::response::Response {
    let q = q.unwrap_or_default();
    // Subscribed before the request is recorded: whoever waits for the watch to be open
    // (`wait_pod_watch`) and then pushes an event, reaches it.
    let events = api.pod_events.subscribe();
    api.requests.lock().unwrap().push(format!("pods?{q}"));
    list_or_watch(&api.pods, &q, Some(events))
}

async fn serve_nodes(
    State(api): State<FakeKube>,
    RawQuery(q): RawQuery,
) -> axum::response::Response {
    let q = q.unwrap_or_default();
    api.requests.lock().unwrap().push(format!("nodes?{q}"));
    list_or_watch(&api.nodes, &q, None)
}

impl FakeKube {
    /// Serves `pods` and `nodes` on a free loopback port until the test ends.
    pub async fn start(pods: Vec<Value>, nodes: Vec<Value>) -> Result<FakeKube> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let api = FakeKube {
            pods: Arc::new(Mutex::new(pods)),
            nodes: Arc::new(Mutex::new(nodes)),
            requests: Arc::default(),
            pod_events: broadcast::channel(64).0,
            url: format!("http://{}", listener.local_addr()?),
        };
        let app = axum::Router::new()
            .route("/api/v1/pods", get(serve_pods))
            .route("/api/v1/nodes", get(serve_nodes))
            .with_state(api.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(api)
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// A kubeconfig for this server, written into `dir`; returns its path.
    pub fn kubeconfig(&self, dir: &Path) -> String {
        write_file(
            dir,
            "kubeconfig",
            &format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: fake\n\
                 clusters: [{{name: fake, cluster: {{server: '{}'}}}}]\n\
                 users: [{{name: fake, user: {{token: dummy}}}}]\n\
                 contexts: [{{name: fake, context: {{cluster: fake, user: fake}}}}]\n",
                self.url
            ),
        )
    }

    /// Whether a pod watch is open (the collector listed the pods and now watches).
    pub fn pod_watch_open(&self) -> bool {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.starts_with("pods?") && r.contains("watch=true"))
    }

    /// Adds `pod` to the list and streams it as ADDED to every open pod watch.
    pub fn bind_pod(&self, pod: Value) {
        let event = json!({"type": "ADDED", "object": pod});
        self.pods.lock().unwrap().push(pod);
        let _ = self.pod_events.send(format!("{event}\n"));
    }

    /// Removes pod `name` from the list and streams it as DELETED (its last state, as the API
    /// server sends it) to every open pod watch. False when there is no such pod.
    pub fn delete_pod(&self, name: &str) -> bool {
        let mut pods = self.pods.lock().unwrap();
        let Some(index) = pods.iter().position(|p| p["metadata"]["name"] == name) else {
            return false;
        };
        let event = json!({"type": "DELETED", "object": pods.remove(index)});
        drop(pods);
        let _ = self.pod_events.send(format!("{event}\n"));
        true
    }
}

/// A running pod `name` on `node`, PodScheduled at `scheduled` (RFC 3339), one container
/// requesting 1 cpu and 1 GiB, bound by `scheduler`.
pub fn pod(name: &str, node: &str, scheduled: &str, scheduler: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                     "resourceVersion": "5", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"nodeName": node, "schedulerName": scheduler,
                 "containers": [{"name": "c", "image": "x",
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
        "status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}]}
    })
}

/// A node with `cpu` allocatable (16 GiB of memory) and an InternalIP.
pub fn node(name: &str, cpu: &str, ip: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "3"},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi"},
                   "addresses": [{"type": "InternalIP", "address": ip}]}
    })
}

/// One cpu metric, the water level at 40, Filter above 65.
pub const SHADOW_POLICY: &str = "metrics:
  - {name: cpu_usage_avg_5m, resource: cpu, query: 'waterline:node_cpu_usage:avg5m', period: 30s, weight: 1, filterAbove: 65}
curve: {kind: waterLevel, target: 40}
";

/// Nodes `hot` (90 % cpu), `warm` (30 %) and `cool` (20 %), 8 cores and 32 GiB each.
pub const SHADOW_NODES: &str = "nodes:
  - {name: hot, capacity: {cpu: '8', memory: 32Gi}, metrics: {cpu_usage_avg_5m: 90}}
  - {name: warm, capacity: {cpu: '8', memory: 32Gi}, metrics: {cpu_usage_avg_5m: 30}}
  - {name: cool, capacity: {cpu: '8', memory: 32Gi}, metrics: {cpu_usage_avg_5m: 20}}
";

/// A collector in shadow mode (`--shadow`) with [`SHADOW_NODES`] from a static file and
/// its pods from a [`FakeKube`], under [`SHADOW_POLICY`].
pub struct ShadowCollector {
    pub collector: crate::procs::Service,
    pub kube: FakeKube,
    _dir: tempfile::TempDir,
}

impl ShadowCollector {
    /// Starts it on `grpc` and `admin` and waits until its pod watch is open.
    pub async fn start(
        grpc: std::net::SocketAddr,
        admin: std::net::SocketAddr,
    ) -> Result<ShadowCollector> {
        let kube = FakeKube::start(Vec::new(), Vec::new()).await?;
        let dir = tempfile::tempdir()?;
        let args: Vec<String> = [
            "--static",
            &write_file(dir.path(), "nodes.yaml", SHADOW_NODES),
            "--policy",
            &write_file(dir.path(), "policy.yaml", SHADOW_POLICY),
            "--kube",
            "--kubeconfig",
            &kube.kubeconfig(dir.path()),
            "--shadow",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let collector = crate::procs::Service::spawn_on("waterline-collector", grpc, admin, &args)?;
        collector.wait_ready(std::time::Duration::from_secs(30)).await?;
        crate::prometheus::wait_until(std::time::Duration::from_secs(20), || async {
            anyhow::ensure!(kube.pod_watch_open(), "no pod watch yet");
            Ok(())
        })
        .await?;
        Ok(ShadowCollector { collector, kube, _dir: dir })
    }

    /// default-scheduler binds pod `name` to `node`.
    pub fn bind(&self, name: &str, node: &str) {
        self.kube.bind_pod(pod(name, node, "2026-01-01T00:00:10Z", "default-scheduler"));
    }
}
