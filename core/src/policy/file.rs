//! The policy file (YAML). Field values are validated while they are deserialized, so a bad
//! value is reported by serde_yaml with its path and line (`metrics[1].weight: … at line 7
//! column 13`); rules that span fields are checked afterwards, section by section
//! (`sections.rs`), and name the field and line.

mod sections;
mod values;

use serde::Deserialize;

use super::*;
use sections::*;
use values::MaxAge;

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid policy: {0}")]
pub struct PolicyError(pub String);

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PolicyFile {
    metrics: Option<Vec<MetricFile>>,
    curve: Option<CurveFile>,
    combine: Option<CombineFile>,
    estimator: Option<EstimatorFile>,
    stale: Option<StaleFile>,
    ledger: Option<LedgerFile>,
    anti_colocation: Option<Vec<AntiColocationFile>>,
    node_mapping: Option<NodeMappingFile>,
    extender: Option<ExtenderFile>,
    rounding: Option<RoundingFile>,
    priorities: Option<Vec<PriorityFile>>,
}

/// The policy's text, for pointing an error at the line of a field.
struct Located<'a>(&'a str);

impl Located<'_> {
    /// "`field`: `why` (line N)", N the line of the `nth` line that contains `needle`.
    fn error(&self, field: &str, why: &str, needle: &str, nth: usize) -> PolicyError {
        let with_needle = || self.0.lines().enumerate().filter(|(_, line)| line.contains(needle));
        // Flow style puts several entries on one line: then the last line that has one. A
        // needle on no line at all (a key the file left out) points at the first line.
        let line =
            with_needle().nth(nth).or_else(|| with_needle().last()).map_or(1, |(i, _)| i + 1);
        PolicyError(format!("{field}: {why} (line {line})"))
    }
}

impl Located<'_> {
    /// The line index of metrics[i]: the i-th line with a `name:` key (metrics are the only
    /// section whose entries have names).
    fn metric_line(&self, i: usize) -> Option<usize> {
        self.0
            .lines()
            .enumerate()
            .filter(|(_, line)| {
                !line.trim_start().starts_with('#')
                    && line
                        .match_indices("name:")
                        .any(|(at, _)| at == 0 || !line.as_bytes()[at - 1].is_ascii_alphanumeric())
            })
            .nth(i)
            .map(|(n, _)| n)
    }

    /// "metrics[i].`key`: `why` (line N)", N the first line of metrics[i] from its name on
    /// that holds `key:` (the name's line when none does).
    fn metric_error(&self, i: usize, key: &str, why: &str) -> PolicyError {
        let field = format!("metrics[{i}].{key}");
        let Some(start) = self.metric_line(i) else {
            return PolicyError(format!("{field}: {why}"));
        };
        let last = key.rsplit('.').next().unwrap_or(key);
        let line = self
            .0
            .lines()
            .enumerate()
            .skip(start)
            .find(|(_, l)| l.contains(&format!("{last}:")))
            .map_or(start, |(n, _)| n);
        PolicyError(format!("{field}: {why} (line {})", line + 1))
    }
}

/// "metrics[i].`key`: `why` (line N)" for a rule checked outside this crate (the PromQL
/// syntax of a query), located in the policy's `text` like the file's own errors.
pub fn metric_field_error(text: &str, i: usize, key: &str, why: &str) -> PolicyError {
    Located(text).metric_error(i, key, why)
}

/// Parses and validates a policy; an empty document gives the default policy.
pub fn parse_policy(text: &str) -> Result<Policy, PolicyError> {
    let file: PolicyFile = if text.trim().is_empty() {
        PolicyFile::default()
    } else {
        let deserializer = serde_yaml::Deserializer::from_str(text);
        serde_path_to_error::deserialize(deserializer)
            .map_err(|e| PolicyError(crate::yaml::describe(text, e)))?
    };
    let at = Located(text);
    let stale_file = file.stale.unwrap_or_default();
    let ledger_file = file.ledger.unwrap_or_default();
    let ledger = ledger(&ledger_file);
    let metric_defaults = MetricDefaults {
        max_age: stale_file.max_age.unwrap_or(MaxAge::Auto),
        lag: ledger.lag,
        absorb_window: ledger_file.absorb_window.map(|w| w.0),
    };
    let curve = curve(&at, file.curve)?;
    let metrics = metrics(&at, file.metrics, &metric_defaults, &curve)?;
    Ok(Policy {
        priorities: priorities(&at, file.priorities, &metrics)?,
        metrics,
        curve,
        combine: combine(file.combine),
        estimator: estimator(&at, file.estimator)?,
        stale: stale(&at, &stale_file)?,
        ledger,
        anti_colocation: anti_colocation(&at, file.anti_colocation)?,
        node_labels: node_labels(&at, file.node_mapping)?,
        extender_score_mapping: extender_score_mapping(file.extender),
        rounding: rounding(file.rounding),
    })
}

#[cfg(test)]
mod tests;
