//! The discrete-event loop: one strategy through one scenario. Events at the same instant
//! run in a fixed order (world changes, then the pipeline, then what the strategy observes,
//! then the scheduler), and the queue breaks remaining ties by insertion order, so a seed
//! gives one run.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io::Write;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use waterline_peers::kube_default::{CpuMemory, non_zero_request};

use crate::measure::{Recorder, StrategySummary};
use crate::model::{Resources, SimPod, SimTime, instant};
use crate::pipeline::pods::PodSeries;
use crate::pipeline::{Agent, MetricsPipeline, RuleGroup};
use crate::scenario::Scenario;
use crate::strategy::{Cycle, NodeView, Path, PlacedPod, PodSummary, Strategy};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Delete(usize),
    Arrive(usize),
    Bind(usize),
    Scrape,
    Sample(Agent),
    Step,
    Rule(RuleGroup),
    /// The per-pod usage rules (pipeline/pods.rs).
    PodRule,
    Poll(usize),
    /// The collector asks for the per-pod summaries.
    PodRefresh,
    KoordletReport(usize),
    WatchBound(usize),
    WatchDeleted(usize, usize),
    Measure,
    Retry(usize),
    Cycle,
    /// The evicted pod's controller creates its replacement.
    Recreate(usize),
    RebalanceRule,
    Deschedule,
}

impl Event {
    /// Order among events at the same instant.
    fn rank(self) -> u8 {
        match self {
            Event::Delete(_) => 0,
            Event::Arrive(_) => 1,
            Event::Bind(_) => 2,
            Event::Scrape | Event::Sample(_) => 3,
            Event::Step => 4,
            Event::Rule(_) | Event::PodRule => 5,
            Event::Poll(_) | Event::KoordletReport(_) | Event::PodRefresh => 6,
            Event::WatchBound(_) => 7,
            Event::WatchDeleted(..) => 8,
            Event::Measure => 9,
            Event::Retry(_) => 10,
            Event::Cycle => 11,
            Event::Recreate(_) => 12,
            Event::RebalanceRule => 13,
            Event::Deschedule => 14,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PodState {
    Waiting,
    Pending,
    Assumed { node: usize, at: SimTime },
    Running { node: usize, assigned: SimTime, start: SimTime },
    Gone,
}

struct NodeRt {
    requested: Resources,
    non_zero: Resources,
    /// (pod index, start time).
    running: Vec<(usize, SimTime)>,
    /// What the strategy may know (see strategy.rs).
    visible: Vec<PlacedPod>,
    /// Assumed and bound pods per controller (`SimPod::controller`).
    controllers: HashMap<String, i64>,
    received: bool,
    /// Placements from time 0.
    placements: usize,
}

/// Optional outputs of a run.
#[derive(Default)]
pub struct Outputs<'a> {
    /// Receives `time_s,node,cpu_pct,mem_pct` rows at every measure.
    pub csv: Option<&'a mut dyn Write>,
    /// Called with the simulated time at every measure (a progress bar).
    pub progress: Option<&'a mut dyn FnMut(SimTime)>,
}

/// From an eviction to the replacement pod's arrival: the ReplicaSet controller's reaction
/// to the deletion (its watch and a create), about a second on a healthy control plane.
const RECREATE_DELAY: i64 = 1000;

/// The rebalancing actor of a run and what it did.
struct Rebalance {
    actor: Box<dyn crate::rebalance::Rebalancer>,
    /// Its metrics start at this index of the pipeline's needs.
    offset: usize,
    summary: crate::rebalance::RebalanceSummary,
    /// Recreated pod → the node its predecessor was evicted from.
    replaced_from: HashMap<usize, usize>,
    /// The last measure instants from the load step with the hottest node above target +
    /// 10 pp and above the threshold, and whether the last measure was.
    last_above_water: Option<SimTime>,
    last_above_threshold: Option<SimTime>,
    /// Evicted pod → its node, until the replacement exists.
    evicted_from: HashMap<usize, usize>,
}

struct Sim<'s> {
    scenario: &'s Scenario,
    /// The scenario's pods, then the replacements of evicted pods.
    specs: Vec<crate::scenario::PodSpec>,
    rebalance: Option<Rebalance>,
    strategy: &'s mut dyn Strategy,
    /// The path the strategy is wired through (`Strategy::path`).
    path: Path,
    pipeline: MetricsPipeline,
    /// The running pods' usage series, when the strategy learns from them.
    pod_series: Option<PodSeries>,
    nodes: Vec<NodeRt>,
    pods: Vec<PodState>,
    queue: VecDeque<usize>,
    cycle_scheduled: bool,
    /// Pods in `PodState::Pending`.
    pending: usize,
    /// Pods assumed or bound whose binding the pod watch has not delivered yet: what a
    /// strategy without Reserve cannot see.
    unwatched: usize,
    events: BinaryHeap<Reverse<(SimTime, u8, u64, Event)>>,
    seq: u64,
    rng: StdRng,
    recorder: Recorder,
}

fn first_tick(from: SimTime, interval: i64) -> SimTime {
    from.div_euclid(interval) * interval + if from.rem_euclid(interval) == 0 { 0 } else { interval }
}

/// Node `i` as the strategy sees it; `controller` is the incoming pod's, if any.
fn view<'a>(
    s: &'a Scenario,
    nodes: &'a [NodeRt],
    pipeline: &'a MetricsPipeline,
    i: usize,
    controller: Option<&str>,
) -> NodeView<'a> {
    view_of(s, nodes, pipeline, i, controller, 0..pipeline.strategy_needs())
}

