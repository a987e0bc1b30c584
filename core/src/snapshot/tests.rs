use std::collections::BTreeMap;

use super::*;
use crate::ledger::{DepartureCredit, LedgerSource, LedgerWindow};

const T0: UnixMillis = UnixMillis(1_800_000_000_000);
const WINDOW: Millis = Millis::from_mins(7);

fn sample(value: f64) -> Sample {
    Sample { value, at: UnixMillis(1) }
}

fn entry(uid: &str, node: &str, placed_at: UnixMillis) -> LedgerEntry {
    LedgerEntry {
        uid: uid.into(),
        namespace: "default".into(),
        name: uid.into(),
        node: node.into(),
        placed_at,
        usage: Usage { cpu_millis: 850, memory_bytes: 1 << 20 },
        source: LedgerSource::Reserve,
        labels: BTreeMap::new(),
    }
}

#[test]
fn upsert_replaces_all_samples_of_a_node() {
    let mut snap = Snapshot::default();
    let s = sample;
    snap.upsert_node("n1", Capacity::default(), [("cpu", s(10.0)), ("mem", s(20.0))]);
    snap.upsert_node("n1", Capacity::default(), [("mem", s(30.0))]);
    let node = snap.node("n1").unwrap();
    assert_eq!(node.sample(snap.metric_id("cpu").unwrap()), None);
    assert_eq!(node.sample(snap.metric_id("mem").unwrap()), Some(s(30.0)));
    assert_eq!(snap.samples_of(node).collect::<Vec<_>>(), vec![("mem", s(30.0))]);
    assert!(snap.remove_node("n1"));
    assert_eq!(snap.node_count(), 0);
}

/// The per-node loads Score reads are an index over the ledger: after any mix of applies
/// (new, earlier-time merges, moves), departures (of watched pods and of pods no ledger
/// held), deletes, prunes, full replacements and node removals, every slot must answer
/// exactly what `Ledger::unabsorbed` (through a crediting and a holding window) and
/// `placements_within` say.
#[test]
fn load_index_always_agrees_with_the_ledger() {
    let mut snap = Snapshot::default();
    // A small deterministic generator (no rand in core).
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };
    let nodes = ["n0", "n1", "n2"];
    for step in 0..2_000 {
        let uid = format!("u{}", next(40));
        let node = nodes[next(3) as usize];
        let at = T0.plus(Millis(next(15 * 60_000) as i64));
        match next(15) {
            0..=5 => {
                let mut e = entry(&uid, node, at);
                e.usage.cpu_millis = 100 + next(900) as i64;
                if next(2) == 0 {
                    e.source = LedgerSource::Watch;
                }
                snap.apply_placement(e);
            }
            6..=8 => {
                snap.delete_placement(&uid);
            }
            12 => {
                snap.depart_placement(&uid, at);
            }
            13 => {
                snap.apply_placement(entry(&uid, node, at).departure(at));
            }
            14 => {
                snap.prune_departed(at, WINDOW);
            }
            9 => {
                let kept: Vec<LedgerEntry> = snap.ledger().iter().take(5).cloned().collect();
                snap.replace_placements(kept);
            }
            10 => {
                snap.upsert_node(node, Capacity::default(), [("cpu", sample(1.0))]);
            }
            _ => {
                snap.remove_node(node);
            }
        }
        let now = T0.plus(Millis(next(20 * 60_000) as i64));
        let hold =
            LedgerWindow { absorb: WINDOW, departures: DepartureCredit::Hold, credit: WINDOW };
        for node in nodes {
            let (load, held, count) = snap
                .slot(node)
                .map(|s| {
                    let count = s.placements_within(now, WINDOW);
                    (s.unabsorbed(now, WINDOW), s.unabsorbed(now, hold), count)
                })
                .unwrap_or_default();
            assert_eq!(load, snap.ledger().unabsorbed(node, now, WINDOW), "step {step}, {node}");
            assert_eq!(held, snap.ledger().unabsorbed(node, now, hold), "step {step}, {node}");
            assert_eq!(count, snap.ledger().placements_within(node, now, WINDOW), "step {step}");
        }
        let known = nodes.iter().filter(|n| snap.node(n).is_some()).count();
        assert_eq!(snap.node_count(), known, "step {step}");
        assert_eq!(snap.nodes().count(), known, "step {step}");
    }
}

#[test]
fn a_reserve_for_an_unknown_node_is_kept_until_the_node_appears() {
    let mut snap = Snapshot::default();
    snap.apply_placement(entry("a", "new-node", T0));
    assert!(snap.node("new-node").is_none());
    assert_eq!(snap.node_count(), 0);
    snap.upsert_node("new-node", Capacity::default(), [("cpu", sample(1.0))]);
    let slot = snap.slot("new-node").unwrap();
    assert_eq!(slot.unabsorbed(T0, WINDOW).cpu_millis, 850);
    // Clearing the nodes (a full resync) keeps the ledger's loads.
    snap.clear_nodes();
    assert_eq!(snap.slot("new-node").unwrap().placements_within(T0, WINDOW), 1);
    snap.delete_placement("a");
    assert!(snap.slot("new-node").is_none());
}
