//! A fake node-exporter: serves `node_cpu_seconds_total`, `node_memory_MemTotal_bytes` and
//! `node_memory_MemAvailable_bytes` for any number of fake nodes whose load the test sets, plus
//! [`openmetrics_history`] to give the same nodes a past (for `promtool tsdb
//! create-blocks-from openmetrics`; CPU and memory only).
//!
//! The extra dimensions of the shipped recording rules come with decoys the rules must
//! leave out: `node_filesystem_{avail,size}_bytes` for the root mount (ext4) beside a tmpfs
//! `/run`, an overlay and a full `/data` mount; `node_disk_io_time_seconds_total` for `sda`
//! beside a saturated `loop0` and `dm-0`; `node_network_{receive,transmit}_bytes_total` for
//! the physical `eth0` beside a much busier `lo` and `veth0a1b2c`.
//!
//! Each node is its own Prometheus target: the exporter serves `/nodes/<name>/metrics`, and
//! [`FakeExporter::scrape_configs`] lists one static target per node with `__metrics_path__`
//! and `instance` set, so the series reach Prometheus with the same labels as a real
//! node-exporter would give them:
//! - [`NodeLabel::Instance`]`("10.0.0.2:9100")`: no `node` label, `instance="10.0.0.2:9100"`
//!   (plain node-exporter scraped by node IP; the collector maps the IP to a node);
//! - [`NodeLabel::Node`]`("node-a")`: `node="node-a"` on every series (kube-prometheus with the
//!   relabelling in `deploy/prometheus/README.md`), and `instance="<fake name>:9100"`.
//!
//! CPU counters are integrated over time: the busy fraction of a node is the share of each
//! CPU's seconds that go to the non-idle modes (`user` 70 %, `system` 30 % of it), and when a
//! fraction changes the counters carry on from where they were, so `rate()` over any window
//! gives the time-weighted busy fraction, exactly like a real machine.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail, ensure};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::task::JoinHandle;

/// The `job` label of every series the fake exporter's targets produce (and of the history
/// [`openmetrics_history`] writes, so live and backfilled series are the same series).
pub const JOB_NAME: &str = "node-exporter";

/// Wall-clock now. The fake exporter's counters must follow the time the real Prometheus
/// scrapes on, not tokio's (pausable) clock, so the project's lint against
/// `std::time::Instant::now` does not apply here.
#[allow(clippy::disallowed_methods)]
pub fn wall_now() -> Instant {
    Instant::now()
}

/// Share of the busy CPU seconds counted in `mode="user"`; the rest goes to `mode="system"`.
const USER_SHARE: f64 = 0.7;

/// How a fake node's series identify the Kubernetes node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeLabel {
    /// No `node` label; Prometheus's `instance` label is this `IP:port`.
    Instance(String),
    /// Every series carries `node="<name>"`.
    Node(String),
}

/// One fake machine.
#[derive(Clone, Debug)]
pub struct FakeNode {
    /// Key for the setters and the URL path (`/nodes/<name>/metrics`): letters, digits, `-`,
    /// `.`, `_`.
    pub name: String,
    /// Number of CPUs (`cpu="0"` … `cpu="<cores-1>"`), at least 1.
    pub cores: u32,
    /// `node_memory_MemTotal_bytes`.
    pub memory_bytes: u64,
    /// Busy fraction of every CPU, 0..=1.
    pub cpu_busy: f64,
    /// Used memory fraction, 0..=1 (`MemAvailable = MemTotal × (1 − used)`).
    pub memory_used: f64,
    /// Label shape of the node's series.
    pub label: NodeLabel,
    /// Used fraction of the root filesystem, 0..=1.
    pub disk_used: f64,
    /// Busy fraction of `sda` (`node_disk_io_time_seconds_total`), 0..=1.
    pub disk_io_busy: f64,
    /// Bytes per second received and transmitted on the physical `eth0`.
    pub network_rx_bytes_per_second: f64,
    pub network_tx_bytes_per_second: f64,
    /// Which `mode` values `node_cpu_seconds_total` carries for each CPU.
    pub cpu_modes: CpuModes,
}

/// The `mode` label values of a fake node's `node_cpu_seconds_total`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CpuModes {
    /// `idle`, `system`, `user`: enough for the rules' ratio, three series per CPU.
    #[default]
    Simple,
    /// The eight of a real Linux node-exporter (`idle`, `iowait`, `irq`, `nice`, `softirq`,
    /// `steal`, `system`, `user`): eight series per CPU, for measuring rules at real series
    /// counts (`waterline-bench recording-rules`).
    NodeExporter,
}

