//! The interval cache (§5.3): decoded intervals (`IntervalData`: raw bytes + record spans) under CLOCK
//! replacement, bounded in bytes. Write-through: the committer updates a cached interval in place
//! when it changes the table file. A slot records its owner's index key; an index entry whose
//! `cache_slot` names a slot owned by another key is a miss.

use std::sync::Arc;

use strata_core::Key;

pub use super::interval::IntervalData;
use super::sparse_index::NO_SLOT;

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
    }

    /// The data in `slot` if `owner` still owns it; counts a hit or a miss.
    pub fn get(&mut self, slot: u32, owner: &[u8]) -> Option<Arc<IntervalData>> {
        let found = self.slots.get_mut(slot as usize).filter(|s| s.owner == owner).and_then(|s| {
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
    pub fn contains(&self, slot: u32, owner: &[u8]) -> bool {
        self.slots.get(slot as usize).is_some_and(|s| s.owner == owner && s.data.is_some())
    }

    /// Caches `data` for `owner`, evicting by CLOCK; returns the slot, or `NO_SLOT` when the
    /// interval alone is larger than the cache.
    pub fn insert(&mut self, owner: Key, data: Arc<IntervalData>) -> u32 {
        let bytes = data.memory_bytes();
        if bytes > self.capacity_bytes {
            return NO_SLOT;
        }
        self.make_room(bytes, None);
        let slot = Slot { owner, data: Some(data), bytes, referenced: true };
        self.used_bytes += bytes;
        match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = slot;
                id
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        }
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
        }
    }

    pub fn invalidate(&mut self, slot: u32) {
        if let Some(s) = self.slots.get_mut(slot as usize) {
            if s.data.take().is_some() {
                self.used_bytes -= s.bytes;
                s.bytes = 0;
                s.owner.clear();
                self.free.push(slot);
            }
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
                self.invalidate(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let a = cache.insert(b"a".to_vec(), data(4));
        let b = cache.insert(b"b".to_vec(), data(4));
        let c = cache.insert(b"c".to_vec(), data(4));
        assert!(cache.get(a, b"a").is_some());
        // Clears all reference bits, evicts one; then `a` is touched again.
        let d = cache.insert(b"d".to_vec(), data(4));
        assert!(cache.used_bytes() <= per * 3);
        let live = [(a, &b"a"[..]), (b, b"b"), (c, b"c"), (d, b"d")]
            .iter()
            .filter(|(s, k)| cache.get(*s, k).is_some())
            .count();
        assert_eq!(live, 3);
        assert!(cache.get(d, b"x").is_none(), "a slot answers only its owner");
        assert_eq!(cache.insert(b"big".to_vec(), data(100)), NO_SLOT);
        cache.update(d, b"d", data(1));
        assert_eq!(cache.get(d, b"d").map(|x| x.len()), Some(1));
        cache.invalidate(d);
        assert!(cache.get(d, b"d").is_none());
    }
}
