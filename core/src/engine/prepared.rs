//! The pod-independent half of every node's prediction, computed once per snapshot change
//! instead of once per request (issue 19 item 2): per policy metric the observed value in
//! percent and its sample time, per absorb window the ledger's share of the node's capacity,
//! and the capacity itself. A request then adds the incoming pod's share and runs the curve
//! ([`super::evaluate`]); it reads the rows in order, in three flat arrays, instead of probing
//! a ~330-byte hash-table slot per candidate (the cache misses BENCHMARKS.md §1 measured).
//!
//! Freshness is decided per request (one subtraction and compare per metric, from the sample
//! time kept in the row), so a row never goes stale by itself. The ledger share is valid
//! while the same placements count: each row keeps the interval of `now` over which that
//! holds, and a request outside it computes the share from the snapshot as before. Answers
//! are the same bit for bit as `filter` + `score` (a property test compares them).

use smallvec::SmallVec;

use crate::FastMap;
use crate::estimate::Usage;
use crate::policy::{Policy, Resource};
use crate::snapshot::{Capacity, NodeSlot, Snapshot};
use crate::time::{Millis, UnixMillis};

use super::{absorb_windows, percent_of};

/// Beyond ±2⁶² ms the `now − placed_at < window` of the old path could overflow where
/// `now < placed_at + window` does not: rows there always take the snapshot path.
const TIME_LIMIT: i64 = 1 << 62;

/// What the rows depend on in a policy. A table serves any policy with the same shape
/// (weights, curves, thresholds and the estimator may differ); for another shape
/// `evaluate` answers from the snapshot instead.
#[derive(Clone, Debug, Default, PartialEq)]
struct Shape {
    /// Per policy metric: name and `to_percent`.
    metrics: Vec<(String, f64)>,
    windows: SmallVec<[Millis; 4]>,
    ledger_enabled: bool,
    uses_cpu: bool,
    uses_memory: bool,
}

impl Shape {
    fn of(policy: &Policy) -> Shape {
        Shape {
            metrics: policy.metrics.iter().map(|m| (m.name.clone(), m.to_percent)).collect(),
            windows: absorb_windows(policy),
            ledger_enabled: policy.ledger.enabled,
            uses_cpu: policy.metrics.iter().any(|m| m.resource == Resource::Cpu),
            uses_memory: policy.metrics.iter().any(|m| m.resource == Resource::Memory),
        }
    }

    /// `Shape::of(policy) == *self`, without allocating.
    fn fits(&self, policy: &Policy) -> bool {
        self.metrics.len() == policy.metrics.len()
            && self.metrics.iter().zip(&policy.metrics).all(|((name, to_percent), m)| {
                *name == m.name && to_percent.to_bits() == m.to_percent.to_bits()
            })
            && self.ledger_enabled == policy.ledger.enabled
            && self.uses_cpu == policy.metrics.iter().any(|m| m.resource == Resource::Cpu)
            && self.uses_memory == policy.metrics.iter().any(|m| m.resource == Resource::Memory)
            && self.windows == absorb_windows(policy)
    }
}

/// One node's fixed part.
#[derive(Clone, Copy, Debug)]
pub(super) struct Head {
    /// False for a row whose node lost its state since the table was built (the caller
    /// rebuilds on such changes; until then the row is answered from the snapshot).
    pub(super) known: bool,
    pub(super) capacity: Capacity,
    /// A ledger share capped at 100 % (counted in `Stats::capped_estimates`).
    pub(super) ledger_capped: bool,
    /// The shares hold for `now` in `[valid_from, valid_until)`.
    valid_from: i64,
    valid_until: i64,
}

impl Head {
    const UNKNOWN: Head = Head {
        known: false,
        capacity: Capacity { cpu_millis: 0, memory_bytes: 0 },
        ledger_capped: false,
        valid_from: i64::MAX,
        valid_until: i64::MIN,
    };

