use std::cell::RefCell;
use std::rc::Rc;

use super::*;
use crate::scenario::parse_scenario;
use crate::strategy::{self, NodeView, Strategy};
use waterline_core::{Millis, UnixMillis};

fn scenario(text: &str) -> Scenario {
    parse_scenario(text, None).unwrap()
}

/// Per cycle, per candidate: node name and how many pods the strategy saw on it.
type Seen = Rc<RefCell<Vec<Vec<(String, usize)>>>>;

/// Scores every node the same and records what each cycle saw.
struct Flat {
    seen: Seen,
}

impl Strategy for Flat {
    fn label(&self) -> &str {
        "flat"
    }
    fn score(&mut self, _: &Cycle, _: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64> {
        self.seen
            .borrow_mut()
            .push(nodes.iter().map(|n| (n.name.to_owned(), n.pods.len())).collect());
        vec![7; nodes.len()]
    }
}

fn flat() -> (Flat, Seen) {
    let seen = Rc::new(RefCell::new(Vec::new()));
    (Flat { seen: seen.clone() }, seen)
}

const SMALL: &str = "
name: small
duration: 20m
warmup: 20m
measureInterval: 30s
nodeGroups:
  - {count: 4, prefix: n, cpu: 8, memory: 32Gi, background: {cpu: {min: 10, max: 40}, memory: {min: 10, max: 30}}}
podGroups:
  - {prefix: p, count: 30, arrival: {at: 2m}, cpu: 500m, memory: 1Gi, usage: {cpu: {min: 0.5, max: 1.5}}}
  - {prefix: q, count: 20, arrival: {from: 3m, perMinute: 2}, cpu: 250m, memory: 512Mi, lifetime: 5m}
";

#[test]
fn the_same_seed_gives_the_same_summary() {
    let s = scenario(SMALL);
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let mut w = strategy::by_name("waterline").unwrap();
            let mut k = strategy::by_name("kube-default").unwrap();
            (run(&s, w.as_mut(), Outputs::default()), run(&s, k.as_mut(), Outputs::default()))
        })
        .collect();
    assert_eq!(runs[0], runs[1]);
    assert_eq!(runs[0].1.pods_placed, 50);
    let other = parse_scenario(SMALL, Some(99)).unwrap();
    let mut w = strategy::by_name("waterline").unwrap();
    assert_ne!(run(&other, w.as_mut(), Outputs::default()), runs[0].0);
}

#[test]
fn ties_are_broken_by_the_seed_across_all_best_nodes() {
    let text = "
name: ties
duration: 5m
warmup: 1m
nodeGroups: [{count: 3, prefix: n, cpu: 64, memory: 256Gi}]
podGroups: [{prefix: p, count: 60, arrival: {at: 0s}, cpu: 100m, memory: 100Mi}]
";
    let placements = |seed| {
        let s = parse_scenario(text, Some(seed)).unwrap();
        let (mut f, seen) = flat();
        let summary = run(&s, &mut f, Outputs::default());
        assert_eq!(summary.pods_placed, 60);
        // on the plugin path the assumed pods are visible at once: the counts per node
        // after the last cycle are the placements of the first 59
        let last = seen.borrow().last().cloned().unwrap();
        last.iter().map(|(_, n)| *n).collect::<Vec<_>>()
    };
    let a = placements(1);
    assert_eq!(a.iter().sum::<usize>(), 59);
    assert!(a.iter().all(|&n| n >= 10), "every tied node gets a share: {a:?}");
    assert_eq!(placements(1), a);
    assert_ne!(placements(2), a);
}

