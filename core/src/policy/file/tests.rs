use super::*;

#[test]
fn empty_file_gives_the_documented_defaults() {
    let policy = parse_policy("").unwrap();
    assert_eq!(policy, Policy::default());
    assert_eq!(policy.metrics.len(), 6);
    let weights: Vec<f64> = policy.metrics.iter().map(|m| m.weight).collect();
    assert_eq!(weights, vec![0.2, 0.3, 0.5, 0.2, 0.3, 0.5]);
    let thresholds: Vec<Option<f64>> = policy.metrics.iter().map(|m| m.filter_above).collect();
    assert_eq!(thresholds, vec![Some(65.0), Some(75.0), None, Some(65.0), Some(75.0), None]);
    // auto max age: 3 × 30 s + 1 min
    assert_eq!(policy.metrics[0].max_age, Millis::from_secs(150));
}

#[test]
fn full_example_from_the_issue_parses() {
    let text = r#"
metrics:
  - name: cpu_usage_avg_5m
    resource: cpu
    query: 'waterline:node_cpu_usage:avg5m'
    period: 30s
    weight: 0.2
    filterAbove: 65
curve: {kind: waterLevel, target: 40}
estimator: {cpuFactor: 0.85, memoryFactor: 0.70, bestEffortCpu: 250m, bestEffortMemory: 200Mi}
stale: {maxAge: auto, filter: pass, score: 50}
"#;
    let policy = parse_policy(text).unwrap();
    assert_eq!(policy.metrics.len(), 1);
    assert_eq!(policy.metrics[0].filter_above, Some(65.0));
    assert_eq!(policy.metrics[0].period, Millis::from_secs(30));
    assert_eq!(policy.curve, Curve::WaterLevel { target: 40.0 });
    assert_eq!(policy.estimator.best_effort_memory_bytes, 200 * 1024 * 1024);
}

#[test]
fn bad_value_names_field_and_line() {
    let text =
        "metrics:\n  - name: a\n    resource: cpu\n    query: q\n    period: 30s\n    weight: -1\n";
    let err = parse_policy(text).unwrap_err().0;
    assert!(err.contains("metrics[0].weight"), "{err}");
    assert!(err.contains("line 6"), "{err}");
}

