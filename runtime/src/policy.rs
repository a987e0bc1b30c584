//! Loading the policy file, and reloading it when it changes. A bad edit is logged and
//! counted; the running policy stays in force.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use waterline_core::Policy;
use waterline_core::policy::parse_policy;

/// Reads and validates a policy file; the error names the file, field and line.
pub fn load(path: &Path) -> anyhow::Result<Policy> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read policy {}: {e}", path.display()))?;
    parse_policy(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The policy from `--policy`, or the built-in default when the flag is absent.
pub fn load_or_default(path: Option<&Path>) -> anyhow::Result<PolicyHandle> {
    let policy = match path {
        Some(path) => load(path)?,
        None => Policy::default(),
    };
    Ok(PolicyHandle::new(policy))
}

/// The policy in force, swapped atomically on reload.
#[derive(Clone)]
pub struct PolicyHandle {
    current: Arc<RwLock<Arc<Policy>>>,
}

impl PolicyHandle {
    pub fn new(policy: Policy) -> Self {
        PolicyHandle { current: Arc::new(RwLock::new(Arc::new(policy))) }
    }

    pub fn get(&self) -> Arc<Policy> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, policy: Policy) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
    }
}

/// Counters for policy reloads.
#[derive(Clone, Default)]
pub struct ReloadMetrics {
    reloads: Counter,
    errors: Counter,
    valid: Gauge,
}

impl ReloadMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = ReloadMetrics::default();
        m.valid.set(1);
        registry.register("waterline_policy_reloads", "Policy reloads applied", m.reloads.clone());
        registry.register(
            "waterline_policy_reload_errors",
            "Policy edits rejected (the previous policy stays in force)",
            m.errors.clone(),
        );
        registry.register(
            "waterline_policy_file_valid",
            "1 when the policy file on disk is the one in force, 0 after a rejected edit",
            m.valid.clone(),
        );
        m
    }
}

/// Starts reloading `--policy` in the background, if one was given. Readers see a new
/// policy on their next `PolicyHandle::get`.
pub fn spawn_reload(path: Option<PathBuf>, handle: PolicyHandle, metrics: ReloadMetrics) {
    if let Some(path) = path {
        tokio::spawn(watch(path, handle, metrics, Duration::from_secs(2)));
    }
}

/// Polls `path` every `every` and swaps in the new policy when the file changes and parses.
/// Polling (not inotify) also sees ConfigMap updates, which replace a symlink. The content
/// is compared, not the modification time: an edit written in two steps within one clock
/// tick keeps its time, and a policy file is small enough to read every poll.
pub async fn watch(path: PathBuf, handle: PolicyHandle, metrics: ReloadMetrics, every: Duration) {
    let mut last_seen = std::fs::read_to_string(&path).ok();
    let mut ticker = tokio::time::interval(every);
    loop {
        ticker.tick().await;
        let text = std::fs::read_to_string(&path).ok();
        if text == last_seen {
            continue;
        }
        last_seen = text;
        match load(&path) {
            Ok(policy) => {
                handle.set(policy);
                metrics.reloads.inc();
                metrics.valid.set(1);
                tracing::info!(path = %path.display(), "policy reloaded");
            }
            Err(error) => {
                metrics.errors.inc();
                metrics.valid.set(0);
                tracing::error!(%error, "policy edit rejected; the previous policy stays in force");
            }
        }
    }
}
