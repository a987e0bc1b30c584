//! `learned`: the collector's learned usage per workload (ListNodes' `learned`,
//! docs/design.md#learned-estimate), and so how each workload's next pods are priced. Pure;
//! the call is [`crate::fetch`].

use serde::Serialize;
use waterline_api::v1 as pb;

use crate::format;
use crate::table::{Align, Cell, Table};

/// What one workload's pods use of one resource.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Resource {
    /// Usage ÷ request its new pods are priced by (absent: they request none, and are
    /// priced at `usage`).
    pub ratio: Option<f64>,
    /// Milli-cores or bytes.
    pub usage: f64,
    pub spread: f64,
    pub pods: u32,
    pub samples: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Workload {
    pub namespace: String,
    pub kind: String,
    pub name: String,
    pub cpu: Option<Resource>,
    pub memory: Option<Resource>,
}

/// What `learned -o json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct LearnedReport {
    pub collector: String,
    pub workloads: Vec<Workload>,
}

fn resource(wire: Option<&pb::LearnedResource>) -> Option<Resource> {
    wire.map(|r| Resource {
        ratio: r.ratio,
        usage: r.usage,
        spread: r.spread,
        pods: r.pods,
        samples: r.samples,
    })
}

/// The table as the collector sent it (in namespace/kind/name order), only `namespace`'s
/// workloads when one is given.
pub fn report(
    collector: &str,
    listing: &pb::ListNodesResponse,
    namespace: Option<&str>,
) -> LearnedReport {
    let workloads = listing
        .learned
        .iter()
        .filter(|w| namespace.is_none_or(|n| w.namespace == n))
        .map(|w| Workload {
            namespace: w.namespace.clone(),
            kind: w.kind.clone(),
            name: w.name.clone(),
            cpu: resource(w.cpu.as_ref()),
            memory: resource(w.memory.as_ref()),
        })
        .collect();
    LearnedReport { collector: collector.to_owned(), workloads }
}

/// One line per workload: each resource's ratio, usage and spread, and the evidence.
pub fn table(report: &LearnedReport) -> Table {
    use Align::{Left, Right};
    let mut table = Table::new(&[
        ("WORKLOAD", Left),
        ("CPU RATIO", Right),
        ("CPU USAGE", Right),
        ("CPU SPREAD", Right),
        ("MEM RATIO", Right),
        ("MEM USAGE", Right),
        ("MEM SPREAD", Right),
        ("PODS", Right),
        ("SAMPLES", Right),
    ]);
    for w in &report.workloads {
        let mut row = vec![Cell::from(format!("{}/{}/{}", w.namespace, w.kind, w.name))];
        for (learned, amount) in [
            (&w.cpu, (|v: f64| format::cpu(v.round() as i64)) as fn(f64) -> String),
            (&w.memory, |v: f64| format::bytes(v.round() as i64)),
        ] {
            let Some(r) = learned else {
                row.extend([Cell::from("-"), Cell::from("-"), Cell::from("-")]);
                continue;
            };
            let ratio = r.ratio.map_or("-".into(), |ratio| format!("{ratio:.2}"));
            // The spread is of the ratio when there is one, else of the usage.
            let spread =
                if r.ratio.is_some() { format!("{:.2}", r.spread) } else { amount(r.spread) };
            row.extend([Cell::from(ratio), Cell::from(amount(r.usage)), Cell::from(spread)]);
        }
        // The evidence of the resource with more of it (usually both are the same pods).
        let evidence =
            [&w.cpu, &w.memory].into_iter().flatten().max_by_key(|r| (r.pods, r.samples));
        row.push(Cell::from(evidence.map_or("-".into(), |r| r.pods.to_string())));
        row.push(Cell::from(evidence.map_or("-".into(), |r| r.samples.to_string())));
        table.push(row);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing() -> pb::ListNodesResponse {
        let learned = |ratio: Option<f64>, usage: f64, spread: f64| pb::LearnedResource {
            ratio,
            usage,
            spread,
            pods: 3,
            samples: 360,
        };
        pb::ListNodesResponse {
            learned: vec![
                pb::WorkloadUsage {
                    namespace: "batch".into(),
                    kind: "CronJob".into(),
                    name: "report".into(),
                    cpu: None,
                    memory: Some(learned(None, (512 << 20) as f64, (64 << 20) as f64)),
                },
                pb::WorkloadUsage {
                    namespace: "shop".into(),
                    kind: "Deployment".into(),
                    name: "web".into(),
                    cpu: Some(learned(Some(2.0), 1000.0, 0.25)),
                    memory: Some(learned(Some(1.5), (768 << 20) as f64, 0.1)),
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn a_line_per_workload_with_each_resource_and_its_evidence() {
        let report = report("c", &listing(), None);
        let text = table(&report).render(crate::table::Render::default());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        let cells = |line: &str| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        // No cpu learned: dashes; memory by usage (512Mi, spread 64Mi of usage).
        assert_eq!(
            cells(lines[1]),
            ["batch/CronJob/report", "-", "-", "-", "-", "512Mi", "64Mi", "3", "360"]
        );
        // 1000 m is `1`, as kubectl writes it; the ratios with two decimals.
        assert_eq!(
            cells(lines[2]),
            ["shop/Deployment/web", "2.00", "1", "0.25", "1.50", "768Mi", "0.10", "3", "360"]
        );
        assert_eq!(super::report("c", &listing(), Some("shop")).workloads.len(), 1);
    }
}
