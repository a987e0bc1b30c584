//! A pod placed on a node becomes a ledger entry the same way on every path: the scorer's
//! and the collector's Reserve and the collector's pod watch.

use crate::estimate::estimate;
use crate::learn::LearnedUsage;
use crate::ledger::{LedgerEntry, LedgerSource};
use crate::pod::Pod;
use crate::policy::Policy;
use crate::time::UnixMillis;

/// Why a placement cannot enter the ledger.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("pod.uid is required")]
    NoUid,
    #[error("node_name is required")]
    NoNode,
}

/// The ledger entry of `pod` placed on `node` at `placed_at`: the usage estimated (with
/// what `learned` knows of its workload) and the labels trimmed by `policy` (the one in
/// force when the pod was placed).
pub fn placement(
    policy: &Policy,
    learned: &LearnedUsage,
    pod: Pod,
    node: &str,
    placed_at: UnixMillis,
    source: LedgerSource,
) -> Result<LedgerEntry, PlacementError> {
    if pod.uid.is_empty() {
        return Err(PlacementError::NoUid);
    }
    if node.is_empty() {
        return Err(PlacementError::NoNode);
    }
    let usage = estimate(&policy.estimator, learned, &pod);
    Ok(LedgerEntry {
        uid: pod.uid,
        namespace: pod.namespace,
        name: pod.name,
        node: node.to_owned(),
        placed_at,
        usage,
        source,
        labels: policy.ledger_labels(pod.labels),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{AntiColocation, parse_policy};

    #[test]
    fn estimates_trims_labels_and_requires_uid_and_node() {
        let policy = Policy {
            anti_colocation: vec![AntiColocation { label_key: "group".into() }],
            ..parse_policy("").unwrap()
        };
        let pod = Pod {
            uid: "u".into(),
            name: "p".into(),
            namespace: "ns".into(),
            cpu_request_millis: 1000,
            labels: [("group", "g"), ("app", "web")].map(|(k, v)| (k.into(), v.into())).into(),
            ..Pod::default()
        };
        let entry = placement(
            &policy,
            &LearnedUsage::default(),
            pod.clone(),
            "n1",
            UnixMillis(7),
            LedgerSource::Reserve,
        )
        .unwrap();
        // 1000 m × 0.85; memory: no request or limit → 200 Mi × 0.70.
        assert_eq!(entry.usage.cpu_millis, 850);
        assert_eq!(entry.usage.memory_bytes, (200.0 * 1024.0 * 1024.0 * 0.7f64).round() as i64);
        assert_eq!(entry.labels, [("group".to_string(), "g".to_string())].into());
        assert_eq!((entry.node.as_str(), entry.placed_at), ("n1", UnixMillis(7)));
        let no_uid = Pod { uid: String::new(), ..pod.clone() };
        let err = placement(
            &policy,
            &LearnedUsage::default(),
            no_uid,
            "n1",
            UnixMillis(7),
            LedgerSource::Reserve,
        );
        assert_eq!(err, Err(PlacementError::NoUid));
        let err = placement(
            &policy,
            &LearnedUsage::default(),
            pod,
            "",
            UnixMillis(7),
            LedgerSource::Watch,
        );
        assert_eq!(err.unwrap_err().to_string(), "node_name is required");
    }
}
