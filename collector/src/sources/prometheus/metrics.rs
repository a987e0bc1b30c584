//! The Prometheus source's own metrics on the collector's `/metrics`, one series per policy
//! metric (and `capacity:cpu` / `capacity:memory` for the capacity queries).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MetricLabel {
    pub metric: String,
}

fn duration_histogram() -> Histogram {
    // 1 ms .. ~60 s: a cached recording rule answers in milliseconds, a timeout in seconds.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// Cheap to clone; all clones update the same series.
#[derive(Clone)]
pub struct SourceMetrics {
    pub requests: Family<MetricLabel, Counter>,
    pub failures: Family<MetricLabel, Counter>,
    pub duration: Family<MetricLabel, Histogram, fn() -> Histogram>,
    pub last_success: Family<MetricLabel, Gauge<f64, AtomicU64>>,
    pub last_failed: Family<MetricLabel, Gauge>,
    pub series: Family<MetricLabel, Gauge>,
    pub nodes_covered: Family<MetricLabel, Gauge>,
    pub unmapped: Family<MetricLabel, Gauge>,
    pub dropped: Family<MetricLabel, Counter>,
    pub clamped: Family<MetricLabel, Counter>,
}

impl SourceMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = SourceMetrics {
            requests: Family::default(),
            failures: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            last_success: Family::default(),
            last_failed: Family::default(),
            series: Family::default(),
            nodes_covered: Family::default(),
            unmapped: Family::default(),
            dropped: Family::default(),
            clamped: Family::default(),
        };
        registry.register(
            "waterline_promql_requests",
            "PromQL queries sent, per metric (one per metric per period, whatever the node count)",
            m.requests.clone(),
        );
        registry.register(
            "waterline_promql_failures",
            "PromQL queries that gave no samples (transport, HTTP, API or parse error)",
            m.failures.clone(),
        );
        registry.register(
            "waterline_promql_query_duration_seconds",
            "Time from sending a PromQL query to having its answer parsed",
            m.duration.clone(),
        );
        registry.register(
            "waterline_metric_last_success_timestamp_seconds",
            "Unix time of the metric's last successful query",
            m.last_success.clone(),
        );
        registry.register(
            "waterline_metric_last_poll_failed",
            "1 when the metric's last query failed (see ListNodes for the message)",
            m.last_failed.clone(),
        );
        registry.register(
            "waterline_metric_series",
            "Series returned by the metric's last successful query",
            m.series.clone(),
        );
        registry.register(
            "waterline_metric_nodes_covered",
            "Nodes given a sample by the metric's last successful query",
            m.nodes_covered.clone(),
        );
        registry.register(
            "waterline_unmapped_series",
            "Series of the metric's last answer that map to no node (see the log for their labels)",
            m.unmapped.clone(),
        );
        registry.register(
            "waterline_metric_dropped_samples",
            "Samples dropped because their value was NaN, infinite or not a number",
            m.dropped.clone(),
        );
        registry.register(
            "waterline_metric_clamped_samples",
            "Percent samples outside 0..100 that were clamped",
            m.clamped.clone(),
        );
        m
    }
}

pub fn label(metric: &str) -> MetricLabel {
    MetricLabel { metric: metric.to_owned() }
}
