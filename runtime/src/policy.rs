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

#[cfg(test)]
mod tests {
    use std::fs::File;

    use waterline_core::policy::Curve;

    use super::*;

    fn target(handle: &PolicyHandle) -> f64 {
        match handle.get().curve {
            Curve::WaterLevel { target } => target,
            ref other => panic!("unexpected curve {other:?}"),
        }
    }

    /// A policy file with a water level of 30 and a watcher polling it every 5 ms.
    struct Watched {
        _dir: tempfile::TempDir,
        path: PathBuf,
        handle: PolicyHandle,
        metrics: ReloadMetrics,
    }

    async fn watched() -> Watched {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.yaml");
        std::fs::write(&path, "curve: {kind: waterLevel, target: 30}\n").unwrap();
        let handle = PolicyHandle::new(load(&path).unwrap());
        let metrics = ReloadMetrics::default();
        let every = Duration::from_millis(5);
        tokio::spawn(watch(path.clone(), handle.clone(), metrics.clone(), every));
        // The watcher reads the file it starts from when it first runs.
        tokio::time::sleep(Duration::from_millis(20)).await;
        Watched { _dir: dir, path, handle, metrics }
    }

    /// Polls `done` for up to 10 s.
    async fn wait_for(done: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !done() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// An editor that truncates and then writes within one clock tick leaves the file's
    /// modification time as it was; the new content must still be picked up.
    #[tokio::test]
    async fn an_edit_that_keeps_the_modification_time_is_reloaded() {
        let w = watched().await;
        let stamp = std::fs::metadata(&w.path).unwrap().modified().unwrap();
        std::fs::write(&w.path, "curve: {kind: waterLevel, target: 55}\n").unwrap();
        File::options().write(true).open(&w.path).unwrap().set_modified(stamp).unwrap();
        assert_eq!(std::fs::metadata(&w.path).unwrap().modified().unwrap(), stamp);

        wait_for(|| target(&w.handle) == 55.0).await;
        assert_eq!(target(&w.handle), 55.0, "the edit was not reloaded");
        assert_eq!(w.metrics.reloads.get(), 1);
    }

    /// A half-written file is rejected and the policy in force stays; the finished edit
    /// then replaces it.
    #[tokio::test]
    async fn a_half_written_edit_is_rejected_then_the_whole_one_applies() {
        let w = watched().await;
        std::fs::write(&w.path, "curve: {kind: waterLevel, tar").unwrap();
        wait_for(|| w.metrics.errors.get() > 0).await;
        assert_eq!(w.metrics.errors.get(), 1, "the half-written file was not seen");
        assert_eq!(target(&w.handle), 30.0, "a rejected edit replaced the policy");
        assert_eq!(w.metrics.valid.get(), 0);

        std::fs::write(&w.path, "curve: {kind: waterLevel, target: 55}\n").unwrap();
        wait_for(|| target(&w.handle) == 55.0).await;
        assert_eq!(target(&w.handle), 55.0);
        assert_eq!(w.metrics.valid.get(), 1);
    }
}
