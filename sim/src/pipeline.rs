//! The metrics pipeline between true usage and a strategy's view, modelled on what
//! Prometheus and the collector do (docs/design.md, deploy/prometheus/rules.yml):
//!
//! 1. **scrape** every `scrapeInterval`: node-exporter's busy-cpu-seconds counter (the
//!    integral of usage, trapezoids between scrapes) and the memory gauge;
//! 2. **recording rules** every `ruleInterval`: cpu `rate(counter[window])` — the counter's
//!    increase over the samples inside `(T − window, T]` divided by their time span, no
//!    extrapolation — and memory `avg_over_time(gauge[window])`, in percent of allocatable;
//!    a window with fewer than two cpu samples (one memory sample) yields no value;
//! 3. **maxima** `max_over_time((avg)[over:step])`: the average evaluated at every
//!    `subqueryStep`-aligned instant, the maximum over `(T − over, T]`, every
//!    `hourRuleInterval` (1 h) or `dayRuleInterval` (longer);
//! 4. **polls** by the strategy's collector every metric's period: an instant query returns
//!    the latest rule output within Prometheus' 5 m lookback, stamped with the query time.
//!
//! `delay` shifts what every query sees into the past; an outage stops scrapes, rules and
//! polls, so samples age in the strategy's view until it ends.
//!
//! The per-pod usage series the learned estimate reads are `pods.rs`'s, on the same scrape
//! interval, delay and outages.
//!
//! Needs of the agents that bypass Prometheus (koordlet, metrics-server) are served by
//! `agent.rs` from their own samples; Prometheus' delay and outages do not touch them.

pub mod agent;
pub mod pods;

use std::collections::VecDeque;

use waterline_core::{Millis, Sample};

use crate::model::{Resources, SimTime, instant};
use crate::scenario::Pipeline;
use crate::strategy::{MetricKind, MetricNeed, Resource};
use agent::{AgentSeries, report_phase};

/// Prometheus' default lookback delta: an instant query finds a series' latest point only
/// when it is at most this old.
const LOOKBACK: SimTime = 5 * 60_000;

/// The agents that sample nodes themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Agent {
    Koordlet,
    MetricsServer,
}

/// An agent's samples and how it was declared.
struct AgentState {
    series: AgentSeries,
    /// The sampling interval (koordlet's collection, metrics-server's resolution).
    every: Millis,
    /// koordlet: (report interval, aggregation window).
    report: Option<(Millis, Millis)>,
}

/// The rule groups, each with its own interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RuleGroup {
    Avg,
    Hour,
    Day,
}

#[derive(Clone, Copy, Debug)]
struct Scrape {
    t: SimTime,
    /// Busy cpu, millicore-milliseconds since the series started.
    cpu_counter: f64,
    memory_bytes: f64,
}

/// The 5 m (or other window) average at one subquery step.
#[derive(Clone, Copy, Debug)]
struct Step {
    t: SimTime,
    cpu: Option<f64>,
    memory: Option<f64>,
}

#[derive(Default)]
struct NodeSeries {
    scrapes: VecDeque<Scrape>,
    /// Last scrape's instant usage, for the counter's trapezoid.
    last: Option<(SimTime, f64)>,
    counter: f64,
    /// Per distinct MaxOfAvg window.
    steps: Vec<VecDeque<Step>>,
    /// Per need: the latest rule output and when it was evaluated.
    rules: Vec<Option<(f64, SimTime)>>,
    /// Per need: what the collector last got (the strategy's view).
    samples: Vec<Option<Sample>>,
}

pub struct MetricsPipeline {
    config: Pipeline,
    needs: Vec<MetricNeed>,
    /// The distinct windows the maxima average over; `step_of[need]` indexes it.
    step_windows: Vec<Millis>,
    step_of: Vec<Option<usize>>,
    allocatable: Vec<Resources>,
    nodes: Vec<NodeSeries>,
    keep_scrapes: SimTime,
    keep_steps: SimTime,
    koordlet: Option<AgentState>,
    metrics_server: Option<AgentState>,
    seed: u64,
    /// The first this many needs are the strategy's (the rest a rebalancing actor's).
    strategy_needs: usize,
}

