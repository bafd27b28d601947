//! Write-back (paper §4.1 "Data Modifications", §4.2 eviction): every dirty record of one page
//! goes into the page (and its overflow page) in one write; a page that cannot take them all
//! triggers a reorganization of its segment.
//!
//! Pages are written back in batches ([`WriteBackBatch`], up to [`MAX_BATCH_PAGES`]): one WAL
//! sync and one double-write sync cover every page of a batch, where one page at a time paid two
//! syncs per page. A batch's pages are prepared (read, dirty records applied) under `maint`, so
//! the index and the pages cannot change before they are written, except by a reorganization
//! of this very write-back, and the batch is written out before any reorganization starts.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::{Relaxed, Release};

use strata_core::{Durability, Error, Key, Result};

use super::{Counters, MaintState, Store};
use crate::blob::BlobRef;
use crate::free_space::{PageId, SegmentSlot};
use crate::index::{Location, SegmentEntry};
use crate::page::{Page, PageKind, PutOutcome, Stored};
use crate::record_cache::DirtyRecord;

/// Pages in one batched write-back: 128 against 64 halves the double-write syncs and gives the
/// device more reads at once (2M x 64 B put load 69-71k -> 74-75k puts/s); a batch holds about
/// two pages and their copies per pair, 1 MiB at 4 KiB pages.
pub const MAX_BATCH_PAGES: usize = 128;
/// Dirty keys a checkpoint's sweep looks ahead for the pages of its next batch (a page takes
/// every dirty record of its fences, so many keys share one page). 2,048 was not faster on a
/// 2M x 64 B put load (72-81k against 79-86k puts/s, three alternating runs).
const SWEEP_LOOKAHEAD_KEYS: usize = 1024;
/// Threads a batch's page reads and writes are spread over: the device serves several requests
/// at once (MACHINE.md: 8 requests in flight reach about 2.5x one's rate). The paper gives
/// TreeLine 4 background threads; 8 loaded 64 B records 4% faster here (one run each).
const IO_THREADS: usize = 8;

/// `f` over `items` on up to `IO_THREADS` scoped threads, results in order; the first error wins.
pub(super) fn parallel_io<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    strata_kit::parallel::map_parts(items, IO_THREADS, 2, "a treeline write-back I/O thread", |part| {
        part.iter().map(&f).collect()
    })
}

/// Most pages one read or write of a batch covers.
const MAX_RUN_PAGES: usize = 16;

/// `ids` (sorted, distinct) as runs of consecutive pages, `(first, count)`, each at most
/// `MAX_RUN_PAGES`: a batch's pages are mostly neighbours in a segment, and one I/O per run
/// costs the device a fraction of one per page.
fn contiguous_runs(ids: &[PageId]) -> Vec<(PageId, usize)> {
    let mut runs: Vec<(PageId, usize)> = Vec::new();
    for &id in ids {
        match runs.last_mut() {
            Some((first, count)) if *first + *count as u64 == id && *count < MAX_RUN_PAGES => *count += 1,
            _ => runs.push((id, 1)),
        }
    }
    runs
}

/// Consecutive pages of one segment written in place with one write, under its latch.
struct InPlaceRun {
    segment_first_page: PageId,
    first_page: PageId,
    pages: usize,
    bytes: Vec<u8>,
}

/// The in-place pages of `pairs` as runs: per segment, pages in id order, consecutive ones
/// joined (at most `MAX_RUN_PAGES`).
fn in_place_runs(pairs: &[PreparedPair]) -> Vec<InPlaceRun> {
    let mut pages: Vec<(PageId, PageId, &[u8])> = pairs
        .iter()
        .flat_map(|p| p.in_place.iter().map(|(id, b)| (p.segment_first_page, *id, b.as_slice())))
        .collect();
    pages.sort_unstable_by_key(|&(segment, id, _)| (segment, id));
    let mut runs: Vec<InPlaceRun> = Vec::new();
    for (segment_first_page, id, bytes) in pages {
        match runs.last_mut() {
            Some(run)
                if run.segment_first_page == segment_first_page
                    && run.first_page + run.pages as u64 == id
                    && run.pages < MAX_RUN_PAGES =>
            {
                run.bytes.extend_from_slice(bytes);
                run.pages += 1;
            }
            _ => {
                runs.push(InPlaceRun { segment_first_page, first_page: id, pages: 1, bytes: bytes.to_vec() })
            }
        }
    }
    runs
}

