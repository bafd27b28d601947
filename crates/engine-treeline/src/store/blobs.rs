//! Values too large for a page (docs/format/treeline.md, "Blob runs"): written to a run of free
//! pages in one sequential write when their record reaches the pages (write-back, a
//! reorganization, a bulk load), read back in one sequential read.
//!
//! Lifecycle, all under `maint`:
//! 1. `blob_for` writes the run and registers it in `MaintState::blobs` (live runs, the
//!    checkpoint's blob table), remembered as *unplaced* until a page takes its reference.
//! 2. A page that takes it (`placed`) makes it an ordinary live run. A write-back whose pair
//!    cannot take its records hands them to a reorganization, which finds the run written for
//!    the same key and lsn instead of writing another.
//! 3. A page record replaced or deleted `release`s its old run: out of the registry and, like a
//!    freed segment, reusable only after the next checkpoint (the last checkpoint's pages may
//!    still reference it).
//! 4. `settle_unplaced` frees runs no page took (their record was written again meanwhile) at
//!    once: nothing durable references them.
//!
//! A reference whose run is not in the registry with its id is stale: after a crash, a page
//! restored from its double-write image may name a run written after the last checkpoint, whose
//! pages recovery counted free. Its record is always in the replayed WAL (the run was written
//! for a dirty record), so it is dirty in the cache and the stale reference is never read; its
//! release is ignored. The converse, a run the registry keeps that no page references any more,
//! is what such a crash leaves behind; `sweep_unreferenced` finds those after an unclean open.

use std::collections::HashSet;
use std::hash::BuildHasher;

use strata_core::{Error, Result, Value};
use strata_wal::Lsn;

use super::{Counters, MaintState, Store};
use crate::blob::{self, BlobRef, BlobSlot};
use crate::data_file::FILE_NAME;
use crate::free_space::{page_offset, PageId};
use crate::page::{Stored, StoredValue};
use crate::record_cache::DirtyRecord;

/// The first blob id of this open: a random high half (see the format doc), counter from 1.
pub(crate) fn first_blob_id_of_this_open() -> u64 {
    let random = std::hash::RandomState::new().hash_one(std::time::SystemTime::now());
    (random << 32) | 1
}

impl MaintState {
    fn take_blob_id(&mut self) -> u64 {
        let id = self.next_blob_id;
        self.next_blob_id = self.next_blob_id.wrapping_add(1).max(1);
        id
    }
}

impl Store {
    /// Where a page will find `value` of `key`: `None` inline (it fits), else a run written now
    /// (or already written for this key at this `lsn`).
    pub(super) fn blob_for(
        &self,
        maint: &mut MaintState,
        key: &[u8],
        value: &Value,
        lsn: Lsn,
    ) -> Result<Option<BlobRef>> {
        if !blob::needs_blob(self.page_size(), key.len(), value.len()) {
            return Ok(None);
        }
        if let Some(&(written_lsn, r)) = maint.unplaced_blobs.get(key) {
            if written_lsn == lsn {
                return Ok(Some(r));
            }
        }
        let r = self.write_blob(maint, key, value)?;
        if let Some((_, superseded)) = maint.unplaced_blobs.insert(key.to_vec(), (lsn, r)) {
            self.free_unplaced(maint, superseded)?;
        }
        Ok(Some(r))
    }

    /// The blob run (if any) each of `dirty`'s values goes to (`blob_for`).
    pub(super) fn blobs_for(
        &self,
        maint: &mut MaintState,
        dirty: &[DirtyRecord],
    ) -> Result<Vec<Option<BlobRef>>> {
        let mut blobs = Vec::with_capacity(dirty.len());
        for record in dirty {
            blobs.push(match &record.value {
                Some(v) => self.blob_for(maint, &record.key, v, record.lsn)?,
                None => None,
            });
        }
        Ok(blobs)
    }

    /// Writes a run for `key` and `value` into free pages, registered as live.
    pub(super) fn write_blob(&self, maint: &mut MaintState, key: &[u8], value: &[u8]) -> Result<BlobRef> {
        let blob_id = maint.take_blob_id();
        let bytes = blob::encode_run(self.page_size(), value);
        let pages = (bytes.len() / self.page_size().bytes()) as u64;
        let first_page = maint.free.allocate_run(pages)?;
        self.data.write_page(first_page, &bytes)?;
        maint.blobs.insert(first_page, BlobSlot { pages, blob_id });
        Counters::add(&self.counters.blob_runs_written, 1);
        Counters::add(&self.counters.blob_pages_written, pages);
        Ok(BlobRef { first_page, value_len: value.len() as u32, crc: blob::checksum(key, value), blob_id })
    }