    /// Whether the row's ledger shares are the ones the snapshot gives at `now`.
    #[inline]
    pub(super) fn shares_valid_at(&self, now: UnixMillis) -> bool {
        self.valid_from <= now.0 && now.0 < self.valid_until
    }
}

/// One metric on one node: the observed value in percent (`NaN`: no sample) and its time.
#[derive(Clone, Copy, Debug)]
pub(super) struct Cell {
    level: f64,
    at: UnixMillis,
}

impl Cell {
    const MISSING: Cell = Cell { level: f64::NAN, at: UnixMillis(0) };

    /// `Request::fresh_level` of this cell: the level when a sample is there and young enough.
    #[inline]
    pub(super) fn fresh(&self, now: UnixMillis, max_age: Millis) -> Option<f64> {
        // A present level is never NaN: `(value × to_percent).max(0.0)` turns NaN into 0.
        (!self.level.is_nan() && now.since(self.at) <= max_age).then_some(self.level)
    }
}

/// The precomputed node table: one row per node with a state, in name order (the order of
/// the scorer's Session node table, so a row's index is the node's index on the wire).
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    shape: Shape,
    names: Vec<String>,
    index: FastMap<String, u32>,
    heads: Vec<Head>,
    /// `names.len() × metrics`, row-major.
    cells: Vec<Cell>,
    /// `names.len() × windows`, row-major: (cpu, memory) ledger share in percent.
    shares: Vec<(f64, f64)>,
    /// The earliest `valid_until` of any row: before it no row needs refreshing.
    next_expiry: i64,
}

impl Prepared {
    /// Every node of `snapshot` with a state, prepared for `policy` at `now` (the time only
    /// decides which rows start out valid, never an answer).
    pub fn build(policy: &Policy, snapshot: &Snapshot, now: UnixMillis) -> Prepared {
        let mut names: Vec<String> = snapshot.nodes().map(|n| n.name.clone()).collect();
        names.sort_unstable();
        let shape = Shape::of(policy);
        let rows = names.len();
        let mut table = Prepared {
            index: names.iter().enumerate().map(|(i, n)| (n.clone(), i as u32)).collect(),
            heads: vec![Head::UNKNOWN; rows],
            cells: vec![Cell::MISSING; rows * shape.metrics.len()],
            shares: vec![(0.0, 0.0); rows * shape.windows.len()],
            names,
            shape,
            next_expiry: i64::MAX,
        };
        for row in 0..rows {
            table.fill(row, policy, snapshot, now);
        }
        table
    }

