//! `waterline-sim import` (sim/README.md): a cluster's own history, read from Prometheus,
//! as an explicit-list scenario (`sim/README.md`, "Importing your own history").
//!
//! What is read (all between `--from` and `--to`):
//! - nodes: `kube_node_status_allocatable` (`resource="cpu",unit="core"` and
//!   `resource="memory",unit="byte"`, kube-state-metrics v2); their usage from range queries
//!   of the policy's own 5 m average queries (`waterline:node_{cpu,memory}_usage:avg5m` by
//!   default), the node found through the policy's `nodeMapping` labels;
//! - pods: `kube_pod_info` (namespace, pod, node, created_by_kind; first and last seen),
//!   `kube_pod_created`, `kube_pod_deletion_timestamp`,
//!   `kube_pod_container_resource_requests` / `_limits` (summed over containers, cpu in cores
//!   and memory in bytes by their `resource` and `unit` labels);
//! - pods' true usage: cAdvisor's `container_cpu_usage_seconds_total` (5 m rate) and
//!   `container_memory_working_set_bytes`, summed over the pod's containers (`container`
//!   set and not `POD`, so neither the pod-level cgroup nor the pause container counts twice).
//!
//! What the scenario holds: every node with its allocatable and, as background, its usage
//! minus its pods' usage at each step (never below 0); pods created before `--from` bound
//! where they ran (`node:`), pods created inside the window arriving when they were created
//! for the strategy to place (their recorded node in a comment); each pod's usage as series
//! since its start. Gaps are decided, not guessed silently — each lands in the file's
//! header notes:
//! - a pod without cAdvisor series for a resource uses its request for it (what every
//!   request-based scheduler assumes), or the simulator's 100m / 128Mi base without one;
//! - a node without allocatable is left out, with the pods bound to it before the window;
//! - a node without a usage series has background 0 for that resource (its pods' usage
//!   still counts);
//! - a pod deleted without `kube_pod_deletion_timestamp` is deleted one step after it was
//!   last seen, when that is before the end.
//!
//! The HTTP calls are in `prom.rs`; [`assemble`] is pure and tested with hand-made series.

mod prom;
mod yaml;

pub use prom::{Fetched, fetch};
pub use yaml::to_yaml;

use std::collections::BTreeMap;

use waterline_core::Policy;
use waterline_core::policy::Resource;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{0}: not a time (RFC 3339 such as 2026-11-30T08:00:00Z, or Unix seconds)")]
    Time(String),
    #[error("--from must be before --to")]
    EmptyWindow,
    #[error("the policy has no {0} metric to read node usage from")]
    NoMetric(&'static str),
    #[error("{query}: {why}")]
    Query { query: String, why: String },
    #[error("Prometheus at {url}: {why}")]
    Client { url: String, why: String },
}

/// `2026-11-30T08:00:00Z`, `2026-11-30T08:00:00.5+01:00` or Unix seconds → Unix seconds.
pub fn parse_time(text: &str) -> Result<f64, ImportError> {
    let bad = || ImportError::Time(text.to_owned());
    if let Ok(secs) = text.parse::<f64>() {
        return Ok(secs);
    }
    let (date, rest) = text.split_once(['T', 't', ' ']).ok_or_else(bad)?;
    let mut ymd = date.splitn(3, '-').map(|p| p.parse::<i64>().map_err(|_| bad()));
    let (y, m, d) =
        (ymd.next().ok_or_else(bad)??, ymd.next().ok_or_else(bad)??, ymd.next().ok_or_else(bad)??);
    let (clock, offset) = if let Some(c) = rest.strip_suffix(['Z', 'z']) {
        (c, 0)
    } else {
        let at = rest.rfind(['+', '-']).ok_or_else(bad)?;
        let (c, o) = rest.split_at(at);
        let sign = if o.starts_with('-') { -1 } else { 1 };
        let (oh, om) = o[1..].split_once(':').ok_or_else(bad)?;
        let minutes =
            oh.parse::<i64>().map_err(|_| bad())? * 60 + om.parse::<i64>().map_err(|_| bad())?;
        (c, sign * minutes * 60)
    };
    let mut hms = clock.splitn(3, ':');
    let h: i64 = hms.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
    let mi: i64 = hms.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
    let s: f64 = hms.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s >= 61.0 {
        return Err(bad());
    }
    // Days from the civil date (Howard Hinnant's algorithm), proleptic Gregorian.
    let yy = if m <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Ok((days * 86_400 + h * 3600 + mi * 60 - offset) as f64 + s)
}

