//! One function per section of the policy file: the file's shape of the section in, the
//! domain's out, every cross-field rule checked with the field and line named.

use serde::Deserialize;

use super::values::{Duration, MaxAge, NonNegative, Percent, Positive, Share, Span};
use super::{Located, PolicyError};
use crate::ledger::DepartureCredit;
use crate::policy::*;
use crate::yaml::{ByteQuantity, CpuQuantity};

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum ResourceFile {
    Cpu,
    Memory,
    Other,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct MetricFile {
    name: String,
    resource: ResourceFile,
    query: String,
    period: Duration,
    weight: NonNegative,
    filter_above: Option<Percent>,
    max_age: Option<MaxAge>,
    /// The averaging window inside the query (the 5 m of a 5 m average, also of a 1 h max
    /// of the 5 m average): how long a new pod takes to show fully in the value.
    window: Option<Duration>,
    absorb_window: Option<Duration>,
    /// Whether a departure lowers the prediction (`credit`) or not (`hold`, a maximum).
    departures: Option<DeparturesFile>,
    unit: Option<UnitFile>,
    /// A raw value's 100 %: `percent = value / max × 100`.
    max: Option<Positive>,
    /// `percent = value × scale`.
    scale: Option<Positive>,
    normalize: Option<NormalizeFile>,
    direction: Option<DirectionFile>,
    curve: Option<CurveFile>,
}

#[derive(Deserialize, Clone, Copy, PartialEq)]
#[serde(rename_all = "lowercase")]
pub(super) enum DeparturesFile {
    Credit,
    Hold,
}

#[derive(Deserialize, Clone, Copy, PartialEq)]
pub(super) enum UnitFile {
    #[serde(rename = "percent")]
    Percent,
    #[serde(rename = "ratio")]
    Ratio,
    #[serde(rename = "bytes")]
    Bytes,
    #[serde(rename = "bytesPerSecond")]
    BytesPerSecond,
    #[serde(rename = "raw")]
    Raw,
}

impl UnitFile {
    fn name(self) -> &'static str {
        match self {
            UnitFile::Percent => "percent",
            UnitFile::Ratio => "ratio",
            UnitFile::Bytes => "bytes",
            UnitFile::BytesPerSecond => "bytesPerSecond",
            UnitFile::Raw => "raw",
        }
    }
}

#[derive(Deserialize, PartialEq)]
pub(super) enum NormalizeFile {
    #[serde(rename = "percent")]
    Percent,
    #[serde(rename = "maxOfCandidates")]
    MaxOfCandidates,
}

#[derive(Deserialize)]
pub(super) enum DirectionFile {
    #[serde(rename = "lowerIsBetter")]
    LowerIsBetter,
    #[serde(rename = "higherIsBetter")]
    HigherIsBetter,
}

/// What the metric list's defaults depend on from other sections.
pub(super) struct MetricDefaults {
    pub max_age: MaxAge,
    /// `ledger.lag`: scrape and rule evaluation lag.
    pub lag: Millis,
    /// `ledger.absorbWindow`, when set: one window for every metric (the old form).
    pub absorb_window: Option<Millis>,
}

fn max_age(max_age: MaxAge, period: Millis) -> Millis {
    match max_age {
        MaxAge::Auto => auto_max_age(period),
        MaxAge::Fixed(span) => span,
    }
}