/// The view with the metrics in `range` of the pipeline's needs.
fn view_of<'a>(
    s: &'a Scenario,
    nodes: &'a [NodeRt],
    pipeline: &'a MetricsPipeline,
    i: usize,
    controller: Option<&str>,
    range: std::ops::Range<usize>,
) -> NodeView<'a> {
    NodeView {
        name: &s.nodes[i].name,
        allocatable: s.nodes[i].allocatable,
        requested: nodes[i].requested,
        non_zero_requested: nodes[i].non_zero,
        controller_pods: controller.and_then(|c| nodes[i].controllers.get(c)).copied().unwrap_or(0),
        metrics: &pipeline.samples(i)[range],
        pods: &nodes[i].visible,
    }
}

fn nz(r: Resources) -> Resources {
    let n = non_zero_request(CpuMemory::new(r.cpu_millis, r.memory_bytes));
    Resources::new(n.cpu_millis, n.memory_bytes)
}

/// Runs `strategy` through `scenario`.
pub fn run(
    scenario: &Scenario,
    strategy: &mut dyn Strategy,
    mut out: Outputs<'_>,
) -> StrategySummary {
    let mut needs = strategy.metrics();
    let path = strategy.path(scenario.scheduler.path);
    let rebalance =
        crate::strategy::rebalanced::rebalancer(strategy.label(), scenario.seed).map(|actor| {
            let offset = needs.len();
            needs.extend(actor.metrics());
            Rebalance {
                actor,
                offset,
                summary: Default::default(),
                replaced_from: HashMap::new(),
                last_above_water: None,
                last_above_threshold: None,
                evicted_from: HashMap::new(),
            }
        });
    let strategy_needs = rebalance.as_ref().map_or(needs.len(), |r| r.offset);
    let mut pipeline = MetricsPipeline::new(
        scenario.pipeline.clone(),
        needs,
        scenario.nodes.iter().map(|n| n.allocatable).collect(),
        scenario.seed,
    );
    pipeline.set_strategy_needs(strategy_needs);
    let pod_series =
        strategy.pod_series().map(|need| PodSeries::new(scenario.pipeline.clone(), need));
    let mut sim = Sim {
        scenario,
        specs: scenario.pods.clone(),
        rebalance,
        strategy,
        path,
        pipeline,
        pod_series,
        nodes: scenario
            .nodes
            .iter()
            .map(|_| NodeRt {
                requested: Resources::default(),
                non_zero: Resources::default(),
                running: Vec::new(),
                visible: Vec::new(),
                controllers: HashMap::new(),
                received: false,
                placements: 0,
            })
            .collect(),
        pods: vec![PodState::Waiting; scenario.pods.len()],
        queue: VecDeque::new(),
        cycle_scheduled: false,
        pending: 0,
        unwatched: 0,
        events: BinaryHeap::new(),
        seq: 0,
        rng: StdRng::seed_from_u64(scenario.seed ^ 0x005E_ED0F_71E5),
        recorder: Recorder::new(scenario),
    };
    sim.start();
    let end = scenario.duration.0;
    while let Some(Reverse((t, _, _, event))) = sim.events.pop() {
        if t > end {
            break;
        }
        sim.handle(t, event, &mut out);
    }
    let pending = sim.pods.iter().filter(|p| matches!(p, PodState::Pending)).count();
    let in_use = sim.nodes.iter().filter(|n| !n.running.is_empty()).count();
    let received = sim.nodes.iter().filter(|n| n.received).count();
    let per_node = scenario
        .nodes
        .iter()
        .zip(&sim.nodes)
        .map(|(spec, n)| (spec.name.clone(), n.placements))
        .collect();
    let label = sim.strategy.label().to_owned();
    let guesses = if path == Path::Extender { sim.strategy.guesses() } else { None };
    let pricing = sim.strategy.pricing();
    let mut summary = sim.recorder.finish(label, pending, in_use, received, per_node);
    summary.provisional_guesses = guesses;
    summary.pricing = pricing;
    summary.rebalance = sim.rebalance.map(|r| {
        let mut out = r.summary;
        if let Some(step) = scenario.load_step {
            let back = |last: Option<SimTime>| match last {
                // above at the last measure: not back
                Some(l) if l + scenario.measure_interval.0 > end => None,
                Some(l) => Some(((l + scenario.measure_interval.0 - step).max(0)) as f64 / 1000.0),
                None => Some(0.0),
            };
            out.load_step_s = Some(step as f64 / 1000.0);
            out.back_under_water_s = back(r.last_above_water);
            out.back_under_threshold_s = back(r.last_above_threshold);
        }
        out
    });
    summary
}

