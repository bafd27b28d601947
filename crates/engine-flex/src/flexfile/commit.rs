//! Making a FlexFile durable in the order of the paper's Figure 9: data fsync → log block →
//! log fsync; and, when the log is long, the copy-on-write tree commit (checkpoint): nodes →
//! fsync → header slot → fsync → log reset → fsync.
//!
//! Both commits run in three steps, so that readers wait only for short critical sections: take
//! what to write under the state write lock, write and fsync it with only the writer lock held,
//! then publish the result under the state write lock again. The writer lock is held through
//! all three steps; it orders commits and mutations, and every write to the log file happens
//! with it held (`sync_unblocking`, `close`, `mutate` after an operation that filled the log
//! buffer, and `commit_locked`, which runs inside a mutation's GC).

use std::time::Instant;

use strata_core::Result;

use super::file::{record_write_hold, FlexFile, State};
use super::format::{self, LogOp, LOG_HEADER_BYTES};
use super::space;
use crate::flextree::page::{self, TreeHeader, PAGE_BYTES};
use crate::flextree::persist::DirtyPages;

/// A log commit in the middle of a mutation (GC that needs its emptied segments back) only marks
/// a due tree commit: the next `sync`, `maintain` or full log buffer runs it without blocking
/// readers. Only if none comes before the log grows to this many times `log_max_bytes` does the
/// mutation commit the tree under the state lock, so the log (and the replay at open) stays
/// bounded.
const LOCKED_CHECKPOINT_LOG_FACTOR: u64 = 4;

/// A log commit between its locked preparation and its unlocked I/O.
pub(crate) struct PreparedCommit {
    block: Vec<u8>,
    block_at: u64,
    /// Segments emptied before this commit; free once it is durable.
    released: Vec<u64>,
    segment_bytes: u64,
}

/// A tree commit between its locked preparation and its unlocked I/O.
pub(crate) struct PreparedCheckpoint {
    /// Names the new version, its root page and page count.
    header: TreeHeader,
    dirty: DirtyPages,
    /// Pages of the previous version that the new one does not use. The previous version stays
    /// the recovery point until the new header is durable, so they are free only after that.
    freed: Vec<u64>,
    /// `log_end` when the snapshot was taken (no log commit may run until it is published).
    log_end: u64,
}

impl FlexFile {
    /// Hands buffered data to the data file and takes the log buffer (under the state lock).
    fn prepare_commit(&self, st: &mut State) -> Result<Option<PreparedCommit>> {
        if st.log_buf.is_empty() {
            return Ok(None);
        }
        st.space.flush_open(&*self.data)?;
        let ops: Vec<LogOp> = std::mem::take(&mut st.log_buf);
        // Each block is written twice in one write: a bit flip in a synced block leaves the
        // other copy intact, so damage to the last block is never mistaken for a torn tail.
        let mut block = format::encode_block(&ops, st.tree_version, st.log_seq);
        block.extend_from_within(..);
        Ok(Some(PreparedCommit {
            block,
            block_at: st.log_end,
            released: std::mem::take(&mut st.space.pending),
            segment_bytes: st.space.segment_bytes,
        }))
    }

    /// The I/O of a log commit; needs no state lock (the writer lock keeps commits in order).
    fn write_commit(&self, commit: &PreparedCommit) -> Result<()> {
        self.data.sync()?;
        self.log_file.write_at(commit.block_at, &commit.block)?;
        self.log_file.sync()?;
        // The segments this commit frees hold only dead bytes, which no durable state maps now:
        // they go back to the file system until a later write reuses the segment. Not yet in
        // `space.free` (`finish_commit`), so nothing writes them meanwhile.
        space::punch_segments(&*self.data, commit.released.iter().copied(), commit.segment_bytes)
    }

    fn finish_commit(&self, st: &mut State, commit: PreparedCommit) {
        st.log_end = commit.block_at + commit.block.len() as u64;
        st.log_seq += 1;
        st.stats.log_commits += 1;
        st.space.release(commit.released);
        if st.log_end > self.opts.log_max_bytes {
            st.checkpoint_due = true;
        }
    }

