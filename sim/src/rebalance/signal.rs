//! What the upstream descheduler's one Prometheus query returns, per node, as a 0..1 value:
//!
//! - [`WaterlineSignal`]: `waterline:node_predicted_load`. The collector's state (core's
//!   `Snapshot` and ledger, fed by its polls and its pod watch, the `waterline` strategy's
//!   own code) gives per node and policy metric observed + ledger
//!   (collector/src/predicted_load.rs `predicted_loads`: `engine::evaluate` for an empty pod,
//!   stale metrics left out); deploy/prometheus/rebalance.yml then keeps the `*_avg_5m`
//!   metrics, takes per resource the lowest of the last 6 evaluations (30 s apart) only once
//!   all 6 exist, clamps to [0, 1], and publishes per node the busiest resource only while
//!   the node has every resource the fleet reports. No evaluation happens while Prometheus
//!   is down, so after an outage a node is absent until 6 new evaluations exist.
//! - [`RawUsage`]: the descheduler pointed at raw node usage — the larger of the node's cpu
//!   and memory 5 m averages (the node-exporter rules of deploy/prometheus/rules.yml), no
//!   ledger, no hysteresis, no staleness policy beyond Prometheus' 5 m lookback.

use std::collections::{HashMap, VecDeque};

use waterline_core::engine;
use waterline_core::policy::{Policy, Resource as PolicyResource};
use waterline_core::{Millis, Sample, UnixMillis};

use crate::model::{SimPod, SimTime, instant};
use crate::strategy::{MetricKind, MetricNeed, NodeView, Resource, Strategy, Waterline};

/// deploy/prometheus/rebalance.yml: the group's `interval: 30s` and the hysteresis' N = 6
/// evaluations in `[2m45s]`.
pub const RULE_INTERVAL: Millis = Millis(30_000);
pub const HYSTERESIS_EVALUATIONS: usize = 6;
pub const HYSTERESIS_RANGE: Millis = Millis(165_000);
/// Prometheus' instant-query lookback.
const LOOKBACK: Millis = Millis(300_000);

/// One of the descheduler's signals.
pub enum Signal {
    Waterline(Box<WaterlineSignal>),
    Raw(RawUsage),
}

impl Signal {
    pub fn waterline(policy: Policy) -> Signal {
        Signal::Waterline(Box::new(WaterlineSignal::new(policy)))
    }

    pub fn raw() -> Signal {
        Signal::Raw(RawUsage::default())
    }

    pub fn metrics(&self) -> Vec<MetricNeed> {
        match self {
            Signal::Waterline(w) => w.collector.metrics(),
            Signal::Raw(_) => RawUsage::needs(),
        }
    }

    pub fn rule_interval(&self) -> Option<Millis> {
        match self {
            Signal::Waterline(_) => Some(RULE_INTERVAL),
            Signal::Raw(_) => None,
        }
    }

    pub fn on_metrics(&mut self, now: UnixMillis, nodes: &[NodeView<'_>]) {
        match self {
            Signal::Waterline(w) => w.collector.on_metrics(now, nodes),
            Signal::Raw(r) => r.on_metrics(nodes),
        }
    }

    pub fn on_bound(&mut self, now: UnixMillis, pod: &SimPod, node: &str, bound_at: UnixMillis) {
        if let Signal::Waterline(w) = self {
            w.collector.on_bound(now, pod, node, bound_at);
        }
    }

    /// The pod watch delivered a deletion (an eviction included).
    pub fn depart(&mut self, now: UnixMillis, pod: &SimPod, node: &str) {
        if let Signal::Waterline(w) = self {
            w.depart(now, pod, node);
        }
    }

    pub fn on_rule(&mut self, t: SimTime, names: &[&str], up: bool) {
        if let Signal::Waterline(w) = self {
            w.evaluate(t, names, up);
        }
    }

    /// Node `i`'s value as the query at `now` returns it; `None`: no sample.
    pub fn value(&self, i: usize, now: SimTime) -> Option<f64> {
        match self {
            Signal::Waterline(w) => w.published.get(i).copied().flatten(),
            Signal::Raw(r) => r.value(i, now),
        }
    }
}

/// `waterline:node_predicted_load` from the collector's own state.
pub struct WaterlineSignal {
    policy: Policy,
    /// The collector's snapshot and ledger, fed as the scorer and collector feed core.
    collector: Waterline,
    /// Per node, per resource (cpu, memory): `:now` evaluations `(time, value)` within the
    /// hysteresis range; a missing value is not stored (the series was absent).
    history: HashMap<String, [VecDeque<(SimTime, f64)>; 2]>,
    /// The last evaluation's `waterline:node_predicted_load`, by node index.
    published: Vec<Option<f64>>,
}

impl WaterlineSignal {
    pub fn new(policy: Policy) -> Self {
        let collector = Waterline::new("collector", policy.clone()).expect("a simulable policy");
        WaterlineSignal { policy, collector, history: HashMap::new(), published: Vec::new() }
    }

