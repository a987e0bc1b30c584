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

/// The named policies one scorer serves (`--policy NAME=PATH`, docs/operations.md#policies-per-profile)
/// beside its default one (`--policy PATH`, or the built-in default): a request names one
/// (`policy` on Evaluate, Filter, Score and a Session's Evaluate), the empty name is the
/// default. Index 0 is the default; the others follow in name order. Each is reloaded on
/// its own, like the default.
#[derive(Clone)]
pub struct Policies {
    /// (name, handle, file); the default's name is empty.
    entries: Arc<Vec<(String, PolicyHandle, Option<PathBuf>)>>,
}

/// A `--policy` value: `PATH` (the default policy) or `NAME=PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyArg {
    /// `None`: the default policy.
    pub name: Option<String>,
    pub path: PathBuf,
}

/// Parses one `--policy` value. A name is what an extender URL prefix and a plugin arg
/// carry: lowercase letters, digits and `-`, starting with a letter, at most 63 characters.
pub fn parse_policy_arg(value: &str) -> Result<PolicyArg, String> {
    let Some((name, path)) = value.split_once('=') else {
        return Ok(PolicyArg { name: None, path: PathBuf::from(value) });
    };
    check_policy_name(name)?;
    if path.is_empty() {
        return Err(format!("--policy {name}=: the path is empty"));
    }
    Ok(PolicyArg { name: Some(name.to_owned()), path: PathBuf::from(path) })
}

/// A policy name: `[a-z][a-z0-9-]*`, at most 63 characters (a DNS label, so it fits a URL
/// path segment, a plugin arg and a metric label unchanged).
pub fn check_policy_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "policy name '{name}' must be lowercase letters, digits and '-', start with a letter and have at most 63 characters"
        ))
    }
}

impl Policies {
    /// Loads every `--policy`: at most one without a name (the default; the built-in
    /// default policy when none), each name once.
    pub fn load(args: &[PolicyArg]) -> anyhow::Result<Policies> {
        let defaults: Vec<&PolicyArg> = args.iter().filter(|a| a.name.is_none()).collect();
        if defaults.len() > 1 {
            anyhow::bail!(
                "--policy: {} policies without a name; give one default and NAME=PATH for the others",
                defaults.len()
            );
        }
        let default_path = defaults.first().map(|a| a.path.clone());
        let mut entries =
            vec![(String::new(), load_or_default(default_path.as_deref())?, default_path)];
        let mut named: Vec<&PolicyArg> = args.iter().filter(|a| a.name.is_some()).collect();
        named.sort_by(|a, b| a.name.cmp(&b.name));
        for pair in named.windows(2) {
            if pair[0].name == pair[1].name {
                anyhow::bail!(
                    "--policy: '{}' is given twice",
                    pair[0].name.as_deref().unwrap_or("")
                );
            }
        }
        for arg in named {
            let name = arg.name.clone().unwrap_or_default();
            let policy = load(&arg.path).map_err(|e| anyhow::anyhow!("--policy {name}: {e}"))?;
            entries.push((name, PolicyHandle::new(policy), Some(arg.path.clone())));
        }
        Ok(Policies { entries: Arc::new(entries) })
    }

    /// One default policy and no named ones.
    pub fn single(handle: PolicyHandle) -> Policies {
        Policies { entries: Arc::new(vec![(String::new(), handle, None)]) }
    }

    /// The default and `named` policies, in memory (tests).
    pub fn from_policies(default: Policy, named: Vec<(String, Policy)>) -> Policies {
        let mut entries = vec![(String::new(), PolicyHandle::new(default), None)];
        let mut named = named;
        named.sort_by(|a, b| a.0.cmp(&b.0));
        entries.extend(named.into_iter().map(|(n, p)| (n, PolicyHandle::new(p), None)));
        Policies { entries: Arc::new(entries) }
    }

