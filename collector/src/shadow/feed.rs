//! The shadow judge's queue: the collector's state puts every change on it, in order and
//! under the state's lock, together with the pod watch's binds to judge and the requests of
//! bound pods. Bounded: when it is full, nothing waits — the event is dropped (a bind to
//! judge is counted), nothing more is queued, and the judge, once it has worked through
//! what was queued before the gap, takes a fresh full copy of the state (a resync).

use std::collections::HashMap;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use tokio::sync::{Notify, mpsc};
use waterline_core::Delta;
use waterline_core::shadow::{Bind, Requests};

/// One event for the judge, in the order the state changed.
#[derive(Debug)]
pub enum ShadowEvent {
    /// A change every scorer sees too (the same delta, shared).
    Delta(Arc<Delta>),
    /// A pod's requests now count on `node` (replacing what it had before).
    Bound { uid: String, node: String, requests: Requests },
    /// A pod no longer holds a node.
    Unbound { uid: String },
    /// Judge this bind on the state as it is at this point of the queue.
    Judge(Box<Bind>),
}

/// The judge's end of the queue.
pub struct ShadowFeed {
    pub events: mpsc::Receiver<ShadowEvent>,
    /// Woken when a gap opens, so a judge waiting on an empty queue resyncs.
    pub gap_opened: Arc<Notify>,
}

/// The state's end of the queue (kept inside the state, used under its lock).
pub struct ShadowTap {
    tx: mpsc::Sender<ShadowEvent>,
    /// An event was dropped: nothing is queued until the judge resyncs.
    gap: bool,
    gap_opened: Arc<Notify>,
    dropped_binds: Counter,
    /// Whether bound pods' requests are queued and kept (the judge's request fit needs
    /// them; a view only followed for its snapshot does not).
    binds: bool,
    /// Every bound pod's node and requests, for a resync.
    bound: HashMap<String, (String, Requests)>,
}

impl ShadowTap {
    /// A tap with an empty queue and no pod bound yet; `binds`: whether bound pods'
    /// requests are queued and kept too.
    pub fn new(queue: usize, dropped_binds: Counter, binds: bool) -> (ShadowTap, ShadowFeed) {
        let (tx, events) = mpsc::channel(queue.max(1));
        let gap_opened = Arc::new(Notify::new());
        let tap = ShadowTap {
            tx,
            gap: false,
            gap_opened: gap_opened.clone(),
            dropped_binds,
            binds,
            bound: HashMap::new(),
        };
        (tap, ShadowFeed { events, gap_opened })
    }

    pub fn gap(&self) -> bool {
        self.gap
    }

    fn open_gap(&mut self) {
        if !self.gap {
            self.gap = true;
            self.gap_opened.notify_one();
        }
    }

    /// Queues `event` without waiting; past a full queue (or in a gap) it is dropped.
    pub fn send(&mut self, event: ShadowEvent) {
        let judged = matches!(event, ShadowEvent::Judge(_));
        if self.gap || self.tx.try_send(event).is_err() {
            if judged {
                self.dropped_binds.inc();
            }
            self.open_gap();
        }
    }

    /// A pod's requests on its node; queued only when they changed.
    pub fn bind(&mut self, uid: &str, node: &str, requests: Requests) {
        if !self.binds {
            return;
        }
        let same = self.bound.get(uid).is_some_and(|(n, r)| n == node && *r == requests);
        if !same {
            self.bound.insert(uid.to_owned(), (node.to_owned(), requests));
            self.send(ShadowEvent::Bound { uid: uid.to_owned(), node: node.to_owned(), requests });
        }
    }

    pub fn unbind(&mut self, uid: &str) {
        if self.binds && self.bound.remove(uid).is_some() {
            self.send(ShadowEvent::Unbound { uid: uid.to_owned() });
        }
    }

    /// A fresh pod list: the judge resyncs from it.
    pub fn reset_bound(&mut self, bound: Vec<(String, String, Requests)>) {
        if !self.binds {
            // The re-list's ledger change is queued as a delta like any other.
            return;
        }
        self.bound = bound.into_iter().map(|(uid, node, r)| (uid, (node, r))).collect();
        self.open_gap();
    }

    /// Ends a gap; returns every bound pod for the judge's fresh copy.
    pub fn resume(&mut self) -> Vec<(String, String, Requests)> {
        self.gap = false;
        self.bound.iter().map(|(uid, (node, r))| (uid.clone(), node.clone(), *r)).collect()
    }
}