#[test]
fn request_fit_comes_first_and_unfit_pods_stay_pending() {
    let text = "
name: fit
duration: 3m
warmup: 1m
scheduler: {retryInterval: 30s}
nodes:
  - {name: small, cpu: 1, memory: 1Gi}
  - {name: big, cpu: 4, memory: 8Gi}
pods:
  - {name: a, arrival: 0s, cpu: 3, memory: 1Gi}
  - {name: b, arrival: 1s, cpu: 2, memory: 1Gi}
  - {name: c, arrival: 2s, cpu: 1, memory: 512Mi}
";
    let (mut f, seen) = flat();
    let summary = run(&scenario(text), &mut f, Outputs::default());
    let seen = seen.borrow();
    // a (3 cpu) fits only on big, which kube-scheduler takes without scoring; b (2 cpu)
    // fits nowhere once a holds 3 of big's 4; c fits on small or big (1 cpu left): the
    // only cycle scored.
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["small", "big"]);
    assert_eq!(summary.placements_per_node["big"] + summary.placements_per_node["small"], 2);
    assert!(summary.placements_per_node["big"] >= 1, "a is on big");
    assert_eq!(summary.pods_placed, 2);
    assert_eq!(summary.pods_pending_end, 1);
    // b tried at 1 s, then every 30 s until 3 m: 1 s, 31 s, …, 151 s → 6 attempts
    assert_eq!(summary.unschedulable_attempts, 6);
    assert_eq!(summary.pods_never_placed, 1);
    // measured every 30 s from 0 to 180 s: at 0 `a` has arrived and waits for its cycle
    // (measures come before the scheduler at one instant); from 30 s on `b` waits: 7
    // samples × 30 s
    assert_eq!(summary.pending_pod_seconds, 210.0);
}

const BURST: &str = "
name: burst
duration: 2m
warmup: 1m
scheduler: {path: PATH, cycle: 10ms, bindDelay: 100ms, watchLag: 5s}
nodes: [{name: only, cpu: 64, memory: 256Gi}]
podGroups: [{prefix: p, count: 5, arrival: {at: 10s}, cpu: 100m, memory: 100Mi}]
";

#[test]
fn without_reserve_every_cycle_within_the_watch_lag_sees_the_same_stale_view() {
    // two nodes, so that kube-scheduler scores (a single feasible node is taken unscored)
    let two = BURST.replace(
        "nodes: [{name: only, cpu: 64, memory: 256Gi}]",
        "nodes: [{name: one, cpu: 64, memory: 256Gi}, {name: two, cpu: 64, memory: 256Gi}]",
    );
    let pods_seen = |path: &str| {
        let (mut f, seen) = flat();
        run(&scenario(&two.replace("PATH", path)), &mut f, Outputs::default());
        seen.borrow().iter().map(|cycle| cycle.iter().map(|c| c.1).sum()).collect::<Vec<usize>>()
    };
    // plugin: each cycle sees the pods assumed before it
    assert_eq!(pods_seen("plugin"), [0, 1, 2, 3, 4]);
    // extender: the five cycles take 40 ms, all within the 5 s watch lag: none is seen
    assert_eq!(pods_seen("extender"), [0, 0, 0, 0, 0]);
    // on either path the scheduler decided 0, 1, …, 4 pods the watch had not delivered
    // when it decided the next: mean (0 + 1 + 2 + 3 + 4) / 5 = 2, max 4
    for path in ["plugin", "extender"] {
        let (mut f, _) = flat();
        let summary = run(&scenario(&two.replace("PATH", path)), &mut f, Outputs::default());
        assert_eq!(summary.unwatched_at_decision, crate::measure::Unwatched { mean: 2.0, max: 4 });
    }
}

#[test]
fn waterline_ledger_learns_at_reserve_or_after_the_watch_lag() {
    // One node: kube-scheduler takes it without scoring, so the extender is never asked to
    // prioritize and makes no provisional guess; only the watch tells it.
    for (path, expect) in [("plugin", 5), ("extender", 0)] {
        let s = scenario(&BURST.replace("PATH", path).replace("duration: 2m", "duration: 12s"));
        let mut w =
            crate::strategy::Waterline::new("w", waterline_core::Policy::default()).unwrap();
        run(&s, &mut w, Outputs::default());
        // at 12 s: binds at 10.1 s, watch delivery at 15.1 s
        assert_eq!(w.snapshot().ledger().len(), expect, "{path}");
    }
    let s = scenario(&BURST.replace("PATH", "extender").replace("duration: 2m", "duration: 16s"));
    let mut w = crate::strategy::Waterline::new("w", waterline_core::Policy::default()).unwrap();
    run(&s, &mut w, Outputs::default());
    assert_eq!(w.snapshot().ledger().len(), 5);
}

#[test]
fn every_shipped_scenario_runs_scaled_down() {
    for (name, text) in crate::scenario::SHIPPED {
        let mut s = parse_scenario(text, None).unwrap();
        s.scale_down(6, waterline_core::Millis::from_mins(30));
        for label in ["waterline", "kube-default"] {
            let mut strategy = strategy::by_name(label).unwrap();
            let summary = run(&s, strategy.as_mut(), Outputs::default());
            assert!(summary.pods_arrived > 0 || s.pods.is_empty(), "{name}/{label}");
        }
    }
}

