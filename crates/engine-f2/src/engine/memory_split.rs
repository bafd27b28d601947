//! The split of memory between the hot log's in-memory pages and the read cache, chosen while
//! the store runs (F2 §8.5 names it as future work: "techniques to automatically tune the size
//! of the read cache and in-memory hot log"; its Fig 14 gains up to 27% on C by hand).
//!
//! The hot log lends whole steps of its window to the read cache and takes them back, by the
//! marginal hits of each side measured over windows of [`WINDOW_OPS`] operations:
//! - what the read cache would gain from one more step: **ghost hits**, disk reads of keys the
//!   cache evicted within its last step of evictions (their hashes are remembered);
//! - what it would lose from one step less: hits in its oldest step;
//! - what the hot log would lose from one step less: reads served from its oldest in-memory
//!   step, and in-place updates in the oldest step of its mutable region;
//! - what it would gain from one more: reads from disk of the step just below its head, and
//!   updates that had to append because the key's record had just turned read-only.
//!
//! A step moves when one side's gain beats the other's loss by a quarter and by at least
//! [`MIN_EVIDENCE`] events; the maintenance worker resizes (`Inner::rebalance_memory`; without one, the operation that
//! ends the window): the
//! hot log's window shrinks (its oldest pages written out and evicted) before the read cache
//! grows, and the read cache shrinks before the hot log's window grows back, so the two never
//! hold more than their shares together. Nothing is lent beyond the hot log's last two pages.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;
use strata_core::Result;

use super::ops::Applied;
use super::Inner;
use crate::record::RecordView;

/// Operations (gets and applied writes) per decision.
pub const WINDOW_OPS: u64 = 1 << 12;
/// Events a gain must count in a window before memory moves for it.
pub const MIN_EVIDENCE: u64 = 32;
/// At most this many steps make up the hot log's share (a step is at least one page).
const STEPS_PER_SHARE: u64 = 32;

/// The signals and the amount lent; shared by the get and write paths (counting) and the worker
/// (resizing).
#[derive(Default)]
pub struct MemorySplit {
    /// 0 when the split is fixed (`F2Options::memory_split`) or there is no read cache.
    step_bytes: AtomicU64,
    max_lent_bytes: AtomicU64,
    /// Bytes of the hot log's window lent to the read cache now (a multiple of the step).
    lent_bytes: AtomicU64,
    ops: AtomicU64,
    read_cache_ghost_hits: AtomicU64,
    read_cache_tail_hits: AtomicU64,
    hot_tail_hits: AtomicU64,
    hot_ghost_hits: AtomicU64,
    ghost: Mutex<Ghost>,
    pub moves_to_read_cache: AtomicU64,
    pub moves_to_hot_log: AtomicU64,
}

/// Hashes of the records the read cache evicted most recently: two generations, each covering
/// about a step of evicted bytes (so together between one and two steps).
#[derive(Default)]
struct Ghost {
    current: HashSet<u64>,
    current_bytes: u64,
    previous: HashSet<u64>,
}

/// Which way a window's decision moved memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    ToReadCache,
    ToHotLog,
}

impl MemorySplit {
    /// Turns the split on: steps of a 32nd of `hot_log_bytes` (rounded up to whole hot-log
    /// pages), lending at most `hot_log_bytes` less two pages and at most `cache_growth_bytes`
    /// (what the read cache can take).
    pub fn enable(&self, hot_log_bytes: u64, hot_page_bytes: u64, cache_growth_bytes: u64) {
        let step = (hot_log_bytes / STEPS_PER_SHARE).div_ceil(hot_page_bytes).max(1) * hot_page_bytes;
        let lendable = hot_log_bytes.saturating_sub(2 * hot_page_bytes).min(cache_growth_bytes);
        let max_lent = lendable / step * step;
        self.step_bytes.store(step, Relaxed);
        self.max_lent_bytes.store(max_lent, Relaxed);
    }

    /// The step, or 0 when the split is fixed (then nothing is counted).
    pub fn step_bytes(&self) -> u64 {
        self.step_bytes.load(Relaxed)
    }

    pub fn lent_bytes(&self) -> u64 {
        self.lent_bytes.load(Relaxed)
    }

    /// Counts one operation; true when it ends a window (the caller then calls [`Self::decide`]).
    pub fn count_op(&self) -> bool {
        self.step_bytes() != 0 && (self.ops.fetch_add(1, Relaxed) + 1).is_multiple_of(WINDOW_OPS)
    }

    pub fn read_cache_tail_hit(&self) {
        self.read_cache_tail_hits.fetch_add(1, Relaxed);
    }

    pub fn hot_tail_hit(&self) {
        self.hot_tail_hits.fetch_add(1, Relaxed);
    }

    pub fn hot_ghost_hit(&self) {
        self.hot_ghost_hits.fetch_add(1, Relaxed);
    }

