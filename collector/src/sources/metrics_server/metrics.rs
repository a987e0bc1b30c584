//! The metrics-server source's own metrics on the collector's `/metrics`. Each policy
//! metric it serves also reports through the per-metric series the Prometheus source uses
//! (`waterline_metric_last_success_timestamp_seconds`, `waterline_metric_last_poll_failed`,
//! `waterline_metric_nodes_covered`, …), so the alerts and the dashboard read either source.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `source` label: which node-usage source a series is about.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    pub source: String,
}

/// The `reason` an item of the last list was not used.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

/// This source's label value.
pub const SOURCE: &str = "metrics-server";

/// Cheap to clone; all clones update the same series.
#[derive(Clone)]
pub struct MetricsServerMetrics {
    up: Family<SourceLabel, Gauge>,
    pub requests: Counter,
    pub failures: Counter,
    pub duration: Histogram,
    pub skipped: Family<ReasonLabel, Gauge>,
    pub history_nodes: Gauge,
    pub history_bytes: Gauge,
}

impl MetricsServerMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = MetricsServerMetrics {
            up: Family::default(),
            requests: Counter::default(),
            failures: Counter::default(),
            // 1 ms .. ~16 s: a list through the aggregation layer takes milliseconds.
            duration: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            skipped: Family::default(),
            history_nodes: Gauge::default(),
            history_bytes: Gauge::default(),
        };
        registry.register(
            "waterline_collector_source_up",
            "1 when the node-usage source's last request succeeded, 0 when it failed",
            m.up.clone(),
        );
        registry.register(
            "waterline_metrics_server_requests",
            "NodeMetrics lists requested from metrics.k8s.io (one per period)",
            m.requests.clone(),
        );
        registry.register(
            "waterline_metrics_server_failures",
            "NodeMetrics lists that failed (transport, API error, timeout, unreadable answer)",
            m.failures.clone(),
        );
        registry.register(
            "waterline_metrics_server_request_duration_seconds",
            "Time from requesting the NodeMetrics list to having it read",
            m.duration.clone(),
        );
        registry.register(
            "waterline_metrics_server_skipped_items",
            "Items of the last NodeMetrics list not used, by reason (unmapped, malformed, no_allocatable)",
            m.skipped.clone(),
        );
        registry.register(
            "waterline_metrics_server_history_nodes",
            "Nodes whose usage history the collector keeps",
            m.history_nodes.clone(),
        );
        registry.register(
            "waterline_metrics_server_history_bytes",
            "Bytes the usage histories hold (about 3.4 KB per node at most)",
            m.history_bytes.clone(),
        );
        m
    }

    pub fn set_up(&self, up: bool) {
        self.up.get_or_create(&SourceLabel { source: SOURCE.into() }).set(i64::from(up));
    }
}
