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

use std::fs;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};

use crate::backend::{BackendConfig, MetricsBackend, Server, copy_rule_files, duration_text};
pub use crate::backend::{Sample, instant_query, rewrite_rule_intervals};
use crate::exporter::wall_now;

/// The Prometheus server binary (Debian package `prometheus`).
pub const PROMETHEUS_BIN: &str = "/usr/bin/prometheus";
/// promtool, from the same package.
pub const PROMTOOL_BIN: &str = "/usr/bin/promtool";

/// What to run Prometheus with: the configuration every backend takes, used as it is.
pub type PrometheusConfig = BackendConfig;

/// A running (or stopped, until [`Prometheus::restart`]) Prometheus server. Dropping it kills
/// the process and removes its directory.
pub struct Prometheus {
    // Declared first so the process dies before its directory goes.
    server: Server,
    dir: tempfile::TempDir,
    config: BackendConfig,
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
        write_config(dir.path(), &config, &config.rule_files)?;
        for text in &config.backfill {
            backfill(&data_dir, text).await?;
        }

        let config_path = dir.path().join("prometheus.yml");
        let server = Server::new("prometheus", PROMETHEUS_BIN, dir.path(), "/-/ready", |addr| {
            let mut args = vec![
                format!("--config.file={}", config_path.display()),
                format!("--storage.tsdb.path={}", data_dir.display()),
                format!("--web.listen-address={addr}"),
                // /-/reload (reload_rules).
                "--web.enable-lifecycle".to_string(),
                "--web.enable-admin-api".to_string(),
                "--storage.tsdb.retention.time=30d".to_string(),
                "--log.level=info".to_string(),
            ];
            args.extend(config.extra_args.iter().cloned());
            args
        })?;
        let mut prom = Prometheus {
            server,
            dir,
            ready_timeout: config.ready_timeout,
            config,
            http: reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?,
        };
        prom.server.launch(&prom.http, prom.ready_timeout).await?;
        Ok(prom)
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        self.server.url()
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
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
        self.server.log_path().to_owned()
    }

    /// The last `max_bytes` of the server's log.
    pub fn log_tail(&self, max_bytes: u64) -> String {
        self.server.log_tail(max_bytes)
    }

    /// Whether the child process is running.
    pub fn is_running(&mut self) -> bool {
        self.server.is_running()
    }

    /// Kills the server (SIGKILL, like a crash or an OOM kill) and waits for it to exit.
    /// The data directory stays; [`Prometheus::restart`] brings it back.
    pub fn stop(&mut self) -> Result<()> {
        self.server.stop()
    }

    /// Stops the server if it runs, then starts it again on the same port and data directory
    /// and waits until it is ready.
    pub async fn restart(&mut self) -> Result<()> {
        self.server.stop()?;
        self.server.launch(&self.http, self.ready_timeout).await
    }

    /// Replaces the rule files (copied and rewritten as at the start, `prometheus.yml`
    /// rewritten to list them) and reloads the configuration through `/-/reload`, which
    /// answers once the new rules are loaded, or with the reason they are not.
    pub async fn reload_rules(&mut self, rule_files: &[PathBuf]) -> Result<()> {
        write_config(self.dir.path(), &self.config, rule_files)?;
        self.config.rule_files = rule_files.to_vec();
        let resp = self.http.post(format!("{}/-/reload", self.url())).send().await?;
        let status = resp.status();
        if !status.is_success() {
            bail!("prometheus /-/reload: HTTP {status}: {}", resp.text().await.unwrap_or_default());
        }
        Ok(())
    }

    /// Instant query at the server's "now".
    pub async fn query(&self, promql: &str) -> Result<Vec<Sample>> {
        instant_query(&self.http, &self.url(), promql, None).await
    }

    /// Instant query at `time`.
    pub async fn query_at(&self, promql: &str, time: SystemTime) -> Result<Vec<Sample>> {
        let t = time
            .duration_since(UNIX_EPOCH)
            .map_err(|_| anyhow!("time before the epoch"))?
            .as_secs_f64();
        instant_query(&self.http, &self.url(), promql, Some(format!("{t:.3}"))).await
    }
}

impl MetricsBackend for Prometheus {
    const NAME: &'static str = "prometheus";

    fn start(config: BackendConfig) -> impl Future<Output = Result<Self>> + Send {
        Prometheus::start(config)
    }
    fn url(&self) -> String {
        Prometheus::url(self)
    }
    fn data_dir(&self) -> PathBuf {
        Prometheus::data_dir(self)
    }
    fn log_tail(&self, max_bytes: u64) -> String {
        Prometheus::log_tail(self, max_bytes)
    }
    fn is_running(&mut self) -> bool {
        Prometheus::is_running(self)
    }
    fn stop(&mut self) -> Result<()> {
        Prometheus::stop(self)
    }
    fn restart(&mut self) -> impl Future<Output = Result<()>> + Send {
        Prometheus::restart(self)
    }
    fn reload_rules(&mut self, rule_files: &[PathBuf]) -> impl Future<Output = Result<()>> + Send {
        Prometheus::reload_rules(self, rule_files)
    }
    fn query(&self, promql: &str) -> impl Future<Output = Result<Vec<Sample>>> + Send {
        Prometheus::query(self, promql)
    }
}

/// Copies `rule_files` into `dir/rules` and writes `dir/prometheus.yml` listing the copies;
/// `promtool check config` must pass it (rule files included).
fn write_config(dir: &Path, config: &BackendConfig, rule_files: &[PathBuf]) -> Result<()> {
    let copies = copy_rule_files(rule_files, config.rule_interval, &dir.join("rules"))?;
    let mut top = String::new();
    if !copies.is_empty() {
        top.push_str("rule_files:\n");
        for p in &copies {
            top.push_str(&format!("  - '{}'\n", p.display()));
        }
    }
    let evaluation =
        format!("  evaluation_interval: {}\n", duration_text(config.evaluation_interval));
    let config_path = dir.join("prometheus.yml");
    fs::write(&config_path, config.scrape_yaml(&evaluation, &top))?;
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
    Ok(())
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
        command.arg(format!("--max-block-duration={}", duration_text(d)));
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
