//! Space management of the single data file: page ids ↔ file offsets, and free segment slots.
//!
//! Page `id` lives at byte `id · page_size`; page 0 is the file's header, so data pages start at
//! id 1 and 0 can mean "no page" (docs/format/treeline.md). A *slot* is 1, 2, 4, 8 or 16
//! contiguous pages, the space of one segment (or, with 1 page, an overflow page).
//!
//! Reorganization frees its pre segments (paper §4.5 Phase IV) and allocates post segments from
//! the free list of the exact size class first (lowest page id first, so the file stays dense and
//! allocation is deterministic), then by splitting the smallest larger free slot (the rest goes
//! back as power-of-two pieces), and only then grows the file at its end. Free slots are not
//! merged: segments come in few sizes and reorganizations reuse them.

use std::collections::BTreeSet;

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

    fn overlaps(&self, other: &SegmentSlot) -> bool {
        self.first_page < other.end() && other.first_page < self.end()
    }
}

fn class(pages: u8) -> Option<usize> {
    SEGMENT_PAGE_COUNTS.iter().position(|&p| p == pages)
}

/// Free slots by size class over one data file, plus the file's end.
#[derive(Clone, Debug, PartialEq)]
pub struct FreeSpace {
    /// First page id past the end of the file.
    end: PageId,
    /// `free[c]`: first page ids of the free slots of `SEGMENT_PAGE_COUNTS[c]` pages.
    free: [BTreeSet<PageId>; 5],
}

impl Default for FreeSpace {
    fn default() -> Self {
        FreeSpace::new()
    }
}

impl FreeSpace {
    /// An empty file (only the reserved header page).
    pub fn new() -> FreeSpace {
        FreeSpace { end: RESERVED_PAGES, free: Default::default() }
    }

    /// A file of `end` pages (as found by recovery), with no free slots yet; recovery then
    /// [`release`](FreeSpace::release)s the slots of invalidated segments.
    pub fn with_end(end: PageId) -> FreeSpace {
        FreeSpace { end: end.max(RESERVED_PAGES), free: Default::default() }
    }

    /// First page id past the end of the file.
    pub fn end(&self) -> PageId {
        self.end
    }

    /// Free slots of `pages` pages.
    pub fn free_slots(&self, pages: u8) -> usize {
        class(pages).and_then(|c| self.free.get(c)).map_or(0, BTreeSet::len)
    }

    /// Total pages in free slots.
    pub fn free_pages(&self) -> u64 {
        SEGMENT_PAGE_COUNTS.iter().zip(&self.free).map(|(&p, set)| u64::from(p) * set.len() as u64).sum()
    }

    /// A slot of `pages` (1, 2, 4, 8, 16) pages: reused exactly, split from a larger free slot,
    /// or appended at the file's end.
    pub fn allocate(&mut self, pages: u8) -> Result<SegmentSlot> {
        let c = class(pages).ok_or_else(|| Error::invalid(format!("treeline slot of {pages} pages")))?;
        if let Some(first) = self.free.get_mut(c).and_then(BTreeSet::pop_first) {
            return Ok(SegmentSlot { first_page: first, pages });
        }
        for larger in c + 1..SEGMENT_PAGE_COUNTS.len() {
            if let Some(first) = self.free.get_mut(larger).and_then(BTreeSet::pop_first) {
                // Keep the head, return the tail as halves: 16 → used 2 + free 2, 4, 8.
                for piece in c..larger {
                    let size = SEGMENT_PAGE_COUNTS.get(piece).copied().unwrap_or(1);
                    if let Some(set) = self.free.get_mut(piece) {
                        set.insert(first + u64::from(size));
                    }
                }
                return Ok(SegmentSlot { first_page: first, pages });
            }
        }
        let first = self.end;
        self.end = first
            .checked_add(u64::from(pages))
            .ok_or_else(|| Error::invalid("treeline data file page ids exhausted"))?;
        Ok(SegmentSlot { first_page: first, pages })
    }

