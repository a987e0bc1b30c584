//! Conversions between the generated `waterline.v1` types and the domain, with the input
//! validation that turns bad requests into INVALID_ARGUMENT reasons.

use waterline_api::v1 as pb;
use waterline_core::estimate::Usage;
use waterline_core::snapshot::{Capacity, Sample};
use waterline_core::{LedgerEntry, LedgerSource, Millis, NodeState, Pod, Snapshot, UnixMillis};

pub fn timestamp(at: UnixMillis) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: at.0.div_euclid(1000),
        nanos: (at.0.rem_euclid(1000) * 1_000_000) as i32,
    }
}

pub fn unix_millis(ts: &prost_types::Timestamp) -> UnixMillis {
    UnixMillis(ts.seconds.saturating_mul(1000).saturating_add(i64::from(ts.nanos) / 1_000_000))
}

pub fn duration(span: Millis) -> prost_types::Duration {
    prost_types::Duration {
        seconds: span.0.div_euclid(1000),
        nanos: (span.0.rem_euclid(1000) * 1_000_000) as i32,
    }
}

/// The pod of a request; `None` or negative quantities are errors naming the field.
pub fn pod_from_proto(pod: Option<&pb::PodInfo>) -> Result<Pod, String> {
    let pod = pod.ok_or("pod is required")?;
    let quantities = [
        ("pod.cpu_request_millis", pod.cpu_request_millis),
        ("pod.cpu_limit_millis", pod.cpu_limit_millis),
        ("pod.memory_request_bytes", pod.memory_request_bytes),
        ("pod.memory_limit_bytes", pod.memory_limit_bytes),
    ];
    if let Some((field, value)) = quantities.iter().find(|(_, v)| *v < 0) {
        return Err(format!("{field} must not be negative (got {value})"));
    }
    Ok(Pod {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        uid: pod.uid.clone(),
        labels: pod.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        cpu_request_millis: pod.cpu_request_millis,
        cpu_limit_millis: pod.cpu_limit_millis,
        memory_request_bytes: pod.memory_request_bytes,
        memory_limit_bytes: pod.memory_limit_bytes,
        owner_kind: pod.owner_kind.clone(),
    })
}

/// Candidate node names: not empty, none blank, at most `max_nodes`.
pub fn check_node_names(names: &[String], max_nodes: usize) -> Result<(), String> {
    if names.is_empty() {
        return Err("node_names must not be empty".into());
    }
    if names.len() > max_nodes {
        return Err(format!(
            "{} node names exceed the limit of {max_nodes} (--max-nodes)",
            names.len()
        ));
    }
    if let Some(i) = names.iter().position(|n| n.is_empty()) {
        return Err(format!("node_names[{i}] is empty"));
    }
    Ok(())
}

/// A placement from Reserve: uid and node are required.
pub fn placement(
    pod: &Pod,
    node: &str,
    usage: Usage,
    now: UnixMillis,
) -> Result<LedgerEntry, String> {
    if pod.uid.is_empty() {
        return Err("pod.uid is required".into());
    }
    if node.is_empty() {
        return Err("node_name is required".into());
    }
    Ok(LedgerEntry {
        uid: pod.uid.clone(),
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        node: node.to_owned(),
        placed_at: now,
        usage,
        source: LedgerSource::Reserve,
        labels: pod.labels.clone(),
    })
}

pub fn capacity_to_proto(c: Capacity) -> pb::Capacity {
    pb::Capacity { cpu_millis: c.cpu_millis, memory_bytes: c.memory_bytes }
}

pub fn node_to_proto(snapshot: &Snapshot, node: &NodeState) -> pb::NodeState {
    pb::NodeState {
        name: node.name.clone(),
        capacity: Some(capacity_to_proto(node.capacity)),
        metrics: snapshot
            .samples_of(node)
            .map(|(metric, s)| pb::MetricSample {
                metric: metric.to_owned(),
                value_percent: s.value,
                sampled_at: Some(timestamp(s.at)),
            })
            .collect(),
    }
}