/// Pages prepared for one batched write, and the dirty records they take.
#[derive(Default)]
pub(crate) struct WriteBackBatch {
    pairs: Vec<PreparedPair>,
    /// Base pages already in the batch: a second key on one of them adds nothing.
    base_pages: HashSet<PageId>,
    /// The records the pairs took, by key and lsn (marking them clean needs no more): their
    /// values are dropped once applied, so a batch of 128 pages does not hold 128 pages' worth
    /// of large values until it is written.
    records: Vec<DirtyRecord>,
    /// Pages read for this batch and the next ones of the same write-back (ahead in parallel by
    /// `prefetch_pages`, or on a miss), each as the disk holds it: only the write-back writes
    /// pages (it holds `maint`), and writing a batch drops the pages it wrote (a reorganization
    /// writes the batch first); a reorganization writes only free pages, and a page it frees is
    /// reused only after the next checkpoint, which no write-back spans.
    pages_read: HashMap<PageId, Page>,
    /// The pages of the keys ahead were read since the batch was last written.
    read_ahead: bool,
}

impl WriteBackBatch {
    pub fn is_full(&self) -> bool {
        self.pairs.len() >= MAX_BATCH_PAGES
    }

    /// Nothing prepared and no read-ahead since the batch was last written: the moment to read
    /// the next keys' pages ahead (a key that adds no pair must not start another one).
    fn wants_read_ahead(&self) -> bool {
        self.pairs.is_empty() && !self.read_ahead
    }

    /// After the batch was written: empty again, keeping the pages read that it did not write.
    fn written(&mut self) {
        for pair in self.pairs.drain(..) {
            let new_overflow = pair.new_overflow.iter().map(|(id, _)| id);
            for id in pair.in_place.iter().map(|(id, _)| id).chain(new_overflow) {
                self.pages_read.remove(id);
            }
        }
        self.base_pages.clear();
        self.records.clear();
        self.read_ahead = false;
    }

    /// Page `id`: the copy this batch already read, else from the data file.
    fn read_page(&mut self, store: &Store, id: PageId) -> Result<Page> {
        if let Some(page) = self.pages_read.get(&id) {
            return Ok(page.clone());
        }
        let page = store.data.read_page(id)?;
        self.pages_read.insert(id, page.clone());
        Ok(page)
    }
}

/// One page pair of a batch, ready to write.
struct PreparedPair {
    segment_lower: Key,
    segment_first_page: PageId,
    page_index: usize,
    /// Pages overwritten in place (overflow first, base last).
    in_place: Vec<(PageId, Vec<u8>)>,
    /// A new overflow page, written to a free page and then entered in the index.
    new_overflow: Option<(PageId, Vec<u8>)>,
    /// The segment is older than the last checkpoint (its pages are the ones recovery repairs)
    /// and the double write is on, so its in-place pages go to the double-write area first.
    needs_double_write: bool,
}

/// A base page and its overflow page after the dirty records were applied.
struct Applied {
    base: Page,
    overflow: Option<Page>,
    overflow_changed: bool,
    /// Keys the pages did not hold before: inserts, for the forecaster.
    inserted: Vec<Key>,
    /// Blob runs the pages referenced for records now replaced or deleted.
    replaced_blobs: Vec<BlobRef>,
}

/// What a write-back does with one page pair.
enum PageWork {
    /// No dirty record in its fences.
    Clean,
    /// Its dirty records applied to copies of the pair, with their blob runs.
    Applied { applied: Box<Applied>, dirty: Vec<DirtyRecord>, blobs: Vec<Option<BlobRef>> },
    /// They do not fit: its segment is reorganized.
    Reorganize,
}

