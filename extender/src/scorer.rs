//! The scorer client: one gRPC call per verb on the shared channel, each bounded by
//! `--scorer-timeout` (also sent as the call's deadline, so the scorer can drop work the
//! extender stopped waiting for), timed per RPC, and the record of every neutral fallback
//! (counted by verb and reason, logged once). It knows the scorer's API and nothing of HTTP
//! or of the extender protocol.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::time::Instant;
use tonic::transport::Channel;
use waterline_api::v1 as pb;
use waterline_api::v1::scorer_service_client::ScorerServiceClient;
use waterline_runtime::rpc_metrics::RpcMetrics;

use crate::metrics::{FallbackLabels, Metrics};

/// Why the scorer gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ScorerFailure {
    #[error("no answer within --scorer-timeout")]
    Timeout,
    #[error("{:?}: {}", .0.code(), .0.message())]
    Status(tonic::Status),
    /// The answer did not fit the question (e.g. a node missing from Score).
    #[error("{0}")]
    Mismatch(String),
}

impl ScorerFailure {
    /// The `reason` label of the fallback counter.
    pub fn label(&self) -> &'static str {
        match self {
            ScorerFailure::Timeout => "timeout",
            ScorerFailure::Status(s) if s.code() == tonic::Code::Unavailable => "unavailable",
            ScorerFailure::Status(_) => "error",
            ScorerFailure::Mismatch(_) => "mismatch",
        }
    }
}

/// How long a scorer that answered `Evaluate` with UNIMPLEMENTED (one older than the RPC)
/// is called with Filter instead before Evaluate is tried again (it may have been upgraded).
pub const EVALUATE_RETRY: Duration = Duration::from_secs(300);

/// Filter's answer, and the feasible nodes' scores when the scorer could give them in the
/// same call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Evaluated {
    /// Rejected node → reason.
    pub rejected: HashMap<String, String>,
    /// Feasible node → score 0..100; `None` from a scorer without `Evaluate`.
    pub scores: Option<HashMap<String, i64>>,
}

/// The scorer's gRPC API as the verbs use it.
#[derive(Clone)]
pub struct ScorerClient {
    client: ScorerServiceClient<Channel>,
    timeout: Duration,
    rpc: RpcMetrics,
    fallbacks: Family<FallbackLabels, Counter>,
    /// Set while the scorer is known not to serve `Evaluate`: until when to use Filter.
    evaluate_off_until: Arc<Mutex<Option<Instant>>>,
}

impl ScorerClient {
    pub fn new(channel: Channel, timeout: Duration, metrics: &Metrics) -> Self {
        ScorerClient {
            client: ScorerServiceClient::new(channel),
            timeout,
            rpc: metrics.scorer.clone(),
            fallbacks: metrics.fallbacks.clone(),
            evaluate_off_until: Arc::default(),
        }
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        // Lets the scorer drop work the extender has stopped waiting for.
        request.set_timeout(self.timeout);
        request
    }