pub(super) fn metrics(
    at: &Located,
    list: Option<Vec<MetricFile>>,
    defaults: &MetricDefaults,
    policy_curve: &Curve,
) -> Result<Vec<MetricSpec>, PolicyError> {
    let absorb = |window: Millis, period: Millis, explicit: Option<Millis>| {
        explicit
            .or(defaults.absorb_window)
            .unwrap_or_else(|| derived_absorb_window(window, period, defaults.lag))
    };
    let Some(list) = list else {
        return Ok(default_metrics()
            .into_iter()
            .map(|m| MetricSpec {
                max_age: max_age(defaults.max_age, m.period),
                absorb_window: absorb(m.window, m.period, None),
                ..m
            })
            .collect());
    };
    if list.is_empty() {
        return Err(at.error("metrics", "at least one metric is needed", "metrics", 0));
    }
    let mut metrics: Vec<MetricSpec> = Vec::with_capacity(list.len());
    for (i, m) in list.into_iter().enumerate() {
        if m.name.trim().is_empty() {
            // The name is what locates a metric's line; without one, the i-th `name:`.
            return Err(at.error(&format!("metrics[{i}].name"), "must not be empty", "name:", i));
        }
        if let Some(earlier) = metrics.iter().position(|x| x.name == m.name) {
            let why = format!("'{}' is already the name of metrics[{earlier}]", m.name);
            return Err(at.error(&format!("metrics[{i}].name"), &why, &m.name, 1));
        }
        if m.query.trim().is_empty() {
            return Err(at.error(&format!("metrics[{i}].query"), "must not be empty", &m.name, 0));
        }
        let period = m.period.0;
        let window = m.window.map_or(DEFAULT_METRIC_WINDOW, |w| w.0);
        let resource = match m.resource {
            ResourceFile::Cpu => Resource::Cpu,
            ResourceFile::Memory => Resource::Memory,
            ResourceFile::Other => Resource::Other,
        };
        let scoring = scoring(at, i, &m, resource, policy_curve)?;
        let departures = match m.departures {
            None | Some(DeparturesFile::Hold) => DepartureCredit::Hold,
            Some(DeparturesFile::Credit) => DepartureCredit::Credit,
        };
        if m.departures == Some(DeparturesFile::Credit) && reads_maximum(&m.name, &m.query) {
            let why = "a maximum over time keeps reading a departed pod's peak until its span has passed, so a credit would read the node below what the metric will show: credit averages only";
            return Err(at.metric_error(i, "departures", why));
        }
        if m.departures == Some(DeparturesFile::Credit) && resource == Resource::Other {
            let why = "a metric of resource other has no ledger, so no departure to credit: leave departures out";
            return Err(at.metric_error(i, "departures", why));
        }
        metrics.push(MetricSpec {
            name: m.name,
            resource,
            query: m.query,
            period,
            weight: m.weight.0,
            filter_above: m.filter_above.map(|p| p.0),
            max_age: max_age(m.max_age.unwrap_or(defaults.max_age), period),
            window,
            absorb_window: absorb(window, period, m.absorb_window.map(|w| w.0)),
            departures,
            unit: scoring.unit,
            to_percent: scoring.to_percent,
            normalize: scoring.normalize,
            direction: scoring.direction,
            curve: scoring.curve,
        });
    }
    if metrics.iter().map(|m| m.weight).sum::<f64>() <= 0.0 {
        return Err(at.error("metrics[].weight", "the weights must not all be zero", "weight", 0));
    }
    Ok(metrics)
}

/// How one metric is scored: unit, normalisation, direction and curve, checked together.
struct Scoring {
    unit: Unit,
    to_percent: f64,
    normalize: Normalize,
    direction: Direction,
    curve: Option<Curve>,
}