    fn poison_on_error<T>(st: &mut State, result: Result<T>) -> Result<T> {
        if let Err(err) = &result {
            st.poison.record(err);
        }
        result
    }

    /// Runs `f` with the state write-locked, counting the hold as readers' waiting time.
    pub(super) fn with_state_locked<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut st = self.state.write();
        let locked = Instant::now();
        let out = f(&mut st);
        record_write_hold(&mut st.stats, locked);
        out
    }

    /// A whole log commit with the state lock held (inside a mutation's GC). A due tree commit is
    /// left for later (see `LOCKED_CHECKPOINT_LOG_FACTOR`).
    pub(crate) fn commit_locked(&self, st: &mut State) -> Result<()> {
        debug_assert!(self.writer.is_locked(), "log commit without the writer lock");
        Self::check_usable(st)?;
        let result = (|| {
            let Some(commit) = self.prepare_commit(st)? else { return Ok(()) };
            self.write_commit(&commit)?;
            self.finish_commit(st, commit);
            if st.log_end > self.opts.log_max_bytes.saturating_mul(LOCKED_CHECKPOINT_LOG_FACTOR) {
                self.checkpoint_locked(st)?;
            }
            Ok(())
        })();
        Self::poison_on_error(st, result)
    }

    /// A log commit, then a tree commit if one is due (`force`: whenever the log holds anything,
    /// as `close` wants, so the next open replays nothing). Readers are blocked only while the
    /// buffers are handed over and the results published, not during writes and fsyncs.
    /// Requires the writer lock (`sync_unblocking` takes it; `mutate` holds it).
    pub(crate) fn commit_log_then_tree(&self, force: bool) -> Result<()> {
        self.commit_log_unblocking()?;
        self.checkpoint_unblocking(force)
    }

    /// `sync` (`force` = false) and `close` (`force` = true): `commit_log_then_tree` under the
    /// writer lock.
    pub(crate) fn sync_unblocking(&self, force: bool) -> Result<()> {
        let _w = self.writer.lock();
        self.commit_log_then_tree(force)
    }

    /// The three steps both commits share (module doc): `prepare` under the state lock (`None`:
    /// nothing to do), `io` with only the writer lock held, `finish` under the state lock. A
    /// failure in any step poisons the file.
    fn in_three_steps<P>(
        &self,
        prepare: impl FnOnce(&mut State) -> Result<Option<P>>,
        io: impl FnOnce(&P) -> Result<()>,
        finish: impl FnOnce(&mut State, P),
    ) -> Result<()> {
        debug_assert!(self.writer.is_locked(), "commit without the writer lock");
        let prepared = self.with_state_locked(|st| {
            Self::check_usable(st)?;
            let prepared = prepare(st);
            Self::poison_on_error(st, prepared)
        })?;
        let Some(prepared) = prepared else { return Ok(()) };
        let written = io(&prepared);
        self.with_state_locked(|st| {
            Self::poison_on_error(st, written)?;
            finish(st, prepared);
            Ok(())
        })
    }

    /// A log commit in three steps. Requires the writer lock and a state that is not in the
    /// middle of an operation.
    fn commit_log_unblocking(&self) -> Result<()> {
        self.in_three_steps(
            |st| self.prepare_commit(st),
            |commit| self.write_commit(commit),
            |st, commit| self.finish_commit(st, commit),
        )
    }

    /// A tree commit in three steps, if one is due (`force`: if the log holds any block).
    /// Requires the writer lock: no mutation runs and no log commit writes the log between the
    /// steps (it would use a `log_end` the log reset is about to invalidate).
    ///
    /// Even if a mutation did change the tree between the snapshot and the publication, the
    /// result would stay correct: its log entries are not in the snapshot, wait in `log_buf`,
    /// and are written by the next log commit, which runs after step 3 and so tags its block
    /// with the new version and places it right after the reset log header; a node it changed
    /// gives the page the snapshot assigned to it to `tree.freed_pages`, which the *next* tree
    /// commit frees once its own header is durable, and is encoded again by that commit.
    fn checkpoint_unblocking(&self, force: bool) -> Result<()> {
        let started = Instant::now();
        self.in_three_steps(
            |st| {
                let due = st.checkpoint_due || (force && st.log_end > LOG_HEADER_BYTES as u64);
                // The snapshot must hold exactly the logged operations: after the log commit
                // that precedes this (with the writer lock held since), the buffer is empty.
                debug_assert!(st.log_buf.is_empty(), "tree commit with unlogged operations");
                if !due || !st.log_buf.is_empty() {
                    return Ok(None);
                }
                self.prepare_checkpoint(st).map(Some)
            },
            |checkpoint| self.write_checkpoint(checkpoint),
            |st, checkpoint| {
                self.finish_checkpoint(st, checkpoint);
                st.stats.tree_commit_micros += started.elapsed().as_micros() as u64;
            },
        )
    }

    /// A whole tree commit with the state lock held (only when the log passed its hard limit
    /// inside a mutation). Requires an empty log buffer (call after a log commit).
    fn checkpoint_locked(&self, st: &mut State) -> Result<()> {
        let started = Instant::now();
        let result = (|| {
            let checkpoint = self.prepare_checkpoint(st)?;
            self.write_checkpoint(&checkpoint)?;
            self.finish_checkpoint(st, checkpoint);
            Ok(())
        })();
        st.stats.tree_commit_micros += started.elapsed().as_micros() as u64;
        Self::poison_on_error(st, result)
    }

    /// Step 1 of a tree commit (state lock held): encodes every node changed since the last
    /// tree commit into page images, on pages the committed version does not use.
    fn prepare_checkpoint(&self, st: &mut State) -> Result<PreparedCheckpoint> {
        let version = st.tree_version + 1;
        let State { tree, free_pages, page_count, .. } = st;
        // `free_pages` never holds a page of the committed version (those freed since wait in
        // the tree, or in a `PreparedCheckpoint`, until the next header is durable), so the
        // copy-on-write never overwrites a page a crash could fall back to.
        free_pages.sort_unstable_by(|a, b| b.cmp(a));
        let mut alloc = || {
            free_pages.pop().unwrap_or_else(|| {
                *page_count += 1;
                *page_count - 1
            })
        };
        let dirty = tree.encode_dirty(version, &mut alloc)?;
        let freed = tree.take_freed_pages();
        let header = TreeHeader {
            version,
            root_page: dirty.root_page,
            page_count: st.page_count,
            logical_len: st.tree.len(),
            segment_bytes: st.space.segment_bytes,
        };
        Ok(PreparedCheckpoint { header, dirty, freed, log_end: st.log_end })
    }

    /// Step 2 of a tree commit (no state lock). A crash before the header's fsync recovers the
    /// previous version and replays the whole log; after it, the new version, which holds every
    /// logged operation, and a log that either still names the previous version (ignored and
    /// reset at open) or is already reset.
    fn write_checkpoint(&self, checkpoint: &PreparedCheckpoint) -> Result<()> {
        for (page_no, bytes) in &checkpoint.dirty.pages {
            self.tree_file.write_at(page_no * PAGE_BYTES as u64, bytes)?;
        }
        self.tree_file.sync()?;
        let version = checkpoint.header.version;
        self.tree_file
            .write_at((version % 2) * PAGE_BYTES as u64, &page::encode_header(&checkpoint.header))?;
        self.tree_file.sync()?;
        self.log_file.write_at(0, &format::encode_log_header(version))?;
        self.log_file.set_len(LOG_HEADER_BYTES as u64)?;
        self.log_file.sync()
    }

    /// Step 3 of a tree commit (state lock held): the new version is durable and the log reset.
    fn finish_checkpoint(&self, st: &mut State, checkpoint: PreparedCheckpoint) {
        debug_assert_eq!(st.log_end, checkpoint.log_end, "log commit during a tree commit");
        st.tree_version = checkpoint.header.version;
        st.free_pages.extend(checkpoint.freed);
        st.log_end = LOG_HEADER_BYTES as u64;
        st.log_seq = 0;
        st.checkpoint_due = false;
        st.stats.tree_commits += 1;
    }
}
