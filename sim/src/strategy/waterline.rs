//! Waterline itself: core's `Snapshot`, `Ledger`, prepared table and `engine::evaluate`,
//! fed the way the scorer feeds them (scorer/src/store.rs, scorer/src/service.rs):
//!
//! - a poll replaces a node's samples and capacity (`Snapshot::upsert_node`, what the
//!   scorer's `apply_node` does with a WatchNodes message);
//! - Reserve estimates the pod with the policy's estimator, keeps only the labels the
//!   policy reads and applies a `LedgerSource::Reserve` entry placed now
//!   (`Scorer::reserve_now`);
//! - the pod watch applies a `LedgerSource::Watch` entry placed at the PodScheduled time
//!   (collector/src/sources/kube/pods.rs `view`), which the ledger merges with a Reserve;
//! - a deletion removes the entry;
//! - with `estimator.learn` on, every refresh of the per-pod summaries (pipeline/pods.rs)
//!   becomes core's `learn` table — each pod's workload by core's `WorkloadKey::of`, its
//!   requests, its window quantile and sample count — which `Snapshot::set_learned`
//!   installs whole, as the collector sends it; every later estimate (the incoming pod's,
//!   each Reserve, guess and watch entry) is priced through it by core's `estimate`;
//! - unconfirmed entries expire on the collector's one-second housekeeping tick
//!   (collector/src/app.rs `maintain`, `Ledger::prune_unconfirmed`): a Reserve after the
//!   policy's `reserveTtl`, a provisional entry at its `expires_at`.
//!
//! The filter phase asks the engine's Evaluate, the score phase its Score of the nodes that
//! passed every filter, over a table kept up to date as the scorer keeps its own
//! (`Prepared::update` after every change). No formula is re-implemented here: the ledger
//! entry is core's `placement`, the extender path's 0..100 → 0..10 mapping core's
//! `extender_score`, which the extender adapter answers with.
//!
//! On the extender path the strategy is the extender adapter in front of the scorer, as it
//! ships ([`ExtenderFlags`]; extender/src/verbs.rs):
//!
//! - **filter** (`Extender::filter`) asks Evaluate and keeps the feasible nodes' scores for
//!   the same pod's prioritize (extender/src/cache.rs `ScoreCache`: keyed by pod uid, at most
//!   `--score-cache-ttl` old, taken once, full → expired entries then the oldest evicted);
//! - **prioritize** (`Extender::prioritize`) answers from that entry (a miss costs a Score
//!   call), records the pod on the node it scored best (core's `best_candidate` over the
//!   0..100 scores, the first of equals in request order) as a provisional Reserve —
//!   `LedgerSource::Provisional { expires_at: now + --provisional-reserve-ttl }`, placed
//!   now, as the scorer's `reserve_now` makes it (scorer/src/service.rs) — and answers the
//!   0..10 mapping. The Reserve is applied before the next pod's filter: the adapter's next
//!   filter waits for the Reserves in flight (extender/src/provisional.rs `settled`).
//! - kube-scheduler adds its own plugins' scores (the profile) and picks among its best
//!   totals at random, so its choice is not always the guess; the pod watch's entry then
//!   confirms the guess (same node, keeping the guess's earlier time) or moves it (`Ledger::
//!   apply`). The deployed scheduler has no bind verb (deploy/scheduler/kube-scheduler-
//!   config.yaml), so the watch is the only confirmation.

use std::collections::HashMap;
use std::sync::Arc;

use waterline_core::engine::{self, Ask, Candidates, Prepared};
use waterline_core::estimate::{Source, price};
use waterline_core::extender_score::{best_candidate, map_scores, single_out};
use waterline_core::learn::{PodObservation, learn};
use waterline_core::placement::placement;
use waterline_core::policy::Policy;
use waterline_core::workload::WorkloadKey;
use waterline_core::{Capacity, LedgerEntry, LedgerSource, Millis, Snapshot, UnixMillis};

use super::{
    Cycle, Guesses, MetricKind, MetricNeed, NodeView, Path, PodSeriesNeed, PodSummary, Pricing,
    Resource, Strategy, StrategyError,
};
use crate::model::{EPOCH, SimPod};

