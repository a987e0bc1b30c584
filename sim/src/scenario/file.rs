//! The scenario file (YAML, documented in sim/README.md). Parsed with serde_path_to_error so
//! a bad value is reported with its path and line (`nodeGroups[0].cpu: … (line 7)`), as
//! core's policy file is; generators are expanded here with the scenario's seed. The file's
//! shape is `schema.rs`; this module turns it into a [`Scenario`], one section at a time.

mod schema;

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use waterline_core::Millis;
use waterline_core::yaml::{ByteQuantity, CpuQuantity};

use super::volatile::{Dwell, Volatile};
use super::*;
use crate::model::{Resources, SimPod};
use schema::*;

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid scenario: {0}")]
pub struct ScenarioError(pub String);

fn series<V: Copy>(points: &Option<PointsFile<V>>, value: impl Fn(V) -> f64) -> Option<Series> {
    points.as_ref().map(|p| Series(p.iter().map(|(t, v)| (t.0.0, value(*v))).collect()))
}

impl DwellFile {
    fn resolve(&self) -> Dwell {
        match self {
            DwellFile::LogNormal(d) => Dwell::LogNormal { median: d.median.0, sigma: d.sigma },
            DwellFile::Pareto(d) => Dwell::Pareto { min: d.min.0, alpha: d.alpha },
        }
    }
}

impl VolatileFile {
    fn resolve(&self, rng: &mut StdRng) -> Volatile {
        let noise = self.noise.as_ref();
        Volatile {
            idle: (self.idle.cpu.draw(rng), self.idle.memory.draw(rng)),
            busy: (self.busy.cpu.draw(rng), self.busy.memory.draw(rng)),
            idle_dwell: self.idle_dwell.resolve(),
            busy_dwell: self.busy_dwell.resolve(),
            max_dwell: self.max_dwell.map_or(Millis::from_mins(6 * 60), |d| d.0),
            ramp: self.ramp.map_or(Millis::from_mins(1), |d| d.0),
            noise: (
                noise.and_then(|n| n.cpu).unwrap_or(0.0),
                noise.and_then(|n| n.memory).unwrap_or(0.0),
            ),
            correlation: noise.and_then(|n| n.correlation).map_or(Millis::from_mins(5), |d| d.0),
            step: self.step.map_or(Millis::from_secs(30), |d| d.0),
        }
    }

    /// Errors in values serde accepted: named by field, at the line of `needle`.
    fn check(&self, at: &Located<'_>, field: &str) -> Result<(), ScenarioError> {
        for (name, dwell) in [("idleDwell", &self.idle_dwell), ("busyDwell", &self.busy_dwell)] {
            let bad = match dwell {
                DwellFile::LogNormal(d) => d.median.0.0 <= 0 || d.sigma < 0.0,
                DwellFile::Pareto(d) => d.min.0.0 <= 0 || d.alpha <= 0.0,
            };
            if bad {
                let message = "median / min must be longer than zero, sigma ≥ 0, alpha > 0";
                return Err(at.error(&format!("{field}.volatile.{name}"), message, name));
            }
        }
        if self.step.is_some_and(|s| s.0.0 < 1000) {
            let message = "must be at least 1s";
            return Err(at.error(&format!("{field}.volatile.step"), message, "step:"));
        }
        Ok(())
    }
}

impl BackgroundFile {
    /// `span`: the run from the start of the warm-up to the end, which a volatile
    /// background's series covers.
    fn resolve(&self, rng: &mut StdRng, span: (SimTime, SimTime)) -> Background {
        let (mut cpu_series, mut memory_series) = (
            self.series.as_ref().and_then(|s| series(&s.cpu, |v| v)),
            self.series.as_ref().and_then(|s| series(&s.memory, |v| v)),
        );
        if let Some(v) = &self.volatile {
            let (cpu, memory) = v.resolve(rng).generate(rng, span.0, span.1);
            cpu_series = Some(cpu);
            memory_series = Some(memory);
        }
        Background {
            cpu_pct: self.cpu.map_or(0.0, |l| l.draw(rng)),
            memory_pct: self.memory.map_or(0.0, |l| l.draw(rng)),
            diurnal: self.diurnal.as_ref().map(DiurnalFile::resolve),
            cpu_series,
            memory_series,
        }
    }

