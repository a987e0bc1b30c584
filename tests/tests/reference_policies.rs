//! Every example policy of `deploy/examples/policies/` reproduces its reference scheduler:
//! a worked example per policy (nodes → scores and filter verdicts) with numbers taken from
//! the reference itself, the arithmetic written beside them, checked through the real
//! scorer over gRPC (a collector with `--static nodes.yaml`, a scorer with `--policy` the
//! shipped file, unchanged).

use anyhow::Result;
use waterline_api::v1 as pb;
use waterline_tests::procs::{Service, write_file};
use waterline_tests::prometheus::repo_path;

struct Pair {
    _dir: tempfile::TempDir,
    _collector: Service,
    scorer: Service,
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A collector serving `nodes` and a scorer, both with the shipped example `policy`.
async fn start(policy: &str, nodes: &str) -> Result<Pair> {
    let dir = tempfile::tempdir()?;
    let policy = repo_path(&format!("deploy/examples/policies/{policy}"));
    let policy = policy.to_str().expect("utf-8 path").to_string();
    let nodes = write_file(dir.path(), "nodes.yaml", nodes);
    let collector =
        Service::collector(&strings(&["--static", &nodes, "--policy", &policy])).await?;
    let scorer = Service::scorer(collector.grpc, &strings(&["--policy", &policy])).await?;
    Ok(Pair { _dir: dir, _collector: collector, scorer })
}

fn pod(uid: &str) -> pb::PodInfo {
    pb::PodInfo {
        namespace: "default".into(),
        name: format!("pod-{uid}"),
        uid: uid.into(),
        ..Default::default()
    }
}

impl Pair {
    async fn scores(&self, pod: pb::PodInfo, nodes: &[&str]) -> Result<Vec<i64>> {
        let mut client = self.scorer.scorer_client().await?;
        let response = client
            .score(pb::ScoreRequest {
                pod: Some(pod),
                node_names: strings(nodes),
                ..Default::default()
            })
            .await?
            .into_inner();
        Ok(response.scores.iter().map(|s| i64::from(s.score)).collect())
    }

    /// Rejected nodes and their reasons, in request order.
    async fn rejected(&self, pod: pb::PodInfo, nodes: &[&str]) -> Result<Vec<(String, String)>> {
        let mut client = self.scorer.scorer_client().await?;
        let response = client
            .filter(pb::FilterRequest {
                policy: String::new(),
                pod: Some(pod),
                node_names: strings(nodes),
                all_nodes: false,
            })
            .await?
            .into_inner();
        Ok(nodes
            .iter()
            .filter_map(|n| response.rejected.get(*n).map(|r| (n.to_string(), r.clone())))
            .collect())
    }