    async fn call<T>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, ScorerFailure> {
        let timer = self.rpc.start(method);
        match tokio::time::timeout(self.timeout, call).await {
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

    /// The scorer's `rejected` map (node → reason) for these candidates.
    pub async fn filter(
        &self,
        policy: &str,
        pod: pb::PodInfo,
        names: &[String],
    ) -> Result<HashMap<String, String>, ScorerFailure> {
        let request = self.request(pb::FilterRequest {
            pod: Some(pod),
            node_names: names.to_vec(),
            all_nodes: false,
            policy: policy.to_owned(),
        });
        let mut client = self.client.clone();
        let response = self.call("Filter", client.filter(request)).await?;
        Ok(response.rejected)
    }

    /// Filter and Score of `names` in one call (`Evaluate`). A scorer older than `Evaluate`
    /// (UNIMPLEMENTED) gets a Filter instead, and only Filters for [`EVALUATE_RETRY`].
    pub async fn evaluate(
        &self,
        policy: &str,
        pod: pb::PodInfo,
        names: &[String],
    ) -> Result<Evaluated, ScorerFailure> {
        let off_until = *self.evaluate_off_until.lock().unwrap_or_else(|p| p.into_inner());
        if off_until.is_some_and(|until| Instant::now() < until) {
            let rejected = self.filter(policy, pod, names).await?;
            return Ok(Evaluated { rejected, scores: None });
        }
        let request = self.request(pb::EvaluateRequest {
            pod: Some(pod.clone()),
            node_names: names.to_vec(),
            all_nodes: false,
            policy: policy.to_owned(),
        });
        let mut client = self.client.clone();
        let response = match self.call("Evaluate", client.evaluate(request)).await {
            Err(ScorerFailure::Status(status)) if status.code() == tonic::Code::Unimplemented => {
                tracing::info!("the scorer has no Evaluate (older version); using Filter");
                *self.evaluate_off_until.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(Instant::now() + EVALUATE_RETRY);
                let rejected = self.filter(policy, pod, names).await?;
                return Ok(Evaluated { rejected, scores: None });
            }
            other => other?,
        };
        if response.ordered_scores.len() != names.len() {
            return Err(ScorerFailure::Mismatch(format!(
                "Evaluate answered {} scores for {} nodes",
                response.ordered_scores.len(),
                names.len()
            )));
        }
        let scores = names
            .iter()
            .zip(response.ordered_scores)
            .filter(|(name, score)| *score >= 0 && !response.rejected.contains_key(*name))
            .map(|(name, score)| (name.clone(), i64::from(score)))
            .collect();
        Ok(Evaluated { rejected: response.rejected, scores: Some(scores) })
    }

    /// Scores 0..100 in the order of `names`.
    pub async fn scores(
        &self,
        policy: &str,
        pod: pb::PodInfo,
        names: &[String],
    ) -> Result<Vec<i64>, ScorerFailure> {
        let request = self.request(pb::ScoreRequest {
            pod: Some(pod),
            node_names: names.to_vec(),
            explain: false,
            scores_only: true,
            policy: policy.to_owned(),
        });
        let mut client = self.client.clone();
        let response = self.call("Score", client.score(request)).await?;
        if response.ordered_scores.len() == names.len() {
            return Ok(response.ordered_scores.into_iter().map(i64::from).collect());
        }
        // A scorer older than `scores_only` (the two deploy independently) answers by name.
        let in_order = response.scores.len() == names.len()
            && response.scores.iter().zip(names).all(|(s, n)| &s.node_name == n);
        if in_order {
            return Ok(response.scores.iter().map(|s| i64::from(s.score)).collect());
        }
        let by_name: HashMap<&str, i64> =
            response.scores.iter().map(|s| (s.node_name.as_str(), i64::from(s.score))).collect();
        names
            .iter()
            .map(|n| {
                by_name
                    .get(n.as_str())
                    .copied()
                    .ok_or_else(|| ScorerFailure::Mismatch(format!("no score for node {n}")))
            })
            .collect()
    }

    /// Reserve after a bind, or with `provisional_ttl` a provisional one at prioritize;
    /// failures only cost the ledger a few seconds until the collector's pod watch sees the
    /// binding, so they are logged, not returned.
    pub async fn reserve(&self, pod: pb::PodInfo, node: &str, provisional_ttl: Option<Duration>) {
        let request = self.request(pb::ReserveRequest {
            pod: Some(pod),
            node_name: node.to_owned(),
            provisional_ttl: provisional_ttl.and_then(|ttl| ttl.try_into().ok()),
        });
        let mut client = self.client.clone();
        if let Err(failure) = self.call("Reserve", client.reserve(request)).await {
            let what = if provisional_ttl.is_some() {
                "provisional Reserve"
            } else {
                "Reserve after bind"
            };
            tracing::warn!(node, error = %failure, "{what} failed");
        }
    }

    /// `--scorer-timeout`.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Records that `verb` answered neutrally for `pod` because of `failure`.
    pub fn fall_back(&self, verb: &'static str, pod: &str, failure: &ScorerFailure) {
        let labels = FallbackLabels { verb: verb.to_owned(), reason: failure.label().to_owned() };
        self.fallbacks.get_or_create(&labels).inc();
        tracing::warn!(
            verb,
            pod,
            reason = failure.label(),
            error = %failure,
            "scorer gave no answer; answering neutrally"
        );
    }
}
