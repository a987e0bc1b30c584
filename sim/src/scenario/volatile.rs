//! Volatile node backgrounds: seeded series that look like real servers' usage — long calm
//! stretches and busy spells of minutes to hours, switching abruptly, with noise on top.
//!
//! The model is a two-state Markov-modulated process (the regime is what a node's other
//! tenants are doing: idle or busy):
//!
//! 1. **levels**: per node, an idle and a busy level for cpu and for memory, each drawn
//!    uniformly from the file's `{min, max}`;
//! 2. **dwell times**: the time spent in a regime before switching is heavy-tailed —
//!    lognormal (`{median, sigma}`: `median × e^(sigma·Z)`) or Pareto (`{min, alpha}`:
//!    `min × U^(−1/alpha)`), capped at `maxDwell` — so most spells are short and a few
//!    last for hours, as measured server utilisation shows (long-range dependence; Pareto
//!    tails are the usual fit);
//! 3. **switching**: at the end of a dwell the level moves linearly to the other regime's
//!    over `ramp`;
//! 4. **noise**: a Gaussian AR(1) process per resource with standard deviation `noise.cpu` /
//!    `noise.memory` (pp) and correlation time `noise.correlation`:
//!    `x(k+1) = ρ·x(k) + √(1 − ρ²)·σ·ε`, `ρ = e^(−step / correlation)`;
//! 5. the series has one point every `step` from the start of the warm-up to the end,
//!    clamped at 0. The first regime is busy with the stationary probability
//!    `E[busy dwell] / (E[idle dwell] + E[busy dwell])`, and the run starts part-way into
//!    its first dwell (a uniform share of a drawn one), so no two nodes switch together.

use rand::Rng;
use rand::rngs::StdRng;
use waterline_core::Millis;

/// The node's own stream of uniforms: SplitMix64 seeded once from the scenario's generator
/// (a node's series costs one draw of it, and the thousands of draws of a day-long series
/// stay cheap in debug builds, where the tests run).
struct Uniforms(u64);

impl Uniforms {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in (0, 1]: safe under a logarithm.
    fn open(&mut self) -> f64 {
        1.0 - self.unit()
    }
}

use super::Series;
use crate::model::SimTime;

/// How long a regime lasts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dwell {
    LogNormal { median: Millis, sigma: f64 },
    Pareto { min: Millis, alpha: f64 },
}

impl Dwell {
    fn draw(self, rng: &mut Uniforms, cap: Millis) -> SimTime {
        let u = rng.open();
        let ms = match self {
            Dwell::LogNormal { median, sigma } => {
                let v = rng.unit();
                median.0 as f64 * (sigma * standard_normal(u, v)).exp()
            }
            Dwell::Pareto { min, alpha } => min.0 as f64 * u.powf(-1.0 / alpha),
        };
        (ms as SimTime).clamp(1000, cap.0.max(1000))
    }

    /// The mean dwell (before the cap): lognormal `median·e^(σ²/2)`, Pareto
    /// `min·α/(α − 1)` (α ≤ 1 has no mean: the cap stands in).
    fn mean(self, cap: Millis) -> f64 {
        match self {
            Dwell::LogNormal { median, sigma } => median.0 as f64 * (sigma * sigma / 2.0).exp(),
            Dwell::Pareto { min, alpha } if alpha > 1.0 => min.0 as f64 * alpha / (alpha - 1.0),
            Dwell::Pareto { .. } => cap.0 as f64,
        }
        .min(cap.0 as f64)
    }
}