    fn check(&self, at: &Located<'_>, field: &str) -> Result<(), ScenarioError> {
        if let Some(v) = &self.volatile {
            if self.series.is_some() {
                let message = "give `series` or `volatile`, not both";
                return Err(at.error(&format!("{field}.volatile"), message, "volatile"));
            }
            v.check(at, field)?;
        }
        Ok(())
    }
}

const NO_REQUEST_CPU: f64 = 100.0;
const NO_REQUEST_MEMORY: f64 = 128.0 * 1024.0 * 1024.0;

fn resolve_usage(usage: Option<&UsageFile>, requests: Resources, rng: &mut StdRng) -> PodUsage {
    let base = |r: i64, none: f64| if r > 0 { r as f64 } else { none };
    let Some(u) = usage else {
        return PodUsage {
            cpu_millis: base(requests.cpu_millis, NO_REQUEST_CPU),
            memory_bytes: base(requests.memory_bytes, NO_REQUEST_MEMORY),
            ramp: Millis::from_mins(1),
            ..PodUsage::default()
        };
    };
    PodUsage {
        cpu_millis: u.cpu.map_or(1.0, |l| l.draw(rng)) * base(requests.cpu_millis, NO_REQUEST_CPU),
        memory_bytes: u.memory.map_or(1.0, |l| l.draw(rng))
            * base(requests.memory_bytes, NO_REQUEST_MEMORY),
        ramp: u.ramp_up.map_or(Millis::from_mins(1), |d| d.0),
        diurnal: u.diurnal.as_ref().map(DiurnalFile::resolve),
        cpu_series: u.series.as_ref().and_then(|s| series(&s.cpu, |c: CpuQuantity| c.0 as f64)),
        memory_series: u
            .series
            .as_ref()
            .and_then(|s| series(&s.memory, |b: ByteQuantity| b.0 as f64)),
        cpu_step: u.step.as_ref().map(|s| (s.at.0.0, s.cpu.max(0.0))),
    }
}

/// The line of the `nth` line containing `needle`, for errors found after parsing.
fn at_line(text: &str, needle: &str, nth: usize) -> String {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .nth(nth)
        .map(|(i, _)| format!(" (line {})", i + 1))
        .unwrap_or_default()
}

/// Who owns a pod: the controlling owner's kind and name as the API shows them.
#[derive(Clone)]
struct Owner {
    kind: String,
    name: Option<String>,
}

