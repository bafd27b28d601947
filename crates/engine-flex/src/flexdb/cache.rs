//! The interval cache (§5.3): decoded intervals (`IntervalData`: raw bytes + record spans), bounded
//! in bytes. Write-through: the committer updates a cached interval in place when it changes the
//! table file. A slot records its owner's index key; an index entry whose `cache_slot` names a slot
//! owned by another key is a miss.
//!
//! Replacement: the paper's CLOCK, behind a small probationary FIFO (S3-FIFO, Yang et al., SOSP
//! '23). A new interval enters the small FIFO (1/`SMALL_SHARE_DIVISOR` of the bytes); when it
//! leaves, it joins the CLOCK-managed main part only if it was read again meanwhile, else its
//! key's hash goes to a ghost list and the interval is dropped. An interval whose hash is in the
//! ghost list enters the main part directly. So intervals read once (YCSB's zipfian folds ~40% of
//! the accesses evenly over all keys, and scans read intervals past their start key) do not push
//! out the ones read over and over. Main-part intervals carry a 2-bit access count that the CLOCK
//! hand decrements instead of a reference bit. Measured with `strata bench` (2M UDB records,
//! 60 MiB, `flexdb.interval_loads` per operation against CLOCK alone): C 0.637 → 0.575, E 2.158
//! → 1.973 (docs/benchmarks.md, session 6).
//!
//! A reader's cache miss usually allocates nothing: eviction keeps the buffers of up to
//! `SPARE_BUFFERS` evicted intervals (each at most `SPARE_MAX_BYTES`: ≤ 260 KiB, outside the
//! budget) for the next reads to decode into (a buffer too small for the next interval grows).
//! `insert` hands the other evicted intervals to the caller, a reader, to drop after it has
//! released the cache's lock; the committer's `update` and a re-size drop them under it.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::Arc;

pub use super::interval::IntervalData;
use super::interval::Span;
use super::sparse_index::{IndexKey, NO_SLOT};
use strata_kit::inline_key::InlineKey as OwnerKey;

/// Evicted intervals whose buffers are kept for reuse.
const SPARE_BUFFERS: usize = 8;
/// Larger evicted buffers are freed, not kept.
const SPARE_MAX_BYTES: u64 = 32 << 10;
/// The small FIFO's share of the capacity: 1/10, as in the S3-FIFO paper.
const SMALL_SHARE_DIVISOR: u64 = 10;
/// Highest access count of a main-part slot.
const MAX_FREQ: u8 = 3;
/// Bytes counted per ghost entry: hash and sequence number in the map (with its slack) and in the
/// FIFO order.
const GHOST_ENTRY_BYTES: u64 = 40;

/// The two heap buffers of an evicted interval (`IntervalData::into_buffers`).
pub type SpareBuffers = (Vec<u8>, Vec<Span>);

struct Slot {
    owner: OwnerKey,
    data: Option<Arc<IntervalData>>,
    bytes: u64,
    /// Reads since it entered the small FIFO (in it), or its CLOCK count (in the main part).
    freq: u8,
    in_small: bool,
    /// Bumped whenever the slot gets a new interval: names one occupancy in the small FIFO.
    generation: u32,
}

/// See the module documentation. Not internally locked: the table keeps it under a mutex.
pub struct IntervalCache {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// The small FIFO, oldest first: (slot, generation); entries of emptied slots are skipped.
    small: VecDeque<(u32, u32)>,
    small_bytes: u64,
    /// Hashes of owners recently dropped from the small FIFO, with the sequence number of their
    /// latest entry in `ghost_order` (oldest first); an order entry whose number is not the map's
    /// is an orphan (the hash was re-admitted or ghosted again) and only waits to be popped.
    ghost: HashMap<u64, u64, BuildHasherDefault<IdentityHasher>>,
    ghost_order: VecDeque<(u64, u64)>,
    ghost_seq: u64,
    /// Live slots in the small FIFO (its entries of emptied or moved slots are stale).
    small_live: usize,
    /// The main part's CLOCK hand over `slots`.
    hand: usize,
    /// Interval bytes cached (`memory_bytes` of each), not counting the ghost list.
    data_bytes: u64,
    /// Of `data_bytes`, what the cached intervals hold allocated and do not use (kept as the
    /// intervals come and go: `Stats` must not walk the slots under this lock).
    slack_bytes: u64,
    capacity_bytes: u64,
    spare: Vec<SpareBuffers>,
    /// Evicted intervals not yet handed to the caller (see `insert`).
    evicted: Vec<Arc<IntervalData>>,
    pub hits: u64,
    pub misses: u64,
}

