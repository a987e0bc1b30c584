//! What one request is: pre-built gRPC messages or HTTP bodies (so the generator spends its
//! time sending, not formatting), and the check that the answer is a success.

use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use tonic::transport::{Channel, Endpoint};
use waterline_api::v1 as pb;
use waterline_api::v1::collector_service_client::CollectorServiceClient;
use waterline_api::v1::scorer_service_client::ScorerServiceClient;

/// Distinct candidate windows pre-built per run (request `i` uses window `i % WINDOWS`).
const WINDOWS: usize = 64;

/// `synthetic-00000`, … as `waterline-collector --synthetic-nodes` names them.
pub fn node_name(i: usize) -> String {
    format!("synthetic-{i:05}")
}

/// Window `w` of `nodes` names, wrapping at `cluster`.
fn window(w: usize, nodes: usize, cluster: usize) -> Vec<String> {
    let cluster = cluster.max(1);
    (0..nodes).map(|k| node_name((w * nodes + k) % cluster)).collect()
}

/// The candidate windows requests cycle through.
pub fn windows(nodes: usize, cluster: usize) -> Vec<Vec<String>> {
    // Every window is the same when one request covers the whole cluster.
    let count = if nodes >= cluster { 1 } else { WINDOWS };
    (0..count).map(|w| window(w, nodes, cluster)).collect()
}

pub fn pod(uid: &str, scheduler_name: &str) -> pb::PodInfo {
    pb::PodInfo {
        namespace: "bench".into(),
        name: uid.into(),
        uid: uid.into(),
        labels: [("app".to_string(), "bench".to_string())].into(),
        cpu_request_millis: 500,
        memory_request_bytes: 512 << 20,
        scheduler_name: scheduler_name.into(),
        ..Default::default()
    }
}

pub async fn connect(
    url: &str,
    connections: usize,
) -> anyhow::Result<Vec<ScorerServiceClient<Channel>>> {
    let mut clients = Vec::new();
    for _ in 0..connections.max(1) {
        let channel = Endpoint::from_shared(url.to_owned())?
            .tcp_nodelay(true)
            .connect()
            .await
            .with_context(|| format!("connecting to the scorer at {url}"))?;
        clients.push(
            ScorerServiceClient::new(channel)
                .max_decoding_message_size(64 << 20)
                .max_encoding_message_size(64 << 20),
        );
    }
    Ok(clients)
}

fn code(status: tonic::Status) -> String {
    format!("grpc {:?}", status.code())
}

/// What each request asks beyond its candidates.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestFlags {
    /// Score: per-metric terms.
    pub explain: bool,
    /// Filter: every node the scorer knows, instead of a window of names.
    pub all_nodes: bool,
    /// Score: bare scores in request order instead of name + score pairs.
    pub scores_only: bool,
}

#[derive(Clone)]
pub struct Grpc {
    clients: Arc<Vec<ScorerServiceClient<Channel>>>,
    windows: Arc<Vec<Vec<String>>>,
    nodes: usize,
    flags: RequestFlags,
    run_id: u64,
    cluster: usize,
}

impl Grpc {
    pub fn new(
        clients: Vec<ScorerServiceClient<Channel>>,
        nodes: usize,
        cluster: usize,
        flags: RequestFlags,
    ) -> Self {
        let run_id = run_id();
        Grpc {
            clients: Arc::new(clients),
            windows: Arc::new(windows(nodes, cluster)),
            nodes,
            flags,
            run_id,
            cluster,
        }
    }

    fn client(&self, i: u64) -> ScorerServiceClient<Channel> {
        self.clients[i as usize % self.clients.len()].clone()
    }

    fn names(&self, i: u64) -> Vec<String> {
        self.windows[i as usize % self.windows.len()].clone()
    }

    pub async fn score(self, i: u64) -> Result<(), String> {
        let request = pb::ScoreRequest {
            policy: String::new(),
            pod: Some(pod(&format!("score-{i}"), "")),
            node_names: self.names(i),
            explain: self.flags.explain,
            scores_only: self.flags.scores_only,
        };
        let answer = self.client(i).score(request).await.map_err(code)?.into_inner();
        let answered =
            if self.flags.scores_only { answer.ordered_scores.len() } else { answer.scores.len() };
        if answered != self.nodes {
            return Err("score: wrong number of scores".into());
        }
        Ok(())
    }

    pub async fn filter(self, i: u64) -> Result<(), String> {
        let all_nodes = self.flags.all_nodes;
        let request = pb::FilterRequest {
            policy: String::new(),
            pod: Some(pod(&format!("filter-{i}"), "")),
            node_names: if all_nodes { Vec::new() } else { self.names(i) },
            all_nodes,
        };
        let answer = self.client(i).filter(request).await.map_err(code)?.into_inner();
        let covered = if all_nodes {
            answer.feasible_nodes.is_empty() && answer.rejected.len() <= self.cluster
        } else {
            answer.feasible_nodes.len() + answer.rejected.len() == self.nodes
        };
        if !covered {
            return Err("filter: answer does not match the candidates".into());
        }
        Ok(())
    }

