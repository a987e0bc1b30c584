//! The real `waterline-collector` binary on a real Prometheus (Debian's 2.42) scraping the
//! fake node-exporter, with the shipped recording rules: values end to end through gRPC
//! `ListNodes`, node mapping, capacity, the PromQL request count, and the failure cases (a
//! killed Prometheus, a slow query, garbage answers, invalid PromQL).
//!
//! The collector binary must be built first (`cargo build -p waterline-collector`); it is
//! taken from beside this test executable.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail, ensure};
use waterline_api::v1 as pb;
use waterline_api::v1::collector_service_client::CollectorServiceClient;
use waterline_tests::bad_http::{BadHttp, Reply, Rule};
use waterline_tests::exporter::{FakeExporter, FakeNode, NodeLoad, openmetrics_history, wall_now};
use waterline_tests::prometheus::{Prometheus, PrometheusConfig, repo_path, wait_until};

const RULES: [(&str, &str); 6] = [
    ("cpu_usage_avg_5m", "waterline:node_cpu_usage:avg5m"),
    ("cpu_usage_max_avg_1h", "waterline:node_cpu_usage:max_avg1h"),
    ("cpu_usage_max_avg_1d", "waterline:node_cpu_usage:max_avg1d"),
    ("mem_usage_avg_5m", "waterline:node_memory_usage:avg5m"),
    ("mem_usage_max_avg_1h", "waterline:node_memory_usage:max_avg1h"),
    ("mem_usage_max_avg_1d", "waterline:node_memory_usage:max_avg1d"),
];
/// Tolerance in percentage points.
const TOL: f64 = 2.0;

/// A policy of `(name, query)` metrics, all polled every `period`.
fn policy(metrics: &[(&str, &str)], period: &str) -> String {
    let mut yaml = String::from("metrics:\n");
    for (name, query) in metrics {
        let resource = if name.starts_with("mem") { "memory" } else { "cpu" };
        yaml.push_str(&format!(
            "  - name: {name}\n    resource: {resource}\n    query: '{}'\n    period: {period}\n    weight: 1\n",
            query.replace('\'', "''")
        ));
    }
    yaml
}

async fn prometheus_for(exporter: &FakeExporter, history: Option<String>) -> Result<Prometheus> {
    let mut config = PrometheusConfig::new(exporter.scrape_configs())
        .rule_file(repo_path("deploy/prometheus/rules.yml"));
    if let Some(h) = history {
        config = config.backfill(h);
    }
    Prometheus::start(config).await
}

/// Waits until `rule` has `series` series in Prometheus (the rules have run).
async fn rule_ready(prom: &Prometheus, rule: &str, series: usize) -> Result<()> {
    wait_until(Duration::from_secs(20), || async {
        let n = prom.query(rule).await?.len();
        ensure!(n == series, "{rule}: {n} series, want {series}");
        Ok(())
    })
    .await
    .with_context(|| format!("prometheus log:\n{}", prom.log_tail(2000)))
}

/// The collector binary, started on free loopback ports; killed when dropped.
struct Collector {
    child: Child,
    grpc: SocketAddr,
    admin: SocketAddr,
    dir: tempfile::TempDir,
    started: std::time::Instant,
}

fn free_addr() -> Result<SocketAddr> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

fn collector_bin() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir =
        exe.parent().and_then(Path::parent).context("test binary not in target/<profile>/deps")?;
    let bin = dir.join("waterline-collector");
    ensure!(
        bin.exists(),
        "{} missing: run `cargo build -p waterline-collector` first",
        bin.display()
    );
    Ok(bin)
}