    /// How many policies (the default included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The default policy's handle.
    pub fn default_handle(&self) -> &PolicyHandle {
        &self.entries[0].1
    }

    /// The policy in force at `index` (0: the default).
    pub fn get(&self, index: usize) -> Arc<Policy> {
        self.entries[index].1.get()
    }

    /// The index of the policy a request names; the empty name is the default. An unknown
    /// name is an error naming the ones served.
    pub fn index_of(&self, name: &str) -> Result<usize, String> {
        if name.is_empty() {
            return Ok(0);
        }
        self.entries.iter().position(|(n, _, _)| n == name).ok_or_else(|| {
            let known: Vec<&str> = self.entries[1..].iter().map(|(n, _, _)| n.as_str()).collect();
            let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
            format!(
                "policy '{name}' is not served by this scorer (named policies: {known}; the empty name is the default)"
            )
        })
    }

    /// The name of policy `index` (empty for the default).
    pub fn name(&self, index: usize) -> &str {
        &self.entries[index].0
    }

    /// The names of the named policies, in index order (index 1 on).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries[1..].iter().map(|(n, _, _)| n.as_str())
    }

    /// Starts reloading every policy that came from a file.
    pub fn spawn_reload(&self, metrics: ReloadMetrics) {
        for (name, handle, path) in self.entries.iter() {
            if let Some(path) = path {
                let span =
                    tracing::info_span!("policy_reload", policy = %name, path = %path.display());
                let watched =
                    watch(path.clone(), handle.clone(), metrics.clone(), Duration::from_secs(2));
                tokio::spawn(watched.instrument(span));
            }
        }
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

    #[test]
    fn policy_args_and_names() {
        assert_eq!(
            parse_policy_arg("/etc/p.yaml").unwrap(),
            PolicyArg { name: None, path: "/etc/p.yaml".into() }
        );
        assert_eq!(
            parse_policy_arg("batch=/etc/batch.yaml").unwrap(),
            PolicyArg { name: Some("batch".into()), path: "/etc/batch.yaml".into() }
        );
        for bad in ["Batch=/p", "=/p", "1st=/p", "a_b=/p", "batch="] {
            assert!(parse_policy_arg(bad).is_err(), "{bad}");
        }
        let dir = tempfile::tempdir().unwrap();
        let (web, batch) = (dir.path().join("web.yaml"), dir.path().join("batch.yaml"));
        std::fs::write(&web, "curve: {kind: waterLevel, target: 30}\n").unwrap();
        std::fs::write(&batch, "curve: {kind: leastUsed}\n").unwrap();
        let arg =
            |name: &str, path: &Path| PolicyArg { name: Some(name.into()), path: path.into() };
        let policies = Policies::load(&[arg("web", &web), arg("batch", &batch)]).unwrap();
        assert_eq!(policies.names().collect::<Vec<_>>(), ["batch", "web"]);
        assert_eq!(policies.index_of(""), Ok(0));
        assert_eq!(policies.get(0).curve, Policy::default().curve, "no default file: built-in");
        assert_eq!(policies.get(policies.index_of("batch").unwrap()).curve, Curve::LeastUsed);
        let err = policies.index_of("bacth").unwrap_err();
        assert_eq!(
            err,
            "policy 'bacth' is not served by this scorer (named policies: batch, web; the empty name is the default)"
        );
        let twice = Policies::load(&[arg("web", &web), arg("web", &batch)]).err().unwrap();
        assert!(twice.to_string().contains("'web' is given twice"), "{twice}");
        let two_defaults =
            [PolicyArg { name: None, path: web.clone() }, PolicyArg { name: None, path: batch }];
        assert!(Policies::load(&two_defaults).is_err());
        std::fs::write(&web, "curve: {kind: nope}\n").unwrap();
        let bad = Policies::load(&[arg("web", &web)]).err().unwrap().to_string();
        assert!(bad.starts_with("--policy web: ") && bad.contains("web.yaml"), "{bad}");
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
