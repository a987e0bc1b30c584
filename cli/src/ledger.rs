//! `ledger NODE`: the collector's recent placements on one node and when each hands over to
//! the metrics (ListNodes' `absorb_remaining`), and its recent departures, whose estimate the
//! prediction subtracts until each metric has absorbed them (docs/design.md#departures).
//! Pure; the call is [`crate::fetch`].

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::Serialize;
use waterline_api::v1 as pb;

use crate::format;
use crate::table::{Align, Cell, Style, Table};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Placement {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// reserve (a scheduler's Reserve), watch (the pod watch saw spec.nodeName),
    /// provisional (a guess that expires unless confirmed) or departure (the pod left).
    pub source: &'static str,
    /// Seconds since the placement (PodScheduled or the Reserve time); for a departure, its
    /// arrival, when known.
    pub placed_seconds_ago: Option<f64>,
    /// Departures only: seconds since the pod left the node.
    pub departed_seconds_ago: Option<f64>,
    /// The estimator's usage of the pod, which the ledger adds to the node (a departure:
    /// subtracts, from the metrics it credits).
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    /// How long the entry still counts toward some metric: the longest per-metric time (a
    /// departure: how long its credit lasts; 0 where it cancelled an un-absorbed arrival
    /// or the metric holds).
    pub hands_over_in_seconds: Option<f64>,
    /// Per policy metric, how long it still counts toward it.
    pub hands_over_in_seconds_by_metric: BTreeMap<String, f64>,
    /// Provisional entries only: seconds until it leaves unless confirmed.
    pub provisional_expires_in_seconds: Option<f64>,
}

/// What `ledger -o json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct LedgerReport {
    pub collector: String,
    pub node: String,
    pub known_to_collector: bool,
    pub capacity_cpu_millis: Option<i64>,
    pub capacity_memory_bytes: Option<i64>,
    pub placements: Vec<Placement>,
}

fn source(value: i32) -> &'static str {
    match pb::LedgerSource::try_from(value) {
        Ok(pb::LedgerSource::Reserve) => "reserve",
        Ok(pb::LedgerSource::Watch) => "watch",
        Ok(pb::LedgerSource::Provisional) => "provisional",
        Ok(pb::LedgerSource::Departure) => "departure",
        Ok(pb::LedgerSource::Unspecified) | Err(_) => "unknown",
    }
}

/// The placements and departures on `node`, newest first (a departure by when it left).
pub fn report(
    collector: &str,
    node: &str,
    listing: &pb::ListNodesResponse,
    now: SystemTime,
) -> LedgerReport {
    let state = listing.nodes.iter().find(|n| n.name == node);
    let mut placements: Vec<(Option<&prost_types::Timestamp>, Placement)> = listing
        .ledger
        .iter()
        .filter(|e| e.node_name == node)
        .map(|e| {
            let placement = Placement {
                namespace: e.namespace.clone(),
                name: e.name.clone(),
                uid: e.pod_uid.clone(),
                source: source(e.source),
                placed_seconds_ago: e.placed_at.as_ref().map(|t| format::age_secs(t, now)),
                departed_seconds_ago: e.departed_at.as_ref().map(|t| format::age_secs(t, now)),
                cpu_millis: e.cpu_millis,
                memory_bytes: e.memory_bytes,
                hands_over_in_seconds: e.absorb_remaining.as_ref().map(format::proto_duration_secs),
                hands_over_in_seconds_by_metric: e
                    .absorb_remaining_by_metric
                    .iter()
                    .map(|(m, d)| (m.clone(), format::proto_duration_secs(d)))
                    .collect(),
                provisional_expires_in_seconds: e
                    .provisional_expires_at
                    .as_ref()
                    .map(|t| -format::age_secs(t, now)),
            };
            // A departure sorts by when it left (its arrival may be unknown).
            (e.departed_at.as_ref().or(e.placed_at.as_ref()), placement)
        })
        .collect();
    placements.sort_by(|(a, pa), (b, pb)| {
        let key = |t: Option<&prost_types::Timestamp>| t.map(|t| (t.seconds, t.nanos));
        key(*b).cmp(&key(*a)).then_with(|| pa.uid.cmp(&pb.uid))
    });
    LedgerReport {
        collector: collector.to_owned(),
        node: node.to_owned(),
        known_to_collector: state.is_some(),
        capacity_cpu_millis: state.and_then(|s| s.capacity.as_ref()).map(|c| c.cpu_millis),
        capacity_memory_bytes: state.and_then(|s| s.capacity.as_ref()).map(|c| c.memory_bytes),
        placements: placements.into_iter().map(|(_, p)| p).collect(),
    }
}

/// The metric that lets go first, and when: `35s (cpu_usage_avg_5m)`.
fn first_handover(p: &Placement) -> String {
    p.hands_over_in_seconds_by_metric
        .iter()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map_or("-".into(), |(metric, secs)| format!("{} ({metric})", format::secs(*secs)))
}

