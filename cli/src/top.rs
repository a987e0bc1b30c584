//! `top`: every node's load as the scorer sees it now, beside the collector's sample ages and
//! ledger. The fetch is [`crate::fetch`]; everything here is pure.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::SystemTime;

use serde::Serialize;
use waterline_api::v1 as pb;

use crate::fetch::ScorerView;
use crate::format;
use crate::table::{Align, Cell, Style, Table};

/// `--sort`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SortBy {
    /// Hottest first: the higher of the cpu and memory predicted percentages, descending.
    #[default]
    Predicted,
    /// The scorer's preference: best score first, rejected nodes last.
    Score,
    Name,
}

/// One metric's part of a node's score (`ScoreTerm`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Term {
    pub metric: String,
    pub observed_percent: f64,
    pub ledger_percent: f64,
    pub incoming_percent: f64,
    pub predicted_percent: f64,
    pub curve_score: f64,
    pub weight: f64,
    pub stale: bool,
}

impl From<&pb::ScoreTerm> for Term {
    fn from(t: &pb::ScoreTerm) -> Term {
        Term {
            metric: t.metric.clone(),
            observed_percent: t.observed_percent,
            ledger_percent: t.ledger_percent,
            incoming_percent: t.incoming_percent,
            predicted_percent: t.predicted_percent,
            curve_score: t.curve_score,
            weight: t.weight,
            stale: t.stale,
        }
    }
}

/// One node in `top`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeRow {
    pub node: String,
    /// Score (0..100) for the probe pod, from the scorer's Score.
    pub score: Option<i64>,
    /// 1 = the node the scorer prefers among those Filter accepts; equal scores share a rank.
    pub rank: Option<usize>,
    /// Why the scorer's Filter rejects the probe pod here; None when it accepts it.
    pub rejected: Option<String>,
    /// The `--cpu-metric` and `--memory-metric` terms.
    pub cpu: Option<Term>,
    pub memory: Option<Term>,
    /// Metrics the scorer holds no fresh sample of (their curve score is the stale score).
    pub stale_metrics: Vec<String>,
    pub metric_count: usize,
    /// Age of the older of the cpu and memory metrics' samples at the collector.
    pub sample_age_seconds: Option<f64>,
    pub sample_ages_seconds: BTreeMap<String, f64>,
    /// Pods in the collector's ledger on this node.
    pub ledger_pods: usize,
    pub capacity_cpu_millis: Option<i64>,
    pub capacity_memory_bytes: Option<i64>,
    pub known_to_scorer: bool,
    pub known_to_collector: bool,
    pub terms: Vec<Term>,
}

/// What `top -o json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct TopReport {
    pub scorer: String,
    pub collector: String,
    pub scorer_snapshot_age_seconds: Option<f64>,
    pub probe: String,
    pub metric_errors: BTreeMap<String, String>,
    pub nodes: Vec<NodeRow>,
}

/// The metrics the cpu and memory columns show.
#[derive(Clone, Debug)]
pub struct Headline {
    pub cpu_metric: String,
    pub memory_metric: String,
}

