//! Request counts and latency histograms per RPC (or HTTP verb), labelled by outcome.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::time::Instant;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub method: String,
    pub code: String,
}

fn latency_histogram() -> Histogram {
    // 10 µs .. ~5 s: Filter/Score live at the bottom, forwarded Reserves near the top.
    Histogram::new(exponential_buckets(0.00001, 2.5, 15))
}

#[derive(Clone)]
pub struct RpcMetrics {
    requests: Family<OutcomeLabels, Counter>,
    durations: Family<MethodLabels, Histogram, fn() -> Histogram>,
}

impl RpcMetrics {
    /// Registers `<prefix>_requests_total` and `<prefix>_request_duration_seconds`.
    pub fn register(registry: &mut Registry, prefix: &str, what: &str) -> Self {
        let metrics = RpcMetrics {
            requests: Family::default(),
            durations: Family::new_with_constructor(latency_histogram),
        };
        registry.register(
            format!("{prefix}_requests"),
            format!("{what}s handled, by method and outcome"),
            metrics.requests.clone(),
        );
        registry.register(
            format!("{prefix}_request_duration_seconds"),
            format!("Time to answer a {what}, by method"),
            metrics.durations.clone(),
        );
        metrics
    }

    /// Starts timing one request; call `finish` with its outcome.
    pub fn start(&self, method: &'static str) -> RequestTimer<'_> {
        RequestTimer { metrics: self, method, started: Instant::now() }
    }
}

pub struct RequestTimer<'a> {
    metrics: &'a RpcMetrics,
    method: &'static str,
    started: Instant,
}

impl RequestTimer<'_> {
    pub fn finish(self, code: &str) {
        let elapsed = self.started.elapsed().as_secs_f64();
        self.metrics
            .durations
            .get_or_create(&MethodLabels { method: self.method.to_owned() })
            .observe(elapsed);
        self.metrics
            .requests
            .get_or_create(&OutcomeLabels { method: self.method.to_owned(), code: code.to_owned() })
            .inc();
    }

    /// Finishes with the gRPC status code of `result`.
    pub fn finish_grpc<T>(self, result: &Result<T, tonic::Status>) {
        let code = match result {
            Ok(_) => "OK".to_owned(),
            Err(status) => format!("{:?}", status.code()),
        };
        self.finish(&code);
    }
}
