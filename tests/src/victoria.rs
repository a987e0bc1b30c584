//! Runs a real VictoriaMetrics single-node server (Debian's `/usr/bin/victoria-metrics`
//! 1.79, installed by `scripts/deps/victoria-metrics.sh`) as a plain child process on a free
//! loopback port with its own temporary data directory, and — when rule files are given —
//! the package's `vmalert` next to it, evaluating them against VictoriaMetrics and writing
//! the recorded series back into it. No Prometheus is involved:
//!
//! - VictoriaMetrics scrapes the targets itself (`-promscrape.config`, the same
//!   `scrape_configs:` entries Prometheus takes, e.g.
//!   [`crate::exporter::FakeExporter::scrape_configs`]);
//! - history (the OpenMetrics text of [`crate::exporter::openmetrics_history`]) is imported
//!   through `/api/v1/import/prometheus` after the start, timestamps turned into
//!   milliseconds; VictoriaMetrics takes samples in any order, so nothing like promtool's
//!   "before the first start" rule applies;
//! - vmalert runs the rule files with `-datasource.url` and `-remoteWrite.url` both at the
//!   server, every group's `interval:` rewritten (1 s by default).
//!
//! Fresh samples are visible at once: `-search.latencyOffset=0s` (the default 30 s would move
//! every instant query at "now" 30 s into the past), `-search.disableCache`, and a task that
//! calls `/internal/force_flush` every [`VictoriaConfig::flush_every`]. Without that task a
//! *new* series (a node's first scrape, a rule's first recorded sample) stays invisible to
//! queries for ~10 s in 1.79 — its index entries wait for the periodic flush, and 1.79 has
//! no flag for the interval — so every start would cost ~20 s (raw series, then recorded
//! ones). Samples of known series are visible within ~1 s either way.
//!
//! ```ignore
//! let exporter = FakeExporter::start(nodes).await?;
//! let vm = VictoriaMetrics::start(
//!     VictoriaConfig::new(exporter.scrape_configs())
//!         .rule_file(repo_path("deploy/prometheus/rules.yml"))
//!         .backfill(history),
//! ).await?;
//! let rows = vm.query("waterline:node_cpu_usage:avg5m").await?;
//! ```

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};

use crate::exporter::wall_now;
use crate::prometheus::{Sample, instant_query, rewrite_rule_intervals};

/// The single-node server (Debian package `victoria-metrics`).
pub const VICTORIA_METRICS_BIN: &str = "/usr/bin/victoria-metrics";
/// The rule evaluator, from the same package.
pub const VMALERT_BIN: &str = "/usr/bin/vmalert";

/// What to run VictoriaMetrics (and vmalert) with.
#[derive(Clone, Debug)]
pub struct VictoriaConfig {
    /// Entries of `scrape_configs:` as a YAML block sequence at column 0; empty: no scraping.
    pub scrape_configs: String,
    /// Rule files for vmalert; each is copied into the temporary directory, with every
    /// group's `interval:` rewritten to `rule_interval` when that is set. Empty: no vmalert.
    pub rule_files: Vec<PathBuf>,
    /// `global.scrape_interval` (and `scrape_timeout`) of the scrape config. Default 1 s.
    pub scrape_interval: Duration,
    /// vmalert's `-evaluationInterval`, and the interval forced on every rule group when
    /// `rule_interval` is set. Default 1 s.
    pub evaluation_interval: Duration,
    /// Interval forced on every group of the copied rule files. Default `Some(1 s)`.
    pub rule_interval: Option<Duration>,
    /// OpenMetrics texts (timestamps in seconds, ending in `# EOF`) imported after the start,
    /// before vmalert starts.
    pub backfill: Vec<String>,
    /// More flags for the server.
    pub extra_args: Vec<String>,
    /// More flags for vmalert.
    pub vmalert_args: Vec<String>,
    /// How long to wait for each process's `/health`. Default 30 s.
    pub ready_timeout: Duration,
    /// How often `/internal/force_flush` is called while the server runs (see the module
    /// doc). Default `Some(500 ms)`; `None`: never, VictoriaMetrics' own timing.
    pub flush_every: Option<Duration>,
}

