//! One node's rolling usage history, for the metrics-server source: metrics-server keeps no
//! past (each NodeMetrics is one recent point), so the collector keeps what the recording
//! rules would otherwise compute in Prometheus — the 5-minute average and the maxima of that
//! average over an hour or a day (`deploy/prometheus/rules.yml`).
//!
//! Bounded per node whatever the poll rate or uptime:
//! * the points of the last 5 minutes, at most [`RECENT_CAP`] (a faster source than one
//!   point per ~5 s keeps only the newest, so the average then covers less than 5 minutes);
//! * [`DAY_SLOTS`] (288) five-minute slots, each holding the highest 5-minute average seen
//!   while that slot was the current one (the rules' `max_over_time(avg5m[1d:5m])` at the
//!   same resolution), as `f32` per resource.
//!
//! Memory: [`NodeHistory::bytes`] — 3 400 bytes for a full history (1 024 for the points,
//! 2 304 for the slots, 72 for the struct), so 5 000 nodes hold about 17 MB
//! (docs/operations.md#metrics-server-instead-of-prometheus).

use std::collections::VecDeque;

/// Width of one slot of the day, and the averaging window.
pub const SLOT_MS: i64 = 5 * 60 * 1000;
/// The averaging window of the 5-minute average.
pub const AVERAGE_WINDOW_MS: i64 = SLOT_MS;
/// A day of 5-minute slots.
pub const DAY_SLOTS: usize = 288;
/// Most points kept for the 5-minute average (one every ~5 s).
pub const RECENT_CAP: usize = 64;

/// The two resources metrics-server reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UsageResource {
    Cpu,
    Memory,
}

impl UsageResource {
    fn index(self) -> usize {
        match self {
            UsageResource::Cpu => 0,
            UsageResource::Memory => 1,
        }
    }
}

/// A node's usage in percent of its allocatable, at one time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UsagePercent {
    pub cpu: f32,
    pub memory: f32,
}

impl UsagePercent {
    fn get(self, resource: UsageResource) -> f32 {
        match resource {
            UsageResource::Cpu => self.cpu,
            UsageResource::Memory => self.memory,
        }
    }
}

/// What [`NodeHistory::record`] did with a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// A new point: the averages and maxima moved.
    New,
    /// Not newer than the newest point held: metrics-server answers the same point until it
    /// scrapes the kubelet again, so a poll faster than its resolution sees it twice.
    NotNewer,
}

/// One node's history. `Default` is an empty one.
#[derive(Clone, Debug, Default)]
pub struct NodeHistory {
    /// (time in Unix ms, usage), oldest first, all within the last 5 minutes of the newest.
    recent: VecDeque<(i64, UsagePercent)>,
    /// Ring of the day's slots, indexed by slot number mod [`DAY_SLOTS`]: the highest
    /// 5-minute average of each resource while the slot was current; NaN for a slot without
    /// a point (the source was down, or the history is younger than the day).
    slots: Vec<[f32; 2]>,
    /// The slot number (time / [`SLOT_MS`]) of the newest point.
    newest_slot: Option<i64>,
}

impl NodeHistory {
    /// Takes a point at `at_ms` (Unix ms). Points must come in time order; one not newer
    /// than the newest held is ignored.
    pub fn record(&mut self, at_ms: i64, usage: UsagePercent) -> Recorded {
        if self.recent.back().is_some_and(|(newest, _)| at_ms <= *newest) {
            return Recorded::NotNewer;
        }
        if self.recent.capacity() == 0 {
            self.recent.reserve_exact(RECENT_CAP);
        }
        while self.recent.front().is_some_and(|(t, _)| *t <= at_ms - AVERAGE_WINDOW_MS)
            || self.recent.len() >= RECENT_CAP
        {
            self.recent.pop_front();
        }
        self.recent.push_back((at_ms, usage));

        let slot = at_ms.div_euclid(SLOT_MS);
        if self.slots.is_empty() {
            self.slots = vec![[f32::NAN; 2]; DAY_SLOTS];
        }
        match self.newest_slot {
            // Slots passed without a point hold nothing (and a jump of a day or more empties
            // every slot).
            Some(newest) if slot > newest => {
                let passed = (slot - newest).min(DAY_SLOTS as i64);
                for step in 1..=passed {
                    self.slots[ring(newest + step)] = [f32::NAN; 2];
                }
                self.newest_slot = Some(slot);
            }
            Some(_) => {}
            None => self.newest_slot = Some(slot),
        }
        let index = ring(slot);
        for resource in [UsageResource::Cpu, UsageResource::Memory] {
            let average = self.average(resource).unwrap_or(f64::NAN) as f32;
            let held = &mut self.slots[index][resource.index()];
            // f32::max ignores NaN: an empty slot takes the average as it is.
            *held = held.max(average);
        }
        Recorded::New
    }

