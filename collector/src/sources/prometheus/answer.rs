//! Reading a PromQL instant-query answer (the `/api/v1/query` JSON every PromQL endpoint
//! speaks: Prometheus, Thanos, Mimir, VictoriaMetrics) and turning its series into per-node
//! values. Parsed leniently, sample by sample: one bad value drops that sample, never the
//! whole answer; a body that is not the API's JSON at all is an error that says what came.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use waterline_core::UnixMillis;

use crate::node_directory::{NodeDirectory, map_series};

/// Why a query gave no samples.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryError {
    /// The endpoint answered with the API's error object (bad PromQL, evaluation timeout, …).
    #[error("{error_type}: {message}")]
    Prometheus { error_type: String, message: String },
    #[error("HTTP {status}: {body}")]
    Http { status: u16, body: String },
    #[error("the answer is not JSON (HTTP {status}, content-type {content_type:?}): {body}")]
    NotJson { status: u16, content_type: String, body: String },
    #[error("the answer is not valid Prometheus API JSON (HTTP {status}): {error}; body: {body}")]
    BadJson { status: u16, error: String, body: String },
    #[error("the query returned a {0}; an instant vector (one sample per series) is needed")]
    ResultType(String),
    #[error("no answer within {0:?}")]
    Timeout(std::time::Duration),
    #[error("request failed: {0}")]
    Transport(String),
}

/// A sample's value as the endpoint wrote it.
#[derive(Clone, Debug, PartialEq)]
pub enum RawValue {
    Number(f64),
    /// Not a number at all (`"abc"`).
    Garbage(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub at: UnixMillis,
    pub value: RawValue,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    status: String,
    #[serde(borrow)]
    data: Option<Data<'a>>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data<'a> {
    #[serde(rename = "resultType")]
    result_type: String,
    /// Kept as the body's bytes and parsed once `resultType` says what it is: going through
    /// a `serde_json::Value` tree first allocated every label twice (5,000 series per query).
    #[serde(borrow)]
    result: Option<&'a serde_json::value::RawValue>,
}

#[derive(Deserialize)]
struct VectorRow {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    value: (f64, JsonValue),
}

/// Prometheus writes values as strings; be kind to endpoints that write numbers.
#[derive(Deserialize)]
#[serde(untagged)]
enum JsonValue {
    Text(String),
    Number(f64),
    Other(serde_json::Value),
}

/// At most this much of a body goes into an error message.
const SNIPPET: usize = 200;

fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let mut cut: String = text.chars().take(SNIPPET).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    printable(&cut)
}

/// `text` with its control characters made harmless: line breaks and tabs become spaces,
/// the others their `\u{..}` escape. What an endpoint sends ends up in a log line and in
/// ListNodes, where a NUL makes a log file "binary" to grep and a `\r` or an escape sequence
/// forges or hides lines on a terminal.
fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    out
}

fn parse_value(v: JsonValue) -> RawValue {
    match v {
        JsonValue::Number(n) => RawValue::Number(n),
        // Prometheus spells them NaN, +Inf, -Inf; Rust parses "NaN", "inf", "+inf".
        JsonValue::Text(t) => match t.as_str() {
            "+Inf" | "Inf" => RawValue::Number(f64::INFINITY),
            "-Inf" => RawValue::Number(f64::NEG_INFINITY),
            _ => t.trim().parse().map(RawValue::Number).unwrap_or(RawValue::Garbage(t)),
        },
        JsonValue::Other(v) => RawValue::Garbage(v.to_string()),
    }
}

fn at(seconds: f64) -> UnixMillis {
    UnixMillis((seconds * 1000.0).round() as i64)
}

