//! The pod-independent half of every node's prediction, computed once per snapshot change
//! instead of once per request: per policy metric the observed value in
//! percent and its sample time, per absorb window the ledger's share of the node's capacity,
//! and the capacity itself. A request then adds the incoming pod's share and runs the curve
//! ([`super::evaluate`]); it reads the rows in order, one flat column per metric and window,
//! instead of probing a ~330-byte hash-table slot per candidate (the cache misses
//! docs/benchmarks-history.md §1 measured).
//!
//! Freshness is decided per request, so a row never goes stale by itself: once per metric
//! column when the column's time bounds say every sample is fresh at `now` (a metric
//! refresh stamps every node alike), else one subtraction and compare per row. The ledger share is valid
//! while the same placements count: each row keeps the interval of `now` over which that
//! holds, and a request outside it computes the share from the snapshot as before. Answers
//! are the same bit for bit as `filter` + `score` (a property test compares them).

use smallvec::SmallVec;

use crate::FastMap;
use crate::estimate::Usage;
use crate::policy::{Policy, Resource};
use crate::snapshot::{Capacity, Changes, NodeSlot, Snapshot};
use crate::time::{Millis, UnixMillis};

use super::plan::{absorb_windows, signed_percent_of};
use crate::ledger::LedgerWindow;

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
    windows: SmallVec<[LedgerWindow; 4]>,
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
    /// Index of `capacity` in `Prepared::capacities`: a request computes the incoming pod's
    /// share once per distinct capacity.
    pub(super) class: u32,
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
        class: 0,
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

/// What is known of every row's sample time of one metric column: no row lacks a sample
/// (`missing == 0`) and all times lie in `[oldest, newest]` decide freshness for the whole
/// column with one compare per request. `oldest`/`newest` may be wider than the rows' (a
/// row update only widens them; a large update recomputes them), never narrower.
#[derive(Clone, Copy, Debug)]
struct Bounds {
    /// Rows whose cell has no sample (`NaN`).
    missing: usize,
    oldest: i64,
    newest: i64,
}

impl Bounds {
    const EMPTY: Bounds = Bounds { missing: 0, oldest: i64::MAX, newest: i64::MIN };

    fn widen(&mut self, at: i64) {
        self.oldest = self.oldest.min(at);
        self.newest = self.newest.max(at);
    }
}

/// One metric column as a request reads it.
pub(super) struct Column<'t> {
    /// Per row: the observed value in percent, `NaN` for no sample.
    pub(super) levels: &'t [f64],
    /// Per row: the sample time (meaningless where the level is `NaN`).
    pub(super) ats: &'t [i64],
    bounds: Bounds,
}

