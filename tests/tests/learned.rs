//! The learned estimate end to end (docs/design.md#learned-estimate): a fake kubelet serves
//! cAdvisor's per-container series for the pods of one Deployment that use twice their cpu
//! request and 1.5 times their memory request; a real Prometheus records them with the
//! shipped rules (deploy/prometheus/rules.yml, group waterline-pod-usage: the pause
//! container and the whole-pod cgroup left out); the collector, watching the pods on a fake
//! API server, learns the workload's ratios from the policy's four queries and streams the
//! table; a scorer prices a new pod of the workload at request × 2 with source LEARNED and
//! a pod of another workload by the factor; `kubectl waterline` shows both. A failing
//! Prometheus keeps the table; without the per-pod series, learning is off (factor prices,
//! `waterline_learn_active` 0, one warning).
//!
//! Needs the binaries: `cargo build -p waterline-collector -p waterline-scorer -p
//! waterline-cli --bins`.

use std::process::Command;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use waterline_api::v1 as pb;
use waterline_tests::cadvisor::{FakeCadvisor, FakePod};
use waterline_tests::fake_kube::{FakeKube, node};
use waterline_tests::procs::{Service, bin, write_file};
use waterline_tests::prometheus::{Prometheus, PrometheusConfig, repo_path, wait_until};

const MI: f64 = 1_048_576.0;

/// One cpu metric (20 % on n1, from PromQL itself: this test is about pods, not nodes), and
/// learning over a 20 s window refreshed every second, from two pods and 12 samples on.
const POLICY: &str = r#"metrics:
  - {name: cpu_usage_avg_5m, resource: cpu, query: 'label_replace(vector(20), "node", "n1", "", "")', period: 1s, weight: 1}
estimator:
  learn: {window: 20s, refresh: 1s, minPods: 2, minSamples: 12}
"#;

const WEB_PODS: [&str; 3] = ["web-5d8f-a", "web-5d8f-b", "web-5d8f-c"];

/// A running pod of shop/Deployment/web on n1 (ReplicaSet web-5d8f): `app` requests 400m
/// and 200Mi, `sidecar` 100m and 56Mi, so the pod 500m and 256Mi.
fn web_pod(name: &str) -> Value {
    let container = |name: &str, cpu: &str, memory: &str| {
        json!({"name": name, "image": "x",
               "resources": {"requests": {"cpu": cpu, "memory": memory}}})
    };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                     "resourceVersion": "5", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"app": "web", "pod-template-hash": "5d8f"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": "web-5d8f", "uid": "rs-1", "controller": true}]},
        "spec": {"nodeName": "n1", "containers": [
            container("app", "400m", "200Mi"), container("sidecar", "100m", "56Mi")]},
        "status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:10Z"}]}
    })
}

/// The series of the web pods: 0.9 + 0.1 cores (2 × 500m) and 300Mi + 84Mi (1.5 × 256Mi);
/// and a bare pod `debug` using 200m, one pod: too little evidence to learn from.
fn fake_pods() -> Vec<FakePod> {
    let mut pods: Vec<FakePod> = WEB_PODS
        .iter()
        .map(|name| {
            FakePod::new("shop", name).with_container("app", 0.9, 300.0 * MI).with_container(
                "sidecar",
                0.1,
                84.0 * MI,
            )
        })
        .collect();
    pods.push(FakePod::new("shop", "debug").with_container("sh", 0.2, 10.0 * MI));
    pods
}

fn bare_pod(name: &str) -> Value {
    let mut pod = web_pod(name);
    pod["metadata"].as_object_mut().map(|m| m.remove("ownerReferences"));
    pod
}

/// A new pod of `owner` (a ReplicaSet with the template hash 5d8f), requesting 500m and
/// 256Mi.
fn new_pod(owner: &str) -> pb::PodInfo {
    pb::PodInfo {
        namespace: "shop".into(),
        name: format!("{owner}-new"),
        uid: format!("uid-{owner}-new"),
        labels: [("pod-template-hash".to_string(), "5d8f".to_string())].into(),
        owner_kind: "ReplicaSet".into(),
        owner_name: owner.into(),
        cpu_request_millis: 500,
        memory_request_bytes: 256 << 20,
        ..Default::default()
    }
}

struct Stack {
    prometheus: Prometheus,
    collector: Service,
    scorer: Service,
    _kube: FakeKube,
    _cadvisor: FakeCadvisor,
    _dir: tempfile::TempDir,
}

