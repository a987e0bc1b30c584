//! kube-scheduler's Score phase under a profile: the in-tree score plugins a profile leaves
//! on, each normalised as kube-scheduler normalises it and multiplied by its weight, summed
//! per node (kubernetes/kubernetes `pkg/scheduler/framework/runtime/framework.go`
//! `RunScorePlugins`: Score, then NormalizeScore where the plugin has one, then × weight).
//! A load-aware plugin's own score is added by the caller with its own weight, and an
//! extender's 0..10 answer × its weight × 10 (`schedule_one.go` `prioritizeNodes`:
//! `MaxNodeScore / MaxExtenderPriority`).
//!
//! Modelled: the plugins whose score differs between the simulator's nodes and pods —
//! NodeResourcesFit (LeastAllocated), NodeResourcesBalancedAllocation, PodTopologySpread with
//! its system default constraints, and Koordinator's NodeNUMAResource. Left out because
//! they score every candidate alike for pods without affinities, tolerations or images:
//! TaintToleration (no taints: every node 100), NodeAffinity and InterPodAffinity (no
//! preferred terms: 0), ImageLocality (images are not modelled; below its 23 MB threshold it
//! scores 0), VolumeBinding; and Koordinator's DeviceShare, Reservation and Coscheduling for
//! pods without devices, reservations or gangs. Equal additions never change the choice.

use crate::kube_default::{CpuMemory, balanced_allocation, non_zero_request, weighted_least};

/// `framework.MaxNodeScore`.
const MAX_NODE_SCORE: i64 = 100;

/// kube-scheduler's system default spread constraints (`podtopologyspread/plugin.go`
/// `systemDefaultConstraints`): hostname with maxSkew 3 and zone with maxSkew 5, both
/// ScheduleAnyway. The simulator's nodes carry no zone label, so only the hostname
/// constraint scores (with system defaulting, nodes without the zone label are not ignored:
/// `requireAllTopologies` is false).
pub const SYSTEM_DEFAULT_HOSTNAME_MAX_SKEW: i64 = 3;

/// One in-tree score plugin as a profile enables it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScorePlugin {
    /// NodeResourcesFit with `scoringStrategy: LeastAllocated` and these resource weights
    /// (kube_default.rs; scores `NonZeroRequested` plus the pod's non-zero request).
    LeastAllocated { cpu_weight: i64, memory_weight: i64 },
    /// NodeResourcesBalancedAllocation over cpu and memory (kube_default.rs).
    BalancedAllocation,
    /// PodTopologySpread with `defaultingType: System`, for pods a controller owns.
    PodTopologySpread,
    /// koordinator-sh/koordinator `pkg/scheduler/plugins/nodenumaresource/scoring.go`
    /// `scoreWithAmplifiedCPUs` on a node without a NUMA policy or cpu amplification: the
    /// plugin's default `ScoringStrategy` (apis/config/v1/defaults.go
    /// `SetDefaults_NodeNUMAResourceArgs`: LeastAllocated, cpu 1, memory 1) over the node's
    /// raw `Requested` plus the pod's raw requests; PreFilter skips a pod without requests
    /// (plugin.go: `quotav1.IsZero(requests)`), which then scores 0 everywhere.
    KoordNodeNumaResource,
}

/// A node that passed Filter, as the in-tree plugins read it from the scheduler cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Candidate {
    pub allocatable: CpuMemory,
    /// `NodeInfo.Requested`: raw requests of assumed and bound pods.
    pub requested: CpuMemory,
    /// `NodeInfo.NonZeroRequested`.
    pub non_zero_requested: CpuMemory,
    /// Pods on the node owned by the incoming pod's controller (`PodsWithOwnerRef`, or the
    /// pods the controller's selector matches in older releases: the same pods here).
    pub same_owner_pods: i64,
}

/// The pod being scheduled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Incoming {
    /// Raw requests (0 = unset).
    pub request: CpuMemory,
    /// Whether a Service, ReplicationController, ReplicaSet or StatefulSet selects it
    /// (`helper.DefaultSelector`): only then do the system default constraints apply. A
    /// DaemonSet's or a bare pod's selector is empty.
    pub has_controller: bool,
}

/// A profile's in-tree score plugins with their weights.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    pub plugins: Vec<(ScorePlugin, i64)>,
}

impl Profile {
    /// Σ weight × normalised score per candidate, in the order given.
    pub fn scores(&self, pod: &Incoming, candidates: &[Candidate]) -> Vec<i64> {
        let mut total = vec![0i64; candidates.len()];
        for (plugin, weight) in &self.plugins {
            for (t, s) in total.iter_mut().zip(plugin_scores(plugin, pod, candidates)) {
                *t += s * weight;
            }
        }
        total
    }

