//! Checkpoints (the recovery point: every record whose last write is older than the checkpoint's
//! replay lsn is in the pages, and its index says where) and the on-demand maintenance tasks.

use std::borrow::Cow;
use std::sync::atomic::Ordering::Relaxed;

use strata_core::{Durability, Key, Result};

use super::{Counters, MaintState, Store};
use crate::checkpoint_file::Checkpoint;
use crate::free_space::PageId;
use crate::key_projection::KeyMap;

/// Which dirty records a checkpoint writes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sweep {
    /// Every dirty record: the WAL is released up to the cut (close, `MaintenanceTask::Checkpoint`).
    All,
    /// Only records dirty since before the cut of the checkpoint before the previous one
    /// (automatic checkpoints): hot records rewritten all the time stay in the cache, most others
    /// leave it by eviction first (sweeping those older than the previous cut wrote a put load's
    /// pages back half again as often: 42k against 28k page writes for 300k records at the
    /// default budget), and the WAL kept is about three checkpoint distances.
    OlderThanCutBeforeLast,
}

impl Store {
    /// 1. Cut: under the cache lock every batch up to `cut_lsn` (the last applied one) is in the
    ///    cache — later ones may be logged and not applied yet, and stay in the WAL; make the WAL
    ///    durable up to it. 2. Write back the dirty records `sweep` names (batched). 3. Sync the
    ///    data file. 4. The replay lsn: the oldest lsn still dirty in the cache, at most
    ///    `cut_lsn + 1` — every record whose last write is older is in the synced pages.
    ///    5. Release the slots freed since the last checkpoint (merged with the free pages beside
    ///    them; a free run at the file's end moves the end down); store the checkpoint file
    ///    (index, replay lsn, that data end, the next generation) atomically.
    ///    6. Cut the data file at its end; the double-write area starts
    ///    the new generation; the forecaster's key map follows the index's key prefix and its
    ///    histograms are stored (`treeline-forecast`) when they changed.
    ///    7. Release the WAL before the replay lsn.
    pub(crate) fn checkpoint(&self, maint: &mut MaintState, sweep: Sweep) -> Result<()> {
        let cut_lsn = self.applied.lsn();
        if cut_lsn > 0 {
            self.writes.wal().commit(cut_lsn, Durability::Sync)?;
        }
        self.wal_bytes_since_checkpoint.store(0, Relaxed);
        let below_lsn = match sweep {
            Sweep::All => u64::MAX,
            Sweep::OlderThanCutBeforeLast => maint.cut_before_last_lsn + 1,
        };
        self.write_back_older_than(maint, below_lsn)?;
        self.data.sync()?;
        let replay_from_lsn = self.replay_from_lsn(cut_lsn);
        // Slots freed since the last checkpoint are in no index from this one on: release them
        // now (merged with their free neighbours; a free run at the file's end moves the end
        // down), so the end this checkpoint stores is the one after them. Nothing allocates
        // before it is stored (`maint` is held; a failure poisons the store).
        let mut released: Vec<(PageId, u64)> = Vec::new();
        for slot in maint.freed_since_checkpoint.drain(..) {
            maint.free.release(slot)?;
            released.push((slot.first_page, u64::from(slot.pages)));
        }
        for (first_page, pages) in maint.blob_runs_freed_since_checkpoint.drain(..) {
            maint.free.release_run(first_page, pages)?;
            released.push((first_page, pages));
        }
        let generation = maint.generation + 1;
        let data_prefix = {
            // Stored from the live tables under the index's read lock: only the holder of
            // `maint` (this checkpoint) changes the index, and readers share the lock.
            let index = self.index.read();
            let checkpoint = Checkpoint {
                generation,
                wal_replay_from_lsn: replay_from_lsn,
                data_end_page: maint.free.end(),
                next_production_id: maint.next_production_id,
                page_size: self.page_size(),
                index: Cow::Borrowed(&index),
                blobs: Cow::Borrowed(&maint.blobs),
            };
            checkpoint.store(self.storage.as_ref())?;
            index.data_prefix().to_vec()
        };
        maint.generation = generation;
        maint.checkpoint_production_id = maint.next_production_id;
        maint.cut_before_last_lsn = maint.last_cut_lsn;
        maint.last_cut_lsn = cut_lsn;
        // The file still holds every page the previous checkpoint references; from here on the
        // one just stored is the recovery point, and no page at or past its end is in its index.
        self.data.give_back_pages_from(maint.free.end())?;
        let previous = std::mem::replace(&mut maint.released_at_last_checkpoint, released);
        let mut still_free: Vec<(PageId, u64)> =
            previous.into_iter().filter(|&(first, pages)| maint.free.is_free(first, pages)).collect();
        if sweep == Sweep::All {
            // A close or an asked-for checkpoint: no write may follow soon to reuse them.
            still_free.append(&mut maint.released_at_last_checkpoint);
        }
        self.data.give_back_free_runs(&still_free, maint.free.end())?;
        self.follow_data_size(maint.free.end())?;
        maint.double_write.reset(generation)?;
        maint.imaged_since_checkpoint.clear();
        self.store_forecasts(maint, &data_prefix)?;
        self.double_write_bytes.store(0, Relaxed);
        self.writes.wal().truncate_before(replay_from_lsn)?;
        Counters::add(&self.counters.checkpoints, 1);
        Ok(())
    }