/// How the busy seconds of a CPU split over the non-idle modes of [`CpuModes::NodeExporter`]
/// (sums to 1; `user` and `system` take most, as on a typical worker node).
const NODE_EXPORTER_BUSY_SPLIT: [(&str, f64); 7] = [
    ("iowait", 0.05),
    ("irq", 0.02),
    ("nice", 0.05),
    ("softirq", 0.05),
    ("steal", 0.03),
    ("system", 0.20),
    ("user", 0.60),
];

impl CpuModes {
    /// Each mode's counter, in seconds, for a CPU that has been `busy` and `idle` seconds so
    /// far (the non-idle modes share `busy`).
    pub fn split(self, busy: f64, idle: f64) -> Vec<(&'static str, f64)> {
        match self {
            CpuModes::Simple => cpu_modes(busy, idle).to_vec(),
            CpuModes::NodeExporter => std::iter::once(("idle", idle))
                .chain(NODE_EXPORTER_BUSY_SPLIT.iter().map(|&(mode, share)| (mode, busy * share)))
                .collect(),
        }
    }
}

/// Size of every fake filesystem: 100 GiB.
pub const FILESYSTEM_BYTES: u64 = 100 << 30;
/// What the decoy interfaces (`lo`, a veth) carry: far more than any physical test rate.
const DECOY_BYTES_PER_SECOND: f64 = 5e9;

impl FakeNode {
    /// A node with 4 CPUs and 16 GiB, idle, labelled `node="<name>"`.
    pub fn new(name: impl Into<String>) -> FakeNode {
        let name = name.into();
        FakeNode {
            label: NodeLabel::Node(name.clone()),
            name,
            cores: 4,
            memory_bytes: 16 << 30,
            cpu_busy: 0.0,
            memory_used: 0.0,
            disk_used: 0.0,
            disk_io_busy: 0.0,
            network_rx_bytes_per_second: 0.0,
            network_tx_bytes_per_second: 0.0,
            cpu_modes: CpuModes::Simple,
        }
    }

    /// Same node with the eight CPU modes of a real node-exporter ([`CpuModes::NodeExporter`]).
    pub fn with_cpu_modes(mut self, modes: CpuModes) -> FakeNode {
        self.cpu_modes = modes;
        self
    }

    pub fn with_disk_used(mut self, fraction: f64) -> FakeNode {
        self.disk_used = fraction;
        self
    }

    pub fn with_disk_io_busy(mut self, fraction: f64) -> FakeNode {
        self.disk_io_busy = fraction;
        self
    }

    /// Bytes per second received and transmitted on `eth0`.
    pub fn with_network(mut self, rx_bytes_per_second: f64, tx_bytes_per_second: f64) -> FakeNode {
        self.network_rx_bytes_per_second = rx_bytes_per_second;
        self.network_tx_bytes_per_second = tx_bytes_per_second;
        self
    }

    /// Same node, identified by `instance="<ip_port>"` and no `node` label.
    pub fn with_instance(mut self, ip_port: impl Into<String>) -> FakeNode {
        self.label = NodeLabel::Instance(ip_port.into());
        self
    }

    pub fn with_cores(mut self, cores: u32) -> FakeNode {
        self.cores = cores;
        self
    }

    pub fn with_memory_bytes(mut self, bytes: u64) -> FakeNode {
        self.memory_bytes = bytes;
        self
    }

    pub fn with_cpu_busy(mut self, fraction: f64) -> FakeNode {
        self.cpu_busy = fraction;
        self
    }

    pub fn with_memory_used(mut self, fraction: f64) -> FakeNode {
        self.memory_used = fraction;
        self
    }

    /// The `instance` label Prometheus gives this node's series: the `IP:port` of
    /// [`NodeLabel::Instance`], or `<name>:9100` for [`NodeLabel::Node`].
    pub fn instance(&self) -> String {
        match &self.label {
            NodeLabel::Instance(ip_port) => ip_port.clone(),
            NodeLabel::Node(_) => format!("{}:9100", self.name),
        }
    }

    /// The `node` label of this node's series, if it has one.
    pub fn node_label(&self) -> Option<&str> {
        match &self.label {
            NodeLabel::Instance(_) => None,
            NodeLabel::Node(node) => Some(node),
        }
    }

