//! `explain`: each node's verdict for one pod (Evaluate) and the terms of its score (Score
//! with explain), as the scorer computes them now. Pure; the calls are [`crate::fetch`].

use std::cmp::Reverse;
use std::collections::HashMap;

use serde::Serialize;
use waterline_api::v1 as pb;

use crate::fetch::ScorerView;
use crate::format;
use crate::table::{Align, Cell, Style, Table};
use crate::top::{Term, competition_ranks};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub node: String,
    /// Whether Filter accepts the pod on this node.
    pub feasible: bool,
    /// Filter's reason when it does not.
    pub reason: Option<String>,
    /// Score's 0..100 (given for rejected nodes too: Score does not filter).
    pub score: Option<i64>,
    /// Among feasible nodes, 1 = best; equal scores share a rank.
    pub rank: Option<usize>,
    /// False for a name asked for (--node) that is not in the scorer's snapshot: Filter
    /// never rejects such a node and Score gives it the stale score.
    pub known_to_scorer: bool,
    pub terms: Vec<Term>,
}

/// What `explain -o json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct ExplainReport {
    pub scorer: String,
    pub pod: crate::pod::PodJson,
    pub scorer_snapshot_age_seconds: Option<f64>,
    pub feasible: usize,
    pub rejected: usize,
    /// The pod's estimate, as the scorer priced it (absent when no node was scored).
    pub estimate: Option<Estimate>,
    pub nodes: Vec<Verdict>,
}

/// What the pod is estimated to use and the rule that priced each resource
/// (docs/design.md#pod-estimate).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Estimate {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    pub cpu: Source,
    pub memory: Source,
    /// `namespace/Kind/name` of the workload whose learned usage priced a resource.
    pub workload: Option<String>,
}

/// How one resource was priced.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Source {
    /// `factor`, `override` or `learned`.
    pub kind: &'static str,
    /// factor and override: the factor.
    pub factor: Option<f64>,
    /// learned: the ratio to the request, absent when priced at the workload's usage.
    pub ratio: Option<f64>,
    /// learned: the evidence.
    pub pods: Option<u32>,
    pub samples: Option<u64>,
}

impl From<&pb::EstimateSource> for Source {
    fn from(source: &pb::EstimateSource) -> Self {
        use pb::EstimateSourceKind as Kind;
        let learned = source.kind() == Kind::Learned;
        Source {
            kind: match source.kind() {
                Kind::Factor => "factor",
                Kind::Override => "override",
                Kind::Learned => "learned",
                Kind::Unspecified => "unspecified",
            },
            factor: (!learned).then_some(source.factor),
            ratio: source.ratio.filter(|_| learned),
            pods: learned.then_some(source.pods),
            samples: learned.then_some(source.samples),
        }
    }
}

impl From<&pb::PodEstimate> for Estimate {
    fn from(estimate: &pb::PodEstimate) -> Self {
        let source = |s: Option<&pb::EstimateSource>| Source::from(&s.cloned().unwrap_or_default());
        Estimate {
            cpu_millis: estimate.cpu_millis,
            memory_bytes: estimate.memory_bytes,
            cpu: source(estimate.cpu.as_ref()),
            memory: source(estimate.memory.as_ref()),
            workload: (!estimate.workload.is_empty()).then(|| estimate.workload.clone()),
        }
    }
}

/// `estimate: cpu 2 learned from shop/Deployment/web (ratio 2.00, 3 pods, 360 samples);
/// memory 700Mi by the policy's factor 0.70`.
pub fn estimate_line(estimate: &Estimate) -> String {
    let part = |resource: &str, amount: String, source: &Source| {
        let how = match source.kind {
            "learned" => {
                let by = match source.ratio {
                    Some(ratio) => format!("ratio {ratio:.2}"),
                    None => "its usage".to_owned(),
                };
                format!(
                    "learned from {} ({by}, {} pods, {} samples)",
                    estimate.workload.as_deref().unwrap_or("its workload"),
                    source.pods.unwrap_or_default(),
                    source.samples.unwrap_or_default()
                )
            }
            "override" => format!(
                "by the pod's waterline.io/estimate-factor (factor {:.2})",
                source.factor.unwrap_or_default()
            ),
            "factor" => {
                format!("by the policy's factor {:.2}", source.factor.unwrap_or_default())
            }
            other => format!("by an unknown rule ({other})"),
        };
        format!("{resource} {amount} {how}")
    };
    format!(
        "estimate: {}; {}",
        part("cpu", crate::format::cpu(estimate.cpu_millis), &estimate.cpu),
        part("memory", crate::format::bytes(estimate.memory_bytes), &estimate.memory)
    )
}