/// The extender adapter's flags that shape placements, at the defaults it ships with:
/// extender/src/args.rs, which deploy/scheduler/deployment.yaml leaves unset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtenderFlags {
    /// `--provisional-reserve` (default on) with `--provisional-reserve-ttl` (default 15s);
    /// `None`: `--provisional-reserve=false`.
    pub provisional_ttl: Option<Millis>,
    /// `--score-cache-ttl` (default 30s).
    pub score_cache_ttl: Millis,
    /// `--score-cache-size` (default 10,000; 0: no cache, prioritize calls Score).
    pub score_cache_size: usize,
}

impl ExtenderFlags {
    /// The defaults of extender/src/args.rs.
    pub const SHIPPED: ExtenderFlags = ExtenderFlags {
        provisional_ttl: Some(Millis(15_000)),
        score_cache_ttl: Millis(30_000),
        score_cache_size: 10_000,
    };
}

impl Default for ExtenderFlags {
    fn default() -> Self {
        ExtenderFlags::SHIPPED
    }
}

/// The collector's housekeeping period: unconfirmed entries leave the ledger on its ticks
/// (collector/src/app.rs `maintain`, every second).
const PRUNE_TICK: Millis = Millis(1000);

/// The score cache's answers to prioritize (the adapter's `score_cache` counter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheCounts {
    pub hits: u64,
    pub misses: u64,
}

/// extender/src/cache.rs `ScoreCache` on simulated time: filter's scores by pod uid.
#[derive(Debug, Default)]
struct ScoreCache {
    entries: HashMap<String, (UnixMillis, HashMap<String, i64>)>,
}

impl ScoreCache {
    fn insert(
        &mut self,
        flags: &ExtenderFlags,
        uid: &str,
        scores: HashMap<String, i64>,
        now: UnixMillis,
    ) {
        if uid.is_empty() || flags.score_cache_size == 0 {
            return;
        }
        if self.entries.len() >= flags.score_cache_size && !self.entries.contains_key(uid) {
            self.entries.retain(|_, (at, _)| now.since(*at) < flags.score_cache_ttl);
            if self.entries.len() >= flags.score_cache_size {
                let oldest =
                    self.entries.iter().min_by_key(|(_, (at, _))| *at).map(|e| e.0.clone());
                if let Some(uid) = oldest {
                    self.entries.remove(&uid);
                }
            }
        }
        self.entries.insert(uid.to_owned(), (now, scores));
    }

    /// The scores of `names` in order when the entry is fresh and complete; gone either way.
    fn take(
        &mut self,
        flags: &ExtenderFlags,
        uid: &str,
        names: &[&str],
        now: UnixMillis,
    ) -> Option<Vec<i64>> {
        let (at, scores) = self.entries.remove(uid)?;
        if now.since(at) >= flags.score_cache_ttl {
            return None;
        }
        names.iter().map(|n| scores.get(*n).copied()).collect()
    }
}

pub struct Waterline {
    label: String,
    policy: Policy,
    needs: Vec<MetricNeed>,
    snapshot: Snapshot,
    /// The snapshot's prepared rows, brought up to date before each question.
    table: Prepared,
    names: Vec<String>,
    /// The extender adapter's flags (extender path only).
    flags: ExtenderFlags,
    cache: ScoreCache,
    cache_counts: CacheCounts,
    guesses: Guesses,
    pricing: Pricing,
    /// The last collector tick whose expiries have been applied.
    pruned_at: Option<UnixMillis>,
}

/// The pipeline kind of a policy metric, from the recording-rule naming of deploy/prometheus
/// (`…avg5m`, `…max_avg1h`, `…max_avg1d`) in its query or name.
fn kind_of(name: &str, query: &str) -> Option<MetricKind> {
    let five = Millis::from_mins(5);
    let text = format!("{name} {query}").replace('_', "");
    if text.contains("maxavg1d") {
        Some(MetricKind::MaxOfAvg { window: five, over: Millis::from_mins(24 * 60) })
    } else if text.contains("maxavg1h") {
        Some(MetricKind::MaxOfAvg { window: five, over: Millis::from_mins(60) })
    } else if text.contains("avg5m") {
        Some(MetricKind::Avg { window: five })
    } else {
        None
    }
}

