//! What metrics-server answers, and how the policy names a value derived from it.
//!
//! * [`NodeMetricsList`]: `GET /apis/metrics.k8s.io/v1beta1/nodes` (k8s-openapi has no
//!   metrics types; only the fields used are read, each item on its own so one malformed
//!   item does not lose the others).
//! * [`node_usage`]: one item → usage in percent of the node's allocatable.
//! * [`derive`]: a policy metric's `query`, read as the recording rule whose value the
//!   collector computes itself (docs/policy.md#metrics-from-metrics-server).

use serde::Deserialize;
use waterline_core::Capacity;
use waterline_core::quantity::{parse_bytes, parse_cpu_millis};

use super::history::{DAY_SLOTS, SLOT_MS, UsagePercent, UsageResource};

/// The list metrics-server serves; items stay JSON until [`node_usage`] reads them.
#[derive(Debug, Deserialize)]
pub struct NodeMetricsList {
    #[serde(default)]
    pub items: Vec<serde_json::Value>,
}

/// One NodeMetrics item, read.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeUsage {
    /// `metadata.name`: the node's name.
    pub node: String,
    /// `timestamp` in Unix ms: when the kubelet's sample was taken.
    pub at_ms: i64,
    pub percent: UsagePercent,
}

/// Why an item cannot be read; `field` is its JSON path (`items[3].usage.cpu`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ItemError {
    pub field: String,
    pub reason: String,
}

#[derive(Deserialize)]
struct Item {
    metadata: Meta,
    timestamp: Option<String>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Meta {
    name: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    cpu: Option<String>,
    memory: Option<String>,
}

/// The node an item is about, before anything else is read (to find its allocatable).
pub fn item_node(item: &serde_json::Value) -> Option<&str> {
    item.get("metadata")?.get("name")?.as_str().filter(|n| !n.is_empty())
}

/// Reads item `index` of the list against the node's allocatable `capacity`: cpu usage ÷
/// allocatable cpu × 100 and working-set memory ÷ allocatable memory × 100 (usage above
/// allocatable reads above 100; the percent metrics are clamped to 0..100 afterwards, as
/// every percent metric is).
pub fn node_usage(
    index: usize,
    item: &serde_json::Value,
    capacity: Capacity,
) -> Result<NodeUsage, ItemError> {
    let at =
        |field: &str, reason: String| ItemError { field: format!("items[{index}]{field}"), reason };
    let item: Item = serde_json::from_value(item.clone()).map_err(|e| at("", e.to_string()))?;
    let node = item
        .metadata
        .name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| at(".metadata.name", "missing".into()))?;
    let stamp = item.timestamp.ok_or_else(|| at(".timestamp", "missing".into()))?;
    let at_ms = stamp
        .parse::<k8s_openapi::jiff::Timestamp>()
        .map_err(|e| at(".timestamp", format!("{stamp:?} is not an RFC 3339 time: {e}")))?
        .as_millisecond();
    let usage = item.usage.ok_or_else(|| at(".usage", "missing".into()))?;
    let cpu = usage.cpu.ok_or_else(|| at(".usage.cpu", "missing".into()))?;
    let memory = usage.memory.ok_or_else(|| at(".usage.memory", "missing".into()))?;
    let cpu_millis =
        parse_cpu_millis(&cpu).map_err(|e| at(".usage.cpu", format!("{cpu:?}: {e}")))?;
    let memory_bytes =
        parse_bytes(&memory).map_err(|e| at(".usage.memory", format!("{memory:?}: {e}")))?;
    if capacity.cpu_millis <= 0 || capacity.memory_bytes <= 0 {
        return Err(at("", format!("node {node} has no allocatable cpu and memory yet")));
    }
    let percent = UsagePercent {
        cpu: (cpu_millis as f64 / capacity.cpu_millis as f64 * 100.0) as f32,
        memory: (memory_bytes as f64 / capacity.memory_bytes as f64 * 100.0) as f32,
    };
    Ok(NodeUsage { node, at_ms, percent })
}

