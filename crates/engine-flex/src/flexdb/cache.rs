//! The interval cache (§5.3): decoded intervals (`IntervalData`: raw bytes + record spans) under CLOCK
//! replacement, bounded in bytes. Write-through: the committer updates a cached interval in place
//! when it changes the table file. A slot records its owner's index key; an index entry whose
//! `cache_slot` names a slot owned by another key is a miss.

use std::sync::Arc;

use strata_core::Key;

pub use super::interval::IntervalData;
use super::interval::Span;
use super::sparse_index::{IndexKey, NO_SLOT};

/// Evicted intervals whose buffers are kept for reuse.
const SPARE_BUFFERS: usize = 8;
/// Larger evicted buffers are freed, not kept.
const SPARE_MAX_BYTES: usize = 32 << 10;

/// The two heap buffers of an evicted interval (`IntervalData::into_buffers`).
pub type SpareBuffers = (Vec<u8>, Vec<Span>);

struct Slot {
    owner: Key,
    data: Option<Arc<IntervalData>>,
    bytes: u64,
    referenced: bool,
}

/// See the module documentation. Not internally locked: the table keeps it under a mutex.
pub struct IntervalCache {
    slots: Vec<Slot>,
    free: Vec<u32>,
    hand: usize,
    used_bytes: u64,
    capacity_bytes: u64,
    spare: Vec<SpareBuffers>,
    /// Evicted intervals not yet handed to the caller (see `insert`).
    evicted: Vec<Arc<IntervalData>>,
    pub hits: u64,
    pub misses: u64,
}

impl IntervalCache {
    pub fn new(capacity_bytes: u64) -> IntervalCache {
        IntervalCache {
            slots: Vec::new(),
            free: Vec::new(),
            hand: 0,
            used_bytes: 0,
            capacity_bytes,
            spare: Vec::new(),
            evicted: Vec::new(),
            hits: 0,
            misses: 0,
        }
    }

    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    /// Changes the capacity, evicting by CLOCK down to it.
    pub fn set_capacity(&mut self, capacity_bytes: u64) {
        self.capacity_bytes = capacity_bytes;
        self.make_room(0, None);
        self.evicted.clear();
    }

    /// The data in `slot` if `owner` still owns it; counts a hit or a miss.
    pub fn get(&mut self, slot: u32, owner: IndexKey<'_>) -> Option<Arc<IntervalData>> {
        let found = self.slots.get_mut(slot as usize).filter(|s| owner.eq_slice(&s.owner)).and_then(|s| {
            s.referenced = true;
            s.data.clone()
        });
        match found {
            Some(_) => self.hits += 1,
            None => self.misses += 1,
        }
        found
    }

    /// Whether `owner` owns `slot` and it holds data; counts nothing, touches no reference bit.
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

    /// Caches `data` for `owner`, evicting by CLOCK; returns the slot (`NO_SLOT` when the interval
    /// alone is larger than the cache) and the evicted intervals whose buffers were not kept as
    /// spare ones: the caller drops them after releasing the cache's lock (freeing them is the
    /// slow part of an eviction).
    pub fn insert(&mut self, owner: Key, data: Arc<IntervalData>) -> (u32, Vec<Arc<IntervalData>>) {
        let bytes = data.memory_bytes();
        if bytes > self.capacity_bytes {
            return (NO_SLOT, Vec::new());
        }
        self.make_room(bytes, None);
        let slot = Slot { owner, data: Some(data), bytes, referenced: true };
        self.used_bytes += bytes;
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = slot;
                id
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        (id, std::mem::take(&mut self.evicted))
    }

