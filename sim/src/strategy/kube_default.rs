//! kube-scheduler's default scoring on requests (peers/src/kube_default.rs): NodeResourcesFit
//! LeastAllocated + NodeResourcesBalancedAllocation, weight 1 each. No Filter beyond the
//! request fit the simulator already applies.

use waterline_peers::kube_default::{CpuMemory, default_score};

use super::{Cycle, NodeView, Strategy};
use crate::model::{Resources, SimPod};

#[derive(Default)]
pub struct KubeDefault;

impl KubeDefault {
    pub fn new() -> Self {
        KubeDefault
    }
}

fn cm(r: Resources) -> CpuMemory {
    CpuMemory::new(r.cpu_millis, r.memory_bytes)
}

impl Strategy for KubeDefault {
    fn label(&self) -> &str {
        "kube-default"
    }

    fn score(&mut self, _cycle: &Cycle, pod: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64> {
        nodes
            .iter()
            .map(|node| {
                default_score(
                    cm(node.allocatable),
                    cm(node.non_zero_requested),
                    cm(node.requested),
                    cm(pod.requests),
                )
            })
            .collect()
    }
}