/// The in-place pages of `batch` that need a double-write image first: of segments recovery
/// repairs, with no image since the last checkpoint (or rewind).
fn images_needed<'a>(batch: &'a WriteBackBatch, maint: &MaintState) -> Vec<(PageId, &'a [u8])> {
    batch
        .pairs
        .iter()
        .filter(|p| p.needs_double_write)
        .flat_map(|p| p.in_place.iter().map(|(id, b)| (*id, b.as_slice())))
        .filter(|(id, _)| !maint.imaged_since_checkpoint.contains(id))
        .collect()
}

/// Puts `key` into `page`, or reports that it has no room; a key new to the page is noted in
/// `inserted`.
fn put(page: &mut Page, key: &[u8], value: Stored<'_>, inserted: &mut Vec<Key>) -> Result<bool> {
    match page.put_stored(key, value)? {
        PutOutcome::NoRoom => Ok(false),
        PutOutcome::Updated => Ok(true),
        PutOutcome::Inserted => {
            inserted.push(key.to_vec());
            Ok(true)
        }
    }
}

/// The blob run `page`'s record of `key` references, if it has one.
fn blob_on(page: Option<&Page>, key: &[u8]) -> Option<BlobRef> {
    page.and_then(|p| p.get(key)).and_then(|s| s.blob())
}

/// Applies `records` to copies of the page pair, each value inline or, where `blobs` names a run,
/// as its reference: deletes first (they free room), then puts, each into the page that holds
/// the key, else the base page, else the overflow page (created when needed). `None`: the pair
/// cannot take them all (a reorganization is due).
fn apply_dirty(
    base: &Page,
    overflow: Option<&Page>,
    records: &[DirtyRecord],
    blobs: &[Option<BlobRef>],
) -> Result<Option<Applied>> {
    let mut base = base.clone();
    let mut overflow = overflow.cloned();
    let had_overflow = overflow.is_some();
    let mut overflow_changed = false;
    let mut inserted = Vec::new();
    let mut replaced_blobs = Vec::new();
    for record in records.iter().filter(|r| r.value.is_none()) {
        replaced_blobs.extend(blob_on(Some(&base), &record.key));
        replaced_blobs.extend(blob_on(overflow.as_ref(), &record.key));
        base.delete(&record.key);
        overflow_changed |= overflow.as_mut().is_some_and(|o| o.delete(&record.key));
    }
    for (record, blob) in records.iter().zip(blobs) {
        let Some(value) = &record.value else { continue };
        let value = blob.map_or(Stored::Inline(value), Stored::Blob);
        let key = record.key.as_slice();
        let old =
            if base.get(key).is_some() { blob_on(Some(&base), key) } else { blob_on(overflow.as_ref(), key) };
        replaced_blobs.extend(old.filter(|&r| Some(r) != value.blob()));
        if base.get(key).is_some() {
            if put(&mut base, key, value, &mut inserted)? {
                continue;
            }
            base.delete(key);
        } else if let Some(o) = overflow.as_mut().filter(|o| o.get(key).is_some()) {
            overflow_changed = true;
            if put(o, key, value, &mut inserted)? {
                continue;
            }
            o.delete(key);
        }
        if put(&mut base, key, value, &mut inserted)? {
            continue;
        }
        if overflow.is_none() {
            overflow = Some(Page::new_overflow_for(&base)?);
        }
        overflow_changed = true;
        let fits = match overflow.as_mut() {
            Some(o) => put(o, key, value, &mut inserted)?,
            None => false,
        };
        if !fits {
            return Ok(None);
        }
    }
    let overflow_changed = overflow_changed || (overflow.is_some() && !had_overflow);
    Ok(Some(Applied { base, overflow, overflow_changed, inserted, replaced_blobs }))
}

impl Store {
    /// Writes back the pages of `keys` (each key's page with every dirty record in its fences),
    /// in batches.
    pub fn write_back_pages_of(&self, maint: &mut MaintState, keys: &[Key]) -> Result<()> {
        let mut batch = WriteBackBatch::default();
        for (i, key) in keys.iter().enumerate() {
            if batch.wants_read_ahead() {
                self.prefetch_pages(&mut batch.pages_read, keys.get(i..).unwrap_or_default())?;
                batch.read_ahead = true;
            }
            self.add_page_of(maint, &mut batch, key)?;
            if batch.is_full() {
                self.write_batch(maint, &mut batch)?;
            }
        }
        self.write_batch(maint, &mut batch)?;
        self.settle_unplaced(maint)
    }

