//! The rebalancing actor: a descheduler that evicts running pods from hot nodes, whose
//! controller recreates each as a new pending pod that the run's strategy places again.
//!
//! Two models, each written from its upstream source (cited at each rule):
//!
//! - [`descheduler`]: kubernetes-sigs/descheduler's LowNodeUtilization in Prometheus mode,
//!   configured by deploy/descheduler/ (parsed, not copied: [`descheduler::Deployed`]), reading
//!   either waterline's `waterline:node_predicted_load` ([`signal::WaterlineSignal`]: the
//!   collector's observed + ledger through deploy/prometheus/rebalance.yml's hysteresis) or a
//!   raw node-usage query ([`signal::RawUsage`]: the 5 m averages, no ledger, no hysteresis);
//! - [`lownodeload`]: Koordinator's LowNodeLoad on koordlet's NodeMetric, with its defaults
//!   and its Helm chart's thresholds and interval.
//!
//! What the actor may know is what the real one does: the signal it reads, the pods bound to
//! each node (the API server's), their controllers, ages, requests and QoS. Koordinator also
//! reads each pod's usage from the NodeMetric (its `podsMetric`), approximated here by the
//! pod's true usage at the cycle (see [`lownodeload`]).

pub mod descheduler;
pub mod lownodeload;
pub mod signal;

use std::collections::HashMap;

use waterline_core::{Millis, Sample, UnixMillis};

use crate::model::{Qos, Resources, SimPod, SimTime};
use crate::strategy::{MetricNeed, NodeView};

/// A pod bound to a node, as the descheduler lists it.
#[derive(Clone, Debug)]
pub struct BoundPod<'a> {
    /// The simulator's pod index (what [`Rebalancer::cycle`] returns to evict).
    pub index: usize,
    pub pod: &'a SimPod,
    /// Its creation (arrival) time: DefaultEvictor's `minPodAge` counts from it.
    pub created: SimTime,
    /// Its usage now (cpu millicores, memory bytes): only LowNodeLoad reads it (podsMetric).
    pub usage: (f64, f64),
}

/// One node as the descheduler sees it.
#[derive(Clone, Debug)]
pub struct NodeState<'a> {
    pub name: &'a str,
    pub allocatable: Resources,
    /// Requests of every pod bound or assumed there (the scheduler's cache; nodeFit's view).
    pub requested: Resources,
    pub pods: Vec<BoundPod<'a>>,
}

/// The cluster at a descheduling cycle.
pub struct ClusterState<'a> {
    pub now: SimTime,
    pub nodes: Vec<NodeState<'a>>,
    /// Pods per controller (`SimPod::controller`), placed or pending: DefaultEvictor's
    /// `minReplicas` counts them.
    pub replicas: HashMap<String, usize>,
    /// Whether Prometheus answers (the scenario's `pipeline.outages`).
    pub prometheus_up: bool,
}

impl ClusterState<'_> {
    /// Whether `pod` fits by requests on any node but `from` (DefaultEvictor's `nodeFit`,
    /// pkg/framework/plugins/defaultevictor/defaultevictor.go: `PodFitsAnyOtherNode`; the
    /// simulated nodes have no taints, selectors or affinity, so requests decide).
    pub fn fits_elsewhere(&self, pod: &SimPod, from: usize) -> bool {
        self.nodes
            .iter()
            .enumerate()
            .any(|(i, n)| i != from && n.requested.plus(pod.requests).fits_in(n.allocatable))
    }
}

/// The order kube's eviction helpers sort candidates by when priorities are equal (every
/// simulated pod has priority 0): BestEffort first, then Burstable, then Guaranteed
/// (descheduler pkg/descheduler/pod/pods.go `SortPodsBasedOnPriorityLowToHigh`).
pub fn qos_rank(qos: Qos) -> u8 {
    match qos {
        Qos::BestEffort => 0,
        Qos::Burstable => 1,
        Qos::Guaranteed => 2,
    }
}

/// What one cycle did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CycleOutcome {
    /// Pods to evict, in eviction order.
    pub evict: Vec<usize>,
    /// The cycle could not read its signal (the query failed, or a node had no value).
    pub failed: bool,
}

/// A descheduler model. One instance lives for one run.
pub trait Rebalancer {
    /// The metrics its signal reads from the pipeline (appended after the strategy's).
    fn metrics(&self) -> Vec<MetricNeed> {
        Vec::new()
    }

    /// Evaluation interval of its recording rules, if its signal has any.
    fn rule_interval(&self) -> Option<Millis> {
        None
    }

    /// The descheduling interval.
    fn interval(&self) -> Millis;

    /// A poll or report of its metrics landed (`nodes` carries only its own metrics).
    fn on_metrics(&mut self, now: UnixMillis, nodes: &[NodeView<'_>]) {
        let _ = (now, nodes);
    }

    /// Node `i`'s koordlet wrote its NodeMetric at `t`; `metrics`: this actor's samples.
    fn on_node_report(&mut self, i: usize, t: SimTime, metrics: &[Option<Sample>]) {
        let _ = (i, t, metrics);
    }

    /// The pod watch delivered `pod` bound to `node` (the collector's ledger).
    fn on_bound(&mut self, now: UnixMillis, pod: &SimPod, node: &str, bound_at: UnixMillis) {
        let _ = (now, pod, node, bound_at);
    }

    /// The pod watch delivered the deletion of `pod` from `node`.
    fn on_deleted(&mut self, now: UnixMillis, pod: &SimPod, node: &str) {
        let _ = (now, pod, node);
    }

    /// A rule evaluation at `t` (only when [`Rebalancer::rule_interval`] is set); `up`:
    /// Prometheus is up and evaluates.
    fn on_rule(&mut self, t: SimTime, names: &[&str], up: bool) {
        let _ = (t, names, up);
    }

    /// One descheduling cycle.
    fn cycle(&mut self, cluster: &ClusterState<'_>) -> CycleOutcome;
}

/// The rebalancing measures of a run (summary.json's `rebalance`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RebalanceSummary {
    /// Pods evicted.
    pub evictions: usize,
    /// Evictions while Prometheus was down or koordlet wrote no NodeMetric (the scenario's
    /// outages and gaps).
    pub evictions_during_outage: usize,
    /// Recreated pods placed onto a node whose true utilisation was above the threshold.
    pub replaced_onto_hot: usize,
    /// Recreated pods placed back onto the node they were evicted from.
    pub replaced_onto_same_node: usize,
    /// Descheduling cycles run, and those that could not read their signal.
    pub cycles: usize,
    pub cycles_failed: usize,
    /// The scenario's `loadStep` (seconds), when it has one.
    #[serde(default)]
    pub load_step_s: Option<f64>,
    /// Seconds from the scenario's `loadStep` until the hottest node is at or under
    /// target + 10 pp for good (to the end of the run); `None`: still above at the end, or
    /// no load step.
    pub back_under_water_s: Option<f64>,
    /// The same for the threshold.
    pub back_under_threshold_s: Option<f64>,
}

#[cfg(test)]
mod tests;
