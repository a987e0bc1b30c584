//! Provisional reservations: kube-scheduler never tells an extender which node it chose, and
//! the pod watch shows the bind only after it has been written and watched — long enough for
//! the next pods of a burst to be decided on a ledger without it, all onto the same coolest
//! node. So prioritize records its pod on the node it scored best as a *provisional* Reserve
//! (`ReserveRequest.provisional_ttl`), which the next pod's Evaluate sees; the bind verb's
//! Reserve or the pod watch confirms or replaces it, and it expires after `--provisional-
//! reserve-ttl` otherwise (see `waterline_core::ledger`).
//!
//! The Reserve is sent without holding up the prioritize answer (the scheduler waits on
//! prioritize; it does not need the Reserve), and the next filter waits for the ones still in
//! flight before it calls the scorer — ordering by waiting only when it matters, which is
//! almost never: the scheduler's own work between two pods outlasts one unary call.
//!
//! Which node is guessed is core's rule (`waterline_core::extender_score::best_candidate`),
//! shared with the simulator's model of this path.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::Instrument;
use waterline_api::v1 as pb;

use crate::scorer::ScorerClient;

/// Sends provisional Reserves and tracks the ones in flight.
pub struct Provisional {
    ttl: Duration,
    in_flight: Arc<watch::Sender<usize>>,
}

impl Provisional {
    pub fn new(ttl: Duration) -> Self {
        Provisional { ttl, in_flight: Arc::new(watch::Sender::new(0)) }
    }

    /// Records `pod` on `node` provisionally, in the background.
    pub fn record(&self, scorer: &ScorerClient, pod: pb::PodInfo, node: String) {
        self.in_flight.send_modify(|n| *n += 1);
        let done = Done(self.in_flight.clone());
        let scorer = scorer.clone();
        let ttl = self.ttl;
        let span = tracing::info_span!("provisional_reserve", pod = %pod.uid, %node);
        tokio::spawn(
            async move {
                scorer.reserve(pod, &node, Some(ttl)).await;
                drop(done);
            }
            .instrument(span),
        );
    }

    /// Waits, at most `limit`, until no provisional Reserve is in flight.
    pub async fn settled(&self, limit: Duration) {
        let mut rx = self.in_flight.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|n| *n == 0)).await;
    }
}

/// Marks one Reserve finished, however its task ends.
struct Done(Arc<watch::Sender<usize>>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}
