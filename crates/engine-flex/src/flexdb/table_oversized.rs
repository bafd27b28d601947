//! Splitting intervals on their first access (§5.4). Recovery samples the table file every
//! `rebuild_interval_bytes`, so a rebuilt interval can hold more records or bytes than the limits
//! a commit keeps; until a commit changed it, every read of it decoded and cached all of it. A
//! reader that loads such an interval notes its index key; whoever next holds the table's write
//! lock (a reader that gets it without waiting, or the committer before a step) splits it in the
//! index, from its cached records, and caches the pieces. A split changes only the index: the
//! records stay where they are in the table file.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_core::Key;

use super::{owned_by, owner_key, IntervalData, Table};
use crate::flexdb::sparse_index::{Cursor, NO_SLOT};

/// At most this many bytes of noted index keys wait (outside the memory budget); an interval
/// not noted for lack of room is noted when it is loaded again.
const MAX_PENDING_KEY_BYTES: usize = 64 << 10;

#[derive(Default)]
pub(super) struct Pending {
    /// Noted index keys and their total length.
    keys: Mutex<(Vec<Key>, usize)>,
    any: AtomicBool,
}

impl Table {
    /// Over the limits a commit keeps intervals within (it splits them in `after_change`).
    pub(super) fn over_limits(&self, data: &IntervalData) -> bool {
        data.len() > self.config.max_interval_records as usize
            || (data.bytes().len() as u64 > self.config.max_interval_bytes && data.len() >= 2)
    }

    /// After a reader loaded and cached `data` for the interval at `cur`: notes it for a split
    /// when it is over the limits.
    pub(super) fn note_if_oversized(&self, cur: &Cursor, data: &IntervalData) {
        if !self.over_limits(data) {
            return;
        }
        let key = self.index.interval(cur).key().to_vec();
        let mut pending = self.oversized.keys.lock();
        if pending.1 + key.len() <= MAX_PENDING_KEY_BYTES {
            pending.1 += key.len();
            pending.0.push(key);
            self.oversized.any.store(true, Relaxed);
        }
    }

    /// Intervals wait to be split (a hint: checked without the write lock).
    pub fn has_oversized(&self) -> bool {
        self.oversized.any.load(Relaxed)
    }

    /// Splits the noted intervals that are still over the limits and still cached (their records
    /// are needed to choose the cuts; the write lock is no place for a read). Caller holds the
    /// table's write lock; `intervals_split_on_access` counts the splits. Returns the intervals
    /// the split evicted from the cache, for the caller to drop after releasing the write lock
    /// (freeing is the slow part of an eviction).
    pub fn split_oversized(&mut self) -> Vec<Arc<IntervalData>> {
        let mut dropped = Vec::new();
        if !self.has_oversized() {
            return dropped;
        }
        let (keys, _) = std::mem::take(self.oversized.keys.get_mut());
        self.oversized.any.store(false, Relaxed);
        let mut split = 0;
        for key in keys {
            let cur = self.index.seek(&key);
            let e = self.index.interval(&cur);
            if !e.key().eq_slice(&key) {
                continue; // a commit split or merged it meanwhile
            }
            let slot = e.cache_slot().load(Relaxed);
            let cached = self.cache.get_mut().peek(slot, owned_by(e.key())).cloned();
            let Some(data) = cached.filter(|d| d.bytes().len() as u64 == e.size_bytes()) else { continue };
            if !self.over_limits(&data) {
                continue;
            }
            self.cache.get_mut().invalidate(slot);
            let cuts = self.split(&key, &data);
            self.cache_pieces(&data, &cuts, &mut dropped);
            dropped.push(data);
            split += 1;
        }
        if split > 0 {
            self.version += 1; // scans holding a cursor into the old layout search again
            self.intervals_split_on_access += split;
        }
        dropped
    }

    /// Caches the pieces of `data` (just split at `cuts`), which was cached whole a moment ago,
    /// so a split costs no read. What the inserts evict goes to `dropped`.
    pub(super) fn cache_pieces(
        &mut self,
        data: &IntervalData,
        cuts: &[usize],
        dropped: &mut Vec<Arc<IntervalData>>,
    ) {
        let starts = std::iter::once(0).chain(cuts.iter().copied());
        let ends = cuts.iter().copied().chain(std::iter::once(data.len()));
        for (start, end) in starts.zip(ends) {
            if start >= end {
                continue;
            }
            let bytes = (start..end).map(|i| data.record_len(i)).sum();
            let mut piece = IntervalData::with_capacity(bytes, end - start);
            for i in start..end {
                piece.push_checked(data, i);
            }
            let cur = self.index.seek(data.key(start));
            // The piece must be exactly the interval the split made: its bounds and its count
            // (cannot fail; a mismatch is never cached).
            let Ok(piece) = self.check_interval(&cur, 0, Ok(piece)) else { continue };
            let e = self.index.interval(&cur);
            if e.size_bytes() != bytes as u64 || e.count() != Some(piece.len() as u32) {
                continue;
            }
            let (slot, evicted) = self.cache.get_mut().insert(owner_key(e.key()), piece);
            e.cache_slot().store(slot.unwrap_or(NO_SLOT), Relaxed);
            dropped.extend(evicted);
        }
    }
}