    /// Writes back every dirty record whose lsn is below `below_lsn` (`u64::MAX`: all), with the
    /// other dirty records of their pages, sweeping the key space once in order. The sweep walks
    /// lists of the next old dirty keys (`dirty_keys_from`: every such key up to the list's last),
    /// skipping keys a page already taken covers and keys a reorganization wrote meanwhile; no
    /// key turns old and dirty during the sweep (new writes have lsns past the checkpoint's cut).
    pub fn write_back_older_than(&self, maint: &mut MaintState, below_lsn: u64) -> Result<()> {
        let mut batch = WriteBackBatch::default();
        let mut from: Key = Vec::new();
        let mut ahead: Vec<Key> = Vec::new();
        let mut next = 0;
        loop {
            if next == ahead.len() {
                ahead = self.cache.dirty_keys_from(&from, below_lsn, SWEEP_LOOKAHEAD_KEYS);
                next = 0;
            }
            let Some(key) = ahead.get(next) else { break };
            next += 1;
            if *key < from || !self.cache.is_dirty_below(key, below_lsn) {
                continue;
            }
            if batch.wants_read_ahead() {
                self.prefetch_pages(&mut batch.pages_read, ahead.get(next - 1..).unwrap_or_default())?;
                batch.read_ahead = true;
            }
            let Some(upper) = self.add_page_of(maint, &mut batch, key)? else { break };
            from = upper;
            if batch.is_full() {
                self.write_batch(maint, &mut batch)?;
            }
        }
        self.write_batch(maint, &mut batch)?;
        self.settle_unplaced(maint)
    }

    /// Adds the page that holds `key` to `batch`; returns that page's upper fence (`None`: the
    /// last page of the key space), where a sweep continues.
    ///
    /// 1. Locate the page (only the caller, holding `maint`, changes the index) and read it and
    ///    its overflow page. 2. Take the dirty records inside its fences from the cache.
    ///    3. Apply them to copies; a pair that cannot take them all is reorganized at once,
    ///    after the batch so far is written (the reorganization reads those pages), with the
    ///    records made durable in the WAL first. 4. Otherwise the pair joins the batch
    ///    (`write_batch` does the rest).
    fn add_page_of(
        &self,
        maint: &mut MaintState,
        batch: &mut WriteBackBatch,
        key: &[u8],
    ) -> Result<Option<Key>> {
        self.ensure_first_segment(maint)?;
        let location =
            self.index.read().locate(key).ok_or_else(|| Error::corruption("treeline index", 0, "empty"))?;
        let (page_index, base) =
            self.find_base_page_via(&location, key, &mut |id| batch.read_page(self, id))?;
        let upper = base.upper_fence().map(<[u8]>::to_vec);
        let base_id = location.entry.base_page(page_index);
        if batch.base_pages.contains(&base_id) {
            return Ok(upper);
        }
        let overflow_id = location.entry.overflow_of(page_index);
        let overflow = match overflow_id {
            Some(id) => {
                let overflow = batch.read_page(self, id)?;
                self.check_overflow_identity(&overflow, id, &base)?;
                Some(overflow)
            }
            None => None,
        };
        match self.apply_page_dirty(maint, &base, overflow.as_ref(), upper.as_deref())? {
            PageWork::Clean => {}
            PageWork::Applied { applied, dirty, blobs } => {
                if let Some(forecaster) = &mut maint.forecaster {
                    applied.inserted.iter().for_each(|key| forecaster.record_insert_key(key));
                }
                applied.replaced_blobs.iter().for_each(|&r| self.release(maint, r));
                dirty.iter().zip(&blobs).for_each(|(r, &blob)| Self::placed(maint, &r.key, blob));
                let pair = self.prepare_pair(maint, &location, page_index, overflow_id, *applied)?;
                batch.pairs.push(pair);
                batch.base_pages.insert(base_id);
                batch.records.extend(dirty.into_iter().map(|r| DirtyRecord { value: None, ..r }));
            }
            PageWork::Reorganize => {
                self.write_batch(maint, batch)?;
                self.reorganize(maint, &location.lower)?;
            }
        }
        Ok(upper)
    }

