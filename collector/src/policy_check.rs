//! `waterline-collector policy check FILE`: loads a policy exactly as the collector and the
//! scorer do (YAML, every field, and every query through a PromQL parser), parses the
//! expressions of recording- and alerting-rule files, checks that the recording-rule names
//! a policy reads are recorded by the rule files given, and, with `--prometheus-url`, runs
//! each query once and reports how many series it returned and how many mapped to nodes.
//! Prints a report on stdout; fails (exit 1) on the first kind of problem it lists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use waterline_core::rule_file::RuleFile;
use waterline_core::time::parse_std_duration;
use waterline_runtime::policy::selected_names;

use crate::node_directory::NodeDirectory;
use crate::sources::prometheus::answer::map_to_nodes;
use crate::sources::prometheus::{ClientConfig, PromClient, parse_header};

#[derive(clap::Args, Clone, Debug)]
pub struct CheckArgs {
    /// Policy file (YAML) to check, as `--policy` would load it.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Recording- or alerting-rule file (a Prometheus rule file, or a PrometheusRule
    /// manifest) whose expressions must parse; the recording-rule names the policy reads
    /// (names with a `:`) must be recorded by one of them. Repeatable.
    #[arg(long = "rules", value_name = "FILE")]
    pub rules: Vec<PathBuf>,

    /// Run each metric's query once against this PromQL endpoint and report its series.
    #[arg(long, value_name = "URL", env = "WATERLINE_PROMETHEUS_URL")]
    pub prometheus_url: Option<String>,

    /// Extra header on every query, `Name: value`; repeatable.
    #[arg(long = "prometheus-header", value_name = "NAME: VALUE", value_parser = parse_header)]
    pub prometheus_headers: Vec<(String, String)>,

    /// File holding a bearer token for Prometheus.
    #[arg(long, value_name = "FILE")]
    pub prometheus_bearer_token_file: Option<PathBuf>,

    /// PEM file of CA certificates trusted for an https:// URL.
    #[arg(long, value_name = "FILE")]
    pub prometheus_ca_file: Option<PathBuf>,

    /// Bound on each query.
    #[arg(long, default_value = "10s", value_parser = parse_std_duration)]
    pub prometheus_timeout: Duration,

    /// Node address map (as the collector's `--node-map`) to count series mapped to known
    /// nodes; without it a series maps when one of the policy's node labels has a value.
    #[arg(long, value_name = "FILE")]
    pub node_map: Option<PathBuf>,

    /// With --prometheus-url: fail when a query returns no series or none maps to a node.
    #[arg(long, requires = "prometheus_url")]
    pub require_series: bool,
}

/// The line (1-based) of the first line of `text` from `from` on that contains `needle`.
fn line_of(text: &str, needle: &str, from: usize) -> Option<usize> {
    text.lines().enumerate().skip(from).find(|(_, l)| l.contains(needle)).map(|(i, _)| i + 1)
}

/// Parses every expression of a rule file; returns the names it records.
fn check_rules(path: &Path, out: &mut String, failed: &mut bool) -> Vec<String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            *failed = true;
            out.push_str(&format!("rules {}: cannot read: {e}\n", path.display()));
            return Vec::new();
        }
    };
    let groups = match RuleFile::parse(&text) {
        Ok(groups) => groups,
        Err(e) => {
            *failed = true;
            out.push_str(&format!("rules {}: {e}\n", path.display()));
            return Vec::new();
        }
    };
    let (mut records, mut alerts, mut bad) = (Vec::new(), 0, 0);
    let mut from = 0;
    for group in &groups {
        for rule in &group.rules {
            let name = rule.record.as_deref().or(rule.alert.as_deref()).unwrap_or("?");
            let line = line_of(&text, name, from);
            from = line.unwrap_or(from + 1).saturating_sub(1);
            if let Err(why) = selected_names(&rule.expr) {
                bad += 1;
                let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
                out.push_str(&format!(
                    "rules {}: group {}, rule {name}{at}: {why}\n",
                    path.display(),
                    group.name
                ));
            }
            match &rule.record {
                Some(record) => records.push(record.clone()),
                None => alerts += 1,
            }
        }
    }
    *failed |= bad > 0;
    out.push_str(&format!(
        "rules {}: {} groups, {} recording and {alerts} alerting rules, {} with a PromQL error\n",
        path.display(),
        groups.len(),
        records.len(),
        bad
    ));
    records
}