/// The window and what to read it with.
#[derive(Clone, Debug)]
pub struct Window {
    /// Unix seconds.
    pub from: f64,
    pub to: f64,
    /// Seconds between the points of every range query.
    pub step: f64,
}

/// The two queries for node usage: the policy's 5 m average metric per resource (a query
/// naming `avg5m`, else the resource's first metric), and the labels that name the node.
pub fn usage_queries(policy: &Policy) -> Result<(String, String, Vec<String>), ImportError> {
    let pick = |r: Resource, name: &'static str| {
        let of: Vec<_> = policy.metrics.iter().filter(|m| m.resource == r).collect();
        of.iter()
            .find(|m| m.query.contains("avg5m"))
            .or(of.first())
            .map(|m| m.query.clone())
            .ok_or(ImportError::NoMetric(name))
    };
    Ok((pick(Resource::Cpu, "cpu")?, pick(Resource::Memory, "memory")?, policy.node_labels.clone()))
}

/// A pod as the import sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportedPod {
    pub namespace: String,
    pub name: String,
    /// Seconds from the window's start (negative: before it).
    pub created: f64,
    pub deleted: Option<f64>,
    /// The node it ran on, if it was seen bound.
    pub node: Option<String>,
    /// Bound before the window: the scenario keeps it there.
    pub pre_bound: bool,
    pub owner_kind: Option<String>,
    pub cpu_request_cores: f64,
    pub memory_request_bytes: f64,
    pub cpu_limit_cores: Option<f64>,
    pub memory_limit_bytes: Option<f64>,
    /// `(seconds from the window's start, cores)`; `None`: no cAdvisor series.
    pub cpu_usage: Option<Vec<(f64, f64)>>,
    pub memory_usage: Option<Vec<(f64, f64)>>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportedNode {
    pub name: String,
    pub cpu_cores: f64,
    pub memory_bytes: f64,
    /// Background percent of allocatable at `(seconds from the window's start, pct)`;
    /// `None`: no usage series.
    pub cpu_background: Option<Vec<(f64, f64)>>,
    pub memory_background: Option<Vec<(f64, f64)>>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Imported {
    pub source: String,
    pub window: (f64, f64),
    pub step: f64,
    pub target: f64,
    pub threshold: f64,
    pub nodes: Vec<ImportedNode>,
    pub pods: Vec<ImportedPod>,
    /// What was missing and what was done about it, one line each.
    pub notes: Vec<String>,
}

type Key = (String, String);

/// A series' value at `t` by linear interpolation, `None` outside its points.
fn value_at(points: &[(f64, f64)], t: f64) -> Option<f64> {
    let (first, last) = (points.first()?, points.last()?);
    if t < first.0 || t > last.0 {
        return None;
    }
    let i = points.partition_point(|p| p.0 <= t);
    if i == 0 || i >= points.len() {
        return Some(if i == 0 { first.1 } else { last.1 });
    }
    let ((t0, v0), (t1, v1)) = (points[i - 1], points[i]);
    Some(if t1 > t0 { v0 + (v1 - v0) * (t - t0) / (t1 - t0) } else { v1 })
}

/// Turns what was fetched into the scenario's nodes and pods (times relative to the window's
/// start), with the notes on every gap.
pub fn assemble(f: &Fetched, window: &Window, warmup_s: f64) -> Imported {
    let rel = |t: f64| t - window.from;
    let mut notes = Vec::new();
    let mut out =
        Imported { window: (window.from, window.to), step: window.step, ..Default::default() };

    // Pods: one entry per (namespace, pod) seen in kube_pod_info.
    let mut pods: BTreeMap<Key, ImportedPod> = BTreeMap::new();
    for info in &f.pod_info {
        let key = (info.namespace.clone(), info.pod.clone());
        let pod = pods.entry(key.clone()).or_insert_with(|| ImportedPod {
            namespace: key.0.clone(),
            name: key.1.clone(),
            created: f64::NAN,
            ..Default::default()
        });
        if info.node.as_deref().is_some_and(|n| !n.is_empty()) {
            pod.node = info.node.clone();
        }
        if info.owner_kind.as_deref().is_some_and(|k| !k.is_empty() && k != "<none>") {
            pod.owner_kind = info.owner_kind.clone();
        }
        let (first, last) = (rel(info.first_seen), rel(info.last_seen));
        pod.created = if pod.created.is_nan() { first } else { pod.created.min(first) };
        let ended = last + window.step;
        pod.deleted = Some(pod.deleted.map_or(ended, |d: f64| d.max(ended)));
    }
    let end = rel(window.to);
    for pod in pods.values_mut() {
        // Seen until the end: not deleted (yet).
        if pod.deleted.is_some_and(|d| d > end) {
            pod.deleted = None;
        }
    }
    for ((ns, name), t) in &f.created {
        if let Some(p) = pods.get_mut(&(ns.clone(), name.clone())) {
            p.created = rel(*t);
        }
    }
    for ((ns, name), t) in &f.deleted {
        if let Some(p) = pods.get_mut(&(ns.clone(), name.clone())) {
            p.deleted = Some(rel(*t));
        }
    }
    for r in &f.requests {
        if let Some(p) = pods.get_mut(&(r.namespace.clone(), r.pod.clone())) {
            match (r.resource.as_str(), r.unit.as_str()) {
                ("cpu", "core") => p.cpu_request_cores += r.value,
                ("memory", "byte") => p.memory_request_bytes += r.value,
                _ => {}
            }
        }
    }
    // Limits: kube-state-metrics reports only the limits that are set, and a container
    // without one leaves the pod unbounded in that resource (core's rule), so a pod is
    // bounded only when every container seen in its requests or limits has one.
    let mut containers: BTreeMap<Key, std::collections::BTreeSet<&str>> = BTreeMap::new();
    for r in f.requests.iter().chain(&f.limits) {
        containers.entry((r.namespace.clone(), r.pod.clone())).or_default().insert(&r.container);
    }
    let mut limits: BTreeMap<(Key, &str), (f64, usize)> = BTreeMap::new();
    for r in &f.limits {
        let resource = match (r.resource.as_str(), r.unit.as_str()) {
            ("cpu", "core") => "cpu",
            ("memory", "byte") => "memory",
            _ => continue,
        };
        let e = limits.entry(((r.namespace.clone(), r.pod.clone()), resource)).or_default();
        e.0 += r.value;
        e.1 += 1;
    }
    for ((key, resource), (sum, count)) in limits {
        let all = containers.get(&key).map_or(0, |c| c.len());
        if let Some(p) = pods.get_mut(&key)
            && count == all
        {
            if resource == "cpu" {
                p.cpu_limit_cores = Some(sum)
            } else {
                p.memory_limit_bytes = Some(sum)
            }
        }
    }
    for (series, cpu) in [(&f.pod_cpu, true), (&f.pod_memory, false)] {
        for ((ns, name), points) in series {
            if let Some(p) = pods.get_mut(&(ns.clone(), name.clone())) {
                let points: Vec<(f64, f64)> = points.iter().map(|&(t, v)| (rel(t), v)).collect();
                if cpu { p.cpu_usage = Some(points) } else { p.memory_usage = Some(points) }
            }
        }
    }

    // Nodes: those with allocatable.
    let mut nodes: BTreeMap<String, ImportedNode> = BTreeMap::new();
    for (node, cores) in &f.allocatable_cpu {
        let Some(bytes) = f.allocatable_memory.get(node) else {
            notes.push(format!("node {node}: no memory allocatable, left out"));
            continue;
        };
        nodes.insert(
            node.clone(),
            ImportedNode {
                name: node.clone(),
                cpu_cores: *cores,
                memory_bytes: *bytes,
                ..Default::default()
            },
        );
    }
    for node in f.node_cpu.keys().chain(f.node_memory.keys()) {
        if !nodes.contains_key(node) && !f.allocatable_cpu.contains_key(node) {
            let note = format!("node {node}: usage but no kube_node_status_allocatable, left out");
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }

    let mut kept = Vec::new();
    for (_, mut pod) in pods {
        if pod.created.is_nan() {
            continue;
        }
        if pod.deleted.is_some_and(|d| d <= 0.0 || d <= pod.created) {
            continue; // gone before the window
        }
        pod.pre_bound = pod.created < 0.0 && pod.node.is_some();
        if pod.pre_bound && !pod.node.as_ref().is_some_and(|n| nodes.contains_key(n)) {
            notes.push(format!(
                "pod {}/{}: bound to {} (left out) before the window, left out",
                pod.namespace,
                pod.name,
                pod.node.as_deref().unwrap_or("?")
            ));
            continue;
        }
        for (missing, what) in
            [(pod.cpu_usage.is_none(), "cpu"), (pod.memory_usage.is_none(), "memory")]
        {
            if missing {
                notes.push(format!(
                    "pod {}/{}: no cAdvisor {what} series, its {what} request stands in as usage",
                    pod.namespace, pod.name
                ));
            }
        }
        kept.push(pod);
    }

    // Background = node usage − its pods' usage, in percent, at every point of the node's
    // series. A pod counts from its start (pre-bound: the warm-up's start at the earliest)
    // until its deletion; without a usage series its request counts.
    let usage_at = |pod: &ImportedPod, cpu: bool, t: f64| -> f64 {
        let start = pod.created.max(-warmup_s);
        if t < start || pod.deleted.is_some_and(|d| t >= d) {
            return 0.0;
        }
        let (series, request) = if cpu {
            (&pod.cpu_usage, pod.cpu_request_cores)
        } else {
            (&pod.memory_usage, pod.memory_request_bytes)
        };
        match series {
            Some(points) => value_at(points, t).unwrap_or(0.0),
            None => request,
        }
    };
    for node in nodes.values_mut() {
        let on_node: Vec<&ImportedPod> =
            kept.iter().filter(|p| p.node.as_deref() == Some(node.name.as_str())).collect();
        for (cpu, series) in [(true, &f.node_cpu), (false, &f.node_memory)] {
            let capacity = if cpu { node.cpu_cores } else { node.memory_bytes };
            let background = series.get(&node.name).map(|points| {
                points
                    .iter()
                    .map(|&(t, pct)| {
                        let t = rel(t);
                        let pods: f64 = on_node.iter().map(|p| usage_at(p, cpu, t)).sum();
                        (t, (pct - pods / capacity * 100.0).max(0.0))
                    })
                    .collect::<Vec<_>>()
            });
            if background.is_none() {
                notes.push(format!(
                    "node {}: no {} usage series, background 0",
                    node.name,
                    if cpu { "cpu" } else { "memory" }
                ));
            }
            if cpu { node.cpu_background = background } else { node.memory_background = background }
        }
    }
    out.nodes = nodes.into_values().collect();
    out.pods = kept;
    out.pods.sort_by(|a, b| a.created.total_cmp(&b.created).then(a.name.cmp(&b.name)));
    out.notes = notes;
    out
}

#[cfg(test)]
mod tests;
