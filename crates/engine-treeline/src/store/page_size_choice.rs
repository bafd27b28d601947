//! A new store's page size, chosen from its first records when the options leave it to the
//! store (`TreelineOptions::page_size` is `auto`, the default).

use strata_core::Result;

use super::{MaintState, Store};
use crate::checkpoint_file::Checkpoint;
use crate::double_write::DoubleWrite;
use crate::free_space::RESERVED_PAGES;
use crate::page::PageSize;

/// Cached records whose sizes choose a new store's page size at its first write-back.
pub(super) const PAGE_SIZE_SAMPLE_RECORDS: usize = 4096;

impl Store {
    /// Before a new store writes its first page: with the page size left to the store, the one
    /// for records of `record_bytes` (key + value bytes each; `PageSize::for_record_bytes`),
    /// never smaller than the current one, under which the keys and values in the WAL were
    /// accepted. "New" means no page was ever allocated since the last checkpoint, and that
    /// checkpoint references none. A change is made in three steps:
    /// 1. a checkpoint naming the new size (the index still empty; the replay lsn the oldest
    ///    dirty one, as a checkpoint's, so the WAL still replays every record);
    /// 2. the data file's header for it, synced, after which pages and key limits use it;
    /// 3. a double-write area for pages of that size.
    ///
    /// A crash after step 1 leaves a header older than the checkpoint, which open writes again
    /// (`data_file_of_an_empty_store`): no checkpoint references a page of it.
    pub(super) fn settle_page_size(
        &self,
        maint: &mut MaintState,
        mut record_bytes: Vec<usize>,
    ) -> Result<()> {
        let new_store = maint.free.end() == RESERVED_PAGES && self.index.read().is_empty();
        if self.options.page_size.is_some() || !new_store {
            return Ok(());
        }
        let current = self.page_size();
        let chosen = PageSize::for_record_bytes(&mut record_bytes).max(current);
        if chosen == current {
            return Ok(());
        }
        let generation = maint.generation + 1;
        let replay_from_lsn = self.replay_from_lsn(self.applied.lsn());
        Checkpoint::of_empty_store(generation, replay_from_lsn, maint.next_production_id, chosen)
            .store(self.storage.as_ref())?;
        maint.generation = generation;
        self.data.reformat(chosen)?;
        maint.double_write = DoubleWrite::open(self.storage.as_ref(), chosen, generation)?;
        maint.imaged_since_checkpoint.clear();
        Ok(())
    }
}
