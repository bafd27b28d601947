//! Write path steps 5–7 (docs/ARCHITECTURE.md, "turtle"): a finalized MemTable enters the tree
//! as leaf-sized batches in key order, then a checkpoint makes the tree durable and the WAL
//! behind it goes. Runs on the engine's worker thread, and in the caller for a requested
//! checkpoint; `apply_lock` keeps one at a time.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use std::panic::{catch_unwind, AssertUnwindSafe};

use strata_core::{Error, Key, Result};
use strata_kit::sorted_run::Entry;

use crate::checkpoint::Checkpoint;
use crate::engine::Inner;
use crate::tree::{entry_bytes, SpillTo, Tree, TreeMemory};
use strata_kit::tables::Frozen;

/// How far `apply_table` went.
enum Applied {
    Whole,
    StoppedByClose,
}

impl Inner {
    /// The worker's step: every finalized table, oldest first, applied and checkpointed.
    /// Stops between tables once a close asked it to (the rest stays in the WAL for the next
    /// open).
    pub(crate) fn apply_finalized(&self) -> Result<()> {
        loop {
            if self.signals.stop_requested() {
                return Ok(());
            }
            let Some(frozen) = self.tables.read().finalized.front().cloned() else {
                return self.settle_while_due(); // step 8, settle.rs
            };
            self.apply_and_checkpoint(&frozen)?;
        }
    }

    /// Finalizes the active table (when it holds anything) and applies every finalized one:
    /// afterwards the tree holds every write applied before the call, and the WAL is truncated.
    /// A close meanwhile stops it (`Error::Closed`).
    pub(crate) fn checkpoint_now(&self) -> Result<()> {
        {
            let mut tables = self.tables.write();
            self.finalize_active(&mut tables);
        }
        self.apply_finalized()?;
        self.writes.check_usable()
    }

    /// Steps 5–7 for one finalized table; it leaves the finalized list once the checkpoint
    /// holding it is durable.
    fn apply_and_checkpoint(&self, frozen: &Arc<Frozen>) -> Result<()> {
        let _one_at_a_time = self.apply_lock.lock();
        // A close that took the lock first has closed the WAL and may have let the directory
        // go: nothing more may be written.
        if self.writes.state().is_closed()
            || !self.tables.read().finalized.front().is_some_and(|f| Arc::ptr_eq(f, frozen))
        {
            return Ok(()); // closed, or another caller did it while this one waited
        }
        self.writes.state().check_not_poisoned()?;
        let lsn = match self.apply_table(frozen) {
            Ok(Applied::Whole) => self.write_checkpoint(frozen.last_lsn),
            // The tree in memory goes with the handle; the table stays in the WAL.
            Ok(Applied::StoppedByClose) => return Ok(()),
            Err(e) => Err(e),
        };
        let lsn = lsn.map_err(|e| self.writes.poison(e))?;
        {
            // Under the tables' lock: an rmw that finds the table gone sees the new version.
            let mut tables = self.tables.write();
            tables.remove_oldest_finalized();
            self.tree_version.fetch_add(1, Relaxed);
        }
        self.signals.notify_progress();
        self.resize_block_cache();
        // The tree holds every record up to `lsn` durably.
        self.writes.wal().truncate_before(lsn + 1).map_err(|e| self.writes.poison(e))?;
        Ok(())
    }

    /// Step 5: the table's entries (tombstones as deletes) in batches of about a leaf. A close
    /// stops it between batches: what the tree took of the table is in memory only (and in
    /// spilled extents no record refers to), so the next open replays the whole table from the
    /// WAL onto the last checkpoint, and `close` does not wait for a table of up to χ.
    /// Only the newest version of a key goes: a snapshot that reads an older one holds the
    /// table and the tree it started with.
    fn apply_table(&self, frozen: &Frozen) -> Result<Applied> {
        let leaf_bytes = self.tree_config.leaf_bytes;
        let mut batch: Vec<(Key, Entry)> = Vec::new();
        let mut batch_bytes = 0u64;
        for (key, value) in frozen.entries.newest() {
            let entry = value.map_or_else(Entry::delete, |v| Entry::put(v.to_vec()));
            batch_bytes += entry_bytes(key, &entry);
            batch.push((key.to_vec(), entry));
            if batch_bytes >= leaf_bytes {
                self.apply_batch(std::mem::take(&mut batch))?;
                batch_bytes = 0;
                if self.writes.state().is_closed() {
                    return Ok(Applied::StoppedByClose);
                }
                self.spill_if_over()?;
            }
        }
        if !batch.is_empty() {
            self.apply_batch(batch)?;
        }
        Ok(Applied::Whole)
    }

