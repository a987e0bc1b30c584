//! kube-scheduler's default profile on requests (peers/src/profile.rs `Profile::kube_default`):
//! NodeResourcesFit LeastAllocated × 1 + NodeResourcesBalancedAllocation × 1 +
//! PodTopologySpread (system defaults) × 2. No Filter beyond the request fit the simulator
//! already applies.

use waterline_peers::profile::Profile;

use super::profile::{candidates, incoming};
use super::{Cycle, NodeView, Strategy};
use crate::model::SimPod;

pub struct KubeDefault {
    profile: Profile,
}

impl KubeDefault {
    pub fn new() -> Self {
        KubeDefault { profile: Profile::kube_default() }
    }
}

impl Default for KubeDefault {
    fn default() -> Self {
        KubeDefault::new()
    }
}

impl Strategy for KubeDefault {
    fn label(&self) -> &str {
        "kube-default"
    }

    fn score(&mut self, _cycle: &Cycle, pod: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64> {
        self.profile.scores(&incoming(pod), &candidates(nodes))
    }
}
