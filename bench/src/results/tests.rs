use super::*;

fn result(order: u32, target: &str, figure: f64, unit: &str, rule: Rule) -> BenchResult {
    BenchResult {
        order,
        target: target.into(),
        figure,
        unit: unit.into(),
        rule,
        measured: "median of 3 runs".into(),
        command: "waterline-bench score --spawn".into(),
        machine: "2 vCPU Test CPU".into(),
        commit: "abc1234".into(),
        date: "2026-12-01".into(),
        why: None,
        from: None,
    }
}

#[test]
fn the_verdict_follows_the_rule_and_says_by_how_much() {
    // At most 150 µs: 617 µs is 617 / 150 = 4.11 times the limit.
    assert_eq!(Rule::AtMost(150.0).verdict(100.0), Verdict::Met);
    assert_eq!(Rule::AtMost(150.0).verdict(150.0), Verdict::Met, "the limit itself meets it");
    let Verdict::Missed(f) = Rule::AtMost(150.0).verdict(617.0) else { panic!("617 > 150") };
    assert!((f - 4.1133).abs() < 1e-3, "{f}");
    // At least 20,000 req/s: 10,433 is 20,000 / 10,433 = 1.917 times short.
    assert_eq!(Rule::AtLeast(20_000.0).verdict(20_000.0), Verdict::Met);
    let Verdict::Missed(f) = Rule::AtLeast(20_000.0).verdict(10_433.0) else { panic!("short") };
    assert!((f - 1.917).abs() < 1e-3, "{f}");
    assert_eq!(Rule::AtLeast(95.0).verdict(96.0), Verdict::Met);
}

#[test]
fn a_table_is_rendered_from_results_in_order() {
    let mut rss = result(2, "Collector ≤ 64 MiB", 60.9, "MiB", Rule::AtMost(64.0));
    rss.machine = "2 vCPU | odd".into();
    let mut rate = result(1, "≥ 20,000 Score RPCs/s", 10_433.0, "req/s", Rule::AtLeast(20_000.0));
    rate.why = Some("#why-rpcs".into());
    let mut share = result(3, "p99 ≤ 1 ms", 91.5, "%", Rule::AtLeast(95.0));
    share.measured = "median of 3".into();
    // `load` sorts by order; render keeps the order it is given.
    let mut rows =
        vec![("rss".to_string(), rss), ("rate".to_string(), rate), ("share".to_string(), share)];
    rows.sort_by(|(a, x), (b, y)| (x.order, a).cmp(&(y.order, b)));
    let expected = format!(
        "{BEGIN}\n\n\
         | target | current figure | verdict | machine | commit, date | command |\n\
         |---|---|---|---|---|---|\n\
         | ≥ 20,000 Score RPCs/s | **10,433 req/s** — median of 3 runs | **[missed ×1.9](#why-rpcs)** | 2 vCPU Test CPU | `abc1234`, 2026-12-01 | `waterline-bench score --spawn` |\n\
         | Collector ≤ 64 MiB | **60.9 MiB** — median of 3 runs | **met** | 2 vCPU \\| odd | `abc1234`, 2026-12-01 | `waterline-bench score --spawn` |\n\
         | p99 ≤ 1 ms | **91.5 %** — median of 3 | **missed ×1.04** | 2 vCPU Test CPU | `abc1234`, 2026-12-01 | `waterline-bench score --spawn` |\n\
         \n{END}"
    );
    assert_eq!(render(&rows), expected);
}

#[test]
fn splicing_replaces_only_the_block_and_twice_changes_nothing() {
    let doc = format!("# Benchmarks\n\nbefore\n\n{BEGIN}\nold table\n{END}\n\nafter\n");
    let block = format!("{BEGIN}\n\nnew table\n\n{END}");
    let once = splice(&doc, &block).unwrap();
    assert_eq!(once, format!("# Benchmarks\n\nbefore\n\n{block}\n\nafter\n"));
    assert_eq!(splice(&once, &block).unwrap(), once);
    assert!(splice("# no markers\n", &block).is_err());
    assert!(splice(&format!("{END}\n{BEGIN}\n"), &block).is_err());
}

#[test]
fn thousands_are_grouped_and_fractions_kept() {
    assert_eq!(group_thousands(10_433.0), "10,433");
    assert_eq!(group_thousands(1_234_567.5), "1,234,567.5");
    assert_eq!(group_thousands(0.467), "0.467");
    assert_eq!(group_thousands(617.0), "617");
    assert_eq!(group_thousands(-1500.0), "-1,500");
}

#[test]
fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
    assert_eq!(median(&mut []), None);
    assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
}

