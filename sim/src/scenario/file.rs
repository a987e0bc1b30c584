//! The scenario file (YAML, documented in sim/README.md). Parsed with serde_path_to_error so
//! a bad value is reported with its path and line (`nodeGroups[0].cpu: … (line 7)`), as
//! core's policy file is; generators are expanded here with the scenario's seed.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Deserializer, de::Error as _};
use waterline_core::Millis;
use waterline_core::time::parse_duration;
use waterline_core::yaml::{ByteQuantity, CpuQuantity};

use super::*;
use crate::model::{Resources, SimPod};

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid scenario: {0}")]
pub struct ScenarioError(pub String);

/// A duration such as `30s` or `1h30m`; zero allowed, and a leading `-` for times in the
/// warm-up before 0.
#[derive(Clone, Copy, Debug)]
struct Duration(Millis);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let (sign, body) = match text.trim().strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, text.trim()),
        };
        parse_duration(body).map(|m| Duration(Millis(sign * m.0))).map_err(D::Error::custom)
    }
}

/// A number, or `{min, max}` drawn uniformly per node or pod.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(untagged)]
enum Level {
    Fixed(f64),
    Range { min: f64, max: f64 },
}

impl Level {
    fn draw(self, rng: &mut StdRng) -> f64 {
        match self {
            Level::Fixed(v) => v,
            Level::Range { min, max } if max > min => rng.random_range(min..max),
            Level::Range { min, .. } => min,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DiurnalFile {
    amplitude: f64,
    period: Option<Duration>,
    peak: Duration,
}

impl DiurnalFile {
    fn resolve(&self) -> Diurnal {
        Diurnal {
            amplitude: self.amplitude,
            period: self.period.map_or(Millis::from_mins(24 * 60), |p| p.0),
            peak: self.peak.0.0,
        }
    }
}

/// `[[time, value], ...]` with times as durations.
type PointsFile<V> = Vec<(Duration, V)>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BackgroundSeriesFile {
    cpu: Option<PointsFile<f64>>,
    memory: Option<PointsFile<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BackgroundFile {
    /// Percent of allocatable.
    cpu: Option<Level>,
    memory: Option<Level>,
    diurnal: Option<DiurnalFile>,
    series: Option<BackgroundSeriesFile>,
}

fn series<V: Copy>(points: &Option<PointsFile<V>>, value: impl Fn(V) -> f64) -> Option<Series> {
    points.as_ref().map(|p| Series(p.iter().map(|(t, v)| (t.0.0, value(*v))).collect()))
}

impl BackgroundFile {
    fn resolve(&self, rng: &mut StdRng) -> Background {
        Background {
            cpu_pct: self.cpu.map_or(0.0, |l| l.draw(rng)),
            memory_pct: self.memory.map_or(0.0, |l| l.draw(rng)),
            diurnal: self.diurnal.as_ref().map(DiurnalFile::resolve),
            cpu_series: self.series.as_ref().and_then(|s| series(&s.cpu, |v| v)),
            memory_series: self.series.as_ref().and_then(|s| series(&s.memory, |v| v)),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NodeGroupFile {
    count: usize,
    prefix: String,
    cpu: CpuQuantity,
    memory: ByteQuantity,
    background: Option<BackgroundFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NodeFile {
    name: String,
    cpu: CpuQuantity,
    memory: ByteQuantity,
    background: Option<BackgroundFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LimitsFile {
    cpu: Option<CpuQuantity>,
    memory: Option<ByteQuantity>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct UsageSeriesFile {
    cpu: Option<PointsFile<CpuQuantity>>,
    memory: Option<PointsFile<ByteQuantity>>,
}

/// True usage: `cpu` / `memory` as a fraction of the request (1 = at the request, 2 = twice
/// it), or of `0.1` core / `128Mi` when there is no request.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct UsageFile {
    cpu: Option<Level>,
    memory: Option<Level>,
    ramp_up: Option<Duration>,
    diurnal: Option<DiurnalFile>,
    series: Option<UsageSeriesFile>,
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
    }
}

/// When a group's pods arrive: all `at` once, one `every` interval apart from `from`, or a
/// Poisson process of `perMinute` from `from` (seeded).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ArrivalFile {
    at: Option<Duration>,
    from: Option<Duration>,
    every: Option<Duration>,
    per_minute: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PodGroupFile {
    prefix: String,
    count: usize,
    namespace: Option<String>,
    arrival: ArrivalFile,
    cpu: Option<CpuQuantity>,
    memory: Option<ByteQuantity>,
    limits: Option<LimitsFile>,
    owner_kind: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    usage: Option<UsageFile>,
    /// Each pod is deleted this long after it arrives; `lifetimeMinutes` draws it per pod
    /// (a number or `{min, max}`, minutes).
    lifetime: Option<Duration>,
    lifetime_minutes: Option<Level>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PodFile {
    name: String,
    namespace: Option<String>,
    arrival: Duration,
    deletion: Option<Duration>,
    cpu: Option<CpuQuantity>,
    memory: Option<ByteQuantity>,
    limits: Option<LimitsFile>,
    owner_kind: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    /// Bound here already (a trace's existing pods); the scheduler does not place it.
    node: Option<String>,
    usage: Option<UsageFile>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum PathFile {
    Plugin,
    Extender,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OutageFile {
    from: Duration,
    to: Duration,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PipelineFile {
    scrape_interval: Option<Duration>,
    rule_interval: Option<Duration>,
    hour_rule_interval: Option<Duration>,
    day_rule_interval: Option<Duration>,
    subquery_step: Option<Duration>,
    delay: Option<Duration>,
    poll_period: Option<Duration>,
    outages: Option<Vec<OutageFile>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SchedulerFile {
    path: Option<PathFile>,
    cycle: Option<Duration>,
    bind_delay: Option<Duration>,
    watch_lag: Option<Duration>,
    retry_interval: Option<Duration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScenarioFile {
    name: String,
    description: Option<String>,
    seed: Option<u64>,
    duration: Duration,
    warmup: Option<Duration>,
    threshold: Option<f64>,
    target: Option<f64>,
    measure_interval: Option<Duration>,
    pipeline: Option<PipelineFile>,
    scheduler: Option<SchedulerFile>,
    node_groups: Option<Vec<NodeGroupFile>>,
    nodes: Option<Vec<NodeFile>>,
    pod_groups: Option<Vec<PodGroupFile>>,
    pods: Option<Vec<PodFile>>,
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

fn pod_object(
    name: String,
    namespace: Option<String>,
    cpu: Option<CpuQuantity>,
    memory: Option<ByteQuantity>,
    limits: Option<&LimitsFile>,
    owner_kind: Option<String>,
    labels: Option<BTreeMap<String, String>>,
) -> SimPod {
    let namespace = namespace.unwrap_or_else(|| "default".into());
    SimPod {
        uid: format!("{namespace}/{name}"),
        namespace,
        name,
        labels: labels.unwrap_or_default(),
        owner_kind: owner_kind.unwrap_or_else(|| "ReplicaSet".into()),
        requests: Resources::new(cpu.map_or(0, |c| c.0), memory.map_or(0, |b| b.0)),
        limits: Resources::new(
            limits.and_then(|l| l.cpu).map_or(0, |c| c.0),
            limits.and_then(|l| l.memory).map_or(0, |b| b.0),
        ),
    }
}

/// Parses a scenario and expands its generators; `seed` overrides the file's.
pub fn parse_scenario(text: &str, seed: Option<u64>) -> Result<Scenario, ScenarioError> {
    let deserializer = serde_yaml::Deserializer::from_str(text);
    let file: ScenarioFile = serde_path_to_error::deserialize(deserializer)
        .map_err(|e| ScenarioError(waterline_core::yaml::describe(text, e)))?;
    let seed = seed.or(file.seed).unwrap_or(1);
    let mut rng = StdRng::seed_from_u64(seed);
    let err = |field: &str, message: &str, needle: &str| {
        ScenarioError(format!("{field}: {message}{}", at_line(text, needle, 0)))
    };
    if file.duration.0.0 <= 0 {
        return Err(err("duration", "must be longer than zero", "duration:"));
    }

    let p = file.pipeline.unwrap_or_default();
    let d = Pipeline::default();
    let pipeline = Pipeline {
        scrape_interval: p.scrape_interval.map_or(d.scrape_interval, |x| x.0),
        rule_interval: p.rule_interval.map_or(d.rule_interval, |x| x.0),
        hour_rule_interval: p.hour_rule_interval.map_or(d.hour_rule_interval, |x| x.0),
        day_rule_interval: p.day_rule_interval.map_or(d.day_rule_interval, |x| x.0),
        subquery_step: p.subquery_step.map_or(d.subquery_step, |x| x.0),
        delay: p.delay.map_or(d.delay, |x| x.0),
        poll_override: p.poll_period.map(|x| x.0),
        outages: p.outages.unwrap_or_default().iter().map(|o| (o.from.0.0, o.to.0.0)).collect(),
    };
    for (field, span) in [
        ("pipeline.scrapeInterval", pipeline.scrape_interval),
        ("pipeline.ruleInterval", pipeline.rule_interval),
        ("pipeline.hourRuleInterval", pipeline.hour_rule_interval),
        ("pipeline.dayRuleInterval", pipeline.day_rule_interval),
        ("pipeline.subqueryStep", pipeline.subquery_step),
    ] {
        if span.0 <= 0 {
            let key = field.rsplit('.').next().unwrap_or(field);
            return Err(err(field, "must be longer than zero", key));
        }
    }
    if pipeline.poll_override.is_some_and(|x| x.0 <= 0) {
        return Err(err("pipeline.pollPeriod", "must be longer than zero", "pollPeriod"));
    }

    let s = file.scheduler.unwrap_or_default();
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
        return Err(err("scheduler.retryInterval", "must be longer than zero", "retryInterval"));
    }

    let mut nodes = Vec::new();
    for group in file.node_groups.unwrap_or_default() {
        for i in 0..group.count {
            let background = group.background.as_ref().map(|b| b.resolve(&mut rng));
            nodes.push(NodeSpec {
                name: format!("{}-{}", group.prefix, i + 1),
                allocatable: Resources::new(group.cpu.0, group.memory.0),
                background: background.unwrap_or_default(),
            });
        }
    }
    for node in file.nodes.unwrap_or_default() {
        let background = node.background.as_ref().map(|b| b.resolve(&mut rng));
        nodes.push(NodeSpec {
            name: node.name,
            allocatable: Resources::new(node.cpu.0, node.memory.0),
            background: background.unwrap_or_default(),
        });
    }
    if nodes.is_empty() {
        return Err(err(
            "nodes",
            "a scenario needs at least one node (nodes or nodeGroups)",
            "nodes",
        ));
    }
    for (i, n) in nodes.iter().enumerate() {
        if n.allocatable.cpu_millis <= 0 || n.allocatable.memory_bytes <= 0 {
            return Err(err(
                &format!("node {}", n.name),
                "cpu and memory must be above zero",
                &n.name,
            ));
        }
        if nodes[..i].iter().any(|m| m.name == n.name) {
            return Err(err(&format!("node {}", n.name), "is named twice", &n.name));
        }
    }

    let mut pods = Vec::new();
    for (g, group) in file.pod_groups.unwrap_or_default().into_iter().enumerate() {
        let a = &group.arrival;
        let field = format!("podGroups[{g}].arrival");
        let mut clock = a.from.map_or(0, |f| f.0.0);
        for i in 0..group.count {
            let arrival = match (a.at, a.every, a.per_minute) {
                (Some(at), None, None) if a.from.is_none() => at.0.0,
                (None, Some(every), None) => a.from.map_or(0, |f| f.0.0) + every.0.0 * i as i64,
                (None, None, Some(rate)) if rate > 0.0 => {
                    // Exponential gaps: a Poisson process of `rate` per minute.
                    let u: f64 = rng.random_range(f64::EPSILON..1.0);
                    clock += (-u.ln() / rate * 60_000.0) as i64;
                    clock
                }
                _ => {
                    return Err(err(
                        &field,
                        "give exactly one of `at`, `every` (with `from`) or `perMinute` > 0 \
                         (with `from`)",
                        &format!("prefix: {}", group.prefix),
                    ));
                }
            };
            let pod = pod_object(
                format!("{}-{}", group.prefix, i + 1),
                group.namespace.clone(),
                group.cpu,
                group.memory,
                group.limits.as_ref(),
                group.owner_kind.clone(),
                group.labels.clone(),
            );
            let usage = resolve_usage(group.usage.as_ref(), pod.requests, &mut rng);
            let lifetime = match (group.lifetime, group.lifetime_minutes) {
                (Some(l), _) => Some(l.0.0),
                (None, Some(level)) => Some((level.draw(&mut rng) * 60_000.0) as i64),
                (None, None) => None,
            };
            pods.push(PodSpec {
                pod: Arc::new(pod),
                arrival,
                deletion: lifetime.map(|l| arrival + l),
                node: None,
                usage,
            });
        }
    }
    for (i, p) in file.pods.unwrap_or_default().into_iter().enumerate() {
        if let Some(node) = &p.node
            && !nodes.iter().any(|n| &n.name == node)
        {
            return Err(err(
                &format!("pods[{i}].node"),
                &format!("no node is called '{node}'"),
                node,
            ));
        }
        let pod = pod_object(
            p.name,
            p.namespace,
            p.cpu,
            p.memory,
            p.limits.as_ref(),
            p.owner_kind,
            p.labels,
        );
        let usage = resolve_usage(p.usage.as_ref(), pod.requests, &mut rng);
        pods.push(PodSpec {
            pod: Arc::new(pod),
            arrival: p.arrival.0.0,
            deletion: p.deletion.map(|d| d.0.0),
            node: p.node,
            usage,
        });
    }
    for (i, p) in pods.iter().enumerate() {
        if pods[..i].iter().any(|q| q.pod.uid == p.pod.uid) {
            return Err(err("pods", &format!("'{}' is named twice", p.pod.uid), &p.pod.name));
        }
    }
    pods.sort_by_key(|p| p.arrival);

    Ok(Scenario {
        name: file.name,
        description: file.description.unwrap_or_default(),
        seed,
        duration: file.duration.0,
        warmup: file.warmup.map_or(Millis::from_mins(60), |w| w.0),
        threshold: file.threshold.unwrap_or(65.0),
        target: file.target.unwrap_or(40.0),
        measure_interval: file.measure_interval.map_or(Millis::from_secs(30), |m| m.0),
        pipeline,
        scheduler,
        nodes,
        pods,
    })
}

#[cfg(test)]
mod tests;
