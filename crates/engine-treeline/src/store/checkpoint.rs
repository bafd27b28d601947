//! Checkpoints (the recovery point: every WAL record below its lsn is in the pages, and its index
//! says where) and the on-demand maintenance tasks.

use std::sync::atomic::Ordering::Relaxed;

use strata_core::{Durability, Key, Result};

use super::{Counters, MaintState, Store};
use crate::checkpoint_file::Checkpoint;

impl Store {
    /// 1. Cut: under the cache lock every batch up to `cut_lsn` is in the cache; make the WAL
    ///    durable up to it. 2. Write back every dirty record (one sweep). 3. Sync the data file.
    /// 4. Store the checkpoint file (index, `cut_lsn + 1`, the next generation) atomically.
    /// 5. Slots freed since the last checkpoint become reusable; the double-write area starts
    ///    the new generation. 6. Release the WAL before `cut_lsn + 1`.
    pub fn checkpoint(&self, maint: &mut MaintState) -> Result<()> {
        let cut_lsn = {
            let _cache = self.cache.lock();
            self.wal.last_lsn()
        };
        if cut_lsn > 0 {
            self.wal.commit(cut_lsn, Durability::Sync)?;
        }
        self.wal_bytes_since_checkpoint.store(0, Relaxed);
        self.write_back_all(maint)?;
        self.data.sync()?;
        let generation = maint.generation + 1;
        let checkpoint = Checkpoint {
            generation,
            wal_replay_from_lsn: cut_lsn + 1,
            data_end_page: maint.free.end(),
            next_production_id: maint.next_production_id,
            page_size: self.page_size,
            index: self.index.read().clone(),
        };
        checkpoint.store(self.storage.as_ref())?;
        maint.generation = generation;
        for slot in maint.freed_since_checkpoint.drain(..) {
            maint.free.release(slot)?;
        }
        maint.double_write.reset(generation)?;
        self.double_write_bytes.store(0, Relaxed);
        self.wal.truncate_before(cut_lsn + 1)?;
        Counters::add(&self.counters.checkpoints, 1);
        Ok(())
    }

    /// `MaintenanceTask::Commit`: every dirty record written back (the WAL is kept).
    pub fn commit_dirty_records(&self) -> Result<()> {
        self.check_usable()?;
        let mut maint = self.maint.lock();
        self.maintain(|| self.write_back_all(&mut maint))
    }

    /// `MaintenanceTask::Checkpoint`.
    pub fn checkpoint_now(&self) -> Result<()> {
        self.check_usable()?;
        let mut maint = self.maint.lock();
        self.maintain(|| self.checkpoint(&mut maint))
    }

    /// `MaintenanceTask::Compact`: reorganizes every segment that has an overflow page (each
    /// reorganization also takes in neighbours with overflow pages, so later ones may be gone).
    pub fn compact(&self) -> Result<()> {
        self.check_usable()?;
        let mut maint = self.maint.lock();
        let with_overflow: Vec<Key> =
            self.index.read().iter().filter(|(_, e)| e.has_overflow()).map(|(k, _)| k.clone()).collect();
        self.maintain(|| {
            for lower in with_overflow {
                let still = self
                    .index
                    .read()
                    .segment_of(&lower)
                    .is_some_and(|(l, e, _)| *l == lower && e.has_overflow());
                if still {
                    self.reorganize(&mut maint, &lower, &[])?;
                }
            }
            Ok(())
        })
    }
}
