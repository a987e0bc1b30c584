//! Starting and stopping the real waterline binaries for integration tests, on free
//! loopback ports, each with its own log file (printed when a start fails).
//!
//! The binaries must be built first (`cargo build --workspace --bins`; `make test` does
//! it): they are looked up next to the test executable, in `target/<profile>/`.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tonic::transport::Channel;
use waterline_api::v1::collector_service_client::CollectorServiceClient;
use waterline_api::v1::scorer_service_client::ScorerServiceClient;

use crate::prometheus::wait_until;

/// Path of a workspace binary built beside the running test.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let dir =
        exe.parent().and_then(Path::parent).expect("test binary lives in target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: build the binaries first with `cargo build --workspace --bins` (or run `make test`)",
        path.display()
    );
    path
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// One running waterline process.
pub struct Service {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
    pub grpc: SocketAddr,
    pub admin: SocketAddr,
    log: tempfile::NamedTempFile,
}

impl Service {
    /// Starts `program` with `--grpc-addr`/`--admin-addr` on fresh ports plus `args`.
    pub fn spawn(name: &str, args: &[String]) -> Result<Service> {
        let grpc = loopback(free_port());
        let admin = loopback(free_port());
        Service::spawn_on(name, grpc, admin, args)
    }

    pub fn spawn_on(
        name: &str,
        grpc: SocketAddr,
        admin: SocketAddr,
        args: &[String],
    ) -> Result<Service> {
        let mut service = Service {
            name: name.to_owned(),
            program: bin(name),
            args: args.to_vec(),
            child: None,
            grpc,
            admin,
            log: tempfile::NamedTempFile::new()?,
        };
        service.start()?;
        Ok(service)
    }

    fn start(&mut self) -> Result<()> {
        let log = File::options().append(true).open(self.log.path())?;
        let child = Command::new(&self.program)
            .arg("--grpc-addr")
            .arg(self.grpc.to_string())
            .arg("--admin-addr")
            .arg(self.admin.to_string())
            .args(&self.args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.program.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// Starts a collector with `args` and waits until it is ready.
    pub async fn collector(args: &[String]) -> Result<Service> {
        let service = Service::spawn("waterline-collector", args)?;
        service.wait_ready(Duration::from_secs(20)).await?;
        Ok(service)
    }

    /// Starts a scorer streaming from `collector` and waits for its first snapshot.
    pub async fn scorer(collector: SocketAddr, args: &[String]) -> Result<Service> {
        let mut all = vec!["--collector-url".to_string(), format!("http://{collector}")];
        all.extend_from_slice(args);
        let service = Service::spawn("waterline-scorer", &all)?;
        service.wait_ready(Duration::from_secs(20)).await?;
        Ok(service)
    }

    /// Waits for `/ready` on the admin port to answer 200.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let url = format!("http://{}/ready", self.admin);
        let outcome = wait_until(timeout, || {
            let url = url.clone();
            async move {
                let response = reqwest::get(&url).await?;
                if response.status().is_success() { Ok(()) } else { bail!("{}", response.status()) }
            }
        })
        .await;
        outcome
            .with_context(|| format!("{} never became ready; log:\n{}", self.name, self.log_text()))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// `GET /metrics` on the admin port.
    pub async fn metrics(&self) -> Result<String> {
        Ok(reqwest::get(format!("http://{}/metrics", self.admin)).await?.text().await?)
    }

    /// The value of one sample line of `/metrics` (e.g. `waterline_stale_nodes`).
    pub async fn metric_value(&self, series: &str) -> Result<f64> {
        let text = self.metrics().await?;
        text.lines()
            .find_map(|line| line.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
            .with_context(|| format!("{series} not in /metrics"))?
            .trim()
            .parse()
            .with_context(|| format!("{series} is not a number"))
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops and starts again on the same ports with the same arguments.
    pub fn restart(&mut self) -> Result<()> {
        self.stop();
        self.start()
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    pub async fn channel(&self) -> Result<Channel> {
        Ok(Channel::from_shared(self.url())?.connect().await?)
    }

    pub async fn scorer_client(&self) -> Result<ScorerServiceClient<Channel>> {
        Ok(ScorerServiceClient::new(self.channel().await?))
    }

    pub async fn collector_client(&self) -> Result<CollectorServiceClient<Channel>> {
        Ok(CollectorServiceClient::new(self.channel().await?))
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Writes `text` to a new file in `dir` and returns its path as a string argument.
pub fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write test file");
    path.display().to_string()
}