/// The rows of every node either service knows, ranked, in name order.
pub fn rows(
    view: &ScorerView,
    listing: &pb::ListNodesResponse,
    headline: &Headline,
    now: SystemTime,
) -> Vec<NodeRow> {
    let scores: HashMap<&str, &pb::NodeScore> =
        view.scores.iter().map(|s| (s.node_name.as_str(), s)).collect();
    let states: HashMap<&str, &pb::NodeState> =
        listing.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut ledger: HashMap<&str, usize> = HashMap::new();
    for entry in &listing.ledger {
        *ledger.entry(entry.node_name.as_str()).or_default() += 1;
    }
    let scorer_nodes: BTreeSet<&str> = view.nodes.iter().map(String::as_str).collect();
    let names: BTreeSet<&str> =
        scorer_nodes.iter().copied().chain(states.keys().copied()).collect();
    let mut rows: Vec<NodeRow> = names
        .into_iter()
        .map(|name| {
            let score = scores.get(name);
            let terms: Vec<Term> =
                score.map(|s| s.terms.iter().map(Term::from).collect()).unwrap_or_default();
            let pick = |metric: &str| terms.iter().find(|t| t.metric == metric).cloned();
            let state = states.get(name);
            let sample_ages_seconds: BTreeMap<String, f64> = state
                .map(|s| {
                    s.metrics
                        .iter()
                        .filter_map(|m| {
                            Some((m.metric.clone(), format::age_secs(m.sampled_at.as_ref()?, now)))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let sample_age_seconds = [&headline.cpu_metric, &headline.memory_metric]
                .iter()
                .filter_map(|m| sample_ages_seconds.get(*m).copied())
                .reduce(f64::max);
            NodeRow {
                node: name.to_owned(),
                score: score.map(|s| i64::from(s.score)),
                rank: None,
                rejected: view.rejected.get(name).cloned(),
                cpu: pick(&headline.cpu_metric),
                memory: pick(&headline.memory_metric),
                stale_metrics: terms.iter().filter(|t| t.stale).map(|t| t.metric.clone()).collect(),
                metric_count: terms.len(),
                sample_age_seconds,
                sample_ages_seconds,
                ledger_pods: ledger.get(name).copied().unwrap_or(0),
                capacity_cpu_millis: state.and_then(|s| s.capacity.as_ref()).map(|c| c.cpu_millis),
                capacity_memory_bytes: state
                    .and_then(|s| s.capacity.as_ref())
                    .map(|c| c.memory_bytes),
                known_to_scorer: scorer_nodes.contains(name),
                known_to_collector: state.is_some(),
                terms,
            }
        })
        .collect();
    assign_ranks(&mut rows);
    rows
}

/// Competition ranking ("1, 1, 3") of the given scores, best first; `None` (no score, or
/// rejected by Filter) is not ranked. The scheduler picks among equal best scores at random,
/// so none of them is first alone.
pub fn competition_ranks(scores: &[Option<i64>]) -> Vec<Option<usize>> {
    let mut order: Vec<(i64, usize)> =
        scores.iter().enumerate().filter_map(|(i, s)| Some(((*s)?, i))).collect();
    order.sort_by_key(|&(score, _)| std::cmp::Reverse(score));
    let mut ranks = vec![None; scores.len()];
    let mut previous: Option<(i64, usize)> = None;
    for (position, (score, index)) in order.into_iter().enumerate() {
        let rank = match previous {
            Some((s, rank)) if s == score => rank,
            _ => position + 1,
        };
        ranks[index] = Some(rank);
        previous = Some((score, rank));
    }
    ranks
}

fn assign_ranks(rows: &mut [NodeRow]) {
    let scores: Vec<Option<i64>> =
        rows.iter().map(|r| r.score.filter(|_| r.rejected.is_none())).collect();
    for (row, rank) in rows.iter_mut().zip(competition_ranks(&scores)) {
        row.rank = rank;
    }
}

fn hottest(row: &NodeRow) -> f64 {
    [&row.cpu, &row.memory]
        .iter()
        .filter_map(|t| t.as_ref().map(|t| t.predicted_percent))
        .fold(f64::NEG_INFINITY, f64::max)
}

/// Sorts in place; ties in name order.
pub fn sort(rows: &mut [NodeRow], by: SortBy) {
    match by {
        SortBy::Name => rows.sort_by(|a, b| a.node.cmp(&b.node)),
        SortBy::Predicted => {
            rows.sort_by(|a, b| hottest(b).total_cmp(&hottest(a)).then_with(|| a.node.cmp(&b.node)))
        }
        SortBy::Score => rows.sort_by(|a, b| {
            let key = |r: &NodeRow| (r.rank.is_none(), r.rank, std::cmp::Reverse(r.score));
            key(a).cmp(&key(b)).then_with(|| a.node.cmp(&b.node))
        }),
    }
}

fn level(term: &Option<Term>, pick: fn(&Term) -> f64) -> Cell {
    let text = format::percent(term.as_ref().map(pick));
    match term {
        Some(t) if t.stale => Cell::styled(text, Style::Yellow),
        _ => Cell::from(text),
    }
}

/// The table of `rows`, in their order.
pub fn table(rows: &[NodeRow]) -> Table {
    use Align::{Left, Right};
    let mut table = Table::new(&[
        ("NODE", Left),
        ("RANK", Right),
        ("SCORE", Right),
        ("CPU OBS%", Right),
        ("CPU LEDGER%", Right),
        ("CPU PRED%", Right),
        ("MEM OBS%", Right),
        ("MEM LEDGER%", Right),
        ("MEM PRED%", Right),
        ("AGE", Right),
        ("STALE", Right),
        ("PODS", Right),
        ("FILTER", Left),
    ]);
    for row in rows {
        let rank = match row.rank {
            Some(1) => Cell::styled("1", Style::Green),
            Some(rank) => Cell::from(rank.to_string()),
            None => Cell::styled("-", Style::Dim),
        };
        let stale = format!("{}/{}", row.stale_metrics.len(), row.metric_count);
        let stale = if row.stale_metrics.is_empty() {
            Cell::from(stale)
        } else {
            Cell::styled(stale, Style::Yellow)
        };
        let filter = match (&row.rejected, row.known_to_scorer) {
            (Some(reason), _) => Cell::styled(format!("rejected: {reason}"), Style::Red),
            (None, false) => Cell::styled("unknown to the scorer", Style::Yellow),
            (None, true) => Cell::styled("ok", Style::Green),
        };
        table.push(vec![
            Cell::from(row.node.clone()),
            rank,
            Cell::from(row.score.map_or("-".into(), |s| s.to_string())),
            level(&row.cpu, |t| t.observed_percent),
            level(&row.cpu, |t| t.ledger_percent),
            level(&row.cpu, |t| t.predicted_percent),
            level(&row.memory, |t| t.observed_percent),
            level(&row.memory, |t| t.ledger_percent),
            level(&row.memory, |t| t.predicted_percent),
            Cell::from(row.sample_age_seconds.map_or("-".into(), format::secs)),
            stale,
            Cell::from(row.ledger_pods.to_string()),
            filter,
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(metric: &str, observed: f64, ledger: f64, stale: bool) -> pb::ScoreTerm {
        pb::ScoreTerm {
            metric: metric.into(),
            observed_percent: observed,
            ledger_percent: ledger,
            incoming_percent: 1.0,
            predicted_percent: observed + ledger + 1.0,
            curve_score: 50.0,
            weight: 0.2,
            stale,
        }
    }

    fn node_score(name: &str, score: i64, cpu: f64, mem: f64) -> pb::NodeScore {
        pb::NodeScore {
            node_name: name.into(),
            score: score as i32,
            terms: vec![
                term("cpu_usage_avg_5m", cpu, 2.0, false),
                term("mem_usage_avg_5m", mem, 0.0, false),
                term("cpu_usage_max_avg_1d", cpu, 0.0, true),
            ],
        }
    }

    fn headline() -> Headline {
        Headline { cpu_metric: "cpu_usage_avg_5m".into(), memory_metric: "mem_usage_avg_5m".into() }
    }

    fn sample(metric: &str, at: i64) -> pb::MetricSample {
        pb::MetricSample {
            metric: metric.into(),
            value_percent: 0.0,
            sampled_at: Some(prost_types::Timestamp { seconds: at, nanos: 0 }),
        }
    }

    fn fixture() -> Vec<NodeRow> {
        let view = ScorerView {
            nodes: vec!["a".into(), "b".into(), "c".into(), "d".into()],
            rejected: [("c".to_string(), "cpu_usage_avg_5m 71.0% > 65%".to_string())].into(),
            scores: vec![
                node_score("a", 40, 30.0, 10.0),
                node_score("b", 80, 10.0, 60.0),
                node_score("c", 90, 70.0, 10.0),
                node_score("d", 80, 20.0, 20.0),
            ],
            snapshot_age_seconds: Some(0.5),
            estimate: None,
        };
        let listing = pb::ListNodesResponse {
            nodes: vec![
                pb::NodeState {
                    name: "a".into(),
                    capacity: Some(pb::Capacity { cpu_millis: 8000, memory_bytes: 1 << 34 }),
                    metrics: vec![sample("cpu_usage_avg_5m", 990), sample("mem_usage_avg_5m", 970)],
                },
                pb::NodeState { name: "e".into(), capacity: None, metrics: vec![] },
            ],
            ledger: vec![
                pb::LedgerEntry {
                    node_name: "a".into(),
                    pod_uid: "1".into(),
                    ..Default::default()
                },
                pb::LedgerEntry {
                    node_name: "a".into(),
                    pod_uid: "2".into(),
                    ..Default::default()
                },
            ],
            metrics: vec![],
            learned: vec![],
        };
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000);
        rows(&view, &listing, &headline(), now)
    }

    #[test]
    fn every_node_of_either_service_is_a_row() {
        let rows = fixture();
        let names: Vec<&str> = rows.iter().map(|r| r.node.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d", "e"]);
        let e = &rows[4];
        assert!(e.known_to_collector && !e.known_to_scorer && e.score.is_none());
        assert!(!rows[1].known_to_collector);
    }

    #[test]
    fn columns_come_from_the_headline_terms_and_the_collector() {
        let a = &fixture()[0];
        assert_eq!(a.cpu.as_ref().unwrap().predicted_percent, 33.0);
        assert_eq!(a.memory.as_ref().unwrap().observed_percent, 10.0);
        assert_eq!(a.stale_metrics, ["cpu_usage_max_avg_1d"]);
        assert_eq!(a.metric_count, 3);
        assert_eq!(a.sample_age_seconds, Some(30.0), "the older of the two headline samples");
        assert_eq!(a.ledger_pods, 2);
        assert_eq!(a.capacity_cpu_millis, Some(8000));
    }

    #[test]
    fn ranks_skip_rejected_nodes_and_share_ties() {
        let rows = fixture();
        let rank = |n: &str| rows.iter().find(|r| r.node == n).unwrap().rank;
        assert_eq!(rank("c"), None, "rejected, though it scores best");
        assert_eq!(rank("b"), Some(1));
        assert_eq!(rank("d"), Some(1));
        assert_eq!(rank("a"), Some(3));
        assert_eq!(rank("e"), None, "no score");
    }

    #[test]
    fn equal_scores_share_a_rank_and_the_next_is_skipped() {
        assert_eq!(
            competition_ranks(&[Some(5), None, Some(9), Some(9), Some(1)]),
            [Some(3), None, Some(1), Some(1), Some(4)]
        );
    }

    #[test]
    fn sorting_by_predicted_puts_the_hottest_first() {
        let mut rows = fixture();
        sort(&mut rows, SortBy::Predicted);
        let names: Vec<&str> = rows.iter().map(|r| r.node.as_str()).collect();
        // c: cpu 73; b: mem 61; a: cpu 33; d: cpu 23; e: nothing.
        assert_eq!(names, ["c", "b", "a", "d", "e"]);
    }

    #[test]
    fn sorting_by_score_follows_the_ranks_then_the_rest() {
        let mut rows = fixture();
        sort(&mut rows, SortBy::Score);
        let names: Vec<&str> = rows.iter().map(|r| r.node.as_str()).collect();
        assert_eq!(names, ["b", "d", "a", "c", "e"]);
    }

    #[test]
    fn the_table_marks_rejections_and_unknown_nodes() {
        let text = table(&fixture()).render(crate::table::Render::default());
        let line = |n: &str| text.lines().find(|l| l.starts_with(n)).unwrap().to_owned();
        assert!(line("c ").ends_with("rejected: cpu_usage_avg_5m 71.0% > 65%"), "{text}");
        assert!(line("e ").ends_with("unknown to the scorer"), "{text}");
        assert!(line("a ").contains("33.0"), "{text}");
        assert!(line("a ").contains("1/3"), "{text}");
        assert_eq!(text.lines().count(), 6, "{text}");
    }
}
