//! What the two Prometheus-compatible test backends share: the [`MetricsBackend`] trait the
//! tests are written against ([`crate::prometheus::Prometheus`],
//! [`crate::victoria::VictoriaMetrics`]), the one configuration both start from
//! ([`BackendConfig`]: scrape targets, rule files, history, flags), and the pieces each
//! would otherwise carry a copy of — a server child process on a free loopback port with
//! its log and readiness probe ([`Server`]), the rule files copied with their intervals
//! rewritten, the `scrape_configs:` document, and the instant query of the HTTP API.
//!
//! A test that makes the same claim of both stores takes `B: MetricsBackend` and runs
//! once per backend (`tests/tests/metrics_backends.rs`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::future::Future;
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;

use crate::exporter::wall_now;

/// A Prometheus-compatible store run for a test: started from a [`BackendConfig`], queried
/// through the Prometheus HTTP API at [`MetricsBackend::url`], stopped and started again
/// on the same port and data, and told to re-read its rules.
pub trait MetricsBackend: Sized + Send {
    /// The backend's name in messages (`prometheus`, `victoria-metrics`).
    const NAME: &'static str;

    /// Starts the store (and its rule evaluator) with `config`, backfills the history and
    /// waits until everything is ready.
    fn start(config: BackendConfig) -> impl Future<Output = Result<Self>> + Send;

    /// `http://127.0.0.1:<port>`: the root of the Prometheus HTTP API
    /// (`/api/v1/query`), what a collector's `--prometheus-url` takes.
    fn url(&self) -> String;

    /// The TSDB directory.
    fn data_dir(&self) -> PathBuf;

    /// The last `max_bytes` of every process's log.
    fn log_tail(&self, max_bytes: u64) -> String;

    /// Whether every process of the backend runs.
    fn is_running(&mut self) -> bool;

    /// Kills every process (SIGKILL, like a crash); the data directory stays.
    fn stop(&mut self) -> Result<()>;

    /// Stops what runs, then starts it again on the same port and data directory and waits
    /// until it is ready.
    fn restart(&mut self) -> impl Future<Output = Result<()>> + Send;

    /// Replaces the rule files (copied and rewritten as at the start) and has the rule
    /// evaluator re-read them. Prometheus answers its reload when done; vmalert reloads in
    /// the background, so wait for the new rules' series either way.
    fn reload_rules(&mut self, rule_files: &[PathBuf]) -> impl Future<Output = Result<()>> + Send;

    /// Instant query at the server's "now".
    fn query(&self, promql: &str) -> impl Future<Output = Result<Vec<Sample>>> + Send;
}

