//! FlexDB's write path (steps numbered in docs/ARCHITECTURE.md, section `flex`): the kit's
//! logged writes (`strata_kit::logged_writes`: append under the log lock, commit, apply in log
//! order) with FlexDB's apply step — the active MemTable under `mem`, freezing a full one for
//! the committer — and its follow-up: memory reservation, pacing writers that run ahead of a
//! commit, waiting for room when both MemTables are full.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_core::{Durability, Result, Value, WriteBatch};
use strata_kit::logged_writes::{ApplyLogged, Current, Logged, ReadCurrent, WriteSizes};

use super::db::{FlexDb, MemState};

/// The MemTables' room: what a run's apply found after a batch (`freeze_if_full`, under the
/// `mem` write lock), or what a writer finds once its batch is applied (`room_after_apply`).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Room {
    /// The active MemTable has room.
    Free,
    /// The active MemTable has room but an immutable one is being committed: the writer is paced
    /// by the commit's progress. The value: the active MemTable's fill (0..1).
    Paced(f64),
    /// The active MemTable was full and became the immutable one: wake the committer (only
    /// `freeze_if_full` says so; its caller wakes it).
    Frozen,
    /// The active MemTable is full and the committer is still busy: wait for it.
    Full,
}

/// How an rmw reads its key: the table is read with no lock held (`prepare`), since waiting
/// under the log lock for the table's read lock (held for writing by a commit step) would stall
/// every writer behind it. The value read stays current unless a commit finished in between
/// (the same argument as a scan window's, iter.rs): a commit changes only keys of the immutable
/// MemTable, which `mem` shows until the commit drops it and bumps `imm_drops` under the `mem`
/// write lock; if that counter moved, read again.
struct TableRead<'a> {
    db: &'a FlexDb,
    key: &'a [u8],
    drops_seen: u64,
    /// The table's value, read by `prepare` when no MemTable held the key.
    table_value: Option<Option<Value>>,
}

impl ReadCurrent for TableRead<'_> {
    fn prepare(&mut self) -> Result<()> {
        self.drops_seen = self.db.imm_drops.load(SeqCst);
        let in_mem = self.db.mem.read().get(self.key).is_some();
        self.table_value = if in_mem { None } else { Some(self.db.table.read().get(self.key)?) };
        #[cfg(test)]
        super::rmw_tests::after_table_read();
        Ok(())
    }

    fn current(&mut self) -> Current {
        match (self.db.mem.read().get(self.key), self.table_value.take()) {
            (Some(v), _) => Current::Value(v.cloned()),
            (None, Some(v)) if self.db.imm_drops.load(SeqCst) == self.drops_seen => Current::Value(v),
            (None, _) => Current::Stale, // a commit moved the key into the table meanwhile
        }
    }
}

impl FlexDb {
    /// Write path steps 1–5 (`strata_kit::logged_writes`): a batch is in the active MemTable
    /// only once its commit succeeded, so no reader sees a write that may still fail; every
    /// failure from the append on poisons the engine before it is returned.
    pub(crate) fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.writes.write(batch, durability, self)
    }

    /// Read-modify-write of `key`: stores `f(current value)` (`None`: delete) and returns it;
    /// `f` sees every write logged before it (`TableRead` says how the value is read).
    pub(crate) fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        let mut read = TableRead { db: self, key, drops_seen: 0, table_value: None };
        self.writes.rmw(key, &mut read, f, durability, self)
    }

    /// What a writer whose batch was applied does next (write path step 5): pace against a
    /// running commit, wait for room when the active MemTable is full (`wait_for_room` freezes
    /// it or waits for the committer), or nothing.
    fn room_after_apply(&self, mem: &MemState) -> Room {
        let active_bytes = mem.active.memory_bytes();
        if active_bytes >= self.memtable_bytes {
            return Room::Full;
        }
        match mem.imm {
            Some(_) => Room::Paced(active_bytes as f64 / self.memtable_bytes as f64),
            None => Room::Free,
        }
    }

    /// Write pacing: while a commit runs, a writer whose write left the active MemTable more than
    /// `PACE_SLACK` fuller than the commit is done waits (in short sleeps) for the commit to catch
    /// up, so writers slow down smoothly instead of all stopping for the rest of a commit once
    /// both MemTables are full.
    fn pace(&self, fill: f64) {
        const PACE_SLACK: f64 = 0.25;
        const PACE_SLEEP: Duration = Duration::from_micros(500);
        let mut waiting_since = None;
        loop {
            let (done, total) = (self.commit_done.load(Relaxed), self.commit_total.load(Relaxed));
            if total == 0 || fill <= done as f64 / total as f64 + PACE_SLACK {
                break;
            }
            let state = self.writes.state();
            if state.is_poisoned() || state.is_closed() || self.signals.is_stopping() {
                break;
            }
            waiting_since.get_or_insert_with(Instant::now);
            std::thread::sleep(PACE_SLEEP);
        }
        if let Some(since) = waiting_since {
            self.counters.paced_micros.fetch_add(since.elapsed().as_micros() as u64, Relaxed);
        }
    }

    /// Under the `mem` write lock, after a write: freezes a full active MemTable if it can.
    fn freeze_if_full(&self, mem: &mut MemState) -> Room {
        let active_bytes = mem.active.memory_bytes();
        if active_bytes < self.memtable_bytes {
            match mem.imm {
                Some(_) => Room::Paced(active_bytes as f64 / self.memtable_bytes as f64),
                None => Room::Free,
            }
        } else if self.freeze(mem) {
            Room::Frozen
        } else {
            Room::Full
        }
    }

    /// Commit path step 1: the active MemTable becomes the immutable one, unless one exists or
    /// it is empty. Batches are applied in log order, each with its lsn recorded under `mem`,
    /// so every record up to the frozen lsn (`applied_lsn`) is in the new immutable MemTable or
    /// older; later records may be logged and not applied yet, and stay in the WAL.
    pub(super) fn freeze(&self, mem: &mut MemState) -> bool {
        if mem.imm.is_some() || mem.active.is_empty() {
            return false;
        }
        mem.imm = Some(Arc::new(std::mem::take(&mut mem.active)));
        mem.imm_lsn = mem.applied_lsn;
        mem.version += 1;
        true
    }

    /// Backpressure: both MemTables are full; wait until the committer drops the immutable one,
    /// then freeze. A write that got here is already applied and logged, so a closing engine
    /// ends the wait without an error; a poisoned one reports it.
    fn wait_for_room(&self) -> Result<()> {
        loop {
            let drops_seen = self.imm_drops.load(SeqCst);
            let room = self.freeze_if_full(&mut self.mem.write());
            match room {
                Room::Free | Room::Paced(_) => return Ok(()),
                Room::Frozen => {
                    self.signals.request();
                    return Ok(());
                }
                Room::Full => {}
            }
            let state = self.writes.state();
            if state.is_poisoned() {
                return self.check_usable();
            }
            if state.is_closed() || self.signals.is_stopping() {
                return Ok(());
            }
            self.wait_for_commit_progress(drops_seen);
        }
    }
}