impl Collector {
    async fn start(url: &str, policy_yaml: &str, extra: &[&str]) -> Result<Collector> {
        let bin = collector_bin()?;
        let dir = tempfile::tempdir()?;
        let policy_path = dir.path().join("policy.yaml");
        std::fs::write(&policy_path, policy_yaml)?;
        let (grpc, admin) = (free_addr()?, free_addr()?);
        let help = Command::new(&bin).arg("--help").output()?;
        let mut args: Vec<String> = vec![
            format!("--grpc-addr={grpc}"),
            format!("--admin-addr={admin}"),
            format!("--policy={}", policy_path.display()),
            format!("--prometheus-url={url}"),
        ];
        // Once a Kubernetes source exists, keep it off: these tests have no API server.
        if String::from_utf8_lossy(&help.stdout).contains("--no-kube") {
            args.push("--no-kube".into());
        }
        for a in extra {
            args.push(a.replace("{dir}", &dir.path().display().to_string()));
        }
        let log = std::fs::File::create(dir.path().join("collector.log"))?;
        let child = Command::new(&bin)
            .args(&args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("spawning {}", bin.display()))?;
        let mut c = Collector { child, grpc, admin, dir, started: wall_now() };
        let ready = format!("http://{admin}/ready");
        let outcome = wait_until(Duration::from_secs(20), || async {
            let status = reqwest::get(&ready).await?.status();
            ensure!(status.is_success(), "/ready: {status}");
            Ok(())
        })
        .await;
        if let Err(e) = outcome {
            let running = c.is_running();
            bail!("collector not ready (running: {running}): {e:#}\nlog:\n{}", c.log());
        }
        Ok(c)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("collector.log")).unwrap_or_default()
    }

    fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    async fn list(&self) -> Result<pb::ListNodesResponse> {
        let mut client = CollectorServiceClient::connect(format!("http://{}", self.grpc)).await?;
        Ok(client.list_nodes(pb::ListNodesRequest { node_names: vec![] }).await?.into_inner())
    }

    async fn metrics_text(&self) -> Result<String> {
        Ok(reqwest::get(format!("http://{}/metrics", self.admin)).await?.text().await?)
    }

    /// The value of `name{metric="<metric>"}` on /metrics.
    async fn metric(&self, name: &str, metric: &str) -> Result<f64> {
        let text = self.metrics_text().await?;
        let prefix = format!("{name}{{metric=\"{metric}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .with_context(|| format!("{prefix} not on /metrics"))?
            .trim()
            .parse()
            .map_err(Into::into)
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn node<'a>(list: &'a pb::ListNodesResponse, name: &str) -> Result<&'a pb::NodeState> {
    list.nodes.iter().find(|n| n.name == name).with_context(|| {
        let names: Vec<&str> = list.nodes.iter().map(|n| n.name.as_str()).collect();
        format!("no node {name} in {names:?}")
    })
}

/// (value, sample time in ms) of `metric` on `node`.
fn sample(list: &pb::ListNodesResponse, node_name: &str, metric: &str) -> Result<(f64, i64)> {
    let n = node(list, node_name)?;
    let s = n
        .metrics
        .iter()
        .find(|m| m.metric == metric)
        .with_context(|| format!("{node_name} has no {metric}: {:?}", n.metrics))?;
    let at = s.sampled_at.as_ref().context("no sampled_at")?;
    Ok((s.value_percent, at.seconds * 1000 + i64::from(at.nanos) / 1_000_000))
}