    /// Selector matching this node's series in PromQL, e.g. `{instance="10.0.0.2:9100"}` or
    /// `{instance="node-a:9100",node="node-a"}`.
    pub fn selector(&self) -> String {
        match self.node_label() {
            Some(node) => format!(r#"{{instance="{}",node="{}"}}"#, self.instance(), node),
            None => format!(r#"{{instance="{}"}}"#, self.instance()),
        }
    }

    fn validate(&self) -> Result<()> {
        ensure!(
            !self.name.is_empty()
                && self
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')),
            "fake node name {:?}: use letters, digits, '-', '.', '_'",
            self.name
        );
        ensure!(self.cores >= 1, "fake node {}: cores must be >= 1", self.name);
        check_fraction(&self.name, "cpu_busy", self.cpu_busy)?;
        check_fraction(&self.name, "memory_used", self.memory_used)?;
        check_fraction(&self.name, "disk_used", self.disk_used)?;
        check_fraction(&self.name, "disk_io_busy", self.disk_io_busy)?;
        check_rate(&self.name, self.network_rx_bytes_per_second)?;
        check_rate(&self.name, self.network_tx_bytes_per_second)?;
        if let NodeLabel::Instance(ip_port) = &self.label {
            ensure!(
                ip_port.parse::<SocketAddr>().is_ok(),
                "fake node {}: instance {ip_port:?} is not IP:port",
                self.name
            );
        }
        Ok(())
    }
}

fn check_fraction(node: &str, what: &str, f: f64) -> Result<()> {
    ensure!((0.0..=1.0).contains(&f), "fake node {node}: {what} = {f} is outside 0..=1");
    Ok(())
}

fn check_rate(node: &str, bytes_per_second: f64) -> Result<()> {
    ensure!(
        bytes_per_second.is_finite() && bytes_per_second >= 0.0,
        "fake node {node}: network rate {bytes_per_second} must be a finite number >= 0"
    );
    Ok(())
}

/// A fake node's load at one moment (fractions 0..=1), for [`openmetrics_history`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeLoad {
    pub cpu_busy: f64,
    pub memory_used: f64,
}

struct NodeState {
    spec: FakeNode,
    /// Busy and idle seconds of each CPU so far (all CPUs of a node are alike).
    busy_seconds: f64,
    idle_seconds: f64,
    /// `sda`'s busy seconds, `eth0`'s bytes, and the seconds since start (the decoys').
    io_seconds: f64,
    rx_bytes: f64,
    tx_bytes: f64,
    elapsed_seconds: f64,
    last_update: Instant,
    serving: bool,
}

impl NodeState {
    fn new(spec: FakeNode, now: Instant) -> NodeState {
        NodeState {
            spec,
            busy_seconds: 0.0,
            idle_seconds: 0.0,
            io_seconds: 0.0,
            rx_bytes: 0.0,
            tx_bytes: 0.0,
            elapsed_seconds: 0.0,
            last_update: now,
            serving: true,
        }
    }

    /// Brings the counters up to `now` at the current rates.
    fn integrate(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last_update).as_secs_f64();
        self.busy_seconds += dt * self.spec.cpu_busy;
        self.idle_seconds += dt * (1.0 - self.spec.cpu_busy);
        self.io_seconds += dt * self.spec.disk_io_busy;
        self.rx_bytes += dt * self.spec.network_rx_bytes_per_second;
        self.tx_bytes += dt * self.spec.network_tx_bytes_per_second;
        self.elapsed_seconds += dt;
        self.last_update = now;
    }
}

type Nodes = Arc<Mutex<BTreeMap<String, NodeState>>>;

/// The running fake exporter. Dropping it stops the server.
pub struct FakeExporter {
    addr: SocketAddr,
    nodes: Nodes,
    task: JoinHandle<()>,
}

