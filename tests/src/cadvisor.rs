//! A fake kubelet cAdvisor endpoint (`/metrics/cadvisor`): per container of each fake pod
//! `container_cpu_usage_seconds_total` (a counter of the cores it uses, integrated over
//! time) and `container_memory_working_set_bytes`, with the labels the kubelet gives them
//! (`namespace`, `pod`, `container`) and its two decoys the shipped per-pod rules must leave
//! out: the whole-pod cgroup (`container=""`, the sum of the others) and the pause
//! container (`container="POD"`). Plus [`FakeCadvisor::history`], the same series in the
//! past, for `promtool tsdb create-blocks-from openmetrics`, so a `rate(…[5m])` has its full
//! window from Prometheus' first evaluation.
//!
//! The counters are `cores × (t − origin)` with one origin for the live page and the
//! history, so the backfilled and the scraped samples are one series without a reset.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::task::JoinHandle;

/// The `job` label of the fake's series (as kube-prometheus names the kubelet's job).
pub const JOB_NAME: &str = "kubelet";
/// The `instance` label of its target.
pub const INSTANCE: &str = "node-1:10250";
/// What the pause container uses of each pod: 1 milli-core and 1 MiB.
const PAUSE_CORES: f64 = 0.001;
const PAUSE_BYTES: f64 = 1_048_576.0;

/// One container's steady usage.
#[derive(Clone, Debug, PartialEq)]
pub struct FakeContainer {
    pub name: String,
    pub cores: f64,
    pub memory_bytes: f64,
}

/// One pod of the fake node.
#[derive(Clone, Debug, PartialEq)]
pub struct FakePod {
    pub namespace: String,
    pub name: String,
    pub containers: Vec<FakeContainer>,
}

impl FakePod {
    pub fn new(namespace: &str, name: &str) -> FakePod {
        FakePod { namespace: namespace.into(), name: name.into(), containers: Vec::new() }
    }

    /// Adds container `name` using `cores` and `memory_bytes`.
    pub fn with_container(mut self, name: &str, cores: f64, memory_bytes: f64) -> FakePod {
        self.containers.push(FakeContainer { name: name.into(), cores, memory_bytes });
        self
    }

    /// (container label, cores, bytes) of every series the kubelet shows for the pod: its
    /// containers, the pause container and the whole pod.
    fn series(&self) -> Vec<(&str, f64, f64)> {
        let mut rows: Vec<(&str, f64, f64)> =
            self.containers.iter().map(|c| (c.name.as_str(), c.cores, c.memory_bytes)).collect();
        rows.push(("POD", PAUSE_CORES, PAUSE_BYTES));
        let cores = rows.iter().map(|r| r.1).sum();
        let bytes = rows.iter().map(|r| r.2).sum();
        rows.push(("", cores, bytes));
        rows
    }
}

struct Pods {
    pods: Vec<FakePod>,
    origin: SystemTime,
}

/// The running fake; dropping it stops the server.
pub struct FakeCadvisor {
    addr: SocketAddr,
    pods: Arc<Pods>,
    task: JoinHandle<()>,
}

fn seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The two families: (name on the page, OpenMetrics family, type, whether a counter).
const FAMILIES: [(&str, &str, &str, bool); 2] = [
    ("container_cpu_usage_seconds_total", "container_cpu_usage_seconds", "counter", true),
    ("container_memory_working_set_bytes", "container_memory_working_set_bytes", "gauge", false),
];

/// Every series of one family: (labels, value at `at`), in a fixed order.
fn family(pods: &Pods, counter: bool, at: SystemTime, extra: &str) -> Vec<(String, f64)> {
    let elapsed = at.duration_since(pods.origin).map_or(0.0, |d| d.as_secs_f64());
    let mut rows = Vec::new();
    for pod in &pods.pods {
        for (container, cores, bytes) in pod.series() {
            let labels = format!(
                "container=\"{container}\",namespace=\"{}\",pod=\"{}\"{extra}",
                pod.namespace, pod.name
            );
            rows.push((labels, if counter { cores * elapsed } else { bytes }));
        }
    }
    rows
}

/// The live page at `at`.
fn render(pods: &Pods, at: SystemTime) -> String {
    let mut out = String::new();
    for (name, _, kind, counter) in FAMILIES {
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in family(pods, counter, at, "") {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    }
    out
}

async fn page(State(pods): State<Arc<Pods>>) -> impl IntoResponse {
    let body = render(&pods, SystemTime::now());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body)
}