impl Column<'_> {
    /// Whether every row's sample is there and `now.since(at) <= max_age`: then
    /// [`fresh`](Self::fresh) is true for every row.
    pub(super) fn all_fresh(&self, now: UnixMillis, max_age: Millis) -> bool {
        let Bounds { missing, oldest, newest } = self.bounds;
        // With both ends' ages representable, every row's age is, and the oldest is the
        // largest.
        missing == 0
            && (self.levels.is_empty()
                || now.0.checked_sub(newest).is_some()
                    && now.0.checked_sub(oldest).is_some_and(|age| age <= max_age.0))
    }

    /// `Request::fresh_level` of row `row`: the level when a sample is there and young
    /// enough.
    #[inline]
    pub(super) fn fresh(&self, row: usize, now: UnixMillis, max_age: Millis) -> Option<f64> {
        // A present level is never NaN: `(value × to_percent).max(0.0)` turns NaN into 0.
        let level = self.levels[row];
        (!level.is_nan() && now.since(UnixMillis(self.ats[row])) <= max_age).then_some(level)
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
    /// The distinct capacities of the rows (`Head::class`), and their indexes.
    capacities: Vec<Capacity>,
    classes: FastMap<(i64, i64), u32>,
    /// `metrics × names.len()`, column-major (one column per metric, in row order), so a
    /// request reads each metric as one straight array: levels in percent (`NaN`: no
    /// sample) and sample times.
    levels: Vec<f64>,
    ats: Vec<i64>,
    bounds: Vec<Bounds>,
    /// `windows × names.len()`, column-major: the ledger's cpu and memory share in percent.
    cpu_shares: Vec<f64>,
    memory_shares: Vec<f64>,
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
        let (metrics, windows) = (shape.metrics.len(), shape.windows.len());
        let mut table = Prepared {
            index: names.iter().enumerate().map(|(i, n)| (n.clone(), i as u32)).collect(),
            heads: vec![Head::UNKNOWN; rows],
            capacities: Vec::new(),
            classes: FastMap::default(),
            levels: vec![f64::NAN; rows * metrics],
            ats: vec![0; rows * metrics],
            bounds: vec![Bounds { missing: rows, ..Bounds::EMPTY }; metrics],
            cpu_shares: vec![0.0; rows * windows],
            memory_shares: vec![0.0; rows * windows],
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
        self.apply(policy, snapshot, &changes, now)
    }

    /// [`update`](Self::update) with `changes` taken by the caller: several tables (one per
    /// policy a scorer serves) follow one snapshot, each told the same changes.
    pub fn apply(
        &mut self,
        policy: &Policy,
        snapshot: &Snapshot,
        changes: &Changes,
        now: UnixMillis,
    ) -> bool {
        if changes.all || changes.names || !self.shape.fits(policy) {
            *self = Prepared::build(policy, snapshot, now);
            return true;
        }
        for node in &changes.nodes {
            if let Some(row) = self.index_of(node) {
                self.fill(row, policy, snapshot, now);
            }
        }
        // A metric refresh touches every row: tighten the columns' time bounds again (a
        // Reserve touches one row and leaves them as they were).
        if changes.nodes.len() >= self.len() / 8 {
            self.recompute_bounds();
        }
        // Capacities that changed leave classes no row has: drop them now and then.
        if self.capacities.len() > 2 * self.len() + 64 {
            self.compact_classes();
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

    pub(super) fn capacities(&self) -> &[Capacity] {
        &self.capacities
    }

    /// Metric `k`'s column.
    pub(super) fn column(&self, k: usize) -> Column<'_> {
        let rows = self.names.len();
        Column {
            levels: &self.levels[k * rows..(k + 1) * rows],
            ats: &self.ats[k * rows..(k + 1) * rows],
            bounds: self.bounds[k],
        }
    }

    /// The ledger's (cpu, memory) share columns of absorb window `w`.
    pub(super) fn share_columns(&self, w: usize) -> (&[f64], &[f64]) {
        let rows = self.names.len();
        (&self.cpu_shares[w * rows..(w + 1) * rows], &self.memory_shares[w * rows..(w + 1) * rows])
    }

    /// The exact bounds of every column.
    fn recompute_bounds(&mut self) {
        let rows = self.names.len();
        for (k, bounds) in self.bounds.iter_mut().enumerate() {
            *bounds = Bounds::EMPTY;
            let column = k * rows..(k + 1) * rows;
            for (level, at) in self.levels[column.clone()].iter().zip(&self.ats[column]) {
                if level.is_nan() {
                    bounds.missing += 1;
                } else {
                    bounds.widen(*at);
                }
            }
        }
    }

    /// The classes of the rows' capacities only.
    fn compact_classes(&mut self) {
        (self.capacities, self.classes) = (Vec::new(), FastMap::default());
        for row in 0..self.heads.len() {
            if self.heads[row].known {
                self.heads[row].class = self.class_of(self.heads[row].capacity);
            }
        }
    }

    /// The class of `capacity`, added when new.
    fn class_of(&mut self, capacity: Capacity) -> u32 {
        let key = (capacity.cpu_millis, capacity.memory_bytes);
        if let Some(&class) = self.classes.get(&key) {
            return class;
        }
        let class = self.capacities.len() as u32;
        self.capacities.push(capacity);
        self.classes.insert(key, class);
        class
    }

    /// Recomputes row `row` from the snapshot.
    fn fill(&mut self, row: usize, policy: &Policy, snapshot: &Snapshot, now: UnixMillis) {
        let slot = snapshot.slot(&self.names[row]);
        let Some((slot, state)) = slot.and_then(|slot| Some((slot, slot.state()?))) else {
            self.heads[row] = Head::UNKNOWN;
            return;
        };
        let rows = self.names.len();
        for (k, metric) in policy.metrics.iter().enumerate() {
            let cell = k * rows + row;
            let (level, at) = match snapshot.metric_id(&metric.name).and_then(|id| state.sample(id))
            {
                Some(s) => ((s.value * metric.to_percent).max(0.0), s.at.0),
                None => (f64::NAN, 0),
            };
            let bounds = &mut self.bounds[k];
            bounds.missing -= usize::from(self.levels[cell].is_nan());
            if level.is_nan() {
                bounds.missing += 1;
            } else {
                bounds.widen(at);
            }
            (self.levels[cell], self.ats[cell]) = (level, at);
        }
        let capacity = state.capacity;
        let mut head = Head {
            known: true,
            capacity,
            class: self.class_of(capacity),
            ledger_capped: false,
            valid_from: i64::MIN,
            valid_until: i64::MAX,
        };
        for (w, window) in self.shape.windows.iter().enumerate() {
            let (cpu, memory) = ledger_share(&self.shape, slot, capacity, *window, now, &mut head);
            (self.cpu_shares[w * rows + row], self.memory_shares[w * rows + row]) = (cpu, memory);
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
    window: LedgerWindow,
    now: UnixMillis,
    head: &mut Head,
) -> (f64, f64) {
    let ledger = if shape.ledger_enabled { slot.unabsorbed(now, window) } else { Usage::default() };
    let mut percent = |amount, capacity, used| {
        if used { signed_percent_of(amount, capacity, &mut head.ledger_capped) } else { 0.0 }
    };
    let share = (
        percent(ledger.cpu_millis, capacity.cpu_millis, shape.uses_cpu),
        percent(ledger.memory_bytes, capacity.memory_bytes, shape.uses_memory),
    );
    if shape.ledger_enabled {
        // A load counts while now − placed_at < window, i.e. while now < placed_at + window;
        // a departure's credit likewise from its departure time.
        let (oldest_counting, newest_absorbed) = slot.absorb_boundary(now, window);
        let mut bound = |placed: Option<UnixMillis>, until: bool| {
            let Some(placed) = placed else { return };
            match placed.0.checked_add(window.absorb.0).filter(|_| placed.0.abs() < TIME_LIMIT) {
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