    /// Write-through: replaces the data of `slot` if `owner` owns it (drops it if now too large).
    pub fn update(&mut self, slot: u32, owner: &[u8], data: Arc<IntervalData>) {
        let Some(s) = self.slots.get_mut(slot as usize).filter(|s| s.owner == owner && s.data.is_some())
        else {
            return;
        };
        let bytes = data.memory_bytes();
        self.used_bytes = self.used_bytes - s.bytes + bytes;
        s.bytes = bytes;
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

    /// Empties `slot`, returning its data.
    fn remove(&mut self, slot: u32) -> Option<Arc<IntervalData>> {
        let s = self.slots.get_mut(slot as usize)?;
        let data = s.data.take()?;
        self.used_bytes -= s.bytes;
        s.bytes = 0;
        s.owner.clear();
        self.free.push(slot);
        Some(data)
    }

    /// Evicts `slot`: its buffers become spare ones if there is room and no reader holds the
    /// interval, else it waits in `evicted` to be dropped.
    fn evict(&mut self, slot: u32) {
        let Some(data) = self.remove(slot) else { return };
        if self.spare.len() >= SPARE_BUFFERS || data.bytes().len() > SPARE_MAX_BYTES {
            self.evicted.push(data);
            return;
        }
        match Arc::try_unwrap(data) {
            Ok(data) => self.spare.push(data.into_buffers()),
            Err(shared) => self.evicted.push(shared),
        }
    }

    /// Evicts unreferenced slots (clearing reference bits as the hand passes) until `extra` more
    /// bytes fit; never evicts `keep`.
    fn make_room(&mut self, extra: u64, keep: Option<u32>) {
        let mut budget = self.slots.len() * 2 + 1;
        while self.used_bytes + extra > self.capacity_bytes && budget > 0 && !self.slots.is_empty() {
            budget -= 1;
            self.hand = (self.hand + 1) % self.slots.len();
            let id = self.hand as u32;
            let s = &mut self.slots[self.hand];
            if s.data.is_none() || keep == Some(id) {
                continue;
            }
            if s.referenced {
                s.referenced = false;
            } else {
                self.evict(id);
            }
        }
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
    fn stays_within_budget_and_prefers_referenced_slots() {
        let per = data(4).memory_bytes();
        let mut cache = IntervalCache::new(per * 3);
        let a = cache.insert(b"a".to_vec(), data(4)).0;
        let b = cache.insert(b"b".to_vec(), data(4)).0;
        let c = cache.insert(b"c".to_vec(), data(4)).0;
        assert!(cache.get(a, key(b"a")).is_some());
        // Clears all reference bits, evicts one; then `a` is touched again.
        let d = cache.insert(b"d".to_vec(), data(4)).0;
        assert!(cache.used_bytes() <= per * 3);
        let live = [(a, &b"a"[..]), (b, b"b"), (c, b"c"), (d, b"d")]
            .iter()
            .filter(|(s, k)| cache.get(*s, key(k)).is_some())
            .count();
        assert_eq!(live, 3);
        assert!(cache.get(d, key(b"x")).is_none(), "a slot answers only its owner");
        assert_eq!(cache.insert(b"big".to_vec(), data(100)).0, NO_SLOT);
        cache.update(d, b"d", data(1));
        assert_eq!(cache.get(d, key(b"d")).map(|x| x.len()), Some(1));
        cache.invalidate(d);
        assert!(cache.get(d, key(b"d")).is_none());
    }

    #[test]
    fn eviction_keeps_unshared_buffers_for_reuse_and_hands_back_shared_ones() {
        let mut cache = IntervalCache::new(data(4).memory_bytes());
        let held = data(4); // a reader still holds it
        cache.insert(b"a".to_vec(), held.clone());
        let (_, evicted) = cache.insert(b"b".to_vec(), data(4));
        assert!(evicted.len() == 1 && Arc::ptr_eq(&evicted[0], &held), "shared: handed back to drop");
        assert_eq!(cache.take_spare(1).0.capacity(), 0, "nothing spare yet");
        let (_, evicted) = cache.insert(b"c".to_vec(), data(4));
        assert!(evicted.is_empty(), "unshared: kept");
        let (mut bytes, spans) = cache.take_spare(held.bytes().len());
        assert!(bytes.capacity() >= held.bytes().len() && spans.capacity() >= 4);
        bytes.clear();
        bytes.extend_from_slice(held.bytes());
        let reused = IntervalData::decode_reusing(bytes, spans).unwrap();
        assert_eq!(reused.iter().collect::<Vec<_>>(), held.iter().collect::<Vec<_>>());
    }
}
