//! The judge's view of the state, shared: one [`ShadowView`] (nodes, ledger, bound pods'
//! requests), written only by the judge's thread as it works through its queue and read by
//! whatever else needs the state as a [`Snapshot`] — the predicted-load publisher
//! (`predicted_load.rs`), which otherwise builds two fresh copies of the whole state every
//! interval (a full delta, then a snapshot from it) beside the judge's own.
//!
//! Read-mostly: the judge holds the write lock for one event, or for one judgement (it
//! takes the judged pod's own entry out of the ledger and puts it back, so no reader sees
//! the ledger without it); a reader holds the read lock for one computation. The view is
//! the state as of the judge's place in its queue: milliseconds behind, or, after the queue
//! overflowed, until the judge has resynced.

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use waterline_core::Snapshot;
use waterline_core::shadow::ShadowView;

/// A handle on the one view; clones share it.
#[derive(Clone, Debug, Default)]
pub struct SharedView {
    view: Arc<RwLock<ShadowView>>,
}

impl SharedView {
    /// Runs `read` on the view's snapshot, under the read lock.
    pub fn read<T>(&self, read: impl FnOnce(&Snapshot) -> T) -> T {
        read(self.lock_read().snapshot())
    }

    fn lock_read(&self) -> RwLockReadGuard<'_, ShadowView> {
        self.view.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The view, for the judge alone (one event or one judgement at a time).
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, ShadowView> {
        self.view.write().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use waterline_core::Delta;
    use waterline_core::NodeReport;

    use super::*;

    #[test]
    fn clones_read_what_the_writer_applied() {
        let view = SharedView::default();
        let reader = view.clone();
        assert_eq!(reader.read(|s| s.nodes().count()), 0);
        let node = NodeReport { name: "n1".into(), ..NodeReport::default() };
        view.write().apply(&Delta { reset: true, nodes: vec![node], ..Delta::default() });
        assert_eq!(reader.read(|s| s.nodes().map(|n| n.name.clone()).collect::<Vec<_>>()), ["n1"]);
    }
}
