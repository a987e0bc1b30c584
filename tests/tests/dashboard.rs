//! The Grafana dashboard (`deploy/grafana/waterline.json`) against a real Prometheus that
//! scrapes the real binaries: every panel query, with Grafana's variables substituted, must
//! return at least one series.
//!
//! What runs, all on loopback: the fake node-exporter (3 nodes) and Prometheus with the
//! shipped recording rules; a collector polling that Prometheus (two good metrics and one
//! whose PromQL is invalid, so the failure counters exist); a scorer streaming from it; an
//! extender in front of the scorer and a second extender pointed at a dead scorer address (so
//! the fallback counters exist); a second collector in shadow mode (`--shadow`, static
//! nodes, pods from a fake API server that binds two pods a round, so the shadow panels
//! have judgements). The test drives Filter, Score and Reserve through gRPC and
//! filter/prioritize through both extenders (one pod of another scheduler too), then
//! evaluates the queries. Metrics that appear only after an event are made to exist by
//! causing the event, never by dropping the query.
//!
//! The same Prometheus loads `deploy/prometheus/alerts.yaml`: every alerting rule must
//! evaluate without error on the live metrics, the three alerts this set-up provokes (stale
//! nodes, a failing PromQL query, extender fallbacks) must turn active and the others must
//! not. (promtool's unit tests, `deploy/prometheus/alerts_test.yaml`, fire and resolve each.)
//!
//! One exception, stated in the panel list below: `waterline_stale_breaker_open` is the
//! fleet staleness breaker's gauge (docs/design.md), which the scorer exports now; its panel is
//! evaluated whenever the scorer's `/metrics` carries that name, and skipped (with a message)
//! for a scorer built before the breaker.
//!
//! Build the binaries first: `cargo build --workspace --bins` (`make test` does).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};
use tonic::transport::Channel;
use waterline_api::v1 as pb;
use waterline_api::v1::scorer_service_client::ScorerServiceClient;
use waterline_tests::exporter::{FakeExporter, FakeNode};
use waterline_tests::fake_kube::ShadowCollector;
use waterline_tests::procs::{Service, bin, free_port, loopback, write_file};
use waterline_tests::prometheus::{Prometheus, PrometheusConfig, repo_path, wait_until};

/// What each Grafana variable of the dashboard becomes in the test.
const VARIABLES: [(&str, &str); 6] = [
    ("$__rate_interval", "1m"),
    ("$__interval", "1m"),
    ("$__range", "1h"),
    ("${job}", ".*"),
    ("$job", ".*"),
    ("$water_level", "40"),
];

/// Metrics a panel may use before any process exports them (see the module comment).
const NOT_YET_EXPORTED: [&str; 1] = ["waterline_stale_breaker_open"];

/// Two metrics read from the recording rules, every second, and one whose query Prometheus
/// refuses (an execution error: the policy loader rejects PromQL syntax errors, so the
/// query parses and only its regex is invalid), so `waterline_promql_failures_total` has a
/// series.
const POLICY: &str = "metrics:
  - {name: cpu_usage_avg_5m, resource: cpu, query: 'waterline:node_cpu_usage:avg5m', period: 1s, weight: 0.5, filterAbove: 65}
  - {name: mem_usage_avg_5m, resource: memory, query: 'waterline:node_memory_usage:avg5m', period: 1s, weight: 0.5, filterAbove: 65}
  - {name: broken_metric, resource: cpu, query: 'label_replace(vector(1), \"a\", \"$1\", \"b\", \"(\")', period: 1s, weight: 0.1}
curve: {kind: waterLevel, target: 40}
";

fn substitute(expr: &str) -> String {
    VARIABLES.iter().fold(expr.to_owned(), |e, (var, value)| e.replace(var, value))
}

/// `(panel title, expr)` of every target of every panel, rows' nested panels included.
fn panel_queries(dashboard: &Value) -> Vec<(String, String)> {
    fn walk(panels: &Value, out: &mut Vec<(String, String)>) {
        for panel in panels.as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or("(untitled)").to_owned();
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    out.push((title.clone(), expr.to_owned()));
                }
            }
            walk(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// The series selectors inside `label_values(<selector>, <label>)` of the query variables.
fn variable_queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for var in dashboard["templating"]["list"].as_array().into_iter().flatten() {
        if var["type"] != "query" {
            continue;
        }
        let query = var["query"]["query"].as_str().or(var["query"].as_str()).unwrap_or("");
        if let Some(inner) = query.strip_prefix("label_values(").and_then(|q| q.strip_suffix(')')) {
            let selector = inner.rsplit_once(',').map_or(inner, |(s, _)| s).trim();
            out.push((
                format!("variable ${}", var["name"].as_str().unwrap_or("?")),
                selector.into(),
            ));
        }
    }
    out
}