    /// Filter and score in one call; with `all_nodes`, every node the scorer knows.
    pub async fn evaluate(self, i: u64) -> Result<(), String> {
        let all_nodes = self.flags.all_nodes;
        let request = pb::EvaluateRequest {
            policy: String::new(),
            pod: Some(pod(&format!("evaluate-{i}"), "")),
            node_names: if all_nodes { Vec::new() } else { self.names(i) },
            all_nodes,
        };
        let answer = self.client(i).evaluate(request).await.map_err(code)?.into_inner();
        let covered = if all_nodes {
            answer.feasible_nodes.len() + answer.rejected.len() == self.cluster
        } else {
            answer.ordered_scores.len() == self.nodes
        };
        if !covered {
            return Err("evaluate: answer does not match the candidates".into());
        }
        Ok(())
    }

    /// A new pod per request, on node `i % cluster`.
    pub async fn reserve(self, i: u64) -> Result<(), String> {
        let request = pb::ReserveRequest {
            pod: Some(pod(&reserve_uid(self.run_id, i), "")),
            node_name: node_name(i as usize % self.cluster.max(1)),
            provisional_ttl: None,
        };
        self.client(i).reserve(request).await.map_err(code)?;
        Ok(())
    }

    /// Takes back the placement `reserve(i)` made (the pod deleted).
    pub async fn unreserve(self, i: u64) -> Result<(), String> {
        let request = pb::UnreserveRequest {
            pod: Some(pod(&reserve_uid(self.run_id, i), "")),
            node_name: node_name(i as usize % self.cluster.max(1)),
        };
        self.client(i).unreserve(request).await.map_err(code)?;
        Ok(())
    }
}

/// Milliseconds since the epoch at first use: one id per bench process, so the Reserve uids
/// sent to the scorer and to the collector by `footprint` match.
fn run_id() -> u64 {
    static ID: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ID.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default()
    })
}

fn reserve_uid(run_id: u64, i: u64) -> String {
    format!("bench-{run_id}-{i}")
}

pub async fn connect_collector(url: &str) -> anyhow::Result<CollectorServiceClient<Channel>> {
    let channel = Endpoint::from_shared(url.to_owned())?.tcp_nodelay(true).connect().await?;
    Ok(CollectorServiceClient::new(channel))
}

/// CollectorService/Reserve of the placement `Grpc::reserve(i)` makes.
pub async fn collector_reserve(
    mut client: CollectorServiceClient<Channel>,
    i: u64,
    cluster: usize,
) -> Result<(), String> {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let request = pb::CollectorServiceReserveRequest {
        pod: Some(pod(&reserve_uid(run_id(), i), "")),
        node_name: node_name(i as usize % cluster.max(1)),
        placed_at: Some(prost_types::Timestamp {
            seconds: now.as_secs() as i64,
            nanos: now.subsec_nanos() as i32,
        }),
        provisional_ttl: None,
    };
    client.reserve(request).await.map_err(code)?;
    Ok(())
}

/// The extender's verbs with names-only bodies (`nodeCacheCapable: true`).
#[derive(Clone)]
pub struct Extender {
    http: reqwest::Client,
    url: Arc<str>,
    /// Pre-serialised request bodies (a clone is a reference count).
    bodies: Arc<Vec<Bytes>>,
    nodes: usize,
}

