//! Bulk loading into an empty store (docs/ARCHITECTURE.md, "Engine treeline", bulk load): the
//! sorted records are cut into chunks, each chunk is planned and written as post segments exactly
//! as a reorganization writes them (Phases II and III), and one index swap plus a full checkpoint
//! publishes them all. Until that checkpoint is durable no persisted state references the new
//! segments, so a crash or an error mid-way leaves the empty store (all or nothing), and the
//! pages written are free space again.

use std::sync::atomic::Ordering::Relaxed;

use strata_core::{Key, Result, Value};

use super::{Counters, MaintState, Store, Sweep};
use crate::free_space::SegmentSlot;
use crate::index::SegmentEntry;
use crate::page::StoredValue;

/// Records planned together: large enough that segment boundaries forced at chunk edges are
/// rare (a chunk spans thousands of pages at small records), small enough to bound memory.
const CHUNK_RECORDS: usize = 1 << 16;
/// Bytes of keys and values planned together (the bound for large records).
const CHUNK_BYTES: usize = 16 << 20;

/// The outcome of `Store::bulk_load`.
pub(crate) enum BulkLoad {
    /// Every record is in the pages and a checkpoint references them.
    Loaded(u64),
    /// The store was not empty: nothing was read from the input, load it by writes instead.
    NotEmpty,
}

impl Store {
    /// Loads `records` (strictly increasing keys, checked by the facade) into an empty store:
    /// 1. under `maint`, check the store is empty (one empty segment, nothing cached);
    /// 2. per chunk, plan and write its post segments (no sync);
    /// 3. swap the index to the new segments (the empty one is freed at the checkpoint);
    /// 4. a full checkpoint syncs the data file and stores the index.
    ///
    /// An `Err` item from the input returns the written slots to the free list and leaves the
    /// store as it was; an I/O error in step 2 or 4 poisons it (reopen recovers the empty
    /// checkpoint).
    pub(crate) fn bulk_load(
        &self,
        records: &mut dyn Iterator<Item = Result<(Key, Value)>>,
    ) -> Result<BulkLoad> {
        self.check_usable()?;
        let mut maint = self.maint.lock();
        if !self.is_empty_for_bulk_load()? {
            return Ok(BulkLoad::NotEmpty);
        }
        let mut written = Written::default();
        let loaded = match self.write_chunks(&mut maint, records, &mut written) {
            Ok(loaded) => loaded,
            Err(e) => {
                for (_, entry) in &written.segments {
                    release_segment(&mut maint, entry)?;
                }
                for first_page in &written.blob_runs {
                    if let Some(slot) = maint.blobs.remove(first_page) {
                        maint.free.release_run(*first_page, slot.pages)?;
                    }
                }
                return Err(e);
            }
        };
        let written = written.segments;
        if written.is_empty() {
            return Ok(BulkLoad::Loaded(0));
        }
        {
            let mut index = self.index.write();
            let empty: Vec<Key> = index.iter().map(|(k, _)| k.clone()).collect();
            for lower in empty {
                if let Some(entry) = index.remove(&lower) {
                    maint.freed_since_checkpoint.push(entry.slot());
                }
            }
            for (lower, entry) in written {
                index.insert(lower, entry);
            }
            self.index_memory_bytes.store(index.memory_bytes(), Relaxed);
        }
        Counters::add(&self.counters.bulk_loaded_records, loaded);
        self.maintain(|| self.checkpoint(&mut maint, Sweep::All))?;
        Ok(BulkLoad::Loaded(loaded))
    }

    /// No segment (a new store), or one whose single page holds no record and has no overflow
    /// page; and an empty cache.
    fn is_empty_for_bulk_load(&self) -> Result<bool> {
        if !self.cache.is_empty() {
            return Ok(false);
        }
        let only = {
            let index = self.index.read();
            if index.is_empty() {
                return Ok(true);
            }
            let only = index.iter().next().filter(|(_, e)| e.pages == 1 && !e.has_overflow());
            match only {
                Some((_, entry)) if index.len() == 1 => entry.base_page(0),
                _ => return Ok(false),
            }
        };
        Ok(self.data.read_page(only)?.record_count() == 0)
    }

    /// Steps 2: chunk after chunk, each planned over `[its first key, the next chunk's first
    /// key)` (the first chunk from the empty key, as the empty store's segment covers it).
    /// Appends what it wrote to `written`; returns the records loaded.
    fn write_chunks(
        &self,
        maint: &mut MaintState,
        records: &mut dyn Iterator<Item = Result<(Key, Value)>>,
        written: &mut Written,
    ) -> Result<u64> {
        let mut next = records.next().transpose()?;
        let mut lower = Key::new();
        let mut loaded = 0u64;
        while let Some(first) = next.take() {
            let mut chunk_bytes = first.0.len() + first.1.len();
            let mut chunk = vec![first];
            while chunk.len() < CHUNK_RECORDS && chunk_bytes < CHUNK_BYTES {
                match records.next().transpose()? {
                    Some(record) => {
                        chunk_bytes += record.0.len() + record.1.len();
                        chunk.push(record);
                    }
                    None => break,
                }
            }
            next = records.next().transpose()?;
            if loaded == 0 {
                let sizes = chunk.iter().map(|(k, v)| k.len() + v.len()).collect();
                self.maintain(|| self.settle_page_size(maint, sizes))?;
            }
            let upper = next.as_ref().map(|(k, _)| k.as_slice());
            // An I/O error poisons the store: the failed call's reserved slots are lost to the
            // free list, and one at the end of the file would make the next checkpoint store a
            // data end past the file. Reopening recovers the empty checkpoint.
            let chunk = self.maintain(|| self.stored_chunk(maint, chunk, &mut written.blob_runs))?;
            let built = self.maintain(|| self.build_post_segments(maint, &lower, upper, &chunk, false))?;
            written.segments.extend(self.maintain(|| self.write_post_segments(maint, built))?);
            loaded += chunk.len() as u64;
            lower = upper.map(<[u8]>::to_vec).unwrap_or_default();
        }
        Ok(loaded)
    }
}

/// What a bulk load wrote so far: its segments, and the first pages of its blob runs.
#[derive(Default)]
struct Written {
    segments: Vec<(Key, SegmentEntry)>,
    blob_runs: Vec<crate::free_space::PageId>,
}

impl Store {
    /// `chunk` with each value as a page will hold it: large ones written to blob runs (their
    /// first pages appended to `blob_runs`).
    fn stored_chunk(
        &self,
        maint: &mut MaintState,
        chunk: Vec<(Key, Value)>,
        blob_runs: &mut Vec<crate::free_space::PageId>,
    ) -> Result<Vec<(Key, StoredValue)>> {
        let mut stored = Vec::with_capacity(chunk.len());
        for (key, value) in chunk {
            let value = match crate::blob::needs_blob(self.page_size(), key.len(), value.len()) {
                false => StoredValue::Inline(value),
                true => {
                    let r = self.write_blob(maint, &key, &value)?;
                    blob_runs.push(r.first_page);
                    StoredValue::Blob(r)
                }
            };
            stored.push((key, value));
        }
        Ok(stored)
    }
}

/// Returns a never-published segment's slot and overflow pages to the free list.
fn release_segment(maint: &mut MaintState, entry: &SegmentEntry) -> Result<()> {
    maint.free.release(entry.slot())?;
    for &first_page in entry.overflow.iter().filter(|&&id| id != 0) {
        maint.free.release(SegmentSlot { first_page, pages: 1 })?;
    }
    Ok(())
}
