//! The scorer's own ledger changes that the collector's stream has not confirmed yet, and
//! how each one ends. Without this an entry whose forward failed stayed in the scorer's
//! ledger, unconfirmed and unbounded, until the next full resync.
//!
//! **One record per pod.** A Reserve or Unreserve the scorer takes changes its own ledger at
//! once; the pod then has a *record* here until the change is the collector's too. A later
//! op of the same pod before that replaces the record (it carries the pod on: a pod has one
//! local state, not one per op). Each record ends exactly once, counted in
//! `waterline_forward_outcomes_total{op, outcome}` under the op that ended it:
//!
//! - `confirmed`: the stream carries it. A Reserve when the stream places the pod with an
//!   entry that replaces the scorer's own (any node; a guess only replaces a guess); an
//!   Unreserve once a collector took it (from then on that collector's stream can only
//!   remove the pod); either once the stream released the pod (the release removes the
//!   scorer's entry as well). A Reserve of a pod the stream already holds on that node is
//!   confirmed when taken.
//! - past the give-up bound (`--forward-give-up`) without that: the scorer removes its own
//!   entry (a Reserve's placement; an Unreserve's lay-over), never one the stream confirmed,
//!   and counts why: `rejected` (no collector took it, one refused it as invalid), `dropped`
//!   (no collector took it, a forward queue was full), else `expired` (a collector took it
//!   but the stream never showed it, or every forward was still retrying).
//!
//! `forwarded` is counted once per op, when the first collector takes it: the step before
//! `confirmed`, not an end. Every end waits for the bound except `confirmed`: even a
//! rejected or dropped Reserve can still be confirmed by the collector's pod watch once the
//! pod is bound.
//!
//! Pure: time is an argument. The store takes stream confirmations and removals here under
//! its writer's lock (collectors' answers need no lock: they remove nothing), so a stream
//! confirmation and a removal never race.

use std::collections::HashMap;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use waterline_core::{Millis, UnixMillis};

/// Which op a record's end is counted under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Reserve,
    Unreserve,
}

impl Op {
    fn label(self) -> &'static str {
        match self {
            Op::Reserve => "reserve",
            Op::Unreserve => "unreserve",
        }
    }
}

/// What one collector did with one forwarded op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// It took the op.
    Taken,
    /// It refused the op as invalid (retrying cannot help).
    Rejected,
    /// The op never left: that collector's forward queue was full.
    Dropped,
    /// It did not take the op before the give-up bound.
    Expired,
}

/// The label values of `waterline_forward_outcomes_total`, in the order the docs give them.
pub const OUTCOMES: [&str; 5] = ["forwarded", "confirmed", "expired", "dropped", "rejected"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    op: &'static str,
    outcome: &'static str,
}

/// `waterline_forward_outcomes_total` and `waterline_forward_unconfirmed`.
#[derive(Clone, Debug, Default)]
pub struct OutcomeMetrics {
    outcomes: Family<OutcomeLabels, Counter>,
    unconfirmed: Gauge,
}

impl OutcomeMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "waterline_forward_outcomes",
            "How this scorer's own Reserves/Unreserves ended: forwarded (a collector took it), then confirmed (the stream carries it), or removed unconfirmed past --forward-give-up as expired, dropped or rejected",
            self.outcomes.clone(),
        );
        registry.register(
            "waterline_forward_unconfirmed",
            "Pods whose latest Reserve/Unreserve on this scorer the collector's stream has not confirmed yet",
            self.unconfirmed.clone(),
        );
    }

    /// How many ops of `op` ended as (or, for `forwarded`, passed through) `outcome`.
    pub fn count(&self, op: Op, outcome: &'static str) -> u64 {
        self.counter(op, outcome).get()
    }

    pub fn unconfirmed(&self) -> i64 {
        self.unconfirmed.get()
    }

    fn counter(&self, op: Op, outcome: &'static str) -> Counter {
        self.outcomes.get_or_create(&OutcomeLabels { op: op.label(), outcome }).clone()
    }

    fn inc(&self, op: Op, outcome: &'static str) {
        self.counter(op, outcome).inc();
    }
}

/// The pod's latest local op, not confirmed yet.
#[derive(Clone, Debug, PartialEq)]
struct Record {
    seq: u64,
    op: Op,
    /// A provisional Reserve (a guess): the stream confirms it with any entry of the pod.
    guess: bool,
    taken_at: UnixMillis,
    /// What the collectors did with this op so far.
    taken: bool,
    rejected: bool,
    dropped: bool,
}

impl Record {
    /// Why a record that reached the bound unconfirmed ends.
    fn given_up(&self) -> &'static str {
        if self.taken {
            "expired"
        } else if self.rejected {
            "rejected"
        } else if self.dropped {
            "dropped"
        } else {
            "expired"
        }
    }
}

/// An op still waiting for some collector's answer, so `forwarded` is counted once per op.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    answers_left: usize,
    op: Op,
    taken: bool,
}

/// A record removed at the bound: the store undoes its local change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GivenUp {
    pub uid: String,
    pub seq: u64,
    pub op: Op,
}