fn scoring(
    at: &Located,
    i: usize,
    m: &MetricFile,
    resource: Resource,
    policy_curve: &Curve,
) -> Result<Scoring, PolicyError> {
    let unit_file = m.unit.unwrap_or(UnitFile::Percent);
    let relative = m.normalize == Some(NormalizeFile::MaxOfCandidates);
    let err = |key: &str, why: &str| at.metric_error(i, key, why);
    if m.max.is_some() && m.scale.is_some() {
        return Err(err("scale", "give max or scale, not both"));
    }
    let unit = match unit_file {
        UnitFile::Percent => Unit::Percent,
        UnitFile::Ratio => Unit::Ratio,
        UnitFile::Bytes | UnitFile::BytesPerSecond | UnitFile::Raw => Unit::Raw,
    };
    let to_percent = match (unit, m.max, m.scale) {
        (Unit::Percent | Unit::Ratio, Some(_), _) | (Unit::Percent | Unit::Ratio, _, Some(_)) => {
            let key = if m.max.is_some() { "max" } else { "scale" };
            let why = format!(
                "a {} value has a fixed scale; max and scale are for raw units (bytes, bytesPerSecond, raw)",
                unit_file.name()
            );
            return Err(err(key, &why));
        }
        (Unit::Percent, None, None) => 1.0,
        (Unit::Ratio, None, None) => 100.0,
        (Unit::Raw, _, _) if relative => {
            if m.max.is_some() || m.scale.is_some() {
                let key = if m.max.is_some() { "max" } else { "scale" };
                let why = "maxOfCandidates divides by the highest candidate, so a max or scale would cancel out";
                return Err(err(key, why));
            }
            1.0
        }
        (Unit::Raw, Some(max), None) => 100.0 / max.0,
        (Unit::Raw, None, Some(scale)) => scale.0,
        (Unit::Raw, None, None) => {
            let why = format!(
                "a {} value needs max (its 100 %) or scale (its factor to percent), or normalize: maxOfCandidates",
                unit_file.name()
            );
            return Err(err("unit", &why));
        }
        (Unit::Raw, Some(_), Some(_)) => unreachable!("rejected above"),
    };
    if relative && resource != Resource::Other {
        let why = "a maxOfCandidates value is relative to the other candidates, not a share of this node's capacity, so no ledger or pod estimate can be added to it: use resource: other";
        return Err(err("resource", why));
    }
    if relative && m.filter_above.is_some() {
        let why = "filterAbove on a maxOfCandidates metric would reject the busiest candidate whatever its load";
        return Err(err("filterAbove", why));
    }
    let curve = match &m.curve {
        None => None,
        Some(file) => {
            if matches!(policy_curve, Curve::Crane { .. }) {
                let why = "the policy's crane curve scores every metric the Crane way; per-metric curves need a waterLevel or leastUsed policy curve";
                return Err(err("curve", why));
            }
            match file.kind {
                CurveKind::Crane => {
                    let why = "crane is a whole-node mode (hot value, stale metrics fully used): set it as the policy's curve";
                    return Err(err("curve.kind", why));
                }
                CurveKind::LeastUsed if file.target.is_some() => {
                    return Err(err("curve.target", "only the waterLevel curve has a target"));
                }
                _ if file.hot_value.is_some() => {
                    return Err(err("curve.hotValue", "only the crane curve has a hot value"));
                }
                CurveKind::LeastUsed => Some(Curve::LeastUsed),
                CurveKind::WaterLevel => {
                    let target = file.target.map_or(40.0, |t| t.0);
                    if target <= 0.0 || target >= 100.0 {
                        let why = format!("{target} must be strictly between 0 and 100");
                        return Err(err("curve.target", &why));
                    }
                    Some(Curve::WaterLevel { target })
                }
            }
        }
    };
    Ok(Scoring {
        unit,
        to_percent,
        normalize: if relative { Normalize::MaxOfCandidates } else { Normalize::Percent },
        direction: match m.direction {
            None | Some(DirectionFile::LowerIsBetter) => Direction::LowerIsBetter,
            Some(DirectionFile::HigherIsBetter) => Direction::HigherIsBetter,
        },
        curve,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct HotWindowFile {
    window: Duration,
    count: u32,
}

#[derive(Deserialize, PartialEq)]
pub(super) enum CurveKind {
    #[serde(rename = "waterLevel")]
    WaterLevel,
    #[serde(rename = "leastUsed")]
    LeastUsed,
    #[serde(rename = "crane")]
    Crane,
}

/// A flat struct rather than a tagged enum: serde buffers tagged enums, which loses the
/// path and line of a bad field.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct CurveFile {
    kind: CurveKind,
    target: Option<Percent>,
    hot_value: Option<Vec<HotWindowFile>>,
}

pub(super) fn curve(at: &Located, file: Option<CurveFile>) -> Result<Curve, PolicyError> {
    let Some(curve) = file else { return Ok(Policy::default().curve) };
    if curve.kind != CurveKind::WaterLevel && curve.target.is_some() {
        let why = "only the waterLevel curve has a target";
        return Err(at.error("curve.target", why, "target", 0));
    }
    if curve.kind != CurveKind::Crane && curve.hot_value.is_some() {
        let why = "only the crane curve has a hot value";
        return Err(at.error("curve.hotValue", why, "hotValue", 0));
    }
    Ok(match curve.kind {
        CurveKind::WaterLevel => {
            let target = curve.target.map_or(40.0, |t| t.0);
            if target <= 0.0 || target >= 100.0 {
                let why = format!("{target} must be strictly between 0 and 100");
                return Err(at.error("curve.target", &why, "target", 0));
            }
            Curve::WaterLevel { target }
        }
        CurveKind::LeastUsed => Curve::LeastUsed,
        CurveKind::Crane => {
            let Some(list) = curve.hot_value else {
                return Ok(Curve::Crane { hot_windows: default_hot_windows() });
            };
            let mut hot_windows = Vec::new();
            for (i, w) in list.into_iter().enumerate() {
                if w.count == 0 {
                    let field = format!("curve.hotValue[{i}].count");
                    return Err(at.error(&field, "must be at least 1", "count", i));
                }
                hot_windows.push(HotWindow { window: w.window.0, count: w.count });
            }
            Curve::Crane { hot_windows }
        }
    })
}

#[derive(Deserialize)]
pub(super) enum CombineFile {
    #[serde(rename = "overshootDominates")]
    OvershootDominates,
    #[serde(rename = "weightedMean")]
    WeightedMean,
}

pub(super) fn combine(file: Option<CombineFile>) -> Combine {
    match file {
        None | Some(CombineFile::OvershootDominates) => Combine::OvershootDominates,
        Some(CombineFile::WeightedMean) => Combine::WeightedMean,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct EstimatorFile {
    cpu_factor: Option<NonNegative>,
    memory_factor: Option<NonNegative>,
    best_effort_cpu: Option<CpuQuantity>,
    best_effort_memory: Option<ByteQuantity>,
    learn: Option<LearnFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct LearnFile {
    enabled: Option<bool>,
    window: Option<Duration>,
    quantile: Option<Share>,
    refresh: Option<Duration>,
    min_pods: Option<u32>,
    min_samples: Option<u64>,
    min_ratio: Option<Positive>,
    max_ratio: Option<Positive>,
    max_workloads: Option<usize>,
    queries: Option<LearnQueriesFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct LearnQueriesFile {
    cpu: Option<String>,
    memory: Option<String>,
    cpu_samples: Option<String>,
    memory_samples: Option<String>,
}

pub(super) fn estimator(
    at: &Located,
    file: Option<EstimatorFile>,
) -> Result<Estimator, PolicyError> {
    let defaults = Estimator::default();
    let Some(e) = file else { return Ok(defaults) };
    Ok(Estimator {
        cpu_factor: e.cpu_factor.map_or(defaults.cpu_factor, |f| f.0),
        memory_factor: e.memory_factor.map_or(defaults.memory_factor, |f| f.0),
        best_effort_cpu_millis: e.best_effort_cpu.map_or(defaults.best_effort_cpu_millis, |q| q.0),
        best_effort_memory_bytes: e
            .best_effort_memory
            .map_or(defaults.best_effort_memory_bytes, |q| q.0),
        learn: learn(at, e.learn)?,
    })
}

fn learn(at: &Located, file: Option<LearnFile>) -> Result<Learn, PolicyError> {
    let defaults = Learn::default();
    let Some(l) = file else { return Ok(defaults) };
    let window = l.window.map_or(defaults.window, |w| w.0);
    let quantile = l.quantile.map_or(defaults.quantile, |q| q.0);
    let min_ratio = l.min_ratio.map_or(defaults.min_ratio, |r| r.0);
    let max_ratio = l.max_ratio.map_or(defaults.max_ratio, |r| r.0);
    if min_ratio > max_ratio {
        return Err(at.error(
            "estimator.learn.minRatio",
            &format!("{min_ratio} is above maxRatio {max_ratio}"),
            "minRatio:",
            0,
        ));
    }
    if l.min_pods == Some(0) {
        return Err(at.error("estimator.learn.minPods", "must be at least 1", "minPods:", 0));
    }
    if l.max_workloads == Some(0) {
        return Err(at.error(
            "estimator.learn.maxWorkloads",
            "must be at least 1",
            "maxWorkloads:",
            0,
        ));
    }
    // The shipped queries follow window and quantile; a query the file spells is its own.
    let derived = LearnQueries::over_recorded_series(window, quantile);
    let q = l.queries.unwrap_or(LearnQueriesFile {
        cpu: None,
        memory: None,
        cpu_samples: None,
        memory_samples: None,
    });
    let query = |given: Option<String>, key: &str, derived: String| match given {
        Some(text) if text.trim().is_empty() => Err(at.error(
            &format!("estimator.learn.queries.{key}"),
            "must not be empty",
            &format!("{key}:"),
            0,
        )),
        Some(text) => Ok(text),
        None => Ok(derived),
    };
    Ok(Learn {
        enabled: l.enabled.unwrap_or(defaults.enabled),
        window,
        quantile,
        refresh: l.refresh.map_or(defaults.refresh, |r| r.0),
        min_pods: l.min_pods.unwrap_or(defaults.min_pods),
        min_samples: l.min_samples.unwrap_or(defaults.min_samples),
        min_ratio,
        max_ratio,
        max_workloads: l.max_workloads.unwrap_or(defaults.max_workloads),
        queries: LearnQueries {
            cpu: query(q.cpu, "cpu", derived.cpu)?,
            memory: query(q.memory, "memory", derived.memory)?,
            cpu_samples: query(q.cpu_samples, "cpuSamples", derived.cpu_samples)?,
            memory_samples: query(q.memory_samples, "memorySamples", derived.memory_samples)?,
        },
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum StaleFilterFile {
    Pass,
    Reject,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct StaleFile {
    pub max_age: Option<MaxAge>,
    filter: Option<StaleFilterFile>,
    score: Option<Percent>,
    breaker_share: Option<Share>,
    breaker_min_nodes: Option<usize>,
}

pub(super) fn stale(at: &Located, file: &StaleFile) -> Result<StalePolicy, PolicyError> {
    let defaults = Policy::default().stale;
    let breaker_min_nodes = file.breaker_min_nodes.unwrap_or(defaults.breaker_min_nodes);
    if breaker_min_nodes == 0 {
        let why = "must be at least 1 (a breaker over no nodes has nothing to measure)";
        return Err(at.error("stale.breakerMinNodes", why, "breakerMinNodes", 0));
    }
    Ok(StalePolicy {
        filter: match file.filter {
            None | Some(StaleFilterFile::Pass) => StaleFilter::Pass,
            Some(StaleFilterFile::Reject) => StaleFilter::Reject,
        },
        score: file.score.map_or(defaults.score, |p| p.0),
        breaker_share: file.breaker_share.map_or(defaults.breaker_share, |s| s.0),
        breaker_min_nodes,
    })
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct LedgerFile {
    enabled: Option<bool>,
    pub absorb_window: Option<Duration>,
    pub lag: Option<Span>,
    reserve_ttl: Option<Duration>,
}

pub(super) fn ledger(file: &LedgerFile) -> LedgerPolicy {
    let defaults = Policy::default().ledger;
    LedgerPolicy {
        enabled: file.enabled.unwrap_or(defaults.enabled),
        lag: file.lag.map_or(defaults.lag, |d| d.0),
        reserve_ttl: file.reserve_ttl.map_or(defaults.reserve_ttl, |d| d.0),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct AntiColocationFile {
    label_key: String,
}

pub(super) fn anti_colocation(
    at: &Located,
    file: Option<Vec<AntiColocationFile>>,
) -> Result<Vec<AntiColocation>, PolicyError> {
    let mut rules = Vec::new();
    for (i, rule) in file.unwrap_or_default().into_iter().enumerate() {
        if rule.label_key.trim().is_empty() {
            let field = format!("antiColocation[{i}].labelKey");
            return Err(at.error(&field, "must not be empty", "labelKey", i));
        }
        rules.push(AntiColocation { label_key: rule.label_key });
    }
    Ok(rules)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct NodeMappingFile {
    labels: Vec<String>,
}

pub(super) fn node_labels(
    at: &Located,
    file: Option<NodeMappingFile>,
) -> Result<Vec<String>, PolicyError> {
    match file {
        None => Ok(Policy::default().node_labels),
        Some(m) if m.labels.is_empty() => {
            let why = "at least one label is needed";
            Err(at.error("nodeMapping.labels", why, "labels", 0))
        }
        Some(m) => Ok(m.labels),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum ScoreMappingFile {
    Round,
    Rescale,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ExtenderFile {
    score_mapping: Option<ScoreMappingFile>,
}

pub(super) fn extender_score_mapping(file: Option<ExtenderFile>) -> ScoreMapping {
    match file.and_then(|e| e.score_mapping) {
        None | Some(ScoreMappingFile::Round) => ScoreMapping::Round,
        Some(ScoreMappingFile::Rescale) => ScoreMapping::Rescale,
    }
}

#[derive(Deserialize)]
pub(super) enum RoundingFile {
    #[serde(rename = "nearest")]
    Nearest,
    #[serde(rename = "truncate")]
    Truncate,
}

pub(super) fn rounding(file: Option<RoundingFile>) -> Rounding {
    match file {
        None | Some(RoundingFile::Nearest) => Rounding::Nearest,
        Some(RoundingFile::Truncate) => Rounding::Truncate,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PriorityFile {
    min_priority: i32,
    /// Metric name → threshold in percent.
    filter_above: std::collections::BTreeMap<String, Percent>,
}

/// `priorities`: each tier's metrics must be the policy's, with a threshold they may carry
/// (not a `maxOfCandidates` one), and no two tiers may start at the same priority.
pub(super) fn priorities(
    at: &Located,
    file: Option<Vec<PriorityFile>>,
    metrics: &[MetricSpec],
) -> Result<Vec<PriorityTier>, PolicyError> {
    let mut tiers: Vec<PriorityTier> = Vec::new();
    for (i, tier) in file.unwrap_or_default().into_iter().enumerate() {
        if let Some(earlier) = tiers.iter().position(|t| t.min_priority == tier.min_priority) {
            let field = format!("priorities[{i}].minPriority");
            let why = format!("{} is already priorities[{earlier}]'s", tier.min_priority);
            return Err(at.error(&field, &why, "minPriority", i));
        }
        if tier.filter_above.is_empty() {
            let field = format!("priorities[{i}].filterAbove");
            let why = "name at least one metric and its threshold";
            return Err(at.error(&field, why, "filterAbove", i));
        }
        let mut filter_above = Vec::with_capacity(tier.filter_above.len());
        for (name, limit) in tier.filter_above {
            let field = format!("priorities[{i}].filterAbove.{name}");
            let needle = format!("{name}:");
            let Some(index) = metrics.iter().position(|m| m.name == name) else {
                let known: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
                let why = format!("not a metric of the policy (its metrics: {})", known.join(", "));
                return Err(at.error(&field, &why, &needle, 0));
            };
            if metrics[index].normalize == Normalize::MaxOfCandidates {
                let why = "a maxOfCandidates metric has no threshold: it would reject the busiest candidate whatever its load";
                return Err(at.error(&field, why, &needle, 0));
            }
            filter_above.push((index, limit.0));
        }
        tiers.push(PriorityTier { min_priority: tier.min_priority, filter_above });
    }
    tiers.sort_by_key(|t| std::cmp::Reverse(t.min_priority));
    Ok(tiers)
}
