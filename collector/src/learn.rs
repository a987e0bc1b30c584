//! The learner (docs/design.md#learned-estimate): every `estimator.learn.refresh` it asks
//! Prometheus the policy's four instant queries — each pod's usage quantile over the window
//! and its sample count, for cpu and memory, one query per answer for the whole cluster —
//! joins the answers with the pods the pod watch shows running ([`RunningPods`]), hands
//! them to core's one learning rule ([`waterline_core::learn::learn`]) and publishes the
//! table (`ClusterState::set_learned`), which streams it to every scorer.
//!
//! Prometheus keeps the history (the queries aggregate over the window), so a restarted
//! collector learns the same table at its first refresh. Queries that return no series
//! (the recording rules are not installed) turn learning off cleanly: the table is empty,
//! pods are priced by the factors, `waterline_learn_active` is 0, and one warning names the
//! queries. A failed query keeps the table as it was.

use std::collections::HashMap;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::time::Instant;
use waterline_core::learn::{LearnedUsage, Series, learn};
use waterline_core::policy::{Learn, LearnQueries};
use waterline_runtime::policy::PolicyHandle;

use crate::running_pods::{RunningPods, pod_key};
use crate::sources::prometheus::PromClient;
use crate::sources::prometheus::answer::{self, QueryError};
use crate::state::ClusterState;

/// How often a learner with learning off looks at the (reloadable) policy again.
const POLICY_CHECK: Duration = Duration::from_secs(2);
/// How long the first refresh waits for the pod watch's first list: without the pods, every
/// series would name an unknown pod.
const FIRST_LIST_WAIT: Duration = Duration::from_secs(30);

/// The queries, in the order of an [`Answers`] slot.
pub const QUERIES: [&str; 4] = ["cpu", "memory", "cpuSamples", "memorySamples"];

/// The four answers of one refresh, folded per pod as they are read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Answers {
    /// [`pod_key`] → the value of each query ([`QUERIES`] order); NaN: none for the pod.
    pods: HashMap<u64, [f64; 4]>,
    /// Per query: series in its answer, usable or not.
    series: [usize; 4],
    /// Per query: series without both labels or a finite value.
    unusable: [usize; 4],
}

impl Answers {
    /// Reads the answer of query `slot` (`PromClient::query_with`; the body is let go
    /// after): each series' pod, by its `namespace` and `pod` labels, and value.
    pub fn read(
        &mut self,
        slot: usize,
        status: u16,
        content_type: &str,
        body: &[u8],
    ) -> Result<(), QueryError> {
        let (pods, unusable) = (&mut self.pods, &mut self.unusable[slot]);
        self.series[slot] = answer::parse_pods(status, content_type, body, |row| {
            match (row.metric.namespace, row.metric.pod, row.value.1.0) {
                (Some(namespace), Some(pod), Some(value)) => {
                    let key = pod_key(&namespace.0, &pod.0);
                    pods.entry(key).or_insert([f64::NAN; 4])[slot] = value;
                }
                _ => *unusable += 1,
            }
        })?;
        Ok(())
    }

    /// The queries that returned no series.
    pub fn empty(&self) -> Vec<&'static str> {
        QUERIES.into_iter().zip(self.series).filter(|(_, n)| *n == 0).map(|(q, _)| q).collect()
    }

    /// Whether a resource has both its answers: then something is learned from it.
    pub fn active(&self) -> bool {
        (self.series[0] > 0 && self.series[2] > 0) || (self.series[1] > 0 && self.series[3] > 0)
    }

    /// Series of the four answers without both labels or a finite value.
    pub fn unusable(&self) -> usize {
        self.unusable.iter().sum()
    }

    /// Each pod's series: (its [`pod_key`], cpu in milli-cores — the queries answer cores —
    /// and memory in bytes). A usage without its count is a series without samples, which
    /// is no evidence.
    pub fn per_pod(self) -> impl Iterator<Item = (u64, Option<Series>, Option<Series>)> {
        let series = |usage: f64, samples: f64, scale: f64| {
            (!usage.is_nan()).then(|| Series {
                usage: usage * scale,
                // A count Prometheus made: a whole number, here never negative.
                samples: if samples.is_nan() { 0 } else { samples.max(0.0).round() as u64 },
            })
        };
        self.pods.into_iter().map(move |(pod, [cpu, memory, cpu_n, memory_n])| {
            (pod, series(cpu, cpu_n, 1000.0), series(memory, memory_n, 1.0))
        })
    }
}

