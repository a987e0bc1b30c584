//! Command line: one subcommand per thing to drive, sharing the load and spawn flags.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args as ClapArgs, Parser, Subcommand};
use waterline_core::time::parse_std_duration;

/// Load generator for waterline's request paths.
///
/// Every run is bounded (by --duration or --requests, and a per-request --timeout), records
/// each request's latency in an HDR histogram, and prints throughput, p50/p90/p99/p99.9 and
/// the number of failed requests (any non-OK gRPC status or non-2xx HTTP answer).
///
/// With --spawn it starts its own `waterline-collector --synthetic-nodes N` and
/// `waterline-scorer` (and `waterline-extender` for the extender-* subcommands) from
/// --bin-dir on free loopback ports, waits until they are ready, and also reports their RSS
/// (VmRSS) and CPU time. Example, the Score RPC rate of BENCHMARKS.md:
///
///   waterline-bench score --spawn --cluster-nodes 5000 --nodes 100 --concurrency 32 --duration 10s
#[derive(Parser, Debug)]
#[command(name = "waterline-bench", version)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,

    /// Tokio worker threads of the load generator (it shares the machine with the servers).
    #[arg(long, global = true, default_value_t = 1)]
    pub threads: usize,

    /// Append the result as one JSON object per line to this file (for scripts/bench.sh).
    #[arg(long, global = true, value_name = "FILE")]
    pub json_out: Option<PathBuf>,

    /// Label stored with the JSON result.
    #[arg(long, global = true, default_value = "")]
    pub label: String,

    /// Do not draw the progress bar (it is hidden anyway when stderr is not a terminal).
    #[arg(long, global = true)]
    pub no_progress: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// ScorerService/Score over gRPC.
    Score(RpcArgs),
    /// ScorerService/Filter over gRPC.
    Filter(RpcArgs),
    /// ScorerService/Evaluate over gRPC: filter and score in one call; with
    /// --all-nodes every node the scorer knows, as the plugin's Session asks.
    Evaluate(RpcArgs),
    /// ScorerService/Session over gRPC, the way the scheduler plugin uses it: --concurrency
    /// streams, each running cycles of a Reserve written without waiting (the previous
    /// cycle's pod) then an Evaluate of every node, timed until its answer. Beside
    /// `evaluate --all-nodes` (the unary call) at the same --concurrency it shows what the
    /// stream adds or saves per round trip (BENCHMARKS.md). --nodes does not apply.
    ///
    ///   waterline-bench session --spawn --cluster-nodes 1000 --concurrency 1 --duration 10s
    Session(SessionArgs),
    /// ScorerService/Reserve over gRPC, one new pod per request, spread over the cluster's
    /// nodes (fills the ledger; e.g. --requests 50000 for the RSS benchmark).
    Reserve(RpcArgs),
    /// The extender's prioritize verb over HTTP with a names-only body (nodeCacheCapable).
    ExtenderPrioritize(HttpArgs),
    /// The extender's filter verb over HTTP with a names-only body (nodeCacheCapable).
    ExtenderFilter(HttpArgs),
    /// Resource use of a spawned collector and scorer: fills the ledger with --reserves
    /// Reserve RPCs, then reports VmRSS of both and the collector's CPU time per refresh
    /// over --duration.
    Footprint(FootprintArgs),
    /// A real Prometheus (/usr/bin/prometheus) holding the default policy's six recorded
    /// series for --cluster-nodes fake nodes (backfilled with promtool), and a spawned
    /// collector with --prometheus-url: first full refresh (wall time, PromQL requests,
    /// collector CPU and RSS) and the steady state over --steady.
    PrometheusRefresh(PrometheusArgs),
    /// A bounded soak of a spawned collector, scorer and extender: a steady load of gRPC
    /// Score, extender filter + prioritize (Evaluate) and Reserve/Unreserve churn for
    /// --duration, RSS and CPU of each process sampled from /proc every --sample-every
    /// (progress lines, --csv); fails unless RSS per live ledger entry and per node stay
    /// within --max-drift after --warmup (last third of the samples against the first). Pods are placed and deleted at
    /// the same rate, so the ledger is steady; the built-in policy's windows (absorbWindow
    /// 40 s, reserveTtl 120 s) make every entry stop counting and retire within the run.
    Soak(SoakArgs),
    /// What the recording rules cost a real Prometheus: for each --nodes size, a fake
    /// node-exporter with --cpus CPUs per node (the eight CPU modes of a real one, memory,
    /// disk and network series) scraped every --scrape-interval, a day of backfilled history
    /// (promtool), then each --rules file in turn; prints every rule group evaluation as it
    /// happens (prometheus_rule_group_last_duration_seconds, Prometheus's RSS and heap),
    /// the medians, each rule's samples loaded (peakSamples vs --query-max-samples), and a
    /// line fitted through the sizes, extrapolated to 5,000 nodes. Example (BENCHMARKS.md,
    /// "Recording rules at scale"):
    ///
    ///   waterline-bench recording-rules --nodes 500,1000,2000 --cpus 32 --rules deploy/prometheus/rules.yml --rules deploy/prometheus/rules-at-scale.yml
    RecordingRules(RecordingRulesArgs),
    /// BENCHMARKS.md's table of targets, rendered from the committed results
    /// (bench/results/*.json) into its generated block; runs no benchmark.
    /// `scripts/bench.sh --table` runs this.
    Table(TableArgs),
    /// Takes the medians of a `scripts/bench.sh` run (its target/bench/<time>/ directory)
    /// into the committed results that name a series of that run (their `from`), with the
    /// run's commit, date and machine; `scripts/bench.sh` runs it at the end.
    Record(RecordArgs),
}

