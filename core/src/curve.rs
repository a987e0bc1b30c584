//! The scoring curves of design.md §4, each mapping a predicted utilisation (percent) to a
//! score 0..100.

/// TargetLoadPacking's water-level curve with target `x` (0 < x < 100): rises from `x` at
/// idle to 100 at the target, falls to 0 at full use, 0 above 100 %.
pub fn water_level(target: f64, utilisation: f64) -> f64 {
    let u = utilisation.max(0.0);
    if u <= target {
        (100.0 - target) * u / target + target
    } else if u <= 100.0 {
        target * (100.0 - u) / (100.0 - target)
    } else {
        0.0
    }
}

/// Least-used: `100 − U`, clamped to 0..100.
pub fn least_used(utilisation: f64) -> f64 {
    (100.0 - utilisation).clamp(0.0, 100.0)
}

/// Rounds half away from zero, as design.md §4 requires (`f64::round`).
pub fn round_score(score: f64) -> i64 {
    score.round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn water_level_matches_the_worked_example_for_target_20() {
        let scores: Vec<i64> = [1.0, 5.0, 20.0, 25.0, 50.0, 99.0]
            .iter()
            .map(|&u| round_score(water_level(20.0, u)))
            .collect();
        assert_eq!(scores, vec![24, 40, 100, 19, 13, 0]);
    }

    #[test]
    fn water_level_is_zero_above_full_and_target_at_idle() {
        assert_eq!(water_level(20.0, 150.0), 0.0);
        assert_eq!(water_level(40.0, 0.0), 40.0);
        assert_eq!(water_level(40.0, 100.0), 0.0);
    }

    #[test]
    fn least_used_is_clamped() {
        assert_eq!(least_used(30.0), 70.0);
        assert_eq!(least_used(130.0), 0.0);
        assert_eq!(least_used(-5.0), 100.0);
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        assert_eq!(round_score(12.5), 13);
        assert_eq!(round_score(18.75), 19);
        assert_eq!(round_score(0.25), 0);
    }
}