impl Default for VictoriaConfig {
    fn default() -> Self {
        VictoriaConfig {
            scrape_configs: String::new(),
            rule_files: Vec::new(),
            scrape_interval: Duration::from_secs(1),
            evaluation_interval: Duration::from_secs(1),
            rule_interval: Some(Duration::from_secs(1)),
            backfill: Vec::new(),
            extra_args: Vec::new(),
            vmalert_args: Vec::new(),
            ready_timeout: Duration::from_secs(30),
            flush_every: Some(Duration::from_millis(500)),
        }
    }
}

impl VictoriaConfig {
    pub fn new(scrape_configs: impl Into<String>) -> Self {
        VictoriaConfig { scrape_configs: scrape_configs.into(), ..Default::default() }
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

    pub fn vmalert_arg(mut self, arg: impl Into<String>) -> Self {
        self.vmalert_args.push(arg.into());
        self
    }
}

/// One child process with its log file.
struct Proc {
    name: &'static str,
    child: Option<Child>,
    addr: SocketAddr,
    log: PathBuf,
}

impl Proc {
    fn spawn(name: &'static str, bin: &str, args: &[String], dir: &Path) -> Result<Proc> {
        let addr = free_loopback_addr()?;
        let log = dir.join(format!("{name}.log"));
        let out = OpenOptions::new().create(true).append(true).open(&log)?;
        let child = Command::new(bin)
            .arg(format!("-httpListenAddr={addr}"))
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("spawning {bin}"))?;
        Ok(Proc { name, child: Some(child), addr, log })
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Waits for `GET /health` to answer 200; fails at once when the process exits first.
    async fn wait_healthy(&mut self, http: &reqwest::Client, timeout: Duration) -> Result<()> {
        let deadline = wall_now() + timeout;
        let url = format!("{}/health", self.url());
        loop {
            if let Some(child) = &mut self.child
                && let Some(status) = child.try_wait()?
            {
                self.child = None;
                bail!(
                    "{} exited during start-up ({status}); log tail:\n{}",
                    self.name,
                    tail(&self.log, 4096)
                );
            }
            if let Ok(resp) = http.get(&url).send().await
                && resp.status().is_success()
            {
                return Ok(());
            }
            if wall_now() >= deadline {
                let log = tail(&self.log, 4096);
                self.stop();
                bail!(
                    "{} on {} not healthy within {timeout:?}; log tail:\n{log}",
                    self.name,
                    self.addr
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A running VictoriaMetrics server, and vmalert when rule files were given. Dropping it
/// kills both and removes the directory.
pub struct VictoriaMetrics {
    // Declared first so the processes die before their directory goes.
    server: Proc,
    vmalert: Option<Proc>,
    flusher: Option<tokio::task::JoinHandle<()>>,
    dir: tempfile::TempDir,
    http: reqwest::Client,
}

impl VictoriaMetrics {
    /// Writes the scrape configuration, starts the server, imports the history, starts
    /// vmalert on the rule files, and waits until each is healthy.
    pub async fn start(config: VictoriaConfig) -> Result<VictoriaMetrics> {
        let mut bins = vec![VICTORIA_METRICS_BIN];
        if !config.rule_files.is_empty() {
            bins.push(VMALERT_BIN);
        }
        for bin in bins {
            if !Path::new(bin).exists() {
                bail!(
                    "{bin} not found: run scripts/deps/victoria-metrics.sh (apt package victoria-metrics)"
                );
            }
        }
        let dir = tempfile::Builder::new().prefix("waterline-victoria-").tempdir()?;
        let data_dir = dir.path().join("data");
        fs::create_dir_all(&data_dir)?;

        let mut args = vec![
            format!("-storageDataPath={}", data_dir.display()),
            "-retentionPeriod=30d".to_string(),
            "-search.latencyOffset=0s".to_string(),
            "-search.disableCache".to_string(),
            "-loggerLevel=INFO".to_string(),
        ];
        if !config.scrape_configs.trim().is_empty() {
            let path = dir.path().join("promscrape.yml");
            fs::write(&path, render_scrape_config(&config))?;
            args.push(format!("-promscrape.config={}", path.display()));
        }
        args.extend(config.extra_args.iter().cloned());

        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
        let mut server = Proc::spawn("victoria-metrics", VICTORIA_METRICS_BIN, &args, dir.path())?;
        server.wait_healthy(&http, config.ready_timeout).await?;
        let flusher = config.flush_every.map(|every| {
            let (http, url) = (http.clone(), format!("{}/internal/force_flush", server.url()));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let _ = http.get(&url).send().await;
                }
            })
        });
        let mut vm = VictoriaMetrics { server, vmalert: None, flusher, dir, http };

        for text in &config.backfill {
            vm.import_openmetrics(text).await?;
        }

        if !config.rule_files.is_empty() {
            let mut vmalert_args = Vec::new();
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
                let dst = vm.dir.path().join(format!("rules-{i}-{name}"));
                fs::write(&dst, text)?;
                vmalert_args.push(format!("-rule={}", dst.display()));
            }
            let url = vm.url();
            vmalert_args.extend([
                format!("-datasource.url={url}"),
                format!("-remoteWrite.url={url}"),
                // The default 5 s would hold every recorded sample back that long.
                "-remoteWrite.flushInterval=200ms".to_string(),
                format!("-evaluationInterval={}", go_duration(config.evaluation_interval)),
                "-loggerLevel=INFO".to_string(),
            ]);
            vmalert_args.extend(config.vmalert_args.iter().cloned());
            let mut vmalert = Proc::spawn("vmalert", VMALERT_BIN, &vmalert_args, vm.dir.path())?;
            vmalert.wait_healthy(&vm.http, config.ready_timeout).await?;
            vm.vmalert = Some(vmalert);
        }
        Ok(vm)
    }

    /// `http://127.0.0.1:<port>`: the Prometheus-compatible API (`/api/v1/query`) is at the
    /// root of a single-node server.
    pub fn url(&self) -> String {
        self.server.url()
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr
    }

    /// vmalert's `http://127.0.0.1:<port>`, when it runs.
    pub fn vmalert_url(&self) -> Option<String> {
        self.vmalert.as_ref().map(Proc::url)
    }

    /// `-storageDataPath`.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The last `max_bytes` of the server's log and of vmalert's.
    pub fn log_tail(&self, max_bytes: u64) -> String {
        let mut out = format!("--- victoria-metrics ---\n{}", tail(&self.server.log, max_bytes));
        if let Some(vmalert) = &self.vmalert {
            let _ = write!(out, "\n--- vmalert ---\n{}", tail(&vmalert.log, max_bytes));
        }
        out
    }

    /// Whether the server and vmalert (when started) are both running.
    pub fn is_running(&mut self) -> bool {
        self.server.is_running() && self.vmalert.as_mut().is_none_or(Proc::is_running)
    }

    /// Kills vmalert and the server (SIGKILL), vmalert first so that it does not log
    /// failed remote writes, and ends the flushing task.
    pub fn stop(&mut self) {
        if let Some(vmalert) = &mut self.vmalert {
            vmalert.stop();
        }
        self.server.stop();
        if let Some(flusher) = self.flusher.take() {
            flusher.abort();
        }
    }

    /// Imports OpenMetrics text with timestamps in seconds (as
    /// [`crate::exporter::openmetrics_history`] writes it) through
    /// `/api/v1/import/prometheus`, which takes milliseconds, then forces a flush so the
    /// samples are searchable at once.
    pub async fn import_openmetrics(&self, openmetrics: &str) -> Result<()> {
        ensure!(
            openmetrics.trim_end().ends_with("# EOF"),
            "OpenMetrics input must end with `# EOF`"
        );
        let body = openmetrics_to_prometheus_ms(openmetrics)?;
        let resp = self
            .http
            .post(format!("{}/api/v1/import/prometheus", self.url()))
            .body(body)
            .send()
            .await
            .context("importing history into victoria-metrics")?;
        let status = resp.status();
        if !status.is_success() {
            bail!("import answered HTTP {status}: {}", resp.text().await.unwrap_or_default());
        }
        self.flush().await
    }

    /// `/internal/force_flush`: buffered samples become searchable now, not within ~1 s.
    pub async fn flush(&self) -> Result<()> {
        let resp = self.http.get(format!("{}/internal/force_flush", self.url())).send().await?;
        ensure!(resp.status().is_success(), "force_flush: HTTP {}", resp.status());
        Ok(())
    }

    /// Instant query at the server's "now".
    pub async fn query(&self, query: &str) -> Result<Vec<Sample>> {
        instant_query(&self.http, &self.url(), query, None).await
    }
}

impl Drop for VictoriaMetrics {
    fn drop(&mut self) {
        self.stop();
    }
}

/// OpenMetrics text with timestamps in seconds → Prometheus text with timestamps in
/// milliseconds (what `/api/v1/import/prometheus` reads). Comment lines (`# HELP`, `# TYPE`,
/// `# EOF`) are dropped; a sample line without a timestamp is kept as it is.
pub fn openmetrics_to_prometheus_ms(text: &str) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // `name{labels} value [timestamp]`: label values may hold spaces, so the fields are
        // counted after the closing brace (or after the name when there are no labels).
        let after_labels = match line.rfind('}') {
            Some(i) => i + 1,
            None => line.find(char::is_whitespace).unwrap_or(line.len()),
        };
        let fields: Vec<&str> = line[after_labels..].split_whitespace().collect();
        match fields.as_slice() {
            [_value, ts] => {
                let seconds: f64 =
                    ts.parse().with_context(|| format!("timestamp {ts:?} in {line:?}"))?;
                let head = &line[..line.len() - ts.len()];
                let _ = writeln!(out, "{}{}", head, (seconds * 1000.0).round() as i64);
            }
            [_value] => {
                out.push_str(line);
                out.push('\n');
            }
            _ => bail!("not a sample line: {line:?}"),
        }
    }
    Ok(out)
}