    /// The nodes, in row order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The row of `name`, if the table has one.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.index.get(name).map(|&i| i as usize)
    }

    /// Whether the rows were prepared for a policy of `policy`'s shape.
    pub fn fits(&self, policy: &Policy) -> bool {
        self.shape.fits(policy)
    }

    /// Brings the table up to date with what changed in `snapshot` since the last call
    /// (`snapshot` must track its changes: [`Snapshot::track_changes`]): a new or departed
    /// node, a full resync or another policy shape rebuilds the table; otherwise each changed
    /// node's row is recomputed (a Reserve touches one row), then any row whose ledger shares
    /// expired by `now`. Returns whether the set of names may have changed.
    pub fn update(&mut self, policy: &Policy, snapshot: &mut Snapshot, now: UnixMillis) -> bool {
        let changes = snapshot.take_changes();
        if changes.all || changes.names || !self.shape.fits(policy) {
            *self = Prepared::build(policy, snapshot, now);
            return true;
        }
        for node in &changes.nodes {
            if let Some(row) = self.index_of(node) {
                self.fill(row, policy, snapshot, now);
            }
        }
        self.refresh_expired(policy, snapshot, now);
        false
    }

    /// Whether some row's ledger shares no longer hold at `now` (`refresh_expired` would
    /// recompute it).
    pub fn expired(&self, now: UnixMillis) -> bool {
        now.0 >= self.next_expiry
    }

    /// Recomputes the rows whose ledger shares no longer hold at `now` (the oldest counting
    /// placement aged out of its window), so requests keep taking the fast path.
    pub fn refresh_expired(&mut self, policy: &Policy, snapshot: &Snapshot, now: UnixMillis) {
        if now.0 < self.next_expiry {
            return;
        }
        self.next_expiry = i64::MAX;
        for row in 0..self.names.len() {
            if self.heads[row].known && !self.heads[row].shares_valid_at(now) {
                self.fill(row, policy, snapshot, now);
            } else if self.heads[row].known {
                self.next_expiry = self.next_expiry.min(self.heads[row].valid_until);
            }
        }
    }

    pub(super) fn head(&self, row: usize) -> &Head {
        &self.heads[row]
    }

    pub(super) fn cells(&self, row: usize) -> &[Cell] {
        let m = self.shape.metrics.len();
        &self.cells[row * m..(row + 1) * m]
    }

    pub(super) fn shares(&self, row: usize) -> &[(f64, f64)] {
        let w = self.shape.windows.len();
        &self.shares[row * w..(row + 1) * w]
    }

    /// Recomputes row `row` from the snapshot.
    fn fill(&mut self, row: usize, policy: &Policy, snapshot: &Snapshot, now: UnixMillis) {
        let slot = snapshot.slot(&self.names[row]);
        let Some((slot, state)) = slot.and_then(|slot| Some((slot, slot.state()?))) else {
            self.heads[row] = Head::UNKNOWN;
            return;
        };
        let m = self.shape.metrics.len();
        for (cell, metric) in self.cells[row * m..(row + 1) * m].iter_mut().zip(&policy.metrics) {
            *cell = match snapshot.metric_id(&metric.name).and_then(|id| state.sample(id)) {
                Some(s) => Cell { level: (s.value * metric.to_percent).max(0.0), at: s.at },
                None => Cell::MISSING,
            };
        }
        let capacity = state.capacity;
        let mut head = Head {
            known: true,
            capacity,
            ledger_capped: false,
            valid_from: i64::MIN,
            valid_until: i64::MAX,
        };
        let w = self.shape.windows.len();
        let shape = &self.shape;
        for (share, window) in self.shares[row * w..(row + 1) * w].iter_mut().zip(&shape.windows) {
            *share = ledger_share(shape, slot, capacity, *window, now, &mut head);
        }
        self.heads[row] = head;
        self.next_expiry = self.next_expiry.min(head.valid_until);
    }
}

/// `Request::ledger_shares` for one window, and the interval of `now` it holds for.
fn ledger_share(
    shape: &Shape,
    slot: &NodeSlot,
    capacity: Capacity,
    window: Millis,
    now: UnixMillis,
    head: &mut Head,
) -> (f64, f64) {
    let ledger = if shape.ledger_enabled { slot.unabsorbed(now, window) } else { Usage::default() };
    let mut percent = |amount, capacity, used| {
        if used { percent_of(amount, capacity, &mut head.ledger_capped) } else { 0.0 }
    };
    let share = (
        percent(ledger.cpu_millis, capacity.cpu_millis, shape.uses_cpu),
        percent(ledger.memory_bytes, capacity.memory_bytes, shape.uses_memory),
    );
    if shape.ledger_enabled {
        // A load counts while now − placed_at < window, i.e. while now < placed_at + window.
        let (oldest_counting, newest_absorbed) = slot.absorb_boundary(now, window);
        let mut bound = |placed: Option<UnixMillis>, until: bool| {
            let Some(placed) = placed else { return };
            match placed.0.checked_add(window.0).filter(|_| placed.0.abs() < TIME_LIMIT) {
                Some(edge) if until => head.valid_until = head.valid_until.min(edge),
                Some(edge) => head.valid_from = head.valid_from.max(edge),
                None => (head.valid_from, head.valid_until) = (i64::MAX, i64::MIN),
            }
        };
        bound(oldest_counting, true);
        bound(newest_absorbed, false);
    }
    head.valid_from = head.valid_from.max(-TIME_LIMIT);
    head.valid_until = head.valid_until.min(TIME_LIMIT);
    share
}
