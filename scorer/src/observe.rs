//! The scorer's housekeeping ticker: readiness once the first snapshot is in, the
//! snapshot's gauges (its age, nodes, stale nodes, ledger entries, the stale breakers) and
//! the one log line per breaker opening or closing.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use waterline_api::v1::scorer_service_server::ScorerServiceServer;
use waterline_core::{Policy, UnixMillis, engine};
use waterline_runtime::admin::Admin;
use waterline_runtime::policy::PolicyHandle;

use crate::service::Scorer;
use crate::store::Store;

/// `{metric="…"}`.
type MetricLabel = Vec<(String, String)>;

#[derive(Clone, Default)]
pub struct SnapshotGauges {
    age_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    nodes: Gauge,
    stale_nodes: Gauge,
    ledger_entries: Gauge,
    breaker_open: Family<MetricLabel, Gauge>,
}

impl SnapshotGauges {
    pub fn register(registry: &mut Registry) -> Self {
        let g = SnapshotGauges::default();
        registry.register(
            "waterline_snapshot_age_seconds",
            "Time since the last update from the collector",
            g.age_seconds.clone(),
        );
        registry.register(
            "waterline_nodes_known",
            "Nodes in the scorer's snapshot",
            g.nodes.clone(),
        );
        registry.register(
            "waterline_stale_nodes",
            "Nodes with at least one metric older than its max age",
            g.stale_nodes.clone(),
        );
        registry.register(
            "waterline_ledger_entries",
            "Placements in the scorer's ledger",
            g.ledger_entries.clone(),
        );
        registry.register(
            "waterline_stale_breaker_open",
            "1 while more than stale.breakerShare of the nodes reporting this metric are stale, so Filter and Score leave the metric out for every node",
            g.breaker_open.clone(),
        );
        g
    }
}

/// Every 250 ms: readiness and health once the first snapshot is in, the snapshot's age,
/// and the store's refresh; every 2 s the gauges that walk the snapshot. Health stays
/// SERVING after the first snapshot even if the collector goes away: the last snapshot is
/// still the best answer there is, and its age is exported.
pub async fn run(
    store: Arc<Store>,
    policy: PolicyHandle,
    gauges: SnapshotGauges,
    admin: Admin,
    health: tonic_health::server::HealthReporter,
) {
    let mut ticker = tokio::time::interval(Duration::from_millis(250));
    let mut breakers = BreakerLog::default();
    for tick in 0u64.. {
        ticker.tick().await;
        if store.is_synced() && !admin.is_ready() {
            admin.set_ready(true);
            health.set_serving::<ScorerServiceServer<Scorer>>().await;
            tracing::info!(nodes = store.read().node_count(), "first snapshot received; serving");
        }
        let now = UnixMillis::now();
        gauges.age_seconds.set(store.age(now).as_secs_f64());
        // Rows whose placements aged out, or a reloaded policy: off the request path.
        store.refresh(now);
        // The full pass below reads every node: once every 2 s is plenty.
        if tick % 8 != 0 {
            continue;
        }
        let policy = policy.get();
        let (nodes, stale, ledger) = {
            let snapshot = store.read();
            // The breaker reads the snapshot's index of sample times: no walk over the nodes.
            let open = engine::breakers(&policy, &snapshot, now);
            breakers.update(&policy, &open, &gauges.breaker_open);
            let stale = snapshot
                .nodes()
                .filter(|node| {
                    policy.metrics.iter().any(|m| {
                        snapshot
                            .metric_id(&m.name)
                            .and_then(|id| node.sample(id))
                            .is_none_or(|s| now.since(s.at) > m.max_age)
                    })
                })
                .count();
            (snapshot.node_count(), stale, snapshot.ledger().len())
        };
        gauges.nodes.set(nodes as i64);
        gauges.stale_nodes.set(stale as i64);
        gauges.ledger_entries.set(ledger as i64);
    }
}

/// The last breaker state per metric, so an opening and a closing are each logged once.
#[derive(Default)]
struct BreakerLog {
    open: std::collections::BTreeMap<String, bool>,
}

impl BreakerLog {
    /// `open[i]` is the breaker of `policy.metrics[i]`. Metrics that left the policy lose
    /// their gauge.
    fn update(&mut self, policy: &Policy, open: &[bool], gauge: &Family<MetricLabel, Gauge>) {
        self.open.retain(|metric, _| {
            let keep = policy.metric(metric).is_some();
            if !keep {
                gauge.remove(&vec![("metric".to_string(), metric.clone())]);
            }
            keep
        });
        for (spec, &is_open) in policy.metrics.iter().zip(open) {
            gauge
                .get_or_create(&vec![("metric".to_string(), spec.name.clone())])
                .set(i64::from(is_open));
            let was_open = self.open.insert(spec.name.clone(), is_open).unwrap_or(false);
            match (was_open, is_open) {
                (false, true) => tracing::warn!(
                    metric = %spec.name,
                    share = policy.stale.breaker_share,
                    "stale breaker open: more than this share of the nodes reporting the metric are stale; Filter and Score leave it out for every node until fresh samples return"
                ),
                (true, false) => tracing::info!(
                    metric = %spec.name,
                    "stale breaker closed: the metric's samples are fresh again on enough nodes; it counts again"
                ),
                _ => {}
            }
        }
    }
}
