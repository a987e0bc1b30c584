//! Cases from kubernetes/kubernetes `noderesources/least_allocated_test.go`
//! (TestLeastAllocatedScoringStrategy) and `balanced_allocation_test.go`
//! (TestNodeResourcesBalancedAllocation), with their arithmetic. Their quantities are plain
//! numbers: cpu "4000" is 4000 cores (4,000,000 millicores) in the least-allocated test and
//! 4000 millicores (`makeNode(name, milliCPU, memory)`) in the balanced one; memory is bytes.

use super::*;

const CORE: i64 = 1000;

fn cm(cpu_millis: i64, memory_bytes: i64) -> CpuMemory {
    CpuMemory::new(cpu_millis, memory_bytes)
}

#[test]
fn least_allocated_nothing_scheduled_differently_sized_nodes() {
    // pod: cpu 1000 + 2000 = 3000 cores, memory 2000 + 3000 = 5000
    let pod = cm(3000 * CORE, 5000);
    // node1: cpu ((4000 - 3000) * 100) / 4000 = 25, memory ((10000 - 5000) * 100) / 10000 = 50,
    // (25 + 50) / 2 = 37
    assert_eq!(least_allocated(cm(4000 * CORE, 10000), cm(0, 0), pod), 37);
    // node2: cpu ((6000 - 3000) * 100) / 6000 = 50, memory 50, (50 + 50) / 2 = 50
    assert_eq!(least_allocated(cm(6000 * CORE, 10000), cm(0, 0), pod), 50);
}

#[test]
fn least_allocated_pods_scheduled_with_resources() {
    let pod = cm(3000 * CORE, 5000);
    let node = cm(10000 * CORE, 20000);
    // node1 holds cpu 3000 / memory "0": cpu ((10000 - 6000) * 100) / 10000 = 40,
    // memory ((20000 - 5000) * 100) / 20000 = 75, (40 + 75) / 2 = 57
    assert_eq!(least_allocated(node, cm(3000 * CORE, 0), pod), 57);
    // node2 holds cpu 3000 / memory 5000: 40 and ((20000 - 10000) * 100) / 20000 = 50 → 45
    assert_eq!(least_allocated(node, cm(3000 * CORE, 5000), pod), 45);
    // differently sized node2 (memory 50000): ((50000 - 10000) * 100) / 50000 = 80,
    // (40 + 80) / 2 = 60
    assert_eq!(least_allocated(cm(10000 * CORE, 50000), cm(3000 * CORE, 5000), pod), 60);
}

#[test]
fn least_allocated_request_above_capacity_scores_zero_for_that_resource() {
    // pod cpu 3000 / memory "0" onto nodes of 4000 cores holding 3000 already:
    // cpu 6000 > 4000 → 0; node1 memory ((10000 - 0) * 100) / 10000 = 100 → (0 + 100) / 2 = 50
    let pod = cm(3000 * CORE, 0);
    assert_eq!(least_allocated(cm(4000 * CORE, 10000), cm(3000 * CORE, 0), pod), 50);
    // node2 memory ((10000 - 5000) * 100) / 10000 = 50 → (0 + 50) / 2 = 25
    assert_eq!(least_allocated(cm(4000 * CORE, 10000), cm(3000 * CORE, 5000), pod), 25);
    // a node without resources scores MinNodeScore
    assert_eq!(least_allocated(cm(0, 0), cm(3000 * CORE, 0), pod), 0);
}

#[test]
fn least_allocated_weighted_resources() {
    // memory weight 2, cpu weight 1: node1 (25 * 1 + 50 * 2) / 3 = 41, node2 (50 + 100) / 3 = 50
    let w = |alloc: CpuMemory| {
        weighted_least(&[(3000 * CORE, alloc.cpu_millis, 1), (5000, alloc.memory_bytes, 2)])
    };
    assert_eq!(w(cm(4000 * CORE, 10000)), 41);
    assert_eq!(w(cm(6000 * CORE, 10000)), 50);
}

#[test]
fn balanced_allocation_differently_sized_nodes() {
    // cpuAndMemory: cpu 1000m + 2000m, memory 2000 + 3000
    let pod = cm(3000, 5000);
    // node1: 3000 / 4000 = 0.75, 5000 / 10000 = 0.5, std (0.75 - 0.5) / 2 = 0.125,
    // (1 - 0.125) * 100 = 87.5 → 87
    assert_eq!(balanced_allocation(cm(4000, 10000), cm(0, 0), pod), Some(87));
    // node2: 3000 / 6000 = 0.5, 0.5, std 0 → 100
    assert_eq!(balanced_allocation(cm(6000, 10000), cm(0, 0), pod), Some(100));
}

#[test]
fn balanced_allocation_pods_scheduled_with_resources() {
    let pod = cm(3000, 5000);
    // node1 holds cpuOnly (3000m, 0): 6000 / 10000 = 0.6, 5000 / 20000 = 0.25,
    // std (0.6 - 0.25) / 2 = 0.175, (1 - 0.175) * 100 = 82.5 → 82
    assert_eq!(balanced_allocation(cm(10000, 20000), cm(3000, 0), pod), Some(82));
    // node2 holds cpuAndMemory: 0.6 and 10000 / 20000 = 0.5, std 0.05 → 95
    assert_eq!(balanced_allocation(cm(10000, 20000), cm(3000, 5000), pod), Some(95));
}

#[test]
fn balanced_allocation_caps_fractions_and_skips_best_effort_pods() {
    // cpu 6000 / 4000 capped at 1, memory 5000 / 10000 = 0.5: std 0.25 → 75
    assert_eq!(balanced_allocation(cm(4000, 10000), cm(3000, 0), cm(3000, 5000)), Some(75));
    // a pod without requests is skipped in PreScore
    assert_eq!(balanced_allocation(cm(4000, 10000), cm(3000, 0), cm(0, 0)), None);
    // no allocatable at all: no fractions, std 0 → 100 (their "zero node resources" case
    // scores 0 only because NodeResourcesFit's filter never lets such a node through)
    assert_eq!(balanced_allocation(cm(0, 0), cm(0, 0), cm(1, 1)), Some(100));
}

#[test]
fn non_zero_defaults_and_the_profile_sum() {
    assert_eq!(non_zero_request(cm(0, 0)), cm(100, 200 * 1024 * 1024));
    assert_eq!(non_zero_request(cm(250, 0)), cm(250, 200 * 1024 * 1024));
    // 8 cores / 32 GiB, empty; pod 1 core / 4 GiB:
    // fit: cpu (8000 - 1000) * 100 / 8000 = 87, memory (32 - 4) * 100 / 32 = 87 → 87
    // balanced: 0.125 and 0.125, std 0 → 100; sum 187
    let gib = 1i64 << 30;
    assert_eq!(default_score(cm(8000, 32 * gib), cm(0, 0), cm(0, 0), cm(1000, 4 * gib)), 187);
}
