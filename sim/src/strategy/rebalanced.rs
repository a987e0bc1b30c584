//! A scheduler strategy with a descheduler beside it: the comparisons of SIMULATION.md's
//! rebalancing scenarios. Context columns, never peers (the target's peers place pods; these
//! also move them).

use waterline_core::{Policy, UnixMillis};

use super::{Cycle, Guesses, MetricNeed, NodeView, Path, Strategy, StrategyError};
use crate::model::SimPod;
use crate::rebalance::Rebalancer;
use crate::rebalance::descheduler::{Deployed, LowNodeUtilization};
use crate::rebalance::lownodeload::{self, LowNodeLoad};
use crate::rebalance::signal::Signal;

/// The combinations [`by_name`] knows, with what each is.
pub const NAMES: &[(&str, &str)] = &[
    (
        "waterline+descheduler",
        "waterline placing; the upstream descheduler (deploy/descheduler/) on \
         waterline:node_predicted_load (observed + ledger, hysteresis, absent when stale)",
    ),
    (
        "waterline+descheduler-raw",
        "waterline placing; the same descheduler on raw node usage (the 5 m averages, no \
         ledger, no hysteresis)",
    ),
    (
        "kube-default+descheduler",
        "kube-scheduler's default profile placing; the descheduler on waterline's signal",
    ),
    (
        "koord-scheduler+lownodeload",
        "koord-scheduler (its chart) placing; Koordinator's LowNodeLoad (its chart and \
         defaults) on koordlet's NodeMetric",
    ),
];

#[derive(Clone, Copy)]
enum Actor {
    Descheduler { waterline_signal: bool },
    LowNodeLoad,
}

struct Rebalanced {
    label: String,
    inner: Box<dyn Strategy>,
}

/// The combination called `name`, if it is one.
pub fn by_name(name: &str) -> Option<Result<Box<dyn Strategy>, StrategyError>> {
    let inner = match name {
        "waterline+descheduler" | "waterline+descheduler-raw" => "waterline",
        "kube-default+descheduler" => "kube-default",
        "koord-scheduler+lownodeload" => "koord-scheduler",
        _ => return None,
    };
    Some(
        super::by_name(inner).map(|inner| {
            Box::new(Rebalanced { label: name.to_owned(), inner }) as Box<dyn Strategy>
        }),
    )
}

impl Strategy for Rebalanced {
    fn label(&self) -> &str {
        &self.label
    }
    fn path(&self, scenario: Path) -> Path {
        self.inner.path(scenario)
    }
    fn metrics(&self) -> Vec<MetricNeed> {
        self.inner.metrics()
    }
    fn filter(
        &mut self,
        cycle: &Cycle,
        pod: &SimPod,
        nodes: &[NodeView<'_>],
    ) -> Vec<Option<String>> {
        self.inner.filter(cycle, pod, nodes)
    }
    fn score(&mut self, cycle: &Cycle, pod: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64> {
        self.inner.score(cycle, pod, nodes)
    }
    fn on_metrics(&mut self, now: UnixMillis, nodes: &[NodeView<'_>]) {
        self.inner.on_metrics(now, nodes)
    }
    fn on_reserve(&mut self, now: UnixMillis, pod: &SimPod, node: &str) {
        self.inner.on_reserve(now, pod, node)
    }
    fn on_bound(&mut self, now: UnixMillis, pod: &SimPod, node: &str, bound_at: UnixMillis) {
        self.inner.on_bound(now, pod, node, bound_at)
    }
    fn on_deleted(&mut self, now: UnixMillis, pod: &SimPod, node: &str) {
        self.inner.on_deleted(now, pod, node)
    }
    fn guesses(&self) -> Option<Guesses> {
        self.inner.guesses()
    }
    fn pod_series(&self) -> Option<super::PodSeriesNeed> {
        self.inner.pod_series()
    }
    fn on_pod_usage(&mut self, now: UnixMillis, pods: &[super::PodSummary]) {
        self.inner.on_pod_usage(now, pods)
    }
    fn pricing(&self) -> Option<super::Pricing> {
        self.inner.pricing()
    }
}

/// The rebalancing actor of the combination labelled `label` (a fresh one per run, seeded),
/// `None` for every other strategy.
pub fn rebalancer(label: &str, seed: u64) -> Option<Box<dyn Rebalancer>> {
    let actor = match label {
        "waterline+descheduler" | "kube-default+descheduler" => {
            Actor::Descheduler { waterline_signal: true }
        }
        "waterline+descheduler-raw" => Actor::Descheduler { waterline_signal: false },
        "koord-scheduler+lownodeload" => Actor::LowNodeLoad,
        _ => return None,
    };
    Some(match actor {
        Actor::Descheduler { waterline_signal } => {
            let signal =
                if waterline_signal { Signal::waterline(Policy::default()) } else { Signal::raw() };
            Box::new(LowNodeUtilization::new(Deployed::shipped(), signal, seed))
        }
        Actor::LowNodeLoad => Box::new(LowNodeLoad::new(lownodeload::Args::CHART)),
    })
}
