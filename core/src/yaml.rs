//! YAML files whose errors name the field and the line: the one way the policy file and the
//! simulator's scenarios are read (serde_yaml through serde_path_to_error), and the
//! Kubernetes-quantity fields both carry.

use serde::{Deserialize, Deserializer, de::Error as _};

use crate::quantity::{parse_bytes, parse_cpu_millis};

/// "metrics[0].weight: -1 must be a finite number >= 0 (line 6)". serde_yaml locates an
/// error at the mapping that holds the bad value; the line of the field itself is the first
/// line from there that names the field's key.
pub fn describe(text: &str, error: serde_path_to_error::Error<serde_yaml::Error>) -> String {
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
    // serde_yaml has no location for errors about the whole stream (a second document,
    // an empty one): the second document's separator, else the first line with content.
    let line = line.unwrap_or_else(|| {
        let lines = || text.lines().enumerate();
        let separator = lines().skip(1).find(|(_, l)| l.starts_with("---") || l.starts_with("..."));
        separator.or_else(|| lines().find(|(_, l)| !l.trim().is_empty())).map_or(1, |(i, _)| i + 1)
    });
    match path.as_str() {
        "." | "" => format!("{message} (line {line})"),
        _ => format!("{path}: {message} (line {line})"),
    }
}

/// A cpu quantity in milli-cores (`250m`, `2`, or a YAML number).
#[derive(Clone, Copy, Debug)]
pub struct CpuQuantity(pub i64);

impl<'de> Deserialize<'de> for CpuQuantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = quantity_text(d)?;
        parse_cpu_millis(&text).map(CpuQuantity).map_err(D::Error::custom)
    }
}

/// A byte quantity (`200Mi`, `1e3`, or a YAML number).
#[derive(Clone, Copy, Debug)]
pub struct ByteQuantity(pub i64);

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
