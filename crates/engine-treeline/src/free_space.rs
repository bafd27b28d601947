//! Space management of the single data file: page ids ↔ file offsets, and free segment slots.
//!
//! Page `id` lives at byte `id · page_size`; page 0 is the file's header, so data pages start at
//! id 1 and 0 can mean "no page" (docs/format/treeline.md). A *slot* is 1, 2, 4, 8 or 16
//! contiguous pages, the space of one segment (or, with 1 page, an overflow page).
//!
//! Reorganization frees its pre segments (paper §4.5 Phase IV). Free pages are kept as maximal
//! *runs* of contiguous pages: a released slot merges with the free runs on either side, and a
//! run that reaches the file's end moves the end down instead (the checkpoint then gives those
//! pages back to the file system: `Store::checkpoint`). A slot is allocated from the smallest run
//! that holds it (the lowest such run among equals, so the file stays dense and allocation is
//! deterministic), its rest staying free, and only when no run is large enough from the file's
//! end. Merging matters: reorganizations free slots of every size, and a store filled by puts
//! frees thousands of small ones that, never merged, could not take the 8- and 16-page segments
//! planned later, so the file grew at its end while 30% of it was free.

use std::collections::{BTreeMap, BTreeSet};

use strata_core::{Error, Result};

use crate::page::layout::SEGMENT_PAGE_COUNTS;
use crate::page::PageSize;

/// A page's number in the data file; page `id` lives at byte `id * page_size`. Id 0 is reserved.
pub type PageId = u64;

/// Pages at the start of the file that never hold data (the file header).
pub const RESERVED_PAGES: u64 = 1;

/// File offset of page `id`, or `None` if it overflows `u64`.
pub fn page_offset(id: PageId, size: PageSize) -> Option<u64> {
    id.checked_mul(size.bytes() as u64)
}

/// Page id at file offset `offset`, or `None` if the offset is not page-aligned.
pub fn page_at_offset(offset: u64, size: PageSize) -> Option<PageId> {
    let bytes = size.bytes() as u64;
    offset.is_multiple_of(bytes).then_some(offset / bytes)
}

/// `pages` contiguous pages starting at `first_page`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SegmentSlot {
    pub first_page: PageId,
    pub pages: u8,
}

impl SegmentSlot {
    /// The id of the slot's `index`-th page, if it has one.
    pub fn page(&self, index: usize) -> Option<PageId> {
        (index < usize::from(self.pages)).then(|| self.first_page + index as u64)
    }

    /// One past the slot's last page.
    pub fn end(&self) -> PageId {
        self.first_page + u64::from(self.pages)
    }

    #[cfg(test)]
    fn overlaps(&self, other: &SegmentSlot) -> bool {
        self.first_page < other.end() && other.first_page < self.end()
    }
}

/// Free runs over one data file, plus the file's end.
#[derive(Clone, Debug, PartialEq)]
pub struct FreeSpace {
    /// First page id past the end of the file.
    end: PageId,
    /// Free runs, first page → pages. Maximal (no two adjacent) and none reaches `end`.
    runs: BTreeMap<PageId, u64>,
    /// The same runs by (pages, first page): the smallest run that fits, lowest first.
    by_size: BTreeSet<(u64, PageId)>,
}

impl Default for FreeSpace {
    fn default() -> Self {
        FreeSpace::new()
    }
}

impl FreeSpace {
    /// An empty file (only the reserved header page).
    pub fn new() -> FreeSpace {
        FreeSpace::with_end(RESERVED_PAGES)
    }

    /// A file of `end` pages (as found by recovery), with no free pages yet; recovery then
    /// [`release_run`](FreeSpace::release_run)s the pages no segment holds.
    pub fn with_end(end: PageId) -> FreeSpace {
        FreeSpace { end: end.max(RESERVED_PAGES), runs: BTreeMap::new(), by_size: BTreeSet::new() }
    }

    /// First page id past the end of the file.
    pub fn end(&self) -> PageId {
        self.end
    }

    /// Free runs (maximal runs of contiguous free pages below the end).
    pub fn free_runs(&self) -> usize {
        self.runs.len()
    }

    /// Whether pages `first .. first + pages` are all free (below the end, in one free run).
    pub fn is_free(&self, first: PageId, pages: u64) -> bool {
        self.runs
            .range(..=first)
            .next_back()
            .is_some_and(|(&run, &run_pages)| first.saturating_add(pages) <= run + run_pages)
    }

    /// Total free pages below the end.
    pub fn free_pages(&self) -> u64 {
        self.runs.values().sum()
    }

    /// A slot of `pages` (1, 2, 4, 8, 16) pages: the head of the smallest free run that holds
    /// it, or appended at the file's end.
    pub fn allocate(&mut self, pages: u8) -> Result<SegmentSlot> {
        if !SEGMENT_PAGE_COUNTS.contains(&pages) {
            return Err(Error::invalid(format!("treeline slot of {pages} pages")));
        }
        Ok(SegmentSlot { first_page: self.allocate_run(u64::from(pages))?, pages })
    }