#[test]
fn a_run_updates_the_results_that_name_its_series_and_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let (run, results) = (dir.path().join("run"), dir.path().join("results"));
    std::fs::create_dir_all(&run).unwrap();
    std::fs::create_dir_all(&results).unwrap();
    std::fs::write(
        run.join("machine.txt"),
        "date: 2026-12-02T10:00:00Z\ncommit: def5678\nnproc: 2\ncpu: Test CPU\n\
         uptime at start:  10:00:00 up 1 day,  load average: 0.50, 0.40, 0.30\n",
    )
    .unwrap();
    // Three runs of the selected label (median 6,000) and one of another label.
    let rows = [
        ("score-100-c64", 5_000.4),
        ("score-100-c64", 7_000.0),
        ("score-100-c1", 1.0),
        ("score-100-c64", 6_000.2),
    ];
    let lines: Vec<String> = rows
        .iter()
        .map(|(label, rps)| {
            format!(r#"{{"label":"{label}","throughput_per_s":{rps},"latency_ms":{{"p50":1.0}}}}"#)
        })
        .collect();
    std::fs::write(run.join("rpc.jsonl"), lines.join("\n") + "\n").unwrap();

    let mut measured = result(1, "rate", 10_433.0, "req/s", Rule::AtLeast(20_000.0));
    measured.from = Some(Source {
        file: "rpc.jsonl".into(),
        select: [("label".to_string(), "score-100-c64".to_string())].into(),
        value: "/throughput_per_s".into(),
        scale: 1.0,
    });
    let untouched = result(2, "by hand", 60.9, "MiB", Rule::AtMost(64.0));
    let mut absent = result(3, "not in this run", 1.0, "ms", Rule::AtMost(0.3));
    absent.from = Some(Source {
        file: "extender.jsonl".into(),
        select: BTreeMap::new(),
        value: "/overhead_p50_ms".into(),
        scale: 1.0,
    });
    for (name, r) in [("measured", &measured), ("untouched", &untouched), ("absent", &absent)] {
        std::fs::write(results.join(format!("{name}.json")), to_text(r).unwrap()).unwrap();
    }

    assert_eq!(record(&run, &results).unwrap(), vec!["measured".to_string()]);
    let after: BTreeMap<String, BenchResult> = load(&results).unwrap().into_iter().collect();
    let got = &after["measured"];
    // median(5,000.4, 6,000.2, 7,000) = 6,000.2, whole numbers above 100.
    assert_eq!(got.figure, 6_000.0);
    assert_eq!((got.commit.as_str(), got.date.as_str()), ("def5678", "2026-12-02"));
    assert_eq!(got.machine, "2 vCPU Test CPU");
    assert_eq!(
        got.measured,
        "median of 3 runs (scripts/bench.sh; load average at start 0.50, 0.40, 0.30)"
    );
    assert_eq!(after["untouched"], untouched);
    assert_eq!(after["absent"], absent);
    // The same run again changes nothing.
    assert!(record(&run, &results).unwrap().is_empty());
}

/// The committed files: each parses and is kept exactly as `record` would write it, and
/// BENCHMARKS.md's block is what `table` renders from them.
#[test]
fn the_committed_results_are_canonical_and_the_table_is_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("bench/results");
    let results = load(&dir).unwrap();
    assert!(!results.is_empty());
    for (name, r) in &results {
        let on_disk = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
        assert_eq!(on_disk, to_text(r).unwrap(), "bench/results/{name}.json is not canonical");
    }
    let doc = std::fs::read_to_string(root.join("BENCHMARKS.md")).unwrap();
    assert_eq!(
        splice(&doc, &render(&results)).unwrap(),
        doc,
        "BENCHMARKS.md's table is stale: run scripts/bench.sh --table"
    );
}

#[test]
fn a_source_selects_on_numbers_and_scales_the_value() {
    let dir = tempfile::tempdir().unwrap();
    // criterion.jsonl rows: two runs of one bench, in nanoseconds.
    std::fs::write(
        dir.path().join("criterion.jsonl"),
        "{\"run\":1,\"bench\":\"evaluate/prepared/5000\",\"median_ns\":617000.0}\n\
         {\"run\":2,\"bench\":\"evaluate/prepared/5000\",\"median_ns\":589000.0}\n\
         {\"run\":2,\"bench\":\"score/5000\",\"median_ns\":1.0}\n",
    )
    .unwrap();
    let source = |select: &[(&str, &str)]| Source {
        file: "criterion.jsonl".into(),
        select: select.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        value: "/median_ns".into(),
        scale: 0.001,
    };
    // Run 2 only: 589,000 ns × 0.001 = 589 µs, from one row.
    let run2 = source(&[("run", "2"), ("bench", "evaluate/prepared/5000")]);
    assert_eq!(figure_from(dir.path(), &run2).unwrap(), Some((589.0, 1)));
    // Both runs: the median of 617 and 589 is 603.
    let both = source(&[("bench", "evaluate/prepared/5000")]);
    assert_eq!(figure_from(dir.path(), &both).unwrap(), Some((603.0, 2)));
    assert_eq!(figure_from(dir.path(), &source(&[("run", "3")])).unwrap(), None);
}
