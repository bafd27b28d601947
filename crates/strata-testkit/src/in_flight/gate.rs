//! A storage hook that stops one chosen thread at its next file sync or file write, so a test
//! knows a write is in flight (past the engine's log append, inside its commit) and can look at
//! the engine from another thread before deciding how that sync or write ends.
//!
//! Watching by thread, not by file name, keeps the hook engine-agnostic: every engine here runs
//! a caller's log write and fsync on the caller's thread (group commit: the first waiter leads),
//! and background threads (committers, write-back workers) pass through untouched.

use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use strata_core::{Error, Result};
use strata_io::{FaultKind, HookStorage, Storage, SyncHook, WriteHook};

/// Which call of the watched thread is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// Its first `StorageFile::sync`: the fdatasync of a `Sync` write's commit.
    Sync,
    /// Its first `StorageFile::write_at`: the write of a `Buffered` write's log record.
    Write,
}

/// How a held call ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// The call goes on to the storage.
    Proceed,
    /// The call returns this error instead (nothing written or synced).
    Fail(FaultKind),
}

/// The longest a held call waits for its release: a check that never releases it (its own bug)
/// fails the call instead of hanging the test.
const HOLD_LIMIT: Duration = Duration::from_secs(30);

struct Watch {
    thread: ThreadId,
    point: Point,
    /// Held until released; otherwise the call only records that it got there (a probe).
    hold: bool,
    /// The file of the call that matched; a watch matches once.
    reached: Option<String>,
    release: Option<Release>,
}

/// The watches of one scenario; see the module documentation.
#[derive(Default)]
pub(crate) struct Gate {
    watches: Mutex<Vec<Watch>>,
    changed: Condvar,
}

impl Gate {
    /// `inner` with every file's syncs and writes passing through this gate.
    pub(crate) fn storage(self: &Arc<Gate>, inner: Arc<dyn Storage>) -> Arc<dyn Storage> {
        let (on_sync, on_write) = (self.clone(), self.clone());
        let sync: SyncHook = Arc::new(move |name| on_sync.pass(Point::Sync, name));
        let write: WriteHook = Arc::new(move |name, _, _| on_write.pass(Point::Write, name));
        Arc::new(HookStorage::new(inner, sync).with_writes(write))
    }

    /// Stops the calling thread's next call at `point` until `release`.
    pub(crate) fn hold_next(&self, point: Point) {
        self.watch(point, true);
    }

    /// Records (without stopping it) when the calling thread makes its next call at `point`.
    pub(crate) fn probe_next(&self, point: Point) {
        self.watch(point, false);
    }

    fn watch(&self, point: Point, hold: bool) {
        let thread = std::thread::current().id();
        let mut watches = self.watches.lock();
        watches.retain(|w| w.thread != thread);
        watches.push(Watch { thread, point, hold, reached: None, release: None });
    }

    /// Waits until `thread`'s watched call happened (returns its file) or `give_up` says to stop
    /// waiting, checked every few milliseconds and at `deadline`.
    pub(crate) fn wait_reached(
        &self,
        thread: ThreadId,
        deadline: Instant,
        give_up: &dyn Fn() -> bool,
    ) -> Option<String> {
        let mut watches = self.watches.lock();
        loop {
            let reached = watches.iter().find(|w| w.thread == thread).and_then(|w| w.reached.clone());
            if reached.is_some() || give_up() || Instant::now() >= deadline {
                return reached;
            }
            self.changed.wait_for(&mut watches, Duration::from_millis(5));
        }
    }

    /// Ends `thread`'s held call (or, if it has not happened yet, the call when it comes).
    pub(crate) fn release(&self, thread: ThreadId, release: Release) {
        let mut watches = self.watches.lock();
        if let Some(watch) = watches.iter_mut().find(|w| w.thread == thread) {
            watch.release = Some(release);
        }
        self.changed.notify_all();
    }

    /// The hook: a call at `point` on a watched thread that has not matched yet.
    fn pass(&self, point: Point, file: &str) -> Result<()> {
        let thread = std::thread::current().id();
        let mut watches = self.watches.lock();
        let mine = |w: &&mut Watch| w.thread == thread;
        let Some(watch) = watches.iter_mut().find(|w| mine(w) && w.point == point && w.reached.is_none())
        else {
            return Ok(());
        };
        watch.reached = Some(file.to_string());
        let hold = watch.hold;
        self.changed.notify_all();
        if !hold {
            return Ok(());
        }
        let until = Instant::now() + HOLD_LIMIT;
        let release = loop {
            // Found by thread again: other threads' watches may have come and gone meanwhile.
            if let Some(release) = watches.iter_mut().find(mine).and_then(|w| w.release) {
                break release;
            }
            if self.changed.wait_until(&mut watches, until).timed_out() {
                break Release::Fail(FaultKind::Eio);
            }
        };
        match release {
            Release::Proceed => Ok(()),
            Release::Fail(kind) => Err(fault_error(kind, file)),
        }
    }
}

/// The error a failing disk gives (the same errno `SimStorage`'s faults use).
fn fault_error(kind: FaultKind, file: &str) -> Error {
    let errno = match kind {
        FaultKind::Eio => libc::EIO,
        FaultKind::Enospc => libc::ENOSPC,
    };
    Error::io(format!("{file} (held in flight, then failed)"), std::io::Error::from_raw_os_error(errno))
}