fn status<'a>(list: &'a pb::ListNodesResponse, metric: &str) -> Result<&'a pb::MetricStatus> {
    list.metrics
        .iter()
        .find(|m| m.metric == metric)
        .with_context(|| format!("no status for {metric}"))
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_metrics_flow_end_to_end_with_mapping_capacity_and_unmapped_series() -> Result<()> {
    let now = SystemTime::now();
    let (spike_from, spike_to) = (
        now - Duration::from_secs(3 * 3600 + 15 * 60),
        now - Duration::from_secs(3 * 3600 - 15 * 60),
    );
    // node-a carries a `node` label; node-b is known only by its IP:port; the stray's IP
    // is in no node's addresses.
    let a = FakeNode::new("node-a").with_cores(4).with_cpu_busy(0.20).with_memory_used(0.30);
    let b = FakeNode::new("node-b")
        .with_instance("10.0.0.2:9100")
        .with_cores(2)
        .with_memory_bytes(8 << 30)
        .with_cpu_busy(0.50)
        .with_memory_used(0.60);
    let stray = FakeNode::new("stray").with_instance("10.0.0.99:9100").with_cpu_busy(0.1);
    let nodes = vec![a.clone(), b.clone(), stray];
    let history = openmetrics_history(
        &nodes,
        now - Duration::from_secs(24 * 3600),
        now,
        Duration::from_secs(60),
        |n, t| {
            if n.name == "node-a" && t > spike_from && t <= spike_to {
                NodeLoad { cpu_busy: 0.90, memory_used: 0.85 }
            } else {
                NodeLoad { cpu_busy: n.cpu_busy, memory_used: n.memory_used }
            }
        },
    )?;
    let exporter = FakeExporter::start(nodes).await?;
    let prom = prometheus_for(&exporter, Some(history)).await?;
    for (_, rule) in RULES {
        rule_ready(&prom, rule, 3).await?;
    }

    let map = "nodes:\n  - name: node-a\n    addresses: [10.0.0.1]\n  - name: node-b\n    addresses: [10.0.0.2, node-b.internal]\n";
    let dir = tempfile::tempdir()?;
    let map_path = dir.path().join("nodes.yaml");
    std::fs::write(&map_path, map)?;
    let c = Collector::start(
        &prom.url(),
        &policy(&RULES, "1s"),
        &[&format!("--node-map={}", map_path.display())],
    )
    .await?;

    let want = [
        ("cpu_usage_avg_5m", 20.0, 50.0),
        ("cpu_usage_max_avg_1h", 20.0, 50.0),
        ("cpu_usage_max_avg_1d", 90.0, 50.0),
        ("mem_usage_avg_5m", 30.0, 60.0),
        ("mem_usage_max_avg_1h", 30.0, 60.0),
        ("mem_usage_max_avg_1d", 85.0, 60.0),
    ];
    let list = wait_until(Duration::from_secs(20), || async {
        let list = c.list().await?;
        for (metric, va, vb) in want {
            for (n, v) in [("node-a", va), ("node-b", vb)] {
                let (got, at) = sample(&list, n, metric)?;
                ensure!((got - v).abs() <= TOL, "{n} {metric}: {got:.2}, want {v} ± {TOL}");
                let age = now_ms() - at;
                ensure!((-1000..10_000).contains(&age), "{n} {metric}: sample {age} ms old");
            }
            let st = status(&list, metric)?;
            ensure!(st.last_error.is_empty(), "{metric}: {}", st.last_error);
            ensure!(st.series == 3 && st.nodes_covered == 2, "{metric}: {st:?}");
        }
        // Prometheus capacity: cores × 1000 and MemTotal.
        let cap_a = node(&list, "node-a")?.capacity.context("no capacity")?;
        let cap_b = node(&list, "node-b")?.capacity.context("no capacity")?;
        ensure!((cap_a.cpu_millis, cap_a.memory_bytes) == (4000, 16 << 30), "{cap_a:?}");
        ensure!((cap_b.cpu_millis, cap_b.memory_bytes) == (2000, 8 << 30), "{cap_b:?}");
        Ok(list)
    })
    .await
    .with_context(|| format!("collector log:\n{}", c.log()))?;
    // Only the two known nodes: the stray's IP and raw label values never become nodes.
    let names: Vec<&str> = list.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["node-a", "node-b"]);

    // Sample times follow Prometheus: they advance with every poll.
    let (_, before) = sample(&list, "node-b", "cpu_usage_avg_5m")?;
    wait_until(Duration::from_secs(10), || async {
        let (_, after) = sample(&c.list().await?, "node-b", "cpu_usage_avg_5m")?;
        ensure!(after > before, "sample time stuck at {before}");
        Ok(())
    })
    .await?;

    // The unmapped series is counted per metric and logged once per label set.
    for (metric, _) in RULES {
        assert_eq!(c.metric("waterline_unmapped_series", metric).await?, 1.0, "{metric}");
    }
    let log = c.log();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("maps to no node") && l.contains("10.0.0.99:9100"))
        .collect();
    ensure!(lines.len() == RULES.len() + 2, "want one line per metric and capacity query:\n{log}");
    ensure!(lines.iter().any(|l| l.contains("cpu_usage_avg_5m")), "{lines:?}");
    Ok(())
}

