//! The background committer: one thread per engine that commits the immutable MemTable into the
//! table file (the commit path in docs/ARCHITECTURE.md, section `flex`), so writers never run a
//! commit themselves.
//! A writer that fills the active MemTable freezes it (if no immutable one exists) and wakes the
//! committer; a writer that fills it while the committer is still busy waits for it
//! (backpressure: memory stays bounded to about two MemTables).
//!
//! Lifetime: the thread holds an `Arc<FlexDb>`; `FlexDb::shutdown` stops and joins it before the
//! engine closes its WAL, so no commit of a closed or dropped engine touches storage afterwards
//! (after a simulated power loss the old engine is dropped before the store is reopened). It
//! exits as soon as the engine is poisoned.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use strata_core::Result;

use super::db::FlexDb;

/// How long a writer waits for the committer before it checks the engine's state again.
const BACKPRESSURE_RECHECK: Duration = Duration::from_millis(20);

/// What the committer is asked to do; guarded by `Signals::state`.
#[derive(Default)]
pub(crate) struct SignalState {
    /// An immutable MemTable waits to be committed.
    work: bool,
    /// Exit when the current commit (if any) ends.
    stop: bool,
    /// The thread has exited: nobody will commit until the engine does it inline.
    exited: bool,
}

#[derive(Default)]
pub(crate) struct Signals {
    state: Mutex<SignalState>,
    /// Wakes the committer: work or stop.
    work_ready: Condvar,
    /// Wakes writers waiting for room: an immutable MemTable was dropped, or the thread exited.
    drained: Condvar,
}

impl Signals {
    pub(crate) fn wake_committer(&self) {
        self.state.lock().work = true;
        self.work_ready.notify_one();
    }

    pub(crate) fn stop(&self) {
        self.state.lock().stop = true;
        self.work_ready.notify_all();
    }

    /// After an immutable MemTable was dropped (under the `mem` lock, before this call).
    pub(crate) fn notify_drained(&self) {
        let _state = self.state.lock();
        self.drained.notify_all();
    }

    /// Waits until `db.imm_drops` moves past `drops_seen`, the committer exits, or a short
    /// time passes (the caller re-checks everything in a loop).
    pub(crate) fn wait_for_room(&self, db: &FlexDb, drops_seen: u64) {
        let mut state = self.state.lock();
        if !state.exited && !state.stop && db.imm_drops.load(SeqCst) == drops_seen {
            self.drained.wait_for(&mut state, BACKPRESSURE_RECHECK);
        }
    }

    /// `true` once the committer has been told to stop or has exited.
    pub(crate) fn stopping(&self) -> bool {
        let state = self.state.lock();
        state.stop || state.exited
    }
}

/// Starts the committer thread of `db`.
pub(crate) fn spawn(db: Arc<FlexDb>) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("flexdb-commit".into())
        .spawn(move || run(&db))
        .map_err(|e| strata_core::Error::io("starting the flexdb committer thread", e))
}

fn run(db: &FlexDb) {
    loop {
        {
            let mut state = db.signals.state.lock();
            while !state.work && !state.stop {
                db.signals.work_ready.wait(&mut state);
            }
            if state.stop {
                break;
            }
            state.work = false;
        }
        // Errors poison the engine (or mean it is closing): nothing more to commit either way.
        if db.commit_frozen().is_err() {
            break;
        }
    }
    db.signals.state.lock().exited = true;
    db.signals.drained.notify_all();
}
