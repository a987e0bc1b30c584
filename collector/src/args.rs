use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use waterline_core::time::parse_std_duration;
use waterline_runtime::args::{CommonArgs, GrpcLimitArgs, parse_addr};

use crate::sources::metrics_server::MetricsServerMode;

/// A watch timeout: a duration of at least one second (kube-rs counts whole seconds, and 0
/// would turn its dead-watch detection off).
fn parse_watch_timeout(text: &str) -> Result<std::time::Duration, String> {
    let timeout = parse_std_duration(text).map_err(|e| e.to_string())?;
    if timeout < std::time::Duration::from_secs(1) {
        return Err(format!("{text} is shorter than 1s"));
    }
    Ok(timeout)
}

/// Collects node usage and recent placements, and streams them to waterline scorers.
///
/// Pick one node-usage source: --prometheus-url URL (one PromQL query per policy metric),
/// --metrics-server (NodeMetrics through the API server; chosen by itself when no Prometheus
/// URL is given and metrics.k8s.io answers), --static FILE (nodes and usage from a YAML
/// file, re-read when it changes) or --synthetic-nodes N (a generated cluster whose usage
/// drifts, for demos and benchmarks). `waterline-collector policy check FILE` checks a policy file instead of
/// running.
#[derive(Parser, Clone, Debug)]
#[command(name = "waterline-collector", version, args_conflicts_with_subcommands = true)]
pub struct Args {
    /// A tool instead of the service (none: run the collector).
    #[command(subcommand)]
    pub command: Option<Command>,

    /// gRPC listen address (CollectorService, health, reflection).
    #[arg(long, default_value = "0.0.0.0:50052", value_parser = parse_addr, env = "WATERLINE_GRPC_ADDR")]
    pub grpc_addr: SocketAddr,

    /// Admin listen address (/metrics, /live, /ready).
    #[arg(long, default_value = "0.0.0.0:9102", value_parser = parse_addr, env = "WATERLINE_ADMIN_ADDR")]
    pub admin_addr: SocketAddr,

    /// Policy file (YAML); the built-in default policy when omitted. Reloaded on change.
    #[arg(long, env = "WATERLINE_POLICY")]
    pub policy: Option<PathBuf>,

    /// Static node source: YAML with `nodes: [{name, capacity: {cpu, memory}, metrics: {...}}]`.
    #[arg(long = "static", value_name = "FILE", conflicts_with = "synthetic_nodes")]
    pub static_file: Option<PathBuf>,

    /// Synthetic node source: this many generated nodes with drifting usage.
    #[arg(long, value_name = "N")]
    pub synthetic_nodes: Option<usize>,

    /// How often the synthetic cluster's usage moves.
    #[arg(long, default_value = "5s", value_parser = parse_std_duration)]
    pub synthetic_interval: std::time::Duration,

    /// How often waterline_node_predicted_utilisation (the predicted load per node and
    /// metric, for a descheduler: docs/operations.md#rebalancing) is recomputed on /metrics;
    /// 0s: not published.
    #[arg(long, default_value = "15s", value_parser = parse_std_duration, env = "WATERLINE_PREDICTED_LOAD_INTERVAL")]
    pub predicted_load_interval: std::time::Duration,

    /// Seed of the synthetic cluster (same seed, same cluster).
    #[arg(long, default_value_t = 42)]
    pub synthetic_seed: u64,

    /// Node address map for matching series to nodes when no Kubernetes source gives
    /// addresses: YAML `nodes: [{name, addresses: [10.0.0.2, host-2]}]`.
    #[arg(long, value_name = "FILE", env = "WATERLINE_NODE_MAP")]
    pub node_map: Option<PathBuf>,

    #[command(flatten)]
    pub prometheus: crate::sources::prometheus::PrometheusArgs,

    #[command(flatten)]
    pub metrics_server: crate::sources::metrics_server::MetricsServerArgs,

    /// Kubeconfig file for the Kubernetes pod watch (the ledger) and node watch (capacity,
    /// addresses). Without it the default chain is used when Kubernetes is on: KUBECONFIG,
    /// ~/.kube/config, then the in-cluster service account.
    #[arg(long, value_name = "FILE", env = "WATERLINE_KUBECONFIG", conflicts_with = "no_kube")]
    pub kubeconfig: Option<PathBuf>,

