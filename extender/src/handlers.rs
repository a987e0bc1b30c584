//! The four verbs. Each decodes only what it needs, makes at most one scorer RPC (bounded by
//! `--scorer-timeout`) and answers in the scheduler's wire format. Bad input is a 400 with
//! `{"Error": "..."}` (see `http`); a scorer that cannot answer in time a neutral 200,
//! logged and counted.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tonic::transport::Channel;
use waterline_api::v1 as pb;
use waterline_api::v1::scorer_service_client::ScorerServiceClient;
use waterline_runtime::policy::PolicyHandle;
use waterline_runtime::rpc_metrics::RpcMetrics;

use crate::bind::Binder;
use crate::http::{HttpError, decode, json_response};
use crate::mapping::{eviction_may_resolve, map_scores, neutral_priorities, short_reason};
use crate::pod::Pod;
use crate::wire::{
    BindingArgs, ErrorResult, ExtenderArgs, FailedNodesMap, FilterResult, HostPriority, NodeList,
    PreemptionArgs, node_name,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FallbackLabels {
    pub verb: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    pub verb: String,
}

/// The extender's metrics, registered once.
#[derive(Clone)]
pub struct Metrics {
    /// Per verb: `waterline_extender_http_requests_total{method,code}` and latency.
    pub http: RpcMetrics,
    /// Per scorer RPC (Filter, Score, Reserve): count by gRPC code and latency.
    pub scorer: RpcMetrics,
    /// Neutral answers because the scorer did not answer (timeout, unavailable, error).
    pub fallbacks: Family<FallbackLabels, Counter>,
    /// Neutral answers for pods of other schedulers.
    pub gated: Family<VerbLabels, Counter>,
}

impl Metrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Metrics {
            http: RpcMetrics::register(registry, "waterline_extender_http", "extender HTTP call"),
            scorer: RpcMetrics::register(registry, "waterline_extender_scorer", "scorer RPC"),
            fallbacks: Family::default(),
            gated: Family::default(),
        };
        registry.register(
            "waterline_extender_fallbacks",
            "Neutral answers because the scorer failed or was slower than --scorer-timeout",
            metrics.fallbacks.clone(),
        );
        registry.register(
            "waterline_extender_gated",
            "Neutral answers for pods whose schedulerName is not in --scheduler-names",
            metrics.gated.clone(),
        );
        metrics
    }
}

/// Everything the handlers share.
pub struct Extender {
    pub scorer: ScorerServiceClient<Channel>,
    pub scorer_timeout: Duration,
    pub scheduler_names: HashSet<String>,
    pub max_nodes: usize,
    pub max_body: usize,
    pub policy: PolicyHandle,
    pub metrics: Metrics,
    pub binder: Option<Binder>,
}

/// Why the scorer gave no usable answer.
enum ScorerFailure {
    Timeout,
    Status(tonic::Status),
    /// The answer did not fit the question (e.g. a node missing from Score).
    Mismatch(String),
}

impl ScorerFailure {
    fn label(&self) -> &'static str {
        match self {
            ScorerFailure::Timeout => "timeout",
            ScorerFailure::Status(s) if s.code() == tonic::Code::Unavailable => "unavailable",
            ScorerFailure::Status(_) => "error",
            ScorerFailure::Mismatch(_) => "mismatch",
        }
    }

    fn message(&self) -> String {
        match self {
            ScorerFailure::Timeout => "no answer within --scorer-timeout".to_owned(),
            ScorerFailure::Status(s) => format!("{:?}: {}", s.code(), s.message()),
            ScorerFailure::Mismatch(m) => m.clone(),
        }
    }
}

/// A decoded filter or prioritize request: the pod, the candidate names in request order,
/// and the raw node objects when the scheduler sent a NodeList.
struct Candidates<'a> {
    pod: Pod,
    names: Vec<String>,
    /// Set when the request carried `NodeNames` (answer with names).
    by_name: bool,
    /// Set when the request carried `Nodes` (answer with node objects); parallel to `names`
    /// unless `by_name` is also set.
    nodes: Option<NodeList<'a>>,
}

impl Extender {
    fn gated_out(&self, pod: &Pod, verb: &'static str) -> bool {
        if self.scheduler_names.contains(pod.scheduler_name()) {
            return false;
        }
        self.metrics.gated.get_or_create(&VerbLabels { verb: verb.to_owned() }).inc();
        true
    }