/// Declares `needs` and records every metrics delivery: (time ms, node, values).
type Deliveries = Rc<RefCell<Vec<(i64, String, Vec<Option<f64>>)>>>;

struct Probe {
    needs: Vec<crate::strategy::MetricNeed>,
    seen: Deliveries,
}

impl Strategy for Probe {
    fn label(&self) -> &str {
        "probe"
    }
    fn metrics(&self) -> Vec<crate::strategy::MetricNeed> {
        self.needs.clone()
    }
    fn score(&mut self, _: &Cycle, _: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64> {
        vec![0; nodes.len()]
    }
    fn on_metrics(&mut self, now: waterline_core::UnixMillis, nodes: &[NodeView<'_>]) {
        for n in nodes {
            let values = n.metrics.iter().map(|m| m.map(|s| s.value)).collect();
            let t = now.0 - crate::model::EPOCH.0;
            self.seen.borrow_mut().push((t, n.name.to_owned(), values));
        }
    }
}

fn probe(kind: crate::strategy::MetricKind) -> (Probe, Deliveries) {
    use crate::strategy::{MetricNeed, Resource};
    let seen: Deliveries = Rc::new(RefCell::new(Vec::new()));
    let need = |resource| MetricNeed {
        name: "m".into(),
        resource,
        kind,
        poll: waterline_core::Millis::from_secs(60),
    };
    (Probe { needs: vec![need(Resource::Cpu), need(Resource::Memory)], seen: seen.clone() }, seen)
}

const AGENTS: &str = "
name: agents
duration: 10m
warmup: 10m
pipeline: {outages: [{from: -10m, to: 10m}]}
koordlet: {gaps: [{from: 4m, to: 7m}]}
nodes:
  - {name: a, cpu: 10, memory: 10Gi, background: {cpu: 30, memory: 20}}
  - {name: b, cpu: 10, memory: 10Gi, background: {cpu: 50, memory: 40}}
";

#[test]
fn koordlet_reports_on_each_nodes_clock_past_prometheus_outages_but_not_its_own_gaps() {
    use waterline_core::Millis;
    let kind = crate::strategy::MetricKind::Koordlet {
        collect: Millis::from_secs(1),
        report: Millis::from_secs(60),
        window: Millis::from_secs(300),
    };
    let (mut p, seen) = probe(kind);
    run(&scenario(AGENTS), &mut p, Outputs::default());
    let seen = seen.borrow();
    // Prometheus is down for the whole run: every delivery is koordlet's. Constant
    // backgrounds: the 300 s mean is the level itself.
    let of = |node: &str| seen.iter().filter(|d| d.1 == node).cloned().collect::<Vec<_>>();
    let (a, b) = (of("a"), of("b"));
    assert!(a.iter().all(|d| d.2 == [Some(30.0), Some(20.0)]), "{a:?}");
    assert!(b.iter().all(|d| d.2 == [Some(50.0), Some(40.0)]), "{b:?}");
    // one report a minute on each node's own clock, none in the gap [240 s, 420 s): 20
    // minutes of run (warm-up included) minus three reports per node
    for d in [&a, &b] {
        let times: Vec<i64> = d.iter().map(|d| d.0).collect();
        let gaps: Vec<i64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|g| *g == 60_000 || *g == 240_000), "{times:?}");
        assert!(times.iter().all(|t| !(240_000..420_000).contains(t)), "{times:?}");
        assert_eq!(times.len(), 17, "{times:?}");
    }
    assert_ne!(a[0].0.rem_euclid(60_000), b[0].0.rem_euclid(60_000), "one clock for both");
}

#[test]
fn metrics_server_answers_while_prometheus_is_down() {
    use waterline_core::Millis;
    let kind = crate::strategy::MetricKind::MetricsServer { resolution: Millis::from_secs(15) };
    let (mut p, seen) = probe(kind);
    run(&scenario(AGENTS), &mut p, Outputs::default());
    let seen = seen.borrow();
    // each of the two metrics polled every 60 s from −10 m: 21 polls each, every one
    // answered
    assert_eq!(seen.iter().filter(|d| d.1 == "a").count(), 2 * 21);
    // the first poll (−10 m) finds one scrape only, hence no rate; every later one both
    let b: Vec<_> = seen.iter().filter(|d| d.1 == "b" && d.0 > -600_000).collect();
    assert!(b.iter().all(|d| d.2[0] == Some(50.0)), "{b:?}");
    assert!(b.iter().skip(1).all(|d| d.2 == [Some(50.0), Some(40.0)]), "{b:?}");
}