impl Waterline {
    pub fn new(label: &str, policy: Policy) -> Result<Self, StrategyError> {
        let mut needs = Vec::with_capacity(policy.metrics.len());
        for m in &policy.metrics {
            let error = |message: String| StrategyError::Policy { label: label.into(), message };
            let resource = match m.resource {
                waterline_core::policy::Resource::Cpu => Resource::Cpu,
                waterline_core::policy::Resource::Memory => Resource::Memory,
                waterline_core::policy::Resource::Other => {
                    return Err(error(format!(
                        "metric {}: the simulator models cpu and memory only",
                        m.name
                    )));
                }
            };
            let kind = kind_of(&m.name, &m.query).ok_or_else(|| {
                error(format!(
                    "metric {}: the simulator models 5 m averages (…avg5m) and their 1 h / 1 d \
                     maxima (…max_avg1h, …max_avg1d); name or query must say which",
                    m.name
                ))
            })?;
            needs.push(MetricNeed { name: m.name.clone(), resource, kind, poll: m.period });
        }
        let mut snapshot = Snapshot::default();
        snapshot.track_changes();
        Ok(Waterline {
            label: label.into(),
            policy,
            needs,
            snapshot,
            table: Prepared::default(),
            names: Vec::new(),
            flags: ExtenderFlags::default(),
            cache: ScoreCache::default(),
            cache_counts: CacheCounts::default(),
            guesses: Guesses::default(),
            pricing: Pricing::default(),
            pruned_at: None,
        })
    }

    /// The same with the extender adapter started with `flags` instead of its defaults.
    pub fn with_extender_flags(
        label: &str,
        policy: Policy,
        flags: ExtenderFlags,
    ) -> Result<Self, StrategyError> {
        Ok(Waterline { flags, ..Waterline::new(label, policy)? })
    }

    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    pub fn cache_counts(&self) -> CacheCounts {
        self.cache_counts
    }

    /// Drops what the collector's ticks up to `now` have expired (at most once per tick).
    fn prune(&mut self, now: UnixMillis) {
        let tick = UnixMillis(now.0 - now.0.rem_euclid(PRUNE_TICK.0));
        if self.pruned_at.is_some_and(|t| t >= tick) {
            return;
        }
        self.pruned_at = Some(tick);
        let reserve_ttl = self.policy.ledger.reserve_ttl;
        let expired: Vec<(String, bool)> = self
            .snapshot
            .ledger()
            .iter()
            .filter(|e| e.source.expired(e.placed_at, tick, reserve_ttl))
            .map(|e| (e.uid.clone(), e.source.is_provisional()))
            .collect();
        for (uid, provisional) in expired {
            self.snapshot.delete_placement(&uid);
            self.guesses.expired += u64::from(provisional);
        }
        // collector/src/app.rs `maintain`: departures leave once no metric counts them.
        self.snapshot.prune_departed(tick, self.policy.longest_absorb_window());
    }

    fn entry(&self, pod: &SimPod, node: &str, at: UnixMillis, source: LedgerSource) -> LedgerEntry {
        // A simulated pod always has a uid (namespace/name) and a node.
        placement(&self.policy, self.snapshot.learned(), pod.to_core(), node, at, source)
            .expect("a simulated placement has a uid and a node")
    }

    /// Counts how core's estimator prices `pod` now (the rule of `estimate::price`).
    fn count_pricing(&mut self, pod: &SimPod) {
        let priced = price(&self.policy.estimator, self.snapshot.learned(), &pod.to_core());
        let learned = |s: Source| matches!(s, Source::Learned { .. });
        if learned(priced.cpu) || learned(priced.memory) {
            self.pricing.learned += 1;
        } else {
            self.pricing.factor += 1;
        }
    }

    /// `ask` for `pod` on `nodes`, over the table brought up to date first.
    fn evaluate(
        &mut self,
        now: UnixMillis,
        pod: &SimPod,
        nodes: &[NodeView<'_>],
        ask: Ask,
    ) -> engine::Evaluation {
        self.prune(now);
        self.table.update(&self.policy, &mut self.snapshot, now);
        self.names.clear();
        self.names.extend(nodes.iter().map(|n| n.name.to_owned()));
        let pod = pod.to_core();
        let candidates = Candidates::Names(&self.names);
        engine::evaluate(
            &self.policy,
            &self.snapshot,
            Some(&self.table),
            &pod,
            ask,
            candidates,
            now,
        )
    }
}

impl Strategy for Waterline {
    fn label(&self) -> &str {
        &self.label
    }