/// Runs the check; the report and whether everything passed.
pub async fn check(args: &CheckArgs) -> (String, bool) {
    let mut out = String::new();
    let mut failed = false;
    let recorded: Vec<String> =
        args.rules.iter().flat_map(|p| check_rules(p, &mut out, &mut failed)).collect();

    let policy = match waterline_runtime::policy::load(&args.file) {
        Ok(policy) => policy,
        Err(error) => {
            out.push_str(&format!("policy {error}\n"));
            return (out, false);
        }
    };
    out.push_str(&format!(
        "policy {}: loads, {} metrics, every query parses as PromQL\n",
        args.file.display(),
        policy.metrics.len()
    ));
    // Every query's series, the learned estimate's too (docs/design.md#learned-estimate):
    // with estimator.learn on, its per-pod series must be recorded as well.
    let learn = &policy.estimator.learn;
    let learn_queries = [
        ("estimator.learn.queries.cpu", &learn.queries.cpu),
        ("estimator.learn.queries.memory", &learn.queries.memory),
        ("estimator.learn.queries.cpuSamples", &learn.queries.cpu_samples),
        ("estimator.learn.queries.memorySamples", &learn.queries.memory_samples),
    ];
    let queries = policy
        .metrics
        .iter()
        .map(|m| (m.name.as_str(), &m.query))
        .chain(learn_queries.into_iter().filter(|_| learn.enabled));
    for (name, query) in queries {
        let names = selected_names(query).unwrap_or_default();
        let rules: Vec<&String> = names.iter().filter(|n| n.contains(':')).collect();
        let missing: Vec<&&String> =
            rules.iter().filter(|n| !recorded.iter().any(|r| r == **n)).collect();
        let reads = if names.is_empty() { "no series".to_string() } else { names.join(", ") };
        out.push_str(&format!("  {name}: reads {reads}"));
        if !args.rules.is_empty() && !missing.is_empty() {
            failed = true;
            let missing: Vec<&str> = missing.iter().map(|n| n.as_str()).collect();
            out.push_str(&format!(" — not recorded by the rule files: {}", missing.join(", ")));
        }
        out.push('\n');
    }

    let Some(url) = &args.prometheus_url else { return (out, !failed) };
    let client = match PromClient::new(&ClientConfig {
        url: url.clone(),
        bearer_token_file: args.prometheus_bearer_token_file.clone(),
        basic_auth: None,
        ca_file: args.prometheus_ca_file.clone(),
        insecure_skip_verify: false,
        headers: args.prometheus_headers.clone(),
        timeout: args.prometheus_timeout,
    }) {
        Ok(client) => client,
        Err(error) => {
            out.push_str(&format!("prometheus {url}: {error}\n"));
            return (out, false);
        }
    };
    let directory = NodeDirectory::default();
    if let Some(path) = &args.node_map
        && let Err(error) = directory.load_file(path)
    {
        out.push_str(&format!("--node-map {error}\n"));
        return (out, false);
    }
    out.push_str(&format!("prometheus {url}: one instant query per metric\n"));
    let mut nodes: BTreeMap<String, usize> = BTreeMap::new();
    for metric in &policy.metrics {
        match client.query(&metric.query).await {
            Ok(series) => {
                let percent = metric.unit == waterline_core::policy::Unit::Percent;
                let mapped = map_to_nodes(series, &policy.node_labels, &directory, percent);
                for node in mapped.values.keys() {
                    *nodes.entry(node.clone()).or_default() += 1;
                }
                out.push_str(&format!(
                    "  {}: {} series, {} mapped to nodes, {} unmapped, {} dropped (NaN/Inf)\n",
                    metric.name,
                    mapped.series,
                    mapped.values.len(),
                    mapped.unmapped.len(),
                    mapped.dropped
                ));
                if args.require_series && mapped.values.is_empty() {
                    failed = true;
                }
            }
            Err(error) => {
                failed = true;
                out.push_str(&format!("  {}: query failed: {error}\n", metric.name));
            }
        }
    }
    out.push_str(&format!("nodes seen: {}\n", nodes.len()));
    (out, !failed)
}

/// The subcommand: prints the report, exit status 1 when something failed.
pub async fn run(args: CheckArgs) -> anyhow::Result<()> {
    let (report, ok) = check(&args).await;
    print!("{report}");
    if !ok {
        anyhow::bail!("policy check failed");
    }
    Ok(())
}
