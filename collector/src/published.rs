//! How a change of the collector's state goes out: the state hands each domain [`Delta`] to
//! a [`Publish`]er, in order and under its lock; [`Deltas`] is the one the service uses, a
//! broadcast channel of [`Published`] changes that carries each delta with its wire form,
//! encoded by the first subscriber that sends it and shared by the others.
//!
//! Generic over the encoding `W`, so neither the state (which publishes) nor the shadow
//! judge (which reads the domain delta) names a wire type: the service picks it.

use std::sync::{Arc, OnceLock};

use tokio::sync::broadcast;
use waterline_core::Delta;

/// Deltas buffered per subscriber before it counts as lagging (and is resynced from a full
/// snapshot).
pub const EVENT_BUFFER: usize = 1024;

/// Where the state sends every change it makes.
pub trait Publish: Send + Sync {
    /// Called under the state's lock, so changes arrive in the order they happened; must
    /// not wait.
    fn publish(&self, delta: Arc<Delta>);
    /// How many are listening, for `waterline_watch_subscribers`.
    fn subscribers(&self) -> usize;
}

/// Nobody listens: a state built for a test, a benchmark or a one-shot command.
pub struct Unwatched;

impl Publish for Unwatched {
    fn publish(&self, _: Arc<Delta>) {}
    fn subscribers(&self) -> usize {
        0
    }
}

/// One published change and its wire form `W`, encoded once.
pub struct Published<W> {
    pub delta: Arc<Delta>,
    encoded: OnceLock<W>,
}

impl<W> std::fmt::Debug for Published<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Published").field("delta", &self.delta).finish_non_exhaustive()
    }
}

impl<W: Clone> Published<W> {
    pub fn new(delta: Arc<Delta>) -> Self {
        Published { delta, encoded: OnceLock::new() }
    }

    /// The delta's wire form: encoded by the first caller, a copy for every later one.
    pub fn encoded(&self, encode: impl FnOnce(&Delta) -> W) -> W {
        self.encoded.get_or_init(|| encode(&self.delta)).clone()
    }

    /// The wire form for the last reader: the shared encoding moved out if there is one.
    pub fn into_encoded(self, encode: impl FnOnce(&Delta) -> W) -> W {
        match self.encoded.into_inner() {
            Some(encoded) => encoded,
            None => encode(&self.delta),
        }
    }
}

/// The broadcast channel of published changes in the encoding `W`. Clones share the
/// channel.
pub struct Deltas<W> {
    tx: broadcast::Sender<Arc<Published<W>>>,
}

impl<W> Clone for Deltas<W> {
    fn clone(&self) -> Self {
        Deltas { tx: self.tx.clone() }
    }
}

impl<W: Clone> Default for Deltas<W> {
    fn default() -> Self {
        Deltas { tx: broadcast::channel(EVENT_BUFFER).0 }
    }
}

impl<W: Clone> Deltas<W> {
    /// Every change from now on. Use `ClusterState::subscribe`, which also returns the full
    /// state at this point, so no change falls between the two.
    pub(crate) fn receiver(&self) -> broadcast::Receiver<Arc<Published<W>>> {
        self.tx.subscribe()
    }
}

impl<W: Clone + Send + Sync + 'static> Publish for Deltas<W> {
    fn publish(&self, delta: Arc<Delta>) {
        // No receivers is fine: scorers subscribe whenever they like.
        let _ = self.tx.send(Arc::new(Published::new(delta)));
    }

    fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn released(uid: &str) -> Arc<Delta> {
        Arc::new(Delta { released: vec![uid.to_owned()], ..Delta::default() })
    }

    #[test]
    fn every_receiver_counts_as_a_subscriber() {
        let deltas = Deltas::<()>::default();
        let (a, _b) = (deltas.receiver(), deltas.receiver());
        assert_eq!(deltas.subscribers(), 2);
        drop(a);
        assert_eq!(deltas.subscribers(), 1);
    }

    #[test]
    fn the_last_reader_moves_the_shared_encoding_out_or_encodes_itself() {
        let shared = Published::new(released("p1"));
        assert_eq!(shared.encoded(|_| "first".to_owned()), "first");
        assert_eq!(shared.into_encoded(|_| "again".to_owned()), "first");
        let unread = Published::new(released("p2"));
        assert_eq!(unread.into_encoded(|d| d.released[0].clone()), "p2");
    }

    #[test]
    fn nobody_listening_is_fine() {
        let deltas = Deltas::<()>::default();
        deltas.publish(released("p1"));
        assert_eq!(deltas.subscribers(), 0);
        Unwatched.publish(released("p1"));
        assert_eq!(Unwatched.subscribers(), 0);
    }
}
