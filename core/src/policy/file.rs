//! The policy file (YAML). Field values are validated while they are deserialized, so a bad
//! value is reported by serde_yaml with its path and line (`metrics[1].weight: … at line 7
//! column 13`); rules that span fields are checked afterwards and name the field and line.

use serde::{Deserialize, Deserializer, de::Error as _};

use super::*;
use crate::quantity::{parse_bytes, parse_cpu_millis};
use crate::time::parse_duration;

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid policy: {0}")]
pub struct PolicyError(pub String);

/// A percentage 0..=100.
#[derive(Clone, Copy, Debug)]
struct Percent(f64);

impl<'de> Deserialize<'de> for Percent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if !(0.0..=100.0).contains(&v) {
            return Err(D::Error::custom(format!("{v} is not a percentage between 0 and 100")));
        }
        Ok(Percent(v))
    }
}

/// A finite, non-negative number.
#[derive(Clone, Copy, Debug)]
struct NonNegative(f64);

impl<'de> Deserialize<'de> for NonNegative {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if !v.is_finite() || v < 0.0 {
            return Err(D::Error::custom(format!("{v} must be a finite number >= 0")));
        }
        Ok(NonNegative(v))
    }
}

/// A positive duration such as `30s`.
#[derive(Clone, Copy, Debug)]
struct Duration(Millis);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        match parse_duration(&text).map_err(D::Error::custom)? {
            Millis(0) => Err(D::Error::custom(format!("'{text}' must be longer than zero"))),
            span => Ok(Duration(span)),
        }
    }
}

/// `auto` or a duration.
#[derive(Clone, Copy, Debug)]
enum MaxAge {
    Auto,
    Fixed(Millis),
}

impl<'de> Deserialize<'de> for MaxAge {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text == "auto" {
            return Ok(MaxAge::Auto);
        }
        match parse_duration(&text) {
            Ok(span) if span.0 > 0 => Ok(MaxAge::Fixed(span)),
            Ok(_) => Err(D::Error::custom("maxAge must be longer than zero")),
            Err(e) => Err(D::Error::custom(format!("{e}; or 'auto' (3 × period + 1m)"))),
        }
    }
}

struct CpuQuantity(i64);

impl<'de> Deserialize<'de> for CpuQuantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = quantity_text(d)?;
        parse_cpu_millis(&text).map(CpuQuantity).map_err(D::Error::custom)
    }
}

struct ByteQuantity(i64);

impl<'de> Deserialize<'de> for ByteQuantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = quantity_text(d)?;
        parse_bytes(&text).map(ByteQuantity).map_err(D::Error::custom)
    }
}