impl FakeExporter {
    /// Serves the nodes on `127.0.0.1:<free port>` from a task on the current tokio runtime.
    /// Every node's CPU counters start at 0 now.
    pub async fn start(nodes: Vec<FakeNode>) -> Result<FakeExporter> {
        let now = wall_now();
        let mut map = BTreeMap::new();
        for spec in nodes {
            spec.validate()?;
            let name = spec.name.clone();
            let state = NodeState::new(spec, now);
            ensure!(map.insert(name.clone(), state).is_none(), "fake node {name} listed twice");
        }
        let nodes: Nodes = Arc::new(Mutex::new(map));
        let app = Router::new()
            .route("/metrics", get(all_metrics))
            .route("/nodes/{name}/metrics", get(node_metrics))
            .with_state(nodes.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the fake exporter")?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("fake exporter on {addr} stopped: {e}");
            }
        });
        Ok(FakeExporter { addr, nodes, task })
    }

    /// Where the exporter listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// URL of one node's metrics page.
    pub fn node_url(&self, name: &str) -> String {
        format!("http://{}/nodes/{name}/metrics", self.addr)
    }

    /// The specs of the nodes as they are now (with the current fractions).
    pub fn nodes(&self) -> Vec<FakeNode> {
        self.lock().values().map(|s| s.spec.clone()).collect()
    }

    /// Sets a node's busy CPU fraction from now on; counters carry on from where they are.
    pub fn set_cpu_busy(&self, name: &str, fraction: f64) -> Result<()> {
        check_fraction(name, "cpu_busy", fraction)?;
        self.with_node(name, |state| {
            state.integrate(wall_now());
            state.spec.cpu_busy = fraction;
        })
    }

    /// Sets a node's used memory fraction from now on.
    pub fn set_memory_used(&self, name: &str, fraction: f64) -> Result<()> {
        check_fraction(name, "memory_used", fraction)?;
        self.with_node(name, |state| state.spec.memory_used = fraction)
    }

    /// Sets a node's used fraction of its root filesystem.
    pub fn set_disk_used(&self, name: &str, fraction: f64) -> Result<()> {
        check_fraction(name, "disk_used", fraction)?;
        self.with_node(name, |state| state.spec.disk_used = fraction)
    }

    /// Sets `sda`'s busy fraction from now on; the counter carries on from where it is.
    pub fn set_disk_io_busy(&self, name: &str, fraction: f64) -> Result<()> {
        check_fraction(name, "disk_io_busy", fraction)?;
        self.with_node(name, |state| {
            state.integrate(wall_now());
            state.spec.disk_io_busy = fraction;
        })
    }

    /// Sets `eth0`'s receive and transmit rates from now on.
    pub fn set_network(&self, name: &str, rx_bytes_per_second: f64, tx: f64) -> Result<()> {
        check_rate(name, rx_bytes_per_second)?;
        check_rate(name, tx)?;
        self.with_node(name, |state| {
            state.integrate(wall_now());
            state.spec.network_rx_bytes_per_second = rx_bytes_per_second;
            state.spec.network_tx_bytes_per_second = tx;
        })
    }

    /// `false` makes the node's page answer 503 (its target goes `up == 0` and its series
    /// go stale in Prometheus, like a dead node-exporter); `true` brings it back with its
    /// counters continued.
    pub fn set_serving(&self, name: &str, serving: bool) -> Result<()> {
        self.with_node(name, |state| state.serving = serving)
    }

    /// The node's page as Prometheus would scrape it now.
    pub fn render(&self, name: &str) -> Result<String> {
        let mut nodes = self.lock();
        let state = nodes.get_mut(name).ok_or_else(|| anyhow!("no fake node {name}"))?;
        state.integrate(wall_now());
        Ok(render_nodes(std::iter::once(&*state)))
    }

    /// `scrape_configs` entries (a YAML block sequence starting at column 0, for a
    /// `scrape_configs:` key at column 0) with one static target per node, job
    /// [`JOB_NAME`]. The scrape interval is the global one.
    pub fn scrape_configs(&self) -> String {
        let mut yaml = format!("- job_name: {JOB_NAME}\n  static_configs:\n");
        for state in self.lock().values() {
            let node = &state.spec;
            let _ = write!(
                yaml,
                "    - targets: ['{addr}']\n      labels:\n        __metrics_path__: /nodes/{name}/metrics\n        instance: '{instance}'\n",
                addr = self.addr,
                name = node.name,
                instance = node.instance(),
            );
        }
        yaml
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, NodeState>> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with_node(&self, name: &str, f: impl FnOnce(&mut NodeState)) -> Result<()> {
        let mut nodes = self.lock();
        let state = nodes.get_mut(name).ok_or_else(|| anyhow!("no fake node {name}"))?;
        f(state);
        Ok(())
    }
}

impl Drop for FakeExporter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `/metrics`: every node that carries a `node` label (the others could not be told apart
/// on one page). Not used by [`FakeExporter::scrape_configs`]; for single-target setups.
async fn all_metrics(State(nodes): State<Nodes>) -> Response {
    let mut nodes = nodes.lock().unwrap_or_else(|e| e.into_inner());
    let now = wall_now();
    for state in nodes.values_mut() {
        state.integrate(now);
    }
    let body = render_nodes(nodes.values().filter(|s| s.serving && s.spec.node_label().is_some()));
    text_response(body)
}

async fn node_metrics(State(nodes): State<Nodes>, Path(name): Path<String>) -> Response {
    let mut nodes = nodes.lock().unwrap_or_else(|e| e.into_inner());
    let Some(state) = nodes.get_mut(&name) else {
        return (StatusCode::NOT_FOUND, format!("no fake node {name}\n")).into_response();
    };
    if !state.serving {
        return (StatusCode::SERVICE_UNAVAILABLE, "fake node down\n").into_response();
    }
    state.integrate(wall_now());
    text_response(render_nodes(std::iter::once(&*state)))
}

fn text_response(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body).into_response()
}

