//! `waterline-sim import` against a real Prometheus (Debian's, `scripts/deps/prometheus.sh`)
//! holding an hour of backfilled history in the exact label schemas the importer reads:
//! kube-state-metrics v2 (`kube_node_status_allocatable`, `kube_pod_info`, `kube_pod_created`,
//! `kube_pod_deletion_timestamp`, `kube_pod_container_resource_requests` / `_limits` with
//! `resource` and `unit`), cAdvisor (`container_cpu_usage_seconds_total`,
//! `container_memory_working_set_bytes` by `namespace`, `pod`, `container`, with the pod-level
//! `container=""` and pause `container="POD"` series a kubelet also exports) and waterline's
//! 5 m recording rules as the node usage. The history has gaps on purpose: a node without
//! allocatable, a node without a memory series, a pod without any cAdvisor series, a pod
//! that never got a node. Round trip: the scenario written has the right nodes, pods,
//! requests, limits, times and usage within tolerance, and the simulator replays it. And a
//! failed import says which query failed and why, in words a user can act on.

use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use waterline_sim::import::{ImportError, Window, assemble, fetch, to_yaml, usage_queries};
use waterline_sim::scenario::{PodSpec, Scenario, parse_scenario};
use waterline_tests::bad_http::{BadHttp, Reply, Rule};
use waterline_tests::prometheus::{Prometheus, PrometheusConfig};

const GI: f64 = 1024.0 * 1024.0 * 1024.0;
const MI: f64 = 1024.0 * 1024.0;
/// Seconds between backfilled samples (a scrape interval).
const SCRAPE: i64 = 15;