/// The window a Prometheus rule averages over (0 for the agents' kinds).
fn window_of(kind: MetricKind) -> Millis {
    match kind {
        MetricKind::Avg { window }
        | MetricKind::MaxOfAvg { window, .. }
        | MetricKind::MeanPlusSigma { window, .. } => window,
        MetricKind::Koordlet { .. } | MetricKind::MetricsServer { .. } => Millis(0),
    }
}

impl MetricsPipeline {
    /// `seed` places each node's koordlet reports on its own clock.
    pub fn new(
        config: Pipeline,
        needs: Vec<MetricNeed>,
        allocatable: Vec<Resources>,
        seed: u64,
    ) -> Self {
        let mut step_windows: Vec<Millis> = Vec::new();
        let step_of = needs
            .iter()
            .map(|n| match n.kind {
                MetricKind::MaxOfAvg { window, .. } | MetricKind::MeanPlusSigma { window, .. } => {
                    Some(step_windows.iter().position(|w| *w == window).unwrap_or_else(|| {
                        step_windows.push(window);
                        step_windows.len() - 1
                    }))
                }
                _ => None,
            })
            .collect();
        let max_window = needs.iter().map(|n| window_of(n.kind).0).max().unwrap_or(0);
        let max_over = needs
            .iter()
            .filter_map(|n| match n.kind {
                MetricKind::MaxOfAvg { over, .. } | MetricKind::MeanPlusSigma { over, .. } => {
                    Some(over.0)
                }
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let keep_scrapes = max_window + config.delay.0 + config.scrape_interval.0;
        let keep_steps = max_over + config.delay.0 + config.subquery_step.0;
        let nodes = allocatable
            .iter()
            .map(|_| NodeSeries {
                steps: vec![VecDeque::new(); step_windows.len()],
                rules: vec![None; needs.len()],
                samples: vec![None; needs.len()],
                ..NodeSeries::default()
            })
            .collect();
        let n = allocatable.len();
        let needs_len = needs.len();
        let koordlet = needs.iter().find_map(|need| match need.kind {
            MetricKind::Koordlet { collect, report, window } => Some(AgentState {
                series: AgentSeries::new(n, window),
                every: collect,
                report: Some((report, window)),
            }),
            _ => None,
        });
        let metrics_server = needs.iter().find_map(|need| match need.kind {
            MetricKind::MetricsServer { resolution } => Some(AgentState {
                // the last two scrapes
                series: AgentSeries::new(n, Millis(2 * resolution.0 + 1)),
                every: resolution,
                report: None,
            }),
            _ => None,
        });
        MetricsPipeline {
            config,
            needs,
            step_windows,
            step_of,
            allocatable,
            nodes,
            keep_scrapes,
            keep_steps,
            koordlet,
            metrics_server,
            seed,
            strategy_needs: needs_len,
        }
    }

    /// Whether any need is computed by Prometheus (else nothing needs scraping).
    pub fn uses_prometheus(&self) -> bool {
        self.needs.iter().any(|n| n.kind.from_prometheus())
    }

    /// Whether need `n` is polled by the strategy's collector (koordlet pushes instead).
    pub fn is_polled(&self, n: usize) -> bool {
        !matches!(self.needs[n].kind, MetricKind::Koordlet { .. })
    }

    /// The agents in use and their sampling intervals.
    pub fn agents(&self) -> Vec<(Agent, Millis)> {
        let mut out = Vec::new();
        if let Some(k) = &self.koordlet {
            out.push((Agent::Koordlet, k.every));
        }
        if let Some(m) = &self.metrics_server {
            out.push((Agent::MetricsServer, m.every));
        }
        out
    }

    /// An agent samples every node's instant usage at `t`.
    pub fn sample(&mut self, agent: Agent, t: SimTime, usage: &[(f64, f64)]) {
        let state = match agent {
            Agent::Koordlet => self.koordlet.as_mut(),
            Agent::MetricsServer => self.metrics_server.as_mut(),
        };
        if let Some(state) = state {
            state.series.record(t, usage);
        }
    }

    /// koordlet's report interval and node `i`'s phase in it, when koordlet is in use.
    pub fn koordlet_schedule(&self, i: usize) -> Option<(Millis, SimTime)> {
        let (report, _) = self.koordlet.as_ref()?.report?;
        Some((report, report_phase(self.seed, i, report)))
    }

    /// Node `i`'s koordlet writes its NodeMetric at `t`: every koordlet need's sample of
    /// that node is replaced. False when nothing was written (a gap, or no sample yet).
    pub fn koordlet_report(&mut self, i: usize, t: SimTime) -> bool {
        if self.config.koordlet_down_at(t) {
            return false;
        }
        let Some(state) = &self.koordlet else { return false };
        let Some((_, window)) = state.report else { return false };
        let Some((cpu, memory)) = state.series.mean(i, t, window, self.allocatable[i]) else {
            return false;
        };
        for (n, need) in self.needs.iter().enumerate() {
            if matches!(need.kind, MetricKind::Koordlet { .. }) {
                let value = pick(need.resource, Some(cpu), Some(memory)).unwrap_or(0.0);
                self.nodes[i].samples[n] = Some(Sample { value, at: instant(t) });
            }
        }
        true
    }

    /// How many of the needs are the strategy's (the rest belong to a rebalancing actor).
    pub fn strategy_needs(&self) -> usize {
        self.strategy_needs
    }

    pub fn set_strategy_needs(&mut self, n: usize) {
        self.strategy_needs = n.min(self.needs.len());
    }

    /// Whether the strategy itself reads koordlet's NodeMetric.
    pub fn strategy_reads_koordlet(&self) -> bool {
        self.needs[..self.strategy_needs]
            .iter()
            .any(|n| matches!(n.kind, MetricKind::Koordlet { .. }))
    }

    pub fn needs(&self) -> &[MetricNeed] {
        &self.needs
    }

    pub fn config(&self) -> &Pipeline {
        &self.config
    }

    /// The strategy's view of node `i`.
    pub fn samples(&self, node: usize) -> &[Option<Sample>] {
        &self.nodes[node].samples
    }

    /// Whether any need uses the given rule group.
    pub fn uses(&self, group: RuleGroup) -> bool {
        self.needs.iter().any(|n| self.group_of(n.kind) == Some(group))
    }

    pub fn uses_steps(&self) -> bool {
        !self.step_windows.is_empty()
    }

    pub fn group_interval(&self, group: RuleGroup) -> Millis {
        match group {
            RuleGroup::Avg => self.config.rule_interval,
            RuleGroup::Hour => self.config.hour_rule_interval,
            RuleGroup::Day => self.config.day_rule_interval,
        }
    }

    fn group_of(&self, kind: MetricKind) -> Option<RuleGroup> {
        match kind {
            MetricKind::Avg { .. } => Some(RuleGroup::Avg),
            MetricKind::MaxOfAvg { over, .. } | MetricKind::MeanPlusSigma { over, .. }
                if over.0 <= 3_600_000 =>
            {
                Some(RuleGroup::Hour)
            }
            MetricKind::MaxOfAvg { .. } | MetricKind::MeanPlusSigma { .. } => Some(RuleGroup::Day),
            MetricKind::Koordlet { .. } | MetricKind::MetricsServer { .. } => None,
        }
    }

    /// A scrape at `t` of every node's instant usage (cpu millicores, memory bytes).
    pub fn scrape(&mut self, t: SimTime, usage: &[(f64, f64)]) {
        if self.config.down_at(t) {
            // Prometheus is down: nothing is recorded, and the counter's next increase is
            // measured from the next scrape it does see.
            for node in &mut self.nodes {
                node.last = None;
            }
            return;
        }
        for (node, &(cpu, memory)) in self.nodes.iter_mut().zip(usage) {
            if let Some((t0, cpu0)) = node.last {
                node.counter += (cpu0 + cpu) / 2.0 * (t - t0) as f64;
            }
            node.last = Some((t, cpu));
            node.scrapes.push_back(Scrape { t, cpu_counter: node.counter, memory_bytes: memory });
            while node.scrapes.front().is_some_and(|s| s.t <= t - self.keep_scrapes) {
                node.scrapes.pop_front();
            }
        }
    }

    /// The average over `(at − window, at]` of node `i`, in percent: (cpu, memory).
    fn average(&self, i: usize, at: SimTime, window: Millis) -> (Option<f64>, Option<f64>) {
        let node = &self.nodes[i];
        let alloc = self.allocatable[i];
        let inside: Vec<&Scrape> =
            node.scrapes.iter().filter(|s| s.t > at - window.0 && s.t <= at).collect();
        let cpu = match (inside.first(), inside.last()) {
            (Some(a), Some(b)) if b.t > a.t => {
                let rate = (b.cpu_counter - a.cpu_counter) / (b.t - a.t) as f64;
                Some(rate * 100.0 / alloc.cpu_millis as f64)
            }
            _ => None,
        };
        let memory = (!inside.is_empty()).then(|| {
            let mean = inside.iter().map(|s| s.memory_bytes).sum::<f64>() / inside.len() as f64;
            mean * 100.0 / alloc.memory_bytes as f64
        });
        (cpu, memory)
    }

    /// A subquery step at `t`: records every node's average for the maxima.
    pub fn step(&mut self, t: SimTime) {
        for i in 0..self.nodes.len() {
            for w in 0..self.step_windows.len() {
                let (cpu, memory) = self.average(i, t, self.step_windows[w]);
                let steps = &mut self.nodes[i].steps[w];
                steps.push_back(Step { t, cpu, memory });
                while steps.front().is_some_and(|s| s.t <= t - self.keep_steps) {
                    steps.pop_front();
                }
            }
        }
    }

    /// Evaluates the rules of `group` at `t`.
    pub fn evaluate(&mut self, group: RuleGroup, t: SimTime) {
        if self.config.down_at(t) {
            return;
        }
        let seen = t - self.config.delay.0;
        for n in 0..self.needs.len() {
            let need = self.needs[n].clone();
            if self.group_of(need.kind) != Some(group) {
                continue;
            }
            for i in 0..self.nodes.len() {
                let value = match need.kind {
                    MetricKind::Avg { window } => {
                        let (cpu, memory) = self.average(i, seen, window);
                        pick(need.resource, cpu, memory)
                    }
                    MetricKind::MaxOfAvg { over, .. } => {
                        let w = self.step_of[n].expect("maxima have a step series");
                        self.nodes[i].steps[w]
                            .iter()
                            .filter(|s| s.t > seen - over.0 && s.t <= seen)
                            .filter_map(|s| pick(need.resource, s.cpu, s.memory))
                            .reduce(f64::max)
                    }
                    MetricKind::MeanPlusSigma { over, sigmas_x10, .. } => {
                        let w = self.step_of[n].expect("the headroom metric has a step series");
                        let values: Vec<f64> = self.nodes[i].steps[w]
                            .iter()
                            .filter(|s| s.t > seen - over.0 && s.t <= seen)
                            .filter_map(|s| pick(need.resource, s.cpu, s.memory))
                            .collect();
                        mean_plus_sigma(&values, sigmas_x10 as f64 / 10.0)
                    }
                    MetricKind::Koordlet { .. } | MetricKind::MetricsServer { .. } => None,
                };
                if let Some(v) = value {
                    self.nodes[i].rules[n] = Some((v, t));
                }
            }
        }
    }

    /// The collector polls need `n` at `t`; false when its source did not answer.
    pub fn poll(&mut self, n: usize, t: SimTime) -> bool {
        if let MetricKind::MetricsServer { .. } = self.needs[n].kind {
            return self.poll_metrics_server(n, t);
        }
        if self.config.down_at(t) {
            return false;
        }
        for node in &mut self.nodes {
            if let Some((value, evaluated)) = node.rules[n]
                && t - evaluated <= LOOKBACK
            {
                node.samples[n] = Some(Sample { value, at: instant(t) });
            }
        }
        true
    }

    /// metrics-server answers from its last two scrapes, Prometheus or not.
    fn poll_metrics_server(&mut self, n: usize, t: SimTime) -> bool {
        let Some(state) = &self.metrics_server else { return false };
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if let Some((cpu, memory)) = state.series.latest_rate(i, self.allocatable[i]) {
                let value = pick(self.needs[n].resource, Some(cpu), Some(memory)).unwrap_or(0.0);
                node.samples[n] = Some(Sample { value, at: instant(t) });
            }
        }
        true
    }

    /// The poll period of need `n` (the scenario may override every period).
    pub fn poll_period(&self, n: usize) -> Millis {
        self.config.poll_override.unwrap_or(self.needs[n].poll)
    }
}

/// `avg_over_time + k · stddev_over_time` (population deviation, as PromQL's); `None`
/// without values.
fn mean_plus_sigma(values: &[f64], k: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    Some(mean + k * var.sqrt())
}

fn pick(resource: Resource, cpu: Option<f64>, memory: Option<f64>) -> Option<f64> {
    match resource {
        Resource::Cpu => cpu,
        Resource::Memory => memory,
    }
}

#[cfg(test)]
mod tests;
