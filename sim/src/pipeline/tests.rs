use super::*;
use crate::model::EPOCH;

const MIN: i64 = 60_000;

/// One node of 1000 m / 1000 bytes whose usage jumps from 0 to 500 m / 500 bytes at 0,
/// scraped every 15 s, the 5 m rule every 30 s, polled every 30 s; returns the polled
/// value at every poll time from `from` to `to` (inclusive).
fn drive(config: Pipeline, resource: Resource, from: i64, to: i64) -> Vec<(i64, Option<f64>)> {
    let need = MetricNeed {
        name: "m".into(),
        resource,
        kind: MetricKind::Avg { window: Millis::from_mins(5) },
        poll: Millis::from_secs(30),
    };
    let mut p = MetricsPipeline::new(config, vec![need], vec![Resources::new(1000, 1000)], 1);
    let mut seen = Vec::new();
    let mut t = -20 * MIN;
    while t <= to {
        let u = if t >= 0 { 500.0 } else { 0.0 };
        p.scrape(t, &[(u, u)]);
        if t % 30_000 == 0 {
            p.evaluate(RuleGroup::Avg, t);
            p.poll(0, t);
            if t >= from {
                seen.push((t, p.samples(0)[0].map(|s| s.value)));
            }
        }
        t += 15_000;
    }
    seen
}

fn value_at(seen: &[(i64, Option<f64>)], t: i64) -> f64 {
    seen.iter().find(|(at, _)| *at == t).and_then(|(_, v)| *v).expect("a sample")
}

#[test]
fn cpu_reaches_the_5m_average_only_after_the_whole_window() {
    let seen = drive(Pipeline::default(), Resource::Cpu, 0, 10 * MIN);
    // The counter's trapezoid from the scrape at −15 s (0 m) to 0 (500 m) adds
    // 250 × 15,000; every later 15 s adds 500 × 15,000 = 7.5e6 millicore-ms.
    // At T = 0 the window (−300 s, 0] spans −285 s..0: 3.75e6 / 285,000 = 13.16 m → 1.316 %.
    assert!((value_at(&seen, 0) - 3.75e6 / 285_000.0 / 10.0).abs() < 1e-9);
    // At T = 150 s: (3.75e6 + 10 × 7.5e6) / 285,000 ms = 276.3 m → 27.63 %.
    assert!((value_at(&seen, 150_000) - 78.75e6 / 285_000.0 / 10.0).abs() < 1e-9);
    // At T = 270 s the window still holds the scrape at −15 s: (3.75e6 + 18 × 7.5e6) / 285,000.
    assert!((value_at(&seen, 270_000) - 138.75e6 / 285_000.0 / 10.0).abs() < 1e-9);
    // From T = 285 s the window's first scrape is at 0 or later: the full 50 %, first polled
    // at 300 s (polls every 30 s) — five minutes after the pod started.
    assert!((value_at(&seen, 300_000) - 50.0).abs() < 1e-9);
    assert!(value_at(&seen, 270_000) < 49.0);
}

#[test]
fn memory_is_the_mean_of_the_scraped_gauge() {
    let seen = drive(Pipeline::default(), Resource::Memory, 0, 10 * MIN);
    // T = 150 s: 20 scrapes in (−150, 150], the 11 from 0 on at 500 bytes: 5500 / 20 = 275.
    assert!((value_at(&seen, 150_000) - 27.5).abs() < 1e-9);
    // T = 300 s: the 20 scrapes 15..300 s are all at 500.
    assert!((value_at(&seen, 300_000) - 50.0).abs() < 1e-9);
}

#[test]
fn a_delay_shifts_the_view_by_that_much() {
    let config = Pipeline { delay: Millis::from_secs(60), ..Pipeline::default() };
    let seen = drive(config, Resource::Cpu, 0, 10 * MIN);
    // What the undelayed pipeline showed at 270 s shows at 330 s; full at 360 s.
    assert!((value_at(&seen, 330_000) - 138.75e6 / 285_000.0 / 10.0).abs() < 1e-9);
    assert!((value_at(&seen, 360_000) - 50.0).abs() < 1e-9);
    // and what it showed at 0 (1.316 %) shows at 60 s
    assert!((value_at(&seen, 60_000) - 3.75e6 / 285_000.0 / 10.0).abs() < 1e-9);
}

#[test]
fn an_outage_freezes_the_samples_which_then_age() {
    let config = Pipeline { outages: vec![(2 * MIN, 8 * MIN)], ..Pipeline::default() };
    let need = MetricNeed {
        name: "m".into(),
        resource: Resource::Cpu,
        kind: MetricKind::Avg { window: Millis::from_mins(5) },
        poll: Millis::from_secs(30),
    };
    let mut p = MetricsPipeline::new(config, vec![need], vec![Resources::new(1000, 1000)], 1);
    let mut t = -10 * MIN;
    while t <= 8 * MIN + 30_000 {
        p.scrape(t, &[(500.0, 500.0)]);
        if t % 30_000 == 0 {
            p.evaluate(RuleGroup::Avg, t);
            let answered = p.poll(0, t);
            assert_eq!(answered, !(2 * MIN..8 * MIN).contains(&t), "t = {t}");
        }
        if t == 7 * MIN {
            // the last answered poll was at 1 m 30 s
            assert_eq!(p.samples(0)[0].unwrap().at, EPOCH.plus(Millis(90_000)));
        }
        t += 15_000;
    }
    // After the outage the window (3 m, 8 m 30 s] holds the 3 scrapes from 8 m on: 50 %.
    let sample = p.samples(0)[0].unwrap();
    assert_eq!(sample.at, EPOCH.plus(Millis(8 * MIN + 30_000)));
    assert!((sample.value - 50.0).abs() < 1e-9);
}

#[test]
fn the_hour_maximum_keeps_a_spike_of_the_5m_average() {
    let need = MetricNeed {
        name: "max".into(),
        resource: Resource::Memory,
        kind: MetricKind::MaxOfAvg { window: Millis::from_mins(5), over: Millis::from_mins(60) },
        poll: Millis::from_mins(1),
    };
    let mut p =
        MetricsPipeline::new(Pipeline::default(), vec![need], vec![Resources::new(1000, 1000)], 1);
    let mut t = 0;
    while t <= 40 * MIN {
        // 900 bytes between 10 m and 20 m, 100 otherwise
        let u = if (10 * MIN..20 * MIN).contains(&t) { 900.0 } else { 100.0 };
        p.scrape(t, &[(0.0, u)]);
        if t % MIN == 0 {
            p.step(t);
            p.evaluate(RuleGroup::Hour, t);
            p.poll(0, t);
        }
        t += 15_000;
    }
    // The 5 m average was 90 % from 15 m to 20 m; 20 minutes later the 1 h max still says so.
    assert!((p.samples(0)[0].unwrap().value - 90.0).abs() < 1e-9);
}

#[test]
fn mean_plus_sigma_is_promql_s_population_deviation() {
    // values 10, 20, 30, 40: mean 25, variance (225 + 25 + 25 + 225) / 4 = 125, sd 11.18
    let v = mean_plus_sigma(&[10.0, 20.0, 30.0, 40.0], 2.0).unwrap();
    assert!((v - (25.0 + 2.0 * 125f64.sqrt())).abs() < 1e-9, "{v}");
    assert_eq!(mean_plus_sigma(&[7.0], 3.0), Some(7.0));
    assert_eq!(mean_plus_sigma(&[], 1.0), None);
}
