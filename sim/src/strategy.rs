//! The seam between the simulated scheduler and a placement strategy.
//!
//! The simulator runs kube-scheduler's cycle itself — one pod at a time, request fit first
//! — and asks a [`Strategy`] only what a scheduler plugin or extender would answer: which of
//! the request-feasible nodes it rejects, and a score per remaining node (higher is better;
//! the simulator picks the best, ties broken by a seeded choice). Everything a strategy may
//! know arrives through [`NodeView`] and the event hooks; it never sees true usage.
//!
//! What a strategy may know depends on the scheduling path ([`Path`]): on the plugin path it
//! is told of its own decisions at once (Reserve) and [`NodeView::pods`] lists assumed pods
//! from the moment of the decision; on the extender path it learns placements only from the
//! pod watch, `watchLag` after the bind, and `pods` lists only what the watch delivered.

mod crane;
mod koordinator;
mod kube_default;
pub mod profile;
pub mod rebalanced;
mod trimaran;
pub mod variants;
mod waterline;

pub use crane::Crane;
pub use koordinator::{Koordinator, Koordlet};
pub use kube_default::KubeDefault;
pub use profile::{Profiled, SchedulerProfile};
pub use trimaran::{Provider, TargetLoadPacking};
pub use waterline::{CacheCounts, ExtenderFlags, Waterline};

use std::sync::Arc;

use waterline_core::learn::Series;
use waterline_core::{Millis, Policy, Sample, UnixMillis};

use crate::model::{Resources, SimPod};

/// How the strategy is wired to the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Path {
    /// A scheduling-framework plugin: Reserve at the decision, assumed pods visible at once.
    Plugin,
    /// An HTTP extender: no Reserve; placements learnt from the pod watch after a lag (and
    /// guessed meanwhile, by waterline's adapter, at prioritize: strategy/waterline.rs).
    Extender,
}

/// Which node resource a metric measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    Cpu,
    Memory,
}

/// What a metric computes from the scraped usage, as Prometheus would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    /// A recording rule: cpu `rate(...[window])` of the busy-seconds counter over all
    /// modes, memory `avg_over_time(...[window])`, in percent of the node's capacity.
    Avg { window: Millis },
    /// A recording rule `max_over_time((Avg{window})[over:step])` (a subquery at the
    /// pipeline's step).
    MaxOfAvg { window: Millis, over: Millis },
    /// A recording rule `avg_over_time(A[over:step]) + k · stddev_over_time(A[over:step])`
    /// with `A` the `window` average and `k = sigmas_x10 / 10` (a sim-only variant's
    /// headroom metric; the subquery as for [`MetricKind::MaxOfAvg`]).
    MeanPlusSigma { window: Millis, over: Millis, sigmas_x10: i64 },
    /// koordlet's NodeMetric, no Prometheus (pipeline/agent.rs): the node's usage sampled
    /// every `collect`, the mean over the last `window` reported every `report` on each
    /// node's own clock. Not polled: a report reaches the strategy when it is written.
    Koordlet { collect: Millis, report: Millis, window: Millis },
    /// metrics-server's NodeMetrics, no Prometheus (pipeline/agent.rs): kubelets scraped
    /// every `resolution`; cpu the rate between the last two scrapes, memory the last one.
    MetricsServer { resolution: Millis },
}

impl MetricKind {
    /// Whether Prometheus computes it (and its delay and outages apply).
    pub fn from_prometheus(self) -> bool {
        matches!(
            self,
            MetricKind::Avg { .. } | MetricKind::MaxOfAvg { .. } | MetricKind::MeanPlusSigma { .. }
        )
    }
}

/// One metric a strategy reads: the pipeline records it and polls it every `poll`.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricNeed {
    pub name: String,
    pub resource: Resource,
    pub kind: MetricKind,
    /// How often the strategy's collector queries it.
    pub poll: Millis,
}