/// An extender process (it has no gRPC listener, so not a [`Service`]); killed when dropped.
struct Extender {
    child: Child,
    http: SocketAddr,
    log: tempfile::NamedTempFile,
}

impl Extender {
    async fn start(admin: SocketAddr, scorer_url: &str, policy: &str) -> Result<Extender> {
        let http = loopback(free_port());
        let log = tempfile::NamedTempFile::new()?;
        let out = File::options().append(true).open(log.path())?;
        let child = Command::new(bin("waterline-extender"))
            .args(["--http-addr", &http.to_string(), "--admin-addr", &admin.to_string()])
            .args(["--scorer-url", scorer_url, "--policy", policy])
            // Room for a slow first call on a loaded machine (the dead scorer fails at once).
            .args(["--scorer-timeout", "5s"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("starting waterline-extender")?;
        let extender = Extender { child, http, log };
        let ready = format!("http://{admin}/ready");
        wait_until(Duration::from_secs(20), || {
            let ready = ready.clone();
            async move {
                let status = reqwest::get(&ready).await?.status();
                ensure!(status.is_success(), "/ready: {status}");
                Ok(())
            }
        })
        .await
        .with_context(|| format!("extender never became ready; log:\n{}", extender.log_text()))?;
        Ok(extender)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    async fn post(&self, verb: &str, body: &Value) -> Result<Value> {
        let response = reqwest::Client::new()
            .post(format!("http://{}/waterline/v1/{verb}", self.http))
            .json(body)
            .send()
            .await?;
        let status = response.status();
        let text = response.text().await?;
        ensure!(status.is_success(), "{verb}: HTTP {status}: {text}\nlog:\n{}", self.log_text());
        Ok(serde_json::from_str(&text)?)
    }
}

impl Drop for Extender {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scrape_job(name: &str, targets: &[SocketAddr]) -> String {
    let list: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    format!("- job_name: {name}\n  static_configs:\n    - targets: [{}]\n", list.join(", "))
}

fn pod_fixture() -> Result<Value> {
    let path: PathBuf = repo_path("tests/fixtures/extender/pod.json");
    Ok(serde_json::from_str(&std::fs::read_to_string(&path)?)?)
}

fn pod(uid: &str) -> pb::PodInfo {
    pb::PodInfo {
        namespace: "default".into(),
        name: format!("pod-{uid}"),
        uid: uid.into(),
        cpu_request_millis: 500,
        memory_request_bytes: 256 << 20,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_returns_series() -> Result<()> {
    let text = std::fs::read_to_string(repo_path("deploy/grafana/waterline.json"))?;
    let dashboard: Value = serde_json::from_str(&text).context("waterline.json is not JSON")?;
    let mut queries = panel_queries(&dashboard);
    ensure!(queries.len() >= 20, "only {} panel queries found", queries.len());
    queries.extend(variable_queries(&dashboard));

    let exporter = FakeExporter::start(vec![
        FakeNode::new("node-a").with_cpu_busy(0.20).with_memory_used(0.30),
        FakeNode::new("node-b").with_cpu_busy(0.50).with_memory_used(0.45),
        FakeNode::new("node-c").with_cpu_busy(0.70).with_memory_used(0.60),
    ])
    .await?;
    let (collector_admin, scorer_admin) = (loopback(free_port()), loopback(free_port()));
    let (extender_admin, fallback_admin) = (loopback(free_port()), loopback(free_port()));
    // A second collector in shadow mode (static nodes, pods from a fake API server), so the
    // shadow panels have binds to show.
    let shadow_admin = loopback(free_port());
    let mut scrape = exporter.scrape_configs();
    scrape.push_str(&scrape_job("waterline-collector", &[collector_admin, shadow_admin]));
    scrape.push_str(&scrape_job("waterline-scorer", &[scorer_admin]));
    scrape.push_str(&scrape_job("waterline-scheduler", &[extender_admin, fallback_admin]));
    let prom = Prometheus::start(
        PrometheusConfig::new(scrape)
            .rule_file(repo_path("deploy/prometheus/rules.yml"))
            .rule_file(repo_path("deploy/prometheus/alerts.yaml")),
    )
    .await?;
    // The collector's first poll must find the recorded series.
    wait_until(Duration::from_secs(30), || async {
        let n = prom.query("waterline:node_memory_usage:avg5m").await?.len();
        ensure!(n == 3, "{n} recorded memory series, want 3");
        let n = prom.query("waterline:node_cpu_usage:avg5m").await?.len();
        ensure!(n == 3, "{n} recorded cpu series, want 3");
        Ok(())
    })
    .await
    .with_context(|| format!("recording rules; prometheus log:\n{}", prom.log_tail(2000)))?;

    let dir = tempfile::tempdir()?;
    let policy = write_file(dir.path(), "policy.yaml", POLICY);
    let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let collector = Service::spawn_on(
        "waterline-collector",
        loopback(free_port()),
        collector_admin,
        &args(&["--prometheus-url", &prom.url(), "--no-kube", "--policy", &policy]),
    )?;
    collector.wait_ready(Duration::from_secs(30)).await?;
    let scorer = Service::spawn_on(
        "waterline-scorer",
        loopback(free_port()),
        scorer_admin,
        &args(&["--collector-url", &collector.url(), "--policy", &policy]),
    )?;
    scorer.wait_ready(Duration::from_secs(30)).await?;
    // Wait until the scorer's snapshot has the three nodes from Prometheus.
    wait_until(Duration::from_secs(30), || async {
        let known = scorer.metric_value("waterline_nodes_known").await?;
        ensure!(known == 3.0, "scorer knows {known} nodes, want 3");
        Ok(())
    })
    .await
    .with_context(|| format!("collector log:\n{}", collector.log_text()))?;

    let shadow = ShadowCollector::start(loopback(free_port()), shadow_admin).await?;
    let extender = Extender::start(extender_admin, &scorer.url(), &policy).await?;
    // Nothing listens there: every call fails with UNAVAILABLE and is answered neutrally.
    let dead_scorer = format!("http://{}", loopback(free_port()));
    let fallback = Extender::start(fallback_admin, &dead_scorer, &policy).await?;

    // Scheduling traffic, repeated until Prometheus has scraped it all (rates need two
    // samples inside the window).
    let names: Vec<String> =
        ["node-a", "node-b", "node-c", "ghost-node"].iter().map(|n| n.to_string()).collect();
    let our_pod = pod_fixture()?;
    let mut other_pod = our_pod.clone();
    other_pod["spec"]["schedulerName"] = json!("default-scheduler");
    let traffic = Traffic {
        scorer: scorer.scorer_client().await?,
        extender: &extender,
        fallback: &fallback,
        ours: json!({"Pod": our_pod, "Nodes": null, "NodeNames": names}),
        other: json!({"Pod": other_pod, "Nodes": null, "NodeNames": names}),
        names,
    };
    // The ledger must not be empty when the dashboard reads it.
    traffic.drive(0).await?;

    let scorer_metrics = scorer.metrics().await?;
    let pending: Vec<&str> =
        NOT_YET_EXPORTED.iter().copied().filter(|m| !scorer_metrics.contains(m)).collect();

    let mut round = 0;
    let outcome = wait_until(Duration::from_secs(60), || {
        round += 1;
        let (round, queries, prom, pending, traffic) = (round, &queries, &prom, &pending, &traffic);
        // A bind the shadow collector judges as rejected (hot) and one it accepts (cool).
        shadow.bind(&format!("shadow-hot-{round}"), "hot");
        shadow.bind(&format!("shadow-cool-{round}"), "cool");
        async move {
            traffic.drive(round).await?;
            let mut empty = String::new();
            for (title, expr) in queries {
                if pending.iter().any(|m| expr.contains(m)) {
                    continue;
                }
                let promql = substitute(expr);
                ensure!(!promql.contains('$'), "{title}: unsubstituted variable in {promql}");
                let rows = prom.query(&promql).await.with_context(|| format!("panel {title}"))?;
                if rows.is_empty() {
                    let _ = writeln!(empty, "  panel {title:?}: {promql}");
                }
            }
            if !empty.is_empty() {
                bail!("queries without series:\n{empty}");
            }
            Ok(())
        }
    })
    .await;
    if let Err(e) = outcome {
        bail!(
            "{e:#}\n--- collector log ---\n{}\n--- scorer log ---\n{}\n--- extender log ---\n{}",
            tail(&collector.log_text()),
            tail(&scorer.log_text()),
            tail(&extender.log_text())
        );
    }

    // The alerting rules on the same live metrics: every rule evaluates without error, the
    // three conditions this set-up creates (a third of the metrics failing, so every node is
    // stale; half the extender answers being fallbacks) are active (pending: their `for`
    // is minutes), and the healthy ones are not.
    let alerts = wait_until(Duration::from_secs(30), || async {
        check_rule_health(&prom).await?;
        let active: Vec<(String, String)> = prom
            .query("ALERTS")
            .await?
            .into_iter()
            .map(|(labels, _)| {
                let name = labels.get("alertname").cloned().unwrap_or_default();
                (name, labels.get("metric").cloned().unwrap_or_default())
            })
            .collect();
        for want in
            ["WaterlineStaleNodesHigh", "WaterlinePromQLFailing", "WaterlineExtenderFallbacks"]
        {
            ensure!(active.iter().any(|(a, _)| a == want), "{want} not active: {active:?}");
        }
        ensure!(
            active.iter().all(|(a, m)| a != "WaterlinePromQLFailing" || m == "broken_metric"),
            "a good metric counted as failing: {active:?}"
        );
        for healthy in [
            "WaterlineSnapshotAgeHigh",
            "WaterlinePolicyReloadRejected",
            "WaterlineCollectorDown",
            "WaterlineCollectorAbsent",
        ] {
            ensure!(active.iter().all(|(a, _)| a != healthy), "{healthy} active: {active:?}");
        }
        Ok(active)
    })
    .await
    .with_context(|| format!("prometheus log:\n{}", prom.log_tail(2000)))?;
    eprintln!("dashboard: active alerts on the live metrics: {alerts:?}");

    let evaluated = queries.iter().filter(|(_, e)| !pending.iter().any(|m| e.contains(m))).count();
    let skipped: BTreeMap<&str, usize> = pending
        .iter()
        .map(|m| (*m, queries.iter().filter(|(_, e)| e.contains(m)).count()))
        .collect();
    eprintln!(
        "dashboard: {evaluated} queries returned series; skipped until a process exports the metric: {skipped:?}"
    );
    for (metric, n) in &skipped {
        ensure!(*n > 0, "{metric} is listed as not yet exported but no panel uses it");
    }
    Ok(())
}

/// Every rule Prometheus loaded has been evaluated without error (`health: ok`).
async fn check_rule_health(prom: &Prometheus) -> Result<()> {
    let body: Value = reqwest::get(format!("{}/api/v1/rules", prom.url())).await?.json().await?;
    let mut alerting = 0;
    for group in body["data"]["groups"].as_array().context("no rule groups")? {
        for rule in group["rules"].as_array().into_iter().flatten() {
            let name = rule["name"].as_str().unwrap_or("?");
            ensure!(
                rule["health"] == "ok",
                "rule {name}: health {} {}",
                rule["health"],
                rule["lastError"]
            );
            alerting += usize::from(rule["type"] == "alerting");
        }
    }
    ensure!(alerting >= 8, "{alerting} alerting rules loaded, want every rule of alerts.yaml");
    Ok(())
}

/// One round of scheduling traffic: Filter, Score and Reserve on the scorer; filter and
/// prioritize on both extenders; a pod of another scheduler on the live one.
struct Traffic<'a> {
    scorer: ScorerServiceClient<Channel>,
    extender: &'a Extender,
    fallback: &'a Extender,
    names: Vec<String>,
    ours: Value,
    other: Value,
}

impl Traffic<'_> {
    async fn drive(&self, round: usize) -> Result<()> {
        let mut client = self.scorer.clone();
        let filter = pb::FilterRequest {
            policy: String::new(),
            pod: Some(pod(&format!("f{round}"))),
            node_names: self.names.clone(),
            all_nodes: false,
        };
        client.filter(filter).await?;
        let score = pb::ScoreRequest {
            pod: Some(pod(&format!("s{round}"))),
            node_names: self.names.clone(),
            ..Default::default()
        };
        client.score(score).await?;
        let reserve = pb::ReserveRequest {
            pod: Some(pod(&format!("r{round}"))),
            node_name: "node-a".into(),
            provisional_ttl: None,
        };
        client.reserve(reserve).await?;
        for ext in [self.extender, self.fallback] {
            ext.post("filter", &self.ours).await?;
            ext.post("prioritize", &self.ours).await?;
        }
        self.extender.post("filter", &self.other).await?;
        Ok(())
    }
}

fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(3000);
    let start = (start..text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
    &text[start..]
}
