//! `--synthetic-nodes N`: a generated cluster whose usage drifts, for demos and
//! benchmarks. Each node has a base level and a slow wave; the 1 h and 1 d maxima sit
//! above the 5-minute value, as they would in a real cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use waterline_core::UnixMillis;
use waterline_core::policy::{Policy, Resource};
use waterline_core::snapshot::{Capacity, Sample};

use crate::state::{ClusterState, NodeRecord};

struct SyntheticNode {
    name: String,
    capacity: Capacity,
    cpu_base: f64,
    mem_base: f64,
    phase: f64,
}

pub struct Synthetic {
    nodes: Vec<SyntheticNode>,
    rng: StdRng,
}

impl Synthetic {
    pub fn new(count: usize, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let shapes = [(8_000, 32i64 << 30), (16_000, 64 << 30), (32_000, 128 << 30)];
        let nodes = (0..count)
            .map(|i| {
                let (cpu_millis, memory_bytes) = shapes[rng.random_range(0..shapes.len())];
                SyntheticNode {
                    name: format!("synthetic-{i:05}"),
                    capacity: Capacity { cpu_millis, memory_bytes },
                    cpu_base: rng.random_range(5.0..70.0),
                    mem_base: rng.random_range(10.0..75.0),
                    phase: rng.random_range(0.0..std::f64::consts::TAU),
                }
            })
            .collect();
        Synthetic { nodes, rng }
    }

    /// Every node's samples at `now` for the policy's metrics.
    pub fn sample(&mut self, policy: &Policy, now: UnixMillis) -> BTreeMap<String, NodeRecord> {
        let minutes = now.0 as f64 / 60_000.0;
        let mut out = BTreeMap::new();
        for node in &self.nodes {
            let wave = (minutes / 10.0 + node.phase).sin() * 8.0;
            let mut samples = BTreeMap::new();
            for metric in &policy.metrics {
                let base = match metric.resource {
                    Resource::Cpu => node.cpu_base,
                    Resource::Memory => node.mem_base,
                    Resource::Other => (node.cpu_base + node.mem_base) / 2.0,
                };
                // Longer windows remember higher peaks.
                let peak = if metric.name.contains("1d") {
                    12.0
                } else if metric.name.contains("1h") {
                    6.0
                } else {
                    0.0
                };
                let noise: f64 = self.rng.random_range(-1.5..1.5);
                let value = (base + wave.abs().max(wave) + peak + noise).clamp(0.0, 100.0);
                samples.insert(
                    metric.name.clone(),
                    Sample { value: (value * 10.0).round() / 10.0, at: now },
                );
            }
            out.insert(node.name.clone(), NodeRecord { capacity: node.capacity, samples });
        }
        out
    }
}

/// Moves the synthetic cluster every `every`, reading the policy in force each time.
pub async fn run(
    mut synthetic: Synthetic,
    state: ClusterState,
    policy: waterline_runtime::policy::PolicyHandle,
    every: Duration,
) {
    let mut ticker = tokio::time::interval(every);
    loop {
        ticker.tick().await;
        let nodes = synthetic.sample(&policy.get(), UnixMillis::now());
        state.replace_nodes(nodes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_cluster_and_values_in_range() {
        let policy = Policy::default();
        let a = Synthetic::new(50, 7).sample(&policy, UnixMillis(0));
        let b = Synthetic::new(50, 7).sample(&policy, UnixMillis(0));
        assert_eq!(a, b);
        assert_eq!(a.len(), 50);
        for node in a.values() {
            assert_eq!(node.samples.len(), 6);
            assert!(node.samples.values().all(|s| (0.0..=100.0).contains(&s.value)));
            assert!(node.capacity.cpu_millis >= 8000);
        }
    }
}