#[derive(ClapArgs, Debug, Clone)]
pub struct TableArgs {
    /// Directory of the result files.
    #[arg(long, default_value = "bench/results")]
    pub results: PathBuf,

    /// The document whose generated block is rewritten.
    #[arg(long, default_value = "BENCHMARKS.md")]
    pub doc: PathBuf,

    /// Change nothing; fail when the block differs from what the results render.
    #[arg(long)]
    pub check: bool,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct RecordArgs {
    /// A scripts/bench.sh output directory (machine.txt and the *.jsonl files).
    #[arg(long, value_name = "DIR")]
    pub run: PathBuf,

    /// Directory of the result files.
    #[arg(long, default_value = "bench/results")]
    pub results: PathBuf,
}

/// How much load, and when to stop.
#[derive(ClapArgs, Debug, Clone)]
pub struct LoadArgs {
    /// Candidate node names per request: synthetic-00000, synthetic-00001, … (each request
    /// takes the next window of this many names, wrapping at --cluster-nodes).
    #[arg(long, default_value_t = 100)]
    pub nodes: usize,

    /// Requests in flight at once.
    #[arg(long, short = 'c', default_value_t = 16)]
    pub concurrency: usize,

    /// Connections the requests are spread over (HTTP/2 multiplexes on each for gRPC).
    #[arg(long, default_value_t = 1)]
    pub connections: usize,

    /// Stop after this long (e.g. 10s, 1m); the default when --requests is not given.
    #[arg(long, short = 'd', value_parser = parse_std_duration, default_value = "10s")]
    pub duration: Duration,

    /// Stop after this many requests (and at --duration, whichever comes first).
    #[arg(long, short = 'n')]
    pub requests: Option<u64>,

    /// Unrecorded warm-up before measuring (connections, caches, allocator).
    #[arg(long, value_parser = parse_std_duration, default_value = "1s")]
    pub warmup: Duration,

    /// A request taking longer than this fails (and is counted as an error).
    #[arg(long, value_parser = parse_std_duration, default_value = "5s")]
    pub timeout: Duration,
}

/// Starting the servers under test.
#[derive(ClapArgs, Debug, Clone)]
pub struct SpawnArgs {
    /// Start a collector (--synthetic-nodes --cluster-nodes) and a scorer (and, for the
    /// extender-* subcommands, an extender) from --bin-dir on free loopback ports.
    #[arg(long)]
    pub spawn: bool,