/// Prometheus with the shipped rules (scraping the fake kubelet when `series`, with six
/// minutes of its history so `rate(…[5m])` reads full windows at once), the fake API
/// server with the web pods and `debug` on n1 (8 cores), a collector on both, a scorer.
async fn stack(series: bool) -> Result<Stack> {
    let cadvisor = FakeCadvisor::start(fake_pods()).await?;
    let rules = repo_path("deploy/prometheus/rules.yml");
    let config = if series {
        let now = SystemTime::now();
        let history = cadvisor.history(
            now - Duration::from_secs(360),
            now - Duration::from_secs(2),
            Duration::from_secs(10),
        )?;
        PrometheusConfig::new(cadvisor.scrape_configs()).rule_file(rules).backfill(history)
    } else {
        PrometheusConfig::new("").rule_file(rules)
    };
    let prometheus = Prometheus::start(config).await?;
    let mut pods: Vec<Value> = WEB_PODS.iter().map(|name| web_pod(name)).collect();
    pods.push(bare_pod("debug"));
    let kube = FakeKube::start(pods, vec![node("n1", "8", "10.0.0.1")]).await?;
    let dir = tempfile::tempdir()?;
    let policy = write_file(dir.path(), "policy.yaml", POLICY);
    let args: Vec<String> = [
        "--prometheus-url",
        &prometheus.url(),
        "--kubeconfig",
        &kube.kubeconfig(dir.path()),
        "--policy",
        &policy,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let collector = Service::collector(&args).await?;
    let scorer = Service::scorer(collector.grpc, &["--policy".into(), policy]).await?;
    Ok(Stack { prometheus, collector, scorer, _kube: kube, _cadvisor: cadvisor, _dir: dir })
}

impl Stack {
    async fn learned(&self) -> Result<Vec<pb::WorkloadUsage>> {
        let mut client = self.collector.collector_client().await?;
        Ok(client.list_nodes(pb::ListNodesRequest::default()).await?.into_inner().learned)
    }

    /// The scorer's Score with explain of `pod` on n1: its estimate and the cpu term.
    async fn explain(&self, pod: pb::PodInfo) -> Result<(pb::PodEstimate, pb::ScoreTerm)> {
        let mut client = self.scorer.scorer_client().await?;
        let request = pb::ScoreRequest {
            pod: Some(pod),
            node_names: vec!["n1".into()],
            explain: true,
            ..Default::default()
        };
        let answer = client.score(request).await?.into_inner();
        let term = answer.scores.first().and_then(|s| s.terms.first()).context("no term")?;
        Ok((answer.estimate.context("explain without an estimate")?, term.clone()))
    }

    fn cli(&self, args: &[&str]) -> Result<String> {
        let out = Command::new(bin("kubectl-waterline"))
            .args(["--scorer", &self.scorer.grpc.to_string()])
            .args(["--collector", &self.collector.url()])
            .args(args)
            .output()?;
        ensure!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(String::from_utf8(out.stdout)?)
    }
}

fn kind(source: &Option<pb::EstimateSource>) -> pb::EstimateSourceKind {
    source.as_ref().map_or(pb::EstimateSourceKind::Unspecified, |s| s.kind())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_using_twice_its_request_prices_its_next_pod_at_twice_the_request() -> Result<()>
{
    let mut stack = stack(true).await?;
    // Each web pod: 1 core of 500m requested (the pause container's 1m and the whole-pod
    // cgroup left out, or it would read 2 × 1.001 / 0.5 ≈ 4), 384Mi of 256Mi.
    let web = wait_until(Duration::from_secs(30), || async {
        let learned = stack.learned().await?;
        ensure!(learned.len() == 1, "{learned:?}");
        let web = &learned[0];
        let cpu = web.cpu.as_ref().context("no cpu")?;
        let ratio = cpu.ratio.context("no ratio")?;
        ensure!((ratio - 2.0).abs() < 0.04 && cpu.pods == 3 && cpu.samples >= 12, "{web:?}");
        Ok(web.clone())
    })
    .await
    .with_context(|| format!("collector log:\n{}", stack.collector.log_text()))?;
    assert_eq!(
        (web.namespace.as_str(), web.kind.as_str(), web.name.as_str()),
        ("shop", "Deployment", "web")
    );
    let memory = web.memory.context("no memory")?;
    assert!((memory.ratio.unwrap_or_default() - 1.5).abs() < 1e-9, "{memory:?}");
    assert!((memory.usage - 384.0 * MI).abs() < 1.0, "{memory:?}");
    // The bare pod `debug` is one pod: below minPods, so not in the table (checked above:
    // one workload).

    // The scorer got the table: 500m × ~2.0 and 256Mi × 1.5 = 384Mi, LEARNED.
    let (estimate, term) = wait_until(Duration::from_secs(10), || async {
        let (estimate, term) = stack.explain(new_pod("web-5d8f")).await?;
        ensure!(kind(&estimate.cpu) == pb::EstimateSourceKind::Learned, "{estimate:?}");
        Ok((estimate, term))
    })
    .await?;
    assert!((estimate.cpu_millis - 1000).abs() <= 20, "{estimate:?}");
    assert_eq!(estimate.memory_bytes, 384 << 20);
    assert_eq!(kind(&estimate.memory), pb::EstimateSourceKind::Learned);
    assert_eq!(estimate.workload, "shop/Deployment/web");
    let cpu = estimate.cpu.as_ref().context("cpu")?;
    assert_eq!((cpu.pods, cpu.ratio.map(|r| (r - 2.0).abs() < 0.04)), (3, Some(true)));
    // The term's incoming share is that estimate: ~1000m of 8 cores, 12.5 %.
    let share = estimate.cpu_millis as f64 / 8000.0 * 100.0;
    assert!((term.incoming_percent - share).abs() < 1e-9, "{term:?}");
    assert!((term.predicted_percent - (20.0 + share)).abs() < 1e-9, "{term:?}");

    // Another workload's pod: 500m × 0.85 = 425m and 256Mi × 0.70, by the factors.
    let (other, _) = stack.explain(new_pod("api-7c9b")).await?;
    assert_eq!((other.cpu_millis, other.workload.as_str()), (425, ""));
    assert_eq!(other.memory_bytes, (256.0 * MI * 0.7f64).round() as i64);
    assert_eq!(kind(&other.cpu), pb::EstimateSourceKind::Factor);
    assert_eq!(other.cpu.as_ref().map(|s| s.factor), Some(0.85));

    assert_eq!(stack.collector.metric_value("waterline_learn_active").await?, 1.0);
    assert_eq!(stack.collector.metric_value("waterline_learned_workloads").await?, 1.0);
    assert_eq!(stack.collector.metric_value("waterline_learn_tracked_pods").await?, 4.0);

    // kubectl waterline: the table, and explain's estimate line.
    let table = stack.cli(&["learned"])?;
    let row =
        table.lines().find(|l| l.starts_with("shop/Deployment/web")).context(table.clone())?;
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert!(cells[1].starts_with("2.0") || cells[1].starts_with("1.9"), "{table}");
    assert_eq!((cells[4], cells[5], cells[7]), ("1.50", "384Mi", "3"), "{table}");
    let explained = stack.cli(&[
        "explain",
        "-n",
        "shop",
        "--owner-kind",
        "ReplicaSet",
        "--owner-name",
        "web-5d8f",
        "-l",
        "pod-template-hash=5d8f",
        "--cpu",
        "500m",
        "--memory",
        "256Mi",
    ])?;
    let line =
        explained.lines().find(|l| l.starts_with("estimate: ")).context(explained.clone())?;
    assert!(line.contains("learned from shop/Deployment/web (ratio "), "{line}");
    assert!(line.contains("memory 384Mi learned from shop/Deployment/web (ratio 1.50, 3 pods"));

    // Prometheus dies: the queries fail, counted, and the table stays as it was.
    stack.prometheus.stop()?;
    let errors = r#"waterline_learn_query_errors_total{query="cpu"}"#;
    wait_until(Duration::from_secs(20), || async {
        ensure!(stack.collector.metric_value(errors).await? >= 1.0, "no query error yet");
        Ok(())
    })
    .await?;
    assert_eq!(stack.learned().await?.len(), 1, "a failed refresh keeps the table");
    let (estimate, _) = stack.explain(new_pod("web-5d8f")).await?;
    assert_eq!(kind(&estimate.cpu), pb::EstimateSourceKind::Learned);
    assert!(stack.collector.log_text().contains("the learned table is kept as it was"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_per_pod_series_learning_is_off_and_pods_are_priced_by_the_factors()
-> Result<()> {
    let stack = stack(false).await?;
    // Three refreshes (one a second) with every query answering nothing.
    let refreshes = "waterline_learn_refresh_duration_seconds_count";
    wait_until(Duration::from_secs(20), || async {
        ensure!(stack.collector.metric_value(refreshes).await? >= 3.0, "fewer than 3 refreshes");
        Ok(())
    })
    .await?;
    assert!(stack.learned().await?.is_empty());
    assert_eq!(stack.collector.metric_value("waterline_learn_active").await?, 0.0);
    assert_eq!(stack.collector.metric_value("waterline_learned_workloads").await?, 0.0);
    let (estimate, _) = stack.explain(new_pod("web-5d8f")).await?;
    assert_eq!((estimate.cpu_millis, kind(&estimate.cpu)), (425, pb::EstimateSourceKind::Factor));
    assert_eq!(kind(&estimate.memory), pb::EstimateSourceKind::Factor);
    // One warning, naming the queries, however many refreshes.
    let log = stack.collector.log_text();
    let warnings: Vec<&str> =
        log.lines().filter(|l| l.contains("learner queries returned no series")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(warnings[0].contains("waterline:pod_cpu_usage:rate5m"), "{}", warnings[0]);
    assert!(warnings[0].contains("memorySamples"), "{}", warnings[0]);
    Ok(())
}
