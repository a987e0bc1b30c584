//! The learner's refresh at the target scale (docs/design.md#learned-estimate): 50,000
//! running pods of 5,000 workloads (10 each) known to the pod watch, and the policy's four
//! answers with one series per pod, as Prometheus' JSON. Measured, three rounds: parsing the
//! four answers (what the client does after the bytes arrive: `Answers::read`), then the rest of
//! the refresh
//! (the join, core's `learn`, publishing the table), and the table's wire form (what every
//! scorer is sent when it changes); and the process's resident memory before the set-up,
//! with the running pods tracked, and with the learned table held.
//!
//! `cargo bench -p waterline-collector --bench learn_refresh`
//!
//! A plain `main` rather than criterion: the figures are a few hundred milliseconds and
//! a memory delta, which criterion's sampling would not add to.
// Wall time is what a bench measures (the clippy.toml rule is for paused-time tests).
#![allow(clippy::disallowed_methods)]

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;

use prometheus_client::registry::Registry;
use prost::Message;
use waterline_collector::learn::{Answers, LearnMetrics, Learner};
use waterline_collector::running_pods::RunningPods;
use waterline_collector::state::ClusterState;
use waterline_convert::ToProto;
use waterline_core::Pod;
use waterline_core::policy::Learn;

const WORKLOADS: usize = 5_000;
const PODS_PER_WORKLOAD: usize = 10;

fn pod(w: usize, p: usize) -> Pod {
    Pod {
        namespace: format!("team-{:03}", w % 200),
        name: format!("service-{w:05}-7d4b9c8f6d-{p:05}"),
        uid: format!("0c1d2e3f-{w:05}-{p:05}-8000-000000000000"),
        owner_kind: "ReplicaSet".into(),
        owner_name: format!("service-{w:05}-7d4b9c8f6d"),
        labels: [("pod-template-hash".to_string(), "7d4b9c8f6d".to_string())].into(),
        cpu_request_millis: 250 + (w % 8) as i64 * 250,
        memory_request_bytes: (256 << 20) + (w % 4) as i64 * (256 << 20),
        ..Pod::default()
    }
}

/// One answer as Prometheus writes it: a vector with one series per pod, `value(w, p)`.
fn body(value: impl Fn(usize, usize) -> f64) -> Vec<u8> {
    let mut text = String::from(r#"{"status":"success","data":{"resultType":"vector","result":["#);
    for w in 0..WORKLOADS {
        for p in 0..PODS_PER_WORKLOAD {
            let pod = pod(w, p);
            if w + p > 0 {
                text.push(',');
            }
            let _ = write!(
                text,
                r#"{{"metric":{{"namespace":"{}","pod":"{}"}},"value":[1800000000.123,"{}"]}}"#,
                pod.namespace,
                pod.name,
                value(w, p)
            );
        }
    }
    text.push_str("]}}");
    text.into_bytes()
}

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

fn median(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

fn main() {
    // `cargo bench` runs every bench with cargo's own probes (`--list`): nothing to do then.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let pods_count = WORKLOADS * PODS_PER_WORKLOAD;
    let rss_start = rss_mib();
    let pods = RunningPods::default();
    for w in 0..WORKLOADS {
        for p in 0..PODS_PER_WORKLOAD {
            pods.upsert(&pod(w, p));
        }
    }
    let rss_tracked = rss_mib();
    // Cores (each pod a little above or below its workload's ratio) and bytes, and a day of
    // one-a-minute samples.
    let cpu = |w: usize, p: usize| (250 + (w % 8) * 250) as f64 / 1000.0 * (1.0 + p as f64 / 20.0);
    let bodies = [
        body(cpu),
        body(|w, p| ((256 << 20) + (w % 4) * (256 << 20)) as f64 * (0.5 + p as f64 / 40.0)),
        body(|_, _| 1440.0),
        body(|_, _| 1440.0),
    ];
    let body_mib = bodies.iter().map(Vec::len).sum::<usize>() as f64 / (1 << 20) as f64;
    let rss_bodies = rss_mib();
    // The first round's resident memory after reading the answers and after learning.
    let (mut rss_read, mut rss_refreshed) = (Vec::new(), Vec::new());
    let policy = Learn::default();
    let state = ClusterState::default();
    let metrics = LearnMetrics::register(&mut Registry::default());
    let mut learner = Learner::default();
    let (mut parse_ms, mut learn_ms) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let started = Instant::now();
        let mut answers = Answers::default();
        for (slot, body) in bodies.iter().enumerate() {
            answers.read(slot, 200, "application/json", black_box(body)).expect("a valid answer");
        }
        parse_ms.push(started.elapsed().as_secs_f64() * 1e3);
        rss_read.push(rss_mib());
        let started = Instant::now();
        let outcome = learner.refresh(&policy, Ok(answers), &pods, &state, &metrics);
        learn_ms.push(started.elapsed().as_secs_f64() * 1e3);
        black_box(outcome);
        rss_refreshed.push(rss_mib());
    }
    // The answers' bodies are the test's, not the collector's (it drops each after parsing).
    drop(bodies);
    let rss_learned = rss_mib();
    let table = state.learned();
    let wire = table.to_proto();
    let bytes: usize = wire.iter().map(Message::encoded_len).sum();
    println!(
        "learn_refresh: {pods_count} pods of {WORKLOADS} workloads, 4 answers of {pods_count} series ({body_mib:.1} MiB of JSON)"
    );
    println!(
        "  parse of the four answers: {} ms (median {:.0})",
        parse_ms.iter().map(|m| format!("{m:.0}")).collect::<Vec<_>>().join(" / "),
        median(parse_ms.clone())
    );
    println!(
        "  join + learn + publish: {} ms (median {:.0}); refresh without the network: {:.0} ms",
        learn_ms.iter().map(|m| format!("{m:.0}")).collect::<Vec<_>>().join(" / "),
        median(learn_ms.clone()),
        median(parse_ms) + median(learn_ms)
    );
    println!(
        "  learned {} workloads ({} dropped); table on the wire {:.0} KiB",
        table.len(),
        table.dropped,
        bytes as f64 / 1024.0
    );
    println!(
        "  resident memory: {rss_start:.0} MiB at start; +{:.1} MiB with the running pods tracked ({:.0} B a pod); first refresh: +{:.1} MiB with the answers read, +{:.1} MiB after learning; after three: +{:.1} MiB (the table held, and what the allocator kept of the refreshes' transient memory)",
        rss_tracked - rss_start,
        (rss_tracked - rss_start) * (1 << 20) as f64 / pods_count as f64,
        rss_read[0] - rss_bodies,
        rss_refreshed[0] - rss_read[0],
        rss_learned - rss_start
    );
}
