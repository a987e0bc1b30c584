//! Sim-only variants for ablation studies (SIMULATION.md, "Volatile backgrounds"): each
//! changes one thing of a strategy to find which of its parts a result comes from. None of
//! them is a peer as its users deploy it, so they never count in the target; the report
//! shows them as context. `waterline-sim run … --compare koordinator-prom,…`.

use waterline_core::Millis;
use waterline_peers::koordinator::Args as KoordArgs;
use waterline_peers::profile::Profile;

use waterline_core::UnixMillis;

use super::{
    Cycle, ExtenderFlags, Koordinator, Koordlet, MetricKind, MetricNeed, NodeView, Path,
    PodSeriesNeed, PodSummary, Pricing, Profiled, SchedulerProfile, Strategy, StrategyError,
    Waterline, waterline_profile,
};
use crate::model::SimPod;

/// The variants [`by_name`] knows, with what each changes.
pub const VARIANTS: &[(&str, &str)] = &[
    ("waterline-alone", "waterline's plugin with no other score plugin (no PodTopologySpread)"),
    ("koordinator-prom", "LoadAware on Prometheus' 5 m average polled every 60 s, not koordlet"),
    ("koordinator-60s", "koordlet averaging over 60 s instead of 300 s"),
    ("koordinator-no-estimate", "estimated scaling factors 0: no estimate of placed pods"),
    ("koordinator-no-filter", "usage thresholds 0: score only"),
    ("koordinator-no-score", "resource weights 0: filter only"),
    (
        "waterline-no-provisional",
        "waterline with its extender adapter started with --provisional-reserve=false: on the \
         extender path the burst is decided on the ledger the pod watch fills (the same as \
         waterline on the plugin path)",
    ),
    (
        "waterline-departure-credit",
        "waterline's default policy with `departures: credit` on its two 5 m averages (core's \
         departure credit, docs/policy.md#departures; the default holds)",
    ),
    (
        "waterline-no-learning",
        "waterline's default policy with `estimator.learn.enabled: false`: every pod priced by \
         the policy's factors (0.85 cpu / 0.70 memory × request), as before the learned \
         estimate",
    ),
    (
        "waterline-cpu-factor-F",
        "waterline's default policy with learning off and `estimator.cpuFactor: F` (0 < F ≤ \
         10): one global factor for every pod, the search the learned estimate is judged \
         against (`scripts/simulation.sh factors SCENARIO`)",
    ),
    (
        "waterline-headroom-K",
        "the prototype: waterline's default policy with each 1 h / 1 d maximum of the 5 m \
         average replaced by its mean + K standard deviations over the same span (K = 1, 1.5, \
         2, 3; `-leastused` appended: with `curve: leastUsed`)",
    ),
];

/// A strategy whose metrics are computed differently: `remeter` rewrites each need (same
/// names, same order, so the strategy reads the new values where it read the old ones).
struct Remetered {
    label: String,
    inner: Box<dyn Strategy>,
    remeter: fn(MetricNeed, i64) -> MetricNeed,
    arg: i64,
}

