//! Write-back (paper §4.1 "Data Modifications", §4.2 eviction): every dirty record of one page
//! goes into the page (and its overflow page) in one write; a page that cannot take them all
//! triggers a reorganization of its segment.

use std::sync::atomic::Ordering::{Relaxed, Release};

use strata_core::{Durability, Error, Key, Result};

use super::{Counters, MaintState, Store};
use crate::forecast::Forecaster;
use crate::free_space::{PageId, SegmentSlot};
use crate::index::{Location, SegmentEntry};
use crate::key_projection::project;
use crate::page::{Page, PageKind, PutOutcome};
use crate::record_cache::DirtyRecord;

/// A base page and its overflow page after the dirty records were applied.
struct Applied {
    base: Page,
    overflow: Option<Page>,
    overflow_changed: bool,
}

/// Puts `key` into `page`, or reports that it has no room. Inserts count towards the forecast.
fn put(page: &mut Page, key: &[u8], value: &[u8], forecaster: &mut Option<Forecaster>) -> Result<bool> {
    match page.put(key, value)? {
        PutOutcome::NoRoom => Ok(false),
        PutOutcome::Updated => Ok(true),
        PutOutcome::Inserted => {
            if let Some(f) = forecaster {
                f.record_insert(project(key, 0));
            }
            Ok(true)
        }
    }
}

/// Applies `dirty` to copies of the page pair: deletes first (they free room), then puts, each
/// into the page that holds the key, else the base page, else the overflow page (created when
/// needed). `None`: the pair cannot take them all (a reorganization is due).
fn apply_dirty(
    base: &Page,
    overflow: Option<&Page>,
    dirty: &[DirtyRecord],
    forecaster: &mut Option<Forecaster>,
) -> Result<Option<Applied>> {
    let mut base = base.clone();
    let mut overflow = overflow.cloned();
    let had_overflow = overflow.is_some();
    let mut overflow_changed = false;
    for record in dirty.iter().filter(|r| r.value.is_none()) {
        base.delete(&record.key);
        overflow_changed |= overflow.as_mut().is_some_and(|o| o.delete(&record.key));
    }
    for record in dirty {
        let Some(value) = &record.value else { continue };
        let key = record.key.as_slice();
        if base.get(key).is_some() {
            if put(&mut base, key, value, forecaster)? {
                continue;
            }
            base.delete(key);
        } else if let Some(o) = overflow.as_mut().filter(|o| o.get(key).is_some()) {
            overflow_changed = true;
            if put(o, key, value, forecaster)? {
                continue;
            }
            o.delete(key);
        }
        if put(&mut base, key, value, forecaster)? {
            continue;
        }
        if overflow.is_none() {
            overflow = Some(Page::new_overflow_for(&base)?);
        }
        overflow_changed = true;
        let fits = match overflow.as_mut() {
            Some(o) => put(o, key, value, forecaster)?,
            None => false,
        };
        if !fits {
            return Ok(None);
        }
    }
    let overflow_changed = overflow_changed || (overflow.is_some() && !had_overflow);
    Ok(Some(Applied { base, overflow, overflow_changed }))
}