#[test]
fn the_scheduler_cache_counts_each_nodes_pods_of_the_incoming_pods_controller() {
    struct Owners(Rc<RefCell<Vec<Vec<i64>>>>);
    impl Strategy for Owners {
        fn label(&self) -> &str {
            "owners"
        }
        fn score(&mut self, _: &Cycle, _: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64> {
            self.0.borrow_mut().push(nodes.iter().map(|n| n.controller_pods).collect());
            // always the first node
            (0..nodes.len() as i64).map(|i| -i).collect()
        }
    }
    let text = "
name: owners
duration: 1m
warmup: 1m
nodeGroups: [{count: 2, prefix: n, cpu: 64, memory: 256Gi}]
podGroups:
  - {prefix: web, count: 3, arrival: {at: 0s}, cpu: 100m, memory: 100Mi}
  - {prefix: ds, count: 1, arrival: {at: 1s}, cpu: 100m, memory: 100Mi, ownerKind: DaemonSet}
  - {prefix: api, count: 1, arrival: {at: 2s}, cpu: 100m, memory: 100Mi}
";
    let seen = Rc::new(RefCell::new(Vec::new()));
    run(&scenario(text), &mut Owners(seen.clone()), Outputs::default());
    // web-1..3 see 0, 1, 2 of their ReplicaSet on n-1; the DaemonSet pod has no
    // controller (0); api-1 sees none of its own (web's pods do not count)
    assert_eq!(*seen.borrow(), [[0, 0], [1, 0], [2, 0], [0, 0], [0, 0]]);
}

/// One cpu metric (the 5 m average, filter above 65 %) on the water-level curve at 40 %:
/// a node's score is `water_level(40, observed + ledger + incoming)`, which the tests
/// below work out by hand.
const CPU_ONLY: &str = "
metrics:
  - {name: cpu_usage_avg_5m, resource: cpu, query: 'waterline:node_cpu_usage:avg5m', period: 30s, weight: 1, filterAbove: 65}
curve: {kind: waterLevel, target: 40}
";

/// Two 16-core nodes at a constant 10 % (a) and 30 % (b) cpu; four pods of 1600m arrive at
/// 2 m, decided 10 ms apart, bound 100 ms later and watched `LAG` after that.
const GUESS: &str = "
name: guess
duration: DURATION
warmup: 20m
scheduler: {path: extender, cycle: 10ms, bindDelay: 100ms, watchLag: LAG}
nodes:
  - {name: a, cpu: 16, memory: 64Gi, background: {cpu: 10, memory: 10}}
  - {name: b, cpu: 16, memory: 64Gi, background: {cpu: 30, memory: 10}}
podGroups: [{prefix: p, count: 4, arrival: {at: 2m}, cpu: 1600m, memory: 1Gi}]
";

fn guess_run(
    duration: &str,
    lag: &str,
    flags: crate::strategy::ExtenderFlags,
) -> (crate::measure::StrategySummary, crate::strategy::Waterline) {
    let s = scenario(&GUESS.replace("DURATION", duration).replace("LAG", lag));
    let policy = waterline_core::policy::parse_policy(CPU_ONLY).unwrap();
    let mut w = crate::strategy::Waterline::with_extender_flags("w", policy, flags).unwrap();
    let summary = run(&s, &mut w, Outputs::default());
    (summary, w)
}

fn per_node(summary: &crate::measure::StrategySummary) -> (usize, usize) {
    (summary.placements_per_node["a"], summary.placements_per_node["b"])
}

#[test]
fn a_burst_within_the_watch_lag_sees_the_provisional_guesses_and_spreads() {
    use waterline_core::LedgerSource;
    // Each pod is estimated at 0.85 × 1600m = 1360m, 8.5 % of 16 cores. The extender's
    // 0..10 is round(score / 10); kube-scheduler takes the best (× 10).
    //
    // Without provisional Reserves every decision sees an empty ledger (the watch comes 5 s
    // later): a = 10 + 8.5 = 18.5 % → 1.5 × 18.5 + 40 = 67.75 → 68 → 7; b = 30 + 8.5 =
    // 38.5 % → 97.75 → 98 → 10. All four pile onto b.
    let off = crate::strategy::ExtenderFlags { provisional_ttl: None, ..Default::default() };
    let (summary, _) = guess_run("2m1s", "5s", off);
    assert_eq!(per_node(&summary), (0, 4));
    assert_eq!(summary.provisional_guesses, None);
    // With them (the adapter's defaults) each decision sees the earlier guesses:
    //   pod 1: a 68 → 7, b 98 → 10: b (guessed b);
    //   pod 2: b 38.5 + 8.5 = 47 % → 40 × 53 / 60 = 35.3 → 35 → 4, a 7: a;
    //   pod 3: a 18.5 + 8.5 = 27 % → 80.5 → 81 → 8, b 4: a;
    //   pod 4: a 35.5 % → 93.25 → 93 → 9, b 4: a.
    let (summary, w) = guess_run("2m1s", "5s", Default::default());
    assert_eq!(per_node(&summary), (3, 1));
    // At 2 m 1 s nothing is watched yet: the ledger holds the four guesses, each expiring
    // 15 s after its decision at 2 m + 0, 10, 20, 30 ms.
    let mut entries: Vec<_> = w.snapshot().ledger().iter().cloned().collect();
    entries.sort_by_key(|e| e.placed_at);
    let t0 = 120_000;
    let seen: Vec<_> = entries.iter().map(|e| (e.node.as_str(), e.placed_at, e.source)).collect();
    let guess = |node, at: i64| {
        let expires_at = instant(t0 + at + 15_000);
        (node, instant(t0 + at), LedgerSource::Provisional { expires_at })
    };
    assert_eq!(seen, [guess("b", 0), guess("a", 10), guess("a", 20), guess("a", 30)]);
    assert!(entries.iter().all(|e| e.usage.cpu_millis == 1360));
    // filter's Evaluate answered each prioritize: four hits, no Score call
    assert_eq!(w.cache_counts(), crate::strategy::CacheCounts { hits: 4, misses: 0 });
}

#[test]
fn the_watch_confirms_a_guess_and_an_unconfirmed_one_expires_at_its_ttl() {
    use waterline_core::LedgerSource;
    // Watched at 2 m + 0.1 s + 5 s (binds 100 ms after each decision): every guess was
    // kube-scheduler's choice (above), so the watch confirms all four, keeping the guess's
    // time (the decision, before the bind).
    let (summary, w) = guess_run("2m6s", "5s", Default::default());
    let g = summary.provisional_guesses.unwrap();
    assert_eq!((g.made, g.confirmed, g.moved, g.expired), (4, 4, 0, 0));
    let mut watched: Vec<_> =
        w.snapshot().ledger().iter().map(|e| (e.source, e.placed_at)).collect();
    watched.sort_by_key(|w| w.1);
    let at = |ms: i64| (LedgerSource::Watch, instant(120_000 + ms));
    assert_eq!(watched, [at(0), at(10), at(20), at(30)]);
    // A 20 s watch lag outlasts the 15 s TTL: the guesses of 2 m + 0..30 ms expire at
    // 2 m 15 s + 0..30 ms and leave on the collector's next one-second tick, 2 m 16 s; the
    // watch at 2 m 20.1 s finds no guess to confirm and places the pods itself.
    // (The simulator applies a tick's expiries before the next question or watch delivery
    // reaches the ledger, which is all that can observe them.)
    let (summary, w) = guess_run("2m21s", "20s", Default::default());
    let g = summary.provisional_guesses.unwrap();
    assert_eq!((g.made, g.confirmed, g.moved, g.expired), (4, 0, 0, 4));
    assert!(w.snapshot().ledger().iter().all(|e| e.source == LedgerSource::Watch));
    assert_eq!(w.snapshot().ledger().len(), 4);
}

/// Each refresh's time and summaries.
type Refreshes = Rc<RefCell<Vec<(i64, Vec<crate::strategy::PodSummary>)>>>;

/// Records every refresh of the per-pod summaries it is given.
struct Learner {
    refreshes: Refreshes,
}

impl Strategy for Learner {
    fn label(&self) -> &str {
        "learner"
    }
    fn score(&mut self, _: &Cycle, _: &SimPod, nodes: &[NodeView<'_>]) -> Vec<i64> {
        vec![0; nodes.len()]
    }
    fn pod_series(&self) -> Option<crate::strategy::PodSeriesNeed> {
        let (window, refresh) = (Millis::from_mins(60), Millis::from_mins(5));
        Some(crate::strategy::PodSeriesNeed { window, quantile: 0.9, refresh })
    }
    fn on_pod_usage(&mut self, now: UnixMillis, pods: &[crate::strategy::PodSummary]) {
        let t = now.0 - crate::model::EPOCH.0;
        self.refreshes.borrow_mut().push((t, pods.to_vec()));
    }
}

const HISTORY: &str = "
name: history
duration: 30m
warmup: 1h
nodeGroups: [{count: 4, prefix: n, cpu: 16, memory: 64Gi, background: {cpu: 10, memory: 10}}]
podGroups:
  - {prefix: run, workload: app, count: 3, arrival: {at: -1h}, cpu: 1, memory: 1Gi, usage: {cpu: 2.0, memory: 1.0, rampUp: 0s}}
  - {prefix: dark, count: 3, arrival: {at: -1h}, podSeries: missing, cpu: 1, memory: 1Gi}
  - {prefix: new, workload: app, count: 4, arrival: {at: 10m}, cpu: 1, memory: 1Gi, usage: {cpu: 2.0, memory: 1.0, rampUp: 0s}}
  - {prefix: fresh, count: 4, arrival: {at: 10m}, cpu: 1, memory: 1Gi, usage: {cpu: 2.0, rampUp: 0s}}
";

#[test]
fn the_collector_refresh_summarises_the_running_pods_with_recorded_series() {
    let refreshes = Rc::new(RefCell::new(Vec::new()));
    let mut learner = Learner { refreshes: refreshes.clone() };
    run(&scenario(HISTORY), &mut learner, Outputs::default());
    let refreshes = refreshes.borrow();
    // Every 5 m from the warm-up's start (−60 m) to the end (30 m): 19 refreshes.
    assert_eq!(refreshes.len(), 19);
    let at = |t: i64| &refreshes.iter().find(|(at, _)| *at == t).unwrap().1;
    // At 0: the three `run` pods, never the `dark` ones; each bound within the first
    // 100-odd ms (its cycle and bind) and scraped from −59 m 45 s, so the rule at −59 m has
    // four scrapes in its rate window: the 1 h window (−60 m, 0] holds the 60 rules
    // −59 m … 0 of either resource.
    let names = |pods: &[crate::strategy::PodSummary]| {
        pods.iter().map(|p| p.pod.name.clone()).collect::<Vec<_>>()
    };
    assert_eq!(names(at(0)), ["run-1", "run-2", "run-3"]);
    let first = &at(0)[0];
    assert_eq!(first.memory.unwrap().samples, 60);
    assert_eq!(first.cpu.unwrap().samples, 60);
    // 2 cores of a 1-core request, without a ramp: the rate is 2000 m from the first one.
    assert_eq!(first.cpu.unwrap().usage, 2000.0);
    // At 15 m the pods of 10 m appear too: first scraped at 10 m 15 s, recorded by the
    // rules at 11 m … 15 m.
    let later = at(15 * 60_000);
    assert_eq!(later.len(), 11);
    assert!(later.iter().all(|p| !p.pod.name.starts_with("dark")));
    let fresh = later.iter().find(|p| p.pod.name == "fresh-1").unwrap();
    assert_eq!((fresh.cpu.unwrap().samples, fresh.memory.unwrap().samples), (5, 5));
}

#[test]
fn waterline_prices_a_workload_with_history_by_it_and_a_new_one_by_the_factor() {
    let s = scenario(HISTORY);
    let mut learning = strategy::by_name("waterline").unwrap();
    let summary = run(&s, learning.as_mut(), Outputs::default());
    // `new` (workload app, with an hour of `run`'s evidence: 3 pods × ~59 samples ≥ 120) is
    // priced by the learned ratio; `fresh` has no history when it arrives: by the factor.
    let p = summary.pricing.unwrap();
    assert_eq!((p.learned, p.factor), (4, 4));
    // At the last refresh only app is learned: `fresh` has 4 pods × 20 samples (11 m … 30 m)
    // = 80 < minSamples 120, and `dark` has no series.
    assert_eq!(p.workloads, 1);
    let mut off = strategy::by_name("waterline-no-learning").unwrap();
    let p = run(&s, off.as_mut(), Outputs::default()).pricing.unwrap();
    assert_eq!((p.learned, p.factor, p.workloads), (0, 8, 0));
}