/// Feasible nodes best first (by rank, then name), then rejected ones by score.
pub fn verdicts(view: &ScorerView) -> Vec<Verdict> {
    let scores: HashMap<&str, &pb::NodeScore> =
        view.scores.iter().map(|s| (s.node_name.as_str(), s)).collect();
    let names: std::collections::BTreeSet<&String> =
        view.nodes.iter().chain(view.scores.iter().map(|s| &s.node_name)).collect();
    let mut verdicts: Vec<Verdict> = names
        .into_iter()
        .map(|node| {
            let score = scores.get(node.as_str());
            Verdict {
                node: node.clone(),
                feasible: !view.rejected.contains_key(node),
                reason: view.rejected.get(node).cloned(),
                score: score.map(|s| i64::from(s.score)),
                rank: None,
                known_to_scorer: view.nodes.contains(node),
                terms: score.map(|s| s.terms.iter().map(Term::from).collect()).unwrap_or_default(),
            }
        })
        .collect();
    let ranked: Vec<Option<i64>> =
        verdicts.iter().map(|v| v.score.filter(|_| v.feasible)).collect();
    for (verdict, rank) in verdicts.iter_mut().zip(competition_ranks(&ranked)) {
        verdict.rank = rank;
    }
    verdicts.sort_by(|a, b| {
        let key = |v: &Verdict| (!v.feasible, v.rank.is_none(), v.rank, Reverse(v.score));
        key(a).cmp(&key(b)).then_with(|| a.node.cmp(&b.node))
    });
    verdicts
}