    async fn reserve(&self, pod: pb::PodInfo, node: &str) -> Result<()> {
        let mut client = self.scorer.scorer_client().await?;
        client
            .reserve(pb::ReserveRequest {
                pod: Some(pod),
                node_name: node.into(),
                ..Default::default()
            })
            .await?;
        Ok(())
    }
}

/// The six default metric names, for nodes that carry every one.
const SIX: [&str; 6] = [
    "cpu_usage_avg_5m",
    "cpu_usage_max_avg_1h",
    "cpu_usage_max_avg_1d",
    "mem_usage_avg_5m",
    "mem_usage_max_avg_1h",
    "mem_usage_max_avg_1d",
];

/// A node line of the static file with the six metrics set to `values`.
fn six(name: &str, capacity: &str, values: [f64; 6]) -> String {
    let metrics: Vec<String> = SIX.iter().zip(values).map(|(m, v)| format!("{m}: {v}")).collect();
    format!("  - {{name: {name}, capacity: {capacity}, metrics: {{{}}}}}\n", metrics.join(", "))
}

/// Capacity so large that a pod's share rounds to 0 % (the engine keeps 1e-6 %).
const HUGE: &str = "{cpu: 1e9, memory: 1Ei}";

#[tokio::test]
async fn hellobike_waterlevel_reproduces_the_articles_worked_example() -> Result<()> {
    // The article's table at target 20: U = 1, 5, 25, 50 → 24, 40, 19, 13.
    //   U ≤ 20: (100 − 20)·U/20 + 20:  1 → 24,  5 → 40
    //   U > 20: 20·(100 − U)/80:      25 → 18.75 → 19, 50 → 12.5 → 13 (half away from zero)
    // Every metric at U, so the weighted mean is the curve's value itself.
    let mut nodes = String::from("nodes:\n");
    for u in [1.0, 5.0, 25.0, 50.0] {
        nodes.push_str(&six(&format!("u{u}"), HUGE, [u; 6]));
    }
    // U = node + pod: an 8-CPU / 32 GiB node at 14.375 % cpu and 22.8125 % memory, and a pod
    // of 1 CPU (× 0.85 = 850m = 10.625 %) and 1 GiB (× 0.7 = 2.1875 %): U = 25 everywhere.
    let cpu = 14.375;
    let mem = 22.8125;
    nodes.push_str(&six("sum", "{cpu: 8, memory: 32Gi}", [cpu, cpu, cpu, mem, mem, mem]));
    // cpu 5 m at 70 % > 65 %: the threshold Hellobike takes from Crane.
    nodes.push_str(&six("hot", HUGE, [70.0, 30.0, 30.0, 10.0, 10.0, 10.0]));
    let pair = start("hellobike-waterlevel.yaml", &nodes).await?;

    let tiny = pb::PodInfo { cpu_request_millis: 1, ..pod("tiny") };
    assert_eq!(pair.scores(tiny.clone(), &["u1", "u5", "u25", "u50"]).await?, vec![24, 40, 19, 13]);
    let one_cpu =
        pb::PodInfo { cpu_request_millis: 1000, memory_request_bytes: 1 << 30, ..pod("p1") };
    assert_eq!(pair.scores(one_cpu.clone(), &["sum"]).await?, vec![19]);
    assert_eq!(
        pair.rejected(tiny, &["u25", "hot"]).await?,
        vec![("hot".to_string(), "cpu_usage_avg_5m 70.0% > 65%".to_string())]
    );
    // PostBind's record, waterline's Reserve: the placed pod counts before the metrics show
    // it. cpu 14.375 + 10.625 (placed) + 10.625 (next) = 35.625 → 20·64.375/80 = 16.09;
    // memory 22.8125 + 2.1875 × 2 = 27.1875 → 20·72.8125/80 = 18.20; weighted mean (each
    // resource weighs 1.0) = 17.15 → 17.
    pair.reserve(one_cpu.clone(), "sum").await?;
    let next = pb::PodInfo { uid: "p2".into(), name: "pod-p2".into(), ..one_cpu };
    assert_eq!(pair.scores(next, &["sum"]).await?, vec![17]);
    Ok(())
}

fn network_nodes(rows: &[(&str, &str)]) -> String {
    let mut text = String::from("nodes:\n");
    for (name, value) in rows {
        text.push_str(&format!(
            "  - {{name: {name}, capacity: {{cpu: 8, memory: 32Gi}}, metrics: {{network_bytes: {value}}}}}\n"
        ));
    }
    text
}

#[tokio::test]
async fn network_traffic_scores_the_busiest_candidate_0_and_an_idle_one_100() -> Result<()> {
    // Bytes per second, raw (far above 100: nothing may clamp them to a percent).
    let nodes = network_nodes(&[
        ("idle", "0"),
        ("quarter", "250e6"),
        ("half", "500e6"),
        ("busiest", "1e9"),
        ("stale", "{value: 9e9, age: 10m}"),
    ]);
    let pair = start("network-traffic.yaml", &nodes).await?;
    // NormalizeScore = 100 − score × 100 / highest, highest = 1e9 among the fresh candidates:
    //   idle 100 − 0 = 100, quarter 100 − 25 = 75, half 100 − 50 = 50, busiest 100 − 100 = 0;
    //   the stale node (10 minutes old, max age 2m30s) is left out of the highest and scores
    //   the stale score, 50; so does a node the collector does not know.
    let all = ["idle", "quarter", "half", "busiest", "stale", "ghost"];
    assert_eq!(pair.scores(pod("p"), &all).await?, vec![100, 75, 50, 0, 50, 50]);
    // Relative to this request's candidates: without the busiest, half is the highest.
    assert_eq!(pair.scores(pod("p"), &["idle", "quarter", "half"]).await?, vec![100, 50, 0]);
    // One candidate is its own highest; a highest of 0 divides nothing.
    assert_eq!(pair.scores(pod("p"), &["quarter"]).await?, vec![0]);
    assert_eq!(pair.scores(pod("p"), &["idle"]).await?, vec![100]);
    // The plugin has no Filter; neither has the policy.
    assert!(pair.rejected(pod("p"), &all).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn multi_resource_weighs_3_4_3_2_of_headroom_relative_to_the_best() -> Result<()> {
    let node = |name: &str, cpu_free: f64, mem: f64, disk: f64, net: f64| {
        format!(
            "  - {{name: {name}, capacity: {{cpu: 8, memory: 32Gi}}, metrics: {{cpu_free: {cpu_free}, mem_available: {mem}, disk_free: {disk}, network_bytes: {net}}}}}\n"
        )
    };
    let nodes = format!(
        "nodes:\n{}{}",
        node("a", 80.0, 50.0, 40.0, 100e6),
        node("b", 40.0, 25.0, 80.0, 400e6)
    );
    let pair = start("multi-resource-3432.yaml", &nodes).await?;
    // NormalizeScore = score × 100 / highest (headroom), network 100 − traffic × 100 / highest;
    // weights CPU 3, memory 4, disk 3, network 2 (Σ 12):
    //   a: cpu 80/80 → 100, memory 50/50 → 100, disk 40/80 → 50, network 100 − 25 = 75
    //      (3·100 + 4·100 + 3·50 + 2·75) / 12 = 1000 / 12 = 83.3 → 83
    //   b: cpu 40/80 → 50, memory 25/50 → 50, disk 80/80 → 100, network 100 − 100 = 0
    //      (150 + 200 + 300 + 0) / 12 = 54.2 → 54
    // kube-scheduler's sums would be 1000 and 650: the same order.
    assert_eq!(pair.scores(pod("p"), &["a", "b"]).await?, vec![83, 54]);
    Ok(())
}

#[tokio::test]
async fn crane_dynamic_scores_design_example_50_and_subtracts_the_hot_value() -> Result<()> {
    let mut nodes = String::from("nodes:\n");
    nodes.push_str(&six("n1", HUGE, [30.0, 50.0, 60.0, 40.0, 50.0, 50.0]));
    nodes.push_str(&six("hot", HUGE, [70.0, 50.0, 60.0, 40.0, 50.0, 50.0]));
    let pair = start("crane-dynamic.yaml", &nodes).await?;
    // docs/design.md: cpu {0.3, 0.5, 0.6}, mem {0.4, 0.5, 0.5}, weights 0.2/0.3/0.5 each:
    // 100 × (0.7·0.2 + 0.5·0.3 + 0.4·0.5 + 0.6·0.2 + 0.5·0.3 + 0.5·0.5) / 2 = 100 × 1.01 / 2
    // = 50.5 → int 50.
    let tiny = pb::PodInfo { cpu_request_millis: 1, ..pod("tiny") };
    assert_eq!(pair.scores(tiny.clone(), &["n1"]).await?, vec![50]);
    // Two bindings now: ⌊2/5⌋ + ⌊2/2⌋ = 1 → 50 − 10 = 40. Five: ⌊5/5⌋ + ⌊5/2⌋ = 3 → 20.
    for i in 0..2 {
        pair.reserve(pb::PodInfo { uid: format!("r{i}"), ..tiny.clone() }, "n1").await?;
    }
    assert_eq!(pair.scores(tiny.clone(), &["n1"]).await?, vec![40]);
    for i in 2..5 {
        pair.reserve(pb::PodInfo { uid: format!("r{i}"), ..tiny.clone() }, "n1").await?;
    }
    assert_eq!(pair.scores(tiny.clone(), &["n1"]).await?, vec![20]);
    // Filter at 65 % on the 5 m cpu; a node unknown to the collector passes (and scores 0:
    // Crane counts missing metrics as fully used).
    assert_eq!(
        pair.rejected(tiny.clone(), &["n1", "hot", "ghost"]).await?,
        vec![("hot".to_string(), "cpu_usage_avg_5m 70.0% > 65%".to_string())]
    );
    assert_eq!(pair.scores(tiny, &["ghost"]).await?, vec![0]);
    Ok(())
}

#[tokio::test]
async fn trimaran_tlp_reproduces_upstream_target_load_packing_cases() -> Result<()> {
    // TestTargetLoadPackingScoring: a node of 1000m cpu.
    let nodes = "nodes:
  - {name: new-node, capacity: {cpu: 1, memory: 4Gi}, metrics: {cpu_usage_avg_15m: 0}}
  - {name: hot-node, capacity: {cpu: 1, memory: 4Gi}, metrics: {cpu_usage_avg_15m: 50}}
  - {name: excess, capacity: {cpu: 1, memory: 4Gi}, metrics: {cpu_usage_avg_15m: 30}}
  - {name: no-metrics, capacity: {cpu: 1, memory: 4Gi}, metrics: {}}
";
    let pair = start("trimaran-tlp.yaml", nodes).await?;
    // Upstream's pods have no containers (predicted 0m). Waterline gives any pod without
    // requests the best-effort estimate, so a pod whose only limit is 1m stands in:
    // max(0, 1) × 1.5 capped at the 1m limit = 1m = 0.1 % of 1000m.
    //   "new node": U = 0.1 → round(60·0.1/40 + 40) = round(40.15) = 40
    //   "hot node": U = 50.1 → round(40·49.9/60) = round(33.27) = 33
    //   "404 resp from watcher" (no metrics): MinNodeScore 0 (stale.score 0)
    let empty = pb::PodInfo { cpu_limit_millis: 1, ..pod("empty") };
    assert_eq!(
        pair.scores(empty.clone(), &["new-node", "hot-node", "no-metrics", "ghost"]).await?,
        vec![40, 33, 0, 0]
    );
    // "excess utilization returns min score": 30 % + a container with a 1000m request and
    // limit (its limit, 1000m) → U = 130 > 100 → 0.
    let limited =
        pb::PodInfo { cpu_request_millis: 1000, cpu_limit_millis: 1000, ..pod("limited") };
    assert_eq!(pair.scores(limited.clone(), &["excess"]).await?, vec![0]);
    // A request without a limit is predicted at 1.5 ×: 400m → 600m; 30 + 60 = 90 % →
    // round(40·10/60) = round(6.67) = 7.
    let requested = pb::PodInfo { cpu_request_millis: 400, ..pod("requested") };
    assert_eq!(pair.scores(requested, &["excess"]).await?, vec![7]);
    // TargetLoadPacking has no Filter: even 130 % passes.
    assert!(pair.rejected(limited, &["new-node", "hot-node", "excess"]).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn koordinator_loadaware_reproduces_upstream_score_and_filter_cases() -> Result<()> {
    // load_aware_test.go: a node of 96 cpu / 512 Gi allocatable.
    let node = |name: &str, cpu_millis: f64, mem_gi: f64, age: &str| {
        let cpu = cpu_millis * 100.0 / 96_000.0;
        let mem = mem_gi * 100.0 / 512.0;
        format!(
            "  - {{name: {name}, capacity: {{cpu: 96, memory: 512Gi}}, metrics: {{cpu_usage_avg_5m: {{value: {cpu}, age: {age}}}, mem_usage_avg_5m: {{value: {mem}, age: {age}}}}}}}\n"
        )
    };
    let nodes = [
        node("empty", 0.0, 0.0, "0s"),
        node("load", 32_000.0, 10.0, "0s"),
        node("normal", 60_000.0, 256.0, "0s"),
        node("cpu-high", 70_000.0, 256.0, "0s"),
        node("mem-high", 30_000.0, 500.0, "0s"),
        node("expired", 0.0, 0.0, "4m"),
    ]
    .concat();
    let pair = start("koordinator-loadaware.yaml", &format!("nodes:\n{nodes}")).await?;

    // TestScore's pod: 16 cpu / 32 Gi guaranteed → 13600m and round(32 Gi × 0.7).
    let big = pb::PodInfo {
        cpu_request_millis: 16_000,
        cpu_limit_millis: 16_000,
        memory_request_bytes: 32 << 30,
        memory_limit_bytes: 32 << 30,
        ..pod("big")
    };
    // "score empty node": cpu (96000 − 13600)·100/96000 = 85 (85.8), memory 95 (95.6);
    //   (85 + 95) / 2 = 90.
    // "score load node": cpu 45600 → 52 (52.5), memory 32.4 Gi → 93 (93.7); 145 / 2 = 72.
    // "score node with expired nodeMetric" → 0; "score node missing NodeMetrics" → 0.
    assert_eq!(pair.scores(big, &["empty", "load", "expired", "ghost"]).await?, vec![90, 72, 0, 0]);
    // "score empty pod": 250m and 200 MiB unscaled (294m × 0.85 and 299593143 × 0.7 round to
    // exactly that): cpu (96000 − 250)·100/96000 = 99 (99.7), memory 99 (99.96) → 99.
    assert_eq!(pair.scores(pod("besteffort"), &["empty"]).await?, vec![99]);

    // TestFilterUsage with `&corev1.Pod{}` (250m / 200 MiB):
    //   "filter normal usage": 60250/96000 = 62.8 % ≤ 65, memory 50.04 % ≤ 95 → passes;
    //   "filter exceed cpu usage": 70250/96000 = 73.2 % > 65;
    //   "filter exceed memory usage": (500 Gi + 200 MiB)/512 Gi = 97.7 % > 95.
    // TestFilterExpiredNodeMetric: an expired report rejects; a missing one passes.
    let rejected =
        pair.rejected(pod("f"), &["normal", "cpu-high", "mem-high", "expired", "ghost"]).await?;
    assert_eq!(
        rejected,
        vec![
            ("cpu-high".to_string(), "cpu_usage_avg_5m 73.2% > 65%".to_string()),
            ("mem-high".to_string(), "mem_usage_avg_5m 97.7% > 95%".to_string()),
            (
                "expired".to_string(),
                "cpu_usage_avg_5m has no fresh sample; mem_usage_avg_5m has no fresh sample"
                    .to_string()
            ),
        ]
    );
    // DaemonSet pods bypass the usage filter.
    let daemon = pb::PodInfo { owner_kind: "DaemonSet".into(), ..pod("ds") };
    assert!(pair.rejected(daemon, &["cpu-high", "mem-high"]).await?.is_empty());
    Ok(())
}