    /// Where a checkpoint cut at `cut_lsn` (every batch up to it applied to the cache) replays
    /// the WAL from: the oldest lsn still dirty in the cache, at most `cut_lsn + 1`. Every record
    /// whose last write is older is in the pages; later batches may be logged and not applied.
    pub(super) fn replay_from_lsn(&self, cut_lsn: u64) -> u64 {
        self.cache.min_dirty_lsn().map_or(cut_lsn + 1, |m| m.min(cut_lsn + 1))
    }

    /// The forecaster's key map follows the index's key prefix; its histograms go to
    /// `treeline-forecast` when they changed since last stored.
    fn store_forecasts(&self, maint: &mut MaintState, data_prefix: &[u8]) -> Result<()> {
        let Some(forecaster) = maint.forecaster.as_mut() else { return Ok(()) };
        forecaster.set_key_map(KeyMap::new(data_prefix));
        let progress = forecaster.progress();
        if maint.forecast_stored != Some(progress) {
            forecaster.state().store(self.storage.as_ref())?;
            maint.forecast_stored = Some(progress);
        }
        Ok(())
    }

    /// Re-derives the checkpoint distance from the data file's `data_pages`, and the WAL's
    /// segment size from it (`options::wal_segment_bytes_for_distance`).
    pub(crate) fn follow_data_size(&self, data_pages: u64) -> Result<()> {
        let data_bytes = data_pages * self.page_size().bytes() as u64;
        let distance = self.options.checkpoint_wal_bytes(&self.config, data_bytes);
        self.checkpoint_wal_bytes.store(distance, Relaxed);
        match crate::options::wal_segment_bytes_for_distance(&self.config, distance) {
            Some(segment_bytes) => self.writes.wal().set_segment_bytes(segment_bytes),
            None => Ok(()),
        }
    }

    /// Whether the WAL grew by `checkpoint_wal_bytes` since the last checkpoint. (The
    /// double-write area keeps within its limit by rewinding: `write_batch`.)
    pub(crate) fn checkpoint_due(&self) -> bool {
        self.wal_bytes_since_checkpoint.load(Relaxed) >= self.checkpoint_wal_bytes.load(Relaxed)
    }

    /// An automatic checkpoint when one is due (the write-back worker's step).
    pub(crate) fn checkpoint_if_due(&self) -> Result<()> {
        if !self.checkpoint_due() {
            return Ok(());
        }
        let mut maint = self.maint.lock();
        self.maintain(|| self.checkpoint(&mut maint, Sweep::OlderThanCutBeforeLast))
    }

    /// `MaintenanceTask::Commit`: every dirty record written back (the WAL is kept).
    pub fn commit_dirty_records(&self) -> Result<()> {
        self.check_usable()?;
        let mut maint = self.maint.lock();
        self.maintain(|| self.write_back_older_than(&mut maint, u64::MAX))
    }

    /// `MaintenanceTask::Checkpoint`.
    pub fn checkpoint_now(&self) -> Result<()> {
        self.check_usable()?;
        let mut maint = self.maint.lock();
        self.maintain(|| self.checkpoint(&mut maint, Sweep::All))
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
                    self.reorganize(&mut maint, &lower)?;
                }
            }
            Ok(())
        })
    }
}