    /// Time of the newest point (Unix ms).
    pub fn latest_ms(&self) -> Option<i64> {
        self.recent.back().map(|(t, _)| *t)
    }

    /// Mean of the points of the last 5 minutes (before the newest one), in percent.
    pub fn average(&self, resource: UsageResource) -> Option<f64> {
        if self.recent.is_empty() {
            return None;
        }
        let sum: f64 = self.recent.iter().map(|(_, u)| f64::from(u.get(resource))).sum();
        Some(sum / self.recent.len() as f64)
    }

    /// The highest 5-minute average over the newest `slots` slots (the current one and
    /// `slots − 1` before it: a window of `slots × 5 min`, minus the part of the current
    /// slot still to come), `slots` at most [`DAY_SLOTS`]. `None` when none of them holds a
    /// point. A history younger than the window gives the maximum over what it holds.
    pub fn max_of_averages(&self, resource: UsageResource, slots: usize) -> Option<f64> {
        let newest = self.newest_slot?;
        let count = slots.clamp(1, DAY_SLOTS) as i64;
        (0..count)
            .map(|back| self.slots[ring(newest - back)][resource.index()])
            .filter(|v| !v.is_nan())
            .map(f64::from)
            .reduce(f64::max)
    }

    /// How many of the newest `slots` slots hold a point: the part of a window the history
    /// covers (a fresh collector covers a day only after a day).
    pub fn covered_slots(&self, slots: usize) -> usize {
        let Some(newest) = self.newest_slot else { return 0 };
        let count = slots.clamp(1, DAY_SLOTS) as i64;
        (0..count).filter(|back| !self.slots[ring(newest - back)][0].is_nan()).count()
    }

    /// Bytes this history holds: the struct and its two buffers (by capacity).
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.recent.capacity() * std::mem::size_of::<(i64, UsagePercent)>()
            + self.slots.capacity() * std::mem::size_of::<[f32; 2]>()
    }
}