impl FakeCadvisor {
    /// Serves `pods` on a free loopback port; their counters started an hour ago.
    pub async fn start(pods: Vec<FakePod>) -> Result<FakeCadvisor> {
        for pod in &pods {
            for c in &pod.containers {
                ensure!(
                    c.cores >= 0.0 && c.memory_bytes >= 0.0,
                    "fake pod {}: negative usage",
                    pod.name
                );
            }
        }
        let origin = SystemTime::now() - Duration::from_secs(3600);
        let pods = Arc::new(Pods { pods, origin });
        let app = Router::new().route("/metrics/cadvisor", get(page)).with_state(pods.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.context("binding")?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeCadvisor { addr, pods, task })
    }

    /// One `scrape_configs` entry (a YAML block sequence at column 0), job [`JOB_NAME`],
    /// `instance` [`INSTANCE`].
    pub fn scrape_configs(&self) -> String {
        format!(
            "- job_name: {JOB_NAME}\n  metrics_path: /metrics/cadvisor\n  static_configs:\n    - targets: ['{}']\n      labels:\n        instance: '{INSTANCE}'\n",
            self.addr
        )
    }

    /// OpenMetrics text (timestamps in seconds, ending in `# EOF`) of the series as
    /// Prometheus stores them (`job` and `instance` included), every `step` from `start` to
    /// `end`.
    pub fn history(&self, start: SystemTime, end: SystemTime, step: Duration) -> Result<String> {
        history(&self.pods, start, end, step)
    }
}

fn history(pods: &Pods, start: SystemTime, end: SystemTime, step: Duration) -> Result<String> {
    ensure!(!step.is_zero() && end >= start && start >= pods.origin, "bad history span");
    let mut out = String::new();
    let extra = format!(",instance=\"{INSTANCE}\",job=\"{JOB_NAME}\"");
    let mut times = Vec::new();
    let mut at = start;
    while at <= end {
        times.push(at);
        at += step;
    }
    // OpenMetrics wants each family's samples together, each series' in time order.
    for (name, family_name, kind, counter) in FAMILIES {
        let _ = writeln!(out, "# TYPE {family_name} {kind}");
        let by_time: Vec<Vec<(String, f64)>> =
            times.iter().map(|t| family(pods, counter, *t, &extra)).collect();
        for series in 0..by_time.first().map_or(0, Vec::len) {
            for (t, rows) in times.iter().zip(&by_time) {
                let (labels, value) = &rows[series];
                let _ = writeln!(out, "{name}{{{labels}}} {value} {:.3}", seconds(*t));
            }
        }
    }
    out.push_str("# EOF\n");
    Ok(out)
}

impl Drop for FakeCadvisor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_each_container_the_pause_container_and_the_whole_pod() {
        let pods = Pods {
            pods: vec![FakePod::new("shop", "web-a").with_container("app", 0.5, 100.0)],
            origin: UNIX_EPOCH,
        };
        let text = render(&pods, UNIX_EPOCH + Duration::from_secs(10));
        let value = |series: &str| -> f64 {
            let line = text.lines().find(|l| l.starts_with(series)).expect(series);
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        // 0.5 cores for 10 s; the pause container 1 m; the whole pod 0.501 cores.
        let cpu = "container_cpu_usage_seconds_total{container=";
        assert_eq!(value(&format!("{cpu}\"app\",namespace=\"shop\",pod=\"web-a\"}}")), 5.0);
        assert!((value(&format!("{cpu}\"POD\",")) - 0.01).abs() < 1e-12);
        assert!((value(&format!("{cpu}\"\",")) - 5.01).abs() < 1e-12);
        // 100 B + the pause container's 1 MiB.
        let memory = "container_memory_working_set_bytes{container=\"\",";
        assert_eq!(value(memory), 1_048_676.0);
    }

    #[test]
    fn history_is_one_series_per_container_in_time_order() {
        let pods = Pods {
            pods: vec![FakePod::new("shop", "web-a").with_container("app", 0.5, 100.0)],
            origin: UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        };
        let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let step = Duration::from_secs(15);
        let text = history(&pods, start, start + Duration::from_secs(30), step).unwrap();
        assert!(text.ends_with("# EOF\n"));
        let app: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("container_cpu_usage_seconds_total{container=\"app\""))
            .collect();
        // 0, 7.5 and 15 cpu-seconds at 0, 15 and 30 s, with the job and instance labels.
        assert_eq!(app.len(), 3);
        assert!(
            app[1].ends_with(",instance=\"node-1:10250\",job=\"kubelet\"} 7.5 1800000015.000"),
            "{}",
            app[1]
        );
        assert_eq!(text.matches("# TYPE").count(), 2);
    }
}