    /// The dirty records within `base`'s fences (up to `upper`) applied to copies of the pair.
    /// More of them than the pair has slots (a young store's one page covers every key) go
    /// to a reorganization, which takes them in pieces; no more than one past the slots is
    /// copied here.
    fn apply_page_dirty(
        &self,
        maint: &mut MaintState,
        base: &Page,
        overflow: Option<&Page>,
        upper: Option<&[u8]>,
    ) -> Result<PageWork> {
        let pair_slots = 2 * self.page_size().max_records();
        let Some(dirty) = self.cache.dirty_in_at_most(base.lower_fence(), upper, pair_slots) else {
            return Ok(PageWork::Reorganize);
        };
        if dirty.is_empty() {
            return Ok(PageWork::Clean);
        }
        let blobs = self.blobs_for(maint, &dirty)?;
        Ok(match apply_dirty(base, overflow, &dirty, &blobs)? {
            Some(applied) => PageWork::Applied { applied: Box::new(applied), dirty, blobs },
            None => PageWork::Reorganize,
        })
    }

    /// The images of an applied pair; a new overflow page gets a free page (linked from the base
    /// page) now, and enters the index when the batch is written.
    fn prepare_pair(
        &self,
        maint: &mut MaintState,
        location: &Location,
        page_index: usize,
        overflow_id: Option<PageId>,
        applied: Applied,
    ) -> Result<PreparedPair> {
        let Applied { mut base, overflow, overflow_changed, .. } = applied;
        let mut in_place: Vec<(PageId, Vec<u8>)> = Vec::new();
        let mut new_overflow = None;
        match (overflow, overflow_id) {
            (Some(page), Some(id)) if overflow_changed => in_place.push((id, page.into_sealed_bytes())),
            (Some(page), None) => {
                let slot = maint.free.allocate(1)?;
                base.set_overflow(Some(slot.first_page))?;
                new_overflow = Some((slot.first_page, page.into_sealed_bytes()));
                Counters::add(&self.counters.overflow_pages_created, 1);
            }
            _ => {}
        }
        in_place.push((location.entry.base_page(page_index), base.into_sealed_bytes()));
        Ok(PreparedPair {
            segment_lower: location.lower.clone(),
            segment_first_page: location.entry.first_page,
            page_index,
            in_place,
            new_overflow,
            needs_double_write: self.options.double_write
                && location.entry.production_id < maint.checkpoint_production_id,
        })
    }

    /// Writes a batch out and empties it: 1. the WAL is made durable up to the batch's newest
    /// record (no page ever holds a write the WAL could lose); 2. the images of pages that are
    /// overwritten in place, that recovery may repair and that have no image since the last
    /// checkpoint go to the double-write area, synced once; 3. new overflow pages are written and entered in the index; 4. the pages are written
    /// in place, each segment's under its latch; 5. the records are marked clean unless written
    /// again meanwhile.
    pub(crate) fn write_batch(&self, maint: &mut MaintState, batch: &mut WriteBackBatch) -> Result<()> {
        let Some(newest_lsn) = batch.records.iter().map(|r| r.lsn).max() else {
            return Ok(());
        };
        self.writes.wal().commit(newest_lsn, Durability::Sync)?;
        let mut images = images_needed(batch, maint);
        let limit_bytes = self.double_write_limit_bytes();
        if !images.is_empty()
            && maint.double_write.bytes() + maint.double_write.bytes_for(images.len()) > limit_bytes
        {
            self.rewind_double_write(maint)?;
            images = images_needed(batch, maint);
        }
        if !images.is_empty() {
            maint.double_write.append_and_sync(&images)?;
            maint.imaged_since_checkpoint.extend(images.iter().map(|(id, _)| *id));
            self.double_write_bytes.store(maint.double_write.bytes(), Relaxed);
            Counters::add(&self.counters.double_write_pages, images.len() as u64);
            Counters::add(&self.counters.double_write_syncs, 1);
        }
        self.enter_new_overflow_pages(batch)?;
        let writes = in_place_runs(&batch.pairs);
        parallel_io(&writes, |run| {
            let _latch = self.latch_write(run.segment_first_page);
            self.data.write_page(run.first_page, &run.bytes)
        })?;
        let pages_written = batch.pairs.iter().map(|p| p.in_place.len()).sum::<usize>();
        Counters::add(&self.counters.pages_written_back, pages_written as u64);
        Counters::add(&self.counters.write_back_batches, 1);
        self.mark_written(&batch.records);
        batch.written();
        Ok(())
    }

