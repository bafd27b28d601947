//! A background worker: one named thread that waits until work is requested (or it is told to
//! stop), runs the engine's step function, and exits when the step fails. Writers request work
//! cheaply, wait for the worker's progress (backpressure) with a recheck timeout, and are woken
//! when a step makes room. f2's maintenance thread runs on it; flex's committer is the same
//! pattern (docs/ARCHITECTURE.md, "The shared kit").
//!
//! Lifetime: the step closure usually holds an `Arc` of the engine's state; the engine calls
//! [`Worker::stop_and_join`] before it closes its files, so no step touches storage afterwards.
//! A step that returns an error has already poisoned the engine (that is the step's job: only
//! the engine knows what its failure means); the thread then exits, and waiters are woken. A step
//! that panics is caught and handed to the engine's `poison` as an error, so the engine refuses
//! every later call (its `close` included) instead of carrying on over state the panic left
//! half-changed; the thread then exits the same way.
//!
//! Invariants:
//! - Every flag lives under one mutex, and `request`, `notify_progress`, `stop` and the exit
//!   change or signal under it; a waiter checks its condition under the same mutex before it
//!   sleeps, so no wake-up is lost between the check and the wait.
//! - `rounds` counts finished steps (failed ones included) and is bumped before progress
//!   waiters are woken; `exited` is set once the thread has left (even by a panic in the step).
//! - After `stop`, no further step starts; the running one finishes (it may poll
//!   [`WorkerSignals::stop_requested`] to end early).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use strata_core::{Error, Result};

/// The state shared by the worker thread, the engine and its writers. Engines keep an
/// `Arc<WorkerSignals>` in their shared state so that writers and steps can reach it.
#[derive(Debug, Default)]
pub struct WorkerSignals {
    state: Mutex<Progress>,
    /// Wakes the worker: work requested, or stop.
    wake: Condvar,
    /// Wakes writers waiting for progress: a step made room or finished, stop, or exit.
    progress: Condvar,
}

/// A snapshot of the worker's state, as seen by a waiter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Work was requested and no step has taken the request yet.
    pub requested: bool,
    /// `stop` was called: no further step starts.
    pub stop: bool,
    /// The thread has exited (stopped, a step failed, or a step panicked).
    pub exited: bool,
    /// Steps finished so far.
    pub rounds: u64,
}

impl Progress {
    /// Nobody will make progress any more: stop was called or the thread is gone.
    pub fn stopping(&self) -> bool {
        self.stop || self.exited
    }
}

impl WorkerSignals {
    /// Asks for a step (cheap when one is already requested): the worker runs one step after
    /// this call, however many requests arrive before it starts.
    pub fn request(&self) {
        let mut st = self.state.lock();
        if !st.requested {
            st.requested = true;
            self.wake.notify_one();
        }
    }

    /// Wakes every writer in [`WorkerSignals::wait_for_progress`]; call it after a change that
    /// may let them go on (e.g. a MemTable dropped, a log truncated), made before this call.
    pub fn notify_progress(&self) {
        let _st = self.state.lock();
        self.progress.notify_all();
    }

    /// Tells the worker to exit after its current step, and wakes every waiter.
    pub fn stop(&self) {
        self.state.lock().stop = true;
        self.wake.notify_all();
        self.progress.notify_all();
    }

    pub fn progress(&self) -> Progress {
        *self.state.lock()
    }

    /// `stop` was called (a long step may poll this to end early).
    pub fn stop_requested(&self) -> bool {
        self.state.lock().stop
    }

    /// Stop was called or the thread has exited: nobody will make progress any more.
    pub fn is_stopping(&self) -> bool {
        self.state.lock().stopping()
    }

