//! `--spawn`: the servers under test, started with the integration tests' harness
//! ([`waterline_tests::procs`]) from `--bin-dir`, each logging to its own file in the log
//! directory; and their VmRSS and CPU time from `/proc`, which only the bench reads.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use waterline_tests::procs::{Launch, Service};

use crate::args::SpawnArgs;

/// How long a spawned server may take to answer `/ready` (5000 synthetic nodes on a busy box).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A server from `--bin-dir`, logging to `<log_dir>/<name>.log`.
pub fn launch(name: &str, spawn: &SpawnArgs, log_dir: &Path) -> Launch {
    Launch::new(name).bin_dir(&spawn.bin_dir).log_file(log_dir.join(format!("{name}.log")))
}

/// Resident memory and CPU time of a process.
#[derive(Clone, Copy, Debug)]
pub struct ProcStat {
    pub rss_kib: u64,
    /// utime + stime, seconds.
    pub cpu_secs: f64,
}

impl ProcStat {
    pub fn of(service: &Service) -> Result<ProcStat> {
        ProcStat::read(service.pid().with_context(|| format!("{} is stopped", service.name()))?)
    }

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

/// `--log-dir`, or a temporary directory named after this process.
pub fn log_dir(spawn: &SpawnArgs, kind: &str) -> Result<PathBuf> {
    let dir = match &spawn.log_dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("waterline-bench{kind}-{}", std::process::id())),
    };
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// A synthetic collector, a scorer streaming from it and optionally an extender in front.
pub struct Stack {
    pub extender: Option<Service>,
    pub scorer: Service,
    pub collector: Service,
    pub log_dir: PathBuf,
}

impl Stack {
    pub async fn start(spawn: &SpawnArgs, with_extender: bool) -> Result<Stack> {
        let log_dir = log_dir(spawn, "")?;
        let with_policy = |mut args: Vec<String>| {
            if let Some(policy) = &spawn.policy {
                args.push(format!("--policy={}", policy.display()));
            }
            args
        };
        let mut collector_args = vec![
            format!("--synthetic-nodes={}", spawn.cluster_nodes),
            format!("--synthetic-interval={}", spawn.synthetic_interval),
        ];
        collector_args.extend(spawn.collector_flags.iter().cloned());
        let collector =
            launch("waterline-collector", spawn, &log_dir).spawn(&with_policy(collector_args))?;
        collector.wait_ready(READY_TIMEOUT).await?;
        let scorer = launch("waterline-scorer", spawn, &log_dir)
            .spawn(&with_policy(vec![format!("--collector-url={}", collector.url())]))?;
        scorer.wait_ready(READY_TIMEOUT).await?;
        let extender = if with_extender {
            let extender = launch("waterline-extender", spawn, &log_dir)
                .addr_flag("--http-addr")
                .spawn(&with_policy(vec![format!("--scorer-url={}", scorer.url())]))?;
            extender.wait_ready(READY_TIMEOUT).await?;
            Some(extender)
        } else {
            None
        };
        Ok(Stack { extender, scorer, collector, log_dir })
    }

    pub fn procs(&self) -> impl Iterator<Item = &Service> {
        [Some(&self.collector), Some(&self.scorer), self.extender.as_ref()].into_iter().flatten()
    }
}
