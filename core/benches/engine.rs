//! Criterion benches of the pure policy path (BENCHMARKS.md): Filter and Score for one pod
//! over 100 … 15,000 candidate nodes with the default six metrics and a ledger of 10 entries
//! per node, Evaluate of every node (precomputed table vs the old filter-then-score path),
//! and a full snapshot update (upserting every node).
//!
//! Run with short measurement times so the suite stays within a few minutes:
//! `cargo bench -p waterline-core --bench engine -- --warm-up-time 1 --measurement-time 3`
//! (`scripts/bench.sh` does). Timing targets live in BENCHMARKS.md, never in tests.

use std::cell::{OnceCell, RefCell};
use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use waterline_core::estimate::Usage;
use waterline_core::policy::Policy;
use waterline_core::snapshot::{Capacity, Sample};
use waterline_core::time::Millis;
use waterline_core::{LedgerEntry, LedgerSource, Pod, Snapshot, UnixMillis, engine};

const NOW: UnixMillis = UnixMillis(1_800_000_000_000);
const SIZES: [usize; 4] = [100, 1_000, 5_000, 15_000];
const LEDGER_PER_NODE: usize = 10;

/// `synthetic-00000`, … — the names `waterline-collector --synthetic-nodes` uses.
fn node_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("synthetic-{i:05}")).collect()
}

/// Deterministic spread of utilisations (no rand dependency in core).
fn level(i: usize, salt: usize) -> f64 {
    ((i * 37 + salt * 11) % 80) as f64 + 5.0
}

/// One node of a full WatchNodes update: name, capacity, samples by metric name.
type NodeUpdate = (String, Capacity, Vec<(String, Sample)>);

/// One full update: every node with a sample for each of the policy's metrics.
fn update(policy: &Policy, names: &[String]) -> Vec<NodeUpdate> {
    let shapes = [(8_000, 32i64 << 30), (16_000, 64 << 30), (32_000, 128 << 30)];
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let (cpu_millis, memory_bytes) = shapes[i % shapes.len()];
            let samples = policy
                .metrics
                .iter()
                .enumerate()
                .map(|(m, spec)| {
                    let at = NOW.minus(Millis::from_secs(10));
                    (spec.name.clone(), Sample { value: level(i, m), at })
                })
                .collect();
            (name.clone(), Capacity { cpu_millis, memory_bytes }, samples)
        })
        .collect()
}

fn apply(snapshot: &mut Snapshot, update: &[NodeUpdate]) {
    for (name, capacity, samples) in update {
        snapshot.upsert_node(name, *capacity, samples.iter().map(|(m, s)| (m.as_str(), *s)));
    }
}

/// `nodes.len()` nodes with six fresh samples each and 10 ledger entries per node, most of
/// them still inside the absorb window (so they count toward predicted load).
fn snapshot(policy: &Policy, names: &[String]) -> Snapshot {
    let mut snap = Snapshot::default();
    apply(&mut snap, &update(policy, names));
    for (i, node) in names.iter().enumerate() {
        for k in 0..LEDGER_PER_NODE {
            let uid = format!("pod-{i:05}-{k}");
            snap.apply_placement(LedgerEntry {
                uid: uid.clone(),
                namespace: "default".into(),
                name: uid,
                node: node.clone(),
                placed_at: NOW.minus(Millis::from_secs(60 * k as i64)),
                usage: Usage { cpu_millis: 250, memory_bytes: 256 << 20 },
                source: LedgerSource::Watch,
                labels: BTreeMap::from([("app".to_string(), format!("app-{k}"))]),
            });
        }
    }
    snap
}

fn pod() -> Pod {
    Pod {
        namespace: "default".into(),
        name: "bench".into(),
        uid: "bench-uid".into(),
        labels: BTreeMap::from([("app".to_string(), "bench".to_string())]),
        cpu_request_millis: 500,
        memory_request_bytes: 512 << 20,
        ..Pod::default()
    }
}

/// Benches `run` over a snapshot of each size; a snapshot is built only when its bench runs
/// (criterion's name filter), so a profile of one size holds no other set-up.
fn over_sizes(
    c: &mut Criterion,
    group: &str,
    sizes: &[usize],
    run: impl Fn(&Policy, &Snapshot, &[String]) + Copy,
) {
    let policy = Policy::default();
    let mut group = c.benchmark_group(group);
    for &n in sizes {
        group.throughput(Throughput::Elements(n as u64));
        // Criterion calls the closure once per sample: build the input once, on first use.
        let input = OnceCell::new();
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            let (names, snap) = input.get_or_init(|| {
                let names = node_names(n);
                let snap = snapshot(&policy, &names);
                (names, snap)
            });
            b.iter(|| run(&policy, snap, black_box(names)))
        });
    }
    group.finish();
}