/// Prometheus text format 0.0.4 for the given nodes (one HELP/TYPE per family).
fn render_nodes<'a>(states: impl Iterator<Item = &'a NodeState> + Clone) -> String {
    let mut out = String::new();
    out.push_str("# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.\n");
    out.push_str("# TYPE node_cpu_seconds_total counter\n");
    for s in states.clone() {
        let extra = extra_labels(&s.spec);
        for (mode, value) in s.spec.cpu_modes.split(s.busy_seconds, s.idle_seconds) {
            for cpu in 0..s.spec.cores {
                let _ = writeln!(
                    out,
                    "node_cpu_seconds_total{{cpu=\"{cpu}\",mode=\"{mode}\"{extra}}} {value}"
                );
            }
        }
    }
    out.push_str(
        "# HELP node_memory_MemAvailable_bytes Memory information field MemAvailable_bytes.\n",
    );
    out.push_str("# TYPE node_memory_MemAvailable_bytes gauge\n");
    for s in states.clone() {
        let _ = writeln!(
            out,
            "node_memory_MemAvailable_bytes{} {}",
            braces(&s.spec),
            mem_available(&s.spec, s.spec.memory_used)
        );
    }
    out.push_str("# HELP node_memory_MemTotal_bytes Memory information field MemTotal_bytes.\n");
    out.push_str("# TYPE node_memory_MemTotal_bytes gauge\n");
    for s in states.clone() {
        let _ =
            writeln!(out, "node_memory_MemTotal_bytes{} {}", braces(&s.spec), s.spec.memory_bytes);
    }
    render_dimensions(&mut out, states);
    out
}

/// The filesystems of a fake node: (mountpoint, device, fstype, used fraction).
fn filesystems(node: &FakeNode) -> [(&'static str, &'static str, &'static str, f64); 4] {
    [
        ("/", "/dev/sda1", "ext4", node.disk_used),
        ("/run", "tmpfs", "tmpfs", 0.5),
        ("/var/lib/docker/overlay2/0f3c/merged", "overlay", "overlay", 0.99),
        ("/data", "/dev/sdb1", "ext4", 0.95),
    ]
}

/// Disk space, disk IO and network families, each with its decoys.
fn render_dimensions<'a>(out: &mut String, states: impl Iterator<Item = &'a NodeState> + Clone) {
    for (family, help, avail) in [
        (
            "node_filesystem_avail_bytes",
            "Filesystem space available to non-root users in bytes.",
            true,
        ),
        ("node_filesystem_size_bytes", "Filesystem size in bytes.", false),
    ] {
        let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} gauge");
        for s in states.clone() {
            let extra = extra_labels(&s.spec);
            for (mountpoint, device, fstype, used) in filesystems(&s.spec) {
                let size = FILESYSTEM_BYTES as f64;
                let value = if avail { (size * (1.0 - used)).round() } else { size };
                let _ = writeln!(
                    out,
                    "{family}{{device=\"{device}\",fstype=\"{fstype}\",mountpoint=\"{mountpoint}\"{extra}}} {value}"
                );
            }
        }
    }
    out.push_str("# HELP node_disk_io_time_seconds_total Total seconds spent doing I/Os.\n");
    out.push_str("# TYPE node_disk_io_time_seconds_total counter\n");
    for s in states.clone() {
        let extra = extra_labels(&s.spec);
        for (device, value) in
            [("sda", s.io_seconds), ("loop0", s.elapsed_seconds), ("dm-0", s.elapsed_seconds)]
        {
            let _ = writeln!(
                out,
                "node_disk_io_time_seconds_total{{device=\"{device}\"{extra}}} {value}"
            );
        }
    }
    for (family, direction) in [
        ("node_network_receive_bytes_total", "received"),
        ("node_network_transmit_bytes_total", "transmitted"),
    ] {
        let _ = writeln!(
            out,
            "# HELP {family} Network device statistic {direction} bytes.\n# TYPE {family} counter"
        );
        for s in states.clone() {
            let extra = extra_labels(&s.spec);
            let physical = if direction == "received" { s.rx_bytes } else { s.tx_bytes };
            let decoy = s.elapsed_seconds * DECOY_BYTES_PER_SECOND;
            for (device, value) in [("eth0", physical), ("lo", decoy), ("veth0a1b2c", decoy)] {
                let _ = writeln!(out, "{family}{{device=\"{device}\"{extra}}} {value}");
            }
        }
    }
}

