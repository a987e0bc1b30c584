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
            // A departure whose arrival is not known has none to send.
            placed_at: match self.source {
                LedgerSource::Departure { arrival_known: false, .. } => None,
                _ => Some(timestamp(self.placed_at)),
            },
            cpu_millis: self.usage.cpu_millis,
            memory_bytes: self.usage.memory_bytes,
            source: match self.source {
                LedgerSource::Reserve => pb::LedgerSource::Reserve,
                LedgerSource::Watch => pb::LedgerSource::Watch,
                LedgerSource::Provisional { .. } => pb::LedgerSource::Provisional,
                LedgerSource::Departure { .. } => pb::LedgerSource::Departure,
            } as i32,
            labels: self.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            absorb_remaining: None,
            absorb_remaining_by_metric: Default::default(),
            provisional_expires_at: match self.source {
                LedgerSource::Provisional { expires_at } => Some(timestamp(expires_at)),
                _ => None,
            },
            departed_at: match self.source {
                LedgerSource::Departure { departed_at, .. } => Some(timestamp(departed_at)),
                _ => None,
            },
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

/// `provisional_ttl` of a Reserve: `None` for an ordinary Reserve (unset or zero).
pub fn provisional_ttl(
    ttl: Option<&prost_types::Duration>,
) -> Result<Option<Millis>, ConvertError> {
    let Some(ttl) = ttl else { return Ok(None) };
    let millis = millis(ttl);
    match millis {
        ..0 => Err(ConvertError::Negative { field: "provisional_ttl", value: millis }),
        0 => Ok(None),
        _ => Ok(Some(Millis(millis))),
    }
}

/// A protobuf duration in whole milliseconds (a sub-millisecond rest rounds down, a
/// positive duration below 1 ms up to 1 ms so it stays "set").
fn millis(d: &prost_types::Duration) -> i64 {
    let ms = d.seconds.saturating_mul(1000).saturating_add(i64::from(d.nanos) / 1_000_000);
    if ms == 0 && (d.seconds > 0 || d.nanos > 0) { 1 } else { ms }
}

impl FromProto for LedgerEntry {
    type Proto = pb::LedgerEntry;

    /// A departure needs its `departed_at` (without it the credit could never end):
    /// `IncompleteEntry` otherwise; its `placed_at`, when unset, means the arrival is not
    /// known.
    fn from_proto(entry: &pb::LedgerEntry) -> Result<LedgerEntry, ConvertError> {
        if entry.pod_uid.is_empty() || entry.node_name.is_empty() {
            return Err(ConvertError::IncompleteEntry);
        }
        let placed_at = entry.placed_at.as_ref().map(unix_millis);
        let departure = match pb::LedgerSource::try_from(entry.source) {
            Ok(pb::LedgerSource::Departure) => {
                let departed_at = entry
                    .departed_at
                    .as_ref()
                    .map(unix_millis)
                    .ok_or(ConvertError::IncompleteEntry)?;
                Some(LedgerSource::Departure { departed_at, arrival_known: placed_at.is_some() })
            }
            _ => None,
        };
        Ok(LedgerEntry {
            uid: entry.pod_uid.clone(),
            namespace: entry.namespace.clone(),
            name: entry.name.clone(),
            node: entry.node_name.clone(),
            placed_at: match departure {
                Some(LedgerSource::Departure { departed_at, arrival_known: false }) => departed_at,
                _ => placed_at.unwrap_or_default(),
            },
            usage: Usage { cpu_millis: entry.cpu_millis, memory_bytes: entry.memory_bytes },
            source: match departure {
                Some(departure) => departure,
                None => match pb::LedgerSource::try_from(entry.source) {
                    Ok(pb::LedgerSource::Watch) => LedgerSource::Watch,
                    // Without its expiry a guess cannot expire: treat it as a Reserve.
                    Ok(pb::LedgerSource::Provisional) => match &entry.provisional_expires_at {
                        Some(at) => LedgerSource::Provisional { expires_at: unix_millis(at) },
                        None => LedgerSource::Reserve,
                    },
                    _ => LedgerSource::Reserve,
                },
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
    fn provisional_entries_round_trip_with_their_expiry() {
        let expires_at = UnixMillis(1_800_000_010_500);
        let guess = LedgerEntry { source: LedgerSource::Provisional { expires_at }, ..entry() };
        let proto = guess.to_proto();
        assert_eq!(proto.source, pb::LedgerSource::Provisional as i32);
        assert_eq!(LedgerEntry::from_proto(&proto).unwrap(), guess);
        assert_eq!(entry().to_proto().provisional_expires_at, None);
        let no_expiry = pb::LedgerEntry { provisional_expires_at: None, ..proto };
        assert_eq!(LedgerEntry::from_proto(&no_expiry).unwrap().source, LedgerSource::Reserve);
    }

    #[test]
    fn departures_round_trip_with_their_time_and_arrival() {
        let departed_at = UnixMillis(1_800_000_060_500);
        let known = LedgerEntry {
            source: LedgerSource::Departure { departed_at, arrival_known: true },
            ..entry()
        };
        let proto = known.to_proto();
        assert_eq!(proto.source, pb::LedgerSource::Departure as i32);
        assert_eq!(proto.placed_at, Some(timestamp(entry().placed_at)));
        assert_eq!(LedgerEntry::from_proto(&proto).unwrap(), known);
        // Not known: no arrival on the wire, placed_at back at the departure.
        let unknown = entry().departure(departed_at);
        let proto = unknown.to_proto();
        assert_eq!(proto.placed_at, None);
        assert_eq!(LedgerEntry::from_proto(&proto).unwrap(), unknown);
        // Without its time a departure could never end: refused.
        let timeless = pb::LedgerEntry { departed_at: None, ..proto };
        assert_eq!(LedgerEntry::from_proto(&timeless), Err(ConvertError::IncompleteEntry));
        assert_eq!(entry().to_proto().departed_at, None);
    }

    #[test]
    fn provisional_ttls_are_positive_or_absent() {
        let ttl = |seconds, nanos| Some(prost_types::Duration { seconds, nanos });
        assert_eq!(provisional_ttl(None), Ok(None));
        assert_eq!(provisional_ttl(ttl(0, 0).as_ref()), Ok(None));
        assert_eq!(provisional_ttl(ttl(10, 500_000_000).as_ref()), Ok(Some(Millis(10_500))));
        assert!(provisional_ttl(ttl(-1, 0).as_ref()).is_err());
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