fn filter_and_score(c: &mut Criterion) {
    let pod = &pod();
    over_sizes(c, "filter", &SIZES, move |policy, snap, names| {
        black_box(engine::reference::filter(policy, snap, pod, names, NOW));
    });
    // Every node of the snapshot, rejected ones answered (FilterRequest.all_nodes, what the
    // scheduler plugin sends): the same verdicts as `filter` over every name.
    over_sizes(c, "filter_all", &SIZES, move |policy, snap, _| {
        black_box(engine::reference::filter_all(policy, snap, pod, NOW));
    });
    over_sizes(c, "score", &SIZES, move |policy, snap, names| {
        black_box(engine::reference::score(policy, snap, pod, names, NOW, false));
    });
    // What the scorer does per request with `explain: true` (six terms per node).
    over_sizes(c, "score_explain", &[100, 5_000], move |policy, snap, names| {
        black_box(engine::reference::score(policy, snap, pod, names, NOW, true));
    });
}

/// Evaluate of every node for one pod: `evaluate` over the table precomputed per
/// snapshot change, and `reference::evaluate_reference`, the scorer's old path (filter,
/// then score of the feasible names), in the same run.
fn evaluate(c: &mut Criterion) {
    const EVALUATE: engine::Ask = engine::Ask::Evaluate;
    const ALL: engine::Candidates<'static> = engine::Candidates::All;
    let pod = &pod();
    let policy = Policy::default();
    let mut group = c.benchmark_group("evaluate");
    for &n in &SIZES {
        group.throughput(Throughput::Elements(n as u64));
        let input = OnceCell::new();
        let input = |policy: &Policy| {
            input.get_or_init(|| {
                let names = node_names(n);
                let snap = snapshot(policy, &names);
                let table = engine::Prepared::build(policy, &snap, NOW);
                (snap, table)
            })
        };
        group.bench_function(BenchmarkId::new("prepared", n), |b| {
            let (snap, table) = input(&policy);
            b.iter(|| {
                black_box(engine::evaluate(&policy, snap, Some(table), pod, EVALUATE, ALL, NOW))
            })
        });
        group.bench_function(BenchmarkId::new("reference", n), |b| {
            let (snap, table) = input(&policy);
            b.iter(|| {
                black_box(engine::reference::evaluate_reference(
                    &policy,
                    snap,
                    pod,
                    table.names(),
                    NOW,
                ))
            })
        });
        // The same pod owned by a DaemonSet, which load thresholds never reject: every node
        // scored and no reason written, so old and new compare the loop alone.
        let daemon = &Pod { owner_kind: "DaemonSet".into(), ..pod.clone() };
        group.bench_function(BenchmarkId::new("prepared_no_rejections", n), |b| {
            let (snap, table) = input(&policy);
            b.iter(|| {
                black_box(engine::evaluate(&policy, snap, Some(table), daemon, EVALUATE, ALL, NOW))
            })
        });
        // The Score RPC's answer (every candidate scored, no verdicts) over the table, beside
        // `score` in `filter_and_score`, the reference walk it replaced.
        group.bench_function(BenchmarkId::new("score_prepared", n), |b| {
            let (snap, table) = input(&policy);
            let score = engine::Ask::Score { explain: false };
            b.iter(|| black_box(engine::evaluate(&policy, snap, Some(table), pod, score, ALL, NOW)))
        });
    }
    group.finish();
}

fn snapshot_apply(c: &mut Criterion) {
    let policy = Policy::default();
    let mut group = c.benchmark_group("snapshot_apply");
    for &n in &SIZES {
        group.throughput(Throughput::Elements(n as u64));
        let input = OnceCell::new();
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            // Upserting into a snapshot that already holds every node: the steady state of
            // a collector refresh reaching a scorer.
            let (update, snap) = input.get_or_init(|| {
                let names = node_names(n);
                (update(&policy, &names), RefCell::new(snapshot(&policy, &names)))
            });
            b.iter(|| apply(&mut snap.borrow_mut(), black_box(update)))
        });
    }
    group.finish();
}

/// Shadow mode (docs/design.md#shadow-mode): judging one bind another scheduler made — Filter and
/// Score over every node, request fit against the requests bound to each node (10 pods of 500m and
/// 512 MiB per node here), and the chosen node's explanation.
fn shadow_judge(c: &mut Criterion) {
    use waterline_core::shadow::{Bind, Requests, ShadowView};
    let policy = Policy::default();
    let mut group = c.benchmark_group("shadow_judge");
    for &n in &[100, 1_000, 5_000] {
        group.throughput(Throughput::Elements(n as u64));
        let input = OnceCell::new();
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            let view = input.get_or_init(|| {
                let names = node_names(n);
                let mut view = ShadowView::new(snapshot(&policy, &names));
                let requests = Requests { cpu_millis: 500, memory_bytes: 512 << 20 };
                for (i, node) in names.iter().enumerate() {
                    for k in 0..LEDGER_PER_NODE {
                        view.bind(&format!("pod-{i:05}-{k}"), node, requests);
                    }
                }
                RefCell::new(view)
            });
            let bind = Bind {
                pod: pod(),
                scheduler: "default-scheduler".into(),
                node: format!("synthetic-{:05}", n / 2),
                bound_at: NOW,
            };
            b.iter(|| black_box(view.borrow_mut().judge(&policy, black_box(&bind), NOW)))
        });
    }
    group.finish();
}

criterion_group!(benches, filter_and_score, evaluate, snapshot_apply, shadow_judge);
criterion_main!(benches);
