//! The target, per scenario and path (docs/design.md#placement-quality):
//!
//! - **(a) Pareto**: no peer has both fewer-or-equal overload node·s and fewer-or-equal
//!   pending pod·s than waterline's default, with one of the two strictly fewer;
//! - **(b) pending**: where the room under the threshold exceeds the demand at every
//!   instant (measure/room.rs), waterline's pending pod·s ≤ 1.1 × kube-default's. Where it
//!   does not, (b) does not apply: some pending or some overload is unavoidable.
//!
//! The default policy is the strategy labelled `waterline`; the peers are the other
//! registered strategies; any other label is context and never counts.

use crate::measure::StrategySummary;
use crate::strategy::NAMES;

pub const DEFAULT: &str = "waterline";
const KUBE_DEFAULT: &str = "kube-default";
/// (b)'s allowance over kube-default's pending pod·s.
pub const PENDING_ALLOWANCE: f64 = 1.1;

/// What the target compares of one strategy (one run, or totals over seeds).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Score {
    pub strategy: String,
    pub overload: f64,
    pub pending: f64,
}

impl From<&StrategySummary> for Score {
    fn from(s: &StrategySummary) -> Self {
        Score {
            strategy: s.strategy.clone(),
            overload: s.overload_node_seconds,
            pending: s.pending_pod_seconds,
        }
    }
}

/// (b)'s outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum PendingCheck {
    /// The room does not suffice: (b) does not apply.
    NotApplicable,
    /// waterline's and kube-default's pending pod·s, and whether (b) holds.
    Checked { waterline: f64, kube_default: f64, met: bool },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The peers that dominate waterline's default ((a) holds when empty).
    pub dominated_by: Vec<String>,
    pub pending: PendingCheck,
}

impl Verdict {
    pub fn pareto_met(&self) -> bool {
        self.dominated_by.is_empty()
    }
}

pub fn registered(label: &str) -> bool {
    NAMES.contains(&label)
}

/// The verdict over `scores` (one per strategy); `None` without a `waterline` entry.
pub fn verdict(scores: &[Score], room_suffices: bool) -> Option<Verdict> {
    let mine = scores.iter().find(|s| s.strategy == DEFAULT)?;
    let dominated_by = scores
        .iter()
        .filter(|s| s.strategy != DEFAULT && registered(&s.strategy))
        .filter(|s| {
            s.overload <= mine.overload
                && s.pending <= mine.pending
                && (s.overload < mine.overload || s.pending < mine.pending)
        })
        .map(|s| s.strategy.clone())
        .collect();
    let kube = scores.iter().find(|s| s.strategy == KUBE_DEFAULT);
    let pending = match kube {
        Some(k) if room_suffices => PendingCheck::Checked {
            waterline: mine.pending,
            kube_default: k.pending,
            met: mine.pending <= PENDING_ALLOWANCE * k.pending,
        },
        _ => PendingCheck::NotApplicable,
    };
    Some(Verdict { dominated_by, pending })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(strategy: &str, overload: f64, pending: f64) -> Score {
        Score { strategy: strategy.into(), overload, pending }
    }

    #[test]
    fn a_peer_dominates_only_when_no_worse_on_both_and_better_on_one() {
        let scores = [
            score("waterline", 100.0, 50.0),
            score("kube-default", 300.0, 0.0),  // more overload: no
            score("crane", 100.0, 50.0),        // equal on both: no
            score("koordinator", 90.0, 50.0),   // less overload, equal pending: yes
            score("trimaran-tlp", 100.0, 40.0), // equal overload, less pending: yes
            score("old-rule", 0.0, 0.0),        // context, never counts
        ];
        let v = verdict(&scores, true).unwrap();
        assert_eq!(v.dominated_by, ["koordinator", "trimaran-tlp"]);
        assert!(!v.pareto_met());
        // (b): 50 > 1.1 × 0
        assert_eq!(
            v.pending,
            PendingCheck::Checked { waterline: 50.0, kube_default: 0.0, met: false }
        );
    }

    #[test]
    fn pending_within_a_tenth_of_kube_default_where_room_suffices() {
        // 1.1 × 3000 = 3300 ≥ 3300
        let scores = [score("waterline", 0.0, 3300.0), score("kube-default", 10.0, 3000.0)];
        let v = verdict(&scores, true).unwrap();
        assert!(v.pareto_met());
        assert!(matches!(v.pending, PendingCheck::Checked { met: true, .. }));
        let v = verdict(&scores, false).unwrap();
        assert_eq!(v.pending, PendingCheck::NotApplicable);
        assert!(verdict(&scores[1..], true).is_none());
    }
}