/// A pod on a node as the strategy may know it.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacedPod {
    pub pod: Arc<SimPod>,
    /// When the scheduler decided (the Reserve time).
    pub assigned_at: UnixMillis,
    /// When the binding was written (the PodScheduled condition time); `None` while only
    /// assumed.
    pub bound_at: Option<UnixMillis>,
}

/// Everything a strategy may read about one node in a cycle.
#[derive(Clone, Copy, Debug)]
pub struct NodeView<'a> {
    pub name: &'a str,
    pub allocatable: Resources,
    /// Sum of the requests of the pods in the scheduler's cache (assumed or bound):
    /// kube-scheduler's own `NodeInfo.Requested`, current on every path.
    pub requested: Resources,
    /// The same sum with kube-scheduler's defaults for unset requests (100m cpu, 200 MiB
    /// memory per pod): `NodeInfo.NonZeroRequested`, what LeastAllocated scores.
    pub non_zero_requested: Resources,
    /// Pods in the scheduler's cache on this node owned by the incoming pod's controller
    /// ([`SimPod::controller`]): what PodTopologySpread's default constraints count. 0 for
    /// a pod without a controller and outside a scheduling cycle.
    pub controller_pods: i64,
    /// The latest polled sample of each of the strategy's metrics, in the order of
    /// [`Strategy::metrics`]; `None` until the first poll that had a value. A sample's `at`
    /// is the poll time, as an instant query's answer carries.
    pub metrics: &'a [Option<Sample>],
    /// Pods on the node as the strategy knows them (see the module docs for the path).
    pub pods: &'a [PlacedPod],
}

/// The per-pod usage series a strategy learns from (waterline's `estimator.learn`): the
/// pipeline records every running pod's series (pipeline/pods.rs) and, every `refresh`,
/// answers each pod's `quantile_over_time(quantile, …[window])` and `count_over_time`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PodSeriesNeed {
    pub window: Millis,
    pub quantile: f64,
    pub refresh: Millis,
}

/// One running pod as the collector's refresh summarises it: core's [`Series`] per resource
/// (`None`: its series had no sample in the window).
#[derive(Clone, Debug, PartialEq)]
pub struct PodSummary {
    pub pod: Arc<SimPod>,
    pub cpu: Option<Series>,
    pub memory: Option<Series>,
}

/// How a strategy's estimator priced the pods bound from time 0 (waterline's, by the rule
/// of core's `estimate::price`), counted at the pod watch's entry: the one the ledger keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pricing {
    /// At least one resource priced by the pod's workload's learned usage.
    pub learned: u64,
    /// Priced by the policy's factors alone (no evidence for its workload, or learning off).
    pub factor: u64,
    /// Workloads in the learned table after the last refresh.
    pub workloads: usize,
}

/// What became of the provisional guesses, as the ledger saw them (the extender
/// path's provisional Reserves, [`Strategy::guesses`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Guesses {
    /// Provisional Reserves recorded at prioritize.
    pub made: u64,
    /// The watch saw the pod bound on the guessed node.
    pub confirmed: u64,
    /// The watch saw it bound on another node: the entry moved there.
    pub moved: u64,
    /// Dropped at `expires_at` before any watch.
    pub expired: u64,
}

/// The cycle's context.
#[derive(Clone, Copy, Debug)]
pub struct Cycle {
    pub now: UnixMillis,
    pub path: Path,
}

/// A placement strategy: the Filter and Score of a scheduler plugin or extender, plus the
/// events it would observe.
pub trait Strategy {
    /// Label in tables, file names and summary.json.
    fn label(&self) -> &str;

    /// The path it is wired through when the scenario runs on `scenario` (waterline's
    /// install path). A peer that ships only as a plugin of its own scheduler runs on the
    /// plugin path whatever the scenario says: the scenario's path is waterline's.
    fn path(&self, scenario: Path) -> Path {
        scenario
    }