impl Store {
    /// Writes back every dirty record of the page that holds `key`; returns that page's upper
    /// fence (`None`: the last page of the key space), where a sweep continues.
    ///
    /// 1. Locate the page (the index cannot change: the caller holds `maint`) and read it and its
    ///    overflow page. 2. Take the dirty records inside its fences from the cache. 3. Make the
    ///    WAL durable up to their newest lsn (no page ever holds a write the WAL could lose).
    ///    4. Apply them; if the pair is full, reorganize instead (the records go into the post
    ///    segments). 5. Write (double-write first). 6. Mark those records clean unless written
    ///    again meanwhile.
    pub fn write_back_page_of(&self, maint: &mut MaintState, key: &[u8]) -> Result<Option<Key>> {
        self.ensure_first_segment(maint)?;
        let location =
            self.index.read().locate(key).ok_or_else(|| Error::corruption("treeline index", 0, "empty"))?;
        let (page_index, base) = self.find_base_page(&location, key)?;
        let overflow_id = location.entry.overflow_of(page_index);
        let overflow = overflow_id.map(|id| self.data.read_page(id)).transpose()?;
        let upper = base.upper_fence().map(<[u8]>::to_vec);
        let dirty = self.cache.lock().dirty_in(base.lower_fence(), upper.as_deref());
        let Some(newest_lsn) = dirty.iter().map(|r| r.lsn).max() else { return Ok(upper) };
        self.wal.commit(newest_lsn, Durability::Sync)?;
        match apply_dirty(&base, overflow.as_ref(), &dirty, &mut maint.forecaster)? {
            Some(applied) => self.write_page_pair(maint, &location, page_index, overflow_id, applied)?,
            None => self.reorganize(maint, &location.lower, &dirty)?,
        }
        Counters::add(&self.counters.records_written_back, dirty.len() as u64);
        let mut cache = self.cache.lock();
        self.page_write_epoch.fetch_add(1, Release);
        cache.mark_clean(&dirty);
        Ok(upper)
    }

    /// Writes a page pair back: a new overflow page is written to a free page first (no reader
    /// can reach it yet) and entered in the index; pages overwritten in place go to the
    /// double-write area (synced) first, then in place under the segment latch.
    fn write_page_pair(
        &self,
        maint: &mut MaintState,
        location: &Location,
        page_index: usize,
        overflow_id: Option<PageId>,
        applied: Applied,
    ) -> Result<()> {
        let Applied { mut base, overflow, overflow_changed } = applied;
        let base_id = location.entry.base_page(page_index);
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
        in_place.push((base_id, base.into_sealed_bytes()));
        let images: Vec<(PageId, &[u8])> = in_place.iter().map(|(id, b)| (*id, b.as_slice())).collect();
        maint.double_write.append_and_sync(&images)?;
        self.double_write_bytes.store(maint.double_write.bytes(), Relaxed);
        Counters::add(&self.counters.double_write_pages, images.len() as u64);
        let mut index = None;
        if let Some((id, bytes)) = &new_overflow {
            self.data.write_page(*id, bytes)?;
            index = Some(self.index.write());
        }
        let _latch = self.latch_write(location.entry.first_page);
        for (id, bytes) in &in_place {
            self.data.write_page(*id, bytes)?;
        }
        if let (Some(index), Some((id, _))) = (index.as_mut(), &new_overflow) {
            let slot = index.get_mut(&location.lower).and_then(|e| e.overflow.get_mut(page_index));
            *slot.ok_or_else(|| Error::corruption("treeline index", 0, "segment vanished"))? = *id;
        }
        Counters::add(&self.counters.pages_written_back, in_place.len() as u64);
        Ok(())
    }

    /// A store's first write-back creates its first segment: one empty page covering every key.
    fn ensure_first_segment(&self, maint: &mut MaintState) -> Result<()> {
        if !self.index.read().is_empty() {
            return Ok(());
        }
        let slot: SegmentSlot = maint.free.allocate(1)?;
        let production_id = maint.take_production_id();
        let kind = PageKind::SegmentHead { pages: 1, production_id, model: None };
        let page = Page::new(self.page_size, kind, b"", None)?;
        self.data.write_page(slot.first_page, &page.into_sealed_bytes())?;
        self.index.write().insert(Vec::new(), SegmentEntry::new(slot, None, production_id));
        Ok(())
    }

    /// Writes back every dirty record, sweeping the key space once in order: every record dirty
    /// when the sweep starts is written with its value at the time its page is written.
    pub fn write_back_all(&self, maint: &mut MaintState) -> Result<()> {
        let mut from: Key = Vec::new();
        loop {
            let Some(key) = self.cache.lock().first_dirty_at_or_after(&from) else { return Ok(()) };
            match self.write_back_page_of(maint, &key)? {
                Some(upper) => from = upper,
                None => return Ok(()),
            }
        }
    }
}
