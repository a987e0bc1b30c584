//! Every node's history, fed one NodeMetrics list at a time, and the samples a policy
//! metric reads from it. Pure: the poller ([`super`]) does the I/O.

use std::collections::{BTreeMap, HashMap};

use waterline_core::UnixMillis;
use waterline_core::snapshot::{Capacity, Sample};

use super::convert::{Derived, ItemError, Stat, item_node, node_usage};
use super::history::{NodeHistory, Recorded};

/// What one list gave.
#[derive(Debug, Default, PartialEq)]
pub struct ListReport {
    /// Items in the list.
    pub items: usize,
    /// Items whose point entered a node's history.
    pub recorded: usize,
    /// Items whose point was already held (metrics-server had not scraped again).
    pub repeated: usize,
    /// Item names that map to no known node.
    pub unmapped: Vec<String>,
    /// Nodes known but without allocatable cpu and memory yet.
    pub no_allocatable: Vec<String>,
    /// Items that could not be read.
    pub malformed: Vec<ItemError>,
}

/// The histories of every node (only nodes the collector knows: a node that leaves the
/// cluster leaves with its history).
#[derive(Debug, Default)]
pub struct Fleet {
    nodes: HashMap<String, NodeHistory>,
}

impl Fleet {
    /// Takes one NodeMetrics list. `resolve` maps an item's name to a node the collector
    /// knows (the node directory, as Prometheus series are mapped); `capacities` are the
    /// known nodes' allocatable. Histories of nodes no longer in `capacities` are dropped.
    pub fn apply(
        &mut self,
        items: &[serde_json::Value],
        capacities: &BTreeMap<String, Capacity>,
        resolve: impl Fn(&str) -> Option<String>,
    ) -> ListReport {
        self.nodes.retain(|node, _| capacities.contains_key(node));
        let mut report = ListReport { items: items.len(), ..ListReport::default() };
        for (index, item) in items.iter().enumerate() {
            let Some(name) = item_node(item) else {
                report.malformed.push(ItemError {
                    field: format!("items[{index}].metadata.name"),
                    reason: "missing".into(),
                });
                continue;
            };
            let Some(node) = resolve(name) else {
                report.unmapped.push(name.to_owned());
                continue;
            };
            let capacity = capacities.get(&node).copied().unwrap_or_default();
            if capacity.cpu_millis <= 0 || capacity.memory_bytes <= 0 {
                report.no_allocatable.push(node);
                continue;
            }
            match node_usage(index, item, capacity) {
                Ok(usage) => {
                    match self.nodes.entry(node).or_default().record(usage.at_ms, usage.percent) {
                        Recorded::New => report.recorded += 1,
                        Recorded::NotNewer => report.repeated += 1,
                    }
                }
                Err(error) => report.malformed.push(error),
            }
        }
        report
    }