    /// Nodes in the cluster: the synthetic collector's size with --spawn, and where the
    /// candidate windows wrap.
    #[arg(long, default_value_t = 5000)]
    pub cluster_nodes: usize,

    /// Where the release binaries are (`cargo build --release --bins`).
    #[arg(long, default_value = "target/release", env = "WATERLINE_BIN_DIR")]
    pub bin_dir: PathBuf,

    /// How often the spawned synthetic collector refreshes every node (and streams them).
    #[arg(long, default_value = "5s")]
    pub synthetic_interval: String,

    /// Keep the spawned processes' logs in this directory (default: a temporary one).
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,

    /// Policy file for the spawned collector, scorer and extender (default: their built-in
    /// policy; `soak` writes its own when this is not given).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,

    /// More flags for the spawned collector (set by a subcommand's own options, e.g.
    /// `footprint --collector-shadow`).
    #[arg(skip)]
    pub collector_flags: Vec<String>,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct RpcArgs {
    /// Scorer gRPC URL (ignored with --spawn).
    #[arg(long, default_value = "http://127.0.0.1:50051", env = "WATERLINE_SCORER_URL")]
    pub scorer_url: String,

    /// Scorer admin URL, to read its own request-duration histogram (`/metrics`) before and
    /// after the run; set automatically with --spawn.
    #[arg(long)]
    pub scorer_admin: Option<String>,

    /// Ask for per-metric score terms (Score only).
    #[arg(long)]
    pub explain: bool,

    /// Filter and Evaluate only: ask about every node the scorer knows (`all_nodes`, what
    /// the scheduler plugin sends) instead of --nodes names; a Filter answer lists the
    /// rejected nodes only.
    #[arg(long)]
    pub all_nodes: bool,

    /// Score only: ask for bare scores in request order (ScoreRequest.scores_only, what the
    /// extender adapter and the scheduler plugin send) instead of name + score pairs.
    #[arg(long, conflicts_with = "explain")]
    pub scores_only: bool,

    #[command(flatten)]
    pub load: LoadArgs,

    #[command(flatten)]
    pub spawn: SpawnArgs,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct SessionArgs {
    /// Scorer gRPC URL (ignored with --spawn).
    #[arg(long, default_value = "http://127.0.0.1:50051", env = "WATERLINE_SCORER_URL")]
    pub scorer_url: String,

    /// Scorer admin URL, to read its own Session.Evaluate histogram (`/metrics`) before and
    /// after the run; set automatically with --spawn.
    #[arg(long)]
    pub scorer_admin: Option<String>,

    /// Evaluates only, no Reserve before each (what the Reserve costs the round trip).
    #[arg(long)]
    pub without_reserve: bool,

    #[command(flatten)]
    pub load: LoadArgs,

    #[command(flatten)]
    pub spawn: SpawnArgs,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct HttpArgs {
    /// Extender base URL, without the prefix (ignored with --spawn).
    #[arg(long, default_value = "http://127.0.0.1:8787", env = "WATERLINE_EXTENDER_URL")]
    pub extender_url: String,

    /// The extender's URL path prefix (its --prefix).
    #[arg(long, default_value = "/waterline/v1")]
    pub prefix: String,

    /// `spec.schedulerName` of the pod sent (must be one the extender scores for).
    #[arg(long, default_value = "waterline-scheduler")]
    pub scheduler_name: String,

    /// Also run the same load as gRPC Score (prioritize) or Filter (filter) against the
    /// scorer behind the extender, and report the difference of the p50s: the adapter's
    /// overhead. Needs --spawn or --scorer-url.
    #[arg(long)]
    pub compare_grpc: bool,

    /// Scorer gRPC URL for --compare-grpc without --spawn.
    #[arg(long)]
    pub scorer_url: Option<String>,

    #[command(flatten)]
    pub load: LoadArgs,

    #[command(flatten)]
    pub spawn: SpawnArgs,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct FootprintArgs {
    /// Reserve RPCs sent before measuring (each a new pod, round-robin over the nodes).
    #[arg(long, default_value_t = 50_000)]
    pub reserves: u64,

    /// Reserve RPCs in flight at once.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,

    /// Window over which the collector's CPU time is measured (idle, refreshing only).
    #[arg(long, value_parser = parse_std_duration, default_value = "30s")]
    pub duration: Duration,

    /// After the Reserves, wait at most this long for the scorer's forward queue to empty and
    /// the collector's ledger gauge to show --reserves entries (the time it took is reported).
    #[arg(long, value_parser = parse_std_duration, default_value = "120s")]
    pub drain_timeout: Duration,

    /// Then wait this long more before the "filled" reading.
    #[arg(long, value_parser = parse_std_duration, default_value = "3s")]
    pub settle: Duration,

    /// Start the collector with shadow mode on (`--shadow`): its judge keeps its view of
    /// the state beside the collector's own (the synthetic source has no pod watch, so no
    /// bind is judged; the view is fed all the same).
    #[arg(long)]
    pub collector_shadow: bool,

    #[command(flatten)]
    pub spawn: SpawnArgs,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct PrometheusArgs {
    /// Window after the first refresh over which PromQL requests and collector CPU are
    /// counted (the default policy's 5-minute metrics poll every 30 s).
    #[arg(long, value_parser = parse_std_duration, default_value = "35s")]
    pub steady: Duration,

    #[command(flatten)]
    pub spawn: SpawnArgs,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct SoakArgs {
    /// How long the load runs (warm-up included).
    #[arg(long, short = 'd', value_parser = parse_std_duration, default_value = "10m")]
    pub duration: Duration,

    /// Samples before this are shown but not judged (the allocator settles, provisional
    /// entries reach their steady number); the warm-up also lasts until the collector's
    /// ledger holds the --live-pods (the scorer forwards them one lane call at a time).
    #[arg(long, value_parser = parse_std_duration, default_value = "30s")]
    pub warmup: Duration,

    /// How often RSS, CPU and the ledger gauges are sampled (and a progress line printed).
    #[arg(long, value_parser = parse_std_duration, default_value = "10s")]
    pub sample_every: Duration,

    /// Largest allowed drift, in percent, of RSS per live ledger entry and of RSS per node,
    /// for every process: the median of the last third of the judged samples against the
    /// median of the first third.
    #[arg(long, default_value_t = 10.0)]
    pub max_drift: f64,

    /// gRPC Score calls per second (each over --nodes candidates).
    #[arg(long, default_value_t = 20.0)]
    pub score_rate: f64,

    /// Pods per second through the extender: filter (the scorer's Evaluate), then
    /// prioritize (which records a provisional Reserve, expiring after 15 s), each pod a
    /// new uid.
    #[arg(long, default_value_t = 5.0)]
    pub extender_rate: f64,

    /// Pods placed with gRPC Reserve before the load starts, and kept live throughout:
    /// each later Reserve of a new pod deletes the oldest one (Unreserve), so the ledger
    /// holds this many Reserve entries whatever rate the machine sustains.
    #[arg(long, default_value_t = 1000)]
    pub live_pods: u64,

    /// Reserve calls per second (each a new pod on the next node, plus the Unreserve of the
    /// oldest): a pod lives --live-pods / --reserve-rate seconds (50 s by default). The
    /// scorer forwards both to the collector; a forwarder that cannot keep up shows as a
    /// growing `waterline_forward_queued` and a collector ledger that falls behind.
    #[arg(long, default_value_t = 20.0)]
    pub reserve_rate: f64,

    /// Candidate nodes per Score and extender request.
    #[arg(long, default_value_t = 100)]
    pub nodes: usize,

    /// Requests of one kind in flight at most; a tick finding them all busy is counted as
    /// skipped (the load is then below its rate, and the summary says so).
    #[arg(long, default_value_t = 64)]
    pub max_in_flight: usize,

    /// A request taking longer than this fails.
    #[arg(long, value_parser = parse_std_duration, default_value = "5s")]
    pub timeout: Duration,

    /// Write every sample as a CSV row here.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,

    #[command(flatten)]
    pub spawn: SpawnArgs,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct RecordingRulesArgs {
    /// Fake node counts, one fresh Prometheus (and history) each, in this order.
    #[arg(long, value_delimiter = ',', default_value = "500,1000,2000")]
    pub nodes: Vec<usize>,

    /// CPUs per node (each has 8 `node_cpu_seconds_total` series: idle, iowait, irq, nice,
    /// softirq, steal, system, user).
    #[arg(long, default_value_t = 32)]
    pub cpus: u32,

    /// Rule files measured in turn on each Prometheus (repeatable; switched with
    /// `/-/reload`). Default: deploy/prometheus/rules.yml.
    #[arg(long = "rules", value_name = "FILE")]
    pub rules: Vec<PathBuf>,

    /// How much history to backfill before the first evaluation (the 1 d group needs a day
    /// to do its full work).
    #[arg(long, value_parser = parse_std_duration, default_value = "24h")]
    pub history: Duration,

    /// Spacing of the backfilled node-exporter samples. The default 300 s puts two samples in
    /// every 5-minute window (Prometheus 2.x windows include both ends), the fewest that
    /// `rate()` needs; live scrapes are denser, so the figure is a lower bound for the
    /// sample-decoding part (BENCHMARKS.md, "Recording rules at scale").
    #[arg(long, value_parser = parse_std_duration, default_value = "300s")]
    pub history_step: Duration,

    /// Length of each OpenMetrics file given to promtool (also its --max-block-duration): one
    /// block per window.
    #[arg(long, value_parser = parse_std_duration, default_value = "3h")]
    pub backfill_chunk: Duration,

    /// Scrape interval of the fake node-exporter targets (and the global evaluation interval).
    #[arg(long, value_parser = parse_std_duration, default_value = "30s")]
    pub scrape_interval: Duration,

    /// Rule groups with a longer interval are evaluated this often instead (the 1 d group's
    /// 5 min would make --evaluations take a quarter of an hour per size). `0s`: keep the
    /// files' intervals.
    #[arg(long, value_parser = parse_std_duration, default_value = "2m")]
    pub max_rule_interval: Duration,

    /// Evaluations of every group to take the median of, after the warm-up ones.
    #[arg(long, default_value_t = 3)]
    pub evaluations: usize,

    /// Evaluations of each group not counted (the first reads blocks from disk).
    #[arg(long, default_value_t = 1)]
    pub warmup_evaluations: usize,

    /// Give up waiting for evaluations after this long per rule file (what was evaluated is
    /// reported).
    #[arg(long, value_parser = parse_std_duration, default_value = "20m")]
    pub max_wait: Duration,

    /// Prometheus's --query.max-samples (its default is 50,000,000: a rule whose query loads
    /// more fails). Raise it to measure the cost of rules that would fail.
    #[arg(long, default_value_t = 50_000_000)]
    pub query_max_samples: u64,

    /// Load no rule file: run each rule's expression alone through the query API
    /// (--evaluations times) and report Prometheus's CPU seconds per evaluation (its
    /// scrape-only rate reported beside them), the evaluation time, the samples loaded and the peak RSS / heap
    /// while it runs. On a shared machine the CPU seconds are the figure to trust.
    #[arg(long)]
    pub isolated: bool,

    /// Stop (and kill Prometheus) when its RSS passes this many MiB.
    #[arg(long, default_value_t = 12_288)]
    pub max_rss_mib: u64,

    /// Stop when the machine's MemAvailable falls below this many MiB (the machine is shared,
    /// and has no swap).
    #[arg(long, default_value_t = 3_072)]
    pub min_free_mib: u64,
}

impl RecordingRulesArgs {
    /// --max-rule-interval, `None` for `0s`.
    pub fn interval_cap(&self) -> Option<Duration> {
        (!self.max_rule_interval.is_zero()).then_some(self.max_rule_interval)
    }
}