/// The Deployment controller's label on a ReplicaSet and its pods; the ReplicaSet is named
/// `<deployment>-<hash>` (core's `WorkloadKey::of` reads both).
const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// A pod group's stand-in for the Deployment controller's template hash: ten characters of
/// its alphabet (apimachinery's `rand.SafeEncodeString`) from an FNV-1a hash of the group,
/// so a group keeps its ReplicaSet name from run to run and two groups never share one.
fn template_hash(namespace: &str, prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in namespace.bytes().chain([b'/']).chain(prefix.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (0..10)
        .map(|_| {
            let c = ALPHABET[(h % ALPHABET.len() as u64) as usize] as char;
            h /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// A pod group's owner: a ReplicaSet `<workload>-<hash>` of the Deployment `workload` with
/// the template-hash label, or the `ownerKind` controller called `workload`.
fn group_owner(
    namespace: &str,
    group: &PodGroupFile,
    labels: &mut BTreeMap<String, String>,
) -> Owner {
    let kind = group.owner_kind.clone().unwrap_or_else(|| "ReplicaSet".into());
    let workload = group.workload.clone().unwrap_or_else(|| group.prefix.clone());
    let name = if kind == "ReplicaSet" {
        let hash = template_hash(namespace, &group.prefix);
        let name = format!("{workload}-{hash}");
        labels.insert(POD_TEMPLATE_HASH.into(), hash);
        name
    } else {
        workload
    };
    Owner { kind, name: Some(name) }
}

fn pod_object(
    name: String,
    namespace: String,
    cpu: Option<CpuQuantity>,
    memory: Option<ByteQuantity>,
    limits: Option<&LimitsFile>,
    owner: Owner,
    labels: BTreeMap<String, String>,
) -> SimPod {
    // helper.DefaultSelector (kube-scheduler): Services, ReplicationControllers, ReplicaSets
    // and StatefulSets select a pod for the default spread constraints; DaemonSets do not.
    let spreads = ["ReplicaSet", "StatefulSet", "ReplicationController"].contains(&&*owner.kind);
    SimPod {
        uid: format!("{namespace}/{name}"),
        controller: owner.name.as_ref().filter(|_| spreads).map(|o| format!("{namespace}/{o}")),
        owner_name: owner.name.unwrap_or_default(),
        namespace,
        name,
        labels,
        owner_kind: owner.kind,
        requests: Resources::new(cpu.map_or(0, |c| c.0), memory.map_or(0, |b| b.0)),
        limits: Resources::new(
            limits.and_then(|l| l.cpu).map_or(0, |c| c.0),
            limits.and_then(|l| l.memory).map_or(0, |b| b.0),
        ),
    }
}

/// A workload's name becomes a controller's: a DNS-1123 label (lowercase letters, digits
/// and '-', a letter or digit at each end) short enough for the ReplicaSet's hash suffix.
fn check_workload(at: &Located<'_>, g: usize, workload: &str) -> Result<(), ScenarioError> {
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok = !workload.is_empty()
        && workload.len() <= 52
        && workload.chars().all(|c| alphanumeric(c) || c == '-')
        && workload.starts_with(alphanumeric)
        && workload.ends_with(alphanumeric);
    if ok {
        return Ok(());
    }
    Err(at.error(
        &format!("podGroups[{g}].workload"),
        &format!(
            "'{workload}' is not a controller name: 1 to 52 lowercase letters, digits and '-', \
             starting and ending with a letter or digit"
        ),
        &format!("workload: {workload}"),
    ))
}

/// Errors found after parsing name the field and the first line holding `needle`.
struct Located<'t> {
    text: &'t str,
}

impl Located<'_> {
    fn error(&self, field: &str, message: &str, needle: &str) -> ScenarioError {
        ScenarioError(format!("{field}: {message}{}", at_line(self.text, needle, 0)))
    }
}

/// Parses a scenario and expands its generators; `seed` overrides the file's.
pub fn parse_scenario(text: &str, seed: Option<u64>) -> Result<Scenario, ScenarioError> {
    let deserializer = serde_yaml::Deserializer::from_str(text);
    let file: ScenarioFile = serde_path_to_error::deserialize(deserializer)
        .map_err(|e| ScenarioError(waterline_core::yaml::describe(text, e)))?;
    let at = Located { text };
    let seed = seed.or(file.seed).unwrap_or(1);
    let mut rng = StdRng::seed_from_u64(seed);
    if file.duration.0.0 <= 0 {
        return Err(at.error("duration", "must be longer than zero", "duration:"));
    }
    let pipeline = pipeline(&at, file.pipeline.unwrap_or_default(), file.koordlet)?;
    let scheduler = scheduler(&at, file.scheduler.unwrap_or_default())?;
    let warmup = file.warmup.map_or(Millis::from_mins(60), |w| w.0);
    let span = (-warmup.0, file.duration.0.0);
    let (groups, listed) = (file.node_groups.unwrap_or_default(), file.nodes.unwrap_or_default());
    let nodes = nodes(&at, groups, listed, span, &mut rng)?;
    let mut pods = pod_groups(&at, file.pod_groups.unwrap_or_default(), &mut rng)?;
    pods.extend(explicit_pods(&at, file.pods.unwrap_or_default(), &nodes, &mut rng)?);
    for (i, p) in pods.iter().enumerate() {
        if pods[..i].iter().any(|q| q.pod.uid == p.pod.uid) {
            return Err(at.error("pods", &format!("'{}' is named twice", p.pod.uid), &p.pod.name));
        }
    }
    pods.sort_by_key(|p| p.arrival);

    Ok(Scenario {
        name: file.name,
        description: file.description.unwrap_or_default(),
        seed,
        duration: file.duration.0,
        warmup,
        threshold: file.threshold.unwrap_or(65.0),
        target: file.target.unwrap_or(40.0),
        measure_interval: file.measure_interval.map_or(Millis::from_secs(30), |m| m.0),
        pipeline,
        scheduler,
        nodes,
        pods,
        load_step: file.load_step.map(|d| d.0.0),
    })
}

/// `pipeline:` (Prometheus and the collector, with the defaults of [`Pipeline::default`])
/// and `koordlet:`'s report gaps.
fn pipeline(
    at: &Located<'_>,
    p: PipelineFile,
    koordlet: Option<KoordletFile>,
) -> Result<Pipeline, ScenarioError> {
    let spans = |o: Option<Vec<OutageFile>>| -> Vec<(SimTime, SimTime)> {
        o.unwrap_or_default().iter().map(|o| (o.from.0.0, o.to.0.0)).collect()
    };
    let d = Pipeline::default();
    let pipeline = Pipeline {
        scrape_interval: p.scrape_interval.map_or(d.scrape_interval, |x| x.0),
        rule_interval: p.rule_interval.map_or(d.rule_interval, |x| x.0),
        hour_rule_interval: p.hour_rule_interval.map_or(d.hour_rule_interval, |x| x.0),
        day_rule_interval: p.day_rule_interval.map_or(d.day_rule_interval, |x| x.0),
        subquery_step: p.subquery_step.map_or(d.subquery_step, |x| x.0),
        pod_rule_interval: p.pod_rule_interval.map_or(d.pod_rule_interval, |x| x.0),
        delay: p.delay.map_or(d.delay, |x| x.0),
        poll_override: p.poll_period.map(|x| x.0),
        outages: spans(p.outages),
        koordlet_gaps: spans(koordlet.and_then(|k| k.gaps)),
    };
    for (field, span) in [
        ("pipeline.scrapeInterval", pipeline.scrape_interval),
        ("pipeline.ruleInterval", pipeline.rule_interval),
        ("pipeline.hourRuleInterval", pipeline.hour_rule_interval),
        ("pipeline.dayRuleInterval", pipeline.day_rule_interval),
        ("pipeline.subqueryStep", pipeline.subquery_step),
        ("pipeline.podRuleInterval", pipeline.pod_rule_interval),
    ] {
        if span.0 <= 0 {
            let key = field.rsplit('.').next().unwrap_or(field);
            return Err(at.error(field, "must be longer than zero", key));
        }
    }
    if pipeline.poll_override.is_some_and(|x| x.0 <= 0) {
        return Err(at.error("pipeline.pollPeriod", "must be longer than zero", "pollPeriod"));
    }
    Ok(pipeline)
}

/// `scheduler:`: the path and the loop's timing, with the defaults of [`Scheduler::default`].
fn scheduler(at: &Located<'_>, s: SchedulerFile) -> Result<Scheduler, ScenarioError> {
    let d = Scheduler::default();
    let scheduler = Scheduler {
        path: match s.path {
            None | Some(PathFile::Plugin) => Path::Plugin,
            Some(PathFile::Extender) => Path::Extender,
        },
        cycle: s.cycle.map_or(d.cycle, |x| x.0),
        bind_delay: s.bind_delay.map_or(d.bind_delay, |x| x.0),
        watch_lag: s.watch_lag.map_or(d.watch_lag, |x| x.0),
        retry_interval: s.retry_interval.map_or(d.retry_interval, |x| x.0),
    };
    if scheduler.retry_interval.0 <= 0 {
        return Err(at.error(
            "scheduler.retryInterval",
            "must be longer than zero",
            "retryInterval",
        ));
    }
    Ok(scheduler)
}

/// `nodeGroups:` expanded (prefix-1..count), then `nodes:` as listed; each needs cpu and
/// memory, and names are unique.
fn nodes(
    at: &Located<'_>,
    groups: Vec<NodeGroupFile>,
    listed: Vec<NodeFile>,
    span: (SimTime, SimTime),
    rng: &mut StdRng,
) -> Result<Vec<NodeSpec>, ScenarioError> {
    let mut nodes = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        if let Some(b) = &group.background {
            b.check(at, &format!("nodeGroups[{g}].background"))?;
        }
    }
    for (i, node) in listed.iter().enumerate() {
        if let Some(b) = &node.background {
            b.check(at, &format!("nodes[{i}].background"))?;
        }
    }
    for group in groups {
        for i in 0..group.count {
            let background = group.background.as_ref().map(|b| b.resolve(rng, span));
            nodes.push(NodeSpec {
                name: format!("{}-{}", group.prefix, i + 1),
                allocatable: Resources::new(group.cpu.0, group.memory.0),
                background: background.unwrap_or_default(),
            });
        }
    }
    for node in listed {
        let background = node.background.as_ref().map(|b| b.resolve(rng, span));
        nodes.push(NodeSpec {
            name: node.name,
            allocatable: Resources::new(node.cpu.0, node.memory.0),
            background: background.unwrap_or_default(),
        });
    }
    if nodes.is_empty() {
        let message = "a scenario needs at least one node (nodes or nodeGroups)";
        return Err(at.error("nodes", message, "nodes"));
    }
    for (i, n) in nodes.iter().enumerate() {
        let field = format!("node {}", n.name);
        if n.allocatable.cpu_millis <= 0 || n.allocatable.memory_bytes <= 0 {
            return Err(at.error(&field, "cpu and memory must be above zero", &n.name));
        }
        if nodes[..i].iter().any(|m| m.name == n.name) {
            return Err(at.error(&field, "is named twice", &n.name));
        }
    }
    Ok(nodes)
}

/// When a pod group's pods arrive: all `at` once, `every` apart from `from`, or a seeded
/// Poisson process of `perMinute` from `from`.
enum Arrivals {
    At(SimTime),
    Every { from: SimTime, every: SimTime },
    Poisson { clock: SimTime, per_minute: f64 },
}

impl Arrivals {
    fn of(at: &Located<'_>, g: usize, group: &PodGroupFile) -> Result<Arrivals, ScenarioError> {
        let a = &group.arrival;
        let from = a.from.map_or(0, |f| f.0.0);
        match (a.at, a.every, a.per_minute) {
            (Some(t), None, None) if a.from.is_none() => Ok(Arrivals::At(t.0.0)),
            (None, Some(every), None) => Ok(Arrivals::Every { from, every: every.0.0 }),
            (None, None, Some(rate)) if rate > 0.0 => {
                Ok(Arrivals::Poisson { clock: from, per_minute: rate })
            }
            _ => Err(at.error(
                &format!("podGroups[{g}].arrival"),
                "give exactly one of `at`, `every` (with `from`) or `perMinute` > 0 (with `from`)",
                &format!("prefix: {}", group.prefix),
            )),
        }
    }

    /// The `i`-th arrival; a Poisson process draws its gap from `rng` here, so the draws
    /// interleave with the pod's own (usage, lifetime) in pod order.
    fn next(&mut self, i: usize, rng: &mut StdRng) -> SimTime {
        match self {
            Arrivals::At(t) => *t,
            Arrivals::Every { from, every } => *from + *every * i as i64,
            Arrivals::Poisson { clock, per_minute } => {
                // Exponential gaps: a Poisson process of `per_minute`.
                let u: f64 = rng.random_range(f64::EPSILON..1.0);
                *clock += (-u.ln() / *per_minute * 60_000.0) as i64;
                *clock
            }
        }
    }
}

/// `podGroups:` expanded: pods prefix-1..count with their arrivals, true usage and
/// lifetimes drawn from the scenario's seed (usage, then lifetime, pod by pod).
fn pod_groups(
    at: &Located<'_>,
    groups: Vec<PodGroupFile>,
    rng: &mut StdRng,
) -> Result<Vec<PodSpec>, ScenarioError> {
    let mut pods = Vec::new();
    for (g, group) in groups.into_iter().enumerate() {
        let mut arrivals = Arrivals::of(at, g, &group)?;
        if let Some(workload) = &group.workload {
            check_workload(at, g, workload)?;
        }
        let namespace = group.namespace.clone().unwrap_or_else(|| "default".into());
        let mut labels = group.labels.clone().unwrap_or_default();
        let owner = group_owner(&namespace, &group, &mut labels);
        let series_recorded = group.pod_series != Some(PodSeriesFile::Missing);
        for i in 0..group.count {
            let arrival = arrivals.next(i, rng);
            let pod = pod_object(
                format!("{}-{}", group.prefix, i + 1),
                namespace.clone(),
                group.cpu,
                group.memory,
                group.limits.as_ref(),
                owner.clone(),
                labels.clone(),
            );
            let usage = resolve_usage(group.usage.as_ref(), pod.requests, rng);
            let lifetime = match (group.lifetime, group.lifetime_minutes) {
                (Some(l), _) => Some(l.0.0),
                (None, Some(level)) => Some((level.draw(rng) * 60_000.0) as i64),
                (None, None) => None,
            };
            pods.push(PodSpec {
                pod: Arc::new(pod),
                arrival,
                deletion: lifetime.map(|l| arrival + l),
                node: None,
                usage,
                series_recorded,
            });
        }
    }
    Ok(pods)
}

/// `pods:` as listed (a trace); a pod bound to a node needs that node to exist.
fn explicit_pods(
    at: &Located<'_>,
    listed: Vec<PodFile>,
    nodes: &[NodeSpec],
    rng: &mut StdRng,
) -> Result<Vec<PodSpec>, ScenarioError> {
    let mut pods = Vec::new();
    for (i, p) in listed.into_iter().enumerate() {
        if let Some(node) = &p.node
            && !nodes.iter().any(|n| &n.name == node)
        {
            let message = format!("no node is called '{node}'");
            return Err(at.error(&format!("pods[{i}].node"), &message, node));
        }
        // A trace's pods name their controller as recorded (a ReplicaSet's pods carry the
        // template hash among their labels, if the trace kept it).
        let owner =
            Owner { kind: p.owner_kind.unwrap_or_else(|| "ReplicaSet".into()), name: p.owner };
        let pod = pod_object(
            p.name,
            p.namespace.unwrap_or_else(|| "default".into()),
            p.cpu,
            p.memory,
            p.limits.as_ref(),
            owner,
            p.labels.unwrap_or_default(),
        );
        let usage = resolve_usage(p.usage.as_ref(), pod.requests, rng);
        pods.push(PodSpec {
            pod: Arc::new(pod),
            arrival: p.arrival.0.0,
            deletion: p.deletion.map(|d| d.0.0),
            node: p.node,
            usage,
            series_recorded: p.pod_series != Some(PodSeriesFile::Missing),
        });
    }
    Ok(pods)
}

#[cfg(test)]
mod tests;