fn cpu_modes(busy: f64, idle: f64) -> [(&'static str, f64); 3] {
    [("idle", idle), ("system", busy * (1.0 - USER_SHARE)), ("user", busy * USER_SHARE)]
}

fn mem_available(node: &FakeNode, used: f64) -> u64 {
    (node.memory_bytes as f64 * (1.0 - used)).round() as u64
}

/// `,node="x"` or nothing: the labels a node's live page carries besides cpu/mode.
fn extra_labels(node: &FakeNode) -> String {
    match node.node_label() {
        Some(n) => format!(",node=\"{n}\""),
        None => String::new(),
    }
}

fn braces(node: &FakeNode) -> String {
    match node.node_label() {
        Some(n) => format!("{{node=\"{n}\"}}"),
        None => String::new(),
    }
}

/// OpenMetrics text (ending in `# EOF`, timestamps in seconds) with the same series the live
/// exporter's targets produce in Prometheus — `job`="[`JOB_NAME`]", `instance` and `node`
/// labels included — sampled every `step` from `start` to `end` (both included when `end` is
/// on the grid). The load in force during `(t - step, t]` is `value_fn(node, t)`; CPU counters
/// start at 0 at `start` and are integrated like the live ones. Feed it to
/// [`crate::prometheus::backfill`] / [`crate::prometheus::PrometheusConfig::backfill`].
///
/// Make the history end at (or just before) the moment Prometheus starts: samples a live
/// scrape adds later must be newer than the backfilled blocks, and a counter that restarts
/// from 0 on the live side is just a counter reset to `rate()`.
pub fn openmetrics_history(
    nodes: &[FakeNode],
    start: SystemTime,
    end: SystemTime,
    step: Duration,
    value_fn: impl Fn(&FakeNode, SystemTime) -> NodeLoad,
) -> Result<String> {
    ensure!(!step.is_zero(), "history step must be > 0");
    ensure!(end >= start, "history end is before its start");
    for node in nodes {
        node.validate()?;
    }
    let start_s = unix_seconds(start)?;
    let end_s = unix_seconds(end)?;
    let step_s = step.as_secs_f64();
    let steps = ((end_s - start_s) / step_s + 1e-9).floor() as u64;

    // One row of samples per time point and node, grouped per family below.
    struct Row {
        t: f64,
        busy: f64,
        idle: f64,
        used: f64,
    }
    let mut rows: Vec<Vec<Row>> = Vec::with_capacity(nodes.len());
    for node in nodes {
        let mut node_rows = Vec::with_capacity(steps as usize + 1);
        let (mut busy, mut idle) = (0.0_f64, 0.0_f64);
        for i in 0..=steps {
            let t = start_s + i as f64 * step_s;
            let at = UNIX_EPOCH + Duration::from_secs_f64(t);
            let load = value_fn(node, at);
            check_fraction(&node.name, "history cpu_busy", load.cpu_busy)?;
            check_fraction(&node.name, "history memory_used", load.memory_used)?;
            if i > 0 {
                busy += step_s * load.cpu_busy;
                idle += step_s * (1.0 - load.cpu_busy);
            }
            node_rows.push(Row { t, busy, idle, used: load.memory_used });
        }
        rows.push(node_rows);
    }

    let labels = |node: &FakeNode| -> String {
        let mut l = format!("instance=\"{}\",job=\"{JOB_NAME}\"", node.instance());
        if let Some(n) = node.node_label() {
            let _ = write!(l, ",node=\"{n}\"");
        }
        l
    };
    let mut out = String::new();
    out.push_str("# HELP node_cpu_seconds Seconds the CPUs spent in each mode.\n");
    out.push_str("# TYPE node_cpu_seconds counter\n");
    for (node, node_rows) in nodes.iter().zip(&rows) {
        let l = labels(node);
        for cpu in 0..node.cores {
            for mode_index in 0..node.cpu_modes.split(0.0, 0.0).len() {
                for r in node_rows {
                    let (mode, value) = node.cpu_modes.split(r.busy, r.idle)[mode_index];
                    let _ = writeln!(
                        out,
                        "node_cpu_seconds_total{{cpu=\"{cpu}\",mode=\"{mode}\",{l}}} {value} {}",
                        fmt_ts(r.t)
                    );
                }
            }
        }
    }
    out.push_str(
        "# HELP node_memory_MemAvailable_bytes Memory information field MemAvailable_bytes.\n",
    );
    out.push_str("# TYPE node_memory_MemAvailable_bytes gauge\n");
    for (node, node_rows) in nodes.iter().zip(&rows) {
        let l = labels(node);
        for r in node_rows {
            let _ = writeln!(
                out,
                "node_memory_MemAvailable_bytes{{{l}}} {} {}",
                mem_available(node, r.used),
                fmt_ts(r.t)
            );
        }
    }
    out.push_str("# HELP node_memory_MemTotal_bytes Memory information field MemTotal_bytes.\n");
    out.push_str("# TYPE node_memory_MemTotal_bytes gauge\n");
    for (node, node_rows) in nodes.iter().zip(&rows) {
        let l = labels(node);
        for r in node_rows {
            let _ = writeln!(
                out,
                "node_memory_MemTotal_bytes{{{l}}} {} {}",
                node.memory_bytes,
                fmt_ts(r.t)
            );
        }
    }
    out.push_str("# EOF\n");
    Ok(out)
}

/// [`openmetrics_history`] plus the disk IO and network counters of the extra dimensions,
/// each node at its spec's constant rates (so a `rate(...[5m])` reads its full value from the
/// first live evaluation on, instead of the share of the window the live scrapes cover).
pub fn openmetrics_history_with_dimensions(
    nodes: &[FakeNode],
    start: SystemTime,
    end: SystemTime,
    step: Duration,
    value_fn: impl Fn(&FakeNode, SystemTime) -> NodeLoad,
) -> Result<String> {
    let base = openmetrics_history(nodes, start, end, step, value_fn)?;
    let mut out = base.strip_suffix("# EOF\n").context("history without # EOF")?.to_owned();
    let start_s = unix_seconds(start)?;
    let end_s = unix_seconds(end)?;
    let step_s = step.as_secs_f64();
    let steps = ((end_s - start_s) / step_s + 1e-9).floor() as u64;
    let labels = |node: &FakeNode, device: &str| -> String {
        let mut l =
            format!("device=\"{device}\",instance=\"{}\",job=\"{JOB_NAME}\"", node.instance());
        if let Some(n) = node.node_label() {
            let _ = write!(l, ",node=\"{n}\"");
        }
        l
    };
    type Rate = fn(&FakeNode) -> f64;
    let families: [(&str, &str, Rate); 3] = [
        ("node_disk_io_time_seconds", "sda", |n| n.disk_io_busy),
        ("node_network_receive_bytes", "eth0", |n| n.network_rx_bytes_per_second),
        ("node_network_transmit_bytes", "eth0", |n| n.network_tx_bytes_per_second),
    ];
    for (family, device, rate) in families {
        let _ =
            writeln!(out, "# HELP {family} Fake node-exporter counter.\n# TYPE {family} counter");
        for node in nodes {
            let l = labels(node, device);
            for i in 0..=steps {
                let t = start_s + i as f64 * step_s;
                let value = rate(node) * i as f64 * step_s;
                let _ = writeln!(out, "{family}_total{{{l}}} {value} {}", fmt_ts(t));
            }
        }
    }
    out.push_str("# EOF\n");
    Ok(out)
}

fn unix_seconds(t: SystemTime) -> Result<f64> {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Ok(d.as_secs_f64()),
        Err(_) => bail!("time before the Unix epoch"),
    }
}

