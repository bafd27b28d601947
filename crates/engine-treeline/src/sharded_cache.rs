//! The record cache split into shards by a hash of the key, each a [`RecordCache`] under its
//! own mutex, so request threads working on different keys do not queue on one lock (issue 37:
//! every get, put and scan chunk took the one cache mutex).
//!
//! Point operations lock the key's shard only. Operations over a key range (a write-back's dirty
//! records of a page, a scan chunk's cached records) visit every shard and merge by key; a key
//! lives in exactly one shard, so the merge only sorts. A scan must never see half of a write
//! batch, so range readers hold `batch_gate` shared while they visit the shards and the apply of
//! a run with a multi-op batch holds it exclusively (single-op batches need no gate: one shard
//! lock makes them atomic). Each shard keeps its own CLOCK hand; eviction takes each shard toward
//! its share of the target. Each shard's bytes are mirrored in an atomic after every change under
//! its lock, so the cache's pressure is a sum of loads, not of locks.
//!
//! Shard count: fixed at open (`default_shards`: two per core, one per 256 KiB of capacity, at
//! most 16, a power of two) or by the `record_cache_shards` knob; a shard far below a few
//! records' size would make its CLOCK meaningless, which is why small caches keep one shard.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use strata_core::{Key, Value};
use strata_wal::Lsn;

use crate::record_cache::{DirtyRecord, RecordCache};

/// Most shards a cache is split into.
pub const MAX_SHARDS: usize = 16;
/// Capacity per shard below which a cache keeps fewer shards.
const MIN_SHARD_BYTES: u64 = 256 << 10;

/// Shards for a cache of `capacity_bytes` on a machine running `cores` threads at once: a power
/// of two, at most two per core (contention grows with the threads that can run together, not
/// with the cache) and one per `MIN_SHARD_BYTES`, 1 to 16. Every shard costs each range read a
/// lookup: 16 shards on 2 cores made YCSB E's scans 0.61x one shard's (docs/benchmarks.md).
pub fn default_shards(capacity_bytes: u64, cores: usize) -> usize {
    let by_size = (capacity_bytes / MIN_SHARD_BYTES).clamp(1, MAX_SHARDS as u64) as usize;
    let wanted = by_size.min(2 * cores.max(1));
    1 << wanted.ilog2()
}

/// Aligned to 128 bytes so two shards' locks never share a cache line (or an adjacent-line
/// prefetch pair).
#[repr(align(128))]
struct Shard {
    cache: Mutex<RecordCache>,
    /// `cache.used_bytes()` as of the last change (stored under the lock).
    used_bytes: AtomicU64,
}

/// See the module documentation.
pub struct ShardedCache {
    shards: Box<[Shard]>,
    /// Random per cache, so an adversarial key set cannot aim at one shard.
    hasher: std::hash::RandomState,
    batch_gate: RwLock<()>,
    capacity_bytes: AtomicU64,
    /// The shard the next eviction starts with.
    next_victim_shard: AtomicUsize,
}

/// What several shards add up to.
#[derive(Clone, Copy, Debug, Default)]
pub struct CacheTotals {
    pub records: u64,
    pub dirty_records: u64,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
}

impl ShardedCache {
    /// A cache of `capacity_bytes` in `shards` shards (1 ..= 16, rounded down to a power of two).
    pub fn new(capacity_bytes: u64, shards: usize) -> ShardedCache {
        let shards = 1usize << shards.clamp(1, MAX_SHARDS).ilog2();
        let share = capacity_bytes / shards as u64;
        let shards = (0..shards)
            .map(|_| Shard { cache: Mutex::new(RecordCache::new(share)), used_bytes: AtomicU64::new(0) })
            .collect();
        ShardedCache {
            shards,
            hasher: std::hash::RandomState::new(),
            batch_gate: RwLock::new(()),
            capacity_bytes: AtomicU64::new(capacity_bytes),
            next_victim_shard: AtomicUsize::new(0),
        }
    }

    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    #[allow(clippy::indexing_slicing, reason = "the index is reduced modulo the shard count")]
    fn shard_of(&self, key: &[u8]) -> &Shard {
        &self.shards[self.index_of(key)]
    }

    /// Runs `f` on `key`'s shard under its lock (the shard's capacity set to its share).
    pub fn with_shard<R>(&self, key: &[u8], f: impl FnOnce(&mut RecordCache) -> R) -> R {
        self.run_on(self.shard_of(key), f)
    }