/// The learner's own metrics on the collector's `/metrics`.
#[derive(Clone)]
pub struct LearnMetrics {
    pub active: Gauge,
    pub workloads: Gauge,
    pub dropped_workloads: Gauge,
    pub observed_pods: Gauge,
    pub tracked_pods: Gauge,
    pub untracked_pods: Counter,
    pub duration: Histogram,
    pub query_errors: Family<QueryLabel, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueryLabel {
    pub query: &'static str,
}

impl LearnMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = LearnMetrics {
            active: Gauge::default(),
            workloads: Gauge::default(),
            dropped_workloads: Gauge::default(),
            observed_pods: Gauge::default(),
            tracked_pods: Gauge::default(),
            untracked_pods: Counter::default(),
            // 1 ms .. ~65 s: four cluster-wide queries, a join and the rule.
            duration: Histogram::new(exponential_buckets(0.001, 2.0, 17)),
            query_errors: Family::default(),
        };
        registry.register(
            "waterline_learn_active",
            "1 while the learned estimate has series to learn from (estimator.learn on and its \
             queries answering); 0: every pod is priced by the policy's factors",
            m.active.clone(),
        );
        registry.register(
            "waterline_learned_workloads",
            "Workloads in the learned table (enough evidence to price their pods)",
            m.workloads.clone(),
        );
        registry.register(
            "waterline_learn_dropped_workloads",
            "Workloads with evidence left out of the last table by estimator.learn.maxWorkloads",
            m.dropped_workloads.clone(),
        );
        registry.register(
            "waterline_learn_observed_pods",
            "Running pods the last refresh had series for",
            m.observed_pods.clone(),
        );
        registry.register(
            "waterline_learn_tracked_pods",
            "Running pods the pod watch keeps for the learner",
            m.tracked_pods.clone(),
        );
        registry.register(
            "waterline_learn_untracked_pods",
            "Pods not kept for the learner because its table of running pods was full",
            m.untracked_pods.clone(),
        );
        registry.register(
            "waterline_learn_refresh_duration_seconds",
            "Time of one learner refresh: the four queries, the join and the learning",
            m.duration.clone(),
        );
        registry.register(
            "waterline_learn_query_errors",
            "Learner queries that failed (the table was kept), per query",
            m.query_errors.clone(),
        );
        m
    }
}

/// What the learner remembers between refreshes, so each state is logged once.
#[derive(Debug, Default)]
pub struct Learner {
    /// The queries last reported as answering nothing.
    empty: Vec<&'static str>,
    /// The last query error reported.
    error: Option<String>,
    untracked: u64,
    /// Learning was off at the last look.
    off: bool,
}

/// What one refresh came to.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// The new table (published), and whether anything was learned from series.
    Learned { table_len: usize, active: bool },
    /// A query failed: the previous table stays.
    Kept,
}

impl Learner {
    /// Learning is off in the policy: the table empties (once), `active` is 0.
    pub fn off(&mut self, state: &ClusterState, metrics: &LearnMetrics) {
        if !self.off {
            tracing::info!("estimator.learn is off: pods are priced by the policy's factors");
            self.off = true;
        }
        state.set_learned(LearnedUsage::default());
        metrics.active.set(0);
        metrics.workloads.set(0);
    }

