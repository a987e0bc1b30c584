//! Shadow mode: the collector judges every bind another scheduler makes as
//! waterline would have, without changing it, so a team can see what waterline would do on
//! its own cluster before switching `schedulerName`.
//!
//! **Where the judge runs, and why here.** The collector has everything a judgement needs:
//! the pod watch (each pod's `schedulerName`, requests and node), the node samples and the
//! ledger, and core's engine as a library. A scorer sees the same state only through the
//! stream, later, and not the pods of other schedulers at all. Every collector replica
//! judges on its own (they are active-active, each with the whole state): each exports its
//! own `waterline_shadow_*` series, which Prometheus tells apart by `instance`, and the
//! dashboard takes the `max` over replicas instead of the sum, so nothing is counted twice;
//! `ShadowDecisions` on any replica answers for the whole cluster.
//!
//! **Just before the bind.** The judge keeps its own copy of the state — a
//! [`ShadowView`], fed by the same deltas a scorer applies — from the queue of
//! [`feed`], on which the state puts every change in order under its lock. That copy is
//! shared ([`view::SharedView`]): the predicted-load publisher reads it instead of copying
//! the state again. The pod watch
//! puts a bind to judge on it *before* the bind's own placement, so the judgement sees the
//! samples and the ledger exactly as they were before it.
//!
//! **Off the pod watch's path.** The judge runs on its own thread; the pod watch only
//! queues (never waits): past `--shadow-queue` events are dropped, binds among them counted
//! in `waterline_shadow_dropped_total`, and the judge resyncs from a full copy.

pub mod feed;
pub mod view;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::sync::mpsc::error::TryRecvError;
use tracing::Instrument;
use waterline_core::UnixMillis;
use waterline_core::shadow::{Decision, ShadowView};
use waterline_runtime::policy::PolicyHandle;

use self::feed::{ShadowEvent, ShadowFeed};
use self::view::SharedView;
use crate::state::ClusterState;

/// The scheduler spec.schedulerName means when it is empty (the API server's default).
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// Shadow mode's flags.
#[derive(clap::Args, Clone, Debug)]
pub struct ShadowArgs {
    /// Shadow mode: judge every bind another scheduler makes (see --shadow-schedulers) as
    /// waterline would have, without changing it; results in the waterline_shadow_* metrics
    /// and the ShadowDecisions RPC. Needs the Kubernetes pod watch.
    #[arg(long, env = "WATERLINE_SHADOW")]
    pub shadow: bool,

    /// Schedulers (spec.schedulerName, comma-separated) whose binds are judged. Empty:
    /// every scheduler except --waterline-schedulers. A pod without a schedulerName counts
    /// as default-scheduler.
    #[arg(long, value_delimiter = ',', env = "WATERLINE_SHADOW_SCHEDULERS")]
    pub shadow_schedulers: Vec<String>,

    /// The scheduler names whose pods waterline itself places (its profiles): never judged.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "waterline-scheduler",
        env = "WATERLINE_SCHEDULER_NAMES"
    )]
    pub waterline_schedulers: Vec<String>,

    /// Events queued between the state and the judge (a bind is about three: the bind,
    /// its requests, its ledger entry). Past it events are dropped, binds among them
    /// counted (waterline_shadow_dropped_total), and the judge resyncs.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    pub shadow_queue: u32,

    /// Judgements kept for ShadowDecisions (the newest).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub shadow_keep: u32,
}

/// Which binds are judged, by `spec.schedulerName`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerFilter {
    only: Vec<String>,
    never: Vec<String>,
}