/// The `result` of one `/api/v1/query` answer, with its `resultType`, once the body is
/// known to be the API's JSON and to report success.
fn result<'a>(
    status: u16,
    content_type: &str,
    body: &'a [u8],
) -> Result<(String, &'a str), QueryError> {
    let looks_json = content_type.to_ascii_lowercase().contains("json")
        || body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if !looks_json {
        return Err(if (200..300).contains(&status) {
            QueryError::NotJson {
                status,
                content_type: content_type.to_owned(),
                body: snippet(body),
            }
        } else {
            QueryError::Http { status, body: snippet(body) }
        });
    }
    let envelope: Envelope = match serde_json::from_slice(body) {
        Ok(e) => e,
        Err(_) if !(200..300).contains(&status) => {
            return Err(QueryError::Http { status, body: snippet(body) });
        }
        Err(error) => {
            return Err(QueryError::BadJson {
                status,
                error: printable(&error.to_string()),
                body: snippet(body),
            });
        }
    };
    if envelope.status != "success" {
        return Err(match (envelope.error_type, envelope.error) {
            (error_type, Some(message)) => QueryError::Prometheus {
                error_type: printable(error_type.as_deref().unwrap_or("error")),
                message: printable(&message),
            },
            _ => QueryError::BadJson {
                status,
                error: format!("status {:?} without an error message", envelope.status),
                body: snippet(body),
            },
        });
    }
    let data = envelope.data.ok_or_else(|| bad_json(status, body, "no `data`".into()))?;
    let result = data.result.map_or("null", |raw| raw.get());
    Ok((data.result_type, result))
}

fn bad_json(status: u16, body: &[u8], error: String) -> QueryError {
    QueryError::BadJson { status, error: printable(&error), body: snippet(body) }
}

/// Reads one `/api/v1/query` answer.
pub fn parse(status: u16, content_type: &str, body: &[u8]) -> Result<Vec<Series>, QueryError> {
    let (result_type, result) = self::result(status, content_type, body)?;
    let bad = |error: String| bad_json(status, body, error);
    match result_type.as_str() {
        "vector" => {
            let rows: Vec<VectorRow> =
                serde_json::from_str(result).map_err(|e| bad(e.to_string()))?;
            Ok(rows
                .into_iter()
                .map(|row| Series {
                    labels: row.metric,
                    at: at(row.value.0),
                    value: parse_value(row.value.1),
                })
                .collect())
        }
        "scalar" => {
            let (t, v): (f64, JsonValue) =
                serde_json::from_str(result).map_err(|e| bad(e.to_string()))?;
            Ok(vec![Series { labels: BTreeMap::new(), at: at(t), value: parse_value(v) }])
        }
        "matrix" => Err(QueryError::ResultType("range vector".into())),
        other => Err(QueryError::ResultType(printable(other))),
    }
}

/// A label value as the body spells it: borrowed unless JSON escapes made it a copy.
pub struct Label<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Label<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Label<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a label value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Label<'de>, E> {
                Ok(Label(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Label<'de>, E> {
                Ok(Label(Cow::Owned(v.to_owned())))
            }
        }
        deserializer.deserialize_str(Visit)
    }
}

/// The two labels of a per-pod series; any other label is skipped unread.
#[derive(Default, Deserialize)]
pub struct PodLabels<'a> {
    #[serde(borrow)]
    pub namespace: Option<Label<'a>>,
    #[serde(borrow)]
    pub pod: Option<Label<'a>>,
}

/// A sample's value: a finite number, or `None` (NaN, ±Inf, not a number).
pub struct Finite(pub Option<f64>);

