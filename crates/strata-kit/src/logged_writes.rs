//! Logged writes: the write path of every engine that keeps its newest writes in one in-memory
//! structure behind one lock (memory's map, flex's MemTable, treeline's record cache) and makes
//! them durable with the shared WAL. Steps, for a batch or an rmw's result:
//!
//! 1. Refuse when closed or poisoned ([`OpenState::check`]).
//! 2. Append the encoded batch (docs/format/write-batch.md) to the WAL under the apply order's
//!    log lock and enqueue it: ticket order is lsn order ([`crate::apply_order`]).
//! 3. Commit at the requested durability with no lock held (group commit: one fsync for many).
//! 4. Apply after commit, in log order: the engine's [`ApplyLogged::apply_run`] gets runs of
//!    committed batches, oldest first, from whichever writer applies (normally the leader of the
//!    WAL round). A reader never sees a write that may still fail, and the applied writes are
//!    always a prefix of the log — what replay rebuilds. A poisoned engine applies nothing more.
//! 5. The engine's [`ApplyLogged::after_apply`]: its follow-up once the writer's own batch is in
//!    (a snapshot when due, pacing and memory reservation, making room in a cache).
//!
//! Poison before the error: every failure from the append on poisons the engine before the
//! writer sees it, because the log may then hold a record that the structure will never hold
//! (its commit failed, or it follows one that did), and a failed group commit fails other
//! writers' batches too. A writer refused behind it finds the engine poisoned.
//!
//! Read-modify-write sees every write logged before it: under the log lock it waits for any
//! logged, unapplied write of its key, then reads the current value ([`ReadCurrent`]), and its
//! result is appended under the same lock.
//!
//! Engines whose writers do not share one apply step under one lock keep their own path (f2:
//! its hot log is appended to in place by parallel writers; docs/ARCHITECTURE.md, f2).

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use strata_core::batch_codec::encode_batch;
use strata_core::{Durability, Error, Result, Value, WriteBatch};
use strata_wal::Wal;

use crate::apply_order::{ApplyOrder, Keys, LogGuard, Ticket};
use crate::open_state::OpenState;

/// A batch the log accepted at `lsn`, handed to the engine's apply step.
pub struct Logged {
    pub lsn: u64,
    pub batch: WriteBatch,
}

/// A logged write's sizes: its encoded WAL payload (for a log-size trigger such as a checkpoint
/// or snapshot) and its user bytes (for the written-bytes counter).
#[derive(Clone, Copy, Debug)]
pub struct WriteSizes {
    pub payload_bytes: u64,
    pub user_bytes: u64,
}

impl WriteSizes {
    pub fn of(batch: &WriteBatch, payload: &[u8]) -> WriteSizes {
        WriteSizes { payload_bytes: payload.len() as u64, user_bytes: batch.payload_bytes() as u64 }
    }
}

/// The engine's side of the write path (steps 4 and 5 of the module docs).
pub trait ApplyLogged {
    /// Applies a run of committed batches, oldest first, draining `run`, under one acquisition
    /// of the structure's lock; records each batch's lsn as applied under that lock. Called
    /// only while the engine is not poisoned. An `Err` poisons the engine: none of the run
    /// counts as applied.
    fn apply_run(&self, run: &mut Vec<Logged>) -> Result<()>;

    /// Runs in the writer once its own batch is committed and applied, with no lock held. An
    /// `Err` poisons the engine and is the writer's error.
    fn after_apply(&self, sizes: WriteSizes) -> Result<()>;
}

/// What [`ReadCurrent::current`] found.
pub enum Current {
    /// The key's current value (`None`: absent or deleted).
    Value(Option<Value>),
    /// What `prepare` read may be stale, or more is needed: run `prepare` again, then `current`.
    Stale,
}

/// How an rmw reads its key's current value: `prepare` with no lock held (a table or page read
/// that must not stall writers), then `current` under the log lock with no write of the key
/// pending, from the in-memory structure or from what `prepare` read if that is still current.
pub trait ReadCurrent {
    fn prepare(&mut self) -> Result<()> {
        Ok(())
    }

    fn current(&mut self) -> Current;
}

/// A conditional rmw's step: given the key's current value, what to store (`Some(None)`
/// deletes) or `None` to write nothing.
pub type MaybeWrite<'a> = dyn FnMut(Option<&[u8]>) -> Option<Option<Value>> + 'a;

/// The WAL, the apply order, the closed flag and the poison of one engine, and its write path.
pub struct LoggedWrites {
    wal: Wal,
    order: ApplyOrder<Logged>,
    state: OpenState,
    user_bytes_written: AtomicU64,
}

impl LoggedWrites {
    /// Over an open WAL whose every record the engine has applied (replayed) already; poison
    /// errors read `"{poison_label}: {cause}"`.
    pub fn new(wal: Wal, poison_label: &'static str) -> LoggedWrites {
        LoggedWrites {
            wal,
            order: ApplyOrder::new(),
            state: OpenState::labelled(poison_label),
            user_bytes_written: AtomicU64::new(0),
        }
    }

    pub fn wal(&self) -> &Wal {
        &self.wal
    }

    pub fn state(&self) -> &OpenState {
        &self.state
    }

    /// `Err` once closed or poisoned: every read and write starts here.
    pub fn check_usable(&self) -> Result<()> {
        self.state.check()
    }

    /// Poisons the engine with `error` (unless poisoned already) and returns it.
    pub fn poison(&self, error: Error) -> Error {
        self.state.poison(error)
    }