/// Applies a streamed node to a snapshot.
pub fn apply_node(snapshot: &mut Snapshot, node: &pb::NodeState) {
    let capacity = node
        .capacity
        .map(|c| Capacity { cpu_millis: c.cpu_millis, memory_bytes: c.memory_bytes })
        .unwrap_or_default();
    snapshot.upsert_node(
        &node.name,
        capacity,
        node.metrics.iter().filter(|m| m.value_percent.is_finite()).map(|m| {
            let at = m.sampled_at.as_ref().map(unix_millis).unwrap_or_default();
            (m.metric.as_str(), Sample { value: m.value_percent, at })
        }),
    );
}

pub fn entry_to_proto(entry: &LedgerEntry, absorb_remaining: Option<Millis>) -> pb::LedgerEntry {
    pb::LedgerEntry {
        pod_uid: entry.uid.clone(),
        namespace: entry.namespace.clone(),
        name: entry.name.clone(),
        node_name: entry.node.clone(),
        placed_at: Some(timestamp(entry.placed_at)),
        cpu_millis: entry.usage.cpu_millis,
        memory_bytes: entry.usage.memory_bytes,
        source: match entry.source {
            LedgerSource::Reserve => pb::LedgerSource::Reserve,
            LedgerSource::Watch => pb::LedgerSource::Watch,
        } as i32,
        labels: entry.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        absorb_remaining: absorb_remaining.map(duration),
        absorb_remaining_by_metric: Default::default(),
    }
}

pub fn entry_from_proto(entry: &pb::LedgerEntry) -> Result<LedgerEntry, String> {
    if entry.pod_uid.is_empty() || entry.node_name.is_empty() {
        return Err("ledger entry without pod_uid or node_name".into());
    }
    Ok(LedgerEntry {
        uid: entry.pod_uid.clone(),
        namespace: entry.namespace.clone(),
        name: entry.name.clone(),
        node: entry.node_name.clone(),
        placed_at: entry.placed_at.as_ref().map(unix_millis).unwrap_or_default(),
        usage: Usage { cpu_millis: entry.cpu_millis, memory_bytes: entry.memory_bytes },
        source: match pb::LedgerSource::try_from(entry.source) {
            Ok(pb::LedgerSource::Watch) => LedgerSource::Watch,
            _ => LedgerSource::Reserve,
        },
        labels: entry.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_including_negative_millis() {
        for ms in [0, 1, 999, 1_800_000_000_123, -1] {
            assert_eq!(unix_millis(&timestamp(UnixMillis(ms))), UnixMillis(ms));
        }
    }

    #[test]
    fn missing_pod_and_negative_quantities_are_named() {
        assert_eq!(pod_from_proto(None).unwrap_err(), "pod is required");
        let pod = pb::PodInfo { memory_limit_bytes: -5, ..Default::default() };
        assert_eq!(
            pod_from_proto(Some(&pod)).unwrap_err(),
            "pod.memory_limit_bytes must not be negative (got -5)"
        );
    }

    #[test]
    fn node_name_checks() {
        assert!(check_node_names(&[], 10).unwrap_err().contains("empty"));
        let many: Vec<String> = (0..11).map(|i| i.to_string()).collect();
        assert!(check_node_names(&many, 10).unwrap_err().contains("limit of 10"));
        assert_eq!(
            check_node_names(&["a".into(), "".into()], 10).unwrap_err(),
            "node_names[1] is empty"
        );
        assert!(check_node_names(&["a".into()], 10).is_ok());
    }

    #[test]
    fn ledger_entries_round_trip() {
        let entry = LedgerEntry {
            uid: "u".into(),
            namespace: "ns".into(),
            name: "p".into(),
            node: "n".into(),
            placed_at: UnixMillis(1_800_000_000_500),
            usage: Usage { cpu_millis: 850, memory_bytes: 7 },
            source: LedgerSource::Watch,
            labels: [("a".to_string(), "b".to_string())].into(),
        };
        assert_eq!(entry_from_proto(&entry_to_proto(&entry, None)).unwrap(), entry);
    }
}