pub fn table(report: &LedgerReport) -> Table {
    use Align::{Left, Right};
    let mut table = Table::new(&[
        ("POD", Left),
        ("SOURCE", Left),
        ("PLACED", Right),
        ("DEPARTED", Right),
        ("CPU", Right),
        ("MEMORY", Right),
        ("HANDS OVER IN", Right),
        ("EXPIRES IN", Right),
        ("FIRST METRIC DONE IN", Left),
    ]);
    for p in &report.placements {
        let source = match p.source {
            "provisional" => Cell::styled(p.source, Style::Yellow),
            "departure" => Cell::styled(p.source, Style::Green),
            other => Cell::from(other),
        };
        // A departure's estimate is what the prediction subtracts.
        let sign = if p.source == "departure" { "-" } else { "" };
        let ago =
            |secs: Option<f64>| secs.map_or("-".into(), |s| format!("{} ago", format::secs(s)));
        let handover = match p.hands_over_in_seconds {
            Some(s) if s <= 0.0 => Cell::styled("now", Style::Dim),
            Some(s) => Cell::from(format::secs(s)),
            None => Cell::from("-"),
        };
        table.push(vec![
            Cell::from(format!("{}/{}", p.namespace, p.name)),
            source,
            Cell::from(ago(p.placed_seconds_ago)),
            Cell::from(ago(p.departed_seconds_ago)),
            Cell::from(format!("{sign}{}", format::cpu(p.cpu_millis))),
            Cell::from(format!("{sign}{}", format::bytes(p.memory_bytes))),
            handover,
            Cell::from(p.provisional_expires_in_seconds.map_or("-".into(), format::secs)),
            Cell::from(first_handover(p)),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn entry(uid: &str, node: &str, placed: i64, source: pb::LedgerSource) -> pb::LedgerEntry {
        pb::LedgerEntry {
            pod_uid: uid.into(),
            namespace: "default".into(),
            name: format!("pod-{uid}"),
            node_name: node.into(),
            placed_at: Some(prost_types::Timestamp { seconds: placed, nanos: 0 }),
            cpu_millis: 1700,
            memory_bytes: 3 << 29,
            source: source as i32,
            absorb_remaining: Some(prost_types::Duration { seconds: 1700, nanos: 0 }),
            absorb_remaining_by_metric: [
                ("cpu_usage_avg_5m".to_string(), prost_types::Duration { seconds: 20, nanos: 0 }),
                (
                    "cpu_usage_max_avg_1d".to_string(),
                    prost_types::Duration { seconds: 1700, nanos: 0 },
                ),
            ]
            .into(),
            provisional_expires_at: (source == pb::LedgerSource::Provisional)
                .then_some(prost_types::Timestamp { seconds: 1030, nanos: 0 }),
            ..Default::default()
        }
    }

    fn listing() -> pb::ListNodesResponse {
        pb::ListNodesResponse {
            nodes: vec![pb::NodeState { name: "n1".into(), ..Default::default() }],
            ledger: vec![
                entry("old", "n1", 900, pb::LedgerSource::Watch),
                entry("other", "n2", 990, pb::LedgerSource::Reserve),
                entry("new", "n1", 995, pb::LedgerSource::Provisional),
            ],
            metrics: vec![],
            learned: vec![],
        }
    }

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1000)
    }

    #[test]
    fn only_the_node_newest_first() {
        let report = report("c", "n1", &listing(), now());
        let uids: Vec<&str> = report.placements.iter().map(|p| p.uid.as_str()).collect();
        assert_eq!(uids, ["new", "old"]);
        assert!(report.known_to_collector);
        let new = &report.placements[0];
        assert_eq!((new.source, new.placed_seconds_ago), ("provisional", Some(5.0)));
        assert_eq!(new.provisional_expires_in_seconds, Some(30.0));
        assert_eq!(new.hands_over_in_seconds, Some(1700.0));
        assert_eq!(report.placements[1].provisional_expires_in_seconds, None);
    }

    #[test]
    fn a_departure_is_marked_sorted_by_when_it_left_and_subtracts() {
        let mut listing = listing();
        let mut gone = entry("gone", "n1", 100, pb::LedgerSource::Departure);
        gone.departed_at = Some(prost_types::Timestamp { seconds: 998, nanos: 0 });
        listing.ledger.push(gone);
        let report = report("c", "n1", &listing, now());
        let uids: Vec<&str> = report.placements.iter().map(|p| p.uid.as_str()).collect();
        // Left 2 s ago: newer than the guess placed 5 s ago, though it arrived long before.
        assert_eq!(uids, ["gone", "new", "old"]);
        let gone = &report.placements[0];
        assert_eq!((gone.source, gone.departed_seconds_ago), ("departure", Some(2.0)));
        assert_eq!(report.placements[1].departed_seconds_ago, None);
        let text = table(&report).render(Default::default());
        let row = text.lines().nth(1).unwrap();
        for part in ["default/pod-gone", "departure", "15m00s ago", "2s ago", "-1700m", "-1.5Gi"] {
            assert!(row.contains(part), "{part} in {row}");
        }
    }

    #[test]
    fn an_unknown_node_is_said_so() {
        assert!(!report("c", "n9", &listing(), now()).known_to_collector);
    }

    #[test]
    fn the_table_shows_sizes_and_handovers() {
        let text = table(&report("c", "n1", &listing(), now())).render(Default::default());
        let new = text.lines().nth(1).unwrap();
        assert!(new.starts_with("default/pod-new"), "{text}");
        for part in
            ["provisional", "5s ago", "1700m", "1.5Gi", "28m20s", "30s", "20s (cpu_usage_avg_5m)"]
        {
            assert!(new.contains(part), "{part} in {new}");
        }
    }
}