    /// Longest one Kubernetes watch request lasts before it is renewed from where it left
    /// off (whole seconds, at least 1s). A watch that stays silent for this long plus 5 s is
    /// taken for dead and reopened: a connection lost without a reset (a NAT or conntrack
    /// entry gone, a peer that vanished) would otherwise leave the pod watch, and so the
    /// ledger, blind for kube-rs' default of 290 s.
    #[arg(long, default_value = "60s", value_parser = parse_watch_timeout, env = "WATERLINE_KUBE_WATCH_TIMEOUT")]
    pub kube_watch_timeout: std::time::Duration,

    /// Watch Kubernetes even with --static or --synthetic-nodes (pods only: those sources
    /// own the nodes). By default Kubernetes is watched when --kubeconfig is given, or when
    /// neither --static nor --synthetic-nodes is and a configuration is found.
    #[arg(long, conflicts_with = "no_kube")]
    pub kube: bool,

    /// Never talk to Kubernetes (static, synthetic or Prometheus-only use).
    #[arg(long)]
    pub no_kube: bool,

    #[command(flatten)]
    pub shadow: crate::shadow::ShadowArgs,

    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub limits: GrpcLimitArgs,
}

#[derive(clap::Subcommand, Clone, Debug)]
pub enum Command {
    /// Policy file tools.
    #[command(subcommand)]
    Policy(PolicyCommand),
}

#[derive(clap::Subcommand, Clone, Debug)]
pub enum PolicyCommand {
    /// Load a policy exactly as the collector and scorer do (every field, every query parsed
    /// as PromQL), check rule files and the recording rules it reads, and with
    /// --prometheus-url run each query once and report its series and the nodes they map to.
    Check(crate::policy_check::CheckArgs),
}

/// Whether the collector watches Kubernetes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KubeMode {
    Off,
    /// On when a configuration is found (KUBECONFIG, ~/.kube/config, in-cluster).
    Auto,
    /// On; a missing or bad configuration is a startup error.
    On,
}

impl Args {
    pub fn kube_mode(&self) -> KubeMode {
        if self.no_kube {
            KubeMode::Off
        } else if self.kube
            || self.kubeconfig.is_some()
            || self.metrics_server.metrics_server == Some(true)
        {
            KubeMode::On
        } else if self.static_file.is_some() || self.synthetic_nodes.is_some() {
            // These modes must never need a cluster (tests, demos, benchmarks).
            KubeMode::Off
        } else {
            KubeMode::Auto
        }
    }

    /// Whether the collector reads metrics-server: `--metrics-server[=BOOL]`, or by itself
    /// (`Auto`) when "no Prometheus URL" — neither --prometheus-url nor
    /// WATERLINE_PROMETHEUS_URL set — and no --static or --synthetic-nodes, with Kubernetes
    /// on. The shipped manifests set a Prometheus URL; drop it to use metrics-server.
    pub fn metrics_server_mode(&self) -> MetricsServerMode {
        match self.metrics_server.metrics_server {
            Some(true) => MetricsServerMode::On,
            Some(false) => MetricsServerMode::Off,
            None if self.prometheus.prometheus_url.is_none()
                && !self.owns_nodes()
                && self.kube_mode() != KubeMode::Off =>
            {
                MetricsServerMode::Auto
            }
            None => MetricsServerMode::Off,
        }
    }

    /// The metrics-server source's configuration (its mode may be `Off`).
    pub fn metrics_server_config(&self) -> crate::sources::metrics_server::Config {
        crate::sources::metrics_server::Config {
            mode: self.metrics_server_mode(),
            period: self.metrics_server.metrics_server_period,
            timeout: self.metrics_server.metrics_server_timeout,
        }
    }