    /// The read cache evicted a record of `stored_bytes` with key hash `hash`.
    pub fn remember_evicted(&self, hash: u64, stored_bytes: u64) {
        let step = self.step_bytes();
        if step == 0 {
            return;
        }
        let mut ghost = self.ghost.lock();
        ghost.current.insert(hash);
        ghost.current_bytes += stored_bytes;
        if ghost.current_bytes >= step {
            ghost.previous = std::mem::take(&mut ghost.current);
            ghost.current_bytes = 0;
        }
    }

    /// A get read the record of `hash` from disk: a ghost hit if the read cache evicted it lately.
    pub fn note_disk_read(&self, hash: u64) {
        if self.step_bytes() == 0 {
            return;
        }
        let ghost = self.ghost.lock();
        if ghost.current.contains(&hash) || ghost.previous.contains(&hash) {
            self.read_cache_ghost_hits.fetch_add(1, Relaxed);
        }
    }

    /// Ends a window: compares the signals, moves one step if one side clearly gains more than
    /// the other loses (never past `max_lent`, reduced by `other_lent_bytes` that the hot log
    /// already lends elsewhere, and a step back whatever the signals while the loan is past
    /// that), and resets them.
    pub fn decide(&self, other_lent_bytes: u64) -> Option<Move> {
        let step = self.step_bytes();
        let take = |c: &AtomicU64| c.swap(0, Relaxed);
        let (cache_gain, cache_loss) = (take(&self.read_cache_ghost_hits), take(&self.read_cache_tail_hits));
        let (hot_loss, hot_gain) = (take(&self.hot_tail_hits), take(&self.hot_ghost_hits));
        let clearly_beats = |gain: u64, loss: u64| gain >= MIN_EVIDENCE && gain * 4 > loss * 5;
        let lent = self.lent_bytes();
        let room = self.max_lent_bytes.load(Relaxed).saturating_sub(other_lent_bytes);
        // The hot index grew into the hot log's window after this loan: give a step back
        // whatever the signals, or the two loans together would pass the window's last pages.
        if lent > room && lent >= step {
            self.lent_bytes.store(lent - step, Relaxed);
            self.moves_to_hot_log.fetch_add(1, Relaxed);
            return Some(Move::ToHotLog);
        }
        if lent + step <= room && clearly_beats(cache_gain, hot_loss) {
            self.lent_bytes.store(lent + step, Relaxed);
            self.moves_to_read_cache.fetch_add(1, Relaxed);
            return Some(Move::ToReadCache);
        }
        if lent >= step && clearly_beats(hot_gain, cache_loss) {
            self.lent_bytes.store(lent - step, Relaxed);
            self.moves_to_hot_log.fetch_add(1, Relaxed);
            return Some(Move::ToHotLog);
        }
        None
    }
}

/// Where a get found its record, as the split counts it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum GetSource {
    /// In the read cache at this (flagged) address.
    ReadCache(u64),
    /// In the hot log at this address; `head` was the in-memory head when the lookup began.
    HotLog { address: u64, head: u64 },
    /// In the cold log (always from disk).
    ColdLog,
}

impl Inner {
    /// Counts a get for the split (engine/memory_split.rs) and ends a window when it is due.
    pub(crate) fn note_get_for_split(&self, hash: u64, source: GetSource) {
        let step = self.split.step_bytes();
        if step == 0 {
            return;
        }
        match source {
            GetSource::ReadCache(address) => {
                if self.read_cache.as_ref().is_some_and(|c| c.is_among_oldest(address, step)) {
                    self.split.read_cache_tail_hit();
                }
            }
            GetSource::HotLog { address, head } if address >= head => {
                if address < head + step {
                    self.split.hot_tail_hit();
                }
            }
            GetSource::HotLog { address, head } => {
                if address + step >= head {
                    self.split.hot_ghost_hit();
                }
                self.split.note_disk_read(hash);
            }
            GetSource::ColdLog => self.split.note_disk_read(hash),
        }
        self.end_split_window_if_due();
    }

    /// Counts an applied write for the split: an in-place update in the mutable region's oldest
    /// step is what one step less would turn into an append; an append over a chain whose head
    /// had just turned read-only is what one step more would have updated in place.
    pub(crate) fn note_write_for_split(&self, applied: Applied) {
        let step = self.split.step_bytes();
        if step == 0 {
            return;
        }
        let read_only = self.hot.read_only();
        match applied {
            Applied::InPlace { address } if address < read_only + step => self.split.hot_tail_hit(),
            Applied::Appended { previous_head }
                if previous_head < read_only && previous_head + step >= read_only =>
            {
                self.split.hot_ghost_hit();
            }
            _ => {}
        }
        self.end_split_window_if_due();
    }

    /// Ends a window when due; a decision that moved memory is carried out by the worker, or
    /// here without one (`background_maintenance` off) unless another thread is maintaining
    /// (the next decision's resize then catches up).
    fn end_split_window_if_due(&self) {
        if !self.split.count_op() || self.split.decide(self.hot_index.overrun_bytes()).is_none() {
            return;
        }
        if self.opts.background_maintenance {
            self.worker.request();
        } else if let Some(_only_one) = self.maintenance.try_lock() {
            if let Err(e) = self.rebalance_memory() {
                // Poisoned: the next call fails with it; this get or write already succeeded.
                let _ = self.poisoned(e);
            }
        }
    }

