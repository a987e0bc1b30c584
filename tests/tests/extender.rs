//! waterline-extender through the real binaries: collector (`--static` nodes) → scorer →
//! extender, over loopback HTTP and gRPC. Every verb in both node modes, prioritize equal to
//! round(score / 10) of the scorer's own gRPC Score, profile gating, a scorer that goes away,
//! malformed and oversized bodies; one scorer call per pod over filter and prioritize, and a
//! burst that spreads thanks to provisional reservations (and piles up without them).
//!
//! Build the binaries first: `cargo build -p waterline-collector -p waterline-scorer
//! -p waterline-extender` (they are looked up beside this test executable).

use std::collections::BTreeMap;
use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};
use waterline_api::v1 as pb;
use waterline_api::v1::scorer_service_client::ScorerServiceClient;

// ---- processes ---------------------------------------------------------------------------

/// `target/<profile>/<name>`, beside `target/<profile>/deps/<this test>`.
fn bin(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().and_then(Path::parent).context("test executable outside target/")?;
    let path = dir.join(name);
    ensure!(
        path.exists(),
        "{} is missing: run `cargo build -p waterline-collector -p waterline-scorer \
         -p waterline-extender` first",
        path.display()
    );
    Ok(path)
}

fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/extender").join(name)
}

/// A running binary, killed when dropped; its output goes to a log file shown on failures.
struct Proc {
    name: &'static str,
    child: Option<Child>,
    log: tempfile::NamedTempFile,
    admin: SocketAddr,
}

impl Proc {
    fn spawn(name: &'static str, admin: SocketAddr, args: &[String]) -> Result<Proc> {
        Proc::spawn_with_env(name, admin, args, &[])
    }

    fn spawn_with_env(
        name: &'static str,
        admin: SocketAddr,
        args: &[String],
        env: &[(&str, String)],
    ) -> Result<Proc> {
        let log = tempfile::NamedTempFile::new()?;
        let out = File::options().append(true).open(log.path())?;
        let child = Command::new(bin(name)?)
            .arg("--admin-addr")
            .arg(admin.to_string())
            .args(args)
            .env("RUST_LOG", "info")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        Ok(Proc { name, child: Some(child), log, admin })
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Polls the admin `/ready` endpoint (scorer: ready once the first snapshot is in).
    async fn wait_ready(&self) -> Result<()> {
        let url = format!("http://{}/ready", self.admin);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(response) = reqwest::get(&url).await
                && response.status().is_success()
            {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!("{} never became ready; log:\n{}", self.name, self.log_text());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn metrics(&self) -> Result<String> {
        Ok(reqwest::get(format!("http://{}/metrics", self.admin)).await?.text().await?)
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The value of one sample line of a `/metrics` text (`name{labels} value`).
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

// ---- the cluster -------------------------------------------------------------------------

/// `count` nodes with cpu levels spread over 0..99 % (every seventh one over the 65 %
/// threshold), all with 8 cores and 32 GiB.
fn nodes_yaml(count: usize) -> String {
    let mut text = String::from("nodes:\n");
    for i in 0..count {
        let cpu = (i * 37) % 100;
        let mem = 10 + (i * 13) % 60;
        text.push_str(&format!(
            "  - {{name: {}, capacity: {{cpu: 8, memory: 32Gi}}, metrics: {{cpu_usage_avg_5m: {cpu}, mem_usage_avg_5m: {mem}}}}}\n",
            node_name(i)
        ));
    }
    text
}

fn node_name(i: usize) -> String {
    format!("node-{i:03}")
}

/// A `v1.Node` the way the scheduler's informer marshals it (managedFields included).
fn node_object(name: &str) -> Value {
    json!({
        "metadata": {
            "name": name, "uid": format!("uid-{name}"), "resourceVersion": "1234",
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-29T09:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": {}}}}]
        },
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": "2026-11-29T09:59:00Z", "lastTransitionTime": null,
                "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "6.1",
                "osImage": "Debian", "containerRuntimeVersion": "containerd://2.0",
                "kubeletVersion": "v1.33.0", "kubeProxyVersion": "", "operatingSystem": "linux",
                "architecture": "amd64"}
        }
    })
}

fn pod_json() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("pod.json")).unwrap()).unwrap()
}