    /// Backpressure: unless the worker is stopping or `keep_waiting(progress)` says the caller's
    /// condition is met, sleeps until progress is notified or `recheck` passes; returns the
    /// progress after the wait. `keep_waiting` runs under the worker's mutex (so it must not
    /// take a lock that is held around `request`, `notify_progress` or `stop`), which is what
    /// makes the check-then-sleep race-free. Callers loop: recheck their own state (poison,
    /// closed), then call again.
    pub fn wait_for_progress(
        &self,
        recheck: Duration,
        keep_waiting: impl FnOnce(&Progress) -> bool,
    ) -> Progress {
        let mut st = self.state.lock();
        if !st.stopping() && keep_waiting(&st) {
            self.progress.wait_for(&mut st, recheck);
        }
        *st
    }

    /// The worker's side: waits for a request or stop; `false` means stop (exit now).
    fn next_request(&self) -> bool {
        let mut st = self.state.lock();
        while !st.requested && !st.stop {
            self.wake.wait(&mut st);
        }
        if st.stop {
            return false;
        }
        st.requested = false;
        true
    }

    fn finish_round(&self) {
        self.state.lock().rounds += 1;
        self.progress.notify_all();
    }
}

/// Marks the thread exited and wakes waiters however the thread ends (a panicking step too).
struct ExitGuard<'a>(&'a WorkerSignals);

impl Drop for ExitGuard<'_> {
    fn drop(&mut self) {
        self.0.state.lock().exited = true;
        self.0.progress.notify_all();
    }
}

/// A running worker thread; see the module docs.
#[derive(Debug)]
pub struct Worker {
    signals: Arc<WorkerSignals>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Worker {
    /// Starts the thread `name`: for each request it runs `step` once; a step error ends it. A
    /// panic in `step` is passed to `poison` (as `Error::Poisoned` naming the thread) and ends
    /// it too.
    pub fn spawn(
        name: &str,
        signals: Arc<WorkerSignals>,
        mut step: impl FnMut() -> Result<()> + Send + 'static,
        poison: impl Fn(Error) -> Error + Send + 'static,
    ) -> Result<Worker> {
        let shared = signals.clone();
        let thread_name = name.to_string();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let _exit = ExitGuard(&shared);
                while shared.next_request() {
                    let outcome = catch_unwind(AssertUnwindSafe(&mut step)).unwrap_or_else(|panic| {
                        let what = panic_text(panic.as_ref());
                        Err(poison(Error::Poisoned(format!("a panic in the {thread_name} thread: {what}"))))
                    });
                    shared.finish_round();
                    if outcome.is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| Error::io(format!("starting the {name} thread"), e))?;
        Ok(Worker { signals, thread: Mutex::new(Some(thread)) })
    }

    /// `spawn` for a step on the engine state `owner`, held weakly: the thread never keeps the
    /// engine alive, and once the engine is gone a step does nothing and an error passes
    /// through unpoisoned. `poison` is the engine's (its poison, returning the error).
    pub fn spawn_for<T: Send + Sync + 'static>(
        name: &str,
        signals: Arc<WorkerSignals>,
        owner: &Arc<T>,
        step: fn(&T) -> Result<()>,
        poison: fn(&T, Error) -> Error,
    ) -> Result<Worker> {
        let (for_step, for_poison) = (Arc::downgrade(owner), Arc::downgrade(owner));
        Worker::spawn(
            name,
            signals,
            move || for_step.upgrade().map_or(Ok(()), |owner| step(&owner)),
            move |e| match for_poison.upgrade() {
                Some(owner) => poison(&owner, e),
                None => e,
            },
        )
    }

    pub fn signals(&self) -> &Arc<WorkerSignals> {
        &self.signals
    }

    /// Stops the worker (after its current step) and waits for the thread to exit. Idempotent;
    /// a panic in a step is not propagated (the thread counts as exited). Called from the
    /// worker's own thread (its step dropped the last handle of the engine that owns this
    /// `Worker`), it only stops: a thread cannot join itself.
    pub fn stop_and_join(&self) {
        self.signals.stop();
        let thread = self.thread.lock().take();
        if let Some(thread) = thread.filter(|t| t.thread().id() != std::thread::current().id()) {
            let _ = thread.join();
        }
    }
}

/// A panic's message, when it has one.
fn panic_text(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}

impl Drop for Worker {
    /// A worker is never left running detached.
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

#[cfg(test)]
mod tests;