/// Quantities may be written as YAML numbers (`8`) or strings (`"250m"`).
fn quantity_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Number(f64),
    }
    Ok(match Raw::deserialize(d)? {
        Raw::Text(t) => t,
        Raw::Number(n) => n.to_string(),
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ResourceFile {
    Cpu,
    Memory,
    Other,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MetricFile {
    name: String,
    resource: ResourceFile,
    query: String,
    period: Duration,
    weight: NonNegative,
    filter_above: Option<Percent>,
    max_age: Option<MaxAge>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct HotWindowFile {
    window: Duration,
    count: u32,
}

#[derive(Deserialize, PartialEq)]
enum CurveKind {
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
struct CurveFile {
    kind: CurveKind,
    target: Option<Percent>,
    hot_value: Option<Vec<HotWindowFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct EstimatorFile {
    cpu_factor: Option<NonNegative>,
    memory_factor: Option<NonNegative>,
    best_effort_cpu: Option<CpuQuantity>,
    best_effort_memory: Option<ByteQuantity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum StaleFilterFile {
    Pass,
    Reject,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct StaleFile {
    max_age: Option<MaxAge>,
    filter: Option<StaleFilterFile>,
    score: Option<Percent>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LedgerFile {
    enabled: Option<bool>,
    absorb_window: Option<Duration>,
    reserve_ttl: Option<Duration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AntiColocationFile {
    label_key: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NodeMappingFile {
    labels: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
enum ScoreMappingFile {
    Round,
    Rescale,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExtenderFile {
    score_mapping: Option<ScoreMappingFile>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PolicyFile {
    metrics: Option<Vec<MetricFile>>,
    curve: Option<CurveFile>,
    estimator: Option<EstimatorFile>,
    stale: Option<StaleFile>,
    ledger: Option<LedgerFile>,
    anti_colocation: Option<Vec<AntiColocationFile>>,
    node_mapping: Option<NodeMappingFile>,
    extender: Option<ExtenderFile>,
}

/// The 1-based line of the first line at or after `from` that contains `needle`.
fn line_of(text: &str, needle: &str, nth: usize) -> Option<usize> {
    text.lines().enumerate().filter(|(_, line)| line.contains(needle)).nth(nth).map(|(i, _)| i + 1)
}

fn at_line(text: &str, needle: &str, nth: usize) -> String {
    line_of(text, needle, nth).map(|l| format!(" (line {l})")).unwrap_or_default()
}

/// "metrics[0].weight: -1 must be a finite number >= 0 (line 6)". serde_yaml locates an
/// error at the mapping that holds the bad value; the line of the field itself is the first
/// line from there that names the field's key.
fn describe(text: &str, error: serde_path_to_error::Error<serde_yaml::Error>) -> PolicyError {
    let path = error.path().to_string();
    let inner = error.inner();
    let mut message = inner.to_string();
    if let Some(cut) = message.rfind(" at line ") {
        message.truncate(cut);
    }
    // serde_yaml prefixes its own (shorter) path: keep only the message.
    if let Some((prefix, rest)) = message.split_once(": ")
        && !prefix.contains(' ')
    {
        message = rest.to_owned();
    }
    let key = path.rsplit('.').next().unwrap_or("").split('[').next().unwrap_or("");
    let line = inner.location().map(|at| {
        let start = at.line();
        text.lines()
            .enumerate()
            .skip(start.saturating_sub(1))
            .find(|(_, l)| !key.is_empty() && l.contains(&format!("{key}:")))
            .map_or(start, |(i, _)| i + 1)
    });
    match (path.as_str(), line) {
        (".", Some(line)) | ("", Some(line)) => PolicyError(format!("{message} (line {line})")),
        (_, Some(line)) => PolicyError(format!("{path}: {message} (line {line})")),
        (_, None) => PolicyError(format!("{path}: {message}")),
    }
}

/// Parses and validates a policy; an empty document gives the default policy.
pub fn parse_policy(text: &str) -> Result<Policy, PolicyError> {
    let file: PolicyFile = if text.trim().is_empty() {
        PolicyFile::default()
    } else {
        let deserializer = serde_yaml::Deserializer::from_str(text);
        serde_path_to_error::deserialize(deserializer).map_err(|e| describe(text, e))?
    };
    let defaults = Policy::default();

    let stale_file = file.stale.unwrap_or(StaleFile { max_age: None, filter: None, score: None });
    let global_max_age = stale_file.max_age.unwrap_or(MaxAge::Auto);

    let metrics = match file.metrics {
        None => match global_max_age {
            MaxAge::Auto => defaults.metrics.clone(),
            MaxAge::Fixed(span) => {
                defaults.metrics.iter().map(|m| MetricSpec { max_age: span, ..m.clone() }).collect()
            }
        },
        Some(list) => {
            if list.is_empty() {
                return Err(PolicyError(format!(
                    "metrics: at least one metric is needed{}",
                    at_line(text, "metrics", 0)
                )));
            }
            let mut metrics = Vec::with_capacity(list.len());
            for (i, m) in list.into_iter().enumerate() {
                if m.name.trim().is_empty() {
                    return Err(PolicyError(format!("metrics[{i}].name: must not be empty")));
                }
                if let Some(earlier) = metrics.iter().position(|x: &MetricSpec| x.name == m.name) {
                    return Err(PolicyError(format!(
                        "metrics[{i}].name: '{}' is already the name of metrics[{earlier}]{}",
                        m.name,
                        at_line(text, &m.name, 1)
                    )));
                }
                if m.query.trim().is_empty() {
                    return Err(PolicyError(format!(
                        "metrics[{i}].query: must not be empty{}",
                        at_line(text, &m.name, 0)
                    )));
                }
                let period = m.period.0;
                let max_age = match m.max_age.unwrap_or(global_max_age) {
                    MaxAge::Auto => auto_max_age(period),
                    MaxAge::Fixed(span) => span,
                };
                metrics.push(MetricSpec {
                    name: m.name,
                    resource: match m.resource {
                        ResourceFile::Cpu => Resource::Cpu,
                        ResourceFile::Memory => Resource::Memory,
                        ResourceFile::Other => Resource::Other,
                    },
                    query: m.query,
                    period,
                    weight: m.weight.0,
                    filter_above: m.filter_above.map(|p| p.0),
                    max_age,
                });
            }
            metrics
        }
    };
    if metrics.iter().map(|m| m.weight).sum::<f64>() <= 0.0 {
        return Err(PolicyError(format!(
            "metrics[].weight: the weights must not all be zero{}",
            at_line(text, "weight", 0)
        )));
    }

    let curve = match file.curve {
        None => defaults.curve.clone(),
        Some(curve) => {
            if curve.kind != CurveKind::WaterLevel && curve.target.is_some() {
                return Err(PolicyError(format!(
                    "curve.target: only the waterLevel curve has a target{}",
                    at_line(text, "target", 0)
                )));
            }
            if curve.kind != CurveKind::Crane && curve.hot_value.is_some() {
                return Err(PolicyError(format!(
                    "curve.hotValue: only the crane curve has a hot value{}",
                    at_line(text, "hotValue", 0)
                )));
            }
            match curve.kind {
                CurveKind::WaterLevel => {
                    let target = curve.target.map_or(40.0, |t| t.0);
                    if target <= 0.0 || target >= 100.0 {
                        return Err(PolicyError(format!(
                            "curve.target: {target} must be strictly between 0 and 100{}",
                            at_line(text, "target", 0)
                        )));
                    }
                    Curve::WaterLevel { target }
                }
                CurveKind::LeastUsed => Curve::LeastUsed,
                CurveKind::Crane => {
                    let hot_windows = match curve.hot_value {
                        None => default_hot_windows(),
                        Some(list) => {
                            let mut windows = Vec::new();
                            for (i, w) in list.into_iter().enumerate() {
                                if w.count == 0 {
                                    return Err(PolicyError(format!(
                                        "curve.hotValue[{i}].count: must be at least 1{}",
                                        at_line(text, "count", i)
                                    )));
                                }
                                windows.push(HotWindow { window: w.window.0, count: w.count });
                            }
                            windows
                        }
                    };
                    Curve::Crane { hot_windows }
                }
            }
        }
    };

    let estimator = match file.estimator {
        None => defaults.estimator.clone(),
        Some(e) => Estimator {
            cpu_factor: e.cpu_factor.map_or(defaults.estimator.cpu_factor, |f| f.0),
            memory_factor: e.memory_factor.map_or(defaults.estimator.memory_factor, |f| f.0),
            best_effort_cpu_millis: e
                .best_effort_cpu
                .map_or(defaults.estimator.best_effort_cpu_millis, |q| q.0),
            best_effort_memory_bytes: e
                .best_effort_memory
                .map_or(defaults.estimator.best_effort_memory_bytes, |q| q.0),
        },
    };

    let stale = StalePolicy {
        filter: match stale_file.filter {
            None | Some(StaleFilterFile::Pass) => StaleFilter::Pass,
            Some(StaleFilterFile::Reject) => StaleFilter::Reject,
        },
        score: stale_file.score.map_or(defaults.stale.score, |p| p.0),
    };

    let ledger = match file.ledger {
        None => defaults.ledger.clone(),
        Some(l) => LedgerPolicy {
            enabled: l.enabled.unwrap_or(defaults.ledger.enabled),
            absorb_window: l.absorb_window.map_or(defaults.ledger.absorb_window, |d| d.0),
            reserve_ttl: l.reserve_ttl.map_or(defaults.ledger.reserve_ttl, |d| d.0),
        },
    };

    let mut anti_colocation = Vec::new();
    for (i, rule) in file.anti_colocation.unwrap_or_default().into_iter().enumerate() {
        if rule.label_key.trim().is_empty() {
            return Err(PolicyError(format!(
                "antiColocation[{i}].labelKey: must not be empty{}",
                at_line(text, "labelKey", i)
            )));
        }
        anti_colocation.push(AntiColocation { label_key: rule.label_key });
    }

    let node_labels = match file.node_mapping {
        None => defaults.node_labels.clone(),
        Some(m) if m.labels.is_empty() => {
            return Err(PolicyError(format!(
                "nodeMapping.labels: at least one label is needed{}",
                at_line(text, "labels", 0)
            )));
        }
        Some(m) => m.labels,
    };

    let extender_score_mapping = match file.extender.and_then(|e| e.score_mapping) {
        None | Some(ScoreMappingFile::Round) => ScoreMapping::Round,
        Some(ScoreMappingFile::Rescale) => ScoreMapping::Rescale,
    };

    Ok(Policy {
        metrics,
        curve,
        estimator,
        stale,
        ledger,
        anti_colocation,
        node_labels,
        extender_score_mapping,
    })
}

#[cfg(test)]
mod tests;