    fn metrics(&self) -> Vec<MetricNeed> {
        self.needs.clone()
    }

    fn filter(
        &mut self,
        cycle: &Cycle,
        pod: &SimPod,
        nodes: &[NodeView<'_>],
    ) -> Vec<Option<String>> {
        let evaluation = self.evaluate(cycle.now, pod, nodes, Ask::Evaluate);
        if cycle.path == Path::Extender {
            // Evaluate's scores of the feasible nodes, kept for this pod's prioritize.
            let scores = nodes
                .iter()
                .zip(&evaluation.scores)
                .filter_map(|(n, s)| s.map(|s| (n.name.to_owned(), s)))
                .collect();
            self.cache.insert(&self.flags, &pod.uid, scores, cycle.now);
        }
        evaluation.verdicts().into_iter().map(|v| v.map(str::to_owned)).collect()
    }

    fn score(&mut self, cycle: &Cycle, pod: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64> {
        if cycle.path == Path::Plugin {
            let evaluation = self.evaluate(cycle.now, pod, nodes, Ask::Score { explain: false });
            return evaluation.scores.iter().map(|s| s.unwrap_or_default()).collect();
        }
        let names: Vec<&str> = nodes.iter().map(|n| n.name).collect();
        let scores = match self.cache.take(&self.flags, &pod.uid, &names, cycle.now) {
            Some(scores) => {
                self.cache_counts.hits += 1;
                scores
            }
            None => {
                self.cache_counts.misses += 1;
                let evaluation =
                    self.evaluate(cycle.now, pod, nodes, Ask::Score { explain: false });
                evaluation.scores.iter().map(|s| s.unwrap_or_default()).collect()
            }
        };
        let mut mapped = map_scores(self.policy.extender_score_mapping, &scores);
        if let (Some(ttl), Some(at)) = (self.flags.provisional_ttl, best_candidate(&scores)) {
            let source = LedgerSource::Provisional { expires_at: cycle.now.plus(ttl) };
            let entry = self.entry(pod, nodes[at].name, cycle.now, source);
            if self.snapshot.apply_placement(entry).is_some() {
                self.guesses.made += 1;
            }
            // As the adapter does (`Extender::prioritize`): the guess alone at the top.
            single_out(&mut mapped, at);
        }
        // kube-scheduler multiplies an extender's 0..10 by its weight and by 10; the
        // weight is the profile's (`Profiled`).
        mapped.into_iter().map(|s| s * 10).collect()
    }

    fn guesses(&self) -> Option<Guesses> {
        self.flags.provisional_ttl.map(|_| self.guesses)
    }

    fn on_metrics(&mut self, _now: UnixMillis, nodes: &[NodeView<'_>]) {
        for node in nodes {
            let capacity = Capacity {
                cpu_millis: node.allocatable.cpu_millis,
                memory_bytes: node.allocatable.memory_bytes,
            };
            let samples = self
                .needs
                .iter()
                .zip(node.metrics)
                .filter_map(|(need, sample)| sample.map(|s| (need.name.as_str(), s)));
            self.snapshot.upsert_node(node.name, capacity, samples);
        }
    }

    fn on_reserve(&mut self, now: UnixMillis, pod: &SimPod, node: &str) {
        let entry = self.entry(pod, node, now, LedgerSource::Reserve);
        self.snapshot.apply_placement(entry);
    }

    fn on_bound(&mut self, now: UnixMillis, pod: &SimPod, node: &str, bound_at: UnixMillis) {
        self.prune(now);
        if let Some(guess) = self.snapshot.ledger().get(&pod.uid)
            && guess.source.is_provisional()
        {
            if guess.node == node {
                self.guesses.confirmed += 1;
            } else {
                self.guesses.moved += 1;
            }
        }
        if bound_at >= EPOCH {
            self.count_pricing(pod);
        }
        let entry = self.entry(pod, node, bound_at, LedgerSource::Watch);
        self.snapshot.apply_placement(entry);
    }

    fn pod_series(&self) -> Option<PodSeriesNeed> {
        let learn = &self.policy.estimator.learn;
        learn.enabled.then_some(PodSeriesNeed {
            window: learn.window,
            quantile: learn.quantile,
            refresh: learn.refresh,
        })
    }

    fn on_pod_usage(&mut self, _now: UnixMillis, pods: &[PodSummary]) {
        let observations = pods.iter().map(|p| {
            let pod = p.pod.to_core();
            PodObservation {
                workload: WorkloadKey::of(&pod),
                cpu_request_millis: pod.cpu_request_millis,
                memory_request_bytes: pod.memory_request_bytes,
                cpu: p.cpu,
                memory: p.memory,
            }
        });
        let learned = learn(&self.policy.estimator.learn, observations);
        self.pricing.workloads = learned.len();
        self.snapshot.set_learned(Arc::new(learned));
    }

    fn pricing(&self) -> Option<Pricing> {
        Some(self.pricing)
    }

    /// As the collector's pod watch does (`ClusterState::release_bound`,
    /// docs/design.md#departures): a watched pod's entry becomes its departure, whose credit
    /// takes its estimate off the averages until they have absorbed it; a reservation or guess
    /// the watch never confirmed is released.
    fn on_deleted(&mut self, now: UnixMillis, pod: &SimPod, _node: &str) {
        self.prune(now);
        if self.snapshot.depart_placement(&pod.uid, now).is_none() {
            self.snapshot.delete_placement(&pod.uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_policy_maps_to_the_six_pipeline_metrics() {
        let w = Waterline::new("w", Policy::default()).unwrap();
        let kinds: Vec<MetricKind> = w.metrics().iter().map(|m| m.kind).collect();
        let five = Millis::from_mins(5);
        let hour = MetricKind::MaxOfAvg { window: five, over: Millis::from_mins(60) };
        let day = MetricKind::MaxOfAvg { window: five, over: Millis::from_mins(1440) };
        let avg = MetricKind::Avg { window: five };
        assert_eq!(kinds, vec![avg, hour, day, avg, hour, day]);
        assert_eq!(w.metrics()[0].poll, Millis::from_secs(30));
    }

    #[test]
    fn the_watch_moves_a_wrong_guess_to_the_node_the_scheduler_chose() {
        use crate::model::Resources;
        let mut w = Waterline::new("w", Policy::default()).unwrap();
        // No samples yet: every metric is stale and scores 50 on both nodes (the default
        // `stale: {score: 50}`), so the guess is the first of the tied candidates, a.
        let none = vec![None; w.metrics().len()];
        let view = |name| NodeView {
            name,
            allocatable: Resources::new(16_000, 64 << 30),
            requested: Resources::default(),
            non_zero_requested: Resources::default(),
            controller_pods: 0,
            metrics: &none,
            pods: &[],
        };
        let nodes = [view("a"), view("b")];
        w.on_metrics(UnixMillis(0), &nodes);
        let pod = SimPod {
            uid: "ns/p".into(),
            namespace: "ns".into(),
            name: "p".into(),
            labels: Default::default(),
            owner_kind: "ReplicaSet".into(),
            owner_name: String::new(),
            controller: Some("ns/web".into()),
            requests: Resources::new(1000, 1 << 30),
            limits: Resources::default(),
        };
        let cycle = Cycle { now: UnixMillis(1_000), path: Path::Extender };
        assert_eq!(w.filter(&cycle, &pod, &nodes), [None, None]);
        // 50 → round(5.0) = 5 on the extender's 0..10, × 10 for kube-scheduler; the guess
        // (a, the first of equals) singled out one level up: 6.
        assert_eq!(w.score(&cycle, &pod, &nodes), [60, 50]);
        let guess = w.snapshot().ledger().get("ns/p").unwrap().clone();
        assert_eq!((guess.node.as_str(), guess.placed_at), ("a", UnixMillis(1_000)));
        assert_eq!(guess.source, LedgerSource::Provisional { expires_at: UnixMillis(16_000) });
        // kube-scheduler chose b all the same (another plugin outweighed one level): bound
        // on b at 1.1 s, watched at 1.6 s.
        w.on_bound(UnixMillis(1_600), &pod, "b", UnixMillis(1_100));
        let moved = w.snapshot().ledger().get("ns/p").unwrap();
        assert_eq!((moved.node.as_str(), moved.placed_at), ("b", UnixMillis(1_100)));
        assert_eq!(moved.source, LedgerSource::Watch);
        assert!(w.snapshot().ledger().on_node("a").is_empty());
        assert_eq!(w.guesses(), Some(Guesses { made: 1, confirmed: 0, moved: 1, expired: 0 }));
        // The plugin path makes no guesses: Score answers 0..100 and the ledger is untouched.
        let plugin = Cycle { now: UnixMillis(2_000), path: Path::Plugin };
        let other = SimPod { uid: "ns/q".into(), name: "q".into(), ..pod };
        assert_eq!(w.score(&plugin, &other, &nodes), [50, 50]);
        assert!(w.snapshot().ledger().get("ns/q").is_none());
    }

    #[test]
    fn a_deleted_pod_leaves_the_averages_at_once_and_the_maxima_hold() {
        use crate::model::Resources;
        use waterline_core::Sample;
        // `departures: credit` on the averages (the default holds every metric).
        let policy = Policy::default().crediting_departures();
        let mut w = Waterline::new("w", policy.clone()).unwrap();
        // One 8-core node, every metric (cpu and memory: 5 m average, 1 h and 1 d maxima)
        // sampled at 70 %, the pod bound an hour ago: every metric has absorbed it.
        let hour = Millis::from_mins(60).0;
        let at = UnixMillis(2 * hour);
        let samples = vec![Some(Sample { value: 70.0, at }); w.metrics().len()];
        let node = NodeView {
            name: "a",
            allocatable: Resources::new(8_000, 32 << 30),
            requested: Resources::default(),
            non_zero_requested: Resources::default(),
            controller_pods: 0,
            metrics: &samples,
            pods: &[],
        };
        w.on_metrics(at, std::slice::from_ref(&node));
        let pod = SimPod {
            uid: "ns/p".into(),
            namespace: "ns".into(),
            name: "p".into(),
            labels: Default::default(),
            owner_kind: "ReplicaSet".into(),
            owner_name: String::new(),
            controller: Some("ns/web".into()),
            requests: Resources::new(2_000, 4 << 30),
            limits: Resources::default(),
        };
        w.on_bound(UnixMillis(hour), &pod, "a", UnixMillis(hour));
        w.on_deleted(at, &pod, "a");
        let entry = w.snapshot().ledger().get("ns/p").unwrap();
        assert!(entry.source.is_departure(), "{:?}", entry.source);
        let cpu = |policy: &Policy, w: &Waterline, now| -> Vec<f64> {
            engine::predicted_loads(policy, w.snapshot(), now)
                .iter()
                .filter(|l| policy.metrics[l.metric].name.starts_with("cpu"))
                .map(|l| (l.fraction * 1e6).round() / 1e6)
                .collect()
        };
        // 2 cores × 0.85 = 1.7 of 8 = 21.25 pp off the 5 m average: 70 − 21.25 = 48.75;
        // the 1 h and 1 d maxima keep the peak (`departures: hold`).
        assert_eq!(cpu(&policy, &w, at), [0.4875, 0.70, 0.70]);
        // The default policy holds: the same departure, nothing credited.
        let mut held = Waterline::new("held", Policy::default()).unwrap();
        held.on_metrics(at, std::slice::from_ref(&node));
        held.on_bound(UnixMillis(hour), &pod, "a", UnixMillis(hour));
        held.on_deleted(at, &pod, "a");
        assert!(held.snapshot().ledger().get("ns/p").unwrap().source.is_departure());
        assert_eq!(cpu(&Policy::default(), &held, at), [0.70, 0.70, 0.70]);
        // Past the longest absorb window the departure is pruned, and the metric speaks alone.
        let later = at.plus(policy.longest_absorb_window());
        w.on_metrics(
            later,
            &[NodeView {
                metrics: &vec![Some(Sample { value: 70.0, at: later }); samples.len()],
                ..node
            }],
        );
        w.on_deleted(later, &SimPod { uid: "ns/other".into(), ..pod.clone() }, "a");
        assert!(w.snapshot().ledger().get("ns/p").is_none());
        assert_eq!(cpu(&policy, &w, later), [0.70, 0.70, 0.70]);
    }
}
