//! TreeLine's record cache (paper §4.2): the newest version of hot and dirty records, ordered by
//! key, evicted by CLOCK with priorities.
//!
//! Why not `strata_kit::cache::Cache`: the kit's cache is a slot store that callers reach by slot
//! number (flex keeps slot ids in its sparse index) with no key lookup and no key order, and its
//! policy (S3-FIFO + 2-bit CLOCK) only vetoes dirty values. TreeLine needs a lookup by key, the
//! cached records of a key range in order (scans merge them over pages; write-back gathers every
//! dirty record of one page by its fences), and an eviction whose dirty candidate *drives* a page
//! write-back. Adding a key index and a second policy to the shared type would change what flex
//! relies on, so the policy lives here, over a `BTreeMap`.
//!
//! Policy: each entry has a priority 0..=`P_MAX`; writes and read misses enter at `P_MID` and
//! every access raises it by one. The hand walks the entries in key order (wrapping), lowering
//! each priority above 0; the first entry at 0 is the candidate. A dirty candidate makes the hand
//! look up to `LOOKAHEAD` entries further for a clean one at 0; if none, the caller writes back the
//! candidate's whole page (every dirty record of it, which stay cached, now clean) and then evicts
//! it. Invariants: `used_bytes` is the sum of `entry_bytes` over the map; an entry with
//! `dirty_lsn > 0` is never evicted; a clean tombstone is never kept (it says nothing the pages do
//! not).

use std::collections::BTreeMap;
use std::ops::Bound;

use strata_core::{Key, Value};
use strata_kit::inline_key::{self, InlineKey};
use strata_wal::Lsn;

/// A cached record's key as the map holds it: inline in the tree node up to
/// `inline_key::INLINE_KEY_BYTES` (8-byte integer keys, YCSB's `user…` keys), so a lookup's comparisons stay
/// in the nodes it visits (with `Vec` keys a profile of YCSB F at 1 KiB had 16% of the CPU in
/// the map's lookups, each comparison following a pointer). Ordered as byte strings, like `Key`.
type CacheKey = InlineKey;

/// Highest priority.
pub const P_MAX: u8 = 4;
/// Priority of a record admitted by a write or a read miss.
pub const P_MID: u8 = P_MAX / 2;
/// Entries the hand looks past a dirty candidate for a clean one.
pub const LOOKAHEAD: usize = 32;
/// Bytes counted per entry besides its key and value: the map node's share, the entry and the
/// value's allocation. Measured (`examples/record_cache_memory.rs`, 1M entries, 8-byte keys):
/// 194, 242 and 1,170 bytes resident per entry for 56-, 100- and 1,024-byte values, i.e. 130–138
/// beyond key and value; 64 counted made a cache of its budget hold about 1.4× it at 64-byte
/// records.
pub const ENTRY_OVERHEAD_BYTES: u64 = 136;

/// One cached record: `value` is `None` for a tombstone (a delete not yet written back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedRecord {
    pub value: Option<Value>,
    /// Lsn of the last write not yet written back; 0 = clean (the pages hold this value).
    pub dirty_lsn: Lsn,
    priority: u8,
}

impl CachedRecord {
    /// Dirty, last written at an lsn below `below_lsn` (what a checkpoint's sweep writes back).
    fn is_dirty_below(&self, below_lsn: Lsn) -> bool {
        self.dirty_lsn > 0 && self.dirty_lsn < below_lsn
    }
}

/// A dirty record as write-back takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirtyRecord {
    pub key: Key,
    pub value: Option<Value>,
    pub lsn: Lsn,
}

/// Whether the hand's walk goes on past an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Go,
    Stop,
}

/// What one eviction step decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Victim {
    /// Nothing cached.
    Empty,
    /// A clean entry was evicted.
    Evicted,
    /// Every candidate was dirty: write back this key's page, then `evict_if_clean(key)`.
    WriteBack(Key),
}