/// What kube-scheduler's pod means to the scorer (tests/fixtures/extender/pod.json): app
/// 1 cpu / 1 GiB plus a sidecar 200m / 64 Mi; limits 2 + 0.5 cpu, 2 GiB + 128 Mi.
fn pod_info() -> pb::PodInfo {
    pb::PodInfo {
        namespace: "shop".into(),
        name: "web-7d4b9c-x2x9z".into(),
        uid: "6f1c2d3e-0000-4000-8000-000000000001".into(),
        labels: [
            ("app".to_owned(), "web".to_owned()),
            ("pod-template-hash".into(), "7d4b9c".into()),
        ]
        .into(),
        cpu_request_millis: 1200,
        cpu_limit_millis: 2500,
        memory_request_bytes: (1 << 30) + (64 << 20),
        memory_limit_bytes: (2 << 30) + (128 << 20),
        priority_class: "batch-high".into(),
        owner_kind: "ReplicaSet".into(),
        scheduler_name: "waterline-scheduler".into(),
        owner_name: "web-7d4b9c".into(),
        // The fixture has no waterline.io/ annotation (and no other one either).
        annotations: Default::default(),
        priority: 1000,
    }
}

fn names_args(pod: &Value, names: &[String]) -> String {
    json!({"Pod": pod, "Nodes": null, "NodeNames": names}).to_string()
}

fn list_args(pod: &Value, names: &[String]) -> String {
    let items: Vec<Value> = names.iter().map(|n| node_object(n)).collect();
    json!({"Pod": pod, "Nodes": {"metadata": {"resourceVersion": "99"}, "items": items}, "NodeNames": null})
        .to_string()
}

struct Stack {
    _dir: tempfile::TempDir,
    _collector: Proc,
    scorer: Proc,
    scorer_grpc: SocketAddr,
    extender: Proc,
    base: String,
    http: reqwest::Client,
}

impl Stack {
    async fn start(nodes: usize, extender_args: &[&str]) -> Result<Stack> {
        Stack::start_with_env(nodes, extender_args, &[]).await
    }

    async fn start_with_env(
        nodes: usize,
        extender_args: &[&str],
        extender_env: &[(&str, String)],
    ) -> Result<Stack> {
        let dir = tempfile::tempdir()?;
        let static_path = dir.path().join("nodes.yaml");
        std::fs::write(&static_path, nodes_yaml(nodes))?;
        let policy = fixture("policy.yaml").display().to_string();

        let collector_grpc = free_addr();
        let collector = Proc::spawn(
            "waterline-collector",
            free_addr(),
            &[
                "--grpc-addr".into(),
                collector_grpc.to_string(),
                "--static".into(),
                static_path.display().to_string(),
                "--policy".into(),
                policy.clone(),
            ],
        )?;
        collector.wait_ready().await?;

        let scorer_grpc = free_addr();
        let scorer = Proc::spawn(
            "waterline-scorer",
            free_addr(),
            &[
                "--grpc-addr".into(),
                scorer_grpc.to_string(),
                "--collector-url".into(),
                format!("http://{collector_grpc}"),
                "--policy".into(),
                policy.clone(),
            ],
        )?;
        scorer.wait_ready().await?;

        let http_addr = free_addr();
        let mut args: Vec<String> = vec![
            "--http-addr".into(),
            http_addr.to_string(),
            "--scorer-url".into(),
            format!("http://{scorer_grpc}"),
            "--policy".into(),
            policy,
        ];
        args.extend(extender_args.iter().map(|s| s.to_string()));
        // The default (200 ms) suits a scheduler; a test on a loaded machine needs room,
        // or a slow first call turns into a neutral answer and a confusing diff.
        if !extender_args.contains(&"--scorer-timeout") {
            args.extend(["--scorer-timeout".to_owned(), "5s".to_owned()]);
        }
        let extender =
            Proc::spawn_with_env("waterline-extender", free_addr(), &args, extender_env)?;
        extender.wait_ready().await?;
        Ok(Stack {
            _dir: dir,
            _collector: collector,
            scorer,
            scorer_grpc,
            extender,
            base: format!("http://{http_addr}/waterline/v1"),
            http: reqwest::Client::new(),
        })
    }

    async fn post_raw(
        &self,
        verb: &str,
        body: impl Into<reqwest::Body>,
    ) -> Result<reqwest::Response> {
        Ok(self
            .http
            .post(format!("{}/{verb}", self.base))
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await?)
    }