/// Requests at a counting proxy and the collector's own counter: one query per metric (+2
/// for capacity) per refresh, for 3 nodes and for 30.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promql_requests_per_refresh_do_not_depend_on_node_count() -> Result<()> {
    let mut counts = Vec::new();
    for n in [3usize, 30] {
        let nodes: Vec<FakeNode> =
            (0..n).map(|i| FakeNode::new(format!("n{i:02}")).with_cpu_busy(0.25)).collect();
        let exporter = FakeExporter::start(nodes).await?;
        let prom = prometheus_for(&exporter, None).await?;
        rule_ready(&prom, RULES[0].1, n).await?;
        let proxy = BadHttp::start(Some(prom.url())).await?;
        // Periods far longer than the test: exactly one refresh happens.
        let c = Collector::start(&proxy.url(), &policy(&RULES, "1h"), &[]).await?;
        let list = c.list().await?;
        ensure!(status(&list, "cpu_usage_avg_5m")?.nodes_covered == n as i64, "{:?}", list.metrics);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut seen = proxy.queries();
        seen.sort();
        let mut own = 0.0;
        for name in RULES.iter().map(|(m, _)| *m).chain(["capacity:cpu", "capacity:memory"]) {
            let v = c.metric("waterline_promql_requests_total", name).await?;
            ensure!(v == 1.0, "{n} nodes: {v} requests for {name}");
            own += v;
        }
        ensure!(seen.len() == RULES.len() + 2, "{n} nodes: proxy saw {seen:#?}");
        ensure!(own as usize == seen.len());
        counts.push(seen.len());
        eprintln!("{n} nodes: {} PromQL requests per refresh", seen.len());
    }
    assert_eq!(counts, [8, 8]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_prometheus_ages_samples_and_the_collector_recovers_by_itself() -> Result<()> {
    let exporter = FakeExporter::start(vec![FakeNode::new("node-k").with_cpu_busy(0.40)]).await?;
    let mut prom = prometheus_for(&exporter, None).await?;
    rule_ready(&prom, RULES[0].1, 1).await?;
    let c = Collector::start(&prom.url(), &policy(&RULES[..1], "1s"), &["--prometheus-timeout=1s"])
        .await?;
    let metric = RULES[0].0;
    wait_until(Duration::from_secs(15), || async {
        let (v, _) = sample(&c.list().await?, "node-k", metric)?;
        ensure!((v - 40.0).abs() <= TOL, "{v}");
        Ok(())
    })
    .await
    .with_context(|| c.log())?;

    prom.stop()?;
    let stuck = wait_until(Duration::from_secs(10), || async {
        let list = c.list().await?;
        let st = status(&list, metric)?;
        ensure!(!st.last_error.is_empty(), "no error yet");
        Ok(sample(&list, "node-k", metric)?.1)
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let list = c.list().await?;
    let st = status(&list, metric)?;
    ensure!(sample(&list, "node-k", metric)?.1 == stuck, "sample time moved without Prometheus");
    ensure!(st.last_error.contains("request failed"), "{}", st.last_error);
    let last_ok = st.last_success.as_ref().context("no last_success")?.seconds;
    ensure!(now_ms() / 1000 - last_ok >= 2, "last_success still advancing");
    assert_eq!(c.metric("waterline_metric_last_poll_failed", metric).await?, 1.0);
    let ready = reqwest::get(format!("http://{}/ready", c.admin)).await?.status();
    ensure!(ready.is_success(), "/ready went {ready} while Prometheus is down");

    prom.restart().await?;
    wait_until(Duration::from_secs(20), || async {
        let list = c.list().await?;
        let st = status(&list, metric)?;
        ensure!(st.last_error.is_empty(), "still failing: {}", st.last_error);
        let (v, at) = sample(&list, "node-k", metric)?;
        ensure!(at > stuck && (v - 40.0).abs() <= TOL, "{v} at {at}");
        Ok(())
    })
    .await
    .with_context(|| c.log())?;
    assert_eq!(c.metric("waterline_metric_last_poll_failed", metric).await?, 0.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_garbage_and_invalid_promql_only_hurt_their_own_metric() -> Result<()> {
    let exporter = FakeExporter::start(vec![FakeNode::new("node-g").with_cpu_busy(0.30)]).await?;
    let prom = prometheus_for(&exporter, None).await?;
    rule_ready(&prom, RULES[0].1, 1).await?;
    let proxy = BadHttp::start(Some(prom.url())).await?;
    let mark = |m: &str| format!(r#"waterline:node_memory_usage:avg5m{{wl_test!="{m}"}}"#);
    proxy.set_rules(vec![
        Rule::new(r#"wl_test!="slow""#, Reply::Delay(Duration::from_secs(30))),
        Rule::new(r#"wl_test!="html""#, Reply::html()),
        Rule::new(r#"wl_test!="badjson""#, Reply::invalid_json()),
        Rule::new(r#"wl_test!="five""#, Reply::server_error()),
        Rule::new(
            r#"wl_test!="odd""#,
            Reply::vector(&[
                (&[("node", "node-g")], "NaN"),
                (&[("node", "node-h")], "+Inf"),
                (&[("node", "node-i")], "abc"),
                (&[("node", "node-j")], "150"),
                (&[("node", "node-l")], "-3"),
            ]),
        ),
    ]);
    let metrics = [
        ("good", RULES[0].1.to_string()),
        ("slow", mark("slow")),
        ("html", mark("html")),
        ("badjson", mark("badjson")),
        ("five", mark("five")),
        ("odd", mark("odd")),
        // The policy loader rejects PromQL syntax errors (runtime/src/policy.rs), so the bad
        // query is one Prometheus refuses at evaluation: an invalid regex.
        ("badpromql", r#"label_replace(vector(1), "a", "$1", "b", "(")"#.to_string()),
    ];
    let refs: Vec<(&str, &str)> = metrics.iter().map(|(n, q)| (*n, q.as_str())).collect();
    let c =
        Collector::start(&proxy.url(), &policy(&refs, "1s"), &["--prometheus-timeout=1s"]).await?;
    // Readiness came after one attempt of everything, bounded by the 1 s timeout, not by
    // the 30 s of the slow query (the margin is for a loaded machine).
    let startup = c.started.elapsed();
    ensure!(startup < Duration::from_secs(15), "ready only after {startup:?}");

    let expected = [
        ("slow", "no answer within 1s"),
        ("html", "not JSON"),
        ("badjson", "not valid Prometheus API JSON"),
        ("five", "HTTP 500: upstream connect error"),
        ("badpromql", "invalid regular expression"),
    ];
    let list = wait_until(Duration::from_secs(15), || async {
        let list = c.list().await?;
        for (metric, text) in expected {
            let err = &status(&list, metric)?.last_error;
            ensure!(err.contains(text), "{metric}: last_error {err:?}, want {text:?}");
        }
        let (v, _) = sample(&list, "node-g", "good")?;
        ensure!((v - 30.0).abs() <= TOL, "good: {v}");
        ensure!(status(&list, "good")?.last_error.is_empty());
        // NaN, Inf and a non-number dropped; 150 and -3 clamped.
        let odd = status(&list, "odd")?;
        ensure!(odd.last_error.is_empty() && odd.series == 5 && odd.nodes_covered == 2, "{odd:?}");
        ensure!(sample(&list, "node-j", "odd")?.0 == 100.0);
        ensure!(sample(&list, "node-l", "odd")?.0 == 0.0);
        Ok(list)
    })
    .await
    .with_context(|| c.log())?;
    // The html error names what came; bad PromQL carries the server's own message.
    let html = &status(&list, "html")?.last_error;
    ensure!(html.contains("text/html") && html.contains("Please sign in"), "{html}");
    let bad = &status(&list, "badpromql")?.last_error;
    ensure!(bad.contains("invalid regular expression in label_replace()"), "{bad}");

    // The good metric keeps flowing at its own period while the slow one times out.
    let (_, t0) = sample(&list, "node-g", "good")?;
    wait_until(Duration::from_secs(15), || async {
        let (_, t1) = sample(&c.list().await?, "node-g", "good")?;
        ensure!(t1 - t0 >= 1000, "good metric stalled: {t0} → {t1}");
        Ok(())
    })
    .await
    .with_context(|| c.log())?;
    ensure!(node(&c.list().await?, "node-g")?.metrics.iter().all(|m| m.metric != "slow"));

    assert!(c.metric("waterline_metric_dropped_samples_total", "odd").await? >= 3.0);
    assert!(c.metric("waterline_metric_clamped_samples_total", "odd").await? >= 2.0);
    for metric in ["slow", "html", "badjson", "five", "badpromql"] {
        assert_eq!(c.metric("waterline_metric_last_poll_failed", metric).await?, 1.0, "{metric}");
    }
    let mut c = c;
    ensure!(c.is_running(), "collector exited:\n{}", c.log());
    let log = c.log();
    ensure!(!log.contains("panicked"), "{log}");
    for metric in ["slow", "html", "badjson", "five", "badpromql"] {
        ensure!(
            log.lines().any(|l| l.contains("PromQL query failed") && l.contains(metric)),
            "no log line for {metric}:\n{log}"
        );
    }
    Ok(())
}

/// The bearer token (re-read on every query, so a rotated token is used), basic auth and
/// extra headers reach the endpoint; `--prometheus-capacity=false` leaves only the metric
/// queries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_and_extra_headers_reach_the_endpoint() -> Result<()> {
    let endpoint = BadHttp::start(None).await?;
    let dir = tempfile::tempdir()?;
    let token = dir.path().join("token");
    std::fs::write(&token, "first-token\n")?;
    let c = Collector::start(
        &endpoint.url(),
        &policy(&RULES[..1], "1s"),
        &[
            &format!("--prometheus-bearer-token-file={}", token.display()),
            "--prometheus-header=X-Scope-OrgID: tenant-a",
            "--prometheus-capacity=false",
        ],
    )
    .await?;
    let first = endpoint.requests();
    ensure!(!first.is_empty(), "no request before ready");
    for r in &first {
        ensure!(r.query == RULES[0].1, "unexpected query {:?}", r.query);
        ensure!(
            r.headers.get("authorization").map(String::as_str) == Some("Bearer first-token"),
            "{:?}",
            r.headers
        );
        ensure!(
            r.headers.get("x-scope-orgid").map(String::as_str) == Some("tenant-a"),
            "{:?}",
            r.headers
        );
    }
    std::fs::write(&token, "second-token")?;
    wait_until(Duration::from_secs(10), || async {
        let last = endpoint.requests().pop().context("no request")?;
        let auth = last.headers.get("authorization").cloned().unwrap_or_default();
        ensure!(auth == "Bearer second-token", "{auth}");
        Ok(())
    })
    .await
    .with_context(|| c.log())?;
    drop(c);

    let basic = BadHttp::start(None).await?;
    let password = dir.path().join("password");
    std::fs::write(&password, "p@ss w0rd\n")?;
    let c = Collector::start(
        &basic.url(),
        &policy(&RULES[..1], "1s"),
        &[
            "--prometheus-basic-auth-user=waterline",
            &format!("--prometheus-basic-auth-password-file={}", password.display()),
        ],
    )
    .await?;
    let seen = basic.requests();
    // The metric and the two capacity queries (on by default without Kubernetes).
    ensure!(seen.len() >= 3, "{seen:?}");
    for r in &seen {
        ensure!(
            r.headers.get("authorization").map(String::as_str)
                == Some("Basic d2F0ZXJsaW5lOnBAc3MgdzByZA=="),
            "{:?}\n{}",
            r.headers,
            c.log()
        );
    }
    Ok(())
}