/// Every pod's unconfirmed local op; see the module docs.
#[derive(Debug)]
pub struct Unconfirmed {
    records: HashMap<String, Record>,
    in_flight: HashMap<u64, InFlight>,
    /// Collectors every op is forwarded to: how many answers each op gets.
    collectors: usize,
    metrics: OutcomeMetrics,
}

impl Unconfirmed {
    /// Ops forwarded to `collectors` collectors, counted into `metrics`.
    pub fn new(collectors: usize, metrics: OutcomeMetrics) -> Self {
        for op in [Op::Reserve, Op::Unreserve] {
            for outcome in OUTCOMES {
                // Every series from the start, at 0, so a rule's `increase` sees the first.
                metrics.counter(op, outcome);
            }
        }
        Unconfirmed {
            records: HashMap::new(),
            in_flight: HashMap::new(),
            collectors: collectors.max(1),
            metrics,
        }
    }

    pub fn metrics(&self) -> &OutcomeMetrics {
        &self.metrics
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    fn set_gauge(&self) {
        self.metrics.unconfirmed.set(self.records.len() as i64);
    }

    /// The scorer took op `seq` of pod `uid` at `now` (`guess`: a provisional Reserve).
    /// `stream_holds`: the stream's own entry for the pod already stands where this op puts
    /// it (a Reserve onto the node the stream has the pod on), so nothing is only local —
    /// unless an earlier local op of the pod is still unconfirmed, which this one replaces.
    pub fn taken(
        &mut self,
        uid: &str,
        seq: u64,
        op: Op,
        guess: bool,
        stream_holds: bool,
        now: UnixMillis,
    ) {
        self.in_flight.insert(seq, InFlight { answers_left: self.collectors, op, taken: false });
        if stream_holds && !self.records.contains_key(uid) {
            self.metrics.inc(op, "confirmed");
            return;
        }
        let record =
            Record { seq, op, guess, taken_at: now, taken: false, rejected: false, dropped: false };
        self.records.insert(uid.to_owned(), record);
        self.set_gauge();
    }

    /// One collector's answer to op `seq` of pod `uid`.
    pub fn answered(&mut self, uid: &str, seq: u64, answer: Answer) {
        if let Some(flight) = self.in_flight.get_mut(&seq) {
            if answer == Answer::Taken && !flight.taken {
                flight.taken = true;
                self.metrics.inc(flight.op, "forwarded");
            }
            flight.answers_left = flight.answers_left.saturating_sub(1);
            if flight.answers_left == 0 {
                self.in_flight.remove(&seq);
            }
        }
        let Some(record) = self.records.get_mut(uid).filter(|r| r.seq == seq) else { return };
        match answer {
            Answer::Taken => record.taken = true,
            Answer::Rejected => record.rejected = true,
            Answer::Dropped => record.dropped = true,
            Answer::Expired => {}
        }
        if answer == Answer::Taken && record.op == Op::Unreserve {
            self.close(uid, "confirmed");
        }
    }

    /// The stream placed pod `uid` (`guess`: with a provisional entry).
    pub fn stream_placed(&mut self, uid: &str, guess: bool) {
        let confirms =
            self.records.get(uid).is_some_and(|r| r.op == Op::Reserve && (!guess || r.guess));
        if confirms {
            self.close(uid, "confirmed");
        }
    }

    /// The stream released pod `uid`: whatever the scorer last did with it, the collector
    /// has settled the pod (the release removes the scorer's own entry too), so nothing of
    /// the scorer's is left to give up. A Reserve gets here when the collector dropped a
    /// guess that arrived after its expiry, or took an earlier Unreserve of the pod.
    pub fn stream_released(&mut self, uid: &str) {
        self.close(uid, "confirmed");
    }

    fn close(&mut self, uid: &str, outcome: &'static str) {
        if let Some(record) = self.records.remove(uid) {
            self.metrics.inc(record.op, outcome);
            self.set_gauge();
        }
    }

    /// Whether some record is `bound` old or older at `now`.
    pub fn any_due(&self, now: UnixMillis, bound: Millis) -> bool {
        self.records.values().any(|r| now.since(r.taken_at) >= bound)
    }

    /// Ends every record `bound` old or older at `now`, counting each; returns them for the
    /// store to undo.
    pub fn give_up(&mut self, now: UnixMillis, bound: Millis) -> Vec<GivenUp> {
        let due: Vec<String> = self
            .records
            .iter()
            .filter(|(_, r)| now.since(r.taken_at) >= bound)
            .map(|(uid, _)| uid.clone())
            .collect();
        let mut given_up = Vec::with_capacity(due.len());
        for uid in due {
            let Some(record) = self.records.remove(&uid) else { continue };
            self.metrics.inc(record.op, record.given_up());
            given_up.push(GivenUp { uid, seq: record.seq, op: record.op });
        }
        if !given_up.is_empty() {
            self.set_gauge();
            if self.records.is_empty() {
                // A collector down for a burst leaves a table sized for it; give it back.
                self.records.shrink_to_fit();
            }
        }
        given_up
    }
}

#[cfg(test)]
mod tests;
