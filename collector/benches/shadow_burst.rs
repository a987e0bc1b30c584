//! Shadow mode's cost on the collector's pod watch (docs/benchmarks-history.md §7): a burst of
//! 1,000 binds by default-scheduler reaching the pod watch's index of a collector that
//! holds 5,000 nodes (the default six metrics, fresh samples) and a ledger of 10 pods per
//! node, with shadow mode off or on. Measured: the pod watch's own work for the burst
//! (what the watch loop spends before it reads the next event), three bursts; with shadow
//! mode on, the first burst is also waited for until the judge thread has judged (or
//! dropped) all of it, and that time is printed; and the process's resident memory after
//! the set-up. One mode per run, so each run's memory is its own:
//!
//! `cargo bench -p waterline-collector --bench shadow_burst -- off` (or `-- shadow`;
//! `-- shadow --no-drain` skips waiting for the judge)
//!
//! A plain `main` rather than criterion: one drained burst takes seconds (minutes on a
//! loaded machine), and criterion's ten samples would multiply that.
// Wall time is what a bench measures (the clippy.toml rule is for paused-time tests).
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use clap::Parser;
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

fn main() {
    let mode = std::env::args().skip(1).find(|a| !a.starts_with('-')).unwrap_or_default();
    let on = match mode.as_str() {
        "off" => false,
        "shadow" => true,
        // `cargo bench` without a filter, or cargo's own probes: nothing to do.
        _ => {
            eprintln!("shadow_burst: pass `off` or `shadow` (cargo bench ... -- off)");
            return;
        }
    };
    let drain = !std::env::args().any(|a| a == "--no-drain");
    let policy = PolicyHandle::new(Policy::default());
    let before = rss_mib();
    let (state, mut index, decisions) = cluster(&policy, on);
    if on {
        // The judge's first copy of the state and the bound pods' requests.
        while state.shadow_gap() {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    println!(
        "{mode}: resident memory {before:.0} MiB before the set-up, {:.0} MiB after ({NODES} nodes, {} ledger entries)",
        rss_mib(),
        NODES * LEDGER_PER_NODE
    );
    let mut watch_ms = Vec::new();
    for round in 0..3 {
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
        watch_ms.push(watch.as_secs_f64() * 1e3);
        if let (Some(d), Some(before), 0, true) = (&decisions, before, round, drain) {
            while d.judged() + d.dropped() < before + BURST as u64 {
                std::thread::sleep(Duration::from_millis(5));
            }
            let drained = started.elapsed();
            println!(
                "shadow: the judge finished the burst {:.2} s after its first bind ({:.2} ms per bind); judged {}, dropped {}",
                drained.as_secs_f64(),
                drained.as_secs_f64() * 1e3 / BURST as f64,
                d.judged(),
                d.dropped()
            );
        }
        // The burst's pods go, so every round starts from the same ledger.
        for pod in pods {
            index.delete(pod);
        }
    }
    println!(
        "{mode}: pod watch time for a burst of {BURST} binds: {} ms ({:.1} µs per bind, first burst)",
        watch_ms.iter().map(|m| format!("{m:.1}")).collect::<Vec<_>>().join(" / "),
        watch_ms[0] * 1e3 / BURST as f64
    );
}