    async fn post(&self, verb: &str, body: impl Into<reqwest::Body>) -> Result<(u16, String)> {
        let response = self.post_raw(verb, body).await?;
        Ok((response.status().as_u16(), response.text().await?))
    }

    async fn post_ok(&self, verb: &str, body: String) -> Result<Value> {
        let (status, text) = self.post(verb, body).await?;
        ensure!(
            status == 200,
            "{verb}: HTTP {status}: {text}\nextender log:\n{}",
            self.extender.log_text()
        );
        Ok(serde_json::from_str(&text)?)
    }

    async fn scorer_client(&self) -> Result<ScorerServiceClient<tonic::transport::Channel>> {
        Ok(ScorerServiceClient::connect(format!("http://{}", self.scorer_grpc)).await?)
    }
}

fn names(count: usize) -> Vec<String> {
    (0..count).map(node_name).collect()
}

/// round(score / 10), half away from zero.
fn round10(score: i64) -> i64 {
    (score as f64 / 10.0).round() as i64
}

fn host_scores(answer: &Value) -> Vec<(String, i64)> {
    answer
        .as_array()
        .expect("prioritize answers a bare array")
        .iter()
        .map(|h| {
            let keys: Vec<&String> = h.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["Host", "Score"], "HostPriority keys");
            (h["Host"].as_str().unwrap().to_owned(), h["Score"].as_i64().expect("integer score"))
        })
        .collect()
}