impl Strategy for Remetered {
    fn label(&self) -> &str {
        &self.label
    }
    fn path(&self, scenario: Path) -> Path {
        self.inner.path(scenario)
    }
    fn metrics(&self) -> Vec<MetricNeed> {
        self.inner.metrics().into_iter().map(|m| (self.remeter)(m, self.arg)).collect()
    }
    fn filter(&mut self, c: &Cycle, p: &SimPod, n: &[NodeView<'_>]) -> Vec<Option<String>> {
        self.inner.filter(c, p, n)
    }
    fn score(&mut self, c: &Cycle, p: &SimPod, n: &[NodeView<'_>]) -> Vec<i64> {
        self.inner.score(c, p, n)
    }
    fn on_metrics(&mut self, now: UnixMillis, n: &[NodeView<'_>]) {
        self.inner.on_metrics(now, n)
    }
    fn on_reserve(&mut self, now: UnixMillis, p: &SimPod, node: &str) {
        self.inner.on_reserve(now, p, node)
    }
    fn on_bound(&mut self, now: UnixMillis, p: &SimPod, node: &str, at: UnixMillis) {
        self.inner.on_bound(now, p, node, at)
    }
    fn on_deleted(&mut self, now: UnixMillis, p: &SimPod, node: &str) {
        self.inner.on_deleted(now, p, node)
    }
    fn pod_series(&self) -> Option<PodSeriesNeed> {
        self.inner.pod_series()
    }
    fn on_pod_usage(&mut self, now: UnixMillis, pods: &[PodSummary]) {
        self.inner.on_pod_usage(now, pods)
    }
    fn pricing(&self) -> Option<Pricing> {
        self.inner.pricing()
    }
}

/// koordlet's metrics as Prometheus' 5 m averages (polled at koordlet's report interval).
fn from_prometheus(m: MetricNeed, _: i64) -> MetricNeed {
    MetricNeed { kind: MetricKind::Avg { window: Millis::from_mins(5) }, ..m }
}

/// The prototype of a variability headroom: every `max_over_time(avg[over])` becomes
/// `avg_over_time(avg[over]) + k·stddev_over_time(avg[over])` (k = `sigmas_x10` / 10).
fn headroom(m: MetricNeed, sigmas_x10: i64) -> MetricNeed {
    match m.kind {
        MetricKind::MaxOfAvg { window, over } => {
            MetricNeed { kind: MetricKind::MeanPlusSigma { window, over, sigmas_x10 }, ..m }
        }
        _ => m,
    }
}

fn alone(label: &str, inner: Box<dyn Strategy>) -> Box<dyn Strategy> {
    Box::new(Profiled::new(
        label,
        inner,
        SchedulerProfile { weight: 1, in_tree: Profile::default() },
    ))
}

/// The variant called `name`, if it is one.
pub fn by_name(name: &str) -> Option<Result<Box<dyn Strategy>, StrategyError>> {
    let koord = |args: KoordArgs, koordlet: Koordlet| -> Box<dyn Strategy> {
        Box::new(Koordinator::with_pipeline(args, koordlet))
    };
    let d = KoordArgs::default();
    let strategy = match name {
        "waterline-alone" => {
            match Waterline::new("waterline-alone", waterline_core::Policy::default()) {
                Ok(w) => alone(name, Box::new(w)),
                Err(e) => return Some(Err(e)),
            }
        }
        "waterline-no-provisional" => {
            let flags = ExtenderFlags { provisional_ttl: None, ..ExtenderFlags::default() };
            match Waterline::with_extender_flags(name, waterline_core::Policy::default(), flags) {
                Ok(w) => Box::new(Profiled::new(name, Box::new(w), waterline_profile())),
                Err(e) => return Some(Err(e)),
            }
        }
        "waterline-departure-credit" => {
            let policy = waterline_core::Policy::default().crediting_departures();
            match Waterline::new(name, policy) {
                Ok(w) => Box::new(Profiled::new(name, Box::new(w), waterline_profile())),
                Err(e) => return Some(Err(e)),
            }
        }
        "waterline-no-learning" => match Waterline::new(name, without_learning()) {
            Ok(w) => Box::new(Profiled::new(name, Box::new(w), waterline_profile())),
            Err(e) => return Some(Err(e)),
        },
        "koordinator-prom" => alone(
            name,
            Box::new(Remetered {
                label: name.into(),
                inner: Box::new(Koordinator::new()),
                remeter: from_prometheus,
                arg: 0,
            }),
        ),
        "koordinator-60s" => {
            alone(name, koord(d, Koordlet { window: Millis::from_secs(60), ..Koordlet::default() }))
        }
        "koordinator-no-estimate" => {
            let args = KoordArgs { estimated_scaling_factors: Default::default(), ..d };
            alone(name, koord(args, Koordlet::default()))
        }
        "koordinator-no-filter" => {
            let args = KoordArgs { usage_thresholds: Default::default(), ..d };
            alone(name, koord(args, Koordlet::default()))
        }
        "koordinator-no-score" => {
            let args = KoordArgs { resource_weights: Default::default(), ..d };
            alone(name, koord(args, Koordlet::default()))
        }
        _ => return cpu_factor_variant(name).or_else(|| headroom_variant(name)),
    };
    Some(Ok(strategy))
}

/// The default policy with the learned estimate off.
fn without_learning() -> waterline_core::Policy {
    let mut policy = waterline_core::Policy::default();
    policy.estimator.learn.enabled = false;
    policy
}

/// The policy of `waterline-cpu-factor-F`, if `name` is one.
fn cpu_factor_policy(name: &str) -> Option<waterline_core::Policy> {
    let factor: f64 = name.strip_prefix("waterline-cpu-factor-")?.parse().ok()?;
    if !(factor > 0.0 && factor <= 10.0) {
        return None;
    }
    let mut policy = without_learning();
    policy.estimator.cpu_factor = factor;
    Some(policy)
}

/// `waterline-cpu-factor-F`: learning off, every pod's cpu priced at F × its request (the
/// estimator's other rules unchanged), in waterline's shipped profile.
fn cpu_factor_variant(name: &str) -> Option<Result<Box<dyn Strategy>, StrategyError>> {
    let policy = cpu_factor_policy(name)?;
    Some(
        Waterline::new(name, policy)
            .map(|w| Box::new(Profiled::new(name, Box::new(w), waterline_profile())) as _),
    )
}

/// `waterline-headroom-K[-leastused]`, in waterline's shipped profile.
fn headroom_variant(name: &str) -> Option<Result<Box<dyn Strategy>, StrategyError>> {
    let rest = name.strip_prefix("waterline-headroom-")?;
    let (k, least_used) = match rest.strip_suffix("-leastused") {
        Some(k) => (k, true),
        None => (rest, false),
    };
    let k: f64 = k.parse().ok().filter(|k: &f64| *k >= 0.0)?;
    let mut policy = waterline_core::Policy::default();
    if least_used {
        policy.curve = waterline_core::policy::Curve::LeastUsed;
    }
    let inner = match Waterline::new(name, policy) {
        Ok(w) => w,
        Err(e) => return Some(Err(e)),
    };
    let remetered = Remetered {
        label: name.into(),
        inner: Box::new(inner),
        remeter: headroom,
        arg: (k * 10.0).round() as i64,
    };
    Some(Ok(Box::new(Profiled::new(name, Box::new(remetered), waterline_profile()))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_headroom_prototype_replaces_the_maxima_and_keeps_the_order() {
        let s = by_name("waterline-headroom-1.5-leastused").unwrap().unwrap();
        assert_eq!(s.label(), "waterline-headroom-1.5-leastused");
        let kinds: Vec<MetricKind> = s.metrics().iter().map(|m| m.kind).collect();
        let five = Millis::from_mins(5);
        let sigma = |over| MetricKind::MeanPlusSigma { window: five, over, sigmas_x10: 15 };
        let (hour, day) = (sigma(Millis::from_mins(60)), sigma(Millis::from_mins(1440)));
        let avg = MetricKind::Avg { window: five };
        assert_eq!(kinds, [avg, hour, day, avg, hour, day]);
        assert!(by_name("waterline-headroom-x").is_none());
        assert!(by_name("waterline-headroom--1").is_none());
        // every listed variant builds
        for (name, _) in VARIANTS.iter().filter(|v| !v.0.ends_with("-K") && !v.0.ends_with("-F")) {
            assert_eq!(by_name(name).unwrap().unwrap().label(), *name);
        }
    }

    #[test]
    fn the_factor_variants_turn_learning_off_and_set_the_cpu_factor() {
        // Learning off: no per-pod series asked for, and the pricing is counted (all factor).
        let off = by_name("waterline-no-learning").unwrap().unwrap();
        assert_eq!(off.pod_series(), None);
        assert_eq!(off.pricing(), Some(Pricing::default()));
        let on = super::super::by_name("waterline").unwrap();
        let need = on.pod_series().unwrap();
        // estimator.learn's defaults: 24 h window, p90, refreshed every 5 m.
        assert_eq!(need.window, Millis::from_mins(24 * 60));
        assert_eq!((need.quantile, need.refresh), (0.9, Millis::from_mins(5)));
        let f = by_name("waterline-cpu-factor-1.75").unwrap().unwrap();
        assert_eq!((f.label(), f.pod_series()), ("waterline-cpu-factor-1.75", None));
        let policy = cpu_factor_policy("waterline-cpu-factor-1.75").unwrap();
        assert_eq!(policy.estimator.cpu_factor, 1.75);
        assert!(!policy.estimator.learn.enabled);
        // memory keeps the default 0.70
        assert_eq!(policy.estimator.memory_factor, 0.70);
        for bad in ["waterline-cpu-factor-0", "waterline-cpu-factor-11", "waterline-cpu-factor-x"] {
            assert!(by_name(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn koordinator_prom_reads_prometheus() {
        let s = by_name("koordinator-prom").unwrap().unwrap();
        assert!(s.metrics().iter().all(|m| m.kind.from_prometheus()));
        assert!(by_name("koordinator-60s").unwrap().unwrap().metrics().iter().all(|m| {
            matches!(m.kind, MetricKind::Koordlet { window, .. } if window == Millis::from_secs(60))
        }));
    }
}