/// A container: (name, cpu request, memory request, cpu limit, memory limit).
type Container = (&'static str, f64, f64, Option<f64>, Option<f64>);

/// One pod of the history; times in seconds from the window's start.
struct Pod {
    name: &'static str,
    node: Option<&'static str>,
    created: i64,
    deleted: Option<i64>,
    containers: Vec<Container>,
    /// Per container (cores, bytes) from 30 s after creation; `None`: no cAdvisor series.
    usage: Option<Vec<(f64, f64)>>,
    /// What the node really carries for it (pods without series still use something).
    true_usage: (f64, f64),
}

impl Pod {
    fn running(&self, t: i64) -> bool {
        t >= self.created && self.deleted.is_none_or(|d| t < d)
    }
    fn using(&self, t: i64) -> bool {
        self.running(t) && t >= self.created + 30
    }
}

fn pods() -> Vec<Pod> {
    vec![
        Pod {
            name: "web-a",
            node: Some("n1"),
            created: -1200,
            deleted: None,
            containers: vec![
                ("app", 0.5, GI, Some(1.0), Some(2.0 * GI)),
                ("sidecar", 0.1, 128.0 * MI, Some(0.2), Some(256.0 * MI)),
            ],
            usage: Some(vec![(0.4, 800.0 * MI), (0.05, 100.0 * MI)]),
            true_usage: (0.45, 900.0 * MI),
        },
        Pod {
            name: "web-b",
            node: Some("n2"),
            created: 600,
            deleted: Some(2400),
            containers: vec![("app", 1.0, 2.0 * GI, None, None)],
            usage: Some(vec![(0.8, 1.5 * GI)]),
            true_usage: (0.8, 1.5 * GI),
        },
        Pod {
            name: "batch-c",
            node: Some("n1"),
            created: 1200,
            deleted: None,
            containers: vec![("job", 0.25, 512.0 * MI, None, Some(GI))],
            usage: None,
            true_usage: (0.25, 512.0 * MI),
        },
        Pod {
            name: "pending-d",
            node: None,
            created: 3000,
            deleted: None,
            containers: vec![("app", 2.0, 4.0 * GI, None, None)],
            usage: None,
            true_usage: (0.0, 0.0),
        },
        Pod {
            name: "gone-e",
            node: Some("n3"),
            created: -600,
            deleted: None,
            containers: vec![("app", 0.5, GI, None, None)],
            usage: Some(vec![(0.5, GI)]),
            true_usage: (0.5, GI),
        },
    ]
}

/// (name, cores, bytes, background cpu %, background memory %, allocatable known, memory
/// series exported)
const NODES: [(&str, f64, f64, f64, f64, bool, bool); 3] = [
    ("n1", 4.0, 16.0 * GI, 20.0, 25.0, true, true),
    ("n2", 8.0, 32.0 * GI, 35.0, 30.0, true, false),
    ("n3", 4.0, 16.0 * GI, 10.0, 10.0, false, true),
];

/// The OpenMetrics history from `hist_from` to `to` (Unix seconds), window start `from`.
fn history(from: i64, hist_from: i64, to: i64) -> String {
    let pods = pods();
    let times: Vec<i64> = (hist_from..=to).step_by(SCRAPE as usize).collect();
    let mut out = String::new();
    let family = |name: &str, kind: &str, out: &mut String| {
        let _ = writeln!(out, "# TYPE {name} {kind}");
    };

    family("kube_node_status_allocatable", "gauge", &mut out);
    for (node, cores, bytes, _, _, known, _) in NODES {
        if !known {
            continue;
        }
        for (resource, unit, v) in [("cpu", "core", cores), ("memory", "byte", bytes)] {
            for t in &times {
                let _ = writeln!(
                    out,
                    r#"kube_node_status_allocatable{{node="{node}",resource="{resource}",unit="{unit}"}} {v} {t}"#
                );
            }
        }
    }
    for (metric, cpu) in
        [("waterline:node_cpu_usage:avg5m", true), ("waterline:node_memory_usage:avg5m", false)]
    {
        family(metric, "gauge", &mut out);
        for (node, cores, bytes, bg_cpu, bg_mem, _, memory_series) in NODES {
            if !cpu && !memory_series {
                continue;
            }
            for &t in &times {
                let rel = t - from;
                let on: f64 = pods
                    .iter()
                    .filter(|p| p.node == Some(node) && p.using(rel))
                    .map(|p| if cpu { p.true_usage.0 } else { p.true_usage.1 })
                    .sum();
                let pct =
                    if cpu { bg_cpu + on / cores * 100.0 } else { bg_mem + on / bytes * 100.0 };
                let _ =
                    writeln!(out, r#"{metric}{{instance="{node}:9100",node="{node}"}} {pct} {t}"#);
            }
        }
    }
    family("kube_pod_info", "gauge", &mut out);
    for p in &pods {
        let node = p.node.unwrap_or("");
        for &t in times.iter().filter(|&&t| p.running(t - from)) {
            let _ = writeln!(
                out,
                r#"kube_pod_info{{namespace="shop",pod="{}",uid="uid-{}",node="{node}",created_by_kind="ReplicaSet",created_by_name="rs"}} 1 {t}"#,
                p.name, p.name
            );
        }
    }
    family("kube_pod_created", "gauge", &mut out);
    for p in &pods {
        for &t in times.iter().filter(|&&t| p.running(t - from)) {
            let _ = writeln!(
                out,
                r#"kube_pod_created{{namespace="shop",pod="{}",uid="uid-{}"}} {} {t}"#,
                p.name,
                p.name,
                from + p.created
            );
        }
    }
    family("kube_pod_deletion_timestamp", "gauge", &mut out);
    for p in &pods {
        let Some(d) = p.deleted else { continue };
        // Set from the moment the pod starts terminating (30 s before it is gone).
        for &t in times.iter().filter(|&&t| t - from >= d - 30 && p.running(t - from)) {
            let _ = writeln!(
                out,
                r#"kube_pod_deletion_timestamp{{namespace="shop",pod="{}",uid="uid-{}"}} {} {t}"#,
                p.name,
                p.name,
                from + d
            );
        }
    }
    for (metric, limits) in [
        ("kube_pod_container_resource_requests", false),
        ("kube_pod_container_resource_limits", true),
    ] {
        family(metric, "gauge", &mut out);
        for p in &pods {
            let node = p.node.unwrap_or("");
            for (c, rc, rm, lc, lm) in &p.containers {
                let (cpu, mem) = if limits { (*lc, *lm) } else { (Some(*rc), Some(*rm)) };
                for (resource, unit, v) in [("cpu", "core", cpu), ("memory", "byte", mem)] {
                    let Some(v) = v else { continue };
                    for &t in times.iter().filter(|&&t| p.running(t - from)) {
                        let _ = writeln!(
                            out,
                            r#"{metric}{{namespace="shop",pod="{}",uid="uid-{}",container="{c}",node="{node}",resource="{resource}",unit="{unit}"}} {v} {t}"#,
                            p.name, p.name
                        );
                    }
                }
            }
        }
    }
    // cAdvisor: per container, plus the pod cgroup (container="") and pause (POD) series
    // that must not count.
    family("container_cpu_usage_seconds", "counter", &mut out);
    let mut memory = String::new();
    for p in &pods {
        let Some(usage) = &p.usage else { continue };
        let node = p.node.unwrap_or("");
        let total: (f64, f64) = usage.iter().fold((0.0, 0.0), |a, u| (a.0 + u.0, a.1 + u.1));
        let mut series: Vec<(String, (f64, f64))> =
            p.containers.iter().zip(usage).map(|((c, ..), u)| ((*c).to_owned(), *u)).collect();
        series.push((String::new(), total));
        series.push(("POD".into(), (0.001, MI)));
        for (c, (cores, bytes)) in series {
            let labels = format!(
                r#"namespace="shop",pod="{}",container="{c}",id="/kubepods/{}/{c}",instance="{node}",node="{node}""#,
                p.name, p.name
            );
            for &t in times.iter().filter(|&&t| p.using(t - from)) {
                let seconds = cores * (t - from - p.created - 30) as f64;
                let _ =
                    writeln!(out, "container_cpu_usage_seconds_total{{{labels}}} {seconds} {t}");
                let _ =
                    writeln!(memory, "container_memory_working_set_bytes{{{labels}}} {bytes} {t}");
            }
        }
    }
    family("container_memory_working_set_bytes", "gauge", &mut out);
    out.push_str(&memory);
    out.push_str("# EOF\n");
    out
}

fn near(what: &str, got: f64, want: f64, tol: f64) -> Result<()> {
    ensure!((got - want).abs() <= tol, "{what}: got {got}, want {want} ± {tol}");
    Ok(())
}

fn pod<'a>(s: &'a Scenario, name: &str) -> Result<&'a PodSpec> {
    s.pods.iter().find(|p| p.pod.name == name).with_context(|| format!("no pod {name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_hour_round_trips() -> Result<()> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
    let to = (now - 300) / 60 * 60;
    let from = to - 3600;
    let prom =
        Prometheus::start(PrometheusConfig::new("").backfill(history(from, from - 1800, to)))
            .await?;

    let url = prom.url();
    let window = Window { from: from as f64, to: to as f64, step: 30.0 };
    let queries = usage_queries(&waterline_core::Policy::default())?;
    assert_eq!(queries.0, "waterline:node_cpu_usage:avg5m");
    let w = window.clone();
    let fetched = tokio::task::spawn_blocking(move || fetch(&url, &w, &queries)).await??;
    let mut imported = assemble(&fetched, &window, 3600.0);
    imported.source = prom.url();
    imported.target = 40.0;
    imported.threshold = 65.0;
    let text = to_yaml(&imported, "round-trip", 3600.0);
    let s = parse_scenario(&text, None).map_err(|e| anyhow::anyhow!("{e}\n{text}"))?;

    // Nodes: n3 has no allocatable and is left out.
    let nodes: Vec<(&str, i64, i64)> = s
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.allocatable.cpu_millis, n.allocatable.memory_bytes))
        .collect();
    assert_eq!(nodes, [("n1", 4000, 16 << 30), ("n2", 8000, 32 << 30)]);
    // Background = node usage − its pods (batch-c, without series, by its request, which is
    // what it really uses here): n1 20 % cpu / 25 % memory, n2 35 % cpu and no memory series.
    for (i, (cpu, memory)) in [(20.0, Some(25.0)), (35.0, None)].into_iter().enumerate() {
        let n = &s.nodes[i];
        for t in [300_000, 1_500_000, 1_800_000, 2_700_000, 3_300_000] {
            let got = n.background.cpu_series.as_ref().context("cpu background")?.at(t).unwrap();
            near(&format!("{} cpu background at {t} ms", n.name), got, cpu, 1.0)?;
            match memory {
                Some(m) => {
                    let got = n.background.memory_series.as_ref().context("memory")?.at(t).unwrap();
                    near(&format!("{} memory background at {t} ms", n.name), got, m, 0.5)?;
                }
                None => {
                    ensure!(n.background.memory_series.is_none() && n.background.memory_pct == 0.0)
                }
            }
        }
    }

    // Pods: gone-e ran on the left-out node.
    let mut names: Vec<&str> = s.pods.iter().map(|p| p.pod.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["batch-c", "pending-d", "web-a", "web-b"]);
    let a = pod(&s, "web-a")?;
    assert_eq!((a.arrival, a.deletion, a.node.as_deref()), (-1_200_000, None, Some("n1")));
    assert_eq!(
        (a.pod.requests.cpu_millis, a.pod.requests.memory_bytes),
        (600, (GI + 128.0 * MI) as i64)
    );
    assert_eq!(
        (a.pod.limits.cpu_millis, a.pod.limits.memory_bytes),
        (1200, (2.0 * GI + 256.0 * MI) as i64)
    );
    assert_eq!((a.pod.namespace.as_str(), a.pod.owner_kind.as_str()), ("shop", "ReplicaSet"));
    // Usage since its start (-1200 s): the app and sidecar containers only, not the pod
    // cgroup or the pause container: 450m and 900 MiB.
    let cpu = a.usage.cpu_series.as_ref().context("web-a cpu")?;
    let mem = a.usage.memory_series.as_ref().context("web-a memory")?;
    for since in [1_800_000, 3_000_000, 4_500_000] {
        near("web-a cpu", cpu.at(since).unwrap(), 450.0, 5.0)?;
        near("web-a memory", mem.at(since).unwrap(), 900.0 * MI, MI)?;
    }
    let b = pod(&s, "web-b")?;
    assert_eq!((b.arrival, b.deletion, b.node.as_deref()), (600_000, Some(2_400_000), None));
    assert_eq!(
        (b.pod.requests.cpu_millis, b.pod.limits.cpu_millis, b.pod.limits.memory_bytes),
        (1000, 0, 0)
    );
    let cpu = b.usage.cpu_series.as_ref().context("web-b cpu")?;
    near("web-b cpu 10 min in", cpu.at(600_000).unwrap(), 800.0, 10.0)?;
    near(
        "web-b memory 10 min in",
        b.usage.memory_series.as_ref().unwrap().at(600_000).unwrap(),
        1.5 * GI,
        MI,
    )?;
    assert!(text.contains("# ran on \"n2\""), "web-b's recorded node in a comment");
    // A pod without cAdvisor series: no series, so its request is its usage.
    let c = pod(&s, "batch-c")?;
    assert_eq!(
        (c.arrival, c.node.as_deref(), c.pod.limits.memory_bytes, c.pod.limits.cpu_millis),
        (1_200_000, None, GI as i64, 0)
    );
    ensure!(c.usage.cpu_series.is_none() && c.usage.memory_series.is_none());
    assert_eq!((c.usage.cpu_millis, c.usage.memory_bytes), (250.0, 512.0 * MI));
    let d = pod(&s, "pending-d")?;
    assert_eq!((d.arrival, d.node.as_deref(), d.pod.requests.cpu_millis), (3_000_000, None, 2000));

    // The gaps are in the header.
    for note in [
        "node n3: usage but no kube_node_status_allocatable, left out",
        "pod shop/gone-e: bound to n3 (left out) before the window, left out",
        "pod shop/batch-c: no cAdvisor cpu series, its cpu request stands in as usage",
        "pod shop/pending-d: no cAdvisor memory series",
        "node n2: no memory usage series, background 0",
    ] {
        ensure!(text.contains(&format!("#   {note}")), "missing note {note:?} in\n{text}");
    }

    // And the simulator replays it.
    let mut list: Vec<Box<dyn waterline_sim::strategy::Strategy>> = vec![
        waterline_sim::strategy::by_name("waterline")?,
        waterline_sim::strategy::by_name("kube-default")?,
    ];
    let summary = waterline_sim::report::run_all(&s, &mut list, None, &mut |_, _| {})?;
    for st in &summary.strategies {
        assert_eq!((st.pods_arrived, st.pods_placed), (4, 3), "{}", st.strategy);
    }
    Ok(())
}