// ---- the tests ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prioritize_equals_rounded_grpc_scores_for_500_names() -> Result<()> {
    // No provisional Reserve: it would change the scores the direct Score call compares with.
    let stack = Stack::start(500, &["--provisional-reserve=false"]).await?;
    let candidates = names(500);
    let answer = stack.post_ok("prioritize", names_args(&pod_json(), &candidates)).await?;
    let got = host_scores(&answer);

    let mut scorer = stack.scorer_client().await?;
    let direct = scorer
        .score(pb::ScoreRequest {
            pod: Some(pod_info()),
            node_names: candidates.clone(),
            explain: false,
            ..Default::default()
        })
        .await?
        .into_inner();
    let want: Vec<(String, i64)> =
        direct.scores.iter().map(|s| (s.node_name.clone(), round10(i64::from(s.score)))).collect();
    assert_eq!(got, want);
    // The cluster is spread enough that the mapping is not trivially constant.
    let distinct: std::collections::BTreeSet<i64> = got.iter().map(|(_, s)| *s).collect();
    assert!(distinct.len() >= 4, "{distinct:?}");
    assert!(got.iter().all(|(_, s)| (0..=10).contains(s)));

    // Full NodeList mode scores the same.
    let few = names(40);
    let answer = stack.post_ok("prioritize", list_args(&pod_json(), &few)).await?;
    assert_eq!(host_scores(&answer), want[..40].to_vec());

    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_in_both_node_modes() -> Result<()> {
    let stack = Stack::start(30, &[]).await?;
    let candidates = names(30);
    let mut scorer = stack.scorer_client().await?;
    let direct = scorer
        .filter(pb::FilterRequest {
            pod: Some(pod_info()),
            node_names: candidates.clone(),
            ..Default::default()
        })
        .await?
        .into_inner();
    ensure!(!direct.rejected.is_empty() && !direct.feasible_nodes.is_empty(), "{direct:?}");

    // Names only → names back, in request order; every dropped node has a short reason.
    let (status, text) = stack.post("filter", names_args(&pod_json(), &candidates)).await?;
    assert_eq!(status, 200, "{text}");
    // Go's field order and explicit nulls, on the raw text.
    assert!(text.starts_with(r#"{"Nodes":null,"NodeNames":["#), "{text}");
    // Load rejections are unresolvable (preemption cannot lower the load): every dropped
    // node is in FailedAndUnresolvableNodes, none in FailedNodes.
    assert!(text.contains(r#","FailedNodes":{},"FailedAndUnresolvableNodes":{"#), "{text}");
    assert!(text.ends_with(r#"},"Error":""}"#), "{text}");
    let answer: Value = serde_json::from_str(&text)?;
    assert_eq!(answer["Nodes"], Value::Null);
    assert_eq!(answer["FailedNodes"], json!({}));
    assert_eq!(answer["Error"], "");
    let passed: Vec<String> = serde_json::from_value(answer["NodeNames"].clone())?;
    assert_eq!(passed, direct.feasible_nodes);
    let failed: BTreeMap<String, String> =
        serde_json::from_value(answer["FailedAndUnresolvableNodes"].clone())?;
    let rejected: std::collections::BTreeSet<&String> = direct.rejected.keys().collect();
    assert_eq!(failed.keys().collect::<std::collections::BTreeSet<_>>(), rejected);
    for (node, reason) in &failed {
        assert!(reason.starts_with("waterline: ") && !reason.contains('.'), "{node}: {reason}");
    }

    // Full NodeList → the same node objects back, unchanged.
    let answer = stack.post_ok("filter", list_args(&pod_json(), &candidates)).await?;
    assert_eq!(answer["NodeNames"], Value::Null);
    assert_eq!(answer["Nodes"]["metadata"], json!({"resourceVersion": "99"}));
    let items = answer["Nodes"]["items"].as_array().unwrap();
    let want: Vec<Value> = direct.feasible_nodes.iter().map(|n| node_object(n)).collect();
    assert_eq!(items, &want);
    let failed_list: BTreeMap<String, String> =
        serde_json::from_value(answer["FailedAndUnresolvableNodes"].clone())?;
    assert_eq!(failed_list, failed);
    assert_eq!(answer["FailedNodes"], json!({}));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempt_and_bind() -> Result<()> {
    let stack = Stack::start(3, &[]).await?;
    let victim = json!({"metadata": {"name": "v", "namespace": "shop", "uid": "victim-uid"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {}}]}, "status": {}});
    // nodeCacheCapable: false → full victims in, Meta form out.
    let body = json!({"Pod": pod_json(), "NodeNameToVictims":
        {"node-001": {"Pods": [victim], "NumPDBViolations": 1}}, "NodeNameToMetaVictims": null});
    let answer = stack.post_ok("preempt", body.to_string()).await?;
    assert_eq!(
        answer,
        json!({"NodeNameToMetaVictims": {"node-001": {"Pods": [{"UID": "victim-uid"}], "NumPDBViolations": 1}}})
    );
    // nodeCacheCapable: true → Meta in, the same out.
    let meta = json!({"node-000": {"Pods": [{"UID": "a"}, {"UID": "b"}], "NumPDBViolations": 0}});
    let body = json!({"Pod": pod_json(), "NodeNameToVictims": null, "NodeNameToMetaVictims": meta});
    let answer = stack.post_ok("preempt", body.to_string()).await?;
    assert_eq!(answer, json!({"NodeNameToMetaVictims": meta}));

    // Bind is off unless --enable-bind: a clear Error, never a silent success.
    let body = json!({"PodName": "web", "PodNamespace": "shop", "PodUID": "u", "Node": "node-000"});
    let answer = stack.post_ok("bind", body.to_string()).await?;
    assert!(answer["Error"].as_str().unwrap().contains("--enable-bind"), "{answer}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_schedulers_and_a_dead_scorer_get_neutral_answers() -> Result<()> {
    let mut stack = Stack::start(10, &["--scorer-timeout", "2s"]).await?;
    let candidates = names(10);
    let mut other = pod_json();
    other["spec"]["schedulerName"] = json!("default-scheduler");

    let answer = stack.post_ok("filter", names_args(&other, &candidates)).await?;
    assert_eq!(answer["NodeNames"], json!(candidates));
    assert_eq!(answer["FailedNodes"], json!({}));
    let answer = stack.post_ok("prioritize", names_args(&other, &candidates)).await?;
    assert!(host_scores(&answer).iter().all(|(_, s)| *s == 0));
    let metrics = stack.extender.metrics().await?;
    assert_eq!(sample(&metrics, r#"waterline_extender_gated_total{verb="filter"}"#), 1.0);
    assert_eq!(
        sample(
            &stack.scorer.metrics().await?,
            r#"waterline_scorer_grpc_requests_total{method="Score",code="OK"}"#
        ),
        0.0
    );

    // Our pod is scored while the scorer is up...
    let answer = stack.post_ok("prioritize", names_args(&pod_json(), &candidates)).await?;
    assert!(host_scores(&answer).iter().any(|(_, s)| *s != 0));
    let answer = stack.post_ok("filter", names_args(&pod_json(), &candidates)).await?;
    assert_ne!(answer["FailedAndUnresolvableNodes"], Value::Null);

    // ...and answered neutrally once it is gone.
    stack.scorer.kill();
    let answer = stack.post_ok("filter", list_args(&pod_json(), &candidates)).await?;
    let want: Vec<Value> = candidates.iter().map(|n| node_object(n)).collect();
    assert_eq!(answer["Nodes"]["items"], json!(want));
    assert_eq!(answer["FailedNodes"], json!({}));
    let answer = stack.post_ok("prioritize", names_args(&pod_json(), &candidates)).await?;
    assert_eq!(host_scores(&answer), candidates.iter().map(|n| (n.clone(), 0)).collect::<Vec<_>>());
    let metrics = stack.extender.metrics().await?;
    let fallbacks: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("waterline_extender_fallbacks_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(fallbacks >= 2.0, "{metrics}");
    assert!(stack.extender.log_text().contains("scorer gave no answer"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_bodies() -> Result<()> {
    let stack = Stack::start(3, &["--max-body", "64Ki"]).await?;
    for (verb, body) in [
        ("filter", "{\"Pod\":".to_owned()),
        ("prioritize", "not json".to_owned()),
        ("filter", json!({"Pod": pod_json(), "Nodes": null, "NodeNames": null}).to_string()),
        ("preempt", "[1,2]".to_owned()),
        ("bind", "{\"PodName\":7}".to_owned()),
    ] {
        let (status, text) = stack.post(verb, body.clone()).await?;
        assert_eq!(status, 400, "{verb} {body}: {text}");
        let error: Value = serde_json::from_str(&text)?;
        assert!(error["Error"].as_str().is_some_and(|e| !e.is_empty()), "{text}");
    }
    // 2 000 names ≈ 20 KiB fits; 10 000 full nodes do not.
    stack.post_ok("prioritize", names_args(&pod_json(), &names(2000))).await?;
    let response = stack.post_raw("filter", list_args(&pod_json(), &names(200))).await?;
    assert_eq!(response.status(), 413);
    // The body was refused unread, so the connection ends; the client must be told, or its
    // pool sends the next request down a closing socket.
    assert_eq!(response.headers()["connection"], "close");
    let text = response.text().await?;
    assert!(text.contains("--max-body"), "{text}");
    // Still serving.
    stack.post_ok("filter", names_args(&pod_json(), &names(3))).await?;
    Ok(())
}

// ---- bind against a fake API server --------------------------------------------------------

/// Bindings posted to the fake API server.
type Posted = std::sync::Arc<std::sync::Mutex<Vec<Value>>>;

/// Answers GET of the fixture pod and POST of its `binding` subresource, like kube-apiserver.
async fn fake_apiserver() -> Result<(SocketAddr, Posted)> {
    use axum::extract::{Path as UrlPath, State};
    use axum::routing::{get, post};

    let posted = Posted::default();
    let app = axum::Router::new()
        .route(
            "/api/v1/namespaces/{ns}/pods/{name}",
            get(|UrlPath((ns, name)): UrlPath<(String, String)>| async move {
                let mut pod = pod_json();
                if (ns.as_str(), name.as_str()) != ("shop", "web-7d4b9c-x2x9z") {
                    return (
                        axum::http::StatusCode::NOT_FOUND,
                        axum::Json(json!({"kind": "Status",
                        "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": format!("pods \"{name}\" not found"), "reason": "NotFound",
                        "code": 404})),
                    );
                }
                pod["apiVersion"] = json!("v1");
                pod["kind"] = json!("Pod");
                (axum::http::StatusCode::OK, axum::Json(pod))
            }),
        )
        .route(
            "/api/v1/namespaces/{ns}/pods/{name}/binding",
            post(|State(posted): State<Posted>, axum::Json(body): axum::Json<Value>| async move {
                posted.lock().unwrap().push(body);
                (
                    axum::http::StatusCode::CREATED,
                    axum::Json(json!({"kind": "Status",
                    "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})),
                )
            }),
        )
        .with_state(posted.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((addr, posted))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_creates_the_binding_and_reserves() -> Result<()> {
    let (apiserver, posted) = fake_apiserver().await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: fake, cluster: {{server: \"http://{apiserver}\"}}}}]\n\
             users: [{{name: fake, user: {{token: dummy}}}}]\n\
             contexts: [{{name: fake, context: {{cluster: fake, user: fake}}}}]\ncurrent-context: fake\n"
        ),
    )?;
    let env = [("KUBECONFIG", kubeconfig.display().to_string())];
    let stack = Stack::start_with_env(3, &["--enable-bind"], &env).await?;

    let args = json!({"PodName": "web-7d4b9c-x2x9z", "PodNamespace": "shop",
        "PodUID": "6f1c2d3e-0000-4000-8000-000000000001", "Node": "node-002"});
    let answer = stack.post_ok("bind", args.to_string()).await?;
    assert_eq!(answer, json!({"Error": ""}));
    let bindings = posted.lock().unwrap().clone();
    let [binding] = bindings.as_slice() else { bail!("{bindings:?}") };
    assert_eq!(binding["metadata"]["name"], "web-7d4b9c-x2x9z");
    assert_eq!(binding["metadata"]["uid"], "6f1c2d3e-0000-4000-8000-000000000001");
    assert_eq!(binding["target"], json!({"apiVersion": "v1", "kind": "Node", "name": "node-002"}));
    let reserves = sample(
        &stack.scorer.metrics().await?,
        r#"waterline_scorer_grpc_requests_total{method="Reserve",code="OK"}"#,
    );
    assert_eq!(reserves, 1.0);

    // A different uid (the pod was replaced) or a missing pod: an Error, no binding.
    let stale = json!({"PodName": "web-7d4b9c-x2x9z", "PodNamespace": "shop", "PodUID": "old",
        "Node": "node-002"});
    let answer = stack.post_ok("bind", stale.to_string()).await?;
    assert!(answer["Error"].as_str().unwrap().contains("uid"), "{answer}");
    let missing = json!({"PodName": "gone", "PodNamespace": "shop", "PodUID": "", "Node": "n"});
    let answer = stack.post_ok("bind", missing.to_string()).await?;
    assert!(answer["Error"].as_str().unwrap().contains("not found"), "{answer}");
    assert_eq!(posted.lock().unwrap().len(), 1);
    Ok(())
}

/// `pod_json()` as pod number `i` of a burst (its own name and uid).
fn burst_pod(i: usize) -> Value {
    let mut pod = pod_json();
    pod["metadata"]["name"] = json!(format!("burst-{i}"));
    pod["metadata"]["uid"] = json!(format!("6f1c2d3e-0000-4000-8000-{i:012}"));
    pod
}

/// What one burst did: pods per node, and the extender's scorer calls.
struct Burst {
    placed: BTreeMap<String, usize>,
    /// Per node a pod went to: the scorer's prediction of its cpu afterwards before any
    /// further pod (observed + ledger, from Score's explanation) and the ledger's share of
    /// it, in percent.
    predicted_cpu: BTreeMap<String, (f64, f64)>,
    evaluates: f64,
    scores: f64,
    cache_hits: f64,
    reserves: f64,
}

/// `pods` pods decided one after another, the way kube-scheduler runs a burst: filter, then
/// prioritize of the feasible nodes, then the pod goes to the best-scored one (a scheduler
/// with no other scorer, the first of equal scores). Nothing tells waterline where a pod
/// went: no bind verb, and the collector has no pod watch (`--static`), as when the pods
/// are decided faster than the watch shows their binds.
async fn burst(extender_args: &[&str], nodes: usize, pods: usize) -> Result<Burst> {
    let stack = Stack::start(nodes, extender_args).await?;
    let candidates = names(nodes);
    let mut placed = BTreeMap::new();
    for i in 0..pods {
        let pod = burst_pod(i);
        let filtered = stack.post_ok("filter", names_args(&pod, &candidates)).await?;
        let feasible: Vec<String> = serde_json::from_value(filtered["NodeNames"].clone())?;
        ensure!(!feasible.is_empty(), "pod {i}: no feasible node: {filtered}");
        let answer = stack.post_ok("prioritize", names_args(&pod, &feasible)).await?;
        let scores = host_scores(&answer);
        let top = scores.iter().map(|(_, s)| *s).max().unwrap_or_default();
        let (chosen, _) = scores.iter().find(|(_, s)| *s == top).unwrap();
        *placed.entry(chosen.clone()).or_insert(0) += 1;
    }
    // The last provisional Reserve goes out after its prioritize answered: wait for it
    // (hang guard only).
    let reserve_series = r#"waterline_extender_scorer_requests_total{method="Reserve",code="OK"}"#;
    let expected_reserves =
        if extender_args.contains(&"--provisional-reserve=false") { 0.0 } else { pods as f64 };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while sample(&stack.extender.metrics().await?, reserve_series) < expected_reserves
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut scorer = stack.scorer_client().await?;
    let request = pb::ScoreRequest {
        pod: Some(pb::PodInfo {
            namespace: "default".into(),
            name: "probe".into(),
            uid: "probe".into(),
            ..Default::default()
        }),
        node_names: placed.keys().cloned().collect(),
        explain: true,
        ..Default::default()
    };
    let mut predicted_cpu = BTreeMap::new();
    for node in scorer.score(request).await?.into_inner().scores {
        let cpu = node.terms.iter().find(|t| t.metric == "cpu_usage_avg_5m").context("cpu term")?;
        // The estimator gives even a pod without requests a share: leave it out.
        predicted_cpu.insert(
            node.node_name,
            (cpu.observed_percent + cpu.ledger_percent, cpu.ledger_percent),
        );
    }
    let extender = stack.extender.metrics().await?;
    let rpc = |method: &str| {
        sample(
            &extender,
            &format!(r#"waterline_extender_scorer_requests_total{{method="{method}",code="OK"}}"#),
        )
    };
    Ok(Burst {
        placed,
        predicted_cpu,
        evaluates: rpc("Evaluate"),
        scores: rpc("Score"),
        reserves: rpc("Reserve"),
        cache_hits: sample(
            &extender,
            r#"waterline_extender_score_cache_total{result="hit",reason=""}"#,
        ),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_spreads_with_provisional_reservations_and_piles_up_without() -> Result<()> {
    // 20 nodes, 13 of them below 60 % cpu; each pod is estimated at a few tens of percent
    // of a node, so a cool node takes one or two before it is no longer the coolest.
    const NODES: usize = 20;
    const PODS: usize = 10;
    let before = burst(&["--provisional-reserve=false"], NODES, PODS).await?;
    let after = burst(&[], NODES, PODS).await?;
    eprintln!("pods per node without provisional reservations: {:?}", before.placed);
    eprintln!("pods per node with provisional reservations:    {:?}", after.placed);
    eprintln!("cpu (observed + ledger, ledger) afterwards:     {:?}", after.predicted_cpu);

    // Before: every pod judged on the same ledger, so all take the same best node.
    assert_eq!(before.placed.values().collect::<Vec<_>>(), [&PODS], "{:?}", before.placed);
    // After: each pod's guess is in the ledger the next one is judged on.
    let most = after.placed.values().copied().max().unwrap_or_default();
    assert!(after.placed.len() >= 3, "{:?}", after.placed);
    assert!(most <= PODS / 2, "{:?}", after.placed);
    // A burst on the extender path never takes a node past a filter threshold —
    // as the scorer sees it. Filter judged each pod on observed + ledger (the earlier pods'
    // guesses) + the pod itself against `filterAbove: 65`, and each guess went to a node
    // that passed, so no node's prediction ends above it. The guess is the extender's best
    // node; on a tie at the top the scheduler may pick another (kube-scheduler picks at
    // random among equal totals, and its own plugins' scores add to the extender's), and
    // until the pod watch or the bind verb replaces the guess (neither runs here) that node
    // carries a pod the ledger puts elsewhere: in this test's runs `node-011` received 4
    // pods (7 % + 4 × 17.7 % = 77.8 % real) while the ledger held 3 guesses there (60.1 %).
    for (node, (predicted, ledger)) in &after.predicted_cpu {
        assert!(
            *predicted <= 65.0,
            "{node} at {predicted} % cpu after the burst: {:?}",
            after.predicted_cpu
        );
        // Not vacuous: the guesses are what the prediction is made of.
        assert!(
            *ledger > 0.0,
            "{node} received a pod but its ledger share is 0: {:?}",
            after.predicted_cpu
        );
    }

    // One scorer call per pod on the request path (Evaluate, answered again from the cache at
    // prioritize); the provisional Reserve goes out beside it.
    for run in [&before, &after] {
        assert_eq!((run.evaluates, run.scores, run.cache_hits), (PODS as f64, 0.0, PODS as f64));
    }
    assert_eq!((before.reserves, after.reserves), (0.0, PODS as f64));
    Ok(())
}
