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
use std::time::Duration;

use strata_core::Result;
use strata_kit::worker::Worker;

use super::Inner;

/// How long a writer under backpressure sleeps between checks (it is also woken explicitly).
const BACKPRESSURE_POLL: Duration = Duration::from_millis(20);

/// Starts the worker for `inner` on `inner.worker`'s signals: each requested round runs
/// maintenance under the maintenance lock; an error poisons the engine and ends the thread.
pub(crate) fn spawn(inner: Arc<Inner>) -> Result<Worker> {
    let signals = inner.worker.clone();
    let poison_inner = inner.clone();
    let step = move || {
        let _only_one = inner.maintenance.lock();
        if inner.ensure_usable().is_err() || inner.worker.stop_requested() {
            return Ok(());
        }
        inner.maintain_locked().map_err(|e| inner.poisoned(e))
    };
    Worker::spawn("f2-maintenance", signals, step, move |e| poison_inner.poisoned(e))
}

/// Stops the worker and waits for it (idempotent). Without a worker thread, only marks the
/// signals stopped, so writers under backpressure stop waiting.
pub(crate) fn stop_and_join(inner: &Inner, worker: Option<&Worker>) {
    inner.worker.stop();
    if let Some(worker) = worker {
        worker.stop_and_join();
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
        !self.state.is_closed() && !self.state.is_poisoned() && !self.worker.stop_requested()
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
        let first_round = self.worker.progress().rounds;
        // A round that started before this wait may end without having seen the overflow, so
        // wait for up to two round ends (each one requested).
        let waiting = |rounds: u64| over() && rounds < first_round + 2;
        loop {
            self.worker.request();
            let progress = self.worker.wait_for_progress(BACKPRESSURE_POLL, |p| waiting(p.rounds));
            self.ensure_usable()?;
            if progress.stopping() || !waiting(progress.rounds) {
                break;
            }
        }
        Ok(())
    }
}
