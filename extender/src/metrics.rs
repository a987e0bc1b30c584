//! The extender's metrics, registered once and shared by the layers that count: the HTTP
//! plumbing (per verb), the scorer client (per RPC, and the neutral fallbacks) and the verbs
//! (gated pods, score-cache hits and misses).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use waterline_runtime::rpc_metrics::RpcMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FallbackLabels {
    pub verb: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    pub verb: String,
}

/// `result` is `hit` or `miss`; a miss's `reason` is `absent`, `expired` or `incomplete`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    pub result: String,
    pub reason: String,
}

/// Every metric of the extender. Clones share the same series.
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
    /// Prioritize answered from filter's cached scores (`hit`) or with a Score call (`miss`).
    pub score_cache: Family<CacheLabels, Counter>,
}

impl Metrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Metrics {
            http: RpcMetrics::register(registry, "waterline_extender_http", "extender HTTP call"),
            scorer: RpcMetrics::register(registry, "waterline_extender_scorer", "scorer RPC"),
            fallbacks: Family::default(),
            gated: Family::default(),
            score_cache: Family::default(),
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
        registry.register(
            "waterline_extender_score_cache",
            "Prioritize calls answered from filter's Evaluate (hit) or with a Score call (miss)",
            metrics.score_cache.clone(),
        );
        metrics
    }
}
