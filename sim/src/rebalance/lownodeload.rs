//! Koordinator's LowNodeLoad (koordinator-sh/koordinator
//! pkg/descheduler/framework/plugins/loadaware/low_node_load.go, utilization_util.go) with
//! the defaults of pkg/descheduler/apis/config/v1alpha2/defaults.go and the thresholds and
//! interval of its Helm chart (koordinator-sh/charts versions/v1.8.0/templates/
//! koord-descheduler-config.yaml):
//!
//! - **Usage**: each node's NodeMetric (koordlet: the mean of the last 300 s, written every
//!   60 s). A NodeMetric older than `nodeMetricExpirationSeconds` (default 180) leaves the
//!   node out of the cycle (`getNodeUsage`): not classified, never a source or destination.
//! - **Classification** (`classifyNodes`, `isNodeUnderutilized`, `isNodeOverutilized`): low ⇔
//!   every resource at or under `lowThresholds` (chart: cpu 45, memory 55), high ⇔ any
//!   resource above `highThresholds` (chart: cpu 75, memory 80).
//! - **Balance** (`Balance`): nothing without a low node (the low nodes' detectors reset),
//!   when every node is low, or without a high node. **Anomaly condition**
//!   (`filterRealAbnormalNodes`, default `consecutiveAbnormalities: 5`): each cycle a high
//!   node is marked abnormal; it is a source only once its count exceeds 5, i.e. on its
//!   6th consecutive high cycle. After the evictions every high node is marked normal
//!   (`tryMarkNodesAsNormal`), so its count starts again.
//! - **Eviction** (`evictPodsFromSourceNodes`): sources by weighted usage (weights cpu 1,
//!   memory 1) descending; on each, pods by their usage of the overused resources,
//!   descending (`sortPodsOnOneOverloadedNode`); a pod is evicted only if it fits a low node
//!   by requests without taking that node above its high thresholds
//!   (`podFitsAnyNodeWithThreshold`, `nodeFit` default true); after each eviction the pod's
//!   usage leaves the node's and the low nodes' available room, and the node stops when it
//!   is no longer above its high thresholds or the room is gone (`continueEvictionCond`).
//!   The MigrationController evicts at most `maxMigratingPerNode` (default 2) per node while
//!   their migrations are in flight; here a migration ends when the recreated pod is bound,
//!   within seconds, so the limit is taken per cycle.
//! - **Loop**: `deschedulingInterval: 10s` (the chart).
//!
//! Simplifications: a pod's usage from the NodeMetric's `podsMetric` is taken as its true
//! usage at the cycle (koordlet reports it averaged the same way); the chart's
//! `ReservationFirst` migration jobs are modelled as plain evictions (the recreated pod is
//! scheduled after the eviction, not into a reservation before it); the per-workload
//! migration limiter (5 m) is not modelled.

use std::collections::HashMap;

use waterline_core::Millis;

use super::{ClusterState, CycleOutcome, Rebalancer};
use waterline_core::Sample;

use crate::model::{Resources, SimTime};
use crate::strategy::{Koordlet, MetricNeed};

/// The args the model uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Args {
    /// Percent, cpu and memory.
    pub low: [f64; 2],
    pub high: [f64; 2],
    pub consecutive_abnormalities: u32,
    pub node_metric_expiration: Millis,
    pub max_migrating_per_node: usize,
    pub interval: Millis,
}

impl Args {
    /// The chart's thresholds and interval, the plugin's and controller's defaults.
    pub const CHART: Args = Args {
        low: [45.0, 55.0],
        high: [75.0, 80.0],
        consecutive_abnormalities: 5,
        node_metric_expiration: Millis(180_000),
        max_migrating_per_node: 2,
        interval: Millis(10_000),
    };
}

pub struct LowNodeLoad {
    args: Args,
    koordlet: Koordlet,
    /// Per node index: the latest NodeMetric (cpu %, memory %, written at).
    node_metrics: Vec<Option<([f64; 2], SimTime)>>,
    /// Consecutive abnormal cycles per node name (the anomaly detectors).
    abnormal: HashMap<String, u32>,
}

impl LowNodeLoad {
    pub fn new(args: Args) -> Self {
        LowNodeLoad {
            args,
            koordlet: Koordlet::default(),
            node_metrics: Vec::new(),
            abnormal: HashMap::new(),
        }
    }
}

impl Rebalancer for LowNodeLoad {
    fn metrics(&self) -> Vec<MetricNeed> {
        self.koordlet.node_metric_needs("nodemetric")
    }

    fn interval(&self) -> Millis {
        self.args.interval
    }

    fn on_node_report(&mut self, i: usize, t: SimTime, metrics: &[Option<Sample>]) {
        if self.node_metrics.len() <= i {
            self.node_metrics.resize(i + 1, None);
        }
        if let (Some(Some(cpu)), Some(Some(memory))) = (metrics.first(), metrics.get(1)) {
            self.node_metrics[i] = Some(([cpu.value, memory.value], t));
        }
    }

