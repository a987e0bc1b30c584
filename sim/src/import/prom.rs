//! The Prometheus HTTP API calls of an import: a handful of queries over the whole window,
//! never one per node or pod. Instant queries of `max_over_time(x[window])` at the window's
//! end give one value per series that existed in it (allocatable, creation and deletion
//! times, requests, limits); range queries give the time series (node usage, pods' usage,
//! and `kube_pod_info` for when each pod was seen and where).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

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

struct Client {
    http: reqwest::blocking::Client,
    base: String,
}

fn query_error(query: &str, why: impl std::fmt::Display) -> ImportError {
    ImportError::Query { query: query.to_owned(), why: why.to_string() }
}

impl Client {
    fn get(
        &self,
        api: &str,
        query: &str,
        params: &[(&str, String)],
    ) -> Result<Vec<Value>, ImportError> {
        let mut all: Vec<(&str, String)> = vec![("query", query.to_owned())];
        all.extend(params.iter().cloned());
        let response = self
            .http
            .get(format!("{}/api/v1/{api}", self.base))
            .query(&all)
            .send()
            .map_err(|e| query_error(query, e))?;
        let status = response.status();
        let body: Value =
            response.json().map_err(|e| query_error(query, format!("HTTP {status}: {e}")))?;
        if body["status"] != "success" {
            return Err(query_error(query, format!("HTTP {status}: {}", body["error"])));
        }
        Ok(body["data"]["result"].as_array().cloned().unwrap_or_default())
    }

    /// `(labels, value)` of an instant query at `at`.
    fn instant(&self, query: &str, at: f64) -> Result<Vec<(Labels, f64)>, ImportError> {
        self.get("query", query, &[("time", format!("{at:.3}"))])?
            .iter()
            .map(|r| Ok((labels(r), number(&r["value"][1]).map_err(|e| query_error(query, e))?)))
            .collect()
    }

    /// `(labels, points)` of a range query over the window.
    fn range(&self, query: &str, w: &Window) -> Result<Vec<(Labels, Points)>, ImportError> {
        let params = [
            ("start", format!("{:.3}", w.from)),
            ("end", format!("{:.3}", w.to)),
            ("step", format!("{}", w.step)),
        ];
        self.get("query_range", query, &params)?
            .iter()
            .map(|r| {
                let points = r["values"]
                    .as_array()
                    .map(|v| {
                        v.iter()
                            .map(|p| Ok((p[0].as_f64().unwrap_or(0.0), number(&p[1])?)))
                            .collect::<Result<Vec<_>, String>>()
                    })
                    .transpose()
                    .map_err(|e| query_error(query, e))?
                    .unwrap_or_default();
                Ok((labels(r), points.into_iter().filter(|p| p.1.is_finite()).collect()))
            })
            .collect()
    }
}

fn labels(result: &Value) -> BTreeMap<String, String> {
    result["metric"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned())).collect())
        .unwrap_or_default()
}

fn number(v: &Value) -> Result<f64, String> {
    let text = v.as_str().ok_or_else(|| format!("sample value {v} is not a string"))?;
    match text {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => text.parse().map_err(|_| format!("sample value {text:?} is not a number")),
    }
}

fn pod_key(l: &BTreeMap<String, String>) -> Option<Key> {
    Some((l.get("namespace")?.clone(), l.get("pod")?.clone()))
}

/// Reads everything an import needs; `usage` is (cpu query, memory query, node labels).
pub fn fetch(
    url: &str,
    w: &Window,
    usage: &(String, String, Vec<String>),
) -> Result<Fetched, ImportError> {
    let client = Client {
        http: reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| query_error("(client)", e))?,
        base: url.trim_end_matches('/').to_owned(),
    };
    let span = format!("{}s", (w.to - w.from).ceil() as i64);
    let over = |metric: &str| format!("max_over_time({metric}[{span}])");
    let node_of = |l: &BTreeMap<String, String>| usage.2.iter().find_map(|k| l.get(k).cloned());
    let mut f = Fetched::default();

    for (resource, unit, into) in
        [("cpu", "core", &mut f.allocatable_cpu), ("memory", "byte", &mut f.allocatable_memory)]
    {
        let q = over(&format!(
            r#"kube_node_status_allocatable{{resource="{resource}",unit="{unit}"}}"#
        ));
        for (l, v) in client.instant(&q, w.to)? {
            if let Some(node) = l.get("node") {
                into.insert(node.clone(), v);
            }
        }
    }
    for (query, into) in [(&usage.0, &mut f.node_cpu), (&usage.1, &mut f.node_memory)] {
        for (l, points) in client.range(query, w)? {
            if let Some(node) = node_of(&l) {
                into.entry(node).or_default().extend(points);
            }
        }
    }
    for (l, points) in client.range("kube_pod_info", w)? {
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
        for (l, v) in client.instant(&over(metric), w.to)? {
            if let Some(key) = pod_key(&l) {
                into.insert(key, v);
            }
        }
    }
    for (metric, into) in [
        ("kube_pod_container_resource_requests", &mut f.requests),
        ("kube_pod_container_resource_limits", &mut f.limits),
    ] {
        for (l, value) in client.instant(&over(metric), w.to)? {
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
        for (l, points) in client.range(query, w)? {
            if let Some(key) = pod_key(&l) {
                into.insert(key, points);
            }
        }
    }
    Ok(f)
}