/// Write path steps 4 and 5.
impl ApplyLogged for FlexDb {
    /// A run of committed batches, in log order, under one `mem` write lock; a full active
    /// MemTable is frozen at the batch that filled it (and the committer woken).
    fn apply_run(&self, run: &mut Vec<Logged>) -> Result<()> {
        let mut froze = false;
        {
            let mut mem = self.mem.write();
            for Logged { lsn, batch } in run.drain(..) {
                for op in batch.into_ops() {
                    mem.apply(op);
                }
                mem.applied_lsn = lsn;
                froze |= self.freeze_if_full(&mut mem) == Room::Frozen;
            }
        }
        if froze {
            self.signals.request();
        }
        Ok(())
    }

    /// The memory reservation, then pacing against a running commit or backpressure.
    fn after_apply(&self, _sizes: WriteSizes) -> Result<()> {
        let (room, mem_in_use) = {
            let mem = self.mem.read();
            (self.room_after_apply(&mem), Self::mem_in_use_bytes(&mem))
        };
        self.reserve_mem(mem_in_use);
        match room {
            Room::Free | Room::Frozen => Ok(()),
            Room::Paced(fill) => {
                self.pace(fill);
                Ok(())
            }
            Room::Full => self.wait_for_room(),
        }
    }
}

#[cfg(test)]
mod pace_tests {
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::Arc;
    use std::time::Duration;

    use strata_core::EngineConfig;
    use strata_io::MemStorage;

    use super::FlexDb;
    use crate::flexdb::FlexOptions;

    /// A writer whose MemTable is further ahead of the running commit than the slack waits until
    /// the commit's progress catches up, and only that long; with no commit running it never waits.
    #[test]
    fn a_writer_ahead_of_the_commit_waits_for_its_progress() {
        let config = EngineConfig::default();
        let db = FlexDb::open(Arc::new(MemStorage::new()), &config, &FlexOptions::default()).unwrap();
        db.pace(0.9); // no commit running
        assert_eq!(db.counters.paced_micros.load(Relaxed), 0);
        db.commit_done.store(0, Relaxed);
        db.commit_total.store(100, Relaxed);
        db.pace(0.2); // within the slack
        assert_eq!(db.counters.paced_micros.load(Relaxed), 0);
        let writer = {
            let db = db.clone();
            std::thread::spawn(move || db.pace(0.9))
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!writer.is_finished(), "a writer 90% full against a commit 0% done went on");
        db.commit_done.store(60, Relaxed); // 0.60 + 0.25 < 0.9: still waits
        std::thread::sleep(Duration::from_millis(10));
        assert!(!writer.is_finished(), "a writer 90% full against a commit 60% done went on");
        db.commit_done.store(70, Relaxed);
        writer.join().unwrap();
        // It waited (the time depends on when its thread started; 100 ms is generous).
        assert!(db.counters.paced_micros.load(Relaxed) > 0);
        db.commit_total.store(0, Relaxed);
        db.shutdown(false).unwrap();
    }
}
