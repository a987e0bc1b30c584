//! Ledger entries.

use waterline_api::v1 as pb;
use waterline_core::estimate::Usage;
use waterline_core::{LedgerEntry, LedgerSource, Millis};

use crate::time::{duration, timestamp, unix_millis};
use crate::{ConvertError, FromProto, ToProto};

impl ToProto for LedgerEntry {
    type Proto = pb::LedgerEntry;

    fn to_proto(&self) -> pb::LedgerEntry {
        pb::LedgerEntry {
            pod_uid: self.uid.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            node_name: self.node.clone(),
            placed_at: Some(timestamp(self.placed_at)),
            cpu_millis: self.usage.cpu_millis,
            memory_bytes: self.usage.memory_bytes,
            source: match self.source {
                LedgerSource::Reserve => pb::LedgerSource::Reserve,
                LedgerSource::Watch => pb::LedgerSource::Watch,
            } as i32,
            labels: self.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            absorb_remaining: None,
            absorb_remaining_by_metric: Default::default(),
        }
    }
}

/// A ListNodes entry: how long it still counts toward each metric, and toward any.
pub fn listed_entry(
    entry: &LedgerEntry,
    remaining_by_metric: &[(String, Millis)],
) -> pb::LedgerEntry {
    let longest = remaining_by_metric.iter().map(|(_, r)| *r).max().unwrap_or_default();
    pb::LedgerEntry {
        absorb_remaining: Some(duration(longest)),
        absorb_remaining_by_metric: remaining_by_metric
            .iter()
            .map(|(metric, r)| (metric.clone(), duration(*r)))
            .collect(),
        ..entry.to_proto()
    }
}

impl FromProto for LedgerEntry {
    type Proto = pb::LedgerEntry;

    fn from_proto(entry: &pb::LedgerEntry) -> Result<LedgerEntry, ConvertError> {
        if entry.pod_uid.is_empty() || entry.node_name.is_empty() {
            return Err(ConvertError::IncompleteEntry);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use waterline_core::UnixMillis;

    fn entry() -> LedgerEntry {
        LedgerEntry {
            uid: "u".into(),
            namespace: "ns".into(),
            name: "p".into(),
            node: "n".into(),
            placed_at: UnixMillis(1_800_000_000_500),
            usage: Usage { cpu_millis: 850, memory_bytes: 7 },
            source: LedgerSource::Watch,
            labels: [("a".to_string(), "b".to_string())].into(),
        }
    }

    #[test]
    fn ledger_entries_round_trip_and_need_uid_and_node() {
        assert_eq!(LedgerEntry::from_proto(&entry().to_proto()).unwrap(), entry());
        let no_node = pb::LedgerEntry { node_name: String::new(), ..entry().to_proto() };
        assert_eq!(LedgerEntry::from_proto(&no_node), Err(ConvertError::IncompleteEntry));
    }

    #[test]
    fn listed_entries_count_for_their_longest_window() {
        let windows =
            [("short".to_string(), Millis(60_000)), ("long".to_string(), Millis(600_000))];
        let listed = listed_entry(&entry(), &windows);
        assert_eq!(listed.absorb_remaining.unwrap().seconds, 600);
        assert_eq!(listed.absorb_remaining_by_metric["short"].seconds, 60);
    }
}