    fn fall_back(&self, verb: &'static str, pod: &Pod, failure: ScorerFailure) {
        let labels = FallbackLabels { verb: verb.to_owned(), reason: failure.label().to_owned() };
        self.metrics.fallbacks.get_or_create(&labels).inc();
        tracing::warn!(
            verb,
            pod = %format_args!("{}/{}", pod.metadata.namespace, pod.metadata.name),
            reason = failure.label(),
            error = %failure.message(),
            "scorer gave no answer; answering neutrally"
        );
    }

    fn candidates<'a>(&self, args: ExtenderArgs<'a>) -> Result<Candidates<'a>, HttpError> {
        let pod = args.pod.ok_or_else(|| HttpError::bad_request("Pod is required"))?;
        let (names, by_name) = match (args.node_names, &args.nodes) {
            (Some(names), _) => (names, true),
            (None, Some(list)) => {
                let names = list
                    .items()
                    .iter()
                    .enumerate()
                    .map(|(i, raw)| match node_name(raw) {
                        Ok(name) if !name.is_empty() => Ok(name),
                        Ok(_) => Err(HttpError::bad_request(format!(
                            "Nodes.items[{i}].metadata.name is missing"
                        ))),
                        Err(e) => Err(HttpError::bad_request(format!("Nodes.items[{i}]: {e}"))),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                (names, false)
            }
            (None, None) => {
                return Err(HttpError::bad_request("request has neither Nodes nor NodeNames"));
            }
        };
        if names.len() > self.max_nodes {
            return Err(HttpError::bad_request(format!(
                "{} candidate nodes exceed --max-nodes {}",
                names.len(),
                self.max_nodes
            )));
        }
        Ok(Candidates { pod, names, by_name, nodes: args.nodes })
    }

    async fn call<T>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, ScorerFailure> {
        let timer = self.metrics.scorer.start(method);
        match tokio::time::timeout(self.scorer_timeout, call).await {
            Err(_) => {
                timer.finish("Timeout");
                Err(ScorerFailure::Timeout)
            }
            Ok(result) => {
                timer.finish_grpc(&result);
                result.map(tonic::Response::into_inner).map_err(ScorerFailure::Status)
            }
        }
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        // Lets the scorer drop work the extender has stopped waiting for.
        request.set_timeout(self.scorer_timeout);
        request
    }

    /// The scorer's `rejected` map for these candidates, or why there is none.
    async fn rejected(&self, c: &Candidates<'_>) -> Result<HashMap<String, String>, ScorerFailure> {
        let request = self.request(pb::FilterRequest {
            pod: Some(c.pod.to_info()),
            node_names: c.names.clone(),
            all_nodes: false,
        });
        let mut scorer = self.scorer.clone();
        let response = self.call("Filter", scorer.filter(request)).await?;
        Ok(response.rejected)
    }

    pub async fn filter(&self, bytes: &[u8]) -> Result<Response, HttpError> {
        let c = self.candidates(decode(bytes)?)?;
        let rejected = if c.names.is_empty() || self.gated_out(&c.pod, "filter") {
            HashMap::new()
        } else {
            self.rejected(&c).await.unwrap_or_else(|failure| {
                self.fall_back("filter", &c.pod, failure);
                HashMap::new()
            })
        };
        // Load rejections are unresolvable: evicting pods does not lower the measured load
        // within the cycle, so kube-scheduler must not preempt there. An anti-colocation
        // conflict goes away with the other pod, so preemption may consider that node.
        let mut failed_nodes = FailedNodesMap::new();
        let mut unresolvable = FailedNodesMap::new();
        for name in &c.names {
            if let Some(reason) = rejected.get(name) {
                let map = if eviction_may_resolve(reason) {
                    &mut failed_nodes
                } else {
                    &mut unresolvable
                };
                map.insert(name.clone(), short_reason(reason));
            }
        }
        if !rejected.is_empty() {
            tracing::debug!(pod = %c.pod.metadata.name, ?rejected, "nodes rejected");
        }
        let passes = |name: &String| !rejected.contains_key(name);
        let nodes = c.nodes.as_ref().map(|list| {
            let items = if c.by_name {
                // Both forms sent (only the upstream codec fixture does that): keep the
                // objects whose names pass.
                list.items()
                    .iter()
                    .copied()
                    .filter(|raw| node_name(raw).map(|n| passes(&n)).unwrap_or(true))
                    .collect()
            } else {
                list.items()
                    .iter()
                    .zip(&c.names)
                    .filter(|(_, name)| passes(name))
                    .map(|(raw, _)| *raw)
                    .collect()
            };
            list.with_items(items)
        });
        let node_names = c.by_name.then(|| c.names.iter().filter(|n| passes(n)).cloned().collect());
        let result = FilterResult {
            nodes,
            node_names,
            failed_nodes,
            // Go's nil map when empty, as before.
            failed_and_unresolvable_nodes: (!unresolvable.is_empty()).then_some(unresolvable),
            error: String::new(),
        };
        Ok(json_response(StatusCode::OK, &result))
    }

    /// Scores 0..100 in candidate order.
    async fn scores(&self, c: &Candidates<'_>) -> Result<Vec<i64>, ScorerFailure> {
        let request = self.request(pb::ScoreRequest {
            pod: Some(c.pod.to_info()),
            node_names: c.names.clone(),
            explain: false,
            scores_only: true,
        });
        let mut scorer = self.scorer.clone();
        let response = self.call("Score", scorer.score(request)).await?;
        if response.ordered_scores.len() == c.names.len() {
            return Ok(response.ordered_scores.into_iter().map(i64::from).collect());
        }
        // A scorer older than `scores_only` (the two deploy independently) answers by name.
        let in_order = response.scores.len() == c.names.len()
            && response.scores.iter().zip(&c.names).all(|(s, n)| &s.node_name == n);
        if in_order {
            return Ok(response.scores.iter().map(|s| s.score).collect());
        }
        let by_name: HashMap<&str, i64> =
            response.scores.iter().map(|s| (s.node_name.as_str(), s.score)).collect();
        c.names
            .iter()
            .map(|n| {
                by_name
                    .get(n.as_str())
                    .copied()
                    .ok_or_else(|| ScorerFailure::Mismatch(format!("no score for node {n}")))
            })
            .collect()
    }

    pub async fn prioritize(&self, bytes: &[u8]) -> Result<Response, HttpError> {
        let c = self.candidates(decode(bytes)?)?;
        let priorities = if c.names.is_empty() || self.gated_out(&c.pod, "prioritize") {
            neutral_priorities(c.names)
        } else {
            match self.scores(&c).await {
                Ok(scores) => {
                    let mapped = map_scores(self.policy.get().extender_score_mapping, &scores);
                    c.names
                        .into_iter()
                        .zip(mapped)
                        .map(|(host, score)| HostPriority { host, score })
                        .collect()
                }
                Err(failure) => {
                    self.fall_back("prioritize", &c.pod, failure);
                    neutral_priorities(c.names)
                }
            }
        };
        Ok(json_response(StatusCode::OK, &priorities))
    }

    pub async fn preempt(&self, bytes: &[u8]) -> Result<Response, HttpError> {
        let args: PreemptionArgs = decode(bytes)?;
        Ok(json_response(StatusCode::OK, &args.unchanged()))
    }

    pub async fn bind(&self, bytes: &[u8]) -> Result<Response, HttpError> {
        let args: BindingArgs = decode(bytes)?;
        let error = match &self.binder {
            None => "binding is not enabled on this extender (start it with --enable-bind, or \
                     remove bindVerb from the scheduler's extender configuration)"
                .to_owned(),
            Some(binder) => match binder.bind(self, &args).await {
                Ok(()) => String::new(),
                Err(error) => {
                    tracing::warn!(
                        pod = %format_args!("{}/{}", args.pod_namespace, args.pod_name),
                        node = %args.node,
                        %error,
                        "bind failed"
                    );
                    error
                }
            },
        };
        Ok(json_response(StatusCode::OK, &ErrorResult { error }))
    }

    /// Reserve on the scorer after a bind; failures only cost the ledger a few seconds until
    /// the collector's pod watch sees the binding.
    pub async fn reserve(&self, pod: pb::PodInfo, node: &str) {
        let request =
            self.request(pb::ReserveRequest { pod: Some(pod), node_name: node.to_owned() });
        let mut scorer = self.scorer.clone();
        if let Err(failure) = self.call("Reserve", scorer.reserve(request)).await {
            tracing::warn!(node, error = %failure.message(), "Reserve after bind failed");
        }
    }
}

#[cfg(test)]
mod tests;
