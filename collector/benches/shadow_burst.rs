//! Shadow mode's cost on the collector's pod watch (issue 18, BENCHMARKS.md §7): a burst of
//! 1,000 binds by default-scheduler reaching the pod watch's index of a collector that
//! holds 5,000 nodes (the default six metrics, fresh samples) and a ledger of 10 pods per
//! node, with shadow mode off and on. Timed: the pod watch's own work for the burst (what
//! the watch loop spends before it reads the next event). Printed after each run, for
//! shadow mode on: how long the judge thread took to work through the burst, and how many
//! binds it dropped (a full queue).
//!
//! `cargo bench -p waterline-collector --bench shadow_burst -- --warm-up-time 1 --measurement-time 10`
// Wall time is what a bench measures (the clippy.toml rule is for paused-time tests).
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use clap::Parser;
use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod as KubePod;
use prometheus_client::registry::Registry;
use serde_json::json;
use waterline_collector::shadow::{self, ShadowArgs, ShadowMetrics};
use waterline_collector::sources::kube::{Index, PodIndex};
use waterline_collector::state::{ClusterState, NodeRecord};
use waterline_core::snapshot::{Capacity, Sample};
use waterline_core::{Policy, UnixMillis};
use waterline_runtime::policy::PolicyHandle;

const NODES: usize = 5_000;
const BURST: usize = 1_000;
const LEDGER_PER_NODE: usize = 10;

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    shadow: ShadowArgs,
}

fn node(i: usize) -> String {
    format!("synthetic-{i:05}")
}

fn kube_pod(name: &str, node: &str, now: &str) -> KubePod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "bench", "uid": format!("uid-{name}"),
                     "creationTimestamp": now},
        "spec": {"nodeName": node, "schedulerName": "default-scheduler",
                 "containers": [{"name": "c", "image": "x",
                                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}]}
    }))
    .expect("valid pod")
}

/// 5,000 nodes with six fresh samples, and a pod watch that already placed 10 pods on
/// each (shadow mode sees their requests).
fn cluster(policy: &PolicyHandle, shadow: bool) -> (ClusterState, PodIndex, Option<Decisions>) {
    let state = ClusterState::default();
    let now = UnixMillis::now();
    let nodes: BTreeMap<String, NodeRecord> = (0..NODES)
        .map(|i| {
            let samples = policy
                .get()
                .metrics
                .iter()
                .enumerate()
                .map(|(m, spec)| {
                    let value = ((i * 37 + m * 11) % 80) as f64 + 5.0;
                    (spec.name.clone(), Sample { value, at: now })
                })
                .collect();
            let capacity = Capacity { cpu_millis: 8_000, memory_bytes: 32 << 30 };
            (node(i), NodeRecord { capacity, samples })
        })
        .collect();
    state.replace_nodes(nodes);
    let decisions = shadow.then(|| {
        let args = Flags::parse_from(["bench", "--shadow"]).shadow;
        let metrics = ShadowMetrics::register(&mut Registry::default());
        shadow::start(&args, &state, policy.clone(), metrics).expect("judge thread").0
    });
    let filter = decisions.is_some().then(|| {
        std::sync::Arc::new(shadow::SchedulerFilter::new(&Flags::parse_from(["bench"]).shadow))
    });
    let mut index = PodIndex::new(state.clone(), policy.clone()).with_shadow(filter);
    let stamp = k8s_openapi::jiff::Timestamp::now().to_string();
    index.init();
    for i in 0..NODES {
        for k in 0..LEDGER_PER_NODE {
            index.init_apply(kube_pod(&format!("old-{i}-{k}"), &node(i), &stamp));
        }
    }
    index.init_done();
    (state, index, decisions)
}

type Decisions = std::sync::Arc<shadow::Decisions>;

/// The process's resident memory, from /proc (Linux), in MiB.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn burst(c: &mut Criterion) {
    let policy = PolicyHandle::new(Policy::default());
    let mut group = c.benchmark_group("pod_watch_burst_1000_binds_5000_nodes");
    group.sample_size(10);
    for on in [false, true] {
        let name = if on { "shadow" } else { "off" };
        // Built when its bench runs (criterion's name filter), so `-- off` and `-- shadow`
        // each report the resident memory of their own set-up.
        let mut setup = None;
        let mut round = 0usize;
        group.bench_function(name, |b| {
            let (_state, index, decisions) = setup.get_or_insert_with(|| {
                let before = rss_mib();
                let built = cluster(&policy, on);
                if built.2.is_some() {
                    // The judge's first copy of the state and the bound pods' requests.
                    while built.0.shadow_gap() {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
                eprintln!(
                    "{name}: resident memory {before:.0} MiB before the set-up, {:.0} MiB after ({NODES} nodes, {} ledger entries)",
                    rss_mib(),
                    NODES * LEDGER_PER_NODE
                );
                built
            });
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    round += 1;
                    let stamp = k8s_openapi::jiff::Timestamp::now().to_string();
                    let pods: Vec<KubePod> = (0..BURST)
                        .map(|k| kube_pod(&format!("b{round}-{k}"), &node(k * 7 % NODES), &stamp))
                        .collect();
                    let before = decisions.as_ref().map(|d| d.judged() + d.dropped());
                    let started = Instant::now();
                    for pod in pods.iter().cloned() {
                        index.apply(black_box(pod));
                    }
                    let watch = started.elapsed();
                    spent += watch;
                    if let (Some(d), Some(before)) = (&decisions, before) {
                        while d.judged() + d.dropped() < before + BURST as u64 {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        eprintln!(
                            "shadow: burst {round}: pod watch {:.1} ms, judge done {:.1} ms after the first bind; {} dropped so far, {} judged",
                            watch.as_secs_f64() * 1e3,
                            started.elapsed().as_secs_f64() * 1e3,
                            d.dropped(),
                            d.judged()
                        );
                    }
                    // Untimed: the burst's pods go, so every round starts from the same ledger.
                    for pod in pods {
                        index.delete(pod);
                    }
                }
                spent
            })
        });
    }
    group.finish();
}

criterion_group!(benches, burst);
criterion_main!(benches);
