//! The `--prometheus-*` flags (flattened into the collector's `Args`).

use std::path::PathBuf;
use std::time::Duration;

use super::client::{ClientConfig, parse_header};
use waterline_core::time::parse_std_duration;

#[derive(clap::Args, Clone, Debug)]
pub struct PrometheusArgs {
    /// PromQL endpoint (Prometheus, Thanos, Mimir, VictoriaMetrics; the URL the
    /// `/api/v1/query` path is appended to). Every policy metric becomes one instant query
    /// for the whole cluster, on the metric's own period.
    #[arg(
        long,
        value_name = "URL",
        env = "WATERLINE_PROMETHEUS_URL",
        conflicts_with_all = ["static_file", "synthetic_nodes"]
    )]
    pub prometheus_url: Option<String>,

    /// File holding a bearer token for Prometheus; re-read before every query (rotated
    /// service-account tokens keep working).
    #[arg(
        long,
        value_name = "FILE",
        requires = "prometheus_url",
        conflicts_with = "prometheus_basic_auth_user",
        env = "WATERLINE_PROMETHEUS_BEARER_TOKEN_FILE"
    )]
    pub prometheus_bearer_token_file: Option<PathBuf>,

    /// User for HTTP basic auth to Prometheus (with --prometheus-basic-auth-password-file).
    #[arg(long, value_name = "USER", requires_all = ["prometheus_url", "prometheus_basic_auth_password_file"])]
    pub prometheus_basic_auth_user: Option<String>,

    /// File holding the basic-auth password (read at start-up).
    #[arg(long, value_name = "FILE", requires = "prometheus_basic_auth_user")]
    pub prometheus_basic_auth_password_file: Option<PathBuf>,

    /// PEM file of CA certificates trusted for an https:// Prometheus URL (besides the
    /// system's).
    #[arg(long, value_name = "FILE", requires = "prometheus_url")]
    pub prometheus_ca_file: Option<PathBuf>,

    /// Accept any certificate from Prometheus (testing only).
    #[arg(long, requires = "prometheus_url")]
    pub prometheus_insecure_skip_verify: bool,

    /// Extra header on every query, `Name: value` (e.g. `X-Scope-OrgID: tenant`); repeatable.
    #[arg(long = "prometheus-header", value_name = "NAME: VALUE", value_parser = parse_header)]
    pub prometheus_headers: Vec<(String, String)>,

    /// Bound on one query (connect, evaluate, answer); also passed to the server as its
    /// evaluation timeout. A query that takes longer fails and only its metric ages.
    #[arg(long, default_value = "10s", value_parser = parse_std_duration, env = "WATERLINE_PROMETHEUS_TIMEOUT")]
    pub prometheus_timeout: Duration,

    /// Read node capacity (cores, memory) from node-exporter series: two more cluster-wide
    /// queries. Default: on with --prometheus-url unless a Kubernetes source gives capacity.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub prometheus_capacity: Option<bool>,

    /// How often the capacity queries run.
    #[arg(long, default_value = "5m", value_parser = parse_std_duration)]
    pub prometheus_capacity_period: Duration,
}

/// The source's configuration, from the flags ([`PrometheusArgs::config`]).
#[derive(Clone, Debug)]
pub struct Config {
    pub client: ClientConfig,
    /// Also read node capacity from Prometheus (when Kubernetes does not give it).
    pub capacity: bool,
    pub capacity_period: Duration,
}

impl PrometheusArgs {
    /// The source's configuration, when --prometheus-url is set. `kube_capacity`: whether a
    /// Kubernetes source already gives node capacity (then Prometheus does not, unless
    /// --prometheus-capacity says so).
    pub fn config(&self, kube_capacity: bool) -> Option<Config> {
        let url = self.prometheus_url.clone()?;
        Some(Config {
            client: ClientConfig {
                url,
                bearer_token_file: self.prometheus_bearer_token_file.clone(),
                basic_auth: self
                    .prometheus_basic_auth_user
                    .clone()
                    .zip(self.prometheus_basic_auth_password_file.clone()),
                ca_file: self.prometheus_ca_file.clone(),
                insecure_skip_verify: self.prometheus_insecure_skip_verify,
                headers: self.prometheus_headers.clone(),
                timeout: self.prometheus_timeout,
            },
            capacity: self.prometheus_capacity.unwrap_or(!kube_capacity),
            capacity_period: self.prometheus_capacity_period,
        })
    }
}
