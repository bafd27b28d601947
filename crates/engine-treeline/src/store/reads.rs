//! Point reads (paper §4.1, "Lookups"): the record cache, else the key's base page and then its
//! overflow page; a value read from a page is cached clean at the middle priority.

use std::sync::atomic::Ordering::Acquire;

use strata_core::{Error, Result, Value};

use super::{Counters, Store};
use crate::data_file::FILE_NAME;
use crate::free_space::{page_offset, PageId};
use crate::index::{Location, SegmentEntry};
use crate::page::{Page, PageKind};

/// Clock steps a read admission may spend evicting clean records.
const ADMISSION_EVICTION_STEPS: usize = 64;

impl Store {
    pub fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        self.check_usable()?;
        if let Some(cached) = self.cache.get(key) {
            self.count_read(key, cached.as_ref());
            return Ok(cached);
        }
        let epoch = self.page_write_epoch.load(Acquire);
        let from_pages = self.read_from_pages(key)?;
        let value = self.cache.with_shard(key, |cache| match cache.get(key) {
            // A write since the miss is newer than the pages.
            Some(cached) => cached,
            None => {
                // Cache what the pages said only if no write-back ran meanwhile (it could have
                // written a newer version and had it evicted since).
                if let Some(v) = &from_pages {
                    if self.page_write_epoch.load(Acquire) == epoch {
                        cache.admit_clean(key.to_vec(), v.clone());
                        cache.evict_clean_only(ADMISSION_EVICTION_STEPS);
                    }
                }
                from_pages
            }
        });
        self.count_read(key, value.as_ref());
        Ok(value)
    }

    fn count_read(&self, key: &[u8], value: Option<&Value>) {
        if let Some(v) = value {
            Counters::add(&self.counters.user_bytes_read, (key.len() + v.len()) as u64);
        }
    }

    /// The value of `key` in the data pages (base page, then overflow page; a blob run read
    /// through its reference), under the index's read lock and the segment's latch.
    pub fn read_from_pages(&self, key: &[u8]) -> Result<Option<Value>> {
        let index = self.index.read();
        let Some(location) = index.locate(key) else { return Ok(None) };
        let _latch = self.latch_read(location.entry.first_page);
        let (page_index, base) = self.find_base_page(&location, key)?;
        if let Some(value) = base.get(key) {
            return self.resolve(key, value).map(Some);
        }
        match location.entry.overflow_of(page_index) {
            Some(id) => {
                let overflow = self.data.read_page(id)?;
                self.check_overflow_identity(&overflow, id, &base)?;
                overflow.get(key).map(|value| self.resolve(key, value)).transpose()
            }
            None => Ok(None),
        }
    }

    /// Base page `index` of the segment `entry` must say so in its header: a head page with the
    /// entry's page count and production id, or member `index` of that many pages. A page id
    /// damaged in the checkpoint (its checksum made valid again) could otherwise lead to a free
    /// page still holding records of another place or an older time (fuzzing,
    /// `treeline_checkpoint`).
    pub(super) fn check_page_identity(
        &self,
        page: &Page,
        id: PageId,
        entry: &SegmentEntry,
        index: usize,
    ) -> Result<()> {
        let pages = entry.pages;
        let ok = match page.kind() {
            PageKind::SegmentHead { pages: p, production_id, .. } => {
                index == 0 && p == pages && production_id == entry.production_id
            }
            PageKind::SegmentMember { pages: p, index: i } => usize::from(i) == index && p == pages,
            PageKind::Overflow => false,
        };
        self.identity_result(ok, id, || {
            format!("page {id} is not page {index} of the segment the index places it in")
        })
    }

    /// Pair `i` of `entry`'s overflow page, if it has one, read and checked against `base`.
    pub(super) fn read_checked_overflow(
        &self,
        entry: &SegmentEntry,
        i: usize,
        base: &Page,
    ) -> Result<Option<Page>> {
        let Some(id) = entry.overflow_of(i) else { return Ok(None) };
        let overflow = self.data.read_page(id)?;
        self.check_overflow_identity(&overflow, id, base)?;
        Ok(Some(overflow))
    }

    /// An overflow page must be one, with its base page's fences.
    pub(super) fn check_overflow_identity(&self, overflow: &Page, id: PageId, base: &Page) -> Result<()> {
        let ok = overflow.kind() == PageKind::Overflow
            && overflow.lower_fence() == base.lower_fence()
            && overflow.upper_fence() == base.upper_fence();
        self.identity_result(ok, id, || format!("page {id} is not the overflow page of its base page"))
    }

    fn identity_result(&self, ok: bool, id: PageId, what: impl FnOnce() -> String) -> Result<()> {
        if ok {
            return Ok(());
        }
        Err(Error::corruption(FILE_NAME, page_offset(id, self.page_size()).unwrap_or(0), what()))
    }

    /// The base page whose fences hold `key`: the one the model picks, or a neighbour if the
    /// picked page's fences say so (they agree by construction; this only guards the floating
    /// point evaluation). A key no page of its segment covers is corruption.
    pub fn find_base_page(&self, location: &Location, key: &[u8]) -> Result<(usize, Page)> {
        self.find_base_page_via(location, key, &mut |id| self.data.read_page(id))
    }

    /// `find_base_page` reading pages through `read` (write-back passes pages it prefetched).
    pub fn find_base_page_via(
        &self,
        location: &Location,
        key: &[u8],
        read: &mut dyn FnMut(PageId) -> Result<Page>,
    ) -> Result<(usize, Page)> {
        let pages = usize::from(location.entry.pages);
        let mut i = location.page_index;
        for _ in 0..pages {
            let id = location.entry.base_page(i);
            let page = read(id)?;
            self.check_page_identity(&page, id, &location.entry, i)?;
            if page.covers(key) {
                return Ok((i, page));
            }
            let below = key < page.lower_fence();
            match (below, i) {
                (true, 0) => break,
                (true, _) => i -= 1,
                (false, _) if i + 1 < pages => i += 1,
                (false, _) => break,
            }
        }
        let offset = page_offset(location.entry.base_page(i), self.page_size()).unwrap_or(0);
        Err(Error::corruption(FILE_NAME, offset, "no page of the key's segment covers the key"))
    }
}