/// Box–Muller: one standard normal from two uniforms in (0, 1].
fn standard_normal(u: f64, v: f64) -> f64 {
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// A volatile background, resolved per node.
#[derive(Clone, Debug, PartialEq)]
pub struct Volatile {
    /// (cpu %, memory %) while idle and while busy.
    pub idle: (f64, f64),
    pub busy: (f64, f64),
    pub idle_dwell: Dwell,
    pub busy_dwell: Dwell,
    pub max_dwell: Millis,
    pub ramp: Millis,
    /// Noise standard deviation, pp: (cpu, memory).
    pub noise: (f64, f64),
    pub correlation: Millis,
    pub step: Millis,
}

impl Volatile {
    /// The regime switches over `[from, to]`: `(time, busy)` from `from` on, the first at
    /// `from` itself.
    pub fn regimes(&self, rng: &mut StdRng, from: SimTime, to: SimTime) -> Vec<(SimTime, bool)> {
        self.regimes_from(&mut Uniforms(rng.random()), from, to)
    }

    fn regimes_from(&self, rng: &mut Uniforms, from: SimTime, to: SimTime) -> Vec<(SimTime, bool)> {
        let (mi, mb) = (self.idle_dwell.mean(self.max_dwell), self.busy_dwell.mean(self.max_dwell));
        let mut busy = rng.unit() < mb / (mi + mb);
        let mut out = vec![(from, busy)];
        let dwell = |busy: bool, rng: &mut Uniforms| {
            let d = if busy { self.busy_dwell } else { self.idle_dwell };
            d.draw(rng, self.max_dwell)
        };
        let share = rng.unit();
        let mut t = from + (dwell(busy, rng) as f64 * share) as SimTime;
        while t <= to {
            busy = !busy;
            out.push((t, busy));
            t += dwell(busy, rng);
        }
        out
    }

    /// The node's cpu and memory series over `[from, to]`.
    pub fn generate(&self, rng: &mut StdRng, from: SimTime, to: SimTime) -> (Series, Series) {
        let rng = &mut Uniforms(rng.random());
        let switches = self.regimes_from(rng, from, to);
        let rho = (-(self.step.0 as f64) / self.correlation.0.max(1) as f64).exp();
        let kick = (1.0 - rho * rho).sqrt();
        let (mut nc, mut nm) = (0.0, 0.0);
        let (mut cpu, mut memory) = (Vec::new(), Vec::new());
        let mut k = 0;
        let mut t = from;
        while t <= to {
            while k + 1 < switches.len() && switches[k + 1].0 <= t {
                k += 1;
            }
            let (since, busy) = switches[k];
            let level = |regime: bool| if regime { self.busy } else { self.idle };
            let share = if self.ramp.0 > 0 {
                ((t - since) as f64 / self.ramp.0 as f64).min(1.0)
            } else {
                1.0
            };
            // the first regime has been going on for a while: no ramp into it
            let share = if k == 0 { 1.0 } else { share };
            let (to_level, from_level) = (level(busy), level(!busy));
            let base_cpu = from_level.0 + (to_level.0 - from_level.0) * share;
            let base_memory = from_level.1 + (to_level.1 - from_level.1) * share;
            let (u1, v1, u2, v2) = (rng.open(), rng.unit(), rng.open(), rng.unit());
            nc = rho * nc + kick * self.noise.0 * standard_normal(u1, v1);
            nm = rho * nm + kick * self.noise.1 * standard_normal(u2, v2);
            cpu.push((t, (base_cpu + nc).max(0.0)));
            memory.push((t, (base_memory + nm).max(0.0)));
            t += self.step.0.max(1000);
        }
        (Series(cpu), Series(memory))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    const MIN: SimTime = 60_000;

    fn spec(idle: Dwell, busy: Dwell) -> Volatile {
        Volatile {
            idle: (10.0, 20.0),
            busy: (50.0, 40.0),
            idle_dwell: idle,
            busy_dwell: busy,
            max_dwell: Millis::from_mins(600),
            ramp: Millis(0),
            noise: (0.0, 0.0),
            correlation: Millis::from_mins(5),
            step: Millis::from_secs(30),
        }
    }

    #[test]
    fn fixed_dwells_alternate_the_two_levels() {
        // sigma 0: every idle spell lasts 10 m, every busy one 5 m (after the first)
        let v = spec(
            Dwell::LogNormal { median: Millis::from_mins(10), sigma: 0.0 },
            Dwell::LogNormal { median: Millis::from_mins(5), sigma: 0.0 },
        );
        let mut rng = StdRng::seed_from_u64(3);
        let switches = v.regimes(&mut rng, 0, 120 * MIN);
        for w in switches[1..].windows(2) {
            let expect = if w[0].1 { 5 * MIN } else { 10 * MIN };
            assert_eq!(w[1].0 - w[0].0, expect, "{switches:?}");
            assert_ne!(w[0].1, w[1].1);
        }
        let mut rng = StdRng::seed_from_u64(3);
        let (cpu, memory) = v.generate(&mut rng, 0, 120 * MIN);
        // no ramp, no noise: only the two levels, each where its regime says
        assert!(cpu.0.iter().all(|(_, c)| *c == 10.0 || *c == 50.0));
        for ((t, c), (_, m)) in cpu.0.iter().zip(&memory.0) {
            let k = switches.partition_point(|s| s.0 <= *t) - 1;
            let (c0, m0) = if switches[k].1 { (50.0, 40.0) } else { (10.0, 20.0) };
            assert_eq!((*c, *m), (c0, m0), "at {t}");
        }
    }

    #[test]
    fn busy_share_and_dwell_tails_follow_the_distributions() {
        // Pareto busy spells, min 5 m, alpha 1.5: mean 5·1.5/0.5 = 15 m; lognormal idle,
        // median 30 m, sigma 1: mean 30·e^0.5 = 49.5 m. Busy share 15 / 64.5 = 0.233.
        let v = spec(
            Dwell::LogNormal { median: Millis::from_mins(30), sigma: 1.0 },
            Dwell::Pareto { min: Millis::from_mins(5), alpha: 1.5 },
        );
        let mut rng = StdRng::seed_from_u64(11);
        let (from, to) = (0, 2000 * 60 * MIN); // 2,000 hours
        let s = v.regimes(&mut rng, from, to);
        let busy: SimTime = s.windows(2).filter(|w| w[0].1).map(|w| w[1].0 - w[0].0).sum();
        let share = busy as f64 / (s.last().unwrap().0 - from) as f64;
        assert!((share - 0.233).abs() < 0.03, "busy share {share}");
        // heavy tail: a tenth of the busy spells last longer than 5·10^(2/3) = 23.2 m
        // (P(X > x) = (5/x)^1.5 = 0.1)
        let spells: Vec<SimTime> =
            s.windows(2).skip(1).filter(|w| w[0].1).map(|w| w[1].0 - w[0].0).collect();
        let long = spells.iter().filter(|d| **d > 23 * MIN + 12_000).count() as f64;
        assert!((long / spells.len() as f64 - 0.1).abs() < 0.02, "{long} / {}", spells.len());
    }

    #[test]
    fn noise_has_its_standard_deviation_and_the_series_is_seeded() {
        let mut v = spec(
            Dwell::LogNormal { median: Millis::from_mins(10_000_000), sigma: 0.0 },
            Dwell::LogNormal { median: Millis::from_mins(10_000_000), sigma: 0.0 },
        );
        v.max_dwell = Millis::from_mins(10_000_000);
        v.noise = (4.0, 1.0);
        let mut rng = StdRng::seed_from_u64(5);
        let (cpu, _) = v.generate(&mut rng, 0, 500 * 60 * MIN);
        let values: Vec<f64> = cpu.0.iter().map(|p| p.1).collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let sd = (values.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>()
            / values.len() as f64)
            .sqrt();
        // one regime for the whole run (10 or 50 %), noise sd 4 pp (the 0 clamp is 2.5 sd
        // below the idle level and barely bites)
        assert!((sd - 4.0).abs() < 0.3, "sd {sd}");
        let again = v.generate(&mut StdRng::seed_from_u64(5), 0, 500 * 60 * MIN);
        assert_eq!(again.0, cpu);
    }
}