    /// Runs `f` on `shard` under its lock, its capacity set to its share first and its bytes
    /// mirrored after.
    fn run_on<R>(&self, shard: &Shard, f: impl FnOnce(&mut RecordCache) -> R) -> R {
        let mut cache = shard.cache.lock();
        cache.set_capacity_bytes(self.share_bytes());
        let out = f(&mut cache);
        shard.used_bytes.store(cache.used_bytes(), Relaxed);
        out
    }

    /// Holds every range reader off while a run with a multi-op batch is applied.
    pub fn gate_batches(&self) -> RwLockWriteGuard<'_, ()> {
        self.batch_gate.write()
    }

    /// Held shared by range readers that must not see half of a batch.
    fn gate_reader(&self) -> RwLockReadGuard<'_, ()> {
        self.batch_gate.read()
    }

    pub fn get(&self, key: &[u8]) -> Option<Option<Value>> {
        self.with_shard(key, |c| c.get(key))
    }

    pub fn put_dirty(&self, key: Key, value: Option<Value>, lsn: Lsn) {
        let shard = self.shard_of(&key);
        self.run_on(shard, |c| c.put_dirty(key, value, lsn));
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes.load(Relaxed)
    }

    /// Sets the capacity; each shard gets its share as it is next locked for an eviction.
    pub fn set_capacity_bytes(&self, capacity_bytes: u64) {
        self.capacity_bytes.store(capacity_bytes, Relaxed);
    }

    fn share_bytes(&self) -> u64 {
        self.capacity_bytes() / self.shards.len() as u64
    }

    pub fn used_bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.used_bytes.load(Relaxed)).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| s.cache.lock().is_empty())
    }

    pub fn totals(&self) -> CacheTotals {
        let mut t = CacheTotals::default();
        for shard in self.shards.iter() {
            let c = shard.cache.lock();
            t.records += c.len() as u64;
            t.dirty_records += c.dirty_entries() as u64;
            t.hits += c.hits;
            t.misses += c.misses;
            t.evictions += c.evictions;
        }
        t
    }

    /// Key + value bytes of up to `at_most` cached records, an equal share from each shard.
    pub fn record_bytes_sample(&self, at_most: usize) -> Vec<usize> {
        let share = at_most.div_ceil(self.shards.len());
        self.shards
            .iter()
            .flat_map(|shard| shard.cache.lock().record_bytes(share).collect::<Vec<_>>())
            .collect()
    }

    /// Every dirty record with `lower <= key < upper`, in key order.
    pub fn dirty_in(&self, lower: &[u8], upper: Option<&[u8]>) -> Vec<DirtyRecord> {
        self.dirty_in_at_most(lower, upper, usize::MAX - 1).unwrap_or_default()
    }

    /// Every dirty record with `lower <= key < upper`, in key order, if there are at most
    /// `n`; `None` if there are more, having copied no more than `n + 1` of them (each shard
    /// takes at most what is still missing).
    pub fn dirty_in_at_most(&self, lower: &[u8], upper: Option<&[u8]>, n: usize) -> Option<Vec<DirtyRecord>> {
        let mut out: Vec<DirtyRecord> = Vec::new();
        for shard in self.shards.iter() {
            let left = n + 1 - out.len();
            out.extend(shard.cache.lock().dirty_in_up_to(lower, upper, left));
            if out.len() > n {
                return None;
            }
        }
        out.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        Some(out)
    }

    /// Every cached record with `lower <= key < upper`, in key order, never half of a batch.
    pub fn cached_in(&self, lower: &[u8], upper: Option<&[u8]>) -> Vec<(Key, Option<Value>)> {
        let _gate = self.gate_reader();
        let mut out: Vec<(Key, Option<Value>)> = Vec::new();
        for shard in self.shards.iter() {
            out.extend(shard.cache.lock().cached_in(lower, upper));
        }
        if self.shards.len() > 1 {
            out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        }
        out
    }

    /// Whether `key` is cached dirty with an lsn below `below_lsn`.
    pub fn is_dirty_below(&self, key: &[u8], below_lsn: Lsn) -> bool {
        self.shard_of(key).cache.lock().is_dirty_below(key, below_lsn)
    }

    /// Keys at or after `from` that are dirty with an lsn below `below_lsn`, in key order: every
    /// such key up to the last one returned, and at most about `limit` of them. Each shard gives
    /// its share of `limit` (keys spread evenly over shards); the merged list stops where the
    /// first shard that gave its whole share stopped, since past that key it may lack some.
    pub fn dirty_keys_from(&self, from: &[u8], below_lsn: Lsn, limit: usize) -> Vec<Key> {
        let share = limit.div_ceil(self.shards.len()).max(1);
        let mut keys: Vec<Key> = Vec::new();
        let mut complete_up_to: Option<Key> = None;
        for shard in self.shards.iter() {
            let mine = shard.cache.lock().dirty_keys_from(from, below_lsn, share);
            if mine.len() == share {
                let last = mine.last().cloned();
                complete_up_to = complete_up_to.into_iter().chain(last).min();
            }
            keys.extend(mine);
        }
        keys.sort_unstable();
        if let Some(end) = complete_up_to {
            keys.retain(|k| *k <= end);
        }
        keys
    }

    /// The smallest lsn of a dirty record.
    pub fn min_dirty_lsn(&self) -> Option<Lsn> {
        self.shards.iter().filter_map(|s| s.cache.lock().min_dirty_lsn()).min()
    }

    /// After a page write (see `RecordCache::mark_clean`), shard by shard.
    pub fn mark_clean(&self, written: &[DirtyRecord]) {
        if let [shard] = &self.shards[..] {
            return self.run_on(shard, |c| c.mark_clean(written));
        }
        let mut by_shard: Vec<Vec<&DirtyRecord>> = vec![Vec::new(); self.shards.len()];
        for record in written {
            if let Some(mine) = by_shard.get_mut(self.index_of(&record.key)) {
                mine.push(record);
            }
        }
        for (shard, mine) in self.shards.iter().zip(by_shard) {
            if !mine.is_empty() {
                self.run_on(shard, |c| c.mark_clean(mine));
            }
        }
    }

    /// `RecordCache::mark_clean_in` on every shard; returns how many records became clean.
    pub fn mark_clean_in(&self, lower: &[u8], upper: Option<&[u8]>, up_to_lsn: Lsn) -> u64 {
        self.shards.iter().map(|shard| self.run_on(shard, |c| c.mark_clean_in(lower, upper, up_to_lsn))).sum()
    }

    /// Where a run of about `limit` dirty keys in `from..upper` ends (exclusive): each shard
    /// counts up to its share of them (at least 2), and the run ends at the smallest share-th
    /// key of a shard that has that many, so it holds at most `limit` rounded up to whole shares
    /// and at least one key. `None`: no shard has its share (what is dirty in `from..upper` is
    /// one run).
    pub fn dirty_run_end(&self, from: &[u8], upper: Option<&[u8]>, limit: usize) -> Option<Key> {
        let share = limit.div_ceil(self.shards.len()).max(2);
        self.shards.iter().filter_map(|s| s.cache.lock().nth_dirty_key(from, upper, share)).min()
    }

    fn index_of(&self, key: &[u8]) -> usize {
        self.hasher.hash_one(key) as usize & (self.shards.len() - 1)
    }

    pub fn evict_if_clean(&self, key: &[u8]) -> bool {
        self.with_shard(key, |c| c.evict_if_clean(key))
    }

    /// Several eviction steps for a batched write-back (`RecordCache::choose_victims`), shard
    /// after shard from a rotating start, each toward its share of `target_bytes`, until the
    /// bytes left (the collected dirty victims counted as gone) are at most `target_bytes` or
    /// `max_write_backs` victims are collected.
    pub fn choose_victims(&self, max_write_backs: usize, target_bytes: u64) -> Vec<Key> {
        let n = self.shards.len();
        let share_target = target_bytes / n as u64;
        let start = self.next_victim_shard.fetch_add(1, Relaxed);
        let mut victims = Vec::new();
        for i in 0..n {
            if victims.len() >= max_write_backs || self.used_bytes() <= target_bytes {
                break;
            }
            let Some(shard) = self.shards.get((start + i) % n) else { continue };
            let more =
                self.run_on(shard, |c| c.choose_victims(max_write_backs - victims.len(), share_target));
            victims.extend(more);
        }
        victims
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u32) -> Key {
        format!("k{i:05}").into_bytes()
    }

    #[test]
    fn shard_counts_follow_the_capacity_and_the_cores() {
        assert_eq!(default_shards(4 << 10, 64), 1);
        assert_eq!(default_shards(600 << 10, 64), 2);
        assert_eq!(default_shards(3 << 20, 64), 8);
        assert_eq!(default_shards(1 << 30, 64), 16);
        assert_eq!(default_shards(1 << 30, 2), 4);
        assert_eq!(default_shards(1 << 30, 3), 4);
        assert_eq!(ShardedCache::new(1 << 20, 5).shard_count(), 4);
    }

    #[test]
    fn range_reads_merge_every_shard_in_key_order() {
        let c = ShardedCache::new(1 << 30, 16);
        for i in (0..500).rev() {
            c.put_dirty(k(i), (i % 7 != 0).then(|| vec![i as u8]), u64::from(i) + 1);
        }
        let cached: Vec<Key> = c.cached_in(&k(100), Some(&k(200))).into_iter().map(|(key, _)| key).collect();
        assert_eq!(cached, (100..200).map(k).collect::<Vec<_>>());
        let dirty = c.dirty_in(&k(0), None);
        assert_eq!(dirty.len(), 500);
        assert!(dirty.windows(2).all(|w| w[0].key < w[1].key));
        assert!(c.is_dirty_below(&k(250), 300) && !c.is_dirty_below(&k(250), 250), "k(250) has lsn 251");
        assert_eq!(c.min_dirty_lsn(), Some(1));
        c.mark_clean(&dirty[..10]);
        assert_eq!(c.totals().dirty_records, 490);
        assert_eq!(c.used_bytes(), c.shards.iter().map(|s| s.cache.lock().used_bytes()).sum::<u64>());
    }

    #[test]
    fn dirty_keys_from_is_a_gapless_prefix_across_shards() {
        let c = ShardedCache::new(1 << 30, 16);
        for i in 0..1_000 {
            c.put_dirty(k(i), Some(vec![1]), u64::from(i) + 1);
        }
        let expected: Vec<Key> = (100..599).map(k).collect();
        for limit in [1, 16, 64, 300] {
            let got = c.dirty_keys_from(&k(100), 600, limit);
            assert!(!got.is_empty() && got.len() <= expected.len(), "limit {limit}: {} keys", got.len());
            assert_eq!(got[..], expected[..got.len()], "limit {limit}: a prefix with no key missing");
        }
        assert_eq!(c.dirty_keys_from(&k(100), 600, 10_000), expected, "a limit past them all lists them all");
    }

    #[test]
    fn a_dirty_run_holds_about_its_limit_and_at_least_one_key() {
        let c = ShardedCache::new(1 << 30, 16);
        for i in 0..1_000 {
            c.put_dirty(k(i), Some(vec![1]), u64::from(i) + 1);
        }
        for limit in [1, 64, 300] {
            let end = c.dirty_run_end(&k(100), None, limit).expect("more than a run is dirty");
            let run = c.dirty_in(&k(100), Some(&end)).len();
            let bound = limit.div_ceil(16).max(2) * 16;
            assert!((1..=bound).contains(&run), "limit {limit}: a run of {run} keys");
        }
        assert_eq!(c.dirty_run_end(&k(990), None, 300), None, "ten keys left: one run");
        assert!(c.dirty_in_at_most(&k(100), Some(&k(200)), 99).is_none());
        let exactly = c.dirty_in_at_most(&k(100), Some(&k(200)), 100);
        assert_eq!(exactly.map(|d| d.len()), Some(100), "exactly 100 in the range");
        assert_eq!(c.dirty_run_end(&k(1_000), None, 1), None, "nothing dirty from there");
        assert_eq!(c.dirty_run_end(&k(100), Some(&k(120)), 300), None, "twenty keys below the upper bound");
        let end = c.dirty_run_end(&k(100), Some(&k(900)), 64).expect("800 keys in the range");
        assert!(end > k(100) && end < k(900));
    }

    #[test]
    fn eviction_brings_every_shard_toward_its_share() {
        let c = ShardedCache::new(64 << 10, 8);
        for i in 0..2_000 {
            c.put_dirty(k(i), Some(vec![1; 100]), u64::from(i) + 1);
        }
        let dirty = c.dirty_in(b"", None);
        c.mark_clean(&dirty);
        let victims = c.choose_victims(64, 32 << 10);
        assert!(victims.is_empty(), "every record is clean: evicted, not written back");
        assert!(c.used_bytes() <= 40 << 10, "{} bytes left", c.used_bytes());
    }
}