    /// The double-write area's size limit: the checkpoint distance, at least 64 pages.
    pub(crate) fn double_write_limit_bytes(&self) -> u64 {
        self.checkpoint_wal_bytes.load(Relaxed).max(64 * self.page_size().bytes() as u64)
    }

    /// Syncs the data file, so every in-place write the double-write area's images cover is
    /// intact on disk, then empties the area (`DoubleWrite::rewind`): each page gets an image
    /// again at its next in-place write. Keeps the area within its limit between checkpoints
    /// (a checkpoint's sweep images nearly every page it writes) without a checkpoint.
    fn rewind_double_write(&self, maint: &mut MaintState) -> Result<()> {
        self.data.sync()?;
        maint.double_write.rewind()?;
        maint.imaged_since_checkpoint.clear();
        self.double_write_bytes.store(0, Relaxed);
        Counters::add(&self.counters.double_write_rewinds, 1);
        Ok(())
    }

    /// Writes the batch's new overflow pages (free pages no reader can reach yet), then links
    /// each from its segment's index entry.
    fn enter_new_overflow_pages(&self, batch: &WriteBackBatch) -> Result<()> {
        let new: Vec<&PreparedPair> = batch.pairs.iter().filter(|p| p.new_overflow.is_some()).collect();
        if new.is_empty() {
            return Ok(());
        }
        let pages: Vec<&(PageId, Vec<u8>)> = new.iter().filter_map(|p| p.new_overflow.as_ref()).collect();
        parallel_io(&pages, |(id, bytes)| self.data.write_page(*id, bytes))?;
        let mut index = self.index.write();
        for pair in new {
            let Some((id, _)) = &pair.new_overflow else { continue };
            if !index.set_overflow(&pair.segment_lower, pair.page_index, *id) {
                return Err(Error::corruption("treeline index", 0, "segment vanished"));
            }
        }
        Ok(())
    }

    /// After `records` reached the pages: readers may cache page reads again only after this
    /// epoch, and the records become clean unless written again meanwhile.
    pub(super) fn mark_written(&self, records: &[DirtyRecord]) {
        Counters::add(&self.counters.records_written_back, records.len() as u64);
        // Bumped before any shard marks a record clean (after which it may be evicted): a
        // reader that finds the record gone from its shard then sees the new epoch.
        self.page_write_epoch.fetch_add(1, Release);
        self.cache.mark_clean(records);
    }

    /// Makes `pages` hold the base page the model picks for each of `keys` and its overflow
    /// page, for the first `MAX_BATCH_PAGES` base pages the keys name in order, and no other:
    /// those already there are kept, the others read in parallel (a batch's page reads would
    /// otherwise wait on the device one after another). Only a guess of the pages the batch
    /// will take: a key the model misplaces is read when the batch reaches it.
    fn prefetch_pages(&self, pages: &mut HashMap<PageId, Page>, keys: &[Key]) -> Result<()> {
        let mut bases: HashSet<PageId> = HashSet::new();
        let mut ids: Vec<PageId> = Vec::new();
        {
            let index = self.index.read();
            for location in keys.iter().filter_map(|k| index.locate(k)) {
                if bases.len() >= MAX_BATCH_PAGES {
                    break;
                }
                if bases.insert(location.base_page()) {
                    ids.push(location.base_page());
                    ids.extend(location.overflow());
                }
            }
        }
        let wanted: HashSet<PageId> = ids.iter().copied().collect();
        pages.retain(|id, _| wanted.contains(id));
        ids.retain(|id| !pages.contains_key(id));
        ids.sort_unstable();
        ids.dedup();
        let runs = contiguous_runs(&ids);
        let read = parallel_io(&runs, |&(first, count)| self.data.read_pages(first, count))?;
        pages.extend(ids.into_iter().zip(read.into_iter().flatten()));
        Ok(())
    }

