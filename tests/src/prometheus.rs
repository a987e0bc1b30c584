//! Runs the real Prometheus server (Debian's `/usr/bin/prometheus`, installed by
//! `scripts/deps/prometheus.sh`) as a plain child process on a free loopback port, with its
//! own temporary data directory and a generated configuration, and queries it.
//!
//! ```ignore
//! let exporter = FakeExporter::start(nodes).await?;
//! let prom = Prometheus::start(
//!     PrometheusConfig::new(exporter.scrape_configs())
//!         .rule_file(repo_path("deploy/prometheus/rules.yml"))
//!         .backfill(history),
//! ).await?;
//! let rows = prom.query("waterline:node_cpu_usage:avg5m").await?;
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::future::Future;
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};

use crate::exporter::wall_now;
use serde::Deserialize;

/// The Prometheus server binary (Debian package `prometheus`).
pub const PROMETHEUS_BIN: &str = "/usr/bin/prometheus";
/// promtool, from the same package.
pub const PROMTOOL_BIN: &str = "/usr/bin/promtool";

/// What to run Prometheus with.
#[derive(Clone, Debug)]
pub struct PrometheusConfig {
    /// Entries of `scrape_configs:` as a YAML block sequence at column 0 (for example
    /// [`crate::exporter::FakeExporter::scrape_configs`]); may be empty.
    pub scrape_configs: String,
    /// Rule files; each is copied into the temporary directory, with every group's
    /// `interval:` rewritten to `rule_interval` when that is set.
    pub rule_files: Vec<PathBuf>,
    /// `global.scrape_interval` (and `scrape_timeout`). Default 1 s.
    pub scrape_interval: Duration,
    /// `global.evaluation_interval`. Default 1 s.
    pub evaluation_interval: Duration,
    /// Interval forced on every rule group of the copied rule files. Default `Some(1 s)`;
    /// `None` keeps the files' own intervals.
    pub rule_interval: Option<Duration>,
    /// OpenMetrics texts written into the data directory with
    /// `promtool tsdb create-blocks-from openmetrics` before the first start.
    pub backfill: Vec<String>,
    /// More command-line flags for the server.
    pub extra_args: Vec<String>,
    /// How long to wait for `/-/ready`. Default 30 s.
    pub ready_timeout: Duration,
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            scrape_configs: String::new(),
            rule_files: Vec::new(),
            scrape_interval: Duration::from_secs(1),
            evaluation_interval: Duration::from_secs(1),
            rule_interval: Some(Duration::from_secs(1)),
            backfill: Vec::new(),
            extra_args: Vec::new(),
            ready_timeout: Duration::from_secs(30),
        }
    }
}

impl PrometheusConfig {
    pub fn new(scrape_configs: impl Into<String>) -> Self {
        PrometheusConfig { scrape_configs: scrape_configs.into(), ..Default::default() }
    }

    pub fn rule_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.rule_files.push(path.into());
        self
    }

    pub fn backfill(mut self, openmetrics: impl Into<String>) -> Self {
        self.backfill.push(openmetrics.into());
        self
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.extra_args.push(arg.into());
        self
    }
}

/// A running (or stopped, until [`Prometheus::restart`]) Prometheus server. Dropping it kills
/// the process and removes its directory.
pub struct Prometheus {
    dir: tempfile::TempDir,
    addr: SocketAddr,
    args: Vec<String>,
    child: Option<Child>,
    ready_timeout: Duration,
    http: reqwest::Client,
}

impl Prometheus {
    /// Writes the configuration, backfills, starts the server and waits until it is ready.
    pub async fn start(config: PrometheusConfig) -> Result<Prometheus> {
        for bin in [PROMETHEUS_BIN, PROMTOOL_BIN] {
            if !Path::new(bin).exists() {
                bail!("{bin} not found: run scripts/deps/prometheus.sh (apt package prometheus)");
            }
        }
        let dir = tempfile::Builder::new().prefix("waterline-prometheus-").tempdir()?;
        let data_dir = dir.path().join("data");
        fs::create_dir_all(&data_dir)?;

        let mut rule_paths = Vec::new();
        for (i, src) in config.rule_files.iter().enumerate() {
            let text = fs::read_to_string(src)
                .with_context(|| format!("reading rule file {}", src.display()))?;
            let text = match config.rule_interval {
                Some(interval) => rewrite_rule_intervals(&text, interval),
                None => text,
            };
            let name = src
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "rules.yml".into());
            let dst = dir.path().join(format!("rules-{i}-{name}"));
            fs::write(&dst, text)?;
            rule_paths.push(dst);
        }