/// A Go duration: `1s`, `250ms`.
fn go_duration(d: Duration) -> String {
    let ms = d.as_millis().max(1);
    if ms.is_multiple_of(1000) { format!("{}s", ms / 1000) } else { format!("{ms}ms") }
}

fn render_scrape_config(config: &VictoriaConfig) -> String {
    let mut yaml = String::new();
    let _ = writeln!(
        yaml,
        "global:\n  scrape_interval: {s}\n  scrape_timeout: {s}\nscrape_configs:",
        s = go_duration(config.scrape_interval),
    );
    yaml.push_str(&config.scrape_configs);
    if !config.scrape_configs.ends_with('\n') {
        yaml.push('\n');
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_seconds_become_prometheus_milliseconds() {
        let text = "# HELP x X.\n# TYPE x counter\nx_total{a=\"b c\",d=\"e\"} 1.5 1800000000.250\ny 3\n# EOF\n";
        assert_eq!(
            openmetrics_to_prometheus_ms(text).unwrap(),
            "x_total{a=\"b c\",d=\"e\"} 1.5 1800000000250\ny 3\n"
        );
        assert!(openmetrics_to_prometheus_ms("x 1 2 3\n").is_err());
        assert_eq!(go_duration(Duration::from_millis(200)), "200ms");
    }
}