fn ring(slot: i64) -> usize {
    slot.rem_euclid(DAY_SLOTS as i64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1000;
    const MIN: i64 = 60 * S;
    /// A Monday 00:00 UTC, on a slot boundary.
    const T0: i64 = 1_767_571_200_000;

    fn usage(cpu: f32, memory: f32) -> UsagePercent {
        UsagePercent { cpu, memory }
    }

    #[test]
    fn the_average_is_the_mean_of_the_last_five_minutes() {
        let mut h = NodeHistory::default();
        assert_eq!(h.average(UsageResource::Cpu), None);
        // Every 30 s: cpu 10, 20, …, 100 (ten points, 4.5 min), memory constant 50.
        for i in 0..10 {
            assert_eq!(
                h.record(T0 + i * 30 * S, usage(10.0 * (i + 1) as f32, 50.0)),
                Recorded::New
            );
        }
        // (10 + 20 + … + 100) / 10 = 55.
        assert_eq!(h.average(UsageResource::Cpu), Some(55.0));
        assert_eq!(h.average(UsageResource::Memory), Some(50.0));
        // At 5 min the first point (at 0) leaves the window: (20 + … + 100 + 0) / 10 = 54.
        h.record(T0 + 5 * MIN, usage(0.0, 50.0));
        assert_eq!(h.average(UsageResource::Cpu), Some(54.0));
        assert_eq!(h.latest_ms(), Some(T0 + 5 * MIN));
    }

    #[test]
    fn a_point_not_newer_than_the_newest_is_ignored() {
        let mut h = NodeHistory::default();
        h.record(T0 + 15 * S, usage(40.0, 40.0));
        assert_eq!(h.record(T0 + 15 * S, usage(90.0, 90.0)), Recorded::NotNewer);
        assert_eq!(h.record(T0, usage(90.0, 90.0)), Recorded::NotNewer);
        assert_eq!(h.average(UsageResource::Cpu), Some(40.0));
    }

    #[test]
    fn slots_keep_the_highest_five_minute_average_and_the_maxima_span_their_windows() {
        let mut h = NodeHistory::default();
        // 30 minutes at 30 s: cpu at 20 % except minutes 10..12 at 80 %; memory 30 %.
        for i in 0..60 {
            let t = T0 + i * 30 * S;
            let busy = (10 * MIN..12 * MIN).contains(&(t - T0));
            h.record(t, usage(if busy { 80.0 } else { 20.0 }, 30.0));
        }
        // The 5 m average peaks at 11:30 with 4 busy points of 10: (4 × 80 + 6 × 20) / 10 = 44,
        // and stays there while the 4 busy points are inside the window (until 14:30).
        let hour = h.max_of_averages(UsageResource::Cpu, 12).unwrap();
        assert!((hour - 44.0).abs() < 1e-4, "{hour}");
        // Now (29:30) the window holds only 20 % points.
        assert_eq!(h.average(UsageResource::Cpu), Some(20.0));
        // The newest slot alone (25:00..29:30) never saw the peak.
        let last_slot = h.max_of_averages(UsageResource::Cpu, 1).unwrap();
        assert!((last_slot - 20.0).abs() < 1e-4, "{last_slot}");
        assert_eq!(h.max_of_averages(UsageResource::Memory, DAY_SLOTS), Some(30.0));
        // Six slots of 5 minutes hold a point; the day's others are still empty.
        assert_eq!(h.covered_slots(DAY_SLOTS), 6);
        assert_eq!(h.covered_slots(12), 6);
    }

    #[test]
    fn the_hour_forgets_a_peak_after_an_hour_and_the_day_after_a_day() {
        let mut h = NodeHistory::default();
        h.record(T0, usage(90.0, 10.0));
        // One point every 5 minutes at 10 % (each 5 m window then holds one point).
        let mut t = T0;
        let mut step = |h: &mut NodeHistory, until: i64| {
            while t < until {
                t += 5 * MIN;
                h.record(t, usage(10.0, 10.0));
            }
        };
        step(&mut h, T0 + 55 * MIN);
        // 55 minutes later the 12 newest slots still include slot 0.
        assert_eq!(h.max_of_averages(UsageResource::Cpu, 12), Some(90.0));
        step(&mut h, T0 + 60 * MIN);
        assert_eq!(h.max_of_averages(UsageResource::Cpu, 12), Some(10.0));
        assert_eq!(h.max_of_averages(UsageResource::Cpu, DAY_SLOTS), Some(90.0));
        step(&mut h, T0 + 24 * 60 * MIN - 5 * MIN);
        assert_eq!(h.max_of_averages(UsageResource::Cpu, DAY_SLOTS), Some(90.0));
        step(&mut h, T0 + 24 * 60 * MIN);
        assert_eq!(h.max_of_averages(UsageResource::Cpu, DAY_SLOTS), Some(10.0));
    }

    #[test]
    fn a_gap_leaves_empty_slots_and_a_long_one_empties_the_day() {
        let mut h = NodeHistory::default();
        h.record(T0, usage(70.0, 70.0));
        // The source is away for 40 minutes: the slots in between hold nothing, and the
        // new 5 m average is the new point alone (the old one left the window).
        h.record(T0 + 40 * MIN, usage(30.0, 30.0));
        assert_eq!(h.average(UsageResource::Cpu), Some(30.0));
        assert_eq!(h.covered_slots(12), 2);
        assert_eq!(h.max_of_averages(UsageResource::Cpu, 12), Some(70.0));
        assert_eq!(h.max_of_averages(UsageResource::Cpu, 8), Some(30.0));
        // Away for two days: nothing of before is left.
        h.record(T0 + 2 * 24 * 60 * MIN, usage(5.0, 5.0));
        assert_eq!(h.covered_slots(DAY_SLOTS), 1);
        assert_eq!(h.max_of_averages(UsageResource::Cpu, DAY_SLOTS), Some(5.0));
    }

    #[test]
    fn memory_stays_bounded_whatever_the_poll_rate() {
        let mut h = NodeHistory::default();
        assert_eq!(h.max_of_averages(UsageResource::Cpu, 12), None);
        // A point every second for two days.
        for i in 0..(2 * 24 * 3600) {
            h.record(T0 + i * S, usage((i % 100) as f32, 50.0));
        }
        assert!(h.recent.len() <= RECENT_CAP);
        assert_eq!(h.slots.len(), DAY_SLOTS);
        // 64 points × 16 B + 288 slots × 8 B + the struct: the figure the module doc gives.
        assert_eq!(std::mem::size_of::<(i64, UsagePercent)>(), 16);
        assert!(h.recent.capacity() < 2 * RECENT_CAP, "{}", h.recent.capacity());
        let bytes = h.bytes();
        assert!(bytes <= 3_400 + 16 * RECENT_CAP, "{bytes}");
        let full = NodeHistory {
            recent: VecDeque::with_capacity(RECENT_CAP),
            slots: vec![[0.0; 2]; DAY_SLOTS],
            newest_slot: None,
        };
        assert_eq!(full.recent.capacity(), RECENT_CAP);
        assert_eq!(std::mem::size_of::<NodeHistory>(), 72);
        assert_eq!(full.bytes(), 3_400);
        // 5 000 nodes stay far below the collector's 64 MiB.
        assert!(5_000 * full.bytes() < 20 << 20);
    }
}