    /// `pages` (>= 1) contiguous pages for a blob run: the head of the smallest free run that
    /// holds them, or appended at the file's end. Returns the first page.
    pub fn allocate_run(&mut self, pages: u64) -> Result<PageId> {
        if pages == 0 {
            return Err(Error::invalid("treeline run of 0 pages"));
        }
        if let Some(&(run_pages, first)) = self.by_size.range((pages, 0)..).next() {
            self.remove_run(first, run_pages);
            if run_pages > pages {
                self.insert_run(first + pages, run_pages - pages);
            }
            return Ok(first);
        }
        let first = self.end;
        self.end = first
            .checked_add(pages)
            .ok_or_else(|| Error::invalid("treeline data file page ids exhausted"))?;
        Ok(first)
    }

    /// Returns a slot to the free pages. Refused (nothing changes) if the page count is not a
    /// segment size, the slot reaches into the reserved pages or past the file's end, or it
    /// overlaps free pages (a double free).
    pub fn release(&mut self, slot: SegmentSlot) -> Result<()> {
        if !SEGMENT_PAGE_COUNTS.contains(&slot.pages) {
            return Err(Error::invalid(format!("treeline slot of {} pages", slot.pages)));
        }
        self.release_run(slot.first_page, u64::from(slot.pages))
    }

    /// Returns `pages` (>= 1) contiguous pages from `first` to the free pages, merged with the
    /// free runs beside them; a run reaching the end moves the end down. Refused like `release`.
    pub fn release_run(&mut self, first: PageId, pages: u64) -> Result<()> {
        let end = first.checked_add(pages).filter(|_| pages > 0);
        let Some(end) = end.filter(|&e| first >= RESERVED_PAGES && e <= self.end) else {
            return Err(Error::invalid(format!(
                "treeline pages {first}+{pages} are outside the data pages (end {})",
                self.end
            )));
        };
        if let Some((other, other_pages)) = self.overlapping_run(first, end) {
            return Err(Error::invalid(format!(
                "treeline pages {first}+{pages} overlap free pages {other}+{other_pages}"
            )));
        }
        let (mut first, mut end) = (first, end);
        if let Some((&before, &before_pages)) = self.runs.range(..first).next_back() {
            if before + before_pages == first {
                self.remove_run(before, before_pages);
                first = before;
            }
        }
        if let Some(&after_pages) = self.runs.get(&end) {
            self.remove_run(end, after_pages);
            end += after_pages;
        }
        if end == self.end {
            self.end = first;
        } else {
            self.insert_run(first, end - first);
        }
        Ok(())
    }

    /// A free run sharing a page with `first .. end`, if any.
    fn overlapping_run(&self, first: PageId, end: PageId) -> Option<(PageId, u64)> {
        let before = self.runs.range(..=first).next_back().filter(|(&f, &p)| f + p > first);
        let inside = self.runs.range(first..end).next();
        before.or(inside).map(|(&f, &p)| (f, p))
    }

    fn insert_run(&mut self, first: PageId, pages: u64) {
        self.runs.insert(first, pages);
        self.by_size.insert((pages, first));
    }