/// Seconds with millisecond precision (OpenMetrics timestamps are seconds; promtool silently
/// misreads milliseconds as seconds far in the future).
fn fmt_ts(t: f64) -> String {
    format!("{:.3}", t)
}

/// The recording-rule tests' two nodes: node-a (4 cores) at 20 % cpu / 30 % memory, with
/// 90 % / 85 % for half an hour three hours before `now`; node-b (2 cores, identified by
/// IP:port) flat at 50 % / 60 %. With the load function their history is generated from.
pub fn two_nodes_with_a_spike_3h_ago(
    now: SystemTime,
) -> (Vec<FakeNode>, impl Fn(&FakeNode, SystemTime) -> NodeLoad + Clone) {
    let spiky = FakeNode::new("node-a").with_cores(4).with_cpu_busy(0.20).with_memory_used(0.30);
    let flat = FakeNode::new("node-b")
        .with_instance("10.0.0.2:9100")
        .with_cores(2)
        .with_cpu_busy(0.50)
        .with_memory_used(0.60);
    let spike = (
        now - Duration::from_secs(3 * 3600 + 15 * 60),
        now - Duration::from_secs(3 * 3600 - 15 * 60),
    );
    let load = move |node: &FakeNode, t: SystemTime| {
        if node.name == "node-a" && t > spike.0 && t <= spike.1 {
            NodeLoad { cpu_busy: 0.90, memory_used: 0.85 }
        } else {
            NodeLoad { cpu_busy: node.cpu_busy, memory_used: node.memory_used }
        }
    };
    (vec![spiky, flat], load)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value_of(page: &str, prefix: &str) -> f64 {
        let line = page
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting with {prefix} in\n{page}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }

    #[tokio::test]
    async fn counters_integrate_across_changes() {
        let exp = FakeExporter::start(vec![
            FakeNode::new("a").with_cores(2).with_cpu_busy(0.25).with_memory_used(0.5),
            FakeNode::new("b").with_instance("10.0.0.2:9100"),
        ])
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        exp.set_cpu_busy("a", 1.0).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let page = reqwest::get(exp.node_url("a")).await.unwrap().text().await.unwrap();
        let idle = value_of(&page, r#"node_cpu_seconds_total{cpu="1",mode="idle",node="a"}"#);
        let user = value_of(&page, r#"node_cpu_seconds_total{cpu="1",mode="user",node="a"}"#);
        let system = value_of(&page, r#"node_cpu_seconds_total{cpu="1",mode="system",node="a"}"#);
        // 0.2 s at 25 % busy, then ≥ 0.2 s at 100 %: idle stays at ≈ 0.15 s.
        assert!((idle - 0.15).abs() < 0.03, "idle {idle}\n{page}");
        assert!(user + system > 0.2 + 0.05 - 0.01, "busy {}", user + system);
        assert!((user / (user + system) - USER_SHARE).abs() < 1e-9);
        let total = value_of(&page, r#"node_memory_MemTotal_bytes{node="a"}"#);
        let avail = value_of(&page, r#"node_memory_MemAvailable_bytes{node="a"}"#);
        assert_eq!(avail / total, 0.5);

        let page_b = exp.render("b").unwrap();
        assert!(page_b.contains("node_cpu_seconds_total{cpu=\"3\",mode=\"idle\"} "));
        assert!(!page_b.contains("node="), "{page_b}");
        // /metrics lists only the node-labelled nodes.
        let all = reqwest::get(format!("http://{}/metrics", exp.addr()))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(all.contains("node=\"a\"") && !all.contains("mode=\"idle\"} "));

        exp.set_serving("a", false).unwrap();
        let status = reqwest::get(exp.node_url("a")).await.unwrap().status();
        assert_eq!(status, 503);
        assert!(exp.set_cpu_busy("a", 1.5).is_err());
        assert!(exp.set_cpu_busy("nope", 0.5).is_err());

        let yaml = exp.scrape_configs();
        assert!(yaml.contains("__metrics_path__: /nodes/b/metrics"));
        assert!(yaml.contains("instance: '10.0.0.2:9100'"));
        assert!(yaml.contains("instance: 'a:9100'"));
    }

    #[test]
    fn node_exporter_modes_split_the_busy_seconds() {
        let modes = CpuModes::NodeExporter.split(10.0, 30.0);
        let names: Vec<&str> = modes.iter().map(|m| m.0).collect();
        assert_eq!(names, ["idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user"]);
        assert_eq!(modes[0].1, 30.0);
        // 10 busy seconds: 0.5 + 0.2 + 0.5 + 0.5 + 0.3 + 2 + 6.
        let busy: f64 = modes[1..].iter().map(|m| m.1).sum();
        assert!((busy - 10.0).abs() < 1e-9, "{busy}");
        assert_eq!(CpuModes::Simple.split(10.0, 30.0), cpu_modes(10.0, 30.0).to_vec());
    }

    #[test]
    fn history_is_openmetrics_in_seconds() {
        let nodes = [FakeNode::new("a").with_cores(1).with_memory_bytes(1000)];
        let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let text = openmetrics_history(
            &nodes,
            start,
            start + Duration::from_secs(120),
            Duration::from_secs(60),
            |_, t| NodeLoad {
                cpu_busy: if t > start + Duration::from_secs(60) { 0.5 } else { 0.25 },
                memory_used: 0.3,
            },
        )
        .unwrap();
        assert!(text.ends_with("# EOF\n"));
        assert!(text.contains(
            "node_cpu_seconds_total{cpu=\"0\",mode=\"idle\",instance=\"a:9100\",job=\"node-exporter\",node=\"a\"} 0 1800000000.000\n"
        ));
        // 60 s at 25 % then 60 s at 50 %: idle 45 + 30.
        assert!(text.contains("mode=\"idle\",instance=\"a:9100\",job=\"node-exporter\",node=\"a\"} 75 1800000120.000\n"), "{text}");
        assert!(text.contains("node_memory_MemAvailable_bytes{instance=\"a:9100\",job=\"node-exporter\",node=\"a\"} 700 1800000060.000\n"));
    }
}
