//! PodTopologySpread against kubernetes/kubernetes `podtopologyspread/scoring_test.go`
//! (TestPodTopologySpreadScore), the profile sums by hand from the plugins' formulas.

use super::*;

const GIB: i64 = 1 << 30;

fn cm(cpu_millis: i64, memory_bytes: i64) -> CpuMemory {
    CpuMemory::new(cpu_millis, memory_bytes)
}

#[test]
fn system_defaults_on_nodes_without_zones_match_upstream() {
    // "system defaulting, nodes don't have zone, pods match service": matching pods 4/3/2/1
    // on 4 candidates, hostname maxSkew 3. Weight ln(4 + 2) = 1.7918; raw round(c·w + 2):
    // 4 → 9.17 → 9, 3 → 7.38 → 7, 2 → 5.58 → 6, 1 → 3.79 → 4; max 9, min 4:
    // 100·(13 − 9)/9 = 44, 100·6/9 = 66, 100·7/9 = 77, 100·9/9 = 100.
    assert_eq!(topology_spread_normalized(&[4, 3, 2, 1], 3), [44, 66, 77, 100]);
}

#[test]
fn hostname_constraint_counts_only_the_candidates() {
    // "one constraint on node, 3 out of 4 nodes are candidates" (maxSkew 1): 4/2/1 on 3
    // candidates, weight ln 5 = 1.609: raw 6, 3, 2; 100·(8 − 6)/6 = 33, 100·5/6 = 83, 100.
    assert_eq!(topology_spread_normalized(&[4, 2, 1], 1), [33, 83, 100]);
    // "one constraint on node, all 4 nodes are candidates" (maxSkew 1): 2/1/0/3 →
    // raw round(c · ln 6) = 4, 2, 0, 5: 100·(5 − 4)/5 = 20, 60, 100, 0.
    assert_eq!(topology_spread_normalized(&[2, 1, 0, 3], 1), [20, 60, 100, 0]);
    // "no existing pods": every node 100
    assert_eq!(topology_spread_normalized(&[0, 0], 1), [100, 100]);
}

#[test]
fn topology_spread_skips_pods_without_a_controller() {
    let nodes = [Candidate { same_owner_pods: 3, ..Default::default() }, Candidate::default()];
    let bare = Incoming { request: cm(100, 0), has_controller: false };
    assert_eq!(plugin_scores(&ScorePlugin::PodTopologySpread, &bare, &nodes), [0, 0]);
    let owned = Incoming { has_controller: true, ..bare };
    // 3/0 on 2 candidates, maxSkew 3: raw round(3 · ln 4 + 2) = round(6.16) = 6 and 2;
    // 100·(8 − 6)/6 = 33 and 100·(8 − 2)/6 = 100.
    assert_eq!(plugin_scores(&ScorePlugin::PodTopologySpread, &owned, &nodes), [33, 100]);
}

#[test]
fn the_default_profile_adds_weighted_plugins() {
    // Two 8-core / 32 GiB nodes; a 1-core / 4 GiB pod of a ReplicaSet.
    // a: empty. LeastAllocated (8000 − 1000)·100/8000 = 87 both resources → 87;
    //    Balanced 0.125 / 0.125 → 100; spread count 0.
    // b: 2 pods of the same ReplicaSet, 2 cores / 8 GiB requested. LeastAllocated
    //    (8000 − 3000)·100/8000 = 62, (32 − 12)·100/32 = 62 → 62; Balanced 100; count 2.
    // Spread over 2 candidates, maxSkew 3: raw 2 and round(2 · ln 4 + 2) = round(4.77) = 5;
    //    100·(7 − 2)/5 = 100 for a, 100·(7 − 5)/5 = 40 for b.
    // Sum: a 87 + 100 + 2·100 = 387, b 62 + 100 + 2·40 = 242.
    let a = Candidate { allocatable: cm(8000, 32 * GIB), ..Default::default() };
    let used = cm(2000, 8 * GIB);
    let b = Candidate { requested: used, non_zero_requested: used, same_owner_pods: 2, ..a };
    let pod = Incoming { request: cm(1000, 4 * GIB), has_controller: true };
    assert_eq!(Profile::kube_default().scores(&pod, &[a, b]), [387, 242]);
    // waterline's profiles disable both request scorers: only 2 × spread is left
    let spread_only = Profile::kube_default_without(&[
        ScorePlugin::LeastAllocated { cpu_weight: 1, memory_weight: 1 },
        ScorePlugin::BalancedAllocation,
    ]);
    assert_eq!(spread_only.scores(&pod, &[a, b]), [200, 80]);
}

#[test]
fn koordinator_numa_scores_raw_requests() {
    // A pod without a memory request: LeastAllocated counts 200 MiB for it
    // (non-zero request), NodeNUMAResource its raw 0. Node 4 cores / 8 GiB, 1 core and
    // 0 bytes requested. NUMA: cpu (4000 − 1500)·100/4000 = 62, memory (8 − 0)/8 → 100:
    // (62 + 100)/2 = 81.
    let node = Candidate {
        allocatable: cm(4000, 8 * GIB),
        requested: cm(1000, 0),
        non_zero_requested: cm(1000, 200 << 20),
        same_owner_pods: 0,
    };
    let pod = Incoming { request: cm(500, 0), has_controller: false };
    assert_eq!(plugin_scores(&ScorePlugin::KoordNodeNumaResource, &pod, &[node]), [81]);
    // LeastAllocated: cpu 62, memory (8192 − 400)·100/8192 MiB = 95 → (62 + 95)/2 = 78
    let fit = ScorePlugin::LeastAllocated { cpu_weight: 1, memory_weight: 1 };
    assert_eq!(plugin_scores(&fit, &pod, &[node]), [78]);
    // a pod without requests is skipped by NodeNUMAResource
    let empty = Incoming::default();
    assert_eq!(plugin_scores(&ScorePlugin::KoordNodeNumaResource, &empty, &[node]), [0]);
}
