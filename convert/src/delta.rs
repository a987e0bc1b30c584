//! `WatchNodesResponse`: the collector's deltas on the wire.

use std::sync::Arc;

use waterline_api::v1 as pb;
use waterline_core::learn::LearnedUsage;
use waterline_core::{Delta, LedgerEntry, NodeReport};

use crate::learned::workload_from_proto;
use crate::time::{timestamp, unix_millis};
use crate::{ConvertError, FromProto, ToProto};

impl ToProto for Delta {
    type Proto = pb::WatchNodesResponse;

    fn to_proto(&self) -> pb::WatchNodesResponse {
        pb::WatchNodesResponse {
            reset: self.reset,
            nodes: self.nodes.iter().map(ToProto::to_proto).collect(),
            removed_nodes: self.removed_nodes.clone(),
            placed: self.placed.iter().map(ToProto::to_proto).collect(),
            released_pod_uids: self.released.clone(),
            sent_at: Some(timestamp(self.sent_at)),
            learned: self.learned.as_deref().map(ToProto::to_proto).unwrap_or_default(),
            learned_replaced: self.learned.is_some(),
        }
    }
}

/// What a delta read off the wire dropped: entries and learned workloads the domain cannot
/// hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    pub entries: usize,
    pub workloads: usize,
    /// Why the first dropped workload was dropped (the field and the value).
    pub workload_error: Option<ConvertError>,
}

impl FromProto for Delta {
    type Proto = pb::WatchNodesResponse;

    /// A ledger entry without uid or node, or a learned workload with a bad number, is
    /// skipped rather than failing the whole message (a scorer keeps streaming; the
    /// workload's pods are priced by the factors); [`delta_from_proto`] counts them.
    fn from_proto(message: &pb::WatchNodesResponse) -> Result<Delta, ConvertError> {
        Ok(delta_from_proto(message).0)
    }
}

/// The delta of a message, and what of it was dropped.
pub fn delta_from_proto(message: &pb::WatchNodesResponse) -> (Delta, Dropped) {
    let mut dropped = Dropped::default();
    let placed = message
        .placed
        .iter()
        .filter_map(|e| {
            let entry = LedgerEntry::from_proto(e).ok();
            dropped.entries += usize::from(entry.is_none());
            entry
        })
        .collect();
    // A reset replaces everything: from a collector that predates the table, with none.
    let learned = (message.learned_replaced || message.reset).then(|| {
        let table: LearnedUsage = message
            .learned
            .iter()
            .enumerate()
            .filter_map(|(i, row)| {
                workload_from_proto(i, row)
                    .map_err(|error| {
                        dropped.workloads += 1;
                        dropped.workload_error.get_or_insert(error);
                    })
                    .ok()
            })
            .collect();
        Arc::new(table)
    });
    let delta = Delta {
        reset: message.reset,
        // NodeReport's conversion cannot fail: it only drops non-finite samples.
        nodes: message.nodes.iter().filter_map(|n| NodeReport::from_proto(n).ok()).collect(),
        removed_nodes: message.removed_nodes.clone(),
        placed,
        released: message.released_pod_uids.clone(),
        learned,
        sent_at: message.sent_at.as_ref().map(unix_millis).unwrap_or_default(),
    };
    (delta, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use waterline_core::UnixMillis;
    use waterline_core::snapshot::Capacity;

    #[test]
    fn deltas_round_trip_and_incomplete_entries_are_counted() {
        let delta = Delta {
            reset: true,
            nodes: vec![NodeReport {
                name: "a".into(),
                capacity: Capacity::default(),
                samples: vec![],
            }],
            removed_nodes: vec!["b".into()],
            placed: vec![],
            released: vec!["u".into()],
            learned: Some(Arc::default()),
            sent_at: UnixMillis(5_000),
        };
        let mut wire = delta.to_proto();
        assert_eq!(Delta::from_proto(&wire).unwrap(), delta);
        wire.placed.push(pb::LedgerEntry::default());
        let (read, dropped) = delta_from_proto(&wire);
        assert_eq!((read, dropped), (delta, Dropped { entries: 1, ..Dropped::default() }));
    }

    fn web(ratio: f64) -> pb::WorkloadUsage {
        pb::WorkloadUsage {
            namespace: "shop".into(),
            kind: "Deployment".into(),
            name: "web".into(),
            cpu: Some(pb::LearnedResource {
                ratio: Some(ratio),
                usage: 1000.0,
                spread: 0.0,
                pods: 2,
                samples: 120,
            }),
            memory: None,
        }
    }

    #[test]
    fn the_learned_table_travels_only_when_replaced_or_reset() {
        // Unchanged: no table, and the receiver keeps its own.
        let unchanged = pb::WatchNodesResponse::default();
        assert_eq!(delta_from_proto(&unchanged).0.learned, None);
        // Replaced by an empty table, and a reset from an older collector: both empty.
        let emptied = pb::WatchNodesResponse { learned_replaced: true, ..Default::default() };
        assert_eq!(delta_from_proto(&emptied).0.learned, Some(Arc::default()));
        let old_reset = pb::WatchNodesResponse { reset: true, ..Default::default() };
        assert_eq!(delta_from_proto(&old_reset).0.learned, Some(Arc::default()));
        // A bad row is dropped and counted with its reason; the good one stays.
        let mut bad = web(1.0);
        bad.name = "api".into();
        bad.cpu.as_mut().unwrap().usage = -1.0;
        let message = pb::WatchNodesResponse {
            learned: vec![bad, web(2.0)],
            learned_replaced: true,
            ..Default::default()
        };
        let (delta, dropped) = delta_from_proto(&message);
        let table = delta.learned.unwrap();
        assert_eq!(table.len(), 1);
        let key = waterline_core::workload::WorkloadKey::new("shop", "Deployment", "web");
        assert_eq!(table.get(&key).and_then(|u| u.cpu).and_then(|c| c.ratio), Some(2.0));
        assert_eq!(dropped.workloads, 1);
        assert_eq!(
            dropped.workload_error.unwrap().to_string(),
            "learned[0].cpu.usage of shop/Deployment/api must be a finite number, not negative (got -1)"
        );
    }
}