fn entry_bytes(key: &[u8], value: Option<&Value>) -> u64 {
    (key.len() + value.map_or(0, Vec::len)) as u64 + ENTRY_OVERHEAD_BYTES
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct RecordCache {
    map: BTreeMap<CacheKey, CachedRecord>,
    used_bytes: u64,
    dirty_entries: usize,
    capacity_bytes: u64,
    /// The CLOCK hand: the last key it visited (it need not be cached any more).
    hand: Option<CacheKey>,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
}

impl RecordCache {
    pub fn new(capacity_bytes: u64) -> RecordCache {
        RecordCache { capacity_bytes, ..RecordCache::default() }
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    pub fn set_capacity_bytes(&mut self, capacity_bytes: u64) {
        self.capacity_bytes = capacity_bytes;
    }

    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn dirty_entries(&self) -> usize {
        self.dirty_entries
    }

    pub fn over_capacity(&self) -> bool {
        self.used_bytes > self.capacity_bytes
    }

    /// The cached version of `key` (`Some(None)`: deleted), raising its priority; counts a hit
    /// or a miss.
    pub fn get(&mut self, key: &[u8]) -> Option<Option<Value>> {
        match self.map.get_mut(key) {
            Some(entry) => {
                entry.priority = (entry.priority + 1).min(P_MAX);
                self.hits += 1;
                Some(entry.value.clone())
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Whether `key` is cached (counts nothing).
    pub fn contains(&self, key: &[u8]) -> bool {
        self.map.contains_key(key)
    }

    /// A write (`None`: delete) logged at `lsn`: the entry becomes dirty with that lsn.
    pub fn put_dirty(&mut self, key: Key, value: Option<Value>, lsn: Lsn) {
        let added = entry_bytes(&key, value.as_ref());
        match self.map.get_mut(key.as_slice()) {
            Some(entry) => {
                self.used_bytes -= entry_bytes(&key, entry.value.as_ref());
                if entry.dirty_lsn == 0 {
                    self.dirty_entries += 1;
                }
                entry.value = value;
                entry.dirty_lsn = lsn;
                entry.priority = (entry.priority + 1).min(P_MAX);
            }
            None => {
                self.dirty_entries += 1;
                self.map.insert(
                    inline_key::from_vec(key),
                    CachedRecord { value, dirty_lsn: lsn, priority: P_MID },
                );
            }
        }
        self.used_bytes += added;
    }

    /// A value read from the pages after a miss, cached clean if `key` is still absent.
    pub fn admit_clean(&mut self, key: Key, value: Value) {
        if self.map.contains_key(key.as_slice()) {
            return;
        }
        self.used_bytes += entry_bytes(&key, Some(&value));
        self.map.insert(
            inline_key::from_vec(key),
            CachedRecord { value: Some(value), dirty_lsn: 0, priority: P_MID },
        );
    }

    /// Every dirty record with `lower <= key < upper` (`upper = None`: unbounded), in key order.
    pub fn dirty_in(&self, lower: &[u8], upper: Option<&[u8]>) -> Vec<DirtyRecord> {
        self.dirty_in_up_to(lower, upper, usize::MAX)
    }

    /// The first `at_most` dirty records with `lower <= key < upper`, in key order.
    pub fn dirty_in_up_to(&self, lower: &[u8], upper: Option<&[u8]>, at_most: usize) -> Vec<DirtyRecord> {
        self.dirty_entries_in(lower, upper)
            .take(at_most)
            .map(|(k, e)| DirtyRecord { key: k.to_vec(), value: e.value.clone(), lsn: e.dirty_lsn })
            .collect()
    }

    fn dirty_entries_in<'a>(
        &'a self,
        lower: &'a [u8],
        upper: Option<&'a [u8]>,
    ) -> impl Iterator<Item = (&'a CacheKey, &'a CachedRecord)> + 'a {
        self.entries_in(lower, upper).filter(|(_, e)| e.dirty_lsn > 0)
    }

    /// Key + value bytes of up to `at_most` cached records (tombstones skipped), lowest keys
    /// first.
    pub fn record_bytes(&self, at_most: usize) -> impl Iterator<Item = usize> + '_ {
        self.map.iter().filter_map(|(k, e)| Some(k.len() + e.value.as_ref()?.len())).take(at_most)
    }

    /// Every cached record with `lower <= key < upper`, in key order (`None` values: deleted).
    pub fn cached_in(&self, lower: &[u8], upper: Option<&[u8]>) -> Vec<(Key, Option<Value>)> {
        self.entries_in(lower, upper).map(|(k, e)| (k.to_vec(), e.value.clone())).collect()
    }

    fn entries_in<'a>(
        &'a self,
        lower: &'a [u8],
        upper: Option<&'a [u8]>,
    ) -> impl Iterator<Item = (&'a CacheKey, &'a CachedRecord)> + 'a {
        let end = upper.map_or(Bound::Unbounded, Bound::Excluded);
        self.map.range::<[u8], _>((Bound::Included(lower), end))
    }

    /// The first `limit` keys at or after `from` that are dirty with an lsn below `below_lsn`,
    /// in key order.
    pub fn dirty_keys_from(&self, from: &[u8], below_lsn: Lsn, limit: usize) -> Vec<Key> {
        self.entries_in(from, None)
            .filter(|(_, e)| e.is_dirty_below(below_lsn))
            .take(limit)
            .map(|(k, _)| k.to_vec())
            .collect()
    }

    /// The `n`th dirty key (from 1) with `from <= key < upper`, if there are that many.
    pub fn nth_dirty_key(&self, from: &[u8], upper: Option<&[u8]>, n: usize) -> Option<Key> {
        self.dirty_entries_in(from, upper).nth(n.checked_sub(1)?).map(|(k, _)| k.to_vec())
    }

    /// Whether `key` is cached dirty with an lsn below `below_lsn`.
    pub fn is_dirty_below(&self, key: &[u8], below_lsn: Lsn) -> bool {
        self.map.get(key).is_some_and(|e| e.is_dirty_below(below_lsn))
    }

    /// The smallest lsn of a dirty record (`None`: nothing is dirty). Every record whose last
    /// write is older is in the pages, so a WAL replay from here restores every dirty record.
    /// Linear in the cache's entries (a checkpoint runs it once).
    pub fn min_dirty_lsn(&self) -> Option<Lsn> {
        self.map.values().filter(|e| e.dirty_lsn > 0).map(|e| e.dirty_lsn).min()
    }

    /// After a page write: each record still dirty with the lsn that was written becomes clean
    /// (a clean tombstone is dropped); records written again meanwhile stay dirty. Reads only
    /// each written record's key and lsn (write-back drops the values it applied).
    pub fn mark_clean<'a>(&mut self, written: impl IntoIterator<Item = &'a DirtyRecord>) {
        for record in written {
            let Some(entry) = self.map.get_mut(record.key.as_slice()) else { continue };
            if entry.dirty_lsn != record.lsn {
                continue;
            }
            entry.dirty_lsn = 0;
            self.dirty_entries -= 1;
            if entry.value.is_none() {
                self.remove(&record.key);
            }
        }
    }

    /// After a page write that took every dirty record of `lower <= key < upper` (a
    /// reorganization's piece): each one still dirty at an lsn up to `up_to_lsn` becomes clean (a
    /// clean tombstone is dropped). Every write up to `up_to_lsn` was in the cache when the
    /// records were taken, so such a record is one that was taken; later writes have larger lsns
    /// and stay dirty. Returns how many became clean.
    pub fn mark_clean_in(&mut self, lower: &[u8], upper: Option<&[u8]>, up_to_lsn: Lsn) -> u64 {
        let mut tombstones: Vec<Key> = Vec::new();
        let mut cleaned = 0;
        let end = upper.map_or(Bound::Unbounded, Bound::Excluded);
        for (key, entry) in self.map.range_mut::<[u8], _>((Bound::Included(lower), end)) {
            if entry.dirty_lsn == 0 || entry.dirty_lsn > up_to_lsn {
                continue;
            }
            entry.dirty_lsn = 0;
            cleaned += 1;
            if entry.value.is_none() {
                tombstones.push(key.to_vec());
            }
        }
        self.dirty_entries -= cleaned as usize;
        tombstones.iter().for_each(|key| self.remove(key));
        cleaned
    }

    /// Evicts `key` if it is cached and clean.
    pub fn evict_if_clean(&mut self, key: &[u8]) -> bool {
        if self.map.get(key).is_some_and(|e| e.dirty_lsn == 0) {
            self.remove(key);
            self.evictions += 1;
            return true;
        }
        false
    }

    fn remove(&mut self, key: &[u8]) {
        if let Some(entry) = self.map.remove(key) {
            self.used_bytes -= entry_bytes(key, entry.value.as_ref());
            if entry.dirty_lsn > 0 {
                self.dirty_entries -= 1;
            }
        }
    }

    /// Moves the hand over up to `max_steps` entries in key order from the one after it
    /// (wrapping), calling `visit` on each until it returns `Stop`; the hand is left on the last
    /// entry visited. One ordered walk of the map, not a search per step: the walk is the
    /// write-back worker's hottest loop.
    fn walk_hand(&mut self, max_steps: usize, mut visit: impl FnMut(&CacheKey, &mut CachedRecord) -> Step) {
        let mut steps = 0;
        let mut from = self.hand.take();
        let mut last: Option<CacheKey> = None;
        while steps < max_steps && !self.map.is_empty() {
            let entries: Box<dyn Iterator<Item = (&CacheKey, &mut CachedRecord)>> = match &from {
                Some(hand) => {
                    Box::new(self.map.range_mut::<[u8], _>((Bound::Excluded(&hand[..]), Bound::Unbounded)))
                }
                None => Box::new(self.map.iter_mut()),
            };
            let mut stopped = false;
            for (key, entry) in entries {
                steps += 1;
                if visit(key, entry) == Step::Stop || steps >= max_steps {
                    last = Some(key.clone());
                    stopped = true;
                    break;
                }
            }
            if stopped {
                break;
            }
            from = None; // the end of the map: wrap to its first entry
        }
        self.hand = last.or(from);
    }

    /// One eviction by the policy in the module documentation.
    pub fn choose_victim(&mut self) -> Victim {
        if self.map.is_empty() {
            return Victim::Empty;
        }
        let max_steps = self.map.len() * (usize::from(P_MAX) + 1) + LOOKAHEAD + 1;
        let mut dirty_candidate: Option<CacheKey> = None;
        let mut clean_victim: Option<CacheKey> = None;
        let mut looked_ahead = 0;
        self.walk_hand(max_steps, |key, entry| {
            if entry.priority == 0 && entry.dirty_lsn == 0 {
                clean_victim = Some(key.clone());
                return Step::Stop;
            }
            if entry.priority > 0 {
                entry.priority -= 1;
            } else if dirty_candidate.is_none() {
                dirty_candidate = Some(key.clone());
                return Step::Go;
            }
            if dirty_candidate.is_some() {
                looked_ahead += 1;
                if looked_ahead >= LOOKAHEAD {
                    return Step::Stop;
                }
            }
            Step::Go
        });
        if let Some(key) = clean_victim {
            self.remove(&key);
            self.evictions += 1;
            return Victim::Evicted;
        }
        dirty_candidate.map_or(Victim::Empty, |key| Victim::WriteBack(key.into_vec()))
    }

    /// Several eviction steps at once, for a batched write-back: evicts clean victims and
    /// collects up to `max_write_backs` distinct dirty ones, until the bytes left (counting the
    /// collected dirty victims as gone) are at most `target_bytes`. The caller writes back the
    /// returned keys' pages together, then `evict_if_clean`s each.
    pub fn choose_victims(&mut self, max_write_backs: usize, target_bytes: u64) -> Vec<Key> {
        let mut victims: Vec<Key> = Vec::new();
        let mut pending_bytes = 0;
        while self.used_bytes.saturating_sub(pending_bytes) > target_bytes && victims.len() < max_write_backs
        {
            match self.choose_victim() {
                Victim::Empty => break,
                Victim::Evicted => {}
                Victim::WriteBack(key) => {
                    if victims.contains(&key) {
                        break; // the hand went all the way round: every candidate is collected
                    }
                    pending_bytes +=
                        self.map.get(key.as_slice()).map_or(0, |e| entry_bytes(&key, e.value.as_ref()));
                    victims.push(key);
                }
            }
        }
        victims
    }

    /// Evicts clean entries only (for read admissions, which do no writes) until under capacity
    /// or `max_steps` hand moves were spent.
    pub fn evict_clean_only(&mut self, max_steps: usize) {
        let mut steps_left = max_steps;
        while steps_left > 0 && self.over_capacity() {
            let mut victim: Option<CacheKey> = None;
            let mut steps = 0;
            self.walk_hand(steps_left, |key, entry| {
                steps += 1;
                if entry.dirty_lsn > 0 {
                    return Step::Go;
                }
                if entry.priority > 0 {
                    entry.priority -= 1;
                    return Step::Go;
                }
                victim = Some(key.clone());
                Step::Stop
            });
            steps_left = steps_left.saturating_sub(steps.max(1));
            match victim {
                Some(key) => {
                    self.remove(&key);
                    self.evictions += 1;
                }
                None => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u32) -> Key {
        format!("k{i:04}").into_bytes()
    }

    #[test]
    fn writes_are_dirty_until_marked_clean_with_their_lsn() {
        let mut c = RecordCache::new(1 << 20);
        c.put_dirty(k(1), Some(b"a".to_vec()), 5);
        c.put_dirty(k(2), None, 6);
        let dirty = c.dirty_in(b"", None);
        assert_eq!(dirty.len(), 2);
        c.put_dirty(k(1), Some(b"b".to_vec()), 7); // written again after write-back took lsn 5
        c.mark_clean(&dirty);
        assert_eq!(c.dirty_entries(), 1);
        assert!(!c.contains(&k(2)), "a clean tombstone is dropped");
        assert_eq!(c.get(&k(1)), Some(Some(b"b".to_vec())));
        assert_eq!(c.used_bytes(), entry_bytes(&k(1), Some(&b"b".to_vec())));
    }

    #[test]
    fn a_range_marked_clean_up_to_an_lsn_keeps_later_writes_and_other_keys_dirty() {
        let mut c = RecordCache::new(1 << 20);
        c.put_dirty(k(1), Some(b"a".to_vec()), 5);
        c.put_dirty(k(2), None, 6);
        c.put_dirty(k(3), Some(b"c".to_vec()), 9);
        c.put_dirty(k(4), Some(b"d".to_vec()), 2);
        c.admit_clean(k(0), b"z".to_vec());
        assert_eq!(c.mark_clean_in(&k(0), Some(&k(4)), 7), 2, "k1 at 5 and k2 at 6; k3 is newer");
        assert_eq!(c.dirty_entries(), 2);
        assert!(!c.contains(&k(2)), "a clean tombstone is dropped");
        assert_eq!(c.dirty_keys_from(b"", Lsn::MAX, 10), vec![k(3), k(4)], "k4 is past the range");
        assert_eq!(c.get(&k(1)), Some(Some(b"a".to_vec())));
        let bytes: u64 = [(0, b"z"), (1, b"a"), (3, b"c"), (4, b"d")]
            .iter()
            .map(|(i, v)| entry_bytes(&k(*i), Some(&v.to_vec())))
            .sum();
        assert_eq!(c.used_bytes(), bytes);
    }

    #[test]
    fn a_dirty_candidate_yields_to_a_clean_one_within_the_lookahead() {
        let mut c = RecordCache::new(1 << 20);
        c.put_dirty(k(0), Some(vec![0]), 1);
        for i in 1..10 {
            c.admit_clean(k(i), vec![1]);
        }
        match c.choose_victim() {
            Victim::Evicted => {}
            other => panic!("expected a clean eviction, got {other:?}"),
        }
        assert!(c.contains(&k(0)));
    }

    #[test]
    fn all_dirty_asks_for_a_write_back_and_never_evicts_dirty() {
        let mut c = RecordCache::new(10);
        for i in 0..40 {
            c.put_dirty(k(i), Some(vec![1]), u64::from(i) + 1);
        }
        let Victim::WriteBack(key) = c.choose_victim() else { panic!("expected a write-back") };
        assert!(!c.evict_if_clean(&key));
        let dirty = c.dirty_in(&key, None);
        c.mark_clean(&dirty[..1]);
        assert!(c.evict_if_clean(&key));
        assert_eq!(c.len(), 39);
    }

    #[test]
    fn the_hand_walks_in_key_order_wraps_and_resumes_where_it_stopped() {
        let mut c = RecordCache::new(1 << 20);
        for i in 0..10 {
            c.admit_clean(k(i), vec![1]);
        }
        // Two laps lower every priority from P_MID to 0; the third finds k0 first.
        for expected in 0..3 {
            assert_eq!(c.choose_victim(), Victim::Evicted);
            assert!(!c.contains(&k(expected)), "k{expected} is the next at priority 0 in key order");
        }
        c.admit_clean(k(0), vec![1]);
        assert_eq!(c.choose_victim(), Victim::Evicted);
        assert!(c.contains(&k(0)) && !c.contains(&k(3)), "the hand resumes after k2, not from the start");
        c.evict_clean_only(3);
        assert_eq!(c.len(), 7, "clean-only eviction does not run while the cache is under capacity");
        c.set_capacity_bytes(0);
        c.evict_clean_only(2);
        assert!(!c.contains(&k(4)) && !c.contains(&k(5)) && c.contains(&k(6)), "two steps, two victims");
    }

    #[test]
    fn dirty_keys_from_lists_old_dirty_keys_in_order() {
        let mut c = RecordCache::new(1 << 20);
        for i in 0..10 {
            c.put_dirty(k(i), Some(vec![1]), u64::from(i) + 1);
        }
        c.admit_clean(k(20), vec![1]);
        assert_eq!(c.dirty_keys_from(&k(3), 8, 100), vec![k(3), k(4), k(5), k(6)]);
        assert_eq!(c.dirty_keys_from(&k(3), 8, 2), vec![k(3), k(4)]);
        assert!(c.dirty_keys_from(&k(10), u64::MAX, 5).is_empty());
        assert!(c.is_dirty_below(&k(3), 8) && !c.is_dirty_below(&k(3), 3), "k(3) is dirty at lsn 3");
        assert!(!c.is_dirty_below(&k(99), u64::MAX), "not cached");
    }

    #[test]
    fn clean_only_eviction_leaves_dirty_entries() {
        let mut c = RecordCache::new(0);
        c.put_dirty(k(0), Some(vec![0]), 1);
        c.admit_clean(k(1), vec![1]);
        c.evict_clean_only(100);
        assert!(c.contains(&k(0)) && !c.contains(&k(1)));
        assert_eq!(c.cached_in(b"", None).len(), 1);
    }

    #[test]
    fn inline_and_spilled_keys_are_ordered_as_byte_strings() {
        let mut c = RecordCache::new(1 << 20);
        let keys: Vec<Key> = vec![vec![1; 40], vec![1; 32], vec![1; 33], vec![0; 40], vec![2], vec![]];
        for (i, key) in keys.iter().enumerate() {
            c.put_dirty(key.clone(), Some(vec![i as u8]), i as u64 + 1);
        }
        let mut sorted = keys.clone();
        sorted.sort();
        let cached: Vec<Key> = c.cached_in(b"", None).into_iter().map(|(k, _)| k).collect();
        assert_eq!(cached, sorted);
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(c.get(key), Some(Some(vec![i as u8])));
        }
    }
}