    /// Whether a static or synthetic source owns the node set (and so their capacity).
    pub fn owns_nodes(&self) -> bool {
        self.static_file.is_some() || self.synthetic_nodes.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(flags: &[&str]) -> KubeMode {
        let argv = std::iter::once("waterline-collector").chain(flags.iter().copied());
        Args::try_parse_from(argv).unwrap().kube_mode()
    }

    #[test]
    fn static_and_synthetic_modes_never_need_a_cluster_unless_asked() {
        assert_eq!(mode(&[]), KubeMode::Auto);
        assert_eq!(mode(&["--static", "n.yaml"]), KubeMode::Off);
        assert_eq!(mode(&["--synthetic-nodes", "3"]), KubeMode::Off);
        assert_eq!(mode(&["--synthetic-nodes", "3", "--kube"]), KubeMode::On);
        assert_eq!(mode(&["--kubeconfig", "k"]), KubeMode::On);
        assert_eq!(mode(&["--no-kube"]), KubeMode::Off);
        let both = ["waterline-collector", "--no-kube", "--kubeconfig", "k"];
        assert!(Args::try_parse_from(both).is_err());
    }

    #[test]
    fn metrics_server_is_chosen_without_a_prometheus_url_and_refused_beside_another_source() {
        let parse = |flags: &[&str]| {
            let argv = std::iter::once("waterline-collector").chain(flags.iter().copied());
            Args::try_parse_from(argv)
        };
        let mode = |flags: &[&str]| parse(flags).unwrap().metrics_server_mode();
        assert_eq!(mode(&[]), MetricsServerMode::Auto);
        assert_eq!(mode(&["--kubeconfig", "k"]), MetricsServerMode::Auto);
        assert_eq!(mode(&["--prometheus-url", "http://p:9090"]), MetricsServerMode::Off);
        assert_eq!(mode(&["--static", "n.yaml"]), MetricsServerMode::Off);
        assert_eq!(mode(&["--synthetic-nodes", "3"]), MetricsServerMode::Off);
        assert_eq!(mode(&["--no-kube"]), MetricsServerMode::Off);
        assert_eq!(mode(&["--metrics-server"]), MetricsServerMode::On);
        assert_eq!(mode(&["--metrics-server=false"]), MetricsServerMode::Off);
        // Asking for it turns Kubernetes on (it is read through the API server).
        assert_eq!(parse(&["--metrics-server"]).unwrap().kube_mode(), KubeMode::On);
        for other in [
            &["--metrics-server", "--prometheus-url", "http://p:9090"][..],
            &["--metrics-server", "--static", "n.yaml"],
            &["--metrics-server", "--synthetic-nodes", "3"],
            &["--metrics-server", "--no-kube"],
        ] {
            assert!(parse(other).is_err(), "{other:?}");
        }
        let args = parse(&["--metrics-server", "--metrics-server-period", "1s"]).unwrap();
        assert_eq!(args.metrics_server_config().period, std::time::Duration::from_secs(1));
        assert_eq!(parse(&[]).unwrap().metrics_server_config().period.as_secs(), 15);
    }

    #[test]
    fn the_watch_timeout_is_a_minute_by_default_and_at_least_a_second() {
        let parse = |flags: &[&str]| {
            let argv = std::iter::once("waterline-collector").chain(flags.iter().copied());
            Args::try_parse_from(argv).map(|a| a.kube_watch_timeout)
        };
        assert_eq!(parse(&[]).unwrap(), std::time::Duration::from_secs(60));
        assert_eq!(parse(&["--kube-watch-timeout", "5s"]).unwrap().as_secs(), 5);
        for bad in ["0s", "500ms", "soon"] {
            assert!(parse(&["--kube-watch-timeout", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn policy_check_is_a_subcommand_with_its_own_flags() {
        let args = Args::try_parse_from([
            "waterline-collector",
            "policy",
            "check",
            "p.yaml",
            "--rules",
            "r.yml",
            "--prometheus-url",
            "http://127.0.0.1:9090",
        ])
        .unwrap();
        let Some(Command::Policy(PolicyCommand::Check(check))) = args.command else {
            panic!("not the check subcommand");
        };
        assert_eq!(check.file, PathBuf::from("p.yaml"));
        assert_eq!(check.rules, vec![PathBuf::from("r.yml")]);
        assert_eq!(check.prometheus_url.as_deref(), Some("http://127.0.0.1:9090"));
        // Service flags do not mix with the subcommand; without one the service runs.
        let mixed = ["waterline-collector", "--static", "n.yaml", "policy", "check", "p.yaml"];
        assert!(Args::try_parse_from(mixed).is_err());
        assert!(
            Args::try_parse_from(["waterline-collector", "--static", "n.yaml"])
                .unwrap()
                .command
                .is_none()
        );
    }
}