    /// Resizes the hot log's window and the read cache to the split's current loan (caller holds
    /// the maintenance lock): the side that shrinks does so first, so together they never hold
    /// more than their shares.
    pub(crate) fn rebalance_memory(&self) -> Result<()> {
        let Some(cache) = &self.read_cache else { return Ok(()) };
        if self.split.step_bytes() == 0 {
            return Ok(());
        }
        let lent = self.split.lent_bytes();
        let pages = self.opts.read_cache_pages + (lent / cache.page_bytes()) as usize;
        let mut unlink = |address, view: RecordView<'_>| self.unlink_cached(address, view);
        if (pages as u64) * cache.page_bytes() < cache.capacity_bytes() {
            cache.resize(pages, &mut unlink);
            self.hot.set_read_cache_lent_bytes(lent);
        } else {
            self.hot.set_read_cache_lent_bytes(lent);
            self.hot.shrink_window()?;
            cache.resize(pages, &mut unlink);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split() -> MemorySplit {
        let split = MemorySplit::default();
        split.enable(64 << 20, 1 << 20, u64::MAX);
        split
    }

    fn hits(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    #[test]
    fn steps_are_whole_pages_and_two_pages_are_never_lent() {
        let s = split();
        assert_eq!(s.step_bytes(), 2 << 20);
        assert_eq!(s.max_lent_bytes.load(Relaxed), 62 << 20);
        let tiny = MemorySplit::default();
        tiny.enable(3 << 20, 1 << 20, u64::MAX);
        assert_eq!((tiny.step_bytes(), tiny.max_lent_bytes.load(Relaxed)), (1 << 20, 1 << 20));
        let capped = MemorySplit::default();
        capped.enable(64 << 20, 1 << 20, 5 << 20);
        assert_eq!(capped.max_lent_bytes.load(Relaxed), 4 << 20, "what the cache can take, in whole steps");
        assert!(!MemorySplit::default().count_op(), "a fixed split counts nothing");
    }

    #[test]
    fn memory_moves_to_the_side_whose_gain_beats_the_others_loss() {
        let s = split();
        // Ghost hits of the read cache beat the hot log's oldest step: lend one step.
        for i in 0..100 {
            s.remember_evicted(i, 100);
        }
        (0..50).for_each(|i| s.note_disk_read(i));
        s.note_disk_read(1_000); // never cached: not a ghost hit
        hits(&s.hot_tail_hits, 30);
        assert_eq!(s.decide(0), Some(Move::ToReadCache));
        assert_eq!(s.lent_bytes(), 2 << 20);
        // Signals were reset: a quiet window moves nothing.
        assert_eq!(s.decide(0), None);
        // Too little evidence moves nothing either way.
        hits(&s.hot_ghost_hits, MIN_EVIDENCE - 1);
        assert_eq!(s.decide(0), None);
        // The hot log gains clearly more than the cache's oldest step holds: one step back.
        hits(&s.hot_ghost_hits, 100);
        hits(&s.read_cache_tail_hits, 79);
        assert_eq!(s.decide(0), Some(Move::ToHotLog));
        assert_eq!(s.lent_bytes(), 0);
        // Nothing lent: nothing to give back, whatever the signals.
        hits(&s.hot_ghost_hits, 1_000);
        assert_eq!(s.decide(0), None);
    }

    #[test]
    fn lending_stops_at_the_room_the_hot_log_has_left() {
        let s = split();
        for _ in 0..40 {
            s.remember_evicted(7, 100);
            hits(&s.read_cache_ghost_hits, 100);
            s.decide(20 << 20);
        }
        assert_eq!(s.lent_bytes(), 42 << 20, "62 MiB of room less 20 lent to the hot index");
        // The index borrows 4 MiB more: the read cache gives steps back until the loans fit,
        // though its ghost hits still beat everything.
        for _ in 0..3 {
            hits(&s.read_cache_ghost_hits, 1_000);
            s.decide(24 << 20);
        }
        assert_eq!(s.lent_bytes(), 38 << 20);
        assert_eq!(s.moves_to_hot_log.load(Relaxed), 2);
    }

    #[test]
    fn the_ghost_forgets_after_two_steps_of_evictions() {
        let s = MemorySplit::default();
        s.enable(32 << 10, 4 << 10, u64::MAX); // steps of one 4 KiB page
        s.remember_evicted(1, 100);
        for i in 0..100 {
            s.remember_evicted(100 + i, 100); // 10 KB: two generations pass
        }
        s.note_disk_read(1);
        assert_eq!(s.read_cache_ghost_hits.load(Relaxed), 0);
        s.note_disk_read(199);
        assert_eq!(s.read_cache_ghost_hits.load(Relaxed), 1);
    }
}
