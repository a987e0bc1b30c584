//! `--spawn`: the servers under test as child processes on free loopback ports, each logging
//! to its own file, killed when dropped; and their VmRSS and CPU time from `/proc`.

use std::fs::{self, File};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::args::SpawnArgs;

pub fn free_addr() -> Result<SocketAddr> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// One spawned server.
pub struct Proc {
    pub name: &'static str,
    child: Child,
    /// gRPC (collector, scorer) or HTTP (extender) address.
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    pub log: PathBuf,
}

impl Proc {
    pub fn start(
        name: &'static str,
        spawn: &SpawnArgs,
        log_dir: &Path,
        addr_flag: &str,
        args: &[String],
    ) -> Result<Proc> {
        let program = spawn.bin_dir.join(name);
        if !program.exists() {
            bail!("{} not found: build it with `cargo build --release --bins`", program.display());
        }
        let (addr, admin) = (free_addr()?, free_addr()?);
        let log = log_dir.join(format!("{name}.log"));
        let out = File::create(&log)?;
        let child = Command::new(&program)
            .arg(format!("{addr_flag}={addr}"))
            .arg(format!("--admin-addr={admin}"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        Ok(Proc { name, child, addr, admin, log })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn admin_url(&self) -> String {
        format!("http://{}", self.admin)
    }

    /// Waits for `/ready` on the admin port.
    async fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let http = reqwest::Client::new();
        let url = format!("{}/ready", self.admin_url());
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                bail!("{} exited ({status}); log {}", self.name, self.log.display());
            }
            if let Ok(answer) = http.get(&url).send().await
                && answer.status().is_success()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("{} not ready after {timeout:?}; log {}", self.name, self.log.display())
    }

    /// Fails (naming the log) when the process has exited.
    pub fn check_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{} exited ({status}); log {}", self.name, self.log.display());
        }
        Ok(())
    }

    pub fn stat(&self) -> Result<ProcStat> {
        ProcStat::read(self.pid())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Resident memory and CPU time of a process.
#[derive(Clone, Copy, Debug)]
pub struct ProcStat {
    pub rss_kib: u64,
    /// utime + stime, seconds.
    pub cpu_secs: f64,
}

impl ProcStat {
    pub fn read(pid: u32) -> Result<ProcStat> {
        let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
        let rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .context("no VmRSS in /proc/<pid>/status")?;
        let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
        let rest = &stat[stat.rfind(')').context("malformed /proc/<pid>/stat")? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
        Ok(ProcStat { rss_kib, cpu_secs: ticks as f64 / clock_ticks() as f64 })
    }
}

fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

/// A synthetic collector, a scorer streaming from it and optionally an extender in front.
pub struct Stack {
    pub extender: Option<Proc>,
    pub scorer: Proc,
    pub collector: Proc,
    pub log_dir: PathBuf,
}

impl Stack {
    pub async fn start(spawn: &SpawnArgs, with_extender: bool) -> Result<Stack> {
        let log_dir = match &spawn.log_dir {
            Some(dir) => dir.clone(),
            None => std::env::temp_dir().join(format!("waterline-bench-{}", std::process::id())),
        };
        fs::create_dir_all(&log_dir)?;
        let mut collector = Proc::start(
            "waterline-collector",
            spawn,
            &log_dir,
            "--grpc-addr",
            &[
                format!("--synthetic-nodes={}", spawn.cluster_nodes),
                format!("--synthetic-interval={}", spawn.synthetic_interval),
            ],
        )?;
        collector.wait_ready(Duration::from_secs(60)).await?;
        let mut scorer = Proc::start(
            "waterline-scorer",
            spawn,
            &log_dir,
            "--grpc-addr",
            &[format!("--collector-url={}", collector.url())],
        )?;
        scorer.wait_ready(Duration::from_secs(60)).await?;
        let extender = if with_extender {
            let mut extender = Proc::start(
                "waterline-extender",
                spawn,
                &log_dir,
                "--http-addr",
                &[format!("--scorer-url={}", scorer.url())],
            )?;
            extender.wait_ready(Duration::from_secs(60)).await?;
            Some(extender)
        } else {
            None
        };
        Ok(Stack { extender, scorer, collector, log_dir })
    }

    pub fn procs(&self) -> impl Iterator<Item = &Proc> {
        [Some(&self.collector), Some(&self.scorer), self.extender.as_ref()].into_iter().flatten()
    }
}
