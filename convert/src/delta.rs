//! `WatchNodesResponse`: the collector's deltas on the wire.

use waterline_api::v1 as pb;
use waterline_core::{Delta, LedgerEntry, NodeReport};

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
        }
    }
}

/// What a delta read off the wire dropped: entries the domain cannot hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    pub entries: usize,
}

impl FromProto for Delta {
    type Proto = pb::WatchNodesResponse;

    /// A ledger entry without uid or node is skipped rather than failing the whole
    /// message (a scorer keeps streaming); [`delta_from_proto`] counts them.
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
    let delta = Delta {
        reset: message.reset,
        // NodeReport's conversion cannot fail: it only drops non-finite samples.
        nodes: message.nodes.iter().filter_map(|n| NodeReport::from_proto(n).ok()).collect(),
        removed_nodes: message.removed_nodes.clone(),
        placed,
        released: message.released_pod_uids.clone(),
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
            sent_at: UnixMillis(5_000),
        };
        let mut wire = delta.to_proto();
        assert_eq!(Delta::from_proto(&wire).unwrap(), delta);
        wire.placed.push(pb::LedgerEntry::default());
        let (read, dropped) = delta_from_proto(&wire);
        assert_eq!((read, dropped), (delta, Dropped { entries: 1 }));
    }
}