    fn remove_run(&mut self, first: PageId, pages: u64) {
        self.runs.remove(&first);
        self.by_size.remove(&(pages, first));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn is_free_asks_for_the_whole_range_in_one_run() {
        let mut free = FreeSpace::new();
        let a = free.allocate(4).unwrap();
        let b = free.allocate(4).unwrap();
        let _c = free.allocate(1).unwrap();
        free.release(a).unwrap();
        free.release(b).unwrap();
        assert!(free.is_free(a.first_page, 8), "a and b merged into one run");
        assert!(free.is_free(a.first_page + 2, 6) && !free.is_free(a.first_page, 9));
        assert!(!free.is_free(free.end(), 1), "past the end");
    }

    #[test]
    fn page_ids_and_offsets() {
        let size = PageSize::new(8192).unwrap();
        assert_eq!(page_offset(3, size), Some(24576));
        assert_eq!(page_at_offset(24576, size), Some(3));
        assert_eq!(page_at_offset(24577, size), None);
        assert_eq!(page_offset(u64::MAX, size), None);
        let slot = SegmentSlot { first_page: 5, pages: 4 };
        assert_eq!((slot.page(0), slot.page(3), slot.page(4), slot.end()), (Some(5), Some(8), None, 9));
    }

    #[test]
    fn grows_then_reuses_the_smallest_run_lowest_first() {
        let mut fs = FreeSpace::new();
        let a = fs.allocate(4).unwrap();
        let b = fs.allocate(1).unwrap();
        let c = fs.allocate(4).unwrap();
        let d = fs.allocate(1).unwrap();
        assert_eq!((a.first_page, b.first_page, c.first_page, d.first_page, fs.end()), (1, 5, 6, 10, 11));
        fs.release(c).unwrap();
        fs.release(a).unwrap();
        assert_eq!((fs.free_pages(), fs.free_runs()), (8, 2));
        assert_eq!(fs.allocate(4).unwrap(), a, "lowest id first");
        assert_eq!(fs.allocate(2).unwrap().first_page, 6, "the head of a larger run");
        assert_eq!(fs.allocate(2).unwrap().first_page, 8, "its rest");
        assert_eq!(fs.allocate(4).unwrap().first_page, 11, "then growth");
    }

    /// Released neighbours merge into one run that takes a larger slot; a run reaching the end
    /// moves the end down (those pages go back to the file system at the next checkpoint).
    #[test]
    fn neighbours_merge_and_the_tail_is_given_back() {
        let mut fs = FreeSpace::new();
        let slots: Vec<SegmentSlot> = (0..8).map(|_| fs.allocate(2).unwrap()).collect();
        let tail = fs.allocate(1).unwrap();
        for slot in &slots[..4] {
            fs.release(*slot).unwrap();
        }
        assert_eq!((fs.free_pages(), fs.free_runs()), (8, 1));
        assert_eq!(fs.allocate(8).unwrap().first_page, 1, "four 2-page slots make one 8-page slot");
        fs.release(slots[7]).unwrap();
        fs.release(tail).unwrap();
        assert_eq!((fs.end(), fs.free_pages()), (slots[7].first_page, 0), "the tail run moved the end");
        fs.release(slots[5]).unwrap();
        fs.release(slots[6]).unwrap();
        assert_eq!(fs.end(), slots[5].first_page);
        assert_eq!(fs.free_runs(), 0);
    }

    #[test]
    fn splits_a_larger_run_before_growing() {
        let mut fs = FreeSpace::new();
        let big = fs.allocate(16).unwrap();
        let _keep_the_end = fs.allocate(1).unwrap();
        fs.release(big).unwrap();
        assert_eq!(fs.allocate(2).unwrap(), SegmentSlot { first_page: 1, pages: 2 });
        assert_eq!(fs.free_pages(), 14);
        assert_eq!(fs.allocate(8).unwrap().first_page, 3);
        assert_eq!(fs.allocate(4).unwrap().first_page, 11);
        assert_eq!(fs.allocate(2).unwrap().first_page, 15);
        assert_eq!(fs.end(), 18, "no growth needed");
    }

    #[test]
    fn refuses_bad_releases() {
        let mut fs = FreeSpace::with_end(20);
        assert!(fs.allocate(3).is_err());
        assert!(fs.release(SegmentSlot { first_page: 0, pages: 1 }).is_err(), "reserved page");
        assert!(fs.release(SegmentSlot { first_page: 18, pages: 4 }).is_err(), "past the end");
        assert!(fs.release(SegmentSlot { first_page: 4, pages: 5 }).is_err());
        assert!(fs.release_run(4, 0).is_err(), "no pages");
        fs.release(SegmentSlot { first_page: 4, pages: 8 }).unwrap();
        assert!(fs.release(SegmentSlot { first_page: 4, pages: 8 }).is_err(), "double free");
        assert!(fs.release(SegmentSlot { first_page: 11, pages: 2 }).is_err(), "overlaps the tail");
        assert!(fs.release(SegmentSlot { first_page: 2, pages: 4 }).is_err(), "overlaps the head");
        fs.release(SegmentSlot { first_page: 12, pages: 4 }).unwrap();
        assert_eq!((fs.free_pages(), fs.free_runs()), (12, 1));
        assert_eq!(fs.end(), 20);
    }

    proptest! {
        /// Allocated slots never overlap each other, free slots or the reserved page, and every
        /// page below the end is either allocated or free (no leaks).
        #[test]
        fn allocations_never_overlap(ops in proptest::collection::vec((any::<bool>(), 0usize..5, any::<prop::sample::Index>()), 1..200)) {
            let mut fs = FreeSpace::new();
            let mut live: Vec<SegmentSlot> = Vec::new();
            for (alloc, c, pick) in ops {
                if alloc || live.is_empty() {
                    let slot = fs.allocate(SEGMENT_PAGE_COUNTS[c]).unwrap();
                    prop_assert!(slot.first_page >= RESERVED_PAGES && slot.end() <= fs.end());
                    prop_assert!(live.iter().all(|o| !o.overlaps(&slot)), "{:?} overlaps", slot);
                    live.push(slot);
                } else {
                    let slot = live.swap_remove(pick.index(live.len()));
                    fs.release(slot).unwrap();
                    prop_assert!(fs.release(slot).is_err());
                }
                let used: u64 = live.iter().map(|s| u64::from(s.pages)).sum();
                prop_assert_eq!(used + fs.free_pages() + RESERVED_PAGES, fs.end());
            }
        }
    }
}