/// Which value of a node's history a policy metric reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stat {
    /// The mean of the last 5 minutes.
    Average,
    /// The highest 5-minute average over this many 5-minute slots.
    MaxOfAverages { slots: usize },
}

/// A policy metric as the metrics-server source reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Derived {
    pub resource: UsageResource,
    pub stat: Stat,
}

/// The query prefix every derivable metric starts with.
const PREFIX: &str = "waterline:node_";

/// Reads a policy metric's `query` as one of the recording rules of
/// `deploy/prometheus/rules.yml` the collector can compute from metrics-server:
/// `waterline:node_{cpu|memory}_usage:avg5m` (the 5-minute average) or
/// `waterline:node_{cpu|memory}_usage:max_avg<W>` (the highest 5-minute average over the
/// window `W`: a multiple of 5m, from 5m to 1d; `1h` and `1d` are the shipped rules). So
/// the default policy's six metrics work unchanged. `Err` says why another query cannot be.
pub fn derive(query: &str) -> Result<Derived, String> {
    let query = query.trim();
    let not = |why: &str| {
        Err(format!(
            "query {query:?} is not derivable from metrics-server ({why}); it reads \
             waterline:node_cpu_usage:avg5m, waterline:node_memory_usage:max_avg1h, … \
             (docs/policy.md#metrics-from-metrics-server)"
        ))
    };
    let Some(rest) = query.strip_prefix(PREFIX) else {
        return not("not a waterline:node_… recording rule name");
    };
    let (resource, stat) = match rest.split_once("_usage:") {
        Some(("cpu", stat)) => (UsageResource::Cpu, stat),
        Some(("memory", stat)) => (UsageResource::Memory, stat),
        _ => return not("the resource is cpu or memory"),
    };
    if stat == "avg5m" {
        return Ok(Derived { resource, stat: Stat::Average });
    }
    let Some(window) = stat.strip_prefix("max_avg") else {
        return not("the statistic is avg5m or max_avg<window>");
    };
    let Ok(window) = waterline_core::time::parse_std_duration(window) else {
        return not("the window is a duration such as 1h");
    };
    let window_ms = window.as_millis() as i64;
    if window_ms < SLOT_MS || window_ms > SLOT_MS * DAY_SLOTS as i64 || window_ms % SLOT_MS != 0 {
        return not("the window is a multiple of 5m from 5m to 1d");
    }
    Ok(Derived { resource, stat: Stat::MaxOfAverages { slots: (window_ms / SLOT_MS) as usize } })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn capacity() -> Capacity {
        // 8 cores, 32 GiB allocatable.
        Capacity { cpu_millis: 8000, memory_bytes: 32 << 30 }
    }

    #[test]
    fn usage_is_a_percent_of_allocatable() {
        // What metrics-server answers: nanocores and Ki.
        let item = json!({
            "metadata": {"name": "node-1", "creationTimestamp": "2026-01-05T10:00:00Z"},
            "timestamp": "2026-01-05T10:00:00Z", "window": "20.042s",
            "usage": {"cpu": "2000000000n", "memory": "8388608Ki"}
        });
        let read = node_usage(0, &item, capacity()).unwrap();
        assert_eq!(read.node, "node-1");
        assert_eq!(read.at_ms, 1_767_607_200_000);
        // 2 cores of 8 = 25 %; 8 GiB of 32 GiB = 25 %.
        assert_eq!(read.percent, UsagePercent { cpu: 25.0, memory: 25.0 });
        // 6.5 cores of 8 = 81.25 %; 40 GiB of 32 GiB = 125 % (above allocatable, clamped later).
        let item = json!({"metadata": {"name": "node-2"}, "timestamp": "2026-01-05T10:00:15.5Z",
                          "usage": {"cpu": "6500m", "memory": "40Gi"}});
        let read = node_usage(1, &item, capacity()).unwrap();
        assert_eq!(read.at_ms, 1_767_607_215_500);
        assert_eq!(read.percent, UsagePercent { cpu: 81.25, memory: 125.0 });
    }

    #[test]
    fn a_malformed_item_names_its_field() {
        let error =
            |item: serde_json::Value| node_usage(3, &item, capacity()).unwrap_err().to_string();
        let ok_usage = json!({"cpu": "1", "memory": "1Gi"});
        assert_eq!(
            error(json!({"metadata": {}, "timestamp": "2026-01-05T10:00:00Z", "usage": ok_usage})),
            "items[3].metadata.name: missing"
        );
        let e =
            error(json!({"metadata": {"name": "n"}, "timestamp": "yesterday", "usage": ok_usage}));
        assert!(e.starts_with("items[3].timestamp: \"yesterday\" is not an RFC 3339 time"), "{e}");
        let e = error(json!({"metadata": {"name": "n"}, "timestamp": "2026-01-05T10:00:00Z",
                             "usage": {"cpu": "lots", "memory": "1Gi"}}));
        assert!(e.starts_with("items[3].usage.cpu: \"lots\""), "{e}");
        let e = error(json!({"metadata": {"name": "n"}, "timestamp": "2026-01-05T10:00:00Z",
                             "usage": {"cpu": "1"}}));
        assert_eq!(e, "items[3].usage.memory: missing");
        let e = error(json!({"metadata": {"name": "n"}, "timestamp": "2026-01-05T10:00:00Z"}));
        assert_eq!(e, "items[3].usage: missing");
        let e = error(json!("not an object"));
        assert!(e.starts_with("items[3]: "), "{e}");
        let none = Capacity::default();
        let e = node_usage(
            0,
            &json!({"metadata": {"name": "n"}, "timestamp": "2026-01-05T10:00:00Z",
                                      "usage": ok_usage}),
            none,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "items[0]: node n has no allocatable cpu and memory yet");
    }

    #[test]
    fn the_item_node_is_read_before_the_rest() {
        assert_eq!(item_node(&json!({"metadata": {"name": "a"}})), Some("a"));
        assert_eq!(item_node(&json!({"metadata": {"name": ""}})), None);
        assert_eq!(item_node(&json!([])), None);
    }

    #[test]
    fn the_default_policy_metrics_are_derivable() {
        use Stat::*;
        use UsageResource::*;
        let derived: Vec<Derived> = waterline_core::Policy::default()
            .metrics
            .iter()
            .map(|m| derive(&m.query).unwrap())
            .collect();
        let want = [
            (Cpu, Average),
            (Cpu, MaxOfAverages { slots: 12 }),
            (Cpu, MaxOfAverages { slots: 288 }),
            (Memory, Average),
            (Memory, MaxOfAverages { slots: 12 }),
            (Memory, MaxOfAverages { slots: 288 }),
        ];
        let want: Vec<Derived> =
            want.iter().map(|&(resource, stat)| Derived { resource, stat }).collect();
        assert_eq!(derived, want);
        assert_eq!(
            derive(" waterline:node_cpu_usage:max_avg30m ").unwrap().stat,
            MaxOfAverages { slots: 6 }
        );
    }

    #[test]
    fn other_queries_say_why_not() {
        for (query, why) in [
            ("waterline:node_network_bytes:rate5m", "the resource is cpu or memory"),
            ("node_load1", "not a waterline:node_"),
            ("waterline:node_cpu_usage:avg15m", "avg5m or max_avg"),
            ("waterline:node_cpu_usage:max_avg7m", "multiple of 5m"),
            ("waterline:node_cpu_usage:max_avg2d", "multiple of 5m from 5m to 1d"),
            ("waterline:node_memory_usage:max_avgsoon", "a duration"),
        ] {
            let error = derive(query).unwrap_err();
            assert!(error.contains(why), "{query}: {error}");
        }
    }
}