/// The ghost set's keys are already hashes.
#[derive(Default)]
struct IdentityHasher(u64);

impl std::hash::Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A ghost entry's identity: two hardware CRCs with different seeds (SipHash was ~1% of a scan
/// workload). A collision only makes admission misjudge one interval.
fn owner_hash(owner: &[u8]) -> u64 {
    let high = crc32c::crc32c_append(0x9E37_79B9, owner);
    (u64::from(high) << 32) | u64::from(crc32c::crc32c(owner))
}

impl IntervalCache {
    pub fn new(capacity_bytes: u64) -> IntervalCache {
        IntervalCache {
            slots: Vec::new(),
            free: Vec::new(),
            small: VecDeque::new(),
            small_bytes: 0,
            ghost: HashMap::default(),
            ghost_order: VecDeque::new(),
            ghost_seq: 0,
            small_live: 0,
            hand: 0,
            data_bytes: 0,
            slack_bytes: 0,
            capacity_bytes,
            spare: Vec::new(),
            evicted: Vec::new(),
            hits: 0,
            misses: 0,
        }
    }

    /// Cached intervals plus the ghost list.
    pub fn used_bytes(&self) -> u64 {
        self.data_bytes + self.ghost_order.len() as u64 * GHOST_ENTRY_BYTES
    }

