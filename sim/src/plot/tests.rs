use std::path::Path;

use super::*;

const CSV: &str = "time_s,node,cpu_pct,mem_pct\n\
    0,a,10.000,20.000\n0,b,70.000,30.000\n\
    30,a,50.000,20.000\n30,b,40.000,90.000\n";

#[test]
fn a_trace_keeps_node_order_and_the_larger_dimension() {
    let t = Trace::parse("w", CSV, Path::new("w.csv")).unwrap();
    assert_eq!(t.nodes, ["a", "b"]);
    assert_eq!(t.times_s, [0.0, 30.0]);
    assert_eq!(t.util, [vec![20.0, 70.0], vec![50.0, 90.0]]);
    assert_eq!(t.hottest(), [70.0, 90.0]);
    assert_eq!(t.sorted_samples(), [20.0, 50.0, 70.0, 90.0]);
}

#[test]
fn a_bad_csv_names_the_line() {
    let e = Trace::parse("w", "time_s,node,cpu_pct,mem_pct\n0,a,x,1\n", Path::new("w.csv"));
    assert!(e.unwrap_err().to_string().starts_with("w.csv: line 2: \"x\""));
    let e = Trace::parse("w", "time,node\n", Path::new("w.csv")).unwrap_err();
    assert!(e.to_string().contains("line 1: expected the header"), "{e}");
    let e =
        Trace::parse("w", "time_s,node,cpu_pct,mem_pct\n30,a,1,1\n0,a,1,1\n", Path::new("w.csv"));
    assert!(e.unwrap_err().to_string().contains("line 3: time 0 goes backwards"));
}

#[test]
fn buckets_cover_every_sample_in_at_most_max_groups() {
    assert_eq!(buckets(120, 60), (0..60).map(|k| 2 * k..2 * k + 2).collect::<Vec<_>>());
    assert_eq!(buckets(5, 2), [0..3, 3..5]);
    assert_eq!(buckets(3, 60), [0..1, 1..2, 2..3]);
    assert!(buckets(0, 60).is_empty());
    // 24 h at 60 s: 1440 samples, 40 columns of 36 min.
    assert_eq!(
        buckets(1440, HEATMAP_COLUMNS),
        (0..40).map(|k| 36 * k..36 * k + 36).collect::<Vec<_>>()
    );
}

#[test]
fn flat_runs_keep_their_ends() {
    let line = vec![(0.0, 1.0), (1.0, 1.0), (2.0, 1.0), (3.0, 2.0), (4.0, 2.0), (5.0, 3.0)];
    assert_eq!(drop_flat(line), [(0.0, 1.0), (2.0, 1.0), (3.0, 2.0), (4.0, 2.0), (5.0, 3.0)]);
    assert_eq!(drop_flat(vec![(0.0, 1.0), (1.0, 1.0)]), [(0.0, 1.0), (1.0, 1.0)]);
}

#[test]
fn bins_and_colours() {
    assert_eq!((bin(0.0), bin(4.99), bin(5.0), bin(64.9), bin(65.0)), (0, 0, 1, 12, 13));
    assert_eq!((bin(100.0), bin(170.0), bin(f64::NAN), bin(-3.0)), (20, 20, 0, 0));
    assert_eq!(colour(0.0, 40.0, 65.0), (0xf7, 0xfc, 0xf5));
    assert_eq!(colour(40.0, 40.0, 65.0), (0x41, 0xab, 0x5d));
    assert_eq!(colour(65.0, 40.0, 65.0), (0xf4, 0x6d, 0x43));
    assert_eq!(colour(100.0, 40.0, 65.0), colour(150.0, 40.0, 65.0));
    // Half-way between 0 and the target: the mean of the two stops, rounded.
    assert_eq!(colour(20.0, 40.0, 65.0), (0x9c, 0xd4, 0xa9));
}

#[test]
fn a_run_draws_every_picture() {
    let dir = std::env::temp_dir().join(format!("waterline-sim-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut scenario =
        crate::scenario::parse_scenario(crate::scenario::shipped("calm-burst").unwrap(), None)
            .unwrap();
    scenario.scale_down(4, waterline_core::Millis::from_mins(10));
    let mut list: Vec<Box<dyn crate::strategy::Strategy>> = vec![
        crate::strategy::by_name("waterline").unwrap(),
        crate::strategy::by_name("kube-default").unwrap(),
    ];
    let summary = crate::report::run_all(&scenario, &mut list, Some(&dir), &mut |_, _| {}).unwrap();
    let written = write_plots(&dir, &summary).unwrap();
    let names: Vec<String> =
        written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(
        names,
        ["heatmap-waterline.svg", "heatmap-kube-default.svg", "hottest.svg", "cdf.svg"]
    );
    for path in &written {
        let svg = std::fs::read_to_string(path).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{}",
            path.display()
        );
    }
    let heat = std::fs::read_to_string(dir.join("heatmap-waterline.svg")).unwrap();
    assert!(
        heat.contains("node-1")
            && heat.contains("threshold")
            && heat.contains("time since start (min)")
    );
    let cdf = std::fs::read_to_string(dir.join("cdf.svg")).unwrap();
    assert!(cdf.contains("kube-default: ") && cdf.contains("% &gt; 65 %"), "{cdf}");
    std::fs::remove_dir_all(&dir).unwrap();
}
