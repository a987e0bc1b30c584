//! `--static FILE`: nodes, capacities and usage written by hand, for demos, tests and
//! clusters without Prometheus. The file is re-read when it changes (a bad edit is logged
//! and the previous nodes stay), and its samples are re-stamped so they never go stale
//! unless the file says how old they are (`{value: 40, age: 10m}`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use waterline_core::quantity::{QuantityError, parse_bytes, parse_cpu_millis};
use waterline_core::snapshot::{Capacity, Sample};
use waterline_core::time::parse_duration;
use waterline_core::{Millis, UnixMillis};

use crate::state::{ClusterState, NodeRecord};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StaticFile {
    nodes: Vec<StaticNode>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StaticNode {
    name: String,
    #[serde(default)]
    capacity: StaticCapacity,
    #[serde(default)]
    metrics: BTreeMap<String, StaticValue>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct StaticCapacity {
    cpu: Option<serde_yaml::Value>,
    memory: Option<serde_yaml::Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StaticValue {
    Plain(f64),
    Aged { value: f64, age: String },
}

/// Why the static node file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StaticFileError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{0}")]
    Yaml(#[from] serde_yaml::Error),
    /// A value or rule of the file, with the field it is about.
    #[error("{0}")]
    Invalid(String),
}

/// Nodes as the file describes them, with samples stamped relative to `now`.
pub fn parse(text: &str, now: UnixMillis) -> Result<BTreeMap<String, NodeRecord>, StaticFileError> {
    parse_nodes(text, now).map_err(|e| match e {
        Parse::Yaml(e) => StaticFileError::Yaml(e),
        Parse::Invalid(why) => StaticFileError::Invalid(why),
    })
}

enum Parse {
    Yaml(serde_yaml::Error),
    Invalid(String),
}

impl From<String> for Parse {
    fn from(why: String) -> Self {
        Parse::Invalid(why)
    }
}

fn parse_nodes(text: &str, now: UnixMillis) -> Result<BTreeMap<String, NodeRecord>, Parse> {
    let file: StaticFile = serde_yaml::from_str(text).map_err(Parse::Yaml)?;
    let mut nodes = BTreeMap::new();
    for (i, node) in file.nodes.into_iter().enumerate() {
        if node.name.is_empty() {
            return Err(format!("nodes[{i}].name must not be empty").into());
        }
        let quantity = |v: &Option<serde_yaml::Value>,
                        parse: fn(&str) -> Result<i64, QuantityError>,
                        field| {
            let text = match v {
                None => return Ok(0),
                Some(serde_yaml::Value::String(s)) => s.clone(),
                Some(serde_yaml::Value::Number(n)) => n.to_string(),
                Some(other) => {
                    return Err(format!(
                        "nodes[{i}].capacity.{field}: {other:?} is not a quantity"
                    ));
                }
            };
            parse(&text).map_err(|e| format!("nodes[{i}].capacity.{field}: {e}"))
        };
        let capacity = Capacity {
            cpu_millis: quantity(&node.capacity.cpu, parse_cpu_millis, "cpu")?,
            memory_bytes: quantity(&node.capacity.memory, parse_bytes, "memory")?,
        };
        let mut samples = BTreeMap::new();
        for (metric, value) in node.metrics {
            let (value, age) = match value {
                StaticValue::Plain(v) => (v, Millis(0)),
                StaticValue::Aged { value, age } => (
                    value,
                    parse_duration(&age)
                        .map_err(|e| format!("nodes[{i}].metrics.{metric}.age: {e}"))?,
                ),
            };
            if !value.is_finite() {
                return Err(format!("nodes[{i}].metrics.{metric}: {value} is not a number").into());
            }
            samples.insert(metric, Sample { value, at: now.minus(age) });
        }
        if nodes.insert(node.name.clone(), NodeRecord { capacity, samples }).is_some() {
            return Err(format!("nodes[{i}].name: '{}' appears twice", node.name).into());
        }
    }
    Ok(nodes)
}

fn read(path: &Path) -> Result<String, StaticFileError> {
    std::fs::read_to_string(path)
        .map_err(|source| StaticFileError::Read { path: path.display().to_string(), source })
}

/// Loads the file once; an error here stops the collector from starting.
pub fn load(path: &Path, state: &ClusterState) -> Result<(), StaticFileError> {
    let nodes = read(path).and_then(|text| parse(&text, UnixMillis::now()))?;
    tracing::info!(nodes = nodes.len(), path = %path.display(), "static nodes loaded");
    state.replace_nodes(nodes);
    Ok(())
}

/// Re-reads the file every `every`; unchanged values only get fresh timestamps every
/// `restamp` (so scorers are not flooded with identical nodes).
pub async fn watch(path: PathBuf, state: ClusterState, every: Duration, restamp: Duration) {
    let mut last_text = read(&path).ok();
    let mut last_stamp = tokio::time::Instant::now();
    let mut ticker = tokio::time::interval(every);
    loop {
        ticker.tick().await;
        let text = match read(&path) {
            Ok(text) => text,
            Err(error) => {
                tracing::warn!(%error, "static file unreadable; keeping the previous nodes");
                continue;
            }
        };
        let changed = last_text.as_deref() != Some(text.as_str());
        if !changed && last_stamp.elapsed() < restamp {
            continue;
        }
        match parse(&text, UnixMillis::now()) {
            Ok(nodes) => {
                if changed {
                    tracing::info!(nodes = nodes.len(), "static file changed");
                }
                state.replace_nodes(nodes);
                last_stamp = tokio::time::Instant::now();
            }
            Err(error) if changed => {
                tracing::error!(%error, path = %path.display(), "static file edit rejected; keeping the previous nodes");
            }
            Err(_) => {}
        }
        last_text = Some(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nodes_capacities_and_aged_samples() {
        let text = "nodes:\n  - name: a\n    capacity: {cpu: \"8\", memory: 32Gi}\n    metrics:\n      cpu_usage_avg_5m: 25.0\n      mem_usage_avg_5m: {value: 40, age: 10m}\n  - name: b\n    capacity: {cpu: 4}\n";
        let now = UnixMillis(1_000_000_000);
        let nodes = parse(text, now).unwrap();
        let a = &nodes["a"];
        assert_eq!(a.capacity, Capacity { cpu_millis: 8000, memory_bytes: 32 << 30 });
        assert_eq!(a.samples["cpu_usage_avg_5m"], Sample { value: 25.0, at: now });
        assert_eq!(a.samples["mem_usage_avg_5m"].at, now.minus(Millis::from_mins(10)));
        assert_eq!(nodes["b"].capacity.cpu_millis, 4000);
        assert!(nodes["b"].samples.is_empty());
    }

    #[test]
    fn errors_name_the_node_and_field() {
        let err = parse("nodes:\n  - name: a\n    capacity: {cpu: lots}\n", UnixMillis(0))
            .unwrap_err()
            .to_string();
        assert!(err.contains("nodes[0].capacity.cpu"), "{err}");
        let err =
            parse("nodes:\n  - name: a\n  - name: a\n", UnixMillis(0)).unwrap_err().to_string();
        assert!(err.contains("appears twice"), "{err}");
        let err = parse("nodez: []\n", UnixMillis(0)).unwrap_err().to_string();
        assert!(err.contains("nodez"), "{err}");
    }
}
