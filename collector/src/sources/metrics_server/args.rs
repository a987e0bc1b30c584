//! The `--metrics-server*` flags (flattened into the collector's `Args`).

use std::time::Duration;

use waterline_core::time::parse_std_duration;

#[derive(clap::Args, Clone, Debug)]
pub struct MetricsServerArgs {
    /// Node usage from metrics-server, through the API server (`metrics.k8s.io/v1beta1`):
    /// one NodeMetrics list per --metrics-server-period, the 5-minute average and the 1 h /
    /// 1 d maxima kept by the collector. Default: on when no --prometheus-url (nor
    /// WATERLINE_PROMETHEUS_URL), --static or --synthetic-nodes is given, Kubernetes is on
    /// and metrics.k8s.io answers; `--metrics-server=false` never.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true",
        env = "WATERLINE_METRICS_SERVER",
        conflicts_with_all = ["prometheus_url", "static_file", "synthetic_nodes", "no_kube"]
    )]
    pub metrics_server: Option<bool>,

    /// How often the NodeMetrics list is read (metrics-server itself scrapes kubelets every
    /// 15-60 s, its --metric-resolution; a faster poll sees the same points again).
    #[arg(long, default_value = "15s", value_parser = parse_std_duration, env = "WATERLINE_METRICS_SERVER_PERIOD")]
    pub metrics_server_period: Duration,

    /// Bound on one NodeMetrics list.
    #[arg(long, default_value = "10s", value_parser = parse_std_duration)]
    pub metrics_server_timeout: Duration,
}

/// Whether the collector reads metrics-server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricsServerMode {
    Off,
    /// When `metrics.k8s.io/v1beta1` answers (asked at start-up, then every minute until it
    /// does).
    Auto,
    /// Always (failures are logged and retried every period).
    On,
}

/// The source's configuration.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub mode: MetricsServerMode,
    pub period: Duration,
    pub timeout: Duration,
}
