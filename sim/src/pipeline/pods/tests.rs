use waterline_core::learn::{PodObservation, learn};
use waterline_core::policy::Learn;
use waterline_core::workload::WorkloadKey;

use super::*;

const MIN: i64 = 60_000;

fn need(window: Millis) -> PodSeriesNeed {
    PodSeriesNeed { window, quantile: 0.9, refresh: Millis::from_mins(5) }
}

/// A pod to drive: its index, its start and its usage `t − start` after it.
type Driven<'a> = (usize, SimTime, &'a dyn Fn(SimTime) -> (f64, f64));

/// Drives `series` from `from` to `to` as the simulation does: a scrape every 15 s of
/// every pod in `pods` (index, start, usage at `t − start`), the rules every minute.
fn drive(series: &mut PodSeries, pods: &[Driven<'_>], from: SimTime, to: SimTime) {
    let mut t = from;
    while t <= to {
        let running = pods
            .iter()
            .filter(|(_, start, _)| t >= *start)
            .map(|(p, start, usage)| {
                let (cpu, memory) = usage(t - start);
                (*p, cpu, memory)
            })
            .collect::<Vec<_>>();
        series.scrape(t, running);
        if t % MIN == 0 {
            series.record(t);
        }
        t += 15_000;
    }
}

#[test]
fn a_pod_at_twice_its_request_for_the_whole_window_learns_a_ratio_of_two() {
    // Two pods requesting 1000 m that use 2000 m (and 3 GiB of a 2 GiB request) for 25 h:
    // the counter rises 2000 × 15,000 every scrape, so every rate is exactly 2000 m.
    let mut series = PodSeries::new(Pipeline::default(), need(Millis::from_mins(24 * 60)));
    let gib = (1u64 << 30) as f64;
    let busy = |_: SimTime| (2000.0, 3.0 * gib);
    drive(&mut series, &[(0, 0, &busy), (1, 0, &busy)], 0, 25 * 60 * MIN);
    let answers = series.answers(25 * 60 * MIN).unwrap();
    assert_eq!(answers.len(), 2);
    // The window (1 h, 25 h] holds one recorded sample a minute: 1,440 of each resource.
    let cpu = answers[0].cpu.unwrap();
    assert_eq!((cpu.usage, cpu.samples), (2000.0, 1440));
    assert_eq!(answers[0].memory.unwrap().usage, 3.0 * gib);
    // Through core's rule: ratio 2000 / 1000 = 2.0 for cpu, 3 GiB / 2 GiB = 1.5 for memory;
    // 2 pods × 1,440 samples = 2,880 ≥ minSamples 120.
    let workload = WorkloadKey::new("default", "Deployment", "web");
    let observations = answers.iter().map(|a| PodObservation {
        workload: workload.clone(),
        cpu_request_millis: 1000,
        memory_request_bytes: 2 << 30,
        cpu: a.cpu,
        memory: a.memory,
    });
    let learned = learn(&Learn::default(), observations);
    let usage = learned.get(&workload).unwrap();
    assert_eq!(usage.cpu.unwrap().ratio, Some(2.0));
    assert_eq!(usage.memory.unwrap().ratio, Some(1.5));
    assert_eq!(usage.cpu.unwrap().samples, 2880);
}

#[test]
fn a_pod_started_ten_minutes_ago_has_about_ten_samples() {
    let mut series = PodSeries::new(Pipeline::default(), need(Millis::from_mins(24 * 60)));
    let flat = |_: SimTime| (500.0, 1000.0);
    // Started (first scraped) at 0; rules at 0, 1 m, …, 10 m.
    drive(&mut series, &[(7, 0, &flat)], -30 * MIN, 10 * MIN);
    let answer = series.answers(10 * MIN).unwrap()[0];
    assert_eq!(answer.pod, 7);
    // Memory has a sample from the rule at 0 (the scrape at 0 is the latest): 11. Cpu needs
    // two scrapes in the rate window: the first rate is at 1 m (scrapes 0..60 s): 10.
    assert_eq!(answer.memory.unwrap().samples, 11);
    assert_eq!(answer.cpu.unwrap().samples, 10);
    assert_eq!(answer.cpu.unwrap().usage, 500.0);
}

#[test]
fn the_quantile_is_prometheus_interpolated_one() {
    // rank 0.9 × (10 − 1) = 8.1: 9 + 0.1 × (10 − 9) = 9.1, whatever the order.
    let mut values = [3.0, 10.0, 1.0, 7.0, 5.0, 2.0, 9.0, 4.0, 8.0, 6.0];
    let q = quantile_over_time(0.9, &mut values).unwrap();
    assert!((q - 9.1).abs() < 1e-6, "{q}");
    // The median of 4 values: rank 1.5 between 2 and 3.
    assert_eq!(quantile_over_time(0.5, &mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    assert_eq!(quantile_over_time(0.9, &mut [42.0]), Some(42.0));
    assert_eq!(quantile_over_time(0.9, &mut []), None);
}

#[test]
fn a_ramping_pod_reads_its_ramp_in_the_quantile() {
    // A pod ramping from 0 to 1000 m over 10 m, then flat; window 1 h, read at 60 m.
    let mut series = PodSeries::new(Pipeline::default(), need(Millis::from_mins(60)));
    let ramp = |since: SimTime| ((since as f64 / (10 * MIN) as f64).min(1.0) * 1000.0, 0.0);
    drive(&mut series, &[(0, 0, &ramp)], 0, 60 * MIN);
    let cpu = series.answers(60 * MIN).unwrap()[0].cpu.unwrap();
    // Rules at 1..60 m inside (0, 60 m]: 60 samples. The rates below 1000 m are the 14
    // whose window still holds the ramp (1..14 m); p90's rank 0.9 × 59 = 53.1 is flat.
    assert_eq!(cpu.samples, 60);
    assert!((cpu.usage - 1000.0).abs() < 1e-3, "{}", cpu.usage);
    // At 10 m, the median of the 10 ramp rates. The rule's window (T − 5 m, T] holds the
    // scrapes from T − 4 m 45 s, and the counter's increase over them is the mean usage
    // of a linear ramp: 100 m/min × (T − 2.375 min) — 262.5 m at 5 m, 362.5 m at 6 m — and
    // before 4 m 45 s the mean since 0, 50 m/min × T. Rank 0.5 × 9 = 4.5: 312.5 m.
    let mut early = PodSeries::new(
        Pipeline::default(),
        PodSeriesNeed { quantile: 0.5, ..need(Millis::from_mins(60)) },
    );
    drive(&mut early, &[(0, 0, &ramp)], 0, 10 * MIN);
    let cpu = early.answers(10 * MIN).unwrap()[0].cpu.unwrap();
    assert!((cpu.usage - 312.5).abs() < 1e-3, "{}", cpu.usage);
}

#[test]
fn a_delay_shifts_the_first_sample_and_the_window_drops_old_ones() {
    let config = Pipeline { delay: Millis::from_mins(5), ..Pipeline::default() };
    let mut series = PodSeries::new(config, need(Millis::from_mins(60)));
    let flat = |_: SimTime| (500.0, 1000.0);
    // Started at 0: the rule at T sees T − 5 m, so memory's first sample is at 5 m and
    // cpu's at 6 m; at 10 m that is 6 and 5 samples.
    drive(&mut series, &[(0, 0, &flat)], 0, 10 * MIN);
    let answer = series.answers(10 * MIN).unwrap()[0];
    assert_eq!(answer.memory.unwrap().samples, 6);
    assert_eq!(answer.cpu.unwrap().samples, 5);
    // Three hours on, the 1 h window holds the 60 rules in (2 h, 3 h].
    drive(&mut series, &[(0, 0, &flat)], 10 * MIN + 15_000, 180 * MIN);
    assert_eq!(series.answers(180 * MIN).unwrap()[0].cpu.unwrap().samples, 60);
}

#[test]
fn an_outage_records_nothing_fails_the_refresh_and_the_counter_keeps_counting() {
    let config = Pipeline { outages: vec![(20 * MIN, 40 * MIN)], ..Pipeline::default() };
    let mut series = PodSeries::new(config, need(Millis::from_mins(60)));
    let flat = |_: SimTime| (800.0, 1000.0);
    drive(&mut series, &[(0, 0, &flat)], 0, 30 * MIN);
    assert_eq!(series.answers(30 * MIN), None);
    drive(&mut series, &[(0, 0, &flat)], 30 * MIN + 15_000, 60 * MIN);
    let cpu = series.answers(60 * MIN).unwrap()[0].cpu.unwrap();
    // Rules at 1..19 m, and from 41 m (two scrapes after the outage) to 60 m: 19 + 20.
    assert_eq!(cpu.samples, 39);
    // Every rate is 800 m: the counter kept the outage's increase, so no rate reads it low.
    assert_eq!(cpu.usage, 800.0);
}

#[test]
fn a_deleted_pod_leaves_the_answers() {
    let mut series = PodSeries::new(Pipeline::default(), need(Millis::from_mins(60)));
    let flat = |_: SimTime| (500.0, 1000.0);
    drive(&mut series, &[(0, 0, &flat), (1, 0, &flat)], 0, 10 * MIN);
    series.stop(0);
    let answers = series.answers(10 * MIN).unwrap();
    assert_eq!(answers.iter().map(|a| a.pod).collect::<Vec<_>>(), [1]);
}