    /// User bytes (keys and values) of every write handed to the log since open.
    pub fn user_bytes_written(&self) -> u64 {
        self.user_bytes_written.load(Relaxed)
    }

    /// Writes `batch` atomically at `durability` (module docs, steps 1–5).
    pub fn write<A: ApplyLogged + ?Sized>(
        &self,
        batch: WriteBatch,
        durability: Durability,
        applier: &A,
    ) -> Result<()> {
        self.check_usable()?;
        let payload = encode_batch(&batch);
        let keys = Keys::of(&batch);
        let (lsn, ticket, sizes) = {
            let log = self.order.lock_log();
            self.append(&log, keys, batch, &payload, durability)?
        };
        self.commit_then_apply(lsn, ticket, sizes, durability, applier).map_err(|e| self.poison(e))
    }

    /// Stores `f(current value of key)` (`None` deletes it) at `durability` and returns it. `f`
    /// sees every write logged before it and runs once, under the log lock.
    pub fn rmw<A: ApplyLogged + ?Sized>(
        &self,
        key: &[u8],
        read: &mut dyn ReadCurrent,
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
        applier: &A,
    ) -> Result<Option<Value>> {
        let stored = self.rmw_or_skip(key, read, &mut |current| Some(f(current)), durability, applier)?;
        Ok(stored.flatten())
    }

    /// `rmw` whose `f` may write nothing (`None`): a conditional update (laser's update of
    /// some columns, only while the key holds a row). Returns what it stored, `None` when `f`
    /// wrote nothing.
    pub fn rmw_or_skip<A: ApplyLogged + ?Sized>(
        &self,
        key: &[u8],
        read: &mut dyn ReadCurrent,
        f: &mut MaybeWrite<'_>,
        durability: Durability,
        applier: &A,
    ) -> Result<Option<Option<Value>>> {
        self.check_usable()?;
        loop {
            read.prepare()?;
            let log = self.order.lock_log();
            // A write of the key logged but not applied yet: the structure does not show it.
            if let Some(pending) = log.pending_write_of(key) {
                drop(log);
                // A write that will never be applied leaves the key's value unknown; when its
                // apply panicked no writer saw an error to poison with, so this one does.
                self.order.wait_done(pending).map_err(|e| self.poison(e))?;
                self.check_usable()?;
                continue;
            }
            let Current::Value(current) = read.current() else { continue };
            let Some(new) = f(current.as_deref()) else { return Ok(None) };
            let batch = WriteBatch::single(key, new.as_deref());
            let payload = encode_batch(&batch);
            let (lsn, ticket, sizes) = self.append(&log, Keys::one(key), batch, &payload, durability)?;
            drop(log);
            self.commit_then_apply(lsn, ticket, sizes, durability, applier).map_err(|e| self.poison(e))?;
            return Ok(Some(new));
        }
    }

    /// An engine's `close`: marks it closed (a second close is `Ok`), runs `quiesce` (stop the
    /// background workers; it returns a guard, e.g. the engine's work lock, held while the log
    /// closes so no flush or checkpoint truncates it meanwhile), closes the log. A poisoned
    /// engine reports its poison: the log did not accept all of its writes, so the close
    /// vouches for nothing.
    pub fn close<G>(&self, quiesce: impl FnOnce() -> G) -> Result<()> {
        if !self.state.mark_closed() {
            return Ok(());
        }
        let _quiet = quiesce();
        let closed = self.wal.close();
        self.state.check_not_poisoned()?;
        closed
    }

    /// Makes every acknowledged write durable in the WAL; a failure poisons the engine.
    pub fn flush(&self) -> Result<()> {
        self.check_usable()?;
        self.wal.sync().map(|_| ()).map_err(|e| self.poison(e))
    }

    /// Step 2, under the log lock: appends `payload` (the encoded `batch`) and enqueues it.
    fn append<'a>(
        &'a self,
        log: &LogGuard<'a, Logged>,
        keys: Keys,
        batch: WriteBatch,
        payload: &[u8],
        durability: Durability,
    ) -> Result<(u64, Ticket<'a, Logged>, WriteSizes)> {
        let sizes = WriteSizes::of(&batch, payload);
        // The log refuses with `Closed` before it buffers anything (a write that passed the
        // closed check as a close began): nothing to poison for.
        let lsn = self.wal.append(payload).map_err(|e| match e {
            Error::Closed => e,
            e => self.poison(e),
        })?;
        Ok((lsn, log.enqueue(keys, lsn, durability, Logged { lsn, batch }), sizes))
    }

    /// Steps 3–5, with no lock held. A failed commit poisons the engine first, then stops the
    /// order at this write unless the log had accepted it already (then it was or is applied
    /// like any other).
    fn commit_then_apply<A: ApplyLogged + ?Sized>(
        &self,
        lsn: u64,
        ticket: Ticket<'_, Logged>,
        sizes: WriteSizes,
        durability: Durability,
        applier: &A,
    ) -> Result<()> {
        self.user_bytes_written.fetch_add(sizes.user_bytes, Relaxed);
        let mut apply = |run: &mut Vec<Logged>| {
            self.state.check_not_poisoned()?;
            applier.apply_run(run)
        };
        let committed = self
            .wal
            .commit_then(lsn, durability, &mut || self.order.apply_appliable(&self.wal, &mut apply))
            .map_err(|e| self.poison(e));
        ticket.finish(committed, &self.wal, &mut apply)?;
        applier.after_apply(sizes)
    }
}

#[cfg(test)]
#[path = "logged_writes_tests.rs"]
mod tests;
