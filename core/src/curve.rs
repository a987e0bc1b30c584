//! The scoring curves (docs/design.md#water-level-curve), each mapping a predicted utilisation
//! (percent) to a score 0..100.

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

/// Rounds half away from zero, as docs/design.md#water-level-curve requires (`f64::round`).
pub fn round_score(score: f64) -> i64 {
    round_half_away(score) as i64
}

/// `f64::round` without the libm call it compiles to on baseline x86-64 (no SSE4.1
/// `roundsd`), where it was 13 % of a Score: truncation is one instruction, and below 2⁵²
/// `x − trunc(x)` is exact, so the result is bit-for-bit `x.round()` up to the sign of zero.
pub fn round_half_away(x: f64) -> f64 {
    // 2⁵²: from here on every f64 is an integer already; NaN and ±∞ pass through too.
    if x.is_nan() || x.abs() >= 4_503_599_627_370_496.0 {
        return x;
    }
    let whole = x as i64 as f64;
    let fraction = x - whole;
    if fraction >= 0.5 {
        whole + 1.0
    } else if fraction <= -0.5 {
        whole - 1.0
    } else {
        whole
    }
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
    fn round_half_away_agrees_with_f64_round() {
        let mut values = vec![
            0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            0.49999999999999994,
            -0.49999999999999994,
            4_503_599_627_370_495.5,
            4_503_599_627_370_497.0,
            1e300,
            -1e300,
            12.5,
            18.75,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        // A deterministic sweep across magnitudes, ties included (k/4 hits .25, .5, .75).
        for k in -4_000i64..4_000 {
            values.push(k as f64 / 4.0);
            values.push(k as f64 * 1.37e-3);
            values.push(k as f64 * 7.919e9);
        }
        for x in values {
            assert_eq!(round_half_away(x), x.round(), "round({x:e})");
        }
        assert!(round_half_away(f64::NAN).is_nan());
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        assert_eq!(round_score(12.5), 13);
        assert_eq!(round_score(18.75), 19);
        assert_eq!(round_score(0.25), 0);
    }
}