/// `k8s.io/kube-scheduler/extender/v1.ExtenderArgs` with `Nodes: null` and `NodeNames`.
pub fn extender_args(names: &[String], scheduler_name: &str) -> serde_json::Value {
    serde_json::json!({
        "Pod": {
            "metadata": {
                "name": "bench", "namespace": "bench", "uid": "bench-uid",
                "labels": {"app": "bench"},
            },
            "spec": {
                "schedulerName": scheduler_name,
                "containers": [{
                    "name": "app",
                    "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                }],
            },
        },
        "Nodes": null,
        "NodeNames": names,
    })
}

impl Extender {
    /// `verb` is `prioritize` or `filter`.
    pub fn new(
        base: &str,
        prefix: &str,
        verb: &str,
        nodes: usize,
        cluster: usize,
        scheduler_name: &str,
        timeout: std::time::Duration,
    ) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder().tcp_nodelay(true).timeout(timeout).build()?;
        let bodies = windows(nodes, cluster)
            .iter()
            .map(|names| serde_json::to_vec(&extender_args(names, scheduler_name)))
            .collect::<Result<Vec<_>, _>>()?;
        let url = format!("{}{}/{verb}", base.trim_end_matches('/'), prefix);
        Ok(Extender {
            http,
            url: url.into(),
            bodies: Arc::new(bodies.into_iter().map(Bytes::from).collect()),
            nodes,
        })
    }

    async fn post(&self, i: u64) -> Result<Bytes, String> {
        self.post_body(self.bodies[i as usize % self.bodies.len()].clone()).await
    }

    async fn post_body(&self, body: Bytes) -> Result<Bytes, String> {
        let answer = self
            .http
            .post(&*self.url)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() { "timeout".to_owned() } else { "http transport".to_owned() }
            })?;
        let status = answer.status();
        let bytes = answer.bytes().await.map_err(|_| "http body".to_owned())?;
        if !status.is_success() {
            return Err(format!("http {}", status.as_u16()));
        }
        Ok(bytes)
    }

    /// prioritize answers a bare `HostPriorityList` array, one entry per candidate.
    pub async fn prioritize(self, i: u64) -> Result<(), String> {
        let bytes = self.post(i).await?;
        self.check_prioritize(&bytes)
    }

    /// prioritize with `body` (e.g. a pod with its own uid) instead of a pre-built one.
    pub async fn prioritize_body(&self, body: Bytes) -> Result<(), String> {
        let bytes = self.post_body(body).await?;
        self.check_prioritize(&bytes)
    }

    /// filter with `body` instead of a pre-built one.
    pub async fn filter_body(&self, body: Bytes) -> Result<(), String> {
        let bytes = self.post_body(body).await?;
        check_filter(&bytes)
    }

    fn check_prioritize(&self, bytes: &[u8]) -> Result<(), String> {
        let list: Vec<serde_json::Value> =
            serde_json::from_slice(bytes).map_err(|_| "prioritize: not a JSON array".to_owned())?;
        if list.len() != self.nodes {
            return Err("prioritize: wrong number of entries".into());
        }
        Ok(())
    }

    /// filter answers an `ExtenderFilterResult`; a non-empty `Error` is a failure.
    pub async fn filter(self, i: u64) -> Result<(), String> {
        let bytes = self.post(i).await?;
        check_filter(&bytes)
    }
}

fn check_filter(bytes: &[u8]) -> Result<(), String> {
    let result: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|_| "filter: not JSON".to_owned())?;
    match result.get("Error").and_then(|e| e.as_str()) {
        Some(e) if !e.is_empty() => Err("filter: Error set".into()),
        _ => Ok(()),
    }
}

/// One `ScorerService.Session` stream driven the way the scheduler plugin drives it: each
/// cycle writes the previous cycle's Reserve without waiting for it, then one Evaluate of
/// every node, and reads until that Evaluate's answer (node tables and acks on the way are
/// taken in passing).
pub struct Session {
    tx: tokio::sync::mpsc::Sender<pb::SessionRequest>,
    rx: tonic::Streaming<pb::SessionResponse>,
    generation: u64,
    table_len: usize,
    run_id: u64,
    cluster: usize,
    reserve: bool,
}

impl Session {
    /// `reserve: false` leaves out the Reserves (Evaluates only).
    pub async fn open(
        mut client: ScorerServiceClient<Channel>,
        cluster: usize,
        reserve: bool,
    ) -> anyhow::Result<Self> {
        // One message in flight each way at most per cycle: a small buffer is enough.
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let rx = client
            .session(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .context("opening a Session stream")?
            .into_inner();
        Ok(Session { tx, rx, generation: 0, table_len: 0, run_id: run_id(), cluster, reserve })
    }

    async fn send(&self, message: pb::session_request::Message) -> Result<(), String> {
        self.tx
            .send(pb::SessionRequest { message: Some(message) })
            .await
            .map_err(|_| "session: stream closed".to_owned())
    }

    /// Cycle `i`: Reserve of cycle `i - 1`'s pod (not waited for), then Evaluate `i`.
    pub async fn cycle(&mut self, i: u64) -> Result<(), String> {
        use pb::session_request::Message as In;
        use pb::session_response::Message as Out;
        if let Some(previous) = i.checked_sub(1).filter(|_| self.reserve) {
            self.send(In::Reserve(pb::SessionReserve {
                sequence: previous + 1,
                pod: Some(pod(&reserve_uid(self.run_id, previous), "")),
                node_name: node_name(previous as usize % self.cluster.max(1)),
                provisional_ttl: None,
            }))
            .await?;
        }
        self.send(In::Evaluate(pb::SessionEvaluate {
            policy: String::new(),
            request_id: i,
            pod: Some(pod(&format!("session-{i}"), "")),
            node_table_generation: self.generation,
        }))
        .await?;
        loop {
            let message = self.rx.message().await.map_err(code)?;
            match message.and_then(|m| m.message) {
                None => return Err("session: stream ended".into()),
                Some(Out::NodeTable(table)) => {
                    self.generation = table.generation;
                    self.table_len = table.node_names.len();
                }
                Some(Out::Ack(_)) => {}
                Some(Out::Evaluation(e)) if e.request_id == i => {
                    if !e.error.is_empty() {
                        return Err(format!("session: evaluation error: {}", e.error));
                    }
                    if e.node_table_generation != self.generation
                        || e.scores.len() != self.table_len
                    {
                        return Err("session: answer does not match the node table".into());
                    }
                    return Ok(());
                }
                Some(Out::Evaluation(_)) => return Err("session: answer to another request".into()),
            }
        }
    }
}
