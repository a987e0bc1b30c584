use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use waterline_core::time::parse_std_duration;
use waterline_runtime::args::{CommonArgs, parse_addr};
use waterline_runtime::policy::{PolicyArg, parse_policy_arg};

/// kube-scheduler HTTP extender backed by the waterline scorer.
///
/// Serves `<prefix>/filter`, `<prefix>/prioritize`, `<prefix>/preempt` and `<prefix>/bind`
/// in the `k8s.io/kube-scheduler/extender/v1` wire format. When the scorer is unreachable or
/// slower than --scorer-timeout, filter lets every node pass and prioritize scores every node
/// equally (logged and counted in `waterline_extender_fallbacks_total`), so the scheduler keeps
/// working; configure the extender with `ignorable: true` as a second line of defence.
#[derive(Parser, Clone, Debug)]
#[command(name = "waterline-extender", version)]
pub struct Args {
    /// HTTP listen address for the extender verbs.
    #[arg(long, default_value = "0.0.0.0:8787", value_parser = parse_addr, env = "WATERLINE_HTTP_ADDR")]
    pub http_addr: SocketAddr,

    /// Admin listen address (/metrics, /live, /ready).
    #[arg(long, default_value = "0.0.0.0:9103", value_parser = parse_addr, env = "WATERLINE_ADMIN_ADDR")]
    pub admin_addr: SocketAddr,

    /// Scorer to call (http:// or https://).
    #[arg(long, default_value = "http://127.0.0.1:50051", env = "WATERLINE_SCORER_URL")]
    pub scorer_url: String,

    /// PEM CA that signs the scorer's certificate (required for an https:// scorer URL).
    /// Re-read when it changes (--tls-reload-interval).
    #[arg(long, env = "WATERLINE_SCORER_CA")]
    pub scorer_ca: Option<PathBuf>,

    /// PEM client certificate presented to the scorer (for a scorer started with
    /// --tls-client-ca). Re-read when it changes.
    #[arg(long, requires = "scorer_key", env = "WATERLINE_SCORER_CERT")]
    pub scorer_cert: Option<PathBuf>,

    /// PEM private key of --scorer-cert.
    #[arg(long, requires = "scorer_cert", env = "WATERLINE_SCORER_KEY")]
    pub scorer_key: Option<PathBuf>,

    /// URL path prefix of the verbs; the scheduler's `urlPrefix` ends with it.
    #[arg(long, default_value = "/waterline/v1", env = "WATERLINE_PREFIX")]
    pub prefix: String,

    /// Scheduler names (`spec.schedulerName`) this extender scores for, comma-separated.
    /// Pods of any other scheduler get a neutral answer without a call to the scorer.
    #[arg(
        long,
        default_value = "waterline-scheduler",
        value_delimiter = ',',
        env = "WATERLINE_SCHEDULER_NAMES"
    )]
    pub scheduler_names: Vec<String>,

    /// Longest wait for the scorer before answering neutrally (keep it below the
    /// scheduler's `httpTimeout`).
    #[arg(long, default_value = "200ms", value_parser = parse_std_duration, env = "WATERLINE_SCORER_TIMEOUT")]
    pub scorer_timeout: Duration,

    /// Largest request body accepted (413 above it), e.g. 64Mi. Names-only requests are
    /// ~50 bytes per node; full NodeLists are 5-15 KiB per node.
    #[arg(long, default_value = "64Mi", value_parser = parse_size, env = "WATERLINE_MAX_BODY")]
    pub max_body: usize,

    /// Policy file (YAML); only `extender.scoreMapping` is read. Reloaded on change.
    /// `NAME=PATH` (repeatable) adds the verbs under `<prefix>/NAME/` answered with the
    /// scorer's policy of that name (which the scorer must serve: `--policy NAME=PATH`
    /// there too), one URL prefix per scheduler profile (docs/operations.md#policies-per-profile).
    #[arg(long, env = "WATERLINE_POLICY", value_parser = parse_policy_arg)]
    pub policy: Vec<PolicyArg>,

    /// Most candidate nodes accepted in one request (413 above it).
    #[arg(long, default_value_t = 10_000, env = "WATERLINE_MAX_NODES")]
    pub max_nodes: usize,

    /// Serve the bind verb: create the pod's Binding through the Kubernetes API
    /// (in-cluster config or KUBECONFIG), then Reserve it on the scorer. Off: bind answers an
    /// Error. Needs RBAC to get pods and create pods/binding.
    #[arg(long, env = "WATERLINE_ENABLE_BIND")]
    pub enable_bind: bool,

    /// How long filter's scores wait for the same pod's prioritize (answered from them
    /// instead of a second scorer call). A cycle takes milliseconds; older entries are from
    /// an earlier attempt.
    #[arg(long, default_value = "30s", value_parser = parse_std_duration, env = "WATERLINE_SCORE_CACHE_TTL")]
    pub score_cache_ttl: Duration,

    /// Most pods whose filter scores are kept for prioritize (0: no cache, prioritize calls
    /// Score).
    #[arg(long, default_value_t = 10_000, env = "WATERLINE_SCORE_CACHE_SIZE")]
    pub score_cache_size: usize,

    /// At prioritize, record the pod on the node it scored best as a provisional Reserve
    /// (expiring after --provisional-reserve-ttl unless the bind verb or the pod watch
    /// confirms it), so the next pods of a burst see it before the pod watch does.
    /// `--provisional-reserve=false` turns it off.
    #[arg(
        long,
        default_value_t = true,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        env = "WATERLINE_PROVISIONAL_RESERVE"
    )]
    pub provisional_reserve: bool,

    /// How long a provisional Reserve counts without confirmation. It only has to outlast
    /// the bind's way to the pod watch (seconds); a wrong guess is replaced by the watch
    /// as soon as the pod shows up on another node.
    #[arg(long, default_value = "15s", value_parser = parse_std_duration, env = "WATERLINE_PROVISIONAL_RESERVE_TTL")]
    pub provisional_reserve_ttl: Duration,

    #[command(flatten)]
    pub common: CommonArgs,
}

/// Why a `--max-body` value is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("{0}")]
    Quantity(waterline_core::quantity::QuantityError),
    #[error("'{0}' is too large")]
    TooLarge(String),
}

pub fn parse_size(text: &str) -> Result<usize, SizeError> {
    let bytes = waterline_core::quantity::parse_bytes(text).map_err(SizeError::Quantity)?;
    usize::try_from(bytes).map_err(|_| SizeError::TooLarge(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provisional_reserve_is_on_by_default_and_turned_off_with_false() {
        let parse = |extra: &[&str]| {
            Args::try_parse_from(["waterline-extender"].iter().chain(extra)).unwrap()
        };
        assert!(parse(&[]).provisional_reserve);
        assert!(parse(&["--provisional-reserve"]).provisional_reserve);
        assert!(!parse(&["--provisional-reserve=false"]).provisional_reserve);
        let args = parse(&["--provisional-reserve-ttl", "5s", "--score-cache-size", "0"]);
        assert_eq!(
            (args.provisional_reserve_ttl, args.score_cache_size),
            (Duration::from_secs(5), 0)
        );
    }
}
