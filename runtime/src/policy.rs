//! Loading the policy file, and reloading it when it changes. A bad edit is logged and
//! counted; the running policy stays in force.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tracing::Instrument;
use waterline_core::Policy;
use waterline_core::policy::{PolicyError, metric_field_error, parse_policy};

/// Reads and validates a policy file; the error names the file, field and line. Every
/// query must parse as PromQL: a typo is an error here — at start-up, or a rejected reload
/// — not a metric whose query fails on every poll while its samples go stale.
pub fn load(path: &Path) -> anyhow::Result<Policy> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read policy {}: {e}", path.display()))?;
    parse_checked(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// `parse_policy`, then every metric's query through a PromQL parser.
pub fn parse_checked(text: &str) -> Result<Policy, PolicyError> {
    let policy = parse_policy(text)?;
    for (i, metric) in policy.metrics.iter().enumerate() {
        check_promql(&metric.query).map_err(|why| {
            let why = format!("metric '{}': {why}", metric.name);
            metric_field_error(text, i, "query", &why)
        })?;
    }
    Ok(policy)
}

/// The metric names `query` selects (`foo` of `rate(foo[5m])`, recording-rule names
/// included), in order of appearance, each once; an error when it is not PromQL.
pub fn selected_names(query: &str) -> Result<Vec<String>, String> {
    use promql_parser::parser::Expr;
    use promql_parser::util::{ExprVisitor, walk_expr};
    struct Names(Vec<String>);
    impl ExprVisitor for Names {
        type Error = String;
        fn pre_visit(&mut self, expr: &Expr) -> Result<bool, String> {
            let name = match expr {
                Expr::VectorSelector(vs) => vs.name.as_ref(),
                Expr::MatrixSelector(ms) => ms.vs.name.as_ref(),
                _ => None,
            };
            if let Some(name) = name.filter(|n| !self.0.contains(n)) {
                self.0.push(name.clone());
            }
            Ok(true)
        }
    }
    let expr = promql_parser::parser::parse(query)
        .map_err(|e| format!("not valid PromQL: {}", e.trim()))?;
    let mut names = Names(Vec::new());
    walk_expr(&mut names, &expr)?;
    Ok(names.0)
}

/// Whether `query` is PromQL (syntax only: the series it names may not exist yet).
pub fn check_promql(query: &str) -> Result<(), String> {
    promql_parser::parser::parse(query)
        .map(drop)
        .map_err(|e| format!("not valid PromQL: {}", e.trim()))
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
        let span = tracing::info_span!("policy_reload", path = %path.display());
        tokio::spawn(watch(path, handle, metrics, Duration::from_secs(2)).instrument(span));
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

    #[test]
    fn a_promql_typo_is_rejected_at_load_naming_the_metric_and_line() {
        let text = "metrics:\n  - {name: cpu, resource: cpu, query: 'up', period: 30s, weight: 1}\n  - name: mem\n    resource: memory\n    period: 30s\n    weight: 1\n    query: 'sum by (node (up)'\n";
        let err = parse_checked(text).unwrap_err().0;
        assert!(err.starts_with("metrics[1].query: metric 'mem': not valid PromQL"), "{err}");
        assert!(err.ends_with("(line 7)"), "{err}");
        // The same file through `load`, as collector and scorer read it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.yaml");
        std::fs::write(&path, text).unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("policy.yaml: invalid policy: metrics[1].query"), "{err}");
        assert!(load_or_default(Some(&path)).is_err());
        // The default policy's and the shipped rules' names parse.
        assert!(parse_checked("").is_ok());
        assert!(check_promql("100 - waterline:node_cpu_usage:avg5m").is_ok());
        assert!(check_promql("rate(x[5m]").is_err());
        assert_eq!(
            selected_names("100 * sum(rate(a:b:c[5m])) / sum(avg_over_time(d[1m])) + a:b:c")
                .unwrap(),
            vec!["a:b:c".to_string(), "d".to_string()]
        );
        // Syntax only: an expression Prometheus refuses at evaluation still loads (the
        // dashboard test relies on one to provoke query failures).
        assert!(check_promql(r#"label_replace(vector(1), "a", "$1", "b", "(")"#).is_ok());
    }

    /// A PromQL typo in a reload is rejected like any bad edit.
    #[tokio::test]
    async fn a_reload_with_a_promql_typo_keeps_the_policy_in_force() {
        let w = watched().await;
        let typo = "metrics:\n  - {name: c, resource: cpu, query: 'rate(x[5m]', period: 30s, weight: 1}\ncurve: {kind: waterLevel, target: 55}\n";
        std::fs::write(&w.path, typo).unwrap();
        wait_for(|| w.metrics.errors.get() > 0).await;
        assert_eq!(w.metrics.errors.get(), 1, "the typo was not seen");
        assert_eq!(target(&w.handle), 30.0, "a policy with a PromQL typo replaced the good one");
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