/// `fetch` against `url` for the last hour, with `usage` as the node usage queries; the
/// error it ends with.
async fn fetch_error(url: String, usage: (&str, &str)) -> Result<ImportError> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as f64;
    let window = Window { from: now - 3600.0, to: now, step: 60.0 };
    let queries = (usage.0.to_owned(), usage.1.to_owned(), vec!["node".to_owned()]);
    match tokio::task::spawn_blocking(move || fetch(&url, &window, &queries)).await? {
        Ok(f) => anyhow::bail!("fetch succeeded: {f:?}"),
        Err(e) => Ok(e),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_import_names_the_query_and_why() -> Result<()> {
    let prom = Prometheus::start(PrometheusConfig::new("")).await?;
    let (cpu, memory) = ("waterline:node_cpu_usage:avg5m", "waterline:node_memory_usage:avg5m");

    // Prometheus' own refusal, as it words it.
    let e = fetch_error(prom.url(), ("rate(", memory)).await?;
    let text = e.to_string();
    ensure!(
        text.starts_with("rate(: Prometheus answered bad_data: ") && text.contains("parse error"),
        "{text}"
    );

    // Through a proxy: a login page instead of the API's JSON, and an execution error.
    let proxy = BadHttp::start(Some(prom.url())).await?;
    proxy.set_rules(vec![Rule::new("kube_pod_info", Reply::html())]);
    let text = fetch_error(proxy.url(), (cpu, memory)).await?.to_string();
    ensure!(
        text.starts_with("kube_pod_info: ")
            && text.contains("not an answer of the Prometheus HTTP API")
            && text.contains(&proxy.url()),
        "{text}"
    );
    let refusal = r#"{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory"}"#;
    proxy.set_rules(vec![Rule::new(
        "kube_pod_created",
        Reply::Fixed { status: 422, content_type: "application/json".into(), body: refusal.into() },
    )]);
    let text = fetch_error(proxy.url(), (cpu, memory)).await?.to_string();
    ensure!(
        text == "max_over_time(kube_pod_created[3600s]): Prometheus answered execution: query processing would load too many samples into memory",
        "{text}"
    );

    // Nothing listening: the first query, and the cause under the client's own words.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        format!("http://{}", l.local_addr()?)
    };
    let text = fetch_error(closed, (cpu, memory)).await?.to_string();
    ensure!(
        text.starts_with(
            r#"max_over_time(kube_node_status_allocatable{resource="cpu",unit="core"}[3600s]): "#
        ) && text.contains("Connection refused"),
        "{text}"
    );

    // No scheme: not a URL the client can build on.
    let text = fetch_error("127.0.0.1:9090".into(), (cpu, memory)).await?.to_string();
    ensure!(text.starts_with("Prometheus at 127.0.0.1:9090: "), "{text}");
    Ok(())
}
