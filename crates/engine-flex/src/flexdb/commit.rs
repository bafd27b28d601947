//! FlexDB's commit path (steps numbered in docs/ARCHITECTURE.md, section `flex`): the immutable
//! MemTable into the table file in bounded steps, then the commit record, then the WAL release.
//! Normally run by the committer thread (`committer.rs`); `commit_now` runs it inline.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::Instant;

use strata_core::{Error, Result};

use super::db::FlexDb;
use super::meta::{self, Meta};
use super::table::Entry;
use crate::io_kinds::IoCause;

impl FlexDb {
    /// Commits the MemTables into the table file now, in the caller's thread (normally the
    /// background committer does it when the MemTable is full).
    pub(crate) fn commit(&self) -> Result<()> {
        self.check_usable()?;
        self.commit_now()
    }

    /// Commits whatever is in the MemTables, in the caller's thread: the immutable one first,
    /// then the active one.
    pub(crate) fn commit_now(&self) -> Result<()> {
        loop {
            self.commit_frozen()?;
            let mut mem = self.mem.write();
            if mem.imm.is_some() {
                continue; // a writer froze one meanwhile: commit that first
            }
            if !self.freeze(&mut mem) {
                return Ok(()); // nothing to commit
            }
            drop(mem);
            return self.commit_frozen();
        }
    }

    /// Commit path steps 2–7 for the immutable MemTable, if there is one: make the
    /// WAL durable up to it, apply it to the table file in bounded steps, sync the table file,
    /// record the commit, drop the MemTable, release the WAL. Stops between steps (without an
    /// error that poisons) when the engine is being dropped.
    pub(crate) fn commit_frozen(&self) -> Result<()> {
        let _one_committer = self.commit_lock.lock();
        self.check_usable()?;
        let _committing = IoCause::Commit.enter();
        let started = Instant::now();
        let (imm, frozen_lsn) = {
            let mem = self.mem.read();
            match &mem.imm {
                Some(imm) => (imm.clone(), mem.imm_lsn),
                None => return Ok(()),
            }
        };
        // Pacing starts with the WAL sync: writers that fill the active MemTable faster than the
        // sync returns would otherwise find both MemTables full before the first step.
        self.commit_done.store(0, Relaxed);
        self.commit_total.store(imm.len().max(1) as u64, Relaxed);
        let applied = self.writes.wal().sync().map(|_| ()).map_err(|e| self.poison(e)).and_then(|()| {
            let entries: Vec<Entry<'_>> = imm.iter().collect();
            self.apply_steps(&entries)
        });
        // Also on errors: pacing must not wait for a commit that stopped.
        self.commit_total.store(0, Relaxed);
        applied?;
        // The mark is taken after the sync, with only this committer able to change the table
        // file (`commit_lock`): it names log bytes that are durable now. Log blocks written after
        // it (the next commit's steps) are covered by the WAL until the next record names them,
        // except GC relocations: see docs/format/flexdb.md, "What the log mark detects".
        let table_log = {
            let table = self.table.read();
            table.sync().map_err(|e| self.poison(e))?;
            table.synced_log()
        };
        self.check_aborting()?;
        let meta = Meta { table_kind: self.table_kind.code(), committed_lsn: frozen_lsn, table_log };
        meta::store(self.storage.as_ref(), &meta).map_err(|e| self.poison(e))?;
        self.check_aborting()?;
        {
            let mut mem = self.mem.write();
            mem.imm = None;
            mem.version += 1;
            self.imm_drops.fetch_add(1, SeqCst);
        }
        self.signals.notify_progress();
        self.writes.wal().truncate_before(frozen_lsn + 1).map_err(|e| self.poison(e))?;
        self.resize_cache();
        self.counters.commits.fetch_add(1, Relaxed);
        self.counters.committed_entries.fetch_add(imm.len() as u64, Relaxed);
        self.counters.last_commit_micros.store(started.elapsed().as_micros() as u64, Relaxed);
        Ok(())
    }

    /// Commit path step 3: the immutable MemTable's entries into the table, a step at a time.
    fn apply_steps(&self, entries: &[Entry<'_>]) -> Result<()> {
        for step in entries.chunks(self.step_entries) {
            self.check_aborting()?;
            // Readers keep going while the table file collects garbage ahead of the step's writes
            // and while the step's intervals are read from it.
            // Split what readers found over the limits first: a split after the prefetch would
            // make the step read those intervals again under the write lock.
            if self.table.read().has_oversized() {
                let dropped = self.table.write().split_oversized();
                drop(dropped); // after the write lock
            }
            let prefetched = {
                let table = self.table.read();
                table.maintain_file().map_err(|e| self.poison(e))?;
                table.prefetch(step).map_err(|e| self.poison(e))?
            };
            self.table.write().apply_sorted(step, &prefetched).map_err(|e| self.poison(e))?;
            self.commit_done.fetch_add(step.len() as u64, Relaxed);
        }
        self.check_aborting()
    }

    /// The engine is being dropped: a running commit stops before its next step or file change.
    fn check_aborting(&self) -> Result<()> {
        if self.aborting.load(SeqCst) {
            return Err(Error::Closed);
        }
        Ok(())
    }
}