    /// kube-scheduler's default profile as far as it scores differently between nodes
    /// (`pkg/scheduler/apis/config/v1/default_plugins.go`: NodeResourcesFit 1,
    /// NodeResourcesBalancedAllocation 1, PodTopologySpread 2; `v1beta2/default_plugins.go`
    /// gives the same three weights), NodeResourcesFit with its default LeastAllocated
    /// strategy over cpu 1 / memory 1.
    pub fn kube_default() -> Profile {
        Profile {
            plugins: vec![
                (ScorePlugin::LeastAllocated { cpu_weight: 1, memory_weight: 1 }, 1),
                (ScorePlugin::BalancedAllocation, 1),
                (ScorePlugin::PodTopologySpread, 2),
            ],
        }
    }

    /// The default profile without the named plugins.
    pub fn kube_default_without(disabled: &[ScorePlugin]) -> Profile {
        let mut p = Profile::kube_default();
        p.plugins.retain(|(plugin, _)| !disabled.iter().any(|d| same_kind(d, plugin)));
        p
    }

    /// The default profile plus `extra` (a peer's own in-tree-like plugins).
    pub fn with(mut self, extra: ScorePlugin, weight: i64) -> Profile {
        self.plugins.push((extra, weight));
        self
    }
}

fn same_kind(a: &ScorePlugin, b: &ScorePlugin) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// One plugin's normalised score per candidate (0..100).
pub fn plugin_scores(plugin: &ScorePlugin, pod: &Incoming, candidates: &[Candidate]) -> Vec<i64> {
    match plugin {
        ScorePlugin::LeastAllocated { cpu_weight, memory_weight } => {
            let request = non_zero_request(pod.request);
            candidates
                .iter()
                .map(|c| {
                    let cpu = c.non_zero_requested.cpu_millis + request.cpu_millis;
                    let memory = c.non_zero_requested.memory_bytes + request.memory_bytes;
                    weighted_least(&[
                        (cpu, c.allocatable.cpu_millis, *cpu_weight),
                        (memory, c.allocatable.memory_bytes, *memory_weight),
                    ])
                })
                .collect()
        }
        ScorePlugin::BalancedAllocation => candidates
            .iter()
            .map(|c| balanced_allocation(c.allocatable, c.requested, pod.request).unwrap_or(0))
            .collect(),
        ScorePlugin::PodTopologySpread => {
            if !pod.has_controller {
                // PreScore returns Skip: no constraints, the plugin adds nothing.
                return vec![0; candidates.len()];
            }
            let counts: Vec<i64> = candidates.iter().map(|c| c.same_owner_pods).collect();
            topology_spread_normalized(&counts, SYSTEM_DEFAULT_HOSTNAME_MAX_SKEW)
        }
        ScorePlugin::KoordNodeNumaResource => {
            if pod.request == CpuMemory::default() {
                return vec![0; candidates.len()];
            }
            candidates
                .iter()
                .map(|c| {
                    weighted_least(&[
                        (
                            c.requested.cpu_millis + pod.request.cpu_millis,
                            c.allocatable.cpu_millis,
                            1,
                        ),
                        (
                            c.requested.memory_bytes + pod.request.memory_bytes,
                            c.allocatable.memory_bytes,
                            1,
                        ),
                    ])
                })
                .collect()
        }
    }
}

/// PodTopologySpread's Score and NormalizeScore for one hostname constraint over the
/// candidates (`podtopologyspread/scoring.go`): raw score `round(count × ln(n + 2) +
/// (maxSkew − 1))` with n the number of candidates (`topologyNormalizingWeight`,
/// `scoreForCount`), then `MaxNodeScore × (max + min − s) / max` in integers (100 for every
/// node when max is 0).
pub fn topology_spread_normalized(counts: &[i64], max_skew: i64) -> Vec<i64> {
    let weight = ((counts.len() + 2) as f64).ln();
    let raw: Vec<i64> = counts
        .iter()
        .map(|&c| (c as f64 * weight + (max_skew - 1) as f64).round() as i64)
        .collect();
    let (Some(&min), Some(&max)) = (raw.iter().min(), raw.iter().max()) else {
        return Vec::new();
    };
    raw.iter()
        .map(|&s| if max == 0 { MAX_NODE_SCORE } else { MAX_NODE_SCORE * (max + min - s) / max })
        .collect()
}

#[cfg(test)]
mod tests;