    /// Turns one refresh's answers (or its first failed query) into the published table.
    pub fn refresh(
        &mut self,
        policy: &Learn,
        result: Result<Answers, (&'static str, QueryError)>,
        pods: &RunningPods,
        state: &ClusterState,
        metrics: &LearnMetrics,
    ) -> Outcome {
        self.off = false;
        let (tracked, untracked) = pods.counts();
        metrics.tracked_pods.set(tracked as i64);
        metrics.untracked_pods.inc_by(untracked.saturating_sub(self.untracked));
        self.untracked = untracked;
        let answers = match result {
            Ok(answers) => answers,
            Err((query, error)) => {
                metrics.query_errors.get_or_create(&QueryLabel { query }).inc();
                let message = format!("{query}: {error}");
                if self.error.as_ref() != Some(&message) {
                    tracing::warn!(
                        query,
                        %error,
                        "learner query failed; the learned table is kept as it was"
                    );
                    self.error = Some(message);
                }
                return Outcome::Kept;
            }
        };
        if self.error.take().is_some() {
            tracing::info!("learner queries work again");
        }
        let empty = answers.empty();
        if empty != self.empty {
            if empty.is_empty() {
                tracing::info!("every learner query returns series again");
            } else {
                let queries: Vec<String> = empty
                    .iter()
                    .map(|name| format!("{name} = {}", query_of(&policy.queries, name)))
                    .collect();
                tracing::warn!(
                    queries = %queries.join("; "),
                    "learner queries returned no series (are the recording rules of \
                     deploy/prometheus/rules.yml installed?): what they would learn is priced \
                     by the policy's factors"
                );
            }
            self.empty = empty;
        }
        let active = answers.active();
        let unusable = answers.unusable();
        let (table, joined) =
            pods.observe(answers.per_pod(), |observations| learn(policy, observations));
        if unusable > 0 || joined.unknown > 0 {
            let unknown = joined.unknown;
            tracing::debug!(unusable, unknown, "series without a running pod or a number");
        }
        metrics.observed_pods.set(joined.observed as i64);
        let table_len = table.len();
        metrics.workloads.set(table_len as i64);
        metrics.dropped_workloads.set(table.dropped as i64);
        metrics.active.set(i64::from(active));
        state.set_learned(table);
        Outcome::Learned { table_len, active }
    }
}

fn query_of<'a>(queries: &'a LearnQueries, name: &str) -> &'a str {
    match name {
        "cpu" => &queries.cpu,
        "memory" => &queries.memory,
        "cpuSamples" => &queries.cpu_samples,
        _ => &queries.memory_samples,
    }
}

/// The four queries, one after the other, each answer folded in as it arrives: only one
/// body (5 MB at 50,000 pods) is held at a time. The first that failed, by name, if one did.
async fn ask(
    client: &PromClient,
    queries: &LearnQueries,
) -> Result<Answers, (&'static str, QueryError)> {
    let mut answers = Answers::default();
    let promql = [&queries.cpu, &queries.memory, &queries.cpu_samples, &queries.memory_samples];
    for (slot, promql) in promql.into_iter().enumerate() {
        let read = |status: u16, content_type: &str, body: &[u8]| {
            answers.read(slot, status, content_type, body)
        };
        client.query_with(promql, read).await.map_err(|error| (QUERIES[slot], error))?;
    }
    Ok(answers)
}

/// Learns forever: after the pod watch's first list (`first_list`, at most
/// [`FIRST_LIST_WAIT`]), one refresh every `estimator.learn.refresh` of the policy in force.
pub async fn run(
    client: PromClient,
    state: ClusterState,
    policy: PolicyHandle,
    pods: RunningPods,
    metrics: LearnMetrics,
    first_list: Option<watch::Receiver<bool>>,
) {
    if let Some(mut synced) = first_list {
        let _ = tokio::time::timeout(FIRST_LIST_WAIT, synced.wait_for(|s| *s)).await;
    }
    let mut learner = Learner::default();
    loop {
        let current = policy.get();
        let learn = &current.estimator.learn;
        if !learn.enabled {
            learner.off(&state, &metrics);
            tokio::time::sleep(POLICY_CHECK).await;
            continue;
        }
        let started = Instant::now();
        let answers = ask(&client, &learn.queries).await;
        let outcome = learner.refresh(learn, answers, &pods, &state, &metrics);
        let took = started.elapsed();
        metrics.duration.observe(took.as_secs_f64());
        tracing::debug!(?outcome, took_ms = took.as_millis() as u64, "learner refresh");
        tokio::time::sleep(learn.refresh.as_std().max(Duration::from_millis(100))).await;
    }
}

#[cfg(test)]
mod tests;
