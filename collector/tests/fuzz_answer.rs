//! Prometheus answers, fuzzed (RELIABILITY.md): random and mutated instant-query bodies —
//! NaN, ±Inf, strings, missing labels, duplicate series, wrong types, cut-off JSON — are read
//! into series or refused with a reason, never a panic, and what reaches a node is a finite
//! percentage. Cases: `WATERLINE_FUZZ_CASES` (default 512 in `make test`); failures are kept
//! in `fuzz_answer.regressions`. The service-level half (a failing query marks only its own
//! metric) is `tests/tests/collector_prometheus.rs`.

use proptest::prelude::*;
use waterline_collector::node_directory::NodeDirectory;
use waterline_collector::sources::prometheus::answer::{map_to_nodes, parse};

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        (-1e6f64..1e6).prop_map(|v| format!("\"{v}\"")),
        (0f64..100.0).prop_map(|v| format!("\"{v}\"")),
        Just("\"NaN\"".to_owned()),
        Just("\"+Inf\"".to_owned()),
        Just("\"-Inf\"".to_owned()),
        Just("\"1e400\"".to_owned()),
        Just("\"abc\"".to_owned()),
        Just("\"\"".to_owned()),
        Just("12.5".to_owned()),
        Just("null".to_owned()),
        Just("{\"a\": 1}".to_owned()),
        Just("[1, 2]".to_owned()),
    ]
}

fn labels() -> impl Strategy<Value = String> {
    let label = prop_oneof![
        "node-[0-9]{1,2}".prop_map(|n| format!("\"node\": \"{n}\"")),
        "10\\.0\\.0\\.[0-9]:9100".prop_map(|i| format!("\"instance\": \"{i}\"")),
        Just("\"job\": \"node\"".to_owned()),
        Just("\"node\": \"\"".to_owned()),
        Just("\"node\": 7".to_owned()),
        Just("\"é\u{1F600}\": \"x\"".to_owned()),
    ];
    proptest::collection::vec(label, 0..3).prop_map(|l| format!("{{{}}}", l.join(", ")))
}

fn row() -> impl Strategy<Value = String> {
    let time = prop_oneof![
        (0f64..2e9).prop_map(|t| t.to_string()),
        Just("-1".to_owned()),
        Just("1e300".to_owned()),
        Just("\"1700000000\"".to_owned()),
    ];
    (labels(), time, value())
        .prop_map(|(l, t, v)| format!("{{\"metric\": {l}, \"value\": [{t}, {v}]}}"))
}

/// A body: a well-formed vector (rows may repeat), another result type, an error answer, or
/// any of them with bytes cut or flipped.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let vector = proptest::collection::vec(row(), 0..20).prop_flat_map(|rows| {
        let n = rows.len();
        (Just(rows), 0..=n).prop_map(|(mut rows, dup)| {
            if let Some(r) = rows.get(dup).cloned() {
                rows.push(r);
            }
            format!(
                "{{\"status\": \"success\", \"data\": {{\"resultType\": \"vector\", \"result\": [{}]}}}}",
                rows.join(", ")
            )
        })
    });
    let other = prop_oneof![
        Just(
            r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"42"]}}"#
                .to_owned()
        ),
        Just(r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#.to_owned()),
        Just(r#"{"status":"success","data":{"resultType":"string","result":[1,"x"]}}"#.to_owned()),
        Just(
            r#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#
                .to_owned()
        ),
        Just(r#"{"status":"error"}"#.to_owned()),
        Just(r#"{"status":"success"}"#.to_owned()),
        Just(r#"{"status":"success","data":{"resultType":"vector","result":{}}}"#.to_owned()),
        Just("<html>502 Bad Gateway</html>".to_owned()),
        Just(String::new()),
    ];
    let text = prop_oneof![4 => vector, 1 => other];
    (text, proptest::collection::vec((any::<usize>(), any::<u8>(), any::<bool>()), 0..4)).prop_map(
        |(text, edits)| {
            let mut bytes = text.into_bytes();
            for (at, byte, cut) in edits {
                if bytes.is_empty() {
                    break;
                }
                let at = at % bytes.len();
                if cut { bytes.truncate(at) } else { bytes[at] = byte }
            }
            bytes
        },
    )
}

proptest! {
    #![proptest_config(waterline_testkit::proptest_config(512))]

    #[test]
    fn answers_are_read_or_refused_with_a_reason(
        status in prop_oneof![Just(200u16), Just(400), Just(422), Just(500), Just(503)],
        content_type in prop_oneof![Just("application/json"), Just("text/html"), Just("")],
        body in body(),
        percent in any::<bool>(),
    ) {
        match parse(status, content_type, &body) {
            Ok(series) => {
                let labels = ["node".to_string(), "instance".to_string()];
                let mapped = map_to_nodes(series.clone(), &labels, &NodeDirectory::default(), percent);
                prop_assert_eq!(mapped.series, series.len());
                prop_assert!(mapped.dropped + mapped.unmapped.len() <= series.len());
                for (node, (value, _)) in &mapped.values {
                    prop_assert!(!node.is_empty());
                    prop_assert!(value.is_finite(), "{node}: {value}");
                    if percent {
                        prop_assert!((0.0..=100.0).contains(value), "{node}: {value}");
                    }
                }
            }
            Err(error) => {
                let text = error.to_string();
                prop_assert!(!text.is_empty());
                // The message is logged and served in ListNodes: no NUL, `\r` or escape
                // sequence from the endpoint may reach it.
                prop_assert!(!text.chars().any(char::is_control), "{text:?}");
            }
        }
    }
}

/// A huge answer is read (it is large, not malformed): the limit on an answer's size is the
/// HTTP client's, not the parser's. 200,000 series in `make test` (a debug build reads them
/// in ~4 s); the long mode (`WATERLINE_FUZZ_SERIES=1000000`, RELIABILITY.md) reads a million.
#[test]
fn a_huge_answer_is_read() {
    let count: usize =
        std::env::var("WATERLINE_FUZZ_SERIES").ok().and_then(|c| c.parse().ok()).unwrap_or(200_000);
    let rows: Vec<String> = (0..count)
        .map(|i| {
            format!("{{\"metric\":{{\"node\":\"n{i}\"}},\"value\":[1700000000,\"{}\"]}}", i % 100)
        })
        .collect();
    let body = format!(
        "{{\"status\":\"success\",\"data\":{{\"resultType\":\"vector\",\"result\":[{}]}}}}",
        rows.join(",")
    );
    let series = parse(200, "application/json", body.as_bytes()).unwrap();
    assert_eq!(series.len(), count);
}