    /// Intervals cached now.
    pub fn interval_count(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Of `used_bytes`, what the cached intervals hold allocated and do not use.
    pub fn slack_bytes(&self) -> u64 {
        self.slack_bytes
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    /// Changes the capacity, evicting down to it.
    pub fn set_capacity(&mut self, capacity_bytes: u64) {
        self.capacity_bytes = capacity_bytes;
        self.make_room(0, None);
        self.evicted.clear();
    }

    /// The data in `slot` if `owner` still owns it; counts a hit or a miss.
    pub fn get(&mut self, slot: u32, owner: IndexKey<'_>) -> Option<Arc<IntervalData>> {
        let found = self.slots.get_mut(slot as usize).filter(|s| owner.eq_slice(&s.owner)).and_then(|s| {
            s.freq = (s.freq + 1).min(MAX_FREQ);
            s.data.clone()
        });
        match found {
            Some(_) => self.hits += 1,
            None => self.misses += 1,
        }
        found
    }

    /// The data in `slot` if `owner` still owns it; counts nothing, touches no access count.
    pub fn peek(&self, slot: u32, owner: IndexKey<'_>) -> Option<Arc<IntervalData>> {
        self.slots.get(slot as usize).filter(|s| owner.eq_slice(&s.owner)).and_then(|s| s.data.clone())
    }

    /// Whether `owner` owns `slot` and it holds data; counts nothing, touches no access count.
    pub fn contains(&self, slot: u32, owner: IndexKey<'_>) -> bool {
        self.slots.get(slot as usize).is_some_and(|s| s.data.is_some() && owner.eq_slice(&s.owner))
    }

    /// Buffers to read and decode an interval of `len` bytes into: the evicted interval's whose
    /// byte buffer fits it best (the smallest that holds it, else the largest), or new empty ones.
    pub fn take_spare(&mut self, len: usize) -> SpareBuffers {
        let capacity = |i: &usize| self.spare.get(*i).map_or(0, |s| s.0.capacity());
        let best = (0..self.spare.len())
            .filter(|i| capacity(i) >= len)
            .min_by_key(capacity)
            .or_else(|| (0..self.spare.len()).max_by_key(capacity));
        best.map(|i| self.spare.swap_remove(i)).unwrap_or_default()
    }

    /// Caches `data` for `owner` (in the small FIFO, or in the main part if the ghost list knows
    /// it), evicting as needed; returns the slot (`NO_SLOT` when the interval alone is larger
    /// than the cache) and the evicted intervals whose buffers were not kept as spare ones: the
    /// caller drops them after releasing the cache's lock (freeing them is the slow part of an
    /// eviction).
    pub fn insert(&mut self, owner: IndexKey<'_>, data: Arc<IntervalData>) -> (u32, Vec<Arc<IntervalData>>) {
        let bytes = data.memory_bytes();
        if bytes > self.capacity_bytes {
            return (NO_SLOT, Vec::new());
        }
        let mut owner_key = OwnerKey::new();
        owner.with_slice(|k| owner_key.extend_from_slice(k));
        let in_small = self.ghost.remove(&owner_hash(&owner_key)).is_none();
        self.make_room(bytes, None);
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.slots.push(Slot {
                    owner: OwnerKey::new(),
                    data: None,
                    bytes: 0,
                    freq: 0,
                    in_small: false,
                    generation: 0,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let s = &mut self.slots[id as usize];
        s.generation = s.generation.wrapping_add(1);
        self.slack_bytes += data.slack_bytes();
        (s.owner, s.data, s.bytes, s.freq, s.in_small) = (owner_key, Some(data), bytes, 0, in_small);
        self.data_bytes += bytes;
        if in_small {
            self.small.push_back((id, s.generation));
            self.small_bytes += bytes;
            self.small_live += 1;
        }
        (id, std::mem::take(&mut self.evicted))
    }

    /// Write-through: replaces the data of `slot` if `owner` owns it (drops it if now too large).
    pub fn update(&mut self, slot: u32, owner: &[u8], data: Arc<IntervalData>) {
        let Some(s) =
            self.slots.get_mut(slot as usize).filter(|s| s.owner.as_slice() == owner && s.data.is_some())
        else {
            return;
        };
        let bytes = data.memory_bytes();
        self.data_bytes = self.data_bytes - s.bytes + bytes;
        if s.in_small {
            self.small_bytes = self.small_bytes - s.bytes + bytes;
        }
        s.bytes = bytes;
        let old_slack = s.data.as_ref().map_or(0, |d| d.slack_bytes());
        self.slack_bytes = self.slack_bytes - old_slack + data.slack_bytes();
        s.data = Some(data);
        if bytes > self.capacity_bytes {
            self.invalidate(slot);
        } else {
            self.make_room(0, Some(slot));
            self.evicted.clear();
        }
    }

    pub fn invalidate(&mut self, slot: u32) {
        drop(self.remove(slot));
    }

    /// Empties `slot`, returning its data. Its small-FIFO entry, if any, goes stale.
    fn remove(&mut self, slot: u32) -> Option<Arc<IntervalData>> {
        let s = self.slots.get_mut(slot as usize)?;
        let data = s.data.take()?;
        self.data_bytes -= s.bytes;
        self.slack_bytes -= data.slack_bytes();
        let was_small = std::mem::take(&mut s.in_small);
        if was_small {
            self.small_bytes -= s.bytes;
            self.small_live -= 1;
        }
        s.bytes = 0;
        s.owner.clear();
        self.free.push(slot);
        if was_small {
            self.drop_stale_small_entries();
        }
        Some(data)
    }

    /// Evicts `slot`: its buffers become spare ones if there is room and no reader holds the
    /// interval, else it waits in `evicted` to be dropped.
    fn evict(&mut self, slot: u32) {
        let Some(data) = self.remove(slot) else { return };
        if self.spare.len() >= SPARE_BUFFERS || data.memory_bytes() > SPARE_MAX_BYTES {
            self.evicted.push(data);
            return;
        }
        match Arc::try_unwrap(data) {
            Ok(data) => self.spare.push(data.into_buffers()),
            Err(shared) => self.evicted.push(shared),
        }
    }

    /// Keeps the small FIFO's stale entries (of slots emptied or moved while the FIFO was under
    /// its share, so nothing popped them) from outgrowing its live ones.
    fn drop_stale_small_entries(&mut self) {
        if self.small.len() > 2 * self.small_live + 64 {
            let slots = &self.slots;
            self.small.retain(|&(id, generation)| {
                slots
                    .get(id as usize)
                    .is_some_and(|s| s.data.is_some() && s.in_small && s.generation == generation)
            });
        }
    }

    /// Remembers an interval dropped from the small FIFO; the order holds at most as many entries
    /// as the cache holds intervals.
    fn remember_ghost(&mut self, hash: u64) {
        self.ghost_seq += 1;
        self.ghost.insert(hash, self.ghost_seq);
        self.ghost_order.push_back((hash, self.ghost_seq));
        let limit = (self.slots.len() - self.free.len()).max(1);
        while self.ghost_order.len() > limit {
            self.forget_oldest_ghost();
        }
    }

    fn forget_oldest_ghost(&mut self) {
        if let Some((hash, seq)) = self.ghost_order.pop_front() {
            if self.ghost.get(&hash) == Some(&seq) {
                self.ghost.remove(&hash);
            }
        }
    }

    /// Evicts until `extra` more bytes fit, never `keep`: from the small FIFO while it holds more
    /// than its share (or the main part is empty), else by CLOCK from the main part. When that
    /// policy cannot make room (only `keep` is left where it looks, within its step budget), any
    /// other interval goes, then ghost entries.
    fn make_room(&mut self, extra: u64, keep: Option<u32>) {
        let mut budget = (self.slots.len() + self.small.len()) * (MAX_FREQ as usize + 2) + 1;
        while self.used_bytes() + extra > self.capacity_bytes && budget > 0 && self.data_bytes > 0 {
            budget -= 1;
            let small_over = self.small_bytes > self.capacity_bytes / SMALL_SHARE_DIVISOR;
            if (small_over || self.small_bytes == self.data_bytes) && self.small_bytes > 0 {
                let Some((id, generation)) = self.small.pop_front() else { break };
                if !self.leave_small(id, generation, keep) {
                    continue;
                }
                // Only `keep` was there: try the main part this step.
            }
            if self.slots.is_empty() {
                break;
            }
            self.hand = (self.hand + 1) % self.slots.len();
            let id = self.hand as u32;
            let s = &mut self.slots[self.hand];
            if s.data.is_none() || s.in_small || keep == Some(id) {
                continue;
            }
            if s.freq > 0 {
                s.freq -= 1;
            } else {
                self.evict(id);
            }
        }
        for id in 0..self.slots.len() as u32 {
            if self.used_bytes() + extra <= self.capacity_bytes {
                return;
            }
            if keep != Some(id) {
                self.evict(id);
            }
        }
        while self.used_bytes() + extra > self.capacity_bytes && !self.ghost_order.is_empty() {
            self.forget_oldest_ghost();
        }
    }

    /// The oldest small-FIFO entry leaves: to the main part if it was read since it came in,
    /// else out of the cache (its hash to the ghost list). Stale entries are dropped. Returns
    /// whether it was `keep` (queued again: nothing left).
    fn leave_small(&mut self, id: u32, generation: u32, keep: Option<u32>) -> bool {
        let Some(s) = self.slots.get_mut(id as usize) else { return false };
        if s.data.is_none() || !s.in_small || s.generation != generation {
            return false;
        }
        if keep == Some(id) {
            self.small.push_back((id, generation));
            return true;
        }
        if s.freq > 0 {
            (s.in_small, s.freq) = (false, 0);
            self.small_bytes -= s.bytes;
            self.small_live -= 1;
        } else {
            let hash = owner_hash(&s.owner);
            self.evict(id);
            self.remember_ghost(hash);
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &[u8]) -> IndexKey<'_> {
        IndexKey::from_slice(k)
    }

    fn data(n: usize) -> Arc<IntervalData> {
        let mut bytes = Vec::new();
        for i in 0..n {
            super::super::record::encode_into(&[i as u8], &[0; 100], &mut bytes);
        }
        Arc::new(IntervalData::decode(bytes).unwrap())
    }

    #[test]
    fn stays_within_budget_and_keeps_the_interval_read_again() {
        let per = data(4).memory_bytes();
        // Room for three intervals and the ghost list's two entries.
        let mut cache = IntervalCache::new(per * 3 + 2 * GHOST_ENTRY_BYTES);
        let a = cache.insert(key(b"a"), data(4)).0;
        let b = cache.insert(key(b"b"), data(4)).0;
        let c = cache.insert(key(b"c"), data(4)).0;
        assert!(cache.get(a, key(b"a")).is_some());
        // `a` moves to the main part, `b` (never read again) is dropped.
        let d = cache.insert(key(b"d"), data(4)).0;
        assert!(cache.used_bytes() <= cache.capacity_bytes());
        let live: Vec<&[u8]> = [(a, &b"a"[..]), (b, b"b"), (c, b"c"), (d, b"d")]
            .into_iter()
            .filter(|(s, k)| cache.contains(*s, key(k)))
            .map(|(_, k)| k)
            .collect();
        assert_eq!(live, [&b"a"[..], b"c", b"d"]);
        assert!(cache.get(d, key(b"x")).is_none(), "a slot answers only its owner");
        assert_eq!(cache.insert(key(b"big"), data(100)).0, NO_SLOT);
        cache.update(d, b"d", data(1));
        assert_eq!(cache.get(d, key(b"d")).map(|x| x.len()), Some(1));
        cache.invalidate(d);
        assert!(cache.get(d, key(b"d")).is_none());
    }

    #[test]
    fn eviction_keeps_unshared_buffers_for_reuse_and_hands_back_shared_ones() {
        let mut cache = IntervalCache::new(data(4).memory_bytes());
        let held = data(4); // a reader still holds it
        cache.insert(key(b"a"), held.clone());
        let (_, evicted) = cache.insert(key(b"b"), data(4));
        assert!(evicted.len() == 1 && Arc::ptr_eq(&evicted[0], &held), "shared: handed back to drop");
        assert_eq!(cache.take_spare(1).0.capacity(), 0, "nothing spare yet");
        let (_, evicted) = cache.insert(key(b"c"), data(4));
        assert!(evicted.is_empty(), "unshared: kept");
        let (mut bytes, spans) = cache.take_spare(held.bytes().len());
        assert!(bytes.capacity() >= held.bytes().len() && spans.capacity() >= 4);
        bytes.clear();
        bytes.extend_from_slice(held.bytes());
        let reused = IntervalData::decode_reusing(bytes, spans).unwrap();
        assert_eq!(reused.iter().collect::<Vec<_>>(), held.iter().collect::<Vec<_>>());
    }

    /// Owners "h0".."h{n}" (hot) and "s0".. (scanned once).
    fn owner(prefix: &str, i: usize) -> strata_core::Key {
        format!("{prefix}{i}").into_bytes()
    }

    #[test]
    fn intervals_read_once_do_not_push_out_the_ones_read_again() {
        let per = data(4).memory_bytes();
        let mut cache = IntervalCache::new(per * 20);
        let hot: Vec<u32> = (0..10).map(|i| cache.insert(key(&owner("h", i)), data(4)).0).collect();
        for (i, &slot) in hot.iter().enumerate() {
            assert!(cache.get(slot, key(&owner("h", i))).is_some());
        }
        // A scan: 200 intervals, each read once. CLOCK alone would cycle all of them through.
        for i in 0..200 {
            cache.insert(key(&owner("s", i)), data(4));
            assert!(cache.used_bytes() <= per * 20);
        }
        for (i, &slot) in hot.iter().enumerate() {
            assert!(cache.get(slot, key(&owner("h", i))).is_some(), "hot interval {i} was evicted");
        }
    }

    #[test]
    fn an_interval_dropped_from_the_small_fifo_comes_back_into_the_main_part() {
        let per = data(4).memory_bytes();
        let mut cache = IntervalCache::new(per * 20);
        let first = cache.insert(key(&owner("x", 0)), data(4)).0;
        for i in 0..30 {
            cache.insert(key(&owner("s", i)), data(4));
        }
        assert!(cache.get(first, key(&owner("x", 0))).is_none(), "read once: dropped from the small FIFO");
        let again = cache.insert(key(&owner("x", 0)), data(4)).0; // the ghost list remembers it: main part
        for i in 30..300 {
            cache.insert(key(&owner("s", i)), data(4));
        }
        assert!(cache.get(again, key(&owner("x", 0))).is_some());
    }

    /// Review finding (session 6): an update whose interval is the only one in an over-full small
    /// FIFO re-queued it step after step and never evicted from the main part: the cache stayed
    /// over its capacity.
    #[test]
    fn an_update_makes_room_even_when_only_its_own_interval_is_in_the_small_fifo() {
        let per = data(4).memory_bytes();
        let mut cache = IntervalCache::new(per * 3 + 4 * GHOST_ENTRY_BYTES);
        let slots: Vec<u32> =
            ["a", "b", "c"].iter().map(|k| cache.insert(key(k.as_bytes()), data(4)).0).collect();
        for (slot, k) in slots.iter().zip(["a", "b", "c"]) {
            assert!(cache.get(*slot, key(k.as_bytes())).is_some());
        }
        // `d` pushes a, b, c (read again) to the main part and evicts one of them.
        let d = cache.insert(key(b"d"), data(4)).0;
        cache.update(d, b"d", data(8)); // twice the size: only the main part can give room
        assert!(
            cache.used_bytes() <= cache.capacity_bytes(),
            "{} > {}",
            cache.used_bytes(),
            cache.capacity_bytes()
        );
        assert_eq!(cache.get(d, key(b"d")).map(|x| x.len()), Some(8));
    }

    /// `slack_bytes` is kept as intervals come and go; it must equal a walk of the slots after
    /// inserts, evictions, updates and invalidations of intervals with and without slack.
    #[test]
    fn the_slack_total_follows_inserts_updates_evictions_and_invalidations() {
        let walked = |c: &IntervalCache| -> u64 {
            c.slots.iter().filter_map(|s| s.data.as_ref()).map(|d| d.slack_bytes()).sum()
        };
        let roomy = |n: usize| {
            let (mut bytes, mut spans) = Arc::try_unwrap(data(n)).unwrap().into_buffers();
            bytes.reserve(1000);
            spans.reserve(10);
            Arc::new(IntervalData::decode_reusing(bytes, spans).unwrap())
        };
        assert!(roomy(2).slack_bytes() >= 1000);
        let mut cache = IntervalCache::new(roomy(4).memory_bytes() * 3);
        let mut slots = Vec::new();
        for i in 0..12 {
            let d = if i % 2 == 0 { roomy(i % 5 + 1) } else { data(i % 5 + 1) };
            slots.push(cache.insert(key(&owner("s", i)), d).0);
            assert_eq!(cache.slack_bytes(), walked(&cache), "after insert {i}");
        }
        for (i, &slot) in slots.iter().enumerate() {
            let d = if i % 3 == 0 { roomy(2) } else { data(2) };
            cache.update(slot, &owner("s", i), d);
            assert_eq!(cache.slack_bytes(), walked(&cache), "after update {i}");
        }
        assert!(cache.slack_bytes() > 0);
        for &slot in &slots {
            cache.invalidate(slot);
        }
        assert_eq!((cache.slack_bytes(), walked(&cache)), (0, 0));
    }

    #[test]
    fn the_small_fifo_does_not_keep_entries_of_emptied_slots() {
        let mut cache = IntervalCache::new(1 << 30);
        for i in 0..1000 {
            let slot = cache.insert(key(&owner("s", i)), data(1)).0;
            cache.invalidate(slot);
        }
        assert!(cache.small.len() <= 2 * cache.small_live + 64, "{} entries", cache.small.len());
        assert_eq!((cache.small_live, cache.small_bytes, cache.data_bytes), (0, 0, 0));
    }
}