    /// A page took the reference to run `r` for `key`: the run is no longer unplaced.
    pub(super) fn placed(maint: &mut MaintState, key: &[u8], r: Option<BlobRef>) {
        if let Some(r) = r {
            if maint.unplaced_blobs.get(key).is_some_and(|(_, u)| *u == r) {
                maint.unplaced_blobs.remove(key);
            }
        }
    }

    /// A page record referencing `r` was replaced or deleted: its run is freed after the next
    /// checkpoint (a stale reference is ignored: see the module documentation).
    pub(super) fn release(&self, maint: &mut MaintState, r: BlobRef) {
        if maint.blobs.get(&r.first_page).is_some_and(|s| s.blob_id == r.blob_id) {
            if let Some(slot) = maint.blobs.remove(&r.first_page) {
                maint.blob_runs_freed_since_checkpoint.push((r.first_page, slot.pages));
            }
        } else {
            Counters::add(&self.counters.stale_blob_references, 1);
        }
    }

    /// Frees the runs written for records no page took.
    pub(super) fn settle_unplaced(&self, maint: &mut MaintState) -> Result<()> {
        let unplaced: Vec<BlobRef> = maint.unplaced_blobs.drain().map(|(_, (_, r))| r).collect();
        for r in unplaced {
            self.free_unplaced(maint, r)?;
        }
        Ok(())
    }

    fn free_unplaced(&self, maint: &mut MaintState, r: BlobRef) -> Result<()> {
        if let Some(slot) = maint.blobs.remove(&r.first_page) {
            maint.free.release_run(r.first_page, slot.pages)?;
        }
        Ok(())
    }

    /// The value `stored` stands for: itself, or its run read in one sequential read.
    pub fn resolve(&self, key: &[u8], stored: Stored<'_>) -> Result<Value> {
        match stored {
            Stored::Inline(v) => Ok(v.to_vec()),
            Stored::Blob(r) => self.read_blob(key, &r),
        }
    }

    /// A scan's record, as its chunk read it, resolved after the chunk's latches were
    /// released: a blob run may have been replaced and reused since, so a run that fails its
    /// checks is looked up again as a point read would (`None`: the key was deleted since; a
    /// scan is not a snapshot), and only that read's failure is an error.
    pub fn resolve_for_scan(&self, key: &[u8], stored: StoredValue) -> Result<Option<Value>> {
        match stored {
            StoredValue::Inline(v) => Ok(Some(v)),
            StoredValue::Blob(r) => match self.read_blob(key, &r) {
                Ok(v) => Ok(Some(v)),
                Err(_) => self.get(key),
            },
        }
    }

    fn read_blob(&self, key: &[u8], r: &BlobRef) -> Result<Value> {
        let offset = page_offset(r.first_page, self.page_size()).ok_or_else(|| {
            Error::corruption(FILE_NAME, 0, format!("blob page id {} overflows", r.first_page))
        })?;
        let pages = r.pages(self.page_size());
        let bytes = self.data.read_run(r.first_page, pages)?;
        Counters::add(&self.counters.blob_runs_read, 1);
        blob::decode_run(bytes, key, r, FILE_NAME, offset)
    }

    /// Frees every registered run no page of the index references (what a crash between
    /// checkpoints can leave: see the module documentation). Reads every page once; run at an
    /// open that replayed the WAL, when runs exist.
    pub(super) fn sweep_unreferenced(&self, maint: &mut MaintState) -> Result<u64> {
        let mut referenced: HashSet<(PageId, u64)> = HashSet::new();
        let entries: Vec<_> = self.index.read().iter().map(|(_, e)| e.clone()).collect();
        for entry in entries {
            let base = self.data.read_pages(entry.first_page, usize::from(entry.pages))?;
            for (i, page) in base.iter().enumerate() {
                let overflow = self.read_checked_overflow(&entry, i, page)?;
                for p in std::iter::once(page).chain(overflow.as_ref()) {
                    referenced
                        .extend(p.iter().filter_map(|e| e.value.blob()).map(|r| (r.first_page, r.blob_id)));
                }
            }
        }
        let orphans: Vec<(PageId, BlobSlot)> = maint
            .blobs
            .iter()
            .filter(|(first, s)| !referenced.contains(&(**first, s.blob_id)))
            .map(|(first, s)| (*first, *s))
            .collect();
        for (first_page, slot) in &orphans {
            maint.blobs.remove(first_page);
            maint.blob_runs_freed_since_checkpoint.push((*first_page, slot.pages));
        }
        Ok(orphans.len() as u64)
    }
}
