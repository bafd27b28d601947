//! The background maintenance thread: writers signal it when a trigger is crossed (hot or cold
//! log over trigger% of its disk budget, WAL grown by `checkpoint_wal_bytes`); it runs compaction,
//! chunk-log garbage collection and checkpoints under the maintenance lock. Writers block only
//! when the hot log exceeds its whole disk budget (backpressure), until a compaction step
//! truncates it or the round ends.
//!
//! Lifetime invariant: the thread touches storage only while the engine is open and not
//! poisoned. `close` (also run by `Drop`) sets `stop` and joins the thread *before* its final
//! checkpoint, so after `close` returns — or after a crashed engine is dropped — the thread is
//! gone. An error in the thread poisons the engine and ends the thread.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use strata_core::Result;

use super::Inner;

#[derive(Default)]
pub(crate) struct WorkerSignal {
    state: Mutex<WorkerState>,
    /// Wakes the worker (work requested, or stop).
    wake: Condvar,
    /// Wakes writers waiting for the hot log to shrink (a compaction step or round finished).
    progress: Condvar,
}

#[derive(Default)]
struct WorkerState {
    requested: bool,
    stop: bool,
    /// Maintenance rounds finished (a waiting writer gives up after one more round).
    rounds: u64,
}

/// How long a writer under backpressure sleeps between checks (it is also woken explicitly).
const BACKPRESSURE_POLL: Duration = Duration::from_millis(20);

impl WorkerSignal {
    /// Asks the worker for a maintenance round (cheap when one is already requested).
    pub fn request(&self) {
        let mut st = self.state.lock();
        if !st.requested {
            st.requested = true;
            self.wake.notify_one();
        }
    }

    /// Wakes writers blocked in [`Inner::wait_for_hot_room`].
    pub fn notify_progress(&self) {
        let _st = self.state.lock();
        self.progress.notify_all();
    }

    fn stop(&self) {
        let mut st = self.state.lock();
        st.stop = true;
        self.wake.notify_all();
        self.progress.notify_all();
    }
}

/// Starts the worker for `inner`.
pub(crate) fn spawn(inner: Arc<Inner>) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("f2-maintenance".into())
        .spawn(move || run(&inner))
        .map_err(|e| strata_core::Error::io("spawning the f2 maintenance thread", e))
}

/// Stops the worker and waits for it (idempotent).
pub(crate) fn stop_and_join(inner: &Inner, handle: &Mutex<Option<JoinHandle<()>>>) {
    inner.worker.stop();
    if let Some(h) = handle.lock().take() {
        let _ = h.join();
    }
}

fn run(inner: &Inner) {
    loop {
        {
            let mut st = inner.worker.state.lock();
            while !st.requested && !st.stop {
                inner.worker.wake.wait(&mut st);
            }
            if st.stop {
                return;
            }
            st.requested = false;
        }
        let outcome = {
            let _only_one = inner.maintenance.lock();
            if inner.ensure_usable().is_err() || inner.worker.state.lock().stop {
                Ok(())
            } else {
                inner.maintain_locked()
            }
        };
        let failed = outcome.map_err(|e| inner.poisoned(e)).is_err();
        {
            let mut st = inner.worker.state.lock();
            st.rounds += 1;
            inner.worker.progress.notify_all();
        }
        if failed {
            return;
        }
    }
}

/// Records the longest backpressure wait (on every exit path of the wait).
struct WaitTimer<'a> {
    started: std::time::Instant,
    max_us: &'a std::sync::atomic::AtomicU64,
}

impl Drop for WaitTimer<'_> {
    fn drop(&mut self) {
        let us = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.max_us.fetch_max(us, Relaxed);
    }
}

impl Inner {
    /// True while the worker should keep going (engine open, not poisoned, not stopping).
    pub fn worker_may_continue(&self) -> bool {
        !self.closed.load(Relaxed) && !self.poison.is_poisoned() && !self.worker.state.lock().stop
    }

    /// Backpressure: blocks while the hot log is over its whole disk budget, until compaction
    /// makes room, a maintenance round ends without making any, or the engine stops.
    pub fn wait_for_hot_room(&self) -> Result<()> {
        let over = || self.hot.size_bytes() > self.opts.hot_hard_bytes;
        if !over() {
            return Ok(());
        }
        self.counters.backpressure_waits.fetch_add(1, Relaxed);
        let started = std::time::Instant::now();
        let _record_wait = WaitTimer { started, max_us: &self.counters.backpressure_max_wait_us };
        let mut st = self.worker.state.lock();
        let round = st.rounds;
        // A round that started before this wait may end without having seen the overflow, so
        // wait for up to two round ends (each one requested).
        while over() && st.rounds < round + 2 && !st.stop {
            if !st.requested {
                st.requested = true;
                self.worker.wake.notify_one();
            }
            self.worker.progress.wait_for(&mut st, BACKPRESSURE_POLL);
            drop(st);
            self.ensure_usable()?;
            st = self.worker.state.lock();
        }
        Ok(())
    }
}