/// One line per node and metric; the node's rank, score, verdict and reason on its first.
pub fn table(verdicts: &[Verdict]) -> Table {
    use Align::{Left, Right};
    let mut table = Table::new(&[
        ("RANK", Right),
        ("NODE", Left),
        ("SCORE", Right),
        ("VERDICT", Left),
        ("METRIC", Left),
        ("OBS%", Right),
        ("LEDGER%", Right),
        ("POD%", Right),
        ("PRED%", Right),
        ("CURVE", Right),
        ("WEIGHT", Right),
        ("REASON", Left),
    ]);
    for verdict in verdicts {
        let head = || {
            vec![
                Cell::from(verdict.rank.map_or("-".into(), |r| r.to_string())),
                Cell::from(verdict.node.clone()),
                Cell::from(verdict.score.map_or("-".into(), |s| s.to_string())),
                match (verdict.feasible, verdict.known_to_scorer) {
                    (true, true) => Cell::styled("feasible", Style::Green),
                    (true, false) => Cell::styled("unknown node", Style::Yellow),
                    (false, _) => Cell::styled("rejected", Style::Red),
                },
            ]
        };
        if verdict.terms.is_empty() {
            let mut row = head();
            row.resize(11, Cell::default());
            row.push(Cell::from(verdict.reason.clone().unwrap_or_default()));
            table.push(row);
        }
        for (i, term) in verdict.terms.iter().enumerate() {
            let mut row = if i == 0 { head() } else { vec![Cell::default(); 4] };
            let curve = if term.stale {
                Cell::styled(format!("{:.1} stale", term.curve_score), Style::Yellow)
            } else {
                Cell::from(format!("{:.1}", term.curve_score))
            };
            row.extend([
                Cell::from(term.metric.clone()),
                Cell::from(format::percent(Some(term.observed_percent))),
                Cell::from(format::percent(Some(term.ledger_percent))),
                Cell::from(format::percent(Some(term.incoming_percent))),
                Cell::from(format::percent(Some(term.predicted_percent))),
                curve,
                Cell::from(format!("{}", term.weight)),
            ]);
            if i == 0 {
                row.push(Cell::styled(verdict.reason.clone().unwrap_or_default(), Style::Red));
            }
            table.push(row);
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(node: &str, score: i64) -> pb::NodeScore {
        let term = |metric: &str, stale| pb::ScoreTerm {
            metric: metric.into(),
            observed_percent: 20.0,
            ledger_percent: 5.0,
            incoming_percent: 10.0,
            predicted_percent: 35.0,
            curve_score: 80.0,
            weight: 0.2,
            stale,
        };
        pb::NodeScore {
            node_name: node.into(),
            score: score as i32,
            terms: vec![term("cpu_usage_avg_5m", false), term("mem_usage_avg_5m", true)],
        }
    }

    fn view() -> ScorerView {
        ScorerView {
            nodes: vec!["hot".into(), "warm".into(), "cool".into()],
            rejected: [("hot".to_string(), "cpu_usage_avg_5m 90.0% > 65%".to_string())].into(),
            scores: vec![score("hot", 95), score("warm", 50), score("cool", 70)],
            snapshot_age_seconds: None,
            estimate: None,
        }
    }

    #[test]
    fn the_estimate_line_names_the_rule_of_each_resource() {
        use pb::EstimateSourceKind as Kind;
        let wire = pb::PodEstimate {
            cpu_millis: 2000,
            memory_bytes: 700 << 20,
            cpu: Some(pb::EstimateSource {
                kind: Kind::Learned as i32,
                ratio: Some(2.0),
                pods: 3,
                samples: 360,
                ..Default::default()
            }),
            memory: Some(pb::EstimateSource {
                kind: Kind::Factor as i32,
                factor: 0.7,
                ..Default::default()
            }),
            workload: "shop/Deployment/web".into(),
        };
        let estimate = Estimate::from(&wire);
        assert_eq!(
            estimate_line(&estimate),
            "estimate: cpu 2 learned from shop/Deployment/web (ratio 2.00, 3 pods, 360 samples); \
             memory 700Mi by the policy's factor 0.70"
        );
        assert_eq!(estimate.memory.ratio, None);
        assert_eq!((estimate.cpu.factor, estimate.cpu.pods), (None, Some(3)));
        // An override, and a learned workload whose pods request no memory.
        let mut wire = wire;
        wire.cpu = Some(pb::EstimateSource {
            kind: Kind::Override as i32,
            factor: 1.7,
            ..Default::default()
        });
        wire.memory = Some(pb::EstimateSource {
            kind: Kind::Learned as i32,
            pods: 2,
            samples: 100,
            ..Default::default()
        });
        assert_eq!(
            estimate_line(&Estimate::from(&wire)),
            "estimate: cpu 2 by the pod's waterline.io/estimate-factor (factor 1.70); \
             memory 700Mi learned from shop/Deployment/web (its usage, 2 pods, 100 samples)"
        );
    }

    #[test]
    fn feasible_nodes_come_first_best_first() {
        let verdicts = verdicts(&view());
        let order: Vec<(&str, Option<usize>, bool)> =
            verdicts.iter().map(|v| (v.node.as_str(), v.rank, v.feasible)).collect();
        assert_eq!(order, [("cool", Some(1), true), ("warm", Some(2), true), ("hot", None, false)]);
        assert_eq!(verdicts[2].reason.as_deref(), Some("cpu_usage_avg_5m 90.0% > 65%"));
        assert_eq!(verdicts[2].score, Some(95), "Score still scores a rejected node");
    }

    #[test]
    fn a_node_outside_the_snapshot_is_shown_as_unknown() {
        let mut view = view();
        view.scores.push(pb::NodeScore { node_name: "new".into(), score: 0, terms: vec![] });
        let verdicts = verdicts(&view);
        let new = verdicts.iter().find(|v| v.node == "new").unwrap();
        assert!(new.feasible && !new.known_to_scorer);
        let text = table(&verdicts).render(crate::table::Render::default());
        assert!(text.lines().any(|l| l.contains("new") && l.contains("unknown node")), "{text}");
    }

    #[test]
    fn a_line_per_metric_with_the_node_on_the_first() {
        let text = table(&verdicts(&view())).render(crate::table::Render::default());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 3 * 2, "{text}");
        assert!(lines[1].trim_start().starts_with("1  cool"), "{text}");
        assert!(lines[2].trim_start().starts_with("mem_usage_avg_5m"), "{text}");
        assert!(lines[2].contains("80.0 stale"), "{text}");
        assert!(
            lines[5].contains("rejected") && lines[5].ends_with("cpu_usage_avg_5m 90.0% > 65%"),
            "{text}"
        );
    }
}
