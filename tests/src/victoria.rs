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
//! It takes the configuration Prometheus takes ([`BackendConfig`]) and implements the same
//! [`MetricsBackend`] trait, so a test written against the trait runs on either store;
//! [`VictoriaOptions`] holds the two knobs only this backend has.
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
//!     BackendConfig::new(exporter.scrape_configs())
//!         .rule_file(repo_path("deploy/prometheus/rules.yml"))
//!         .backfill(history),
//! ).await?;
//! let rows = vm.query("waterline:node_cpu_usage:avg5m").await?;
//! ```

use std::fmt::Write as _;
use std::fs;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};

use crate::backend::{
    BackendConfig, MetricsBackend, Sample, Server, copy_rule_files, duration_text, instant_query,
};

/// The single-node server (Debian package `victoria-metrics`).
pub const VICTORIA_METRICS_BIN: &str = "/usr/bin/victoria-metrics";
/// The rule evaluator, from the same package.
pub const VMALERT_BIN: &str = "/usr/bin/vmalert";

/// What only VictoriaMetrics is started with, besides the [`BackendConfig`].
#[derive(Clone, Debug)]
pub struct VictoriaOptions {
    /// More flags for vmalert.
    pub vmalert_args: Vec<String>,
    /// How often `/internal/force_flush` is called while the server runs (see the module
    /// doc). Default `Some(500 ms)`; `None`: never, VictoriaMetrics' own timing.
    pub flush_every: Option<Duration>,
}

impl Default for VictoriaOptions {
    fn default() -> Self {
        VictoriaOptions { vmalert_args: Vec::new(), flush_every: Some(Duration::from_millis(500)) }
    }
}

/// A running VictoriaMetrics server, and vmalert when rule files were given. Dropping it
/// kills both and removes the directory.
pub struct VictoriaMetrics {
    // Declared first so the processes die before their directory goes.
    server: Server,
    vmalert: Option<Server>,
    flusher: Option<tokio::task::JoinHandle<()>>,
    dir: tempfile::TempDir,
    config: BackendConfig,
    options: VictoriaOptions,
    http: reqwest::Client,
}

impl VictoriaMetrics {
    /// Writes the scrape configuration, starts the server, imports the history, starts
    /// vmalert on the rule files, and waits until each is healthy; with this backend's own
    /// options ([`MetricsBackend::start`] takes the defaults).
    pub async fn start_with(
        config: BackendConfig,
        options: VictoriaOptions,
    ) -> Result<VictoriaMetrics> {
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
            // No evaluation_interval and no rule_files here: vmalert evaluates the rules,
            // and the scrape config's parser refuses keys it does not know.
            fs::write(&path, config.scrape_yaml("", ""))?;
            args.push(format!("-promscrape.config={}", path.display()));
        }
        args.extend(config.extra_args.iter().cloned());
        let server =
            Server::new("victoria-metrics", VICTORIA_METRICS_BIN, dir.path(), "/health", |addr| {
                [vec![format!("-httpListenAddr={addr}")], args].concat()
            })?;
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
        let mut vm =
            VictoriaMetrics { server, vmalert: None, flusher: None, dir, config, options, http };
        vm.launch_server().await?;

        for text in &vm.config.backfill {
            vm.import_openmetrics(text).await?;
        }