    /// The metrics its pipeline must produce (empty: request-based only).
    fn metrics(&self) -> Vec<MetricNeed> {
        Vec::new()
    }

    /// Per node in `nodes` (all fit the pod's requests): `None` to keep it, `Some(reason)`
    /// to reject it. The default keeps every node.
    fn filter(
        &mut self,
        cycle: &Cycle,
        pod: &SimPod,
        nodes: &[NodeView<'_>],
    ) -> Vec<Option<String>> {
        let _ = (cycle, pod);
        vec![None; nodes.len()]
    }

    /// A score per node in `nodes`, higher is better, in the scale the scheduler adds up
    /// (an extender's 0..10 answer times its weight and 10, a plugin's 0..100 times weight).
    fn score(&mut self, cycle: &Cycle, pod: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64>;

    /// A poll of some metric landed: `nodes` carries the new samples.
    fn on_metrics(&mut self, now: UnixMillis, nodes: &[NodeView<'_>]) {
        let _ = (now, nodes);
    }

    /// Plugin path only: the scheduler decided `pod` goes to `node` (Reserve).
    fn on_reserve(&mut self, now: UnixMillis, pod: &SimPod, node: &str) {
        let _ = (now, pod, node);
    }

    /// The pod watch delivered `pod` bound to `node` at `bound_at` (on every path).
    fn on_bound(&mut self, now: UnixMillis, pod: &SimPod, node: &str, bound_at: UnixMillis) {
        let _ = (now, pod, node, bound_at);
    }

    /// The pod watch delivered the deletion of `pod`, which ran on `node`.
    fn on_deleted(&mut self, now: UnixMillis, pod: &SimPod, node: &str) {
        let _ = (now, pod, node);
    }

    /// What became of its provisional guesses at the scheduler's choice, if it makes any
    /// (waterline's extender adapter).
    fn guesses(&self) -> Option<Guesses> {
        None
    }

    /// The per-pod usage series it learns from (`None`: it reads none, and the pipeline
    /// records none).
    fn pod_series(&self) -> Option<PodSeriesNeed> {
        None
    }

    /// Its collector's refresh of the per-pod summaries landed: every running pod whose
    /// series had a sample in the window (pods without recorded series never appear).
    fn on_pod_usage(&mut self, now: UnixMillis, pods: &[PodSummary]) {
        let _ = (now, pods);
    }

    /// How its estimator priced the pods bound from time 0, if it estimates pods by the
    /// learned model (waterline).
    fn pricing(&self) -> Option<Pricing> {
        None
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StrategyError {
    #[error("unknown strategy '{0}' (known: {known}; ablation variants: {variants}; with a \
        descheduler: {rebalanced})",
        known = NAMES.join(", "),
        variants = variants::VARIANTS.iter().map(|v| v.0).collect::<Vec<_>>().join(", "),
        rebalanced = rebalanced::NAMES.iter().map(|v| v.0).collect::<Vec<_>>().join(", "))]
    Unknown(String),
    #[error("policy {label}: {message}")]
    Policy { label: String, message: String },
}

/// The strategies [`by_name`] knows, each as its users deploy it (peers/README.md, "Profiles
/// and pipelines", cites every choice).
pub const NAMES: &[&str] = &[
    "waterline",
    "kube-default",
    "crane",
    "crane-dynamic",
    "trimaran-tlp",
    "trimaran-tlp-prom",
    "koordinator",
    "koord-scheduler",
];

/// waterline's own profiles, the same on both paths: deploy/scheduler/kube-scheduler-config.yaml
/// (extender, `weight: 5`) and deploy/overlays/plugin/kube-scheduler-config.yaml (plugin,
/// `weight: 5`) disable NodeResourcesFit's and NodeResourcesBalancedAllocation's scoring
/// and keep the other defaults, of which PodTopologySpread (× 2) scores differently here.
pub fn waterline_profile() -> SchedulerProfile {
    use waterline_peers::profile::{Profile, ScorePlugin};
    SchedulerProfile {
        weight: 5,
        in_tree: Profile::kube_default_without(&[
            ScorePlugin::LeastAllocated { cpu_weight: 1, memory_weight: 1 },
            ScorePlugin::BalancedAllocation,
        ]),
    }
}

/// waterline with `policy`, labelled `label`, in its shipped profile.
pub fn waterline_deployed(label: &str, policy: Policy) -> Result<Box<dyn Strategy>, StrategyError> {
    let inner = Waterline::new(label, policy)?;
    Ok(Box::new(Profiled::new(label, Box::new(inner), waterline_profile())))
}

/// The strategy called `name`, as [`NAMES`] documents it (`waterline`: the default policy).
pub fn by_name(name: &str) -> Result<Box<dyn Strategy>, StrategyError> {
    use waterline_peers::koordinator::Args as KoordArgs;
    use waterline_peers::profile::{Profile, ScorePlugin};
    use waterline_peers::trimaran::Args as TlpArgs;
    let profiled = |label: &str, inner: Box<dyn Strategy>, weight: i64, in_tree: Profile| {
        Box::new(Profiled::new(label, inner, SchedulerProfile { weight, in_tree }))
            as Box<dyn Strategy>
    };
    // manifests/trimaran/scheduler-config.yaml (scheduler-plugins): TargetLoadPacking × 1
    // with `defaultRequestsMultiplier: "1"`, `targetUtilization: 40`; it disables
    // NodeResourcesBalancedAllocation and "NodeResourcesLeastAllocated" — a plugin that no
    // longer exists in its v1beta3 config, so NodeResourcesFit keeps scoring.
    let tlp_profile = || Profile::kube_default_without(&[ScorePlugin::BalancedAllocation]);
    let tlp_args = TlpArgs { default_requests_multiplier: 1.0, ..TlpArgs::default() };
    Ok(match name {
        "waterline" => waterline_deployed("waterline", Policy::default())?,
        "kube-default" => Box::new(KubeDefault::new()),
        // gocrane/helm-charts charts/scheduler/templates/scheduler-configmap.yaml (v1beta2):
        // Dynamic enabled at filter and score with weight 3, the defaults kept.
        "crane" => profiled("crane", Box::<Crane>::default(), 3, Profile::kube_default()),
        // The plugin alone: every other score plugin disabled.
        "crane-dynamic" => {
            profiled("crane-dynamic", Box::<Crane>::default(), 1, Profile::default())
        }
        "trimaran-tlp" => {
            let inner = TargetLoadPacking::with_args(tlp_args, Provider::metrics_server());
            profiled("trimaran-tlp", Box::new(inner), 1, tlp_profile())
        }
        "trimaran-tlp-prom" => {
            let inner = TargetLoadPacking::with_args(tlp_args, Provider::Prometheus);
            profiled("trimaran-tlp-prom", Box::new(inner), 1, tlp_profile())
        }
        "koordinator" => Box::new(Koordinator::new()),
        // koordinator-sh/charts versions/v1.8.0/templates/koord-scheduler-config.yaml: the
        // defaults kept (NodeResourcesFit LeastAllocated over cpu 1 / memory 1 and the batch
        // resources, which the simulator's nodes do not have), LoadAwareScheduling × 1 with
        // the chart's args, NodeNUMAResource × 1 (DeviceShare, Reservation, Coscheduling add
        // the same to every node here).
        "koord-scheduler" => {
            let inner = Koordinator::with_args(KoordArgs::koord_scheduler_chart());
            let in_tree = Profile::kube_default().with(ScorePlugin::KoordNodeNumaResource, 1);
            profiled("koord-scheduler", Box::new(inner), 1, in_tree)
        }
        other => match variants::by_name(other) {
            Some(variant) => variant?,
            None => match rebalanced::by_name(other) {
                Some(combination) => combination?,
                None => return Err(StrategyError::Unknown(other.to_owned())),
            },
        },
    })
}