impl Sim<'_> {
    fn at(&mut self, t: SimTime, event: Event) {
        self.seq += 1;
        self.events.push(Reverse((t, event.rank(), self.seq, event)));
    }

    fn start(&mut self) {
        let t0 = -self.scenario.warmup.0;
        let p = &self.scenario.pipeline;
        if self.pipeline.uses_prometheus() || self.pod_series.is_some() {
            self.at(first_tick(t0, p.scrape_interval.0), Event::Scrape);
        }
        if let Some(pods) = &self.pod_series {
            let (rules, refresh) = (pods.pod_rule_interval().0, pods.refresh().0.max(1));
            self.at(first_tick(t0, rules), Event::PodRule);
            self.at(first_tick(t0, refresh), Event::PodRefresh);
        }
        for (agent, every) in self.pipeline.agents() {
            self.at(first_tick(t0, every.0), Event::Sample(agent));
        }
        for i in 0..self.nodes.len() {
            if let Some((report, phase)) = self.pipeline.koordlet_schedule(i) {
                self.at(first_tick(t0 - phase, report.0) + phase, Event::KoordletReport(i));
            }
        }
        if self.pipeline.uses_steps() {
            self.at(first_tick(t0, p.subquery_step.0), Event::Step);
        }
        for group in [RuleGroup::Avg, RuleGroup::Hour, RuleGroup::Day] {
            if self.pipeline.uses(group) {
                let interval = self.pipeline.group_interval(group).0;
                self.at(first_tick(t0, interval), Event::Rule(group));
            }
        }
        for n in 0..self.pipeline.needs().len() {
            if !self.pipeline.is_polled(n) {
                continue;
            }
            let period = self.pipeline.poll_period(n).0;
            self.at(first_tick(t0, period), Event::Poll(n));
        }
        self.at(0, Event::Measure);
        if let Some(r) = &self.rebalance {
            let rules = r.actor.rule_interval();
            // the descheduler starts with the run (its first cycle at once)
            self.at(0, Event::Deschedule);
            if let Some(every) = rules {
                self.at(first_tick(t0, every.0), Event::RebalanceRule);
            }
        }
        for (i, pod) in self.scenario.pods.iter().enumerate() {
            self.at(pod.arrival.max(t0), Event::Arrive(i));
            if let Some(deletion) = pod.deletion {
                self.at(deletion.max(t0), Event::Delete(i));
            }
        }
    }

    fn node_usage(&self, i: usize, t: SimTime) -> (f64, f64) {
        let spec = &self.scenario.nodes[i];
        let (mut cpu, mut memory) = spec.background.at(t, spec.allocatable);
        for &(p, start) in &self.nodes[i].running {
            let (c, m) = self.pod_usage(p, start, t);
            cpu += c;
            memory += m;
        }
        (cpu, memory)
    }

    /// Pod `p`'s true usage at `t`, started at `start`: (cpu millicores, memory bytes).
    fn pod_usage(&self, p: usize, start: SimTime, t: SimTime) -> (f64, f64) {
        let pod = &self.specs[p];
        pod.usage.at(t - start, t, pod.pod.limits)
    }

    /// True utilisation in percent of allocatable: (cpu, memory).
    fn utilisation(&self, i: usize, t: SimTime) -> (f64, f64) {
        let (cpu, memory) = self.node_usage(i, t);
        let a = self.scenario.nodes[i].allocatable;
        (cpu * 100.0 / a.cpu_millis as f64, memory * 100.0 / a.memory_bytes as f64)
    }

    fn pod(&self, p: usize) -> Arc<SimPod> {
        self.specs[p].pod.clone()
    }

    fn node_index(&self, name: &str) -> Option<usize> {
        self.scenario.nodes.iter().position(|n| n.name == name)
    }

    fn enqueue(&mut self, t: SimTime, p: usize) {
        self.queue.push_back(p);
        if !self.cycle_scheduled {
            self.cycle_scheduled = true;
            self.at(t, Event::Cycle);
        }
    }

    fn handle(&mut self, t: SimTime, event: Event, out: &mut Outputs<'_>) {
        let s = self.scenario;
        match event {
            Event::Scrape => {
                if self.pipeline.uses_prometheus() {
                    let usage: Vec<(f64, f64)> =
                        (0..self.nodes.len()).map(|i| self.node_usage(i, t)).collect();
                    self.pipeline.scrape(t, &usage);
                }
                if self.pod_series.is_some() {
                    let usage: Vec<(usize, f64, f64)> = self
                        .nodes
                        .iter()
                        .flat_map(|n| &n.running)
                        .filter(|&&(p, _)| self.specs[p].series_recorded)
                        .map(|&(p, start)| {
                            let (cpu, memory) = self.pod_usage(p, start, t);
                            (p, cpu, memory)
                        })
                        .collect();
                    if let Some(pods) = &mut self.pod_series {
                        pods.scrape(t, usage);
                    }
                }
                self.at(t + s.pipeline.scrape_interval.0, Event::Scrape);
            }
            Event::PodRule => {
                if let Some(pods) = &mut self.pod_series {
                    pods.record(t);
                    let every = pods.pod_rule_interval().0;
                    self.at(t + every, Event::PodRule);
                }
            }
            Event::PodRefresh => self.pod_refresh(t),
            Event::Sample(agent) => {
                let usage: Vec<(f64, f64)> =
                    (0..self.nodes.len()).map(|i| self.node_usage(i, t)).collect();
                self.pipeline.sample(agent, t, &usage);
                let every = self.pipeline.agents().iter().find(|(a, _)| *a == agent).map(|a| a.1);
                self.at(t + every.map_or(1000, |e| e.0), Event::Sample(agent));
            }
            Event::KoordletReport(i) => {
                if self.pipeline.koordlet_report(i, t) {
                    if self.pipeline.strategy_reads_koordlet() {
                        let v = view(s, &self.nodes, &self.pipeline, i, None);
                        self.strategy.on_metrics(instant(t), &[v]);
                    }
                    if let Some(r) = &mut self.rebalance {
                        r.actor.on_node_report(i, t, &self.pipeline.samples(i)[r.offset..]);
                    }
                }
                if let Some((report, _)) = self.pipeline.koordlet_schedule(i) {
                    self.at(t + report.0, Event::KoordletReport(i));
                }
            }
            Event::Step => {
                self.pipeline.step(t);
                self.at(t + s.pipeline.subquery_step.0, Event::Step);
            }
            Event::Rule(group) => {
                self.pipeline.evaluate(group, t);
                self.at(t + self.pipeline.group_interval(group).0, Event::Rule(group));
            }
            Event::Poll(n) => {
                if self.pipeline.poll(n, t) {
                    match &mut self.rebalance {
                        Some(r) if n >= r.offset => {
                            let range = r.offset..self.pipeline.needs().len();
                            let views: Vec<NodeView<'_>> = (0..self.nodes.len())
                                .map(|i| {
                                    view_of(s, &self.nodes, &self.pipeline, i, None, range.clone())
                                })
                                .collect();
                            r.actor.on_metrics(instant(t), &views);
                        }
                        _ => self.strategy_on_metrics(t),
                    }
                }
                self.at(t + self.pipeline.poll_period(n).0, Event::Poll(n));
            }
            Event::Measure => {
                let utils: Vec<(f64, f64)> =
                    (0..self.nodes.len()).map(|i| self.utilisation(i, t)).collect();
                if let Some(csv) = out.csv.as_mut() {
                    for (node, (cpu, memory)) in s.nodes.iter().zip(&utils) {
                        let _ = writeln!(csv, "{},{},{cpu:.3},{memory:.3}", t / 1000, node.name);
                    }
                }
                self.recorder.record(&utils, self.pending);
                if let Some(r) = &mut self.rebalance
                    && s.load_step.is_some_and(|step| t >= step)
                {
                    let hottest = utils.iter().map(|&(c, m)| c.max(m)).fold(0.0, f64::max);
                    if hottest > s.target + 10.0 {
                        r.last_above_water = Some(t);
                    }
                    if hottest > s.threshold {
                        r.last_above_threshold = Some(t);
                    }
                }
                if let Some(progress) = out.progress.as_mut() {
                    progress(t);
                }
                self.at(t + s.measure_interval.0, Event::Measure);
            }
            Event::Arrive(p) => self.handle_arrive(t, p),
            Event::Retry(p) => {
                if self.pods[p] == PodState::Pending {
                    self.enqueue(t, p);
                }
            }
            Event::Cycle => self.cycle(t),
            Event::Bind(p) => self.bind(t, p),
            Event::WatchBound(p) => {
                self.unwatched -= 1;
                let PodState::Running { node, assigned, start } = self.pods[p] else { return };
                let pod = self.pod(p);
                if self.path == Path::Extender {
                    self.nodes[node].visible.push(PlacedPod {
                        pod: pod.clone(),
                        assigned_at: instant(assigned),
                        bound_at: Some(instant(start)),
                    });
                }
                self.strategy.on_bound(instant(t), &pod, &s.nodes[node].name, instant(start));
                if let Some(r) = &mut self.rebalance {
                    r.actor.on_bound(instant(t), &pod, &s.nodes[node].name, instant(start));
                }
            }
            Event::WatchDeleted(p, node) => {
                let pod = self.pod(p);
                if self.path == Path::Extender {
                    self.nodes[node].visible.retain(|v| v.pod.uid != pod.uid);
                }
                self.strategy.on_deleted(instant(t), &pod, &s.nodes[node].name);
                if let Some(r) = &mut self.rebalance {
                    r.actor.on_deleted(instant(t), &pod, &s.nodes[node].name);
                }
            }
            Event::Delete(p) => self.delete(t, p),
            Event::Recreate(p) => self.recreate(t, p),
            Event::RebalanceRule => {
                let up = !s.pipeline.down_at(t);
                let names: Vec<&str> = s.nodes.iter().map(|n| n.name.as_str()).collect();
                if let Some(r) = &mut self.rebalance {
                    r.actor.on_rule(t, &names, up);
                    if let Some(every) = r.actor.rule_interval() {
                        self.at(t + every.0, Event::RebalanceRule);
                    }
                }
            }
            Event::Deschedule => self.deschedule(t),
        }
    }

    fn handle_arrive(&mut self, t: SimTime, p: usize) {
        if self.pods[p] != PodState::Waiting {
            return;
        }
        self.recorder.arrived += 1;
        match self.specs[p].node.as_deref().and_then(|n| self.node_index(n)) {
            Some(node) => {
                self.assume(t, p, node, false);
                self.bind(t, p);
            }
            None => {
                self.pods[p] = PodState::Pending;
                self.pending += 1;
                self.recorder.to_schedule += 1;
                self.enqueue(t, p);
            }
        }
    }

    /// The collector's refresh of the per-pod summaries: the strategy learns from the
    /// running pods' answers (none while Prometheus is down: it keeps what it has).
    fn pod_refresh(&mut self, t: SimTime) {
        let Some(pods) = &self.pod_series else { return };
        let every = pods.refresh().0.max(1);
        if let Some(answers) = pods.answers(t) {
            let summaries: Vec<PodSummary> = answers
                .into_iter()
                .map(|a| PodSummary { pod: self.pod(a.pod), cpu: a.cpu, memory: a.memory })
                .collect();
            self.strategy.on_pod_usage(instant(t), &summaries);
        }
        self.at(t + every, Event::PodRefresh);
    }

    fn strategy_on_metrics(&mut self, t: SimTime) {
        let s = self.scenario;
        let views: Vec<NodeView<'_>> =
            (0..self.nodes.len()).map(|i| view(s, &self.nodes, &self.pipeline, i, None)).collect();
        self.strategy.on_metrics(instant(t), &views);
    }

    fn cycle(&mut self, t: SimTime) {
        let Some(p) = self.queue.pop_front() else {
            self.cycle_scheduled = false;
            return;
        };
        if !self.queue.is_empty() {
            self.at(t + self.scenario.scheduler.cycle.0.max(1), Event::Cycle);
        } else {
            self.cycle_scheduled = false;
        }
        if self.pods[p] != PodState::Pending {
            return;
        }
        let pod = self.pod(p);
        // NodeResourcesFit's filter: the requests of the scheduler's cache plus this pod.
        let fit: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| {
                self.nodes[i]
                    .requested
                    .plus(pod.requests)
                    .fits_in(self.scenario.nodes[i].allocatable)
            })
            .collect();
        let cycle = Cycle { now: instant(t), path: self.path };
        let chosen = if fit.is_empty() { None } else { self.choose(&cycle, &pod, &fit) };
        match chosen {
            Some(node) => {
                let (cpu, memory) = self.utilisation(node, t);
                if t >= 0 && cpu.max(memory) > self.scenario.threshold {
                    self.recorder.placed_on_hot += 1;
                }
                if let Some(r) = &mut self.rebalance
                    && let Some(from) = r.replaced_from.remove(&p)
                {
                    if cpu.max(memory) > self.scenario.threshold {
                        r.summary.replaced_onto_hot += 1;
                    }
                    if from == node {
                        r.summary.replaced_onto_same_node += 1;
                    }
                }
                if t >= 0 {
                    self.recorder.decided_unwatched(self.unwatched);
                }
                self.assume(t, p, node, true);
                self.at(t + self.scenario.scheduler.bind_delay.0, Event::Bind(p));
            }
            None => {
                self.recorder.unschedulable_attempts += 1;
                self.at(t + self.scenario.scheduler.retry_interval.0, Event::Retry(p));
            }
        }
    }

    /// Filter and Score over the request-feasible nodes; the best wins, ties by the seed.
    fn choose(&mut self, cycle: &Cycle, pod: &SimPod, fit: &[usize]) -> Option<usize> {
        let s = self.scenario;
        let (nodes, pipeline) = (&self.nodes, &self.pipeline);
        let controller = pod.controller.as_deref();
        let make = |i: usize| view(s, nodes, pipeline, i, controller);
        let views: Vec<NodeView<'_>> = fit.iter().map(|&i| make(i)).collect();
        let verdicts = self.strategy.filter(cycle, pod, &views);
        let feasible: Vec<usize> =
            fit.iter().zip(&verdicts).filter(|(_, v)| v.is_none()).map(|(&i, _)| i).collect();
        if feasible.is_empty() {
            return None;
        }
        // kube-scheduler's schedulePod takes a single feasible node without scoring
        // (schedule_one.go, "When only one node after predicate, just use it"): no Score,
        // no extender prioritize — and so no provisional guess on the extender path.
        let ties: Vec<usize> = if feasible.len() == 1 {
            feasible
        } else {
            let views: Vec<NodeView<'_>> = feasible.iter().map(|&i| make(i)).collect();
            let scores = self.strategy.score(cycle, pod, &views);
            let best = scores.iter().copied().max()?;
            feasible.iter().zip(&scores).filter(|(_, s)| **s == best).map(|(&i, _)| i).collect()
        };
        // One draw per decision, however many tie (a single node too), so the seeded
        // stream does not depend on how often a single node was feasible.
        // kube-scheduler's selectHost picks uniformly among the best (reservoir sampling).
        Some(ties[self.rng.random_range(0..ties.len())])
    }

    fn assume(&mut self, t: SimTime, p: usize, node: usize, scheduled: bool) {
        let pod = self.pod(p);
        let n = &mut self.nodes[node];
        n.requested = n.requested.plus(pod.requests);
        n.non_zero = n.non_zero.plus(nz(pod.requests));
        if let Some(c) = &pod.controller {
            *n.controllers.entry(c.clone()).or_default() += 1;
        }
        if self.pods[p] == PodState::Pending {
            self.pending -= 1;
        }
        self.pods[p] = PodState::Assumed { node, at: t };
        self.unwatched += 1;
        if scheduled {
            if t >= 0 {
                n.received = true;
                n.placements += 1;
            }
            self.recorder.placed += 1;
        }
        if self.path == Path::Plugin {
            n.visible.push(PlacedPod { pod: pod.clone(), assigned_at: instant(t), bound_at: None });
            if scheduled {
                self.strategy.on_reserve(instant(t), &pod, &self.scenario.nodes[node].name);
            }
        }
    }

    fn bind(&mut self, t: SimTime, p: usize) {
        let PodState::Assumed { node, at } = self.pods[p] else { return };
        self.pods[p] = PodState::Running { node, assigned: at, start: t };
        let n = &mut self.nodes[node];
        n.running.push((p, t));
        let uid = &self.specs[p].pod.uid;
        if let Some(v) = n.visible.iter_mut().find(|v| &v.pod.uid == uid) {
            v.bound_at = Some(instant(t));
        }
        self.at(t + self.scenario.scheduler.watch_lag.0, Event::WatchBound(p));
    }

    fn delete(&mut self, t: SimTime, p: usize) {
        let node = match self.pods[p] {
            PodState::Waiting | PodState::Pending | PodState::Gone => {
                if self.pods[p] == PodState::Pending {
                    self.pending -= 1;
                }
                self.pods[p] = PodState::Gone;
                return;
            }
            PodState::Assumed { node, .. } => {
                // never bound: no watch delivery will come for it
                self.unwatched -= 1;
                node
            }
            PodState::Running { node, .. } => node,
        };
        self.pods[p] = PodState::Gone;
        let pod = self.pod(p);
        let n = &mut self.nodes[node];
        n.requested = n.requested.minus(pod.requests);
        n.non_zero = n.non_zero.minus(nz(pod.requests));
        if let Some(c) = &pod.controller
            && let Some(count) = n.controllers.get_mut(c)
        {
            *count -= 1;
        }
        n.running.retain(|&(q, _)| q != p);
        if let Some(pods) = &mut self.pod_series {
            pods.stop(p);
        }
        if self.path == Path::Plugin {
            n.visible.retain(|v| v.pod.uid != pod.uid);
        }
        self.at(t + self.scenario.scheduler.watch_lag.0, Event::WatchDeleted(p, node));
    }

    /// One descheduling cycle: the actor reads its signal and the bound pods; each pod it
    /// evicts is deleted now and recreated by its controller `RECREATE_DELAY` later.
    fn deschedule(&mut self, t: SimTime) {
        let s = self.scenario;
        let Some(mut r) = self.rebalance.take() else { return };
        let mut replicas: HashMap<String, usize> = HashMap::new();
        for (p, state) in self.pods.iter().enumerate() {
            if matches!(state, PodState::Waiting | PodState::Gone) {
                continue;
            }
            if let Some(c) = &self.specs[p].pod.controller {
                *replicas.entry(c.clone()).or_default() += 1;
            }
        }
        let nodes = (0..self.nodes.len())
            .map(|i| crate::rebalance::NodeState {
                name: &s.nodes[i].name,
                allocatable: s.nodes[i].allocatable,
                requested: self.nodes[i].requested,
                pods: self.nodes[i]
                    .running
                    .iter()
                    .map(|&(p, start)| {
                        let spec = &self.specs[p];
                        crate::rebalance::BoundPod {
                            index: p,
                            pod: &spec.pod,
                            created: spec.arrival,
                            usage: spec.usage.at(t - start, t, spec.pod.limits),
                        }
                    })
                    .collect(),
            })
            .collect();
        let cluster = crate::rebalance::ClusterState {
            now: t,
            nodes,
            replicas,
            prometheus_up: !s.pipeline.down_at(t),
        };
        let outcome = r.actor.cycle(&cluster);
        drop(cluster);
        r.summary.cycles += 1;
        r.summary.cycles_failed += usize::from(outcome.failed);
        let outage = s.pipeline.down_at(t) || s.pipeline.koordlet_down_at(t);
        for p in outcome.evict {
            let PodState::Running { node, .. } = self.pods[p] else { continue };
            r.summary.evictions += 1;
            r.summary.evictions_during_outage += usize::from(outage);
            r.evicted_from.insert(p, node);
            self.delete(t, p);
            self.at(t + RECREATE_DELAY, Event::Recreate(p));
        }
        self.at(t + r.actor.interval().0.max(1), Event::Deschedule);
        self.rebalance = Some(r);
    }

    /// The controller of evicted pod `p` creates its replacement: a new pod of the same
    /// template (requests, limits, labels, controller, usage profile) that the scheduler
    /// places; it keeps the workload's end (`deletion`).
    fn recreate(&mut self, t: SimTime, p: usize) {
        let Some(r) = &mut self.rebalance else { return };
        let old = &self.specs[p];
        let mut pod = (*old.pod).clone();
        pod.uid = format!("{}-r{}", pod.uid, self.specs.len());
        pod.name = format!("{}-r{}", pod.name, self.specs.len());
        let spec = crate::scenario::PodSpec {
            pod: Arc::new(pod),
            arrival: t,
            deletion: old.deletion.filter(|&d| d > t),
            node: None,
            usage: old.usage.clone(),
            series_recorded: old.series_recorded,
        };
        let q = self.specs.len();
        if let Some(from) = r.evicted_from.remove(&p) {
            r.replaced_from.insert(q, from);
        }
        let deletion = spec.deletion;
        self.specs.push(spec);
        self.pods.push(PodState::Waiting);
        self.handle_arrive(t, q);
        if let Some(d) = deletion {
            self.at(d, Event::Delete(q));
        }
    }
}

#[cfg(test)]
mod tests;
