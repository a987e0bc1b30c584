//! What the scorer's two published generations (`scorer/src/store/published.rs`) cost a
//! write, against the simpler copy-on-write a plain `ArcSwap::rcu` would do: a Reserve
//! written into a 5,000-node store (applied to the spare copy, and again to the other one at
//! the next write), beside one clone of such a generation (what copy-on-write pays per write
//! before applying anything).
//!
//! `cargo bench -p waterline-scorer --bench generations -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use waterline_core::estimate::Usage;
use waterline_core::policy::Policy;
use waterline_core::snapshot::{Capacity, Sample};
use waterline_core::{Delta, LedgerEntry, LedgerSource, Millis, NodeReport, UnixMillis};
use waterline_scorer::store::{PendingOp, Store};

const NODES: usize = 5_000;
const LEDGER_PER_NODE: usize = 10;

fn entry(uid: String, node: String, source: LedgerSource, now: UnixMillis) -> LedgerEntry {
    LedgerEntry {
        namespace: "default".into(),
        name: uid.clone(),
        uid,
        node,
        placed_at: now.minus(Millis::from_secs(30)),
        usage: Usage { cpu_millis: 250, memory_bytes: 256 << 20 },
        source,
        labels: Default::default(),
    }
}

/// A store as a collector's first full snapshot leaves it: every node with a fresh sample
/// of each default metric, ten placements per node.
fn store(now: UnixMillis) -> Store {
    let policy = Policy::default();
    let names: Vec<String> = (0..NODES).map(|i| format!("synthetic-{i:05}")).collect();
    let nodes = names
        .iter()
        .enumerate()
        .map(|(i, name)| NodeReport {
            name: name.clone(),
            capacity: Capacity { cpu_millis: 16_000, memory_bytes: 64 << 30 },
            samples: policy
                .metrics
                .iter()
                .enumerate()
                .map(|(m, spec)| {
                    let value = ((i * 37 + m * 11) % 80) as f64 + 5.0;
                    (spec.name.clone(), Sample { value, at: now.minus(Millis::from_secs(10)) })
                })
                .collect(),
        })
        .collect();
    let placed = names
        .iter()
        .enumerate()
        .flat_map(|(i, node)| {
            (0..LEDGER_PER_NODE).map(move |k| {
                entry(format!("pod-{i:05}-{k}"), node.clone(), LedgerSource::Watch, now)
            })
        })
        .collect();
    let store = Store::default();
    store.apply(&Delta { reset: true, nodes, placed, ..Delta::default() }, now);
    store
}

fn generations(c: &mut Criterion) {
    let now = UnixMillis::now();
    let store = store(now);
    let mut group = c.benchmark_group("generation_5000_nodes");
    let mut i = 0usize;
    group.bench_function("reserve_written_into_two_generations", |b| {
        b.iter(|| {
            // One pod placed and released in turn, so the store stays the same size.
            i += 1;
            let uid = "bench-pod".to_string();
            let op = if i.is_multiple_of(2) {
                let node = format!("synthetic-{:05}", i % NODES);
                PendingOp::Reserve(entry(uid, node, LedgerSource::Reserve, now))
            } else {
                PendingOp::Unreserve { uid }
            };
            black_box(store.apply_local(op))
        })
    });
    group.bench_function("generation_cloned_as_copy_on_write_would", |b| {
        let current = store.read();
        b.iter(|| black_box((**current).clone()))
    });
    group.finish();
}

criterion_group!(benches, generations);
criterion_main!(benches);
