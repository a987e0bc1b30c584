//! The room under the threshold against the demand: whether any placement at all could
//! keep every node under the threshold with every pod placed.
//!
//! At each measure instant t, per resource r (cpu, memory):
//!
//! - **room** `R_r(t) = Σ_nodes max(0, θ · allocatable_r − background_r(t))`, θ the
//!   scenario's threshold: what the nodes can take before crossing it;
//! - **demand** `D_r(t) = Σ_pods usage_r(t)` over the pods that exist at t (arrived, not yet
//!   deleted, placed or not), each at the true usage it would have had if it had started at
//!   its arrival (ramp included, limits applied).
//!
//! The room is counted as a fluid — a pod can be split across nodes, a node's room can be
//! filled to the last millicore — so it is an upper bound on what any scheduler can place
//! under the threshold: where `D_r(t) > R_r(t)` for some r and t, no strategy can have both
//! zero pending and zero overload, and the pending a cautious strategy shows there is the
//! honest answer. The converse does not hold (pods come in sizes; a node's cpu room may be
//! taken by pods that fill its memory), so "room suffices" is necessary, not sufficient.

use serde::{Deserialize, Serialize};

use crate::scenario::Scenario;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RoomVsDemand {
    /// max over t of `D_cpu(t) / R_cpu(t)` (∞ shown as a large number when R = 0 < D).
    pub cpu_peak: f64,
    pub memory_peak: f64,
    /// Seconds during which demand exceeded room in cpu or memory.
    pub short_s: f64,
    /// Node-seconds above the threshold from the background alone (no pod anywhere): the
    /// overload no placement can avoid.
    pub background_overload_node_s: f64,
}

impl RoomVsDemand {
    /// Whether the room exceeds the demand at every instant in both resources.
    pub fn suffices(&self) -> bool {
        self.short_s == 0.0
    }
}

/// A demand over an empty room counts as this ratio (summary.json stays finite).
const NO_ROOM: f64 = 1e6;

/// Samples the scenario every `measureInterval` from 0 to its end.
pub fn room_vs_demand(s: &Scenario) -> RoomVsDemand {
    let step = s.measure_interval.0.max(1);
    let theta = s.threshold / 100.0;
    let mut out = RoomVsDemand::default();
    let mut t = 0;
    while t <= s.duration.0 {
        let (mut room_cpu, mut room_memory) = (0.0, 0.0);
        for n in &s.nodes {
            let (cpu, memory) = n.background.at(t, n.allocatable);
            let (c, m) = (n.allocatable.cpu_millis as f64, n.allocatable.memory_bytes as f64);
            room_cpu += (theta * c - cpu).max(0.0);
            room_memory += (theta * m - memory).max(0.0);
            if cpu > theta * c || memory > theta * m {
                out.background_overload_node_s += step as f64 / 1000.0;
            }
        }
        let (mut cpu, mut memory) = (0.0, 0.0);
        for p in s.pods.iter().filter(|p| p.arrival <= t && p.deletion.is_none_or(|d| t < d)) {
            let (c, m) = p.usage.at(t - p.arrival, t, p.pod.limits);
            cpu += c;
            memory += m;
        }
        let ratio = |d: f64, r: f64| {
            if r > 0.0 {
                d / r
            } else if d > 0.0 {
                NO_ROOM
            } else {
                0.0
            }
        };
        let (rc, rm) = (ratio(cpu, room_cpu), ratio(memory, room_memory));
        out.cpu_peak = out.cpu_peak.max(rc);
        out.memory_peak = out.memory_peak.max(rm);
        if rc > 1.0 || rm > 1.0 {
            out.short_s += step as f64 / 1000.0;
        }
        t += step;
    }
    let r3 = |x: f64| (x * 1000.0).round() / 1000.0;
    out.cpu_peak = r3(out.cpu_peak);
    out.memory_peak = r3(out.memory_peak);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse_scenario;

    #[test]
    fn room_is_the_fluid_space_under_the_threshold() {
        // Two 10-core / 10 GiB nodes at 30 % and 70 % cpu, 20 % memory; threshold 65 %.
        // Room cpu: (6.5 − 3) + max(0, 6.5 − 7) = 3.5 cores; memory 2 × (6.5 − 2) = 9 GiB.
        // 4 pods of 1 core / 1 GiB used at 100 % from 0 (no ramp): demand 4 cores / 4 GiB:
        // cpu 4 / 3.5 = 1.143, memory 4 / 9 = 0.444. Two of them leave at 30 m: 2 / 3.5 =
        // 0.571 from then; short for the first 30 m (61 samples of 30 s from 0 to 30 m).
        let text = "
name: room
duration: 1h
threshold: 65
nodes:
  - {name: a, cpu: 10, memory: 10Gi, background: {cpu: 30, memory: 20}}
  - {name: b, cpu: 10, memory: 10Gi, background: {cpu: 70, memory: 20}}
podGroups:
  - {prefix: p, count: 2, arrival: {at: 0s}, cpu: 1, memory: 1Gi, usage: {rampUp: 0s}}
  - {prefix: q, count: 2, arrival: {at: 0s}, cpu: 1, memory: 1Gi, usage: {rampUp: 0s}, lifetime: 30m}
";
        let r = room_vs_demand(&parse_scenario(text, None).unwrap());
        assert_eq!(r.cpu_peak, 1.143);
        assert_eq!(r.memory_peak, 0.444);
        // samples at 0, 30 s, …, 29 m 30 s are short (60 of them); at 30 m the q pods are gone
        assert_eq!(r.short_s, 60.0 * 30.0);
        assert!(!r.suffices());
        // node b's background (70 %) is above 65 % at each of the 121 samples 0..60 m
        assert_eq!(r.background_overload_node_s, 121.0 * 30.0);
    }
}
