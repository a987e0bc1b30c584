//! The Prometheus HTTP API calls of an import: a handful of queries over the whole window,
//! never one per node or pod. Instant queries of `max_over_time(x[window])` at the window's
//! end give one value per series that existed in it (allocatable, creation and deletion
//! times, requests, limits); range queries give the time series (node usage, pods' usage,
//! and `kube_pod_info` for when each pod was seen and where).
//!
//! The requests and their answers are `prometheus-http-query`'s (the collector's client
//! too), on a current-thread runtime of the import's own: `fetch` stays a plain blocking
//! call for the CLI. That client takes times in whole seconds, so the window is read from
//! its first whole second to its last.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use prometheus_http_query::response::Data;

use super::{ImportError, Window};

/// One container's request or limit row.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceRow {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub resource: String,
    pub unit: String,
    pub value: f64,
}

/// One `kube_pod_info` series (a pod has one per node it was seen on, and one while pending).
#[derive(Clone, Debug, PartialEq)]
pub struct PodInfo {
    pub namespace: String,
    pub pod: String,
    pub node: Option<String>,
    pub owner_kind: Option<String>,
    /// Unix seconds of its first and last point in the window.
    pub first_seen: f64,
    pub last_seen: f64,
}

type Key = (String, String);
type Labels = BTreeMap<String, String>;
type Points = Vec<(f64, f64)>;

/// Everything an import reads, keyed as [`super::assemble`] needs it. Times are Unix seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fetched {
    pub allocatable_cpu: BTreeMap<String, f64>,
    pub allocatable_memory: BTreeMap<String, f64>,
    /// Node → `(t, percent)`.
    pub node_cpu: BTreeMap<String, Vec<(f64, f64)>>,
    pub node_memory: BTreeMap<String, Vec<(f64, f64)>>,
    pub pod_info: Vec<PodInfo>,
    pub created: BTreeMap<Key, f64>,
    pub deleted: BTreeMap<Key, f64>,
    pub requests: Vec<ResourceRow>,
    pub limits: Vec<ResourceRow>,
    /// (namespace, pod) → `(t, cores)` / `(t, bytes)`.
    pub pod_cpu: BTreeMap<Key, Vec<(f64, f64)>>,
    pub pod_memory: BTreeMap<Key, Vec<(f64, f64)>>,
}

/// cAdvisor's container series without the pod-level cgroup (`container=""`) and the pause
/// container, which would count the pod twice.
const CONTAINERS: &str = r#"container!="",container!="POD""#;

/// Bound on one query, connection included: a range query over days of pods takes a while.
const TIMEOUT: Duration = Duration::from_secs(120);

struct Client {
    url: String,
    prom: prometheus_http_query::Client,
    runtime: tokio::runtime::Runtime,
    /// The window in whole seconds, inside `Window`'s bounds.
    start: i64,
    end: i64,
    step: f64,
}

fn query_error(query: &str, why: impl std::fmt::Display) -> ImportError {
    ImportError::Query { query: query.to_owned(), why: why.to_string() }
}

/// The whole chain of an error, `outer: inner: root` (anyhow's alternate form): the
/// client's own message ("failed to send request to server") hides the cause (connection
/// refused, an unknown certificate, …).
fn chain(error: impl std::error::Error + Send + Sync + 'static) -> String {
    format!("{:#}", anyhow::Error::new(error))
}

/// Why a query to `url` failed: Prometheus' own error type and message; an answer that is
/// not the API's JSON (the client found no transport error: a proxy's login page, a wrong
/// URL); or the transport's whole chain.
fn failure(query: &str, url: &str, error: prometheus_http_query::Error) -> ImportError {
    use prometheus_http_query::Error;
    match error {
        Error::Prometheus(e) => {
            query_error(query, format!("Prometheus answered {}: {}", e.error_type(), e.message()))
        }
        Error::Client(c) if c.inner().is_none() => query_error(
            query,
            format!("{c}: not an answer of the Prometheus HTTP API (is {url} a Prometheus?)"),
        ),
        other => query_error(query, chain(other)),
    }
}