    /// Step 6a: once the new runs (merged levels, rewritten leaves) hold more memory than
    /// their room (`new_run_room_bytes`: χ, or less when the tables leave less), they are
    /// written into free extents and the tree reads them from there — a checkpoint's write and
    /// install without its sync and record. The durable state stays the last
    /// checkpoint's: a crash leaves the written extents unreferenced (free at the next open),
    /// and what the tree lets go of waits for the next record, as at a checkpoint. Within a
    /// batch, a level merge writes its segments as it cuts them once they pass the room left
    /// (`SpillTo`, in `apply_batch`). So a table's apply holds little more than that room of
    /// new runs besides the tables, whatever it rewrites.
    pub(crate) fn spill_if_over(&self) -> Result<()> {
        let memory = self.tree.read().memory();
        if memory.new_run_bytes <= self.new_run_room_bytes(memory) {
            return Ok(());
        }
        let written = self.tree.read().write_checkpoint(&self.pages)?;
        self.tree.write().install_checkpoint(written);
        self.counters.spills.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Memory the tree's new runs may hold before they are spilled: χ, or what the budget
    /// leaves beside the tables, the tree's indexes and filters and the block cache's floor
    /// (an eighth) when that is less — at a load's end three tables of χ = budget/4 hold three
    /// quarters of it — but never under two leaves' worth (a batch's merges need room).
    /// `tree` is the tree's memory as measured by the caller.
    pub(crate) fn new_run_room_bytes(&self, tree: TreeMemory) -> u64 {
        let tables = self.tables.read().memory_bytes();
        let fixed = tree.total_bytes.saturating_sub(tree.new_run_bytes);
        let budget = self.memory_budget_bytes;
        let left = budget.saturating_sub(tables + fixed + budget / 8);
        let distance = self.checkpoint_distance_bytes.load(Relaxed);
        distance.min(left).max(2 * self.tree_config.leaf_bytes)
    }

    /// One batch into a copy of the tree (its nodes shared until the batch changes them), with
    /// no lock held while it reads and merges runs; the copy then replaces the tree under its
    /// write lock, so readers wait for a swap, not for a batch's I/O. The worker, under
    /// `apply_lock`, is the tree's only writer: nothing changes the tree between the copy and
    /// the swap. A failure (or a panic) leaves the tree whole but the table half-applied: the
    /// engine is poisoned (the table stays in the WAL for the next open).
    fn apply_batch(&self, batch: Vec<(Key, Entry)>) -> Result<()> {
        self.change_tree("applying a batch to the tree", |tree, spill| {
            tree.apply_batch_spilling(batch, Some(spill)).map(|()| true)
        })?;
        self.counters.batches_applied.fetch_add(1, Relaxed);
        Ok(())
    }

    /// `change` run on a copy of the tree, given where its merges spill (the room for the new
    /// runs they keep in memory, step 6a), and the copy swapped in when it says it changed
    /// anything; a failure or panic (while `doing` it) poisons the engine and leaves the tree
    /// as it was. The caller holds `apply_lock`.
    pub(crate) fn change_tree(
        &self,
        doing: &str,
        change: impl FnOnce(&mut Tree, SpillTo) -> Result<bool>,
    ) -> Result<bool> {
        let mut next = self.tree.read().clone();
        let memory = next.memory();
        let room = self.new_run_room_bytes(memory).saturating_sub(memory.new_run_bytes);
        let spill = SpillTo { pages: self.pages.clone(), after_bytes: room };
        let changed = catch_unwind(AssertUnwindSafe(|| change(&mut next, spill)))
            .unwrap_or_else(|_| Err(Error::Poisoned(format!("a panic while {doing}"))))
            .map_err(|e| self.writes.poison(e))?;
        if changed {
            let replaced = std::mem::replace(&mut *self.tree.write(), next);
            // Dropped with no lock held: runs and node pages only it used are retired here, and
            // no reader can still be reading them (none holds the old tree).
            drop(replaced);
        }
        Ok(changed)
    }

    /// Step 7: new runs and every node page written under the tree's read lock (readers go on;
    /// the worker, which holds `apply_lock`, is the tree's only writer), then installed under
    /// its write lock (no I/O); the pages file synced, the record replaced; then what the old
    /// checkpoint alone used is free. Returns the record's lsn.
    pub(crate) fn write_checkpoint(&self, wal_lsn: u64) -> Result<u64> {
        let written = self.tree.read().write_checkpoint(&self.pages)?;
        let root = self.tree.write().install_checkpoint(written);
        let mark = self.pages.retire_mark();
        self.pages.file().sync()?;
        Checkpoint { wal_lsn, root, tree: self.tree_config }.store(self.storage.as_ref())?;
        let freed = self.pages.free_retired_up_to(mark)?;
        self.pages.trim_file()?;
        self.counters.checkpoints.fetch_add(1, Relaxed);
        self.checkpoint_lsn.store(wal_lsn, Relaxed);
        self.counters.bytes_freed.fetch_add(freed, Relaxed);
        Ok(wal_lsn)
    }
}
