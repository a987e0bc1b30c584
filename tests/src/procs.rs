//! Starting and stopping the real waterline binaries on free loopback ports, each with its
//! own log file (printed when a start fails): for the integration tests and for
//! `waterline-bench --spawn`.
//!
//! The binaries must be built first (`cargo build --workspace --bins`; `make test` does
//! it): they are looked up next to the test executable, in `target/<profile>/`, or in the
//! directory given to [`Launch::bin_dir`].

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tonic::transport::Channel;
use waterline_api::v1::collector_service_client::CollectorServiceClient;
use waterline_api::v1::scorer_service_client::ScorerServiceClient;

use crate::exporter::wall_now;

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

/// A loopback port that was free a moment ago, and never handed out before in this process:
/// two calls in a row can get the same port back from the kernel once the first listener is
/// closed, and a service given the same port for gRPC and admin fails to start (seen in CI:
/// the readiness probe reached the gRPC listener, "invalid HTTP version parsed").
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return port;
        }
    }
}

pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// How to start one binary. [`Service::spawn`] and [`Service::spawn_on`] use the defaults;
/// `waterline-bench` sets a binary directory, `--http-addr` for the extender and a kept log.
#[derive(Clone, Debug)]
pub struct Launch {
    name: String,
    bin_dir: Option<PathBuf>,
    addr_flag: &'static str,
    addr: SocketAddr,
    admin: SocketAddr,
    log_file: Option<PathBuf>,
}

impl Launch {
    /// `name` from beside the test executable ([`bin`]), `--grpc-addr` and `--admin-addr` on
    /// fresh loopback ports, output to a temporary file.
    pub fn new(name: &str) -> Launch {
        Launch {
            name: name.to_owned(),
            bin_dir: None,
            addr_flag: "--grpc-addr",
            addr: loopback(free_port()),
            admin: loopback(free_port()),
            log_file: None,
        }
    }

    /// Looks the program up in `dir` instead, failing (not panicking) when it is missing.
    pub fn bin_dir(mut self, dir: impl Into<PathBuf>) -> Launch {
        self.bin_dir = Some(dir.into());
        self
    }

    /// The flag that takes the main address: `--grpc-addr` (default) or, for the extender,
    /// `--http-addr`.
    pub fn addr_flag(mut self, flag: &'static str) -> Launch {
        self.addr_flag = flag;
        self
    }

    /// Listens on these addresses instead of fresh ports.
    pub fn on(mut self, addr: SocketAddr, admin: SocketAddr) -> Launch {
        self.addr = addr;
        self.admin = admin;
        self
    }

    /// Keeps stdout and stderr in `path` (truncated now, appended on restarts) instead of a
    /// temporary file removed on drop.
    pub fn log_file(mut self, path: impl Into<PathBuf>) -> Launch {
        self.log_file = Some(path.into());
        self
    }

    /// Starts the process with `args` after the address flags; does not wait for readiness.
    pub fn spawn(self, args: &[String]) -> Result<Service> {
        let program = match &self.bin_dir {
            None => bin(&self.name),
            Some(dir) => {
                let path = dir.join(&self.name);
                if !path.exists() {
                    bail!(
                        "{} not found: build the binaries first (`cargo build --bins`)",
                        path.display()
                    );
                }
                path
            }
        };
        let log = match self.log_file {
            None => Log::Temp(tempfile::NamedTempFile::new()?),
            Some(path) => {
                File::create(&path).with_context(|| format!("creating {}", path.display()))?;
                Log::Kept(path)
            }
        };
        let mut service = Service {
            name: self.name,
            program,
            addr_flag: self.addr_flag,
            args: args.to_vec(),
            child: Mutex::new(None),
            grpc: self.addr,
            admin: self.admin,
            log,
        };
        service.start()?;
        Ok(service)
    }
}

enum Log {
    Temp(tempfile::NamedTempFile),
    Kept(PathBuf),
}

impl Log {
    fn path(&self) -> &Path {
        match self {
            Log::Temp(file) => file.path(),
            Log::Kept(path) => path,
        }
    }
}

/// One running waterline process, killed when dropped.
pub struct Service {
    name: String,
    program: PathBuf,
    addr_flag: &'static str,
    args: Vec<String>,
    // A lock only so that `&self` methods (wait_ready, check_running) can poll the child;
    // never held across an `.await`.
    child: Mutex<Option<Child>>,
    /// The main address: gRPC, or HTTP for a process started with `--http-addr`.
    pub grpc: SocketAddr,
    pub admin: SocketAddr,
    log: Log,
}

impl Service {
    /// Starts `program` with `--grpc-addr`/`--admin-addr` on fresh ports plus `args`.
    pub fn spawn(name: &str, args: &[String]) -> Result<Service> {
        Launch::new(name).spawn(args)
    }

    pub fn spawn_on(
        name: &str,
        grpc: SocketAddr,
        admin: SocketAddr,
        args: &[String],
    ) -> Result<Service> {
        Launch::new(name).on(grpc, admin).spawn(args)
    }

    fn start(&mut self) -> Result<()> {
        let log = File::options().append(true).open(self.log.path())?;
        let child = Command::new(&self.program)
            .arg(self.addr_flag)
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
        *self.child.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(child);
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

    /// Waits for `/ready` on the admin port to answer 200; fails at once, with the log, when
    /// the process exits first.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let url = format!("{}/ready", self.admin_url());
        let deadline = wall_now() + timeout;
        loop {
            self.check_running()?;
            let outcome = async {
                let response = reqwest::get(&url).await?;
                if response.status().is_success() { Ok(()) } else { bail!("{}", response.status()) }
            }
            .await;
            match outcome {
                Ok(()) => return Ok(()),
                Err(error) if wall_now() >= deadline => {
                    return Err(error.context(format!(
                        "{} never became ready within {timeout:?}; log:\n{}",
                        self.name,
                        self.log_text()
                    )));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Fails, with the log, when the process has exited (or was stopped).
    pub fn check_running(&self) -> Result<()> {
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(running) = child.as_mut() else { bail!("{} is stopped", self.name) };
        if let Some(status) = running.try_wait()? {
            drop(child);
            bail!("{} exited ({status}); log:\n{}", self.name, self.log_text());
        }
        Ok(())
    }

    /// The binary's name, e.g. `waterline-collector`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner).as_ref().map(Child::id)
    }

    /// Where stdout and stderr go.
    pub fn log_path(&self) -> &Path {
        self.log.path()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// `GET /metrics` on the admin port.
    pub async fn metrics(&self) -> Result<String> {
        Ok(reqwest::get(format!("{}/metrics", self.admin_url())).await?.text().await?)
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
        if let Some(mut child) = self.child.get_mut().unwrap_or_else(PoisonError::into_inner).take()
        {
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

    /// `http://<admin address>`
    pub fn admin_url(&self) -> String {
        format!("http://{}", self.admin)
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