fn labels(metric: &HashMap<String, String>) -> Labels {
    metric.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

impl Client {
    fn new(url: &str, w: &Window) -> Result<Client, ImportError> {
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .map_err(|e| ImportError::Client { url: url.to_owned(), why: chain(e) })?;
        let prom = prometheus_http_query::Client::from(http, url.trim_end_matches('/'))
            .map_err(|e| ImportError::Client { url: url.to_owned(), why: chain(e) })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ImportError::Client { url: url.to_owned(), why: e.to_string() })?;
        // Inwards, so every point is inside the window the scenario describes.
        let (start, end) = (w.from.ceil() as i64, w.to.floor() as i64);
        Ok(Client { url: url.to_owned(), prom, runtime, start, end, step: w.step })
    }

    /// `(labels, value)` of an instant query at the window's end.
    fn instant(&self, query: &str) -> Result<Vec<(Labels, f64)>, ImportError> {
        let answer = self
            .runtime
            .block_on(self.prom.query(query).at(self.end).get())
            .map_err(|e| failure(query, &self.url, e))?;
        match answer.data() {
            Data::Vector(rows) => {
                Ok(rows.iter().map(|r| (labels(r.metric()), r.sample().value())).collect())
            }
            other => {
                Err(query_error(query, format!("expected an instant vector, got {}", kind(other))))
            }
        }
    }

    /// `(labels, points)` of a range query over the window; points that are not finite
    /// (NaN, ±Inf) are left out.
    fn range(&self, query: &str) -> Result<Vec<(Labels, Points)>, ImportError> {
        let answer = self
            .runtime
            .block_on(self.prom.query_range(query, self.start, self.end, self.step).get())
            .map_err(|e| failure(query, &self.url, e))?;
        match answer.data() {
            Data::Matrix(series) => Ok(series
                .iter()
                .map(|s| {
                    let points = s
                        .samples()
                        .iter()
                        .map(|p| (p.timestamp(), p.value()))
                        .filter(|p| p.1.is_finite())
                        .collect();
                    (labels(s.metric()), points)
                })
                .collect()),
            other => {
                Err(query_error(query, format!("expected a range vector, got {}", kind(other))))
            }
        }
    }
}

fn kind(data: &Data) -> &'static str {
    match data {
        Data::Vector(_) => "an instant vector",
        Data::Matrix(_) => "a range vector",
        Data::Scalar(_) => "a scalar",
    }
}

fn pod_key(l: &Labels) -> Option<Key> {
    Some((l.get("namespace")?.clone(), l.get("pod")?.clone()))
}

/// Reads everything an import needs; `usage` is (cpu query, memory query, node labels).
pub fn fetch(
    url: &str,
    w: &Window,
    usage: &(String, String, Vec<String>),
) -> Result<Fetched, ImportError> {
    let client = Client::new(url, w)?;
    let span = format!("{}s", client.end - client.start);
    let over = |metric: &str| format!("max_over_time({metric}[{span}])");
    let node_of = |l: &BTreeMap<String, String>| usage.2.iter().find_map(|k| l.get(k).cloned());
    let mut f = Fetched::default();

    for (resource, unit, into) in
        [("cpu", "core", &mut f.allocatable_cpu), ("memory", "byte", &mut f.allocatable_memory)]
    {
        let q = over(&format!(
            r#"kube_node_status_allocatable{{resource="{resource}",unit="{unit}"}}"#
        ));
        for (l, v) in client.instant(&q)? {
            if let Some(node) = l.get("node") {
                into.insert(node.clone(), v);
            }
        }
    }
    for (query, into) in [(&usage.0, &mut f.node_cpu), (&usage.1, &mut f.node_memory)] {
        for (l, points) in client.range(query)? {
            if let Some(node) = node_of(&l) {
                into.entry(node).or_default().extend(points);
            }
        }
    }
    for (l, points) in client.range("kube_pod_info")? {
        let (Some((namespace, pod)), Some(first), Some(last)) =
            (pod_key(&l), points.first(), points.last())
        else {
            continue;
        };
        f.pod_info.push(PodInfo {
            namespace,
            pod,
            node: l.get("node").filter(|n| !n.is_empty()).cloned(),
            owner_kind: l.get("created_by_kind").cloned(),
            first_seen: first.0,
            last_seen: last.0,
        });
    }
    for (metric, into) in
        [("kube_pod_created", &mut f.created), ("kube_pod_deletion_timestamp", &mut f.deleted)]
    {
        for (l, v) in client.instant(&over(metric))? {
            if let Some(key) = pod_key(&l) {
                into.insert(key, v);
            }
        }
    }
    for (metric, into) in [
        ("kube_pod_container_resource_requests", &mut f.requests),
        ("kube_pod_container_resource_limits", &mut f.limits),
    ] {
        for (l, value) in client.instant(&over(metric))? {
            let get = |k: &str| l.get(k).cloned().unwrap_or_default();
            into.push(ResourceRow {
                namespace: get("namespace"),
                pod: get("pod"),
                container: get("container"),
                resource: get("resource"),
                unit: get("unit"),
                value,
            });
        }
    }
    let cpu = format!(
        "sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{{{CONTAINERS}}}[5m]))"
    );
    let memory =
        format!("sum by (namespace, pod) (container_memory_working_set_bytes{{{CONTAINERS}}})");
    for (query, into) in [(&cpu, &mut f.pod_cpu), (&memory, &mut f.pod_memory)] {
        for (l, points) in client.range(query)? {
            if let Some(key) = pod_key(&l) {
                into.insert(key, points);
            }
        }
    }
    Ok(f)
}