    /// **The departure hook**: the collector's pod watch saw `pod` deleted from `node`; the
    /// collector's ledger turns the pod's entry into a departure whose credit takes its share
    /// off the averages at once (docs/design.md#departures; `Waterline::on_deleted`).
    pub fn depart(&mut self, now: UnixMillis, pod: &SimPod, node: &str) {
        self.collector.on_deleted(now, pod, node);
    }

    /// `engine::predicted_loads` (what the collector publishes), per node: the fresh
    /// `*_avg_5m` metrics, the highest per resource (the rule's `max by (node, resource)`).
    fn predicted_now(&self, now: UnixMillis) -> HashMap<String, [Option<f64>; 2]> {
        let mut out: HashMap<String, [Option<f64>; 2]> = HashMap::new();
        for load in engine::predicted_loads(&self.policy, self.collector.snapshot(), now) {
            let spec = &self.policy.metrics[load.metric];
            let by_resource = out.entry(load.node.to_owned()).or_default();
            if !spec.name.ends_with("_avg_5m") {
                continue;
            }
            let slot = match spec.resource {
                PolicyResource::Cpu => 0,
                PolicyResource::Memory => 1,
                PolicyResource::Other => continue,
            };
            let v = load.fraction;
            by_resource[slot] = Some(by_resource[slot].map_or(v, |o: f64| o.max(v)));
        }
        out
    }

    /// One evaluation of rebalance.yml's group at `t` (nothing when Prometheus is down).
    fn evaluate(&mut self, t: SimTime, names: &[&str], up: bool) {
        if !up {
            self.published = vec![None; names.len()];
            return;
        }
        let now = self.predicted_now(instant(t));
        let mut fleet = [false; 2];
        let mut per_node: Vec<[Option<f64>; 2]> = Vec::with_capacity(names.len());
        for name in names {
            let current = now.get(*name).copied().unwrap_or([None, None]);
            let history = self.history.entry((*name).to_owned()).or_default();
            let mut damped = [None, None];
            for r in 0..2 {
                let h = &mut history[r];
                while h.front().is_some_and(|&(at, _)| at <= t - HYSTERESIS_RANGE.0) {
                    h.pop_front();
                }
                if let Some(v) = current[r] {
                    fleet[r] = true;
                    h.push_back((t, v));
                    // `count_over_time(:now[2m45s]) >= 6`, the current evaluation included
                    if h.len() >= HYSTERESIS_EVALUATIONS {
                        let min = h.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
                        damped[r] = Some(min.clamp(0.0, 1.0));
                    }
                }
            }
            per_node.push(damped);
        }
        self.published = per_node
            .into_iter()
            .map(|d| {
                // only with every resource the fleet reports
                let mut value: Option<f64> = None;
                for r in 0..2 {
                    if fleet[r] {
                        value = Some(value.unwrap_or(0.0).max(d[r]?));
                    }
                }
                value
            })
            .collect();
    }
}

/// The 5 m averages of node usage, as the raw query reads them.
#[derive(Default)]
pub struct RawUsage {
    /// Per node index: the latest cpu and memory samples (percent).
    latest: Vec<[Option<Sample>; 2]>,
}

impl RawUsage {
    fn needs() -> Vec<MetricNeed> {
        let five = Millis::from_mins(5);
        let need = |name: &str, resource| MetricNeed {
            name: name.into(),
            resource,
            kind: MetricKind::Avg { window: five },
            // the descheduler's query at its cycle reads the rule's latest output; polling
            // it every rule interval gives the same value
            poll: Millis::from_secs(30),
        };
        vec![
            need("node_cpu_usage_avg_5m", Resource::Cpu),
            need("node_mem_usage_avg_5m", Resource::Memory),
        ]
    }

    fn on_metrics(&mut self, nodes: &[NodeView<'_>]) {
        if self.latest.len() < nodes.len() {
            self.latest.resize(nodes.len(), [None, None]);
        }
        for (i, node) in nodes.iter().enumerate() {
            for r in 0..2 {
                if let Some(Some(s)) = node.metrics.get(r) {
                    self.latest[i][r] = Some(*s);
                }
            }
        }
    }

    fn value(&self, i: usize, now: SimTime) -> Option<f64> {
        let fresh = |s: &Option<Sample>| {
            s.filter(|s| instant(now).since(s.at) <= LOOKBACK).map(|s| s.value)
        };
        let [cpu, memory] = self.latest.get(i)?;
        Some((fresh(cpu)?.max(fresh(memory)?) / 100.0).clamp(0.0, 1.0))
    }
}