impl SchedulerFilter {
    pub fn new(args: &ShadowArgs) -> Self {
        let names = |list: &[String]| -> Vec<String> {
            list.iter().map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()).collect()
        };
        SchedulerFilter {
            only: names(&args.shadow_schedulers),
            never: names(&args.waterline_schedulers),
        }
    }

    /// The name a pod's `spec.schedulerName` stands for.
    pub fn name(scheduler_name: Option<&str>) -> &str {
        scheduler_name.filter(|n| !n.is_empty()).unwrap_or(DEFAULT_SCHEDULER)
    }

    pub fn judges(&self, scheduler: &str) -> bool {
        if !self.only.is_empty() {
            return self.only.iter().any(|n| n == scheduler);
        }
        !self.never.iter().any(|n| n == scheduler)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SchedulerLabels {
    scheduler: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    scheduler: String,
    /// `accepted` or `rejected` (by waterline's Filter, on the chosen node).
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MetricLabels {
    scheduler: String,
    metric: String,
}

fn regret_histogram() -> Histogram {
    // Score points, 0..100: 0 is "waterline's best", 1-2 a near tie.
    Histogram::new([0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 50.0, 75.0, 100.0])
}

fn level_histogram() -> Histogram {
    // Percentage points of predicted utilisation above (+) or below (−) the water level.
    Histogram::new([-40.0, -30.0, -20.0, -10.0, -5.0, 0.0, 5.0, 10.0, 20.0, 30.0, 40.0, 60.0])
}

/// The `waterline_shadow_*` metrics.
#[derive(Clone)]
pub struct ShadowMetrics {
    binds: Family<VerdictLabels, Counter>,
    rejected: Family<MetricLabels, Counter>,
    no_best: Family<SchedulerLabels, Counter>,
    regret: Family<SchedulerLabels, Histogram, fn() -> Histogram>,
    level: Family<MetricLabels, Histogram, fn() -> Histogram>,
    duration: Histogram,
    dropped: Counter,
    resyncs: Counter,
}

impl ShadowMetrics {
    /// Counters and histograms no registry exports (a view followed without judging).
    fn unregistered() -> Self {
        ShadowMetrics {
            binds: Family::default(),
            rejected: Family::default(),
            no_best: Family::default(),
            regret: Family::new_with_constructor(regret_histogram),
            level: Family::new_with_constructor(level_histogram),
            // 10 µs .. ~0.4 s: a bind among 5,000 nodes takes a few milliseconds.
            duration: Histogram::new(exponential_buckets(0.00001, 2.5, 12)),
            dropped: Counter::default(),
            resyncs: Counter::default(),
        }
    }

    pub fn register(registry: &mut Registry) -> Self {
        let m = ShadowMetrics::unregistered();
        registry.register(
            "waterline_shadow_binds",
            "Binds by other schedulers judged, by scheduler and by waterline's Filter verdict on the chosen node",
            m.binds.clone(),
        );
        registry.register(
            "waterline_shadow_rejected_binds",
            "Binds onto a node waterline's Filter would reject, by scheduler and by each metric the rejection names",
            m.rejected.clone(),
        );
        registry.register(
            "waterline_shadow_no_feasible_node",
            "Binds for which no node fits the requests and passes waterline's Filter",
            m.no_best.clone(),
        );
        registry.register(
            "waterline_shadow_regret",
            "Waterline's best score minus the chosen node's score (0..100 points), per bind",
            m.regret.clone(),
        );
        registry.register(
            "waterline_shadow_chosen_level_minus_target",
            "The chosen node's predicted utilisation minus the water level (percentage points), per water-level metric",
            m.level.clone(),
        );
        registry.register(
            "waterline_shadow_judge_duration_seconds",
            "Time to judge one bind",
            m.duration.clone(),
        );
        registry.register(
            "waterline_shadow_dropped",
            "Binds not judged because the shadow queue was full (--shadow-queue)",
            m.dropped.clone(),
        );
        registry.register(
            "waterline_shadow_resyncs",
            "Full copies of the state the judge took (start, pod re-list, after a full queue)",
            m.resyncs.clone(),
        );
        m
    }

    fn observe(&self, d: &Decision, seconds: f64) {
        let scheduler = || d.scheduler.clone();
        let verdict = if d.rejection.is_some() { "rejected" } else { "accepted" };
        self.binds.get_or_create(&VerdictLabels { scheduler: scheduler(), verdict }).inc();
        let mut seen: Vec<&str> = Vec::new();
        for metric in &d.rejected_by {
            if !seen.contains(&metric.as_str()) {
                seen.push(metric);
                let labels = MetricLabels { scheduler: scheduler(), metric: metric.clone() };
                self.rejected.get_or_create(&labels).inc();
            }
        }
        match d.best {
            Some(_) => {
                let labels = SchedulerLabels { scheduler: scheduler() };
                self.regret.get_or_create(&labels).observe(d.regret as f64);
            }
            None => {
                self.no_best.get_or_create(&SchedulerLabels { scheduler: scheduler() }).inc();
            }
        }
        for level in &d.levels {
            let labels = MetricLabels { scheduler: scheduler(), metric: level.metric.clone() };
            self.level.get_or_create(&labels).observe(level.predicted - level.target);
        }
        self.duration.observe(seconds);
    }
}

/// The judgements kept for `ShadowDecisions`, shared by the judge and the service.
pub struct Decisions {
    recent: Mutex<VecDeque<Decision>>,
    keep: usize,
    judged: AtomicU64,
    dropped: Counter,
}

impl Decisions {
    pub fn new(keep: usize, dropped: Counter) -> Self {
        Decisions {
            recent: Mutex::new(VecDeque::with_capacity(keep.min(4096))),
            keep: keep.max(1),
            judged: AtomicU64::new(0),
            dropped,
        }
    }

    fn push(&self, decision: Decision) {
        self.judged.fetch_add(1, Ordering::Relaxed);
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() == self.keep {
            recent.pop_back();
        }
        recent.push_front(decision);
    }

    /// Up to `limit` (0: all kept) of the newest decisions, for `scheduler` when not empty.
    pub fn recent(&self, limit: usize, scheduler: &str) -> Vec<Decision> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let limit = if limit == 0 { usize::MAX } else { limit };
        recent
            .iter()
            .filter(|d| scheduler.is_empty() || d.scheduler == scheduler)
            .take(limit)
            .cloned()
            .collect()
    }

    pub fn judged(&self) -> u64 {
        self.judged.load(Ordering::Relaxed)
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }
}

/// Attaches the judge to `state` and starts it on its own thread (its own single-threaded
/// runtime: judging a bind among thousands of nodes takes milliseconds, which must not sit
/// on the runtime that serves gRPC and the watches); returns what the service reads and
/// the filter the pod watch applies, and the judge's view for other readers.
pub fn start(
    args: &ShadowArgs,
    state: &ClusterState,
    policy: PolicyHandle,
    metrics: ShadowMetrics,
) -> anyhow::Result<(Arc<Decisions>, Arc<SchedulerFilter>, SharedView)> {
    let (decisions, filter, view, judge) = attach(args, state, policy, metrics);
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    std::thread::Builder::new()
        .name("shadow-judge".into())
        .spawn(move || runtime.block_on(judge.instrument(tracing::info_span!("shadow_judge"))))?;
    tracing::info!(schedulers = ?filter, queue = args.shadow_queue, "shadow mode on");
    Ok((decisions, filter, view))
}

/// Attaches the judge to `state`; the returned future is the judge, to be run.
pub(crate) fn attach(
    args: &ShadowArgs,
    state: &ClusterState,
    policy: PolicyHandle,
    metrics: ShadowMetrics,
) -> (Arc<Decisions>, Arc<SchedulerFilter>, SharedView, impl std::future::Future<Output = ()> + use<>)
{
    let filter = Arc::new(SchedulerFilter::new(args));
    let decisions = Arc::new(Decisions::new(args.shadow_keep as usize, metrics.dropped.clone()));
    let (feed, full) =
        state.attach_shadow(args.shadow_queue as usize, metrics.dropped.clone(), true);
    let view = SharedView::default();
    view.write().apply(&full);
    // The full copy goes now, not when the judge first resyncs.
    drop(full);
    let judge = Judge { state: state.clone(), policy, metrics, decisions: decisions.clone() };
    (decisions, filter, view.clone(), judge.run(feed, view))
}

/// With shadow mode off: the same view, followed on its own thread for the predicted-load
/// publisher, judging nothing (no bind is queued to judge, no bound pod's requests are
/// kept). `queue` events between the state and the view; past them the view resyncs,
/// counted in `resyncs`.
pub fn follow(state: &ClusterState, queue: usize, resyncs: Counter) -> anyhow::Result<SharedView> {
    let (feed, full) = state.attach_shadow(queue, Counter::default(), false);
    let view = SharedView::default();
    view.write().apply(&full);
    drop(full);
    let metrics = ShadowMetrics { resyncs, ..ShadowMetrics::unregistered() };
    let decisions = Arc::new(Decisions::new(1, metrics.dropped.clone()));
    let judge = Judge {
        state: state.clone(),
        policy: PolicyHandle::new(Default::default()),
        metrics,
        decisions,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let run = judge.run(feed, view.clone());
    std::thread::Builder::new()
        .name("state-view".into())
        .spawn(move || runtime.block_on(run.instrument(tracing::info_span!("state_view"))))?;
    Ok(view)
}

struct Judge {
    state: ClusterState,
    policy: PolicyHandle,
    metrics: ShadowMetrics,
    decisions: Arc<Decisions>,
}

impl Judge {
    /// Works through the queue forever; resyncs whenever the state opened a gap and every
    /// event queued before it has been handled.
    async fn run(self, mut feed: ShadowFeed, view: SharedView) {
        loop {
            let event = match feed.events.try_recv() {
                Ok(event) => event,
                Err(TryRecvError::Disconnected) => return,
                Err(TryRecvError::Empty) if self.state.shadow_gap() => {
                    let (full, bound) = self.state.shadow_resync();
                    let mut view = view.write();
                    view.apply(&full);
                    view.reset_bound(bound);
                    self.metrics.resyncs.inc();
                    tracing::debug!(nodes = full.nodes.len(), "shadow view resynced");
                    continue;
                }
                Err(TryRecvError::Empty) => {
                    tokio::select! {
                        event = feed.events.recv() => match event {
                            Some(event) => event,
                            None => return,
                        },
                        () = feed.gap_opened.notified() => continue,
                    }
                }
            };
            self.handle(&mut view.write(), event);
        }
    }

    fn handle(&self, view: &mut ShadowView, event: ShadowEvent) {
        match event {
            ShadowEvent::Delta(delta) => view.apply(&delta),
            ShadowEvent::Bound { uid, node, requests } => view.bind(&uid, &node, requests),
            ShadowEvent::Unbound { uid } => view.unbind(&uid),
            ShadowEvent::Judge(bind) => {
                let started = Instant::now();
                let decision = view.judge(&self.policy.get(), &bind, UnixMillis::now());
                self.metrics.observe(&decision, started.elapsed().as_secs_f64());
                tracing::debug!(
                    pod = %bind.pod.key(),
                    scheduler = %decision.scheduler,
                    chosen = %decision.chosen_node,
                    chosen_score = decision.chosen_score,
                    best = ?decision.best,
                    rejected = ?decision.rejection,
                    "shadow judgement"
                );
                self.decisions.push(decision);
            }
        }
    }
}

#[cfg(test)]
mod tests;