        let config_path = dir.path().join("prometheus.yml");
        fs::write(&config_path, render_config(&config, &rule_paths))?;
        let check = Command::new(PROMTOOL_BIN)
            .arg("check")
            .arg("config")
            .arg(&config_path)
            .output()
            .context("running promtool check config")?;
        if !check.status.success() {
            bail!(
                "promtool check config failed:\n{}{}\n--- prometheus.yml ---\n{}",
                String::from_utf8_lossy(&check.stdout),
                String::from_utf8_lossy(&check.stderr),
                fs::read_to_string(&config_path).unwrap_or_default()
            );
        }

        for text in &config.backfill {
            backfill(&data_dir, text).await?;
        }

        let addr = free_loopback_addr()?;
        let mut args = vec![
            format!("--config.file={}", config_path.display()),
            format!("--storage.tsdb.path={}", data_dir.display()),
            format!("--web.listen-address={addr}"),
            "--web.enable-lifecycle".to_string(),
            "--web.enable-admin-api".to_string(),
            "--storage.tsdb.retention.time=30d".to_string(),
            "--log.level=info".to_string(),
        ];
        args.extend(config.extra_args.iter().cloned());

        let mut prom = Prometheus {
            dir,
            addr,
            args,
            child: None,
            ready_timeout: config.ready_timeout,
            http: reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?,
        };
        prom.launch().await?;
        Ok(prom)
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The TSDB directory (`--storage.tsdb.path`).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The generated `prometheus.yml`.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("prometheus.yml")
    }

    /// The server's stdout and stderr (all runs, appended).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("prometheus.log")
    }

    /// The last `max_bytes` of the server's log.
    pub fn log_tail(&self, max_bytes: u64) -> String {
        tail(&self.log_path(), max_bytes)
    }

    /// Whether the child process is running.
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Kills the server (SIGKILL, like a crash or an OOM kill) and waits for it to exit.
    /// The data directory stays; [`Prometheus::restart`] brings it back.
    pub fn stop(&mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            if child.try_wait()?.is_none() {
                child.kill().context("killing prometheus")?;
            }
            child.wait().context("waiting for prometheus to exit")?;
        }
        Ok(())
    }

    /// Stops the server if it runs, then starts it again on the same port and data directory
    /// and waits until it is ready.
    pub async fn restart(&mut self) -> Result<()> {
        self.stop()?;
        self.launch().await
    }

    async fn launch(&mut self) -> Result<()> {
        let log = OpenOptions::new().create(true).append(true).open(self.log_path())?;
        let child = Command::new(PROMETHEUS_BIN)
            .args(&self.args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("spawning {PROMETHEUS_BIN}"))?;
        self.child = Some(child);

        let deadline = wall_now() + self.ready_timeout;
        let ready_url = format!("{}/-/ready", self.url());
        loop {
            if let Some(child) = &mut self.child
                && let Some(status) = child.try_wait()?
            {
                self.child = None;
                bail!(
                    "prometheus exited during start-up ({status}); log tail:\n{}",
                    self.log_tail(4096)
                );
            }
            if let Ok(resp) = self.http.get(&ready_url).send().await
                && resp.status().is_success()
            {
                return Ok(());
            }
            if wall_now() >= deadline {
                let tail = self.log_tail(4096);
                let _ = self.stop();
                bail!(
                    "prometheus on {} not ready within {:?}; log tail:\n{tail}",
                    self.addr,
                    self.ready_timeout
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Instant query at the server's "now".
    pub async fn query(&self, promql: &str) -> Result<Vec<Sample>> {
        self.query_params(promql, None).await
    }

    /// Instant query at `time`.
    pub async fn query_at(&self, promql: &str, time: SystemTime) -> Result<Vec<Sample>> {
        let t = time
            .duration_since(UNIX_EPOCH)
            .map_err(|_| anyhow!("time before the epoch"))?
            .as_secs_f64();
        self.query_params(promql, Some(format!("{t:.3}"))).await
    }

    async fn query_params(&self, promql: &str, time: Option<String>) -> Result<Vec<Sample>> {
        instant_query(&self.http, &self.url(), promql, time).await
    }
}

/// One `/api/v1/query` against any Prometheus-compatible server at `base` (Prometheus,
/// VictoriaMetrics): the vector or scalar answer as samples, or the server's error.
pub async fn instant_query(
    http: &reqwest::Client,
    base: &str,
    promql: &str,
    time: Option<String>,
) -> Result<Vec<Sample>> {
    let mut params = vec![("query", promql.to_string())];
    if let Some(t) = time {
        params.push(("time", t));
    }
    let url = reqwest::Url::parse_with_params(&format!("{base}/api/v1/query"), &params)?;
    let resp = http.get(url).send().await.with_context(|| format!("querying {promql}"))?;
    let status = resp.status();
    let body: ApiResponse = resp
        .json()
        .await
        .with_context(|| format!("decoding the answer to {promql} (HTTP {status})"))?;
    if body.status != "success" {
        bail!(
            "query {promql} failed (HTTP {status}): {} {}",
            body.error_type.unwrap_or_default(),
            body.error.unwrap_or_default()
        );
    }
    let data = body.data.ok_or_else(|| anyhow!("query {promql}: no data"))?;
    match data.result_type.as_str() {
        "vector" => {
            let rows: Vec<VectorRow> = serde_json::from_value(data.result)?;
            rows.into_iter().map(|row| Ok((row.metric, parse_value(&row.value.1)?))).collect()
        }
        "scalar" => {
            let (_, v): (f64, String) = serde_json::from_value(data.result)?;
            Ok(vec![(BTreeMap::new(), parse_value(&v)?)])
        }
        other => bail!("query {promql}: result type {other} is not supported by query()"),
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// One row of an instant-vector answer: the series' labels and its value.
pub type Sample = (BTreeMap<String, String>, f64);

#[derive(Deserialize)]
struct ApiResponse {
    status: String,
    data: Option<ApiData>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct ApiData {
    #[serde(rename = "resultType")]
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct VectorRow {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

fn parse_value(v: &str) -> Result<f64> {
    // Prometheus writes NaN, +Inf, -Inf; Rust parses "NaN", "inf", "+inf", "-inf".
    match v {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => v.parse().with_context(|| format!("sample value {v:?} is not a number")),
    }
}

/// Writes OpenMetrics text (ending in `# EOF`, timestamps in seconds) into `data_dir` as TSDB
/// blocks, with `promtool tsdb create-blocks-from openmetrics`. Do it before the server
/// starts on that directory: blocks added under a running server appear only after its next
/// reload (~60 s), and live samples older than the newest block are refused.
pub async fn backfill(data_dir: &Path, openmetrics: &str) -> Result<()> {
    if !openmetrics.trim_end().ends_with("# EOF") {
        bail!("OpenMetrics input must end with `# EOF`");
    }
    let input = tempfile::Builder::new().prefix("waterline-backfill-").suffix(".om").tempfile()?;
    fs::write(input.path(), openmetrics)?;
    backfill_file(data_dir, input.path(), None).await
}

/// [`backfill`] from an OpenMetrics file (for inputs too large to hold in memory), with
/// promtool's `--max-block-duration` when given (its default is 2 h; promtool reads the whole
/// input once per block window, so one file per window of that length is the fast way).
pub async fn backfill_file(
    data_dir: &Path,
    input: &Path,
    max_block_duration: Option<Duration>,
) -> Result<()> {
    let mut command = tokio::process::Command::new(PROMTOOL_BIN);
    command.args(["tsdb", "create-blocks-from", "openmetrics"]);
    if let Some(d) = max_block_duration {
        command.arg(format!("--max-block-duration={}", prom_duration(d)));
    }
    let out = command
        .arg(input)
        .arg(data_dir)
        .stdin(Stdio::null())
        .output()
        .await
        .context("running promtool tsdb create-blocks-from openmetrics")?;
    if !out.status.success() {
        bail!(
            "promtool tsdb create-blocks-from openmetrics failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Polls `f` every 100 ms until it returns `Ok`, and returns that value; after `timeout`,
/// fails with the last error. Put the assertions inside (`anyhow::ensure!`).
pub async fn wait_until<T, F, Fut>(timeout: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let start = wall_now();
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if start.elapsed() >= timeout => {
                return Err(e.context(format!("condition not met within {timeout:?}")));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The six records of `deploy/prometheus/rules.yml` (and `rules-at-scale.yml`).
pub mod records {
    pub const CPU_5M: &str = "waterline:node_cpu_usage:avg5m";
    pub const CPU_1H: &str = "waterline:node_cpu_usage:max_avg1h";
    pub const CPU_1D: &str = "waterline:node_cpu_usage:max_avg1d";
    pub const MEM_5M: &str = "waterline:node_memory_usage:avg5m";
    pub const MEM_1H: &str = "waterline:node_memory_usage:max_avg1h";
    pub const MEM_1D: &str = "waterline:node_memory_usage:max_avg1d";
    pub const ALL: [&str; 6] = [CPU_5M, CPU_1H, CPU_1D, MEM_5M, MEM_1H, MEM_1D];
}

/// The value of `node`'s series among `rows`: matched on the exact `instance` and `node`
/// labels the node's shape gives (a node identified by instance must have no `node` label).
pub fn value_for(rows: &[Sample], node: &crate::exporter::FakeNode) -> Result<f64> {
    let matching: Vec<&Sample> = rows
        .iter()
        .filter(|(labels, _)| {
            labels.get("instance").map(String::as_str) == Some(node.instance().as_str())
                && labels.get("node").map(String::as_str) == node.node_label()
        })
        .collect();
    match matching.as_slice() {
        [(_, v)] => Ok(*v),
        [] => bail!("no series for {} in {rows:?}", node.selector()),
        _ => bail!("several series for {} in {rows:?}", node.selector()),
    }
}

/// Absolute path of a file of the repository, from its path relative to the repository root.
pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").join(relative)
}

/// Rewrites the value of every `interval:` key (a rule group's evaluation interval) to
/// `interval`, keeping indentation. Rule expressions are left alone.
pub fn rewrite_rule_intervals(text: &str, interval: Duration) -> String {
    let value = prom_duration(interval);
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let trimmed = line.trim_start();
        let body = trimmed.strip_prefix("- ").unwrap_or(trimmed);
        if body.starts_with("interval:") {
            let key_at = line.len() - body.len();
            let _ = writeln!(out, "{}interval: {value}", &line[..key_at]);
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn prom_duration(d: Duration) -> String {
    let ms = d.as_millis().max(1);
    if ms.is_multiple_of(1000) { format!("{}s", ms / 1000) } else { format!("{ms}ms") }
}

fn render_config(config: &PrometheusConfig, rule_paths: &[PathBuf]) -> String {
    let mut yaml = String::new();
    let _ = writeln!(
        yaml,
        "global:\n  scrape_interval: {s}\n  scrape_timeout: {s}\n  evaluation_interval: {e}",
        s = prom_duration(config.scrape_interval),
        e = prom_duration(config.evaluation_interval),
    );
    if !rule_paths.is_empty() {
        yaml.push_str("rule_files:\n");
        for p in rule_paths {
            let _ = writeln!(yaml, "  - '{}'", p.display());
        }
    }
    if config.scrape_configs.trim().is_empty() {
        yaml.push_str("scrape_configs: []\n");
    } else {
        yaml.push_str("scrape_configs:\n");
        yaml.push_str(&config.scrape_configs);
        if !config.scrape_configs.ends_with('\n') {
            yaml.push('\n');
        }
    }
    yaml
}

fn free_loopback_addr() -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?)
}

fn tail(path: &Path, max_bytes: u64) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::from("(no log)");
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(max_bytes)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// A fake node-exporter serving `nodes` (steady at their levels) and a Prometheus scraping it
/// with the shipped recording rules and `history` of backfilled samples, so rates and
/// subqueries have full windows at once.
pub async fn exporter_with_shipped_rules(
    nodes: Vec<crate::exporter::FakeNode>,
    history: Duration,
) -> Result<(crate::exporter::FakeExporter, Prometheus)> {
    use crate::exporter::{FakeExporter, NodeLoad, openmetrics_history_with_dimensions};
    let now = SystemTime::now();
    let backfill = openmetrics_history_with_dimensions(
        &nodes,
        now - history,
        now,
        Duration::from_secs(15),
        |n, _| NodeLoad { cpu_busy: n.cpu_busy, memory_used: n.memory_used },
    )?;
    let exporter = FakeExporter::start(nodes).await?;
    let prom = Prometheus::start(
        PrometheusConfig::new(exporter.scrape_configs())
            .rule_file(repo_path("deploy/prometheus/rules.yml"))
            .backfill(backfill),
    )
    .await?;
    Ok((exporter, prom))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_rewritten_and_exprs_kept() {
        let src = "groups:\n  - name: a\n    interval: 30s\n    rules:\n      - record: x\n        expr: rate(y[5m])\n  - interval: 5m\n    name: b\n";
        let out = rewrite_rule_intervals(src, Duration::from_secs(1));
        assert_eq!(
            out,
            "groups:\n  - name: a\n    interval: 1s\n    rules:\n      - record: x\n        expr: rate(y[5m])\n  - interval: 1s\n    name: b\n"
        );
        assert_eq!(prom_duration(Duration::from_millis(250)), "250ms");
    }
}