    /// A store's first write-back chooses its page size from the cached records (if the options
    /// leave it to the store) and creates its first segment: one empty page covering every key.
    fn ensure_first_segment(&self, maint: &mut MaintState) -> Result<()> {
        if !self.index.read().is_empty() {
            return Ok(());
        }
        let sample = self.cache.record_bytes_sample(super::page_size_choice::PAGE_SIZE_SAMPLE_RECORDS);
        self.settle_page_size(maint, sample)?;
        let slot: SegmentSlot = maint.free.allocate(1)?;
        let production_id = maint.take_production_id();
        let kind = PageKind::SegmentHead { pages: 1, production_id, model: None };
        let page = Page::new(self.page_size(), kind, b"", None)?;
        self.data.write_page(slot.first_page, &page.into_sealed_bytes())?;
        self.index.write().insert(Vec::new(), SegmentEntry::new(slot, None, production_id));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_pages_become_runs_of_at_most_max_run_pages() {
        assert_eq!(contiguous_runs(&[1, 2, 3, 5, 6, 9]), vec![(1, 3), (5, 2), (9, 1)]);
        let ids: Vec<PageId> = (100..140).collect();
        assert_eq!(contiguous_runs(&ids), vec![(100, 16), (116, 16), (132, 8)]);
        assert!(contiguous_runs(&[]).is_empty());
    }

    fn pair(segment_first_page: PageId, in_place: &[PageId]) -> PreparedPair {
        PreparedPair {
            segment_lower: Vec::new(),
            segment_first_page,
            page_index: 0,
            in_place: in_place.iter().map(|&id| (id, vec![id as u8; 4])).collect(),
            new_overflow: None,
            needs_double_write: false,
        }
    }

    #[test]
    fn a_written_batch_forgets_the_pages_it_wrote_and_keeps_the_others() {
        let page = || {
            let kind = PageKind::SegmentHead { pages: 1, production_id: 1, model: None };
            Page::new(crate::page::PageSize::DEFAULT, kind, b"", None).unwrap()
        };
        let mut with_new_overflow = pair(1, &[1]);
        with_new_overflow.new_overflow = Some((7, Vec::new()));
        let mut batch = WriteBackBatch {
            pairs: vec![with_new_overflow, pair(3, &[3])],
            base_pages: [1, 3].into_iter().collect(),
            records: Vec::new(),
            pages_read: [1, 2, 3, 7].into_iter().map(|id| (id, page())).collect(),
            read_ahead: true,
        };
        batch.written();
        assert!(batch.wants_read_ahead() && batch.base_pages.is_empty() && batch.records.is_empty());
        let mut kept: Vec<PageId> = batch.pages_read.keys().copied().collect();
        kept.sort_unstable();
        assert_eq!(kept, vec![2], "pages 1, 3 and 7 were written: their copies are stale");
    }

    #[test]
    fn in_place_runs_join_neighbours_of_one_segment_only() {
        // Segment 10 holds pages 10..14 (overflow page 40); segment 14 starts right after it.
        let pairs = [pair(10, &[12]), pair(10, &[40, 11]), pair(14, &[14]), pair(10, &[13])];
        let runs: Vec<(PageId, PageId, usize, Vec<u8>)> = in_place_runs(&pairs)
            .into_iter()
            .map(|r| (r.segment_first_page, r.first_page, r.pages, r.bytes))
            .collect();
        assert_eq!(
            runs,
            vec![
                (10, 11, 3, [[11u8; 4], [12; 4], [13; 4]].concat()),
                (10, 40, 1, vec![40; 4]),
                (14, 14, 1, vec![14; 4]),
            ],
            "page 14 follows page 13 on disk but belongs to another segment (another latch)"
        );
    }
}