#[test]
fn unknown_field_is_rejected_with_its_line() {
    let err =
        parse_policy("curve: {kind: waterLevel, target: 40}\nstale:\n  scroe: 3\n").unwrap_err().0;
    assert!(err.contains("scroe"), "{err}");
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn bad_duration_and_quantity_are_reported() {
    let err = parse_policy("ledger: {absorbWindow: 7 minutes}").unwrap_err().0;
    assert!(err.contains("ledger.absorbWindow"), "{err}");
    let err = parse_policy("estimator:\n  bestEffortCpu: lots\n").unwrap_err().0;
    assert!(err.contains("estimator.bestEffortCpu") && err.contains("line 2"), "{err}");
}

#[test]
fn water_level_target_must_be_inside_0_100() {
    let err = parse_policy("curve:\n  kind: waterLevel\n  target: 100\n").unwrap_err().0;
    assert!(err.contains("curve.target") && err.contains("line 3"), "{err}");
    let err = parse_policy("curve: {kind: waterLevel, target: 140}").unwrap_err().0;
    assert!(err.contains("curve.target") && err.contains("percentage"), "{err}");
    let err = parse_policy("curve: {kind: leastUsed, target: 40}").unwrap_err().0;
    assert!(err.contains("only the waterLevel curve"), "{err}");
}

#[test]
fn duplicate_metric_names_point_at_the_second_one() {
    let text = "metrics:\n  - {name: a, resource: cpu, query: q, period: 30s, weight: 1}\n  - {name: a, resource: cpu, query: q, period: 30s, weight: 1}\n";
    let err = parse_policy(text).unwrap_err().0;
    assert!(err.contains("metrics[1].name") && err.contains("line 3"), "{err}");
}

#[test]
fn all_zero_weights_are_rejected() {
    let text = "metrics:\n  - {name: a, resource: cpu, query: q, period: 30s, weight: 0}\n";
    assert!(parse_policy(text).unwrap_err().0.contains("weight"));
}

#[test]
fn crane_curve_defaults_its_hot_windows() {
    let policy = parse_policy("curve: {kind: crane}").unwrap();
    assert_eq!(policy.curve, Curve::Crane { hot_windows: default_hot_windows() });
    // The default metrics' longest absorb window: the 1 d maximum, 5 m window + 30 m poll
    // period + 90 s lag = 36.5 m, longer than the hot value's 5 m.
    assert_eq!(policy.ledger_horizon(), Millis::from_secs(36 * 60 + 30));
    let one_metric = "metrics: [{name: c, resource: cpu, query: q, period: 30s, weight: 1}]\n";
    let policy = parse_policy(&format!(
        "{one_metric}curve: {{kind: crane, hotValue: [{{window: 10m, count: 5}}]}}"
    ))
    .unwrap();
    // 5 m + 30 s + 90 s = 7 m absorb, shorter than the 10 m hot window.
    assert_eq!(policy.ledger_horizon(), Millis::from_mins(10));
    let err =
        parse_policy("curve: {kind: crane, hotValue: [{window: 1m, count: 0}]}").unwrap_err().0;
    assert!(err.contains("count"), "{err}");
}

#[test]
fn unknown_curve_kind_is_rejected() {
    let err = parse_policy("curve: {kind: magic}").unwrap_err().0;
    assert!(err.contains("magic"), "{err}");
}

#[test]
fn fixed_max_age_applies_to_every_metric_unless_overridden() {
    let policy = parse_policy("stale: {maxAge: 2m}").unwrap();
    assert!(policy.metrics.iter().all(|m| m.max_age == Millis::from_mins(2)));
    let text = "stale: {maxAge: 2m}\nmetrics:\n  - {name: a, resource: cpu, query: q, period: 30s, weight: 1, maxAge: 10s}\n";
    assert_eq!(parse_policy(text).unwrap().metrics[0].max_age, Millis::from_secs(10));
}

#[test]
fn stale_reject_and_rescale_and_anti_colocation_parse() {
    let text = "stale: {filter: reject, score: 0}\nextender: {scoreMapping: rescale}\nantiColocation: [{labelKey: waterline.io/spread-group}]\nledger: {enabled: false}\n";
    let policy = parse_policy(text).unwrap();
    assert_eq!(policy.stale.filter, StaleFilter::Reject);
    assert_eq!(policy.stale.score, 0.0);
    assert_eq!(policy.extender_score_mapping, ScoreMapping::Rescale);
    assert_eq!(policy.anti_colocation[0].label_key, "waterline.io/spread-group");
    assert!(!policy.ledger.enabled);
}

#[test]
fn absorb_windows_follow_each_metric_unless_the_file_sets_them() {
    let policy = parse_policy("").unwrap();
    let windows: Vec<Millis> = policy.metrics.iter().map(|m| m.absorb_window).collect();
    // window 5 m + poll period + lag 90 s: 5m+30s+90s = 7 m, 5m+5m+90s = 11.5 m,
    // 5m+30m+90s = 36.5 m, for cpu and for memory.
    let (short, hour, day) =
        (Millis::from_mins(7), Millis::from_secs(690), Millis::from_secs(2190));
    assert_eq!(windows, vec![short, hour, day, short, hour, day]);

    let text = "\
metrics:
  - {name: a, resource: cpu, query: q, period: 1m, weight: 1, window: 10m}
  - {name: b, resource: cpu, query: q, period: 1m, weight: 1, absorbWindow: 3m}
ledger: {lag: 0s}
";
    let policy = parse_policy(text).unwrap();
    // a: 10 m + 1 m + 0 s; b: as written.
    assert_eq!(policy.metrics[0].absorb_window, Millis::from_mins(11));
    assert_eq!(policy.metrics[1].absorb_window, Millis::from_mins(3));

    // The old single window still applies to every metric that does not set its own.
    let policy = parse_policy("ledger: {absorbWindow: 9m}").unwrap();
    assert!(policy.metrics.iter().all(|m| m.absorb_window == Millis::from_mins(9)));

    let err = parse_policy(
        "metrics:\n  - {name: a, resource: cpu, query: q, period: 1m, weight: 1, window: 0s}\n",
    )
    .unwrap_err()
    .0;
    assert!(err.contains("metrics[0].window") && err.contains("line 2"), "{err}");
}

#[test]
fn combine_defaults_to_overshoot_dominates_and_names_a_bad_value() {
    assert_eq!(parse_policy("").unwrap().combine, Combine::OvershootDominates);
    assert_eq!(parse_policy("combine: weightedMean").unwrap().combine, Combine::WeightedMean);
    let err = parse_policy("curve: {kind: leastUsed}\ncombine: average\n").unwrap_err().0;
    assert!(err.contains("combine") && err.contains("average") && err.contains("line 2"), "{err}");
}

fn metric_error(line: &str) -> String {
    let text = format!(
        "curve: {{kind: waterLevel, target: 40}}\nmetrics:\n  - {{name: ok, resource: cpu, query: q, period: 30s, weight: 1}}\n{line}\n"
    );
    parse_policy(&text).unwrap_err().0
}

#[test]
fn per_metric_scoring_keys_parse_with_their_defaults() {
    let policy = parse_policy(
        "metrics:
  - {name: cpu, resource: cpu, query: q, period: 30s, weight: 1}
  - name: net
    resource: other
    query: q
    period: 30s
    weight: 1
    unit: bytesPerSecond
    normalize: maxOfCandidates
    curve: {kind: leastUsed}
  - {name: disk_free, resource: other, query: q, period: 1m, weight: 1, unit: ratio, direction: higherIsBetter}
  - {name: bw, resource: other, query: q, period: 30s, weight: 1, unit: bytesPerSecond, max: 1.25e9}
  - {name: io, resource: other, query: q, period: 30s, weight: 1, unit: raw, scale: 2, curve: {kind: waterLevel, target: 30}}
rounding: truncate
stale: {breakerShare: 0.4, breakerMinNodes: 5}
",
    )
    .unwrap();
    let m = &policy.metrics;
    assert_eq!(
        (m[0].unit, m[0].to_percent, m[0].normalize, m[0].direction, &m[0].curve),
        (Unit::Percent, 1.0, Normalize::Percent, Direction::LowerIsBetter, &None)
    );
    assert_eq!((m[1].unit, m[1].normalize), (Unit::Raw, Normalize::MaxOfCandidates));
    assert_eq!(m[1].curve, Some(Curve::LeastUsed));
    assert_eq!(
        (m[2].unit, m[2].to_percent, m[2].direction),
        (Unit::Ratio, 100.0, Direction::HigherIsBetter)
    );
    assert_eq!(m[3].to_percent, 100.0 / 1.25e9);
    assert_eq!((m[4].to_percent, &m[4].curve), (2.0, &Some(Curve::WaterLevel { target: 30.0 })));
    assert_eq!(policy.curve_of(&m[4]), &Curve::WaterLevel { target: 30.0 });
    assert_eq!(policy.curve_of(&m[0]), &Curve::WaterLevel { target: 40.0 });
    assert_eq!(policy.rounding, Rounding::Truncate);
    assert_eq!((policy.stale.breaker_share, policy.stale.breaker_min_nodes), (0.4, 5));
    let defaults = Policy::default();
    assert_eq!((defaults.stale.breaker_share, defaults.stale.breaker_min_nodes), (0.5, 3));
    assert_eq!(defaults.rounding, Rounding::Nearest);
}

#[test]
fn per_metric_scoring_errors_name_the_field_and_line() {
    let cases = [
        (
            "  - {name: net, resource: other, query: q, period: 30s, weight: 1, unit: bytesPerSecond}",
            "metrics[1].unit: a bytesPerSecond value needs max",
        ),
        (
            "  - {name: r, resource: other, query: q, period: 30s, weight: 1, unit: ratio, max: 1}",
            "metrics[1].max: a ratio value has a fixed scale",
        ),
        (
            "  - {name: b, resource: other, query: q, period: 30s, weight: 1, unit: raw, max: 1, scale: 2}",
            "metrics[1].scale: give max or scale, not both",
        ),
        (
            "  - {name: n, resource: cpu, query: q, period: 30s, weight: 1, normalize: maxOfCandidates}",
            "metrics[1].resource: a maxOfCandidates value is relative",
        ),
        (
            "  - {name: n, resource: other, query: q, period: 30s, weight: 1, normalize: maxOfCandidates, filterAbove: 50}",
            "metrics[1].filterAbove: filterAbove on a maxOfCandidates metric",
        ),
        (
            "  - {name: n, resource: other, query: q, period: 30s, weight: 1, unit: raw, normalize: maxOfCandidates, max: 5}",
            "metrics[1].max: maxOfCandidates divides",
        ),
        (
            "  - {name: c, resource: other, query: q, period: 30s, weight: 1, curve: {kind: crane}}",
            "metrics[1].curve.kind: crane is a whole-node mode",
        ),
        (
            "  - {name: c, resource: other, query: q, period: 30s, weight: 1, curve: {kind: leastUsed, target: 20}}",
            "metrics[1].curve.target: only the waterLevel curve has a target",
        ),
        (
            "  - {name: c, resource: other, query: q, period: 30s, weight: 1, curve: {kind: waterLevel, target: 100}}",
            "metrics[1].curve.target: 100 must be strictly between 0 and 100",
        ),
    ];
    for (line, want) in cases {
        let err = metric_error(line);
        assert!(err.contains(want) && err.ends_with("(line 4)"), "{line}\n→ {err}");
    }
    // Block style: the line of the key, not of the metric's name.
    let err = parse_policy(
        "metrics:\n  - name: net\n    resource: other\n    query: q\n    period: 30s\n    weight: 1\n    unit: bytes\n",
    )
    .unwrap_err()
    .0;
    assert!(err.starts_with("metrics[0].unit:") && err.ends_with("(line 7)"), "{err}");
    // Values checked while deserializing carry serde's path and line.
    let err = metric_error(
        "  - {name: n, resource: other, query: q, period: 30s, weight: 1, normalize: relative}",
    );
    assert!(err.contains("metrics[1].normalize") && err.contains("line 4"), "{err}");
    let err = metric_error(
        "  - {name: n, resource: other, query: q, period: 30s, weight: 1, unit: raw, max: -3}",
    );
    assert!(err.contains("metrics[1].max") && err.contains("> 0"), "{err}");
    let err = parse_policy("curve: {kind: crane}\nmetrics:\n  - {name: c, resource: other, query: q, period: 30s, weight: 1, curve: {kind: leastUsed}}\n").unwrap_err().0;
    assert!(
        err.starts_with("metrics[0].curve: the policy's crane curve") && err.ends_with("(line 3)"),
        "{err}"
    );
    let err = parse_policy("stale:\n  breakerShare: 1.5\n").unwrap_err().0;
    assert!(err.contains("stale.breakerShare") && err.contains("line 2"), "{err}");
    let err = parse_policy("stale:\n  breakerMinNodes: 0\n").unwrap_err().0;
    assert!(err.contains("stale.breakerMinNodes") && err.contains("line 2"), "{err}");
    let err = parse_policy("rounding: down\n").unwrap_err().0;
    assert!(err.contains("rounding") && err.contains("line 1"), "{err}");
}

#[test]
fn the_documented_default_policy_is_the_default() {
    let doc = include_str!("../../../../docs/policy.md");
    let section = doc.split("## The default").nth(1).expect("docs/policy.md has the default");
    let yaml = section.split("```yaml\n").nth(1).and_then(|b| b.split("```").next()).unwrap();
    assert_eq!(parse_policy(yaml).unwrap(), Policy::default());
}

#[test]
fn a_huge_period_saturates_what_derives_from_it_instead_of_overflowing() {
    // 10^17 days is more milliseconds than an i64 holds: the period saturates, and so must
    // three of them plus a minute (the max age) and window + period + lag (the absorb
    // window); the fuzz test found the overflow.
    let text = "metrics:\n  - {name: m, resource: cpu, query: q, weight: 1, period: 100000000000000000d}\n";
    let policy = parse_policy(text).unwrap();
    assert_eq!(policy.metrics[0].period, Millis(i64::MAX));
    assert_eq!(policy.metrics[0].max_age, Millis(i64::MAX));
    assert_eq!(policy.metrics[0].absorb_window, Millis(i64::MAX));
    // An ordinary period: 3 × 30 s + 60 s, and 5 m + 30 s + 90 s.
    let policy =
        parse_policy("metrics:\n  - {name: m, resource: cpu, query: q, weight: 1, period: 30s}\n")
            .unwrap();
    assert_eq!(policy.metrics[0].max_age, Millis(150_000));
    assert_eq!(policy.metrics[0].absorb_window, Millis::from_mins(7));
}

#[test]
fn priority_tiers_replace_the_thresholds_they_name() {
    // Koordinator's split: prod pods (priority 9000 and up) held to lower thresholds than
    // batch pods, which may fill nodes further (docs/policy.md#thresholds-per-priority).
    let text = "\
priorities:
  - minPriority: 0
    filterAbove:
      cpu_usage_avg_5m: 85
  - minPriority: 9000
    filterAbove:
      cpu_usage_avg_5m: 60
      mem_usage_max_avg_1d: 80
";
    let policy = parse_policy(text).unwrap();
    let tiers: Vec<i32> = policy.priorities.iter().map(|t| t.min_priority).collect();
    assert_eq!(tiers, [9000, 0], "highest first");
    let cpu = 0; // cpu_usage_avg_5m, 65 by default
    let mem_day = 5; // mem_usage_max_avg_1d, no threshold by default
    let mem_hour = 4; // mem_usage_max_avg_1h, 75, named by no tier
    assert_eq!(policy.filter_above(cpu, 9500), Some(60.0));
    assert_eq!(policy.filter_above(cpu, 9000), Some(60.0));
    assert_eq!(policy.filter_above(cpu, 8999), Some(85.0));
    assert_eq!(policy.filter_above(cpu, 0), Some(85.0));
    // Below every tier: the metric's own.
    assert_eq!(policy.filter_above(cpu, -1), Some(65.0));
    assert_eq!(policy.filter_above(mem_day, 9000), Some(80.0));
    assert_eq!(policy.filter_above(mem_day, 100), None);
    assert_eq!(policy.filter_above(mem_hour, 9000), Some(75.0));
    // No tiers: every priority gets the metrics' own.
    assert_eq!(Policy::default().filter_above(cpu, 10_000), Some(65.0));
}

#[test]
fn priority_tier_errors_name_the_field_and_line() {
    let unknown =
        "priorities:\n  - minPriority: 9000\n    filterAbove:\n      cpu_usage_avg_1m: 60\n";
    let err = parse_policy(unknown).unwrap_err().0;
    assert!(err.starts_with("priorities[0].filterAbove.cpu_usage_avg_1m: not a metric"), "{err}");
    assert!(err.contains("cpu_usage_avg_5m") && err.ends_with("(line 4)"), "{err}");

    let twice = "priorities:\n  - {minPriority: 1, filterAbove: {cpu_usage_avg_5m: 60}}\n  - minPriority: 1\n    filterAbove: {cpu_usage_avg_5m: 70}\n";
    let err = parse_policy(twice).unwrap_err().0;
    assert_eq!(err, "priorities[1].minPriority: 1 is already priorities[0]'s (line 3)");

    let empty = "priorities:\n  - minPriority: 1\n    filterAbove: {}\n";
    let err = parse_policy(empty).unwrap_err().0;
    assert!(
        err.starts_with("priorities[0].filterAbove: name at least one")
            && err.ends_with("(line 3)"),
        "{err}"
    );

    // Values are checked while they are read: path and line from serde.
    let over = "priorities:\n  - minPriority: 1\n    filterAbove:\n      cpu_usage_avg_5m: 120\n";
    let err = parse_policy(over).unwrap_err().0;
    assert!(
        err.contains("priorities[0].filterAbove.cpu_usage_avg_5m") && err.contains("line 4"),
        "{err}"
    );

    let relative = "metrics:\n  - {name: net, resource: other, query: q, period: 30s, weight: 1, unit: raw, normalize: maxOfCandidates}\npriorities:\n  - minPriority: 1\n    filterAbove:\n      net: 50\n";
    let err = parse_policy(relative).unwrap_err().0;
    assert!(
        err.starts_with("priorities[0].filterAbove.net: a maxOfCandidates metric")
            && err.ends_with("(line 6)"),
        "{err}"
    );
}

/// docs/policy.md#departures: `departures: credit | hold`, `hold` when left out; a bad value,
/// a credit on a maximum over time and a credit on a metric with no ledger name the field and
/// line.
#[test]
fn departures_are_credited_or_held_per_metric() {
    use crate::ledger::DepartureCredit::{Credit, Hold};
    let policy = parse_policy(
        "metrics:\n\
         - {name: cpu_usage_avg_5m, resource: cpu, query: q, period: 30s, weight: 1}\n\
         - {name: cpu_peak, resource: cpu, query: 'max_over_time(x[1h])', period: 5m, weight: 1}\n\
         - {name: cpu_avg_credited, resource: cpu, query: q, period: 30s, weight: 1, departures: credit}\n\
         - {name: mem_avg_held, resource: memory, query: q, period: 30s, weight: 1, departures: hold}\n",
    )
    .unwrap();
    let marks: Vec<_> = policy.metrics.iter().map(|m| m.departures).collect();
    assert_eq!(marks, [Hold, Hold, Credit, Hold]);

    let text = "metrics:\n  - name: cpu_peak\n    resource: cpu\n    query: 'max_over_time(x[1h])'\n    period: 5m\n    weight: 1\n    departures: credit\n";
    let err = parse_policy(text).unwrap_err().0;
    assert!(err.contains("metrics[0].departures") && err.contains("line 7"), "{err}");
    assert!(err.contains("maximum over time"), "{err}");

    let text = "metrics:\n  - name: cpu\n    resource: cpu\n    query: q\n    period: 30s\n    weight: 1\n    departures: forget\n";
    let err = parse_policy(text).unwrap_err().0;
    assert!(err.contains("metrics[0].departures") && err.contains("line 7"), "{err}");
    assert!(err.contains("credit") && err.contains("hold"), "{err}");

    let text = "metrics:\n  - name: net\n    resource: other\n    query: q\n    period: 30s\n    weight: 1\n    departures: credit\n";
    let err = parse_policy(text).unwrap_err().0;
    assert!(err.contains("metrics[0].departures") && err.contains("line 7"), "{err}");
    assert!(err.contains("no ledger"), "{err}");
}

#[test]
fn learning_is_on_by_default_and_its_queries_follow_window_and_quantile() {
    let learn = parse_policy("").unwrap().estimator.learn;
    assert!(learn.enabled);
    assert_eq!(learn.queries.cpu, "quantile_over_time(0.9, waterline:pod_cpu_usage:rate5m[24h])");
    let text = "estimator:\n  learn:\n    window: 6h\n    quantile: 0.95\n    minPods: 1\n";
    let learn = parse_policy(text).unwrap().estimator.learn;
    assert_eq!((learn.window, learn.min_pods), (Millis::from_secs(6 * 3600), 1));
    assert_eq!(
        learn.queries.memory_samples,
        "count_over_time(waterline:pod_memory_working_set:bytes[6h])"
    );
    // A query the file spells is kept as spelled; `enabled: false` turns learning off.
    let text = "estimator:\n  learn:\n    enabled: false\n    queries:\n      cpu: my_p90_cpu\n";
    let learn = parse_policy(text).unwrap().estimator.learn;
    assert_eq!((learn.enabled, learn.queries.cpu.as_str()), (false, "my_p90_cpu"));
    assert_eq!(learn.queries.memory, Learn::default().queries.memory);
}

#[test]
fn learning_errors_name_the_field_and_line() {
    let err = |text: &str| parse_policy(text).unwrap_err().to_string();
    let text = "estimator:\n  learn:\n    minRatio: 3\n    maxRatio: 2\n";
    assert_eq!(
        err(text),
        "invalid policy: estimator.learn.minRatio: 3 is above maxRatio 2 (line 3)"
    );
    let text = "estimator:\n  learn:\n    minPods: 0\n";
    assert_eq!(err(text), "invalid policy: estimator.learn.minPods: must be at least 1 (line 3)");
    let text = "estimator:\n  learn:\n    queries:\n      cpu: ' '\n";
    assert_eq!(
        err(text),
        "invalid policy: estimator.learn.queries.cpu: must not be empty (line 4)"
    );
    assert!(err("estimator:\n  learn:\n    quantile: 1.5\n").contains("line 3"));
    assert!(err("estimator:\n  learn:\n    sometimes: yes\n").contains("unknown field"));
}
