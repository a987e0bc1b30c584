//! `waterline-collector policy check` on every shipped policy and rule file, on a PromQL typo
//! and an unrecorded rule name, and against a real Prometheus scraping the fake exporter
//! (every shipped policy's queries return series that map to nodes).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use waterline_tests::exporter::FakeNode;
use waterline_tests::procs::{bin, write_file};
use waterline_tests::prometheus::{exporter_with_shipped_rules, repo_path, wait_until};

const RULE_FILES: [&str; 5] = [
    "deploy/prometheus/rules.yml",
    "deploy/prometheus/rules-at-scale.yml",
    "deploy/prometheus/prometheus-rule.yaml",
    "deploy/prometheus/alerts.yaml",
    "deploy/prometheus/alerts-rule.yaml",
];

/// deploy/policy/*.yaml and deploy/examples/policies/*.yaml.
fn shipped_policies() -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for dir in ["deploy/policy", "deploy/examples/policies"] {
        for entry in std::fs::read_dir(repo_path(dir))? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "yaml")
                && !path.ends_with("kustomization.yaml")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Runs `policy check FILE` with every shipped rule file and `extra` flags.
fn check(file: &PathBuf, extra: &[&str]) -> Result<(bool, String)> {
    let mut command = Command::new(bin("waterline-collector"));
    command.args(["policy", "check"]).arg(file);
    for rules in RULE_FILES {
        command.arg("--rules").arg(repo_path(rules));
    }
    let out = command.args(extra).env_remove("WATERLINE_PROMETHEUS_URL").output()?;
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), text))
}

#[test]
fn every_shipped_policy_and_rule_file_passes() -> Result<()> {
    let policies = shipped_policies()?;
    ensure!(policies.len() >= 7, "{policies:?}");
    for policy in &policies {
        let (ok, text) = check(policy, &[])?;
        ensure!(ok, "{}:\n{text}", policy.display());
        ensure!(text.contains("every query parses as PromQL"), "{text}");
        for rules in RULE_FILES {
            ensure!(
                text.contains(&format!("{rules}: ")) && text.contains(", 0 with a PromQL error"),
                "{text}"
            );
        }
    }
    Ok(())
}

#[test]
fn a_promql_typo_fails_naming_the_metric_and_line() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let policy = write_file(
        dir.path(),
        "typo.yaml",
        "metrics:\n  - {name: cpu, resource: cpu, query: 'waterline:node_cpu_usage:avg5m', period: 30s, weight: 1}\n  - {name: net, resource: other, query: 'sum(rate(node_network_receive_bytes_total[5m])', period: 30s, weight: 1, unit: bytesPerSecond, normalize: maxOfCandidates}\n",
    );
    let (ok, text) = check(&PathBuf::from(&policy), &[])?;
    ensure!(!ok, "a typo passed:\n{text}");
    ensure!(text.contains("metrics[1].query: metric 'net': not valid PromQL"), "{text}");
    ensure!(text.contains("(line 3)"), "{text}");

    // A recording rule no shipped rule file records.
    let unrecorded = write_file(
        dir.path(),
        "unrecorded.yaml",
        "metrics:\n  - {name: gpu, resource: other, query: 'waterline:node_gpu_usage:avg5m', period: 30s, weight: 1}\n",
    );
    let (ok, text) = check(&PathBuf::from(&unrecorded), &[])?;
    ensure!(!ok, "{text}");
    ensure!(
        text.contains("gpu: reads waterline:node_gpu_usage:avg5m — not recorded by the rule files"),
        "{text}"
    );
    Ok(())
}

/// The learned estimate's queries read the per-pod series: a rule file without them fails
/// the check (on by default), and a policy with learning off does not read them.
#[test]
fn the_learned_estimates_series_must_be_recorded_while_learning_is_on() -> Result<()> {
    let dir = tempfile::tempdir()?;
    // rules.yml without its last group (the per-pod usage).
    let shipped = std::fs::read_to_string(repo_path("deploy/prometheus/rules.yml"))?;
    let cut = shipped.find("  - name: waterline-pod-usage").context("no pod group")?;
    let node_rules = write_file(dir.path(), "node-rules.yml", &shipped[..cut]);
    let run = |policy: &str| -> Result<(bool, String)> {
        let policy = write_file(dir.path(), "policy.yaml", policy);
        let out = Command::new(bin("waterline-collector"))
            .args(["policy", "check", &policy, "--rules", &node_rules])
            .env_remove("WATERLINE_PROMETHEUS_URL")
            .output()?;
        Ok((out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned()))
    };
    let (ok, text) = run("{}\n")?;
    ensure!(!ok, "{text}");
    ensure!(
        text.contains(
            "estimator.learn.queries.cpu: reads waterline:pod_cpu_usage:rate5m — not recorded by the rule files"
        ),
        "{text}"
    );
    let (ok, text) = run("estimator: {learn: {enabled: false}}\n")?;
    ensure!(ok && !text.contains("estimator.learn"), "{text}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_policy_reads_series_that_map_to_nodes_on_a_real_prometheus() -> Result<()> {
    let nodes = vec![
        FakeNode::new("node-a")
            .with_cpu_busy(0.3)
            .with_memory_used(0.4)
            .with_disk_used(0.5)
            .with_disk_io_busy(0.2)
            .with_network(1e6, 1e6),
        FakeNode::new("node-b")
            .with_instance("10.0.0.2:9100")
            .with_cpu_busy(0.6)
            .with_disk_used(0.2)
            .with_network(5e6, 0.0),
    ];
    // History so the 1 h / 1 d subqueries and the rates have full windows at once.
    let (_exporter, prom) =
        exporter_with_shipped_rules(nodes, Duration::from_secs(30 * 60)).await?;
    let url = prom.url();
    let policies = shipped_policies()?;
    let report = wait_until(Duration::from_secs(30), || async {
        let mut report = String::new();
        for policy in &policies {
            let (ok, text) = check(policy, &["--prometheus-url", &url, "--require-series"])?;
            ensure!(ok, "{}:\n{text}", policy.display());
            report.push_str(&text);
        }
        Ok(report)
    })
    .await?;
    // Both nodes, each query: "N series, N mapped to nodes" with N = 2.
    ensure!(report.contains("network_bytes: 2 series, 2 mapped to nodes, 0 unmapped"), "{report}");
    ensure!(report.contains("nodes seen: 2"), "{report}");
    eprintln!("{report}");
    Ok(())
}
