//! The extender's score scale: kube-scheduler takes an extender's priorities as 0..10
//! (`MaxExtenderPriority`) and multiplies them by the extender's weight and by 10, so the
//! engine's 0..100 are mapped down. One home for the rule: the extender adapter answers with
//! it and the simulator models the extender path with it (docs/design.md#the-extender-protocol).
//!
//! **Round** (default): `round(score / 10)`, half away from zero, so a node's extender score
//! means the same whatever the other candidates are; nodes whose scores differ by less than 5
//! may tie. **Rescale**: the best candidate gets 10, the worst 0, linear in between, rounded;
//! the ranking survives the 11 levels better, but a score no longer says how good a node is
//! in absolute terms (two nearly identical nodes get 0 and 10, and the scheduler adds that gap
//! × weight × 10 to its own scores). When every candidate scores the same, Rescale gives all
//! of them 10: any constant keeps the (flat) ranking, and 10 matches "best → 10".
//!
//! The adapter's provisional guess at kube-scheduler's choice ([`best_candidate`]) is read
//! from the same 0..100 scores, before the mapping; the simulator guesses with it too.

use crate::policy::ScoreMapping;

pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// 0..100 → 0..10, half away from zero; out-of-range inputs are clamped.
pub fn round_score(score: i64) -> i64 {
    ((score as f64 / 10.0).round() as i64).clamp(0, MAX_EXTENDER_PRIORITY)
}

/// Extender scores for `scores` (0..100 each, in candidate order) under `mapping`.
pub fn map_scores(mapping: ScoreMapping, scores: &[i64]) -> Vec<i64> {
    match mapping {
        ScoreMapping::Round => scores.iter().map(|&s| round_score(s)).collect(),
        ScoreMapping::Rescale => {
            let (Some(&lo), Some(&hi)) = (scores.iter().min(), scores.iter().max()) else {
                return Vec::new();
            };
            if hi == lo {
                return vec![MAX_EXTENDER_PRIORITY; scores.len()];
            }
            let span = (hi - lo) as f64;
            scores
                .iter()
                .map(|&s| {
                    let scaled = (s - lo) as f64 * MAX_EXTENDER_PRIORITY as f64 / span;
                    (scaled.round() as i64).clamp(0, MAX_EXTENDER_PRIORITY)
                })
                .collect()
        }
    }
}

/// The candidate the engine likes best, which the extender records provisionally at
/// prioritize: the highest 0..100 score, and on a tie the first in the request's order.
/// kube-scheduler breaks ties among its own best totals at random, so no tied node is a
/// better guess than another; the first is deterministic, and the request's order is the
/// scheduler's (it starts each cycle's node walk where the last one stopped), so tied
/// guesses still move from node to node across pods instead of piling onto the
/// alphabetically first.
pub fn best_candidate(scores: &[i64]) -> Option<usize> {
    let mut best: Option<(usize, i64)> = None;
    for (i, &score) in scores.iter().enumerate() {
        if best.is_none_or(|(_, top)| score > top) {
            best = Some((i, score));
        }
    }
    best.map(|(i, _)| i)
}

/// Makes `best` (the provisional guess) the one candidate at the top of `mapped` (0..10
/// each, the guess's the highest since the mapping keeps the order): the others it ties
/// with stay where they are and the guess goes one level up, or, at 10, they go one down.
///
/// Why: kube-scheduler adds `mapped × weight × 10` to its own plugins' scores and picks at
/// random among equal totals, so a guess that merely tied at the top — two nodes 0..100
/// apart by less than the mapping's step land on the same level — was the scheduler's
/// choice only by chance; the simulator counted 60–90 % of guesses moved by the watch, each
/// one a pod counted on the wrong node until the watch arrives, where a burst piles up. One
/// level (50 points at the shipped weight 5) decides the tie for the guess, while a
/// plugin that cares more (PodTopologySpread, up to 200) still overrides it.
pub fn single_out(mapped: &mut [i64], best: usize) {
    let Some(&top) = mapped.get(best) else { return };
    let tied = mapped.iter().enumerate().any(|(i, &m)| i != best && m >= top);
    if !tied {
        return;
    }
    if top < MAX_EXTENDER_PRIORITY {
        mapped[best] = top + 1;
    } else {
        for (i, m) in mapped.iter_mut().enumerate() {
            if i != best && *m >= top {
                *m = top - 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_candidate_is_the_highest_and_the_first_of_equals() {
        assert_eq!(best_candidate(&[10, 90, 40]), Some(1));
        assert_eq!(best_candidate(&[70, 90, 90, 10]), Some(1));
        assert_eq!(best_candidate(&[5]), Some(0));
        assert_eq!(best_candidate(&[]), None);
    }

    #[test]
    fn round_is_half_away_from_zero_and_clamped() {
        let cases = [(0, 0), (4, 0), (5, 1), (14, 1), (15, 2), (45, 5), (95, 10), (100, 10)];
        for (score, want) in cases {
            assert_eq!(round_score(score), want, "score {score}");
        }
        assert_eq!(round_score(-7), 0);
        assert_eq!(round_score(250), 10);
        assert_eq!(map_scores(ScoreMapping::Round, &[24, 40, 100, 19, 13, 0]), [2, 4, 10, 2, 1, 0]);
    }

    #[test]
    fn rescale_spreads_candidates_over_zero_to_ten() {
        assert_eq!(map_scores(ScoreMapping::Rescale, &[40, 42, 44, 41]), [0, 5, 10, 3]);
        // Half away from zero: 50 → 2.5 → 3.
        assert_eq!(map_scores(ScoreMapping::Rescale, &[0, 50, 200]), [0, 3, 10]);
        assert_eq!(map_scores(ScoreMapping::Rescale, &[60, 60, 60]), [10, 10, 10]);
        assert_eq!(map_scores(ScoreMapping::Rescale, &[37]), [10]);
        assert!(map_scores(ScoreMapping::Rescale, &[]).is_empty());
    }

    #[test]
    fn the_guess_is_singled_out_at_the_top() {
        // 86 and 85 both round to 9: the guess (86) goes to 10, the other stays 9.
        let mut mapped = map_scores(ScoreMapping::Round, &[85, 86, 40]);
        assert_eq!(mapped, [9, 9, 4]);
        single_out(&mut mapped, best_candidate(&[85, 86, 40]).unwrap());
        assert_eq!(mapped, [9, 10, 4]);
        // At 10 already (96 and 100): the others at 10 go down to 9.
        let mut mapped = map_scores(ScoreMapping::Round, &[96, 100, 97, 30]);
        single_out(&mut mapped, 1);
        assert_eq!(mapped, [9, 10, 9, 3]);
        // Exact ties: the first is the guess, and the only one at the top.
        let mut mapped = vec![5, 5, 5];
        single_out(&mut mapped, best_candidate(&[50, 50, 50]).unwrap());
        assert_eq!(mapped, [6, 5, 5]);
        // Alone at the top already, or out of range: unchanged.
        let mut mapped = vec![3, 7];
        single_out(&mut mapped, 1);
        assert_eq!(mapped, [3, 7]);
        single_out(&mut mapped, 9);
        assert_eq!(mapped, [3, 7]);
    }
}