    fn cycle(&mut self, cluster: &ClusterState<'_>) -> CycleOutcome {
        let a = self.args;
        let now = cluster.now;
        // getNodeUsage: nodes with a fresh NodeMetric only
        let usage: Vec<Option<[f64; 2]>> = (0..cluster.nodes.len())
            .map(|i| {
                self.node_metrics
                    .get(i)
                    .copied()
                    .flatten()
                    .filter(|(_, at)| now - at <= a.node_metric_expiration.0)
                    .map(|(u, _)| u)
            })
            .collect();
        let considered = usage.iter().filter(|u| u.is_some()).count();
        let low: Vec<usize> = (0..usage.len())
            .filter(|&i| usage[i].is_some_and(|u| u[0] <= a.low[0] && u[1] <= a.low[1]))
            .collect();
        let high: Vec<usize> = (0..usage.len())
            .filter(|&i| !low.contains(&i))
            .filter(|&i| usage[i].is_some_and(|u| u[0] > a.high[0] || u[1] > a.high[1]))
            .collect();
        if low.is_empty() {
            return CycleOutcome::default();
        }
        for &i in &low {
            self.abnormal.remove(cluster.nodes[i].name);
        }
        if low.len() == considered || high.is_empty() {
            return CycleOutcome::default();
        }
        // filterRealAbnormalNodes: marked abnormal, a source once the count exceeds the limit
        let mut sources: Vec<usize> = high
            .iter()
            .copied()
            .filter(|&i| {
                let count = self.abnormal.entry(cluster.nodes[i].name.to_owned()).or_insert(0);
                *count += 1;
                *count > a.consecutive_abnormalities
            })
            .collect();
        if sources.is_empty() {
            return CycleOutcome::default();
        }
        let percent = |amount: f64, i: usize, r: usize| {
            let alloc = cluster.nodes[i].allocatable;
            let total = if r == 0 { alloc.cpu_millis } else { alloc.memory_bytes } as f64;
            amount * 100.0 / total.max(1.0)
        };
        // the low nodes' room under their high thresholds, in each node's own percent
        let mut node_usage: Vec<[f64; 2]> = usage.iter().map(|u| u.unwrap_or([0.0; 2])).collect();
        let mut room: [f64; 2] = [0.0; 2];
        for &i in &low {
            for r in 0..2 {
                let alloc = cluster.nodes[i].allocatable;
                let total = if r == 0 { alloc.cpu_millis } else { alloc.memory_bytes } as f64;
                room[r] += (a.high[r] - node_usage[i][r]).max(0.0) / 100.0 * total;
            }
        }
        let mut requested: Vec<Resources> = cluster.nodes.iter().map(|n| n.requested).collect();
        sources.sort_by(|&x, &y| {
            let w = |i: usize| node_usage[i][0] + node_usage[i][1];
            w(y).total_cmp(&w(x)).then(x.cmp(&y))
        });
        let mut evict = Vec::new();
        for i in sources {
            let node = &cluster.nodes[i];
            let over = |u: [f64; 2]| [u[0] > a.high[0], u[1] > a.high[1]];
            let overused = over(node_usage[i]);
            let mut pods: Vec<&super::BoundPod<'_>> = node
                .pods
                .iter()
                .filter(|b| {
                    b.pod.owner_kind != "DaemonSet"
                        && b.pod.controller.is_some()
                        && !node.pods.is_empty()
                })
                .collect();
            let weight = |b: &super::BoundPod<'_>| {
                (if overused[0] { percent(b.usage.0, i, 0) } else { 0.0 })
                    + (if overused[1] { percent(b.usage.1, i, 1) } else { 0.0 })
            };
            pods.sort_by(|x, y| weight(y).total_cmp(&weight(x)).then(x.index.cmp(&y.index)));
            let mut here = 0;
            for b in pods {
                let still_over = over(node_usage[i]);
                if !(still_over[0] || still_over[1]) || room.iter().any(|&r| r <= 0.0) {
                    break;
                }
                if here >= a.max_migrating_per_node {
                    break;
                }
                // podFitsAnyNodeWithThreshold: a low node that fits it by requests and stays
                // under its high thresholds with the pod's usage added
                let target = low.iter().copied().find(|&j| {
                    let n = &cluster.nodes[j];
                    requested[j].plus(b.pod.requests).fits_in(n.allocatable)
                        && node_usage[j][0] + percent(b.usage.0, j, 0) <= a.high[0]
                        && node_usage[j][1] + percent(b.usage.1, j, 1) <= a.high[1]
                });
                let Some(j) = target else { continue };
                requested[j] = requested[j].plus(b.pod.requests);
                node_usage[j][0] += percent(b.usage.0, j, 0);
                node_usage[j][1] += percent(b.usage.1, j, 1);
                node_usage[i][0] -= percent(b.usage.0, i, 0);
                node_usage[i][1] -= percent(b.usage.1, i, 1);
                room[0] -= b.usage.0;
                room[1] -= b.usage.1;
                evict.push(b.index);
                here += 1;
            }
        }
        // tryMarkNodesAsNormal
        for &i in &high {
            self.abnormal.insert(cluster.nodes[i].name.to_owned(), 0);
        }
        CycleOutcome { evict, failed: false }
    }
}