impl<'de> Deserialize<'de> for Finite {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Finite;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sample value")
            }
            fn visit_str<E>(self, v: &str) -> Result<Finite, E> {
                Ok(Finite(v.trim().parse::<f64>().ok().filter(|v| v.is_finite())))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Finite, E> {
                Ok(Finite(Some(v).filter(|v| v.is_finite())))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Finite, E> {
                Ok(Finite(Some(v as f64)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Finite, E> {
                Ok(Finite(Some(v as f64)))
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

/// One series of a per-pod answer.
#[derive(Deserialize)]
pub struct PodRow<'a> {
    #[serde(borrow, default)]
    pub metric: PodLabels<'a>,
    pub value: (f64, Finite),
}

/// Reads one `/api/v1/query` answer of per-pod series (the learner's), handing each row to
/// `each` as it is read: no label map per series and no list of rows (four answers of
/// 50,000 series cost 175 MiB and 600 ms as [`Series`]). Returns how many rows there were.
pub fn parse_pods(
    status: u16,
    content_type: &str,
    body: &[u8],
    each: impl FnMut(PodRow<'_>),
) -> Result<usize, QueryError> {
    let (result_type, result) = self::result(status, content_type, body)?;
    match result_type.as_str() {
        "vector" => {
            let mut deserializer = serde_json::Deserializer::from_str(result);
            let rows = serde::de::DeserializeSeed::deserialize(EachRow(each), &mut deserializer)
                .and_then(|rows| deserializer.end().map(|()| rows))
                .map_err(|e| bad_json(status, body, e.to_string()))?;
            Ok(rows)
        }
        "matrix" => Err(QueryError::ResultType("range vector".into())),
        other => Err(QueryError::ResultType(printable(other))),
    }
}

/// The vector's rows, each handed to the function as it is read.
struct EachRow<F>(F);

impl<'de, F: FnMut(PodRow<'_>)> serde::de::DeserializeSeed<'de> for EachRow<F> {
    type Value = usize;
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(PodRow<'_>)> serde::de::Visitor<'de> for EachRow<F> {
    type Value = usize;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of series")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, mut seq: A) -> Result<usize, A::Error> {
        let mut rows = 0;
        while let Some(row) = seq.next_element::<PodRow<'de>>()? {
            (self.0)(row);
            rows += 1;
        }
        Ok(rows)
    }
}

/// One answer mapped to nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mapped {
    /// node → (value, sample time); several series of one node keep the highest value.
    pub values: BTreeMap<String, (f64, UnixMillis)>,
    /// Series in the answer.
    pub series: usize,
    /// Label sets of the series no node was found for.
    pub unmapped: Vec<BTreeMap<String, String>>,
    /// Samples dropped for NaN, ±Inf or a non-number.
    pub dropped: usize,
    /// Values moved into 0..=100.
    pub clamped: usize,
}

/// Maps every series to its node; with `percent`, values outside 0..=100 are clamped.
pub fn map_to_nodes(
    series: Vec<Series>,
    node_labels: &[String],
    directory: &NodeDirectory,
    percent: bool,
) -> Mapped {
    let mut out = Mapped { series: series.len(), ..Mapped::default() };
    for s in series {
        let value = match s.value {
            RawValue::Number(v) if v.is_finite() => v,
            _ => {
                out.dropped += 1;
                continue;
            }
        };
        let Some(node) = map_series(&s.labels, node_labels, directory) else {
            out.unmapped.push(s.labels);
            continue;
        };
        let value = if percent && !(0.0..=100.0).contains(&value) {
            out.clamped += 1;
            value.clamp(0.0, 100.0)
        } else {
            value
        };
        out.values
            .entry(node)
            .and_modify(|(v, t)| {
                if value > *v {
                    (*v, *t) = (value, s.at);
                }
            })
            .or_insert((value, s.at));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: &str = "application/json";

    fn labels() -> Vec<String> {
        vec!["node".into(), "instance".into()]
    }

    #[test]
    fn per_pod_answers_read_the_two_labels_and_finite_values_only() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"namespace":"shop","pod":"web-a","job":"kubelet"},"value":[1.5,"0.25"]},
            {"metric":{"namespace":"sh\u006fp","pod":"web-b"},"value":[1.5,"NaN"]},
            {"metric":{"pod":"lonely"},"value":[1.5,"+Inf"]},
            {"metric":{},"value":[1.5,12]}]}}"#;
        let label = |l: &Option<Label>| l.as_ref().map(|l| l.0.to_string());
        let mut read: Vec<(Option<String>, Option<String>, Option<f64>)> = Vec::new();
        let mut borrowed = Vec::new();
        let rows = parse_pods(200, JSON, body, |r| {
            borrowed.push(matches!(r.metric.pod, Some(Label(Cow::Borrowed(_)))));
            read.push((label(&r.metric.namespace), label(&r.metric.pod), r.value.1.0));
        })
        .unwrap();
        assert_eq!(rows, 4);
        let some = |s: &str| Some(s.to_string());
        assert_eq!(
            read,
            [
                (some("shop"), some("web-a"), Some(0.25)),
                // An escaped label is unescaped; NaN and +Inf are no value.
                (some("shop"), some("web-b"), None),
                (None, some("lonely"), None),
                (None, None, Some(12.0)),
            ]
        );
        assert_eq!(borrowed, [true, true, true, false], "labels borrow from the body");
        // The same errors as any answer: an API error, another result type.
        let error = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        let parse = |status, body: &[u8]| parse_pods(status, JSON, body, |_| {});
        assert!(matches!(parse(400, error), Err(QueryError::Prometheus { .. })));
        let scalar = br#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#;
        assert_eq!(parse(200, scalar).err(), Some(QueryError::ResultType("scalar".into())));
        let truncated =
            br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}"#;
        assert!(matches!(parse(200, truncated), Err(QueryError::BadJson { .. })));
    }

    #[test]
    fn vector_answers_keep_time_and_every_value_shape() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"instance":"10.0.0.1:9100"},"value":[1700000000.5,"42.5"]},
            {"metric":{"node":"b"},"value":[1700000000.5,"NaN"]},
            {"metric":{"node":"c"},"value":[1700000000.5,"+Inf"]},
            {"metric":{"node":"d"},"value":[1700000000.5,"abc"]},
            {"metric":{"node":"e"},"value":[1700000000.5,7]}]}}"#;
        let series = parse(200, JSON, body).unwrap();
        assert_eq!(series.len(), 5);
        assert_eq!(series[0].at, UnixMillis(1_700_000_000_500));
        assert_eq!(series[0].value, RawValue::Number(42.5));
        assert!(matches!(series[1].value, RawValue::Number(v) if v.is_nan()));
        assert_eq!(series[2].value, RawValue::Number(f64::INFINITY));
        assert_eq!(series[3].value, RawValue::Garbage("abc".into()));
        assert_eq!(series[4].value, RawValue::Number(7.0));

        let mapped = map_to_nodes(series, &labels(), &NodeDirectory::default(), true);
        assert_eq!(mapped.series, 5);
        assert_eq!(mapped.dropped, 3);
        assert_eq!(mapped.values.len(), 2);
        assert_eq!(mapped.values["10.0.0.1"], (42.5, UnixMillis(1_700_000_000_500)));
    }

    #[test]
    fn percent_values_are_clamped_and_duplicates_keep_the_highest() {
        let dir = NodeDirectory::default();
        let s = |node: &str, v: f64| Series {
            labels: [("node".to_string(), node.to_string())].into(),
            at: UnixMillis(1),
            value: RawValue::Number(v),
        };
        let mapped = map_to_nodes(
            vec![s("a", 130.0), s("b", -2.0), s("c", 10.0), s("c", 30.0), s("c", 20.0)],
            &labels(),
            &dir,
            true,
        );
        assert_eq!(mapped.clamped, 2);
        assert_eq!(mapped.values["a"].0, 100.0);
        assert_eq!(mapped.values["b"].0, 0.0);
        assert_eq!(mapped.values["c"].0, 30.0);
        let raw = map_to_nodes(vec![s("a", 4096.0)], &labels(), &dir, false);
        assert_eq!((raw.clamped, raw.values["a"].0), (0, 4096.0));
    }

    #[test]
    fn unmapped_series_are_reported_with_their_labels() {
        let dir = NodeDirectory::default();
        dir.upsert("node-a", vec!["10.0.0.1".into()]);
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"instance":"10.0.0.1:9100"},"value":[1,"1"]},
            {"metric":{"instance":"10.0.0.9:9100","job":"x"},"value":[1,"2"]},
            {"metric":{},"value":[1,"3"]}]}}"#;
        let mapped = map_to_nodes(parse(200, JSON, body).unwrap(), &labels(), &dir, true);
        assert_eq!(mapped.values.keys().collect::<Vec<_>>(), ["node-a"]);
        assert_eq!(mapped.unmapped.len(), 2);
        assert_eq!(mapped.unmapped[0]["instance"], "10.0.0.9:9100");
    }

    #[test]
    fn api_errors_keep_the_server_message() {
        let body = br#"{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected <op:*>"}"#;
        let err = parse(400, JSON, body).unwrap_err();
        assert_eq!(err.to_string(), "bad_data: 1:5: parse error: unexpected <op:*>");
    }

    #[test]
    fn garbage_bodies_are_errors_that_say_what_came() {
        let html =
            parse(200, "text/html; charset=utf-8", b"<html><body>Login</body></html>").unwrap_err();
        assert!(matches!(html, QueryError::NotJson { .. }), "{html}");
        assert!(html.to_string().contains("not JSON") && html.to_string().contains("<html>"));

        let broken = parse(200, JSON, b"{\"status\":\"success\",\"data\":").unwrap_err();
        assert!(matches!(broken, QueryError::BadJson { .. }), "{broken}");

        let five = parse(500, "text/plain", b"upstream exploded").unwrap_err();
        assert_eq!(five.to_string(), "HTTP 500: upstream exploded");
        let five_json = parse(502, JSON, b"not json").unwrap_err();
        assert!(matches!(five_json, QueryError::Http { status: 502, .. }));

        let matrix =
            parse(200, JSON, br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#)
                .unwrap_err();
        assert!(matches!(matrix, QueryError::ResultType(_)));

        let long = vec![b'x'; 5000];
        let err = parse(503, "text/plain", &long).unwrap_err().to_string();
        assert!(err.len() < 400, "{}", err.len());
    }

    /// Found by the e2e fault matrix (a proxy answering garbage): a NUL byte of the body
    /// reached the collector's plain-text log, which grep then took for a binary file. What
    /// an endpoint sends (a body, its error message, its resultType) must never put control
    /// characters into a message that is logged and served in ListNodes: a `\r` or an escape
    /// sequence there forges or hides log lines on a terminal.
    #[test]
    fn control_characters_never_reach_the_message() {
        let errors = [
            parse(200, JSON, b"{\"status\":\"success\",\"data\":\x00\x1b[2J\r\t\x7f").unwrap_err(),
            parse(502, "text/plain", b"bad\x00gateway\x1b]0;title\x07\r\nINFO forged line")
                .unwrap_err(),
            parse(200, "text/html", b"<html>\x1b[31mred</html>").unwrap_err(),
            parse(
                422,
                JSON,
                br#"{"status":"error","errorType":"bad\u0000data","error":"line\r\u001b[1Agone"}"#,
            )
            .unwrap_err(),
            parse(
                200,
                JSON,
                br#"{"status":"success","data":{"resultType":"ma\u001btrix","result":[]}}"#,
            )
            .unwrap_err(),
        ];
        for error in errors {
            let text = error.to_string();
            assert!(!text.chars().any(char::is_control), "control character in {text:?}");
        }
        let nul = parse(502, "text/plain", b"bad\x00gateway").unwrap_err();
        assert_eq!(nul.to_string(), "HTTP 502: bad\\u{0}gateway", "shown, escaped");
    }

    #[test]
    fn scalars_have_no_node() {
        let body = br#"{"status":"success","data":{"resultType":"scalar","result":[1,"5"]}}"#;
        let mapped = map_to_nodes(
            parse(200, JSON, body).unwrap(),
            &labels(),
            &NodeDirectory::default(),
            true,
        );
        assert_eq!((mapped.series, mapped.unmapped.len()), (1, 1));
    }
}
