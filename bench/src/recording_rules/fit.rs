//! Least-squares line through (x, y) points, with residuals, for the growth of rule
//! evaluation time and memory with the number of series.

use serde_json::{Value, json};

/// `y = intercept + slope · x`.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub intercept: f64,
    pub slope: f64,
    /// `y − fitted` at each input point, in input order.
    pub residuals: Vec<f64>,
    /// Coefficient of determination (1 for a perfect fit; NaN when every y is equal).
    pub r2: f64,
}

impl Line {
    /// `None` with fewer than two distinct x.
    pub fn fit(points: &[(f64, f64)]) -> Option<Line> {
        let n = points.len() as f64;
        if points.len() < 2 {
            return None;
        }
        let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
        let my = points.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        if sxx == 0.0 {
            return None;
        }
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let slope = sxy / sxx;
        let intercept = my - slope * mx;
        let residuals: Vec<f64> = points.iter().map(|p| p.1 - (intercept + slope * p.0)).collect();
        let ss_res: f64 = residuals.iter().map(|r| r * r).sum();
        let ss_tot: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
        Some(Line { intercept, slope, residuals, r2: 1.0 - ss_res / ss_tot })
    }

    pub fn at(&self, x: f64) -> f64 {
        self.intercept + self.slope * x
    }

    pub fn json(&self) -> Value {
        json!({ "intercept": self.intercept, "slope": self.slope, "residuals": self.residuals, "r2": self.r2 })
    }
}

/// Median of `values` (mean of the middle two for an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_a_line_and_reports_residuals() {
        // y = 1 + 2x exactly at x = 0, 1; (2, 6) lies 1 above it. Least squares over
        // (0,1), (1,3), (2,6): mean x 1, mean y 10/3, sxx 2, sxy = (−1)(1−10/3) + 0 + (1)(6−10/3)
        // = 7/3 + 8/3 = 5 → slope 2.5, intercept 10/3 − 2.5 = 5/6.
        let line = Line::fit(&[(0.0, 1.0), (1.0, 3.0), (2.0, 6.0)]).unwrap();
        assert!((line.slope - 2.5).abs() < 1e-12);
        assert!((line.intercept - 5.0 / 6.0).abs() < 1e-12);
        // Residuals: 1 − 5/6 = 1/6, 3 − 10/3 = −1/3, 6 − 35/6 = 1/6.
        let want = [1.0 / 6.0, -1.0 / 3.0, 1.0 / 6.0];
        for (r, w) in line.residuals.iter().zip(want) {
            assert!((r - w).abs() < 1e-12, "{r} vs {w}");
        }
        assert!((line.at(4.0) - (5.0 / 6.0 + 10.0)).abs() < 1e-12);
        assert!(Line::fit(&[(1.0, 2.0)]).is_none());
        assert!(Line::fit(&[(1.0, 2.0), (1.0, 3.0)]).is_none());
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
