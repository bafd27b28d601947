//! The padding of hot-log pages compaction released (truncated away), kept while a record still
//! in the hot log could link into it.
//!
//! A hash chain's link (`prev_address`) always names a record, never padding. When records of a
//! hot page are lost on disk (a lost write leaves zeros), a compaction round reads them as the
//! padding that may end any hot page early, skips them and truncates the page. A chain walk
//! that then crosses below `begin` stops there ("not in the hot log") and takes the key's older
//! cold value or nothing. A link into the round's own padding is caught in the round, and so is
//! an index entry; a link from a newer record above the round (keys sharing an index entry) is
//! caught here: a read below `begin` at an address inside released padding is corruption.
//!
//! Which regions can still be linked into: only records already in the hot log when the page
//! was released. A record appended later links to its chain's head only if that head is at or
//! above `begin`, which by then is past the released page (`live_prev` in ops.rs). So a region is
//! dropped once `begin` passes the tail the log had when its page was released. (A writer that
//! chose its link before the release and reserved its address long after it is not covered: a
//! loss behind such a link goes unnoticed, as it did before this check.)
//!
//! Memory: one region (24 bytes) per released page that ended in padding, while linkable: up to
//! the hot log's pages on disk. The options give it that many regions, in at most 1/32 of the hot
//! log's memory share and taken from it (`Resolved::released_padding_regions`), allocated up
//! front; beyond them the oldest regions are dropped (links into them go unchecked). Counted in
//! the hot log's `memory_bytes`.

use std::collections::VecDeque;

use parking_lot::RwLock;

/// A released page's padding `[start, end)`, linkable by records below `linkable_below`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Region {
    start: u64,
    end: u64,
    linkable_below: u64,
}

/// Regions in address order (pages are released in order, and the tail only grows, so
/// `linkable_below` never decreases along the queue).
pub struct ReleasedPadding {
    regions: RwLock<VecDeque<Region>>,
    max_regions: usize,
}

pub const REGION_BYTES: u64 = std::mem::size_of::<Region>() as u64;

impl ReleasedPadding {
    /// Keeps at most `max_regions` regions (at least one), allocated now.
    pub fn new(max_regions: usize) -> ReleasedPadding {
        let max_regions = max_regions.max(1);
        ReleasedPadding { regions: RwLock::new(VecDeque::with_capacity(max_regions)), max_regions }
    }

    /// Notes the padding `[start, end)` of a page about to be released; it stays until
    /// `linkable_below` sets the tail it is linkable below.
    pub fn note(&self, start: u64, end: u64) {
        if start < end {
            let mut regions = self.regions.write();
            if regions.len() >= self.max_regions {
                regions.pop_front();
            }
            regions.push_back(Region { start, end, linkable_below: u64::MAX });
        }
    }

    /// Records below `tail` may link into the region noted last (the log's tail once its page
    /// was released).
    pub fn linkable_below(&self, tail: u64) {
        if let Some(last) = self.regions.write().back_mut().filter(|r| r.linkable_below == u64::MAX) {
            last.linkable_below = tail;
        }
    }

    /// Whether `address` lies in released padding that a record could still link into.
    pub fn contains(&self, address: u64) -> bool {
        let regions = self.regions.read();
        let after = regions.partition_point(|r| r.start <= address);
        after > 0 && regions.get(after - 1).is_some_and(|r| address < r.end)
    }

    /// Drops the regions no record at or above `begin` can link into.
    pub fn forget_below(&self, begin: u64) {
        let mut regions = self.regions.write();
        while regions.front().is_some_and(|r| r.linkable_below <= begin) {
            regions.pop_front();
        }
    }

    pub fn memory_bytes(&self) -> u64 {
        self.regions.read().capacity() as u64 * REGION_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_a_region_until_begin_passes_the_tail_it_was_released_at() {
        let padding = ReleasedPadding::new(8);
        padding.note(4000, 4096);
        padding.linkable_below(20_000);
        padding.note(8100, 8192);
        padding.note(9000, 9000); // empty: not noted
        assert!(!padding.contains(3999));
        assert!(padding.contains(4000) && padding.contains(4095));
        assert!(!padding.contains(4096) && !padding.contains(8099));
        assert!(padding.contains(8191) && !padding.contains(9000));
        padding.forget_below(19_999);
        assert!(padding.contains(4000), "a record below the release-time tail may still link there");
        padding.forget_below(20_000);
        assert!(!padding.contains(4000));
        padding.forget_below(1 << 40);
        assert!(padding.contains(8100), "linkable until its tail is set");
        padding.linkable_below(30_000);
        padding.forget_below(30_000);
        assert!(!padding.contains(8100));
    }

    #[test]
    fn drops_the_oldest_region_beyond_its_count() {
        let padding = ReleasedPadding::new(2);
        for page in 1..=3u64 {
            padding.note(page * 4096 - 10, page * 4096);
            padding.linkable_below(1 << 20);
        }
        assert!(!padding.contains(4090), "the oldest region was dropped");
        assert!(padding.contains(8190) && padding.contains(12_280));
        assert!(padding.memory_bytes() < 4 * REGION_BYTES, "the queue never grows past its regions");
    }
}
