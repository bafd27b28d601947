//! The background committer: one kit `Worker` per engine that commits the immutable MemTable into
//! the table file (the commit path in docs/ARCHITECTURE.md, section `flex`), so writers never run
//! a commit themselves. A writer that fills the active MemTable freezes it (if no immutable one
//! exists) and requests a step; a writer that fills it while the committer is still busy waits for
//! room (backpressure: memory stays bounded to about two MemTables).
//!
//! Lifetime: the step holds an `Arc<FlexDb>`; `FlexDb::shutdown` stops and joins the worker
//! before the engine closes its WAL, so no commit of a closed or dropped engine touches storage
//! afterwards (after a simulated power loss the old engine is dropped before the store is
//! reopened). A failed commit has poisoned the engine; the worker then exits.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;

use strata_core::Result;
use strata_kit::worker::Worker;

use super::db::FlexDb;

/// How long a writer waits for the committer before it checks the engine's state again.
const BACKPRESSURE_RECHECK: Duration = Duration::from_millis(20);

impl FlexDb {
    /// Starts this engine's committer (recovery path, last step).
    pub(super) fn start_committer(self: &Arc<FlexDb>) -> Result<()> {
        let step_db = self.clone();
        let poison_db = self.clone();
        let worker = Worker::spawn(
            "flexdb-commit",
            self.signals.clone(),
            move || step_db.commit_frozen(),
            move |e| poison_db.poison(e),
        )?;
        *self.committer.lock() = Some(worker);
        Ok(())
    }

    /// Waits until `imm_drops` moves past `drops_seen`, the committer stops, or a short time
    /// passes (the caller re-checks everything in a loop).
    pub(crate) fn wait_for_commit_progress(&self, drops_seen: u64) {
        self.signals.wait_for_progress(BACKPRESSURE_RECHECK, |_| self.imm_drops.load(SeqCst) == drops_seen);
    }
}