        if !vm.config.rule_files.is_empty() {
            let rules = vm.dir.path().join("rules");
            copy_rule_files(&vm.config.rule_files, vm.config.rule_interval, &rules)?;
            let url = vm.url();
            let mut vmalert_args = vec![
                // Every file of the directory, so reload_rules may change how many there are.
                format!("-rule={}/*", rules.display()),
                format!("-datasource.url={url}"),
                format!("-remoteWrite.url={url}"),
                // The default 5 s would hold every recorded sample back that long.
                "-remoteWrite.flushInterval=200ms".to_string(),
                format!("-evaluationInterval={}", duration_text(vm.config.evaluation_interval)),
                "-loggerLevel=INFO".to_string(),
            ];
            vmalert_args.extend(vm.options.vmalert_args.iter().cloned());
            let mut vmalert =
                Server::new("vmalert", VMALERT_BIN, vm.dir.path(), "/health", |addr| {
                    [vec![format!("-httpListenAddr={addr}")], vmalert_args].concat()
                })?;
            vmalert.launch(&vm.http, vm.config.ready_timeout).await?;
            vm.vmalert = Some(vmalert);
        }
        Ok(vm)
    }

    /// Starts the server, waits until it is healthy, and starts the flushing task.
    async fn launch_server(&mut self) -> Result<()> {
        self.server.launch(&self.http, self.config.ready_timeout).await?;
        self.flusher = self.options.flush_every.map(|every| {
            let (http, url) = (self.http.clone(), format!("{}/internal/force_flush", self.url()));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let _ = http.get(&url).send().await;
                }
            })
        });
        Ok(())
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// vmalert's `http://127.0.0.1:<port>`, when it runs.
    pub fn vmalert_url(&self) -> Option<String> {
        self.vmalert.as_ref().map(Server::url)
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
}

impl MetricsBackend for VictoriaMetrics {
    const NAME: &'static str = "victoria-metrics";

    fn start(config: BackendConfig) -> impl Future<Output = Result<Self>> + Send {
        VictoriaMetrics::start_with(config, VictoriaOptions::default())
    }

    /// `http://127.0.0.1:<port>`: the Prometheus-compatible API (`/api/v1/query`) is at the
    /// root of a single-node server.
    fn url(&self) -> String {
        self.server.url()
    }

    /// `-storageDataPath`.
    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The last `max_bytes` of the server's log and of vmalert's.
    fn log_tail(&self, max_bytes: u64) -> String {
        let mut out = format!("--- victoria-metrics ---\n{}", self.server.log_tail(max_bytes));
        if let Some(vmalert) = &self.vmalert {
            let _ = write!(out, "\n--- vmalert ---\n{}", vmalert.log_tail(max_bytes));
        }
        out
    }

    /// Whether the server and vmalert (when started) are both running.
    fn is_running(&mut self) -> bool {
        self.server.is_running() && self.vmalert.as_mut().is_none_or(Server::is_running)
    }

    /// Kills vmalert and the server (SIGKILL), vmalert first so that it does not log
    /// failed remote writes, and ends the flushing task. The data directory stays.
    fn stop(&mut self) -> Result<()> {
        if let Some(vmalert) = &mut self.vmalert {
            vmalert.stop()?;
        }
        if let Some(flusher) = self.flusher.take() {
            flusher.abort();
        }
        self.server.stop()
    }

    /// Stops what runs, then starts the server and vmalert again on the same ports and
    /// data directory (the history imported at the start is in it) and waits until both
    /// are healthy.
    async fn restart(&mut self) -> Result<()> {
        self.stop()?;
        self.launch_server().await?;
        if let Some(vmalert) = &mut self.vmalert {
            vmalert.launch(&self.http, self.config.ready_timeout).await?;
        }
        Ok(())
    }

    /// Replaces vmalert's rule files (copied and rewritten as at the start) and asks it to
    /// re-read them (`/-/reload`, which only signals: the reload happens in the background).
    /// Needs a VictoriaMetrics started with rule files, since only then does vmalert run.
    async fn reload_rules(&mut self, rule_files: &[PathBuf]) -> Result<()> {
        let Some(vmalert) = &self.vmalert else {
            bail!("no vmalert runs: start VictoriaMetrics with rule files to reload them");
        };
        copy_rule_files(rule_files, self.config.rule_interval, &self.dir.path().join("rules"))?;
        self.config.rule_files = rule_files.to_vec();
        let resp = self.http.get(format!("{}/-/reload", vmalert.url())).send().await?;
        ensure!(resp.status().is_success(), "vmalert /-/reload: HTTP {}", resp.status());
        Ok(())
    }

    /// Instant query at the server's "now".
    async fn query(&self, query: &str) -> Result<Vec<Sample>> {
        instant_query(&self.http, &self.url(), query, None).await
    }
}

impl Drop for VictoriaMetrics {
    fn drop(&mut self) {
        let _ = self.stop();
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
    }
}
