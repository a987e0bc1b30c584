//! The policy file, fuzzed (RELIABILITY.md): mutated valid policies either load or fail with
//! an error that names the line, and never panic. Cases: `WATERLINE_FUZZ_CASES` (default
//! 512 in `make test`); a failure prints its seed and is kept in `proptest-regressions/`.

use proptest::prelude::*;
use waterline_core::policy::parse_policy;

/// Valid policies to mutate: the shipped one, the README's full example, and the smallest.
const SEEDS: &[&str] = &[
    include_str!("../../deploy/policy/policy.yaml"),
    "\
metrics:
  - {name: cpu_usage_avg_5m, resource: cpu, query: 'waterline:node_cpu_usage:avg5m', period: 30s, weight: 0.2, filterAbove: 65}
  - {name: mem_usage_avg_5m, resource: memory, query: q, period: 30s, weight: 0.2, filterAbove: 65, window: 5m}
curve: {kind: crane, hotValue: [{window: 5m, count: 5}, {window: 1m, count: 2}]}
combine: weightedMean
estimator: {cpuFactor: 0.85, memoryFactor: 0.70, bestEffortCpu: 250m, bestEffortMemory: 200Mi}
stale: {maxAge: auto, filter: reject, score: 50}
ledger: {enabled: true, lag: 90s, reserveTtl: 15m}
antiColocation: [{labelKey: waterline.io/spread-group}]
nodeMapping: {labels: [node, nodename, instance]}
extender: {scoreMapping: rescale}
",
    "curve: {kind: waterLevel, target: 40}\n",
];

/// Fragments YAML and the policy's values are made of, and some that break them.
const TOKENS: &[&str] = &[
    ":",
    "-",
    "{",
    "}",
    "[",
    "]",
    ",",
    "\n",
    "  ",
    "\t",
    "'",
    "\"",
    "#",
    "&a",
    "*a",
    "!!str",
    "-1",
    "0",
    "1e308",
    "-1e308",
    ".nan",
    ".inf",
    "NaN",
    "65",
    "101",
    "0s",
    "-5m",
    "1h30m",
    "7 minutes",
    "250m",
    "1e3",
    "100Ki",
    "lots",
    "null",
    "~",
    "true",
    "yes",
    "waterLevel",
    "crane",
    "leastUsed",
    "magic",
    "weightedMean",
    "overshootDominates",
    "cpu",
    "memory",
    "other",
    "metrics:",
    "curve:",
    "ledger:",
    "weight:",
    "period:",
    "target:",
    "\u{0}",
    "\u{feff}",
    "é",
    "\u{1F600}",
    "999999999999999999999999",
];

#[derive(Clone, Debug)]
enum Edit {
    Delete { at: usize, len: usize },
    Insert { at: usize, token: usize },
    DuplicateLine { line: usize },
    ReplaceValue { nth_colon: usize, token: usize },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Edit::Delete { at, len }),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, token)| Edit::Insert { at, token }),
        any::<usize>().prop_map(|line| Edit::DuplicateLine { line }),
        (any::<usize>(), 0..TOKENS.len())
            .prop_map(|(nth_colon, token)| Edit::ReplaceValue { nth_colon, token }),
    ]
}

/// The nearest char boundary at or below `at` (mutations work on text, not bytes).
fn boundary(text: &str, at: usize) -> usize {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(text: &mut String, edit: &Edit) {
    match *edit {
        Edit::Delete { at, len } => {
            let start = boundary(text, at);
            let end = boundary(text, start.saturating_add(len).min(text.len()));
            text.replace_range(start..end.max(start), "");
        }
        Edit::Insert { at, token } => {
            let at = boundary(text, at);
            text.insert_str(at, TOKENS[token]);
        }
        Edit::DuplicateLine { line } => {
            let lines: Vec<&str> = text.lines().collect();
            if !lines.is_empty() {
                let i = line % lines.len();
                let mut out: Vec<&str> = lines[..=i].to_vec();
                out.extend_from_slice(&lines[i..]);
                *text = out.join("\n");
            }
        }
        Edit::ReplaceValue { nth_colon, token } => {
            let colons: Vec<usize> = text.match_indices(": ").map(|(i, _)| i + 2).collect();
            if !colons.is_empty() {
                let start = colons[nth_colon % colons.len()];
                let end = text[start..].find([',', '}', '\n']).map_or(text.len(), |e| start + e);
                text.replace_range(start..end, TOKENS[token]);
            }
        }
    }
}

proptest! {
    #![proptest_config(waterline_testkit::proptest_config(512))]

    #[test]
    fn mutated_policies_load_or_name_the_line(
        seed in 0..SEEDS.len(),
        edits in proptest::collection::vec(edit(), 1..6),
    ) {
        let mut text = SEEDS[seed].to_owned();
        for e in &edits {
            apply(&mut text, e);
        }
        match parse_policy(&text) {
            Ok(policy) => {
                // What loads is usable: the engine divides by the total weight.
                prop_assert!(!policy.metrics.is_empty());
                prop_assert!(policy.metrics.iter().map(|m| m.weight).sum::<f64>() > 0.0);
            }
            Err(error) => {
                let message = error.to_string();
                prop_assert!(message.starts_with("invalid policy: "), "{message}");
                prop_assert!(message.contains("line "), "no line named: {message}\n--- text ---\n{text}");
            }
        }
    }
}