/// What a backend is started with; the same for both.
#[derive(Clone, Debug)]
pub struct BackendConfig {
    /// Entries of `scrape_configs:` as a YAML block sequence at column 0 (for example
    /// [`crate::exporter::FakeExporter::scrape_configs`]); may be empty.
    pub scrape_configs: String,
    /// Rule files; each is copied into the temporary directory, with every group's
    /// `interval:` rewritten to `rule_interval` when that is set.
    pub rule_files: Vec<PathBuf>,
    /// `global.scrape_interval` (and `scrape_timeout`). Default 1 s.
    pub scrape_interval: Duration,
    /// How often rules are evaluated (Prometheus' `global.evaluation_interval`, vmalert's
    /// `-evaluationInterval`). Default 1 s.
    pub evaluation_interval: Duration,
    /// Interval forced on every rule group of the copied rule files. Default `Some(1 s)`;
    /// `None` keeps the files' own intervals.
    pub rule_interval: Option<Duration>,
    /// OpenMetrics texts (timestamps in seconds, ending in `# EOF`): history loaded before
    /// the rules run (Prometheus: `promtool tsdb create-blocks-from openmetrics` before the
    /// first start; VictoriaMetrics: imported after its start).
    pub backfill: Vec<String>,
    /// More command-line flags for the server.
    pub extra_args: Vec<String>,
    /// How long to wait for each process to be ready. Default 30 s.
    pub ready_timeout: Duration,
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
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

impl BackendConfig {
    pub fn new(scrape_configs: impl Into<String>) -> Self {
        BackendConfig { scrape_configs: scrape_configs.into(), ..Default::default() }
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

    /// The `scrape_configs:` document: `global:` with the scrape interval (and `extra_global`
    /// lines, indented), then `top` (lines such as `rule_files:`), then the targets.
    pub(crate) fn scrape_yaml(&self, extra_global: &str, top: &str) -> String {
        let mut yaml = String::new();
        let _ = writeln!(
            yaml,
            "global:\n  scrape_interval: {s}\n  scrape_timeout: {s}",
            s = duration_text(self.scrape_interval),
        );
        yaml.push_str(extra_global);
        yaml.push_str(top);
        if self.scrape_configs.trim().is_empty() {
            yaml.push_str("scrape_configs: []\n");
        } else {
            yaml.push_str("scrape_configs:\n");
            yaml.push_str(&self.scrape_configs);
            if !self.scrape_configs.ends_with('\n') {
                yaml.push('\n');
            }
        }
        yaml
    }
}

/// Copies `sources` into `dir` (emptied first), every group's `interval:` rewritten to
/// `interval` when set; returns the copies, in order.
pub(crate) fn copy_rule_files(
    sources: &[PathBuf],
    interval: Option<Duration>,
    dir: &Path,
) -> Result<Vec<PathBuf>> {
    if dir.exists() {
        fs::remove_dir_all(dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    fs::create_dir_all(dir)?;
    let mut copies = Vec::new();
    for (i, src) in sources.iter().enumerate() {
        let text = fs::read_to_string(src)
            .with_context(|| format!("reading rule file {}", src.display()))?;
        let text = match interval {
            Some(interval) => rewrite_rule_intervals(&text, interval),
            None => text,
        };
        let name = src
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "rules.yml".into());
        let dst = dir.join(format!("{i}-{name}"));
        fs::write(&dst, text)?;
        copies.push(dst);
    }
    Ok(copies)
}

/// Rewrites the value of every `interval:` key (a rule group's evaluation interval) to
/// `interval`, keeping indentation. Rule expressions are left alone.
pub fn rewrite_rule_intervals(text: &str, interval: Duration) -> String {
    let value = duration_text(interval);
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

/// A duration as Prometheus' configuration and the VictoriaMetrics flags write it: `1s`,
/// `250ms`.
pub fn duration_text(d: Duration) -> String {
    let ms = d.as_millis().max(1);
    if ms.is_multiple_of(1000) { format!("{}s", ms / 1000) } else { format!("{ms}ms") }
}

/// One server child process on a free loopback port, its stdout and stderr appended to a
/// log file (every start of it); ready when `GET <ready_path>` answers 2xx. Dropping it
/// kills the process.
pub(crate) struct Server {
    name: &'static str,
    bin: &'static str,
    args: Vec<String>,
    addr: SocketAddr,
    dir: PathBuf,
    log: PathBuf,
    ready_path: &'static str,
    child: Option<Child>,
}

impl Server {
    /// A server to run `bin` in `dir` (its working directory and log's), on a free port;
    /// `args(addr)` are its flags, the listen address among them. Not started yet.
    pub fn new(
        name: &'static str,
        bin: &'static str,
        dir: &Path,
        ready_path: &'static str,
        args: impl FnOnce(SocketAddr) -> Vec<String>,
    ) -> Result<Server> {
        let addr = free_loopback_addr()?;
        Ok(Server {
            name,
            bin,
            args: args(addr),
            addr,
            dir: dir.to_owned(),
            log: dir.join(format!("{name}.log")),
            ready_path,
            child: None,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The last `max_bytes` of the log.
    pub fn log_tail(&self, max_bytes: u64) -> String {
        tail(&self.log, max_bytes)
    }

    /// Starts the process and waits up to `timeout` until it is ready; fails at once, with
    /// its log, when it exits first, and kills it when it is not ready in time.
    pub async fn launch(&mut self, http: &reqwest::Client, timeout: Duration) -> Result<()> {
        let out = OpenOptions::new().create(true).append(true).open(&self.log)?;
        let child = Command::new(self.bin)
            .args(&self.args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("spawning {}", self.bin))?;
        self.child = Some(child);

        let deadline = wall_now() + timeout;
        let ready_url = format!("{}{}", self.url(), self.ready_path);
        loop {
            if let Some(child) = &mut self.child
                && let Some(status) = child.try_wait()?
            {
                self.child = None;
                bail!(
                    "{} exited during start-up ({status}); log tail:\n{}",
                    self.name,
                    self.log_tail(4096)
                );
            }
            if let Ok(resp) = http.get(&ready_url).send().await
                && resp.status().is_success()
            {
                return Ok(());
            }
            if wall_now() >= deadline {
                let log = self.log_tail(4096);
                let _ = self.stop();
                bail!(
                    "{} on {} not ready within {timeout:?}; log tail:\n{log}",
                    self.name,
                    self.addr
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether the process runs.
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Kills the process (SIGKILL) and waits for it to exit.
    pub fn stop(&mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            if child.try_wait()?.is_none() {
                child.kill().with_context(|| format!("killing {}", self.name))?;
            }
            child.wait().with_context(|| format!("waiting for {} to exit", self.name))?;
        }
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// One row of an instant-vector answer: the series' labels and its value.
pub type Sample = (BTreeMap<String, String>, f64);

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
        assert_eq!(duration_text(Duration::from_millis(250)), "250ms");
        assert_eq!(duration_text(Duration::from_secs(15)), "15s");
    }

    #[test]
    fn the_scrape_document_has_the_global_then_the_extra_lines_then_the_targets() {
        let config = BackendConfig {
            scrape_interval: Duration::from_millis(500),
            ..BackendConfig::new("- job_name: a\n  static_configs: []")
        };
        assert_eq!(
            config.scrape_yaml("  evaluation_interval: 1s\n", "rule_files:\n  - 'r.yml'\n"),
            "global:\n  scrape_interval: 500ms\n  scrape_timeout: 500ms\n  evaluation_interval: 1s\n\
             rule_files:\n  - 'r.yml'\nscrape_configs:\n- job_name: a\n  static_configs: []\n"
        );
        assert_eq!(
            BackendConfig::default().scrape_yaml("", ""),
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs: []\n"
        );
    }

    #[test]
    fn rule_files_are_copied_in_order_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.yml"), dir.path().join("b.yml"));
        fs::write(&a, "groups:\n  - name: a\n    interval: 1m\n").unwrap();
        fs::write(&b, "groups: []\n").unwrap();
        let into = dir.path().join("rules");
        let copies = copy_rule_files(&[a.clone(), b], Some(Duration::from_secs(2)), &into).unwrap();
        assert_eq!(copies, [into.join("0-a.yml"), into.join("1-b.yml")]);
        assert_eq!(
            fs::read_to_string(&copies[0]).unwrap(),
            "groups:\n  - name: a\n    interval: 2s\n"
        );
        // A second copy leaves nothing of the first set behind.
        let copies = copy_rule_files(&[a], None, &into).unwrap();
        assert_eq!(copies, [into.join("0-a.yml")]);
        assert_eq!(fs::read_dir(&into).unwrap().count(), 1);
        assert!(fs::read_to_string(&copies[0]).unwrap().contains("interval: 1m"));
    }
}