    /// Returns a slot to its free list. Refused (nothing changes) if the page count is not a
    /// segment size, the slot reaches into the reserved pages or past the file's end, or it
    /// overlaps a slot that is already free (a double free).
    pub fn release(&mut self, slot: SegmentSlot) -> Result<()> {
        let c = class(slot.pages)
            .ok_or_else(|| Error::invalid(format!("treeline slot of {} pages", slot.pages)))?;
        if slot.first_page < RESERVED_PAGES || slot.end() > self.end {
            return Err(Error::invalid(format!("treeline slot {slot:?} is outside the data pages")));
        }
        if let Some(other) = self.overlapping_free(&slot) {
            return Err(Error::invalid(format!("treeline slot {slot:?} overlaps free slot {other:?}")));
        }
        if let Some(set) = self.free.get_mut(c) {
            set.insert(slot.first_page);
        }
        Ok(())
    }

    /// A free slot sharing a page with `slot`, if any. Free slots are at most 16 pages, so only
    /// starts in `first − 15 .. end` can overlap.
    fn overlapping_free(&self, slot: &SegmentSlot) -> Option<SegmentSlot> {
        let from = slot.first_page.saturating_sub(15);
        SEGMENT_PAGE_COUNTS.iter().zip(&self.free).find_map(|(&pages, set)| {
            set.range(from..slot.end())
                .map(|&first_page| SegmentSlot { first_page, pages })
                .find(|free| free.overlaps(slot))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
    fn grows_then_reuses_exact_class_lowest_first() {
        let mut fs = FreeSpace::new();
        let a = fs.allocate(4).unwrap();
        let b = fs.allocate(1).unwrap();
        let c = fs.allocate(4).unwrap();
        assert_eq!((a.first_page, b.first_page, c.first_page, fs.end()), (1, 5, 6, 10));
        fs.release(c).unwrap();
        fs.release(a).unwrap();
        assert_eq!(fs.free_pages(), 8);
        assert_eq!(fs.allocate(4).unwrap(), a, "lowest id first");
        assert_eq!(fs.allocate(4).unwrap(), c);
        assert_eq!(fs.allocate(4).unwrap().first_page, 10, "then growth");
    }

    #[test]
    fn splits_a_larger_slot_before_growing() {
        let mut fs = FreeSpace::new();
        let big = fs.allocate(16).unwrap();
        fs.release(big).unwrap();
        let s = fs.allocate(2).unwrap();
        assert_eq!(s, SegmentSlot { first_page: 1, pages: 2 });
        assert_eq!((fs.free_slots(2), fs.free_slots(4), fs.free_slots(8), fs.free_slots(16)), (1, 1, 1, 0));
        assert_eq!(fs.free_pages(), 14);
        assert_eq!(fs.allocate(8).unwrap().first_page, 9);
        assert_eq!(fs.allocate(4).unwrap().first_page, 5);
        assert_eq!(fs.allocate(2).unwrap().first_page, 3);
        assert_eq!(fs.end(), 17, "no growth needed");
    }

    #[test]
    fn refuses_bad_releases() {
        let mut fs = FreeSpace::with_end(20);
        assert!(fs.allocate(3).is_err());
        assert!(fs.release(SegmentSlot { first_page: 0, pages: 1 }).is_err(), "reserved page");
        assert!(fs.release(SegmentSlot { first_page: 18, pages: 4 }).is_err(), "past the end");
        assert!(fs.release(SegmentSlot { first_page: 4, pages: 5 }).is_err());
        fs.release(SegmentSlot { first_page: 4, pages: 8 }).unwrap();
        assert!(fs.release(SegmentSlot { first_page: 4, pages: 8 }).is_err(), "double free");
        assert!(fs.release(SegmentSlot { first_page: 11, pages: 2 }).is_err(), "overlaps the tail");
        assert!(fs.release(SegmentSlot { first_page: 2, pages: 4 }).is_err(), "overlaps the head");
        fs.release(SegmentSlot { first_page: 12, pages: 4 }).unwrap();
        assert_eq!(fs.free_pages(), 12);
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