    /// Every node's value of `derived`, stamped with the time of the node's newest point
    /// (so a node metrics-server stopped reporting ages, and turns stale, as a node
    /// Prometheus stopped answering for). `clamp`: a percent metric, clamped to 0..100.
    pub fn samples(&self, derived: Derived, clamp: bool) -> BTreeMap<String, Sample> {
        self.nodes
            .iter()
            .filter_map(|(node, history)| {
                let value = match derived.stat {
                    Stat::Average => history.average(derived.resource),
                    Stat::MaxOfAverages { slots } => {
                        history.max_of_averages(derived.resource, slots)
                    }
                }?;
                let value = if clamp { value.clamp(0.0, 100.0) } else { value };
                Some((node.clone(), Sample { value, at: UnixMillis(history.latest_ms()?) }))
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Bytes the histories hold (not counting the map's own table and keys).
    pub fn bytes(&self) -> usize {
        self.nodes.values().map(NodeHistory::bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::sources::metrics_server::convert::derive;

    fn item(name: &str, at: &str, cpu: &str, memory: &str) -> Value {
        json!({"metadata": {"name": name}, "timestamp": at, "window": "15s",
               "usage": {"cpu": cpu, "memory": memory}})
    }

    fn capacities() -> BTreeMap<String, Capacity> {
        let c = Capacity { cpu_millis: 4000, memory_bytes: 16 << 30 };
        [("node-a".to_string(), c), ("node-b".to_string(), c)].into()
    }

    fn known(name: &str) -> Option<String> {
        ["node-a", "node-b"].contains(&name).then(|| name.to_owned())
    }

    #[test]
    fn a_list_feeds_every_known_node_and_reports_the_rest() {
        let mut fleet = Fleet::default();
        let items = vec![
            item("node-a", "2026-01-05T10:00:00Z", "1", "4Gi"),
            item("node-b", "2026-01-05T10:00:00Z", "3", "12Gi"),
            item("node-x", "2026-01-05T10:00:00Z", "1", "1Gi"),
            item("node-a", "2026-01-05T10:00:00Z", "2", "4Gi"),
            json!({"metadata": {"name": "node-b"}, "timestamp": "2026-01-05T10:00:30Z",
                   "usage": {"cpu": "-", "memory": "1Gi"}}),
        ];
        let report = fleet.apply(&items, &capacities(), known);
        assert_eq!(report.items, 5);
        assert_eq!(report.recorded, 2);
        assert_eq!(report.repeated, 1);
        assert_eq!(report.unmapped, vec!["node-x".to_string()]);
        assert_eq!(report.malformed.len(), 1);
        assert_eq!(report.malformed[0].field, "items[4].usage.cpu");

        // node-a: 1 core of 4 = 25 %, 4 GiB of 16 = 25 %; node-b: 75 % and 75 %.
        let cpu = fleet.samples(derive("waterline:node_cpu_usage:avg5m").unwrap(), true);
        let at = UnixMillis(1_767_607_200_000);
        assert_eq!(cpu["node-a"], Sample { value: 25.0, at });
        assert_eq!(cpu["node-b"], Sample { value: 75.0, at });
        assert_eq!(cpu.len(), 2);
    }

    #[test]
    fn averages_and_maxima_over_several_lists_with_clamping() {
        let mut fleet = Fleet::default();
        // node-a every 30 s for 10 minutes: 4 cores of 4 (100 %) for the first minute, then
        // 1 core (25 %); memory 20 GiB of 16 (125 %) throughout.
        for i in 0..20 {
            let at = format!("2026-01-05T10:{:02}:{:02}Z", i / 2, (i % 2) * 30);
            let cpu = if i < 2 { "4" } else { "1" };
            fleet.apply(&[item("node-a", &at, cpu, "20Gi")], &capacities(), known);
        }
        let value =
            |query: &str, clamp: bool| fleet.samples(derive(query).unwrap(), clamp)["node-a"].value;
        // Now (10:09:30) the last 5 minutes are all 25 %.
        assert_eq!(value("waterline:node_cpu_usage:avg5m", true), 25.0);
        // The highest 5 m average: at 10:00:30, both points at 100 %.
        assert_eq!(value("waterline:node_cpu_usage:max_avg1h", true), 100.0);
        // The slot 10:05..10:10 alone peaked at 10:05:00, window (10:00:00, 10:05:00]: the
        // 100 % point at 10:00:30 and 9 points at 25 %: (100 + 9 × 25) / 10 = 32.5.
        assert_eq!(value("waterline:node_cpu_usage:max_avg5m", true), 32.5);
        // Memory above allocatable: 125 % clamped to 100 for a percent metric, kept otherwise.
        assert_eq!(value("waterline:node_memory_usage:avg5m", true), 100.0);
        assert_eq!(value("waterline:node_memory_usage:avg5m", false), 125.0);
        // The sample time is the newest point's.
        let sample = fleet.samples(derive("waterline:node_cpu_usage:max_avg1d").unwrap(), true);
        assert_eq!(sample["node-a"].at, UnixMillis(1_767_607_200_000 + 9 * 60_000 + 30_000));
    }

    #[test]
    fn a_node_that_leaves_takes_its_history_and_one_without_allocatable_waits() {
        let mut fleet = Fleet::default();
        let items = [
            item("node-a", "2026-01-05T10:00:00Z", "1", "1Gi"),
            item("node-b", "2026-01-05T10:00:00Z", "1", "1Gi"),
        ];
        fleet.apply(&items, &capacities(), known);
        assert_eq!(fleet.len(), 2);
        let mut only_a = capacities();
        only_a.remove("node-b");
        only_a.insert("node-b".into(), Capacity::default());
        let report = fleet.apply(&items, &only_a, known);
        assert_eq!(report.no_allocatable, vec!["node-b".to_string()]);
        let mut gone = capacities();
        gone.remove("node-b");
        fleet.apply(&[], &gone, known);
        assert_eq!(fleet.len(), 1);
        assert!(fleet.bytes() > 0);
    }
}
