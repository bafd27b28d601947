//! The replacement policy of `Cache` (see the module documentation): making room, the small
//! FIFO's exits, the CLOCK hand, the ghost list, and what eviction does with a value.

use super::{Cache, CacheKey, CacheValue, MAX_FREQ, SMALL_SHARE_DIVISOR};

impl<K: CacheKey, V: CacheValue> Cache<K, V> {
    /// Empties `slot`, returning its value. Its small-FIFO entry, if any, goes stale.
    pub(super) fn remove(&mut self, slot: u32) -> Option<V> {
        let s = self.slots.get_mut(slot as usize)?;
        let value = s.value.take()?;
        self.data_bytes -= s.bytes;
        self.slack_bytes -= value.slack_bytes();
        let was_small = std::mem::take(&mut s.in_small);
        if was_small {
            self.small_bytes -= s.bytes;
            self.small_live -= 1;
        }
        s.bytes = 0;
        s.owner = K::default(); // frees a long owner key now
        self.free.push(slot);
        if was_small {
            self.drop_stale_small_entries();
        }
        Some(value)
    }

    /// Evicts `slot`: its buffers become spare ones if there is room and the value gives them up
    /// (no reader holds it), else it waits in `evicted` to be handed to the caller.
    fn evict(&mut self, slot: u32) {
        let Some(value) = self.remove(slot) else { return };
        if self.spare.len() >= self.spare_count || value.memory_bytes() > self.spare_max_bytes {
            self.evicted.push(value);
            return;
        }
        match value.into_spare() {
            Ok(spare) => self.spare.push(spare),
            Err(value) => self.evicted.push(value),
        }
    }

    /// Whether the value in `slot` may be evicted now.
    fn evictable(&self, slot: u32) -> bool {
        self.slots.get(slot as usize).and_then(|s| s.value.as_ref()).is_some_and(V::evictable)
    }

    /// Keeps the small FIFO's stale entries (of slots emptied or moved while the FIFO was under
    /// its share, so nothing popped them) from outgrowing its live ones.
    fn drop_stale_small_entries(&mut self) {
        if self.small.len() > 2 * self.small_live + 64 {
            let slots = &self.slots;
            self.small.retain(|&(id, generation)| {
                slots
                    .get(id as usize)
                    .is_some_and(|s| s.value.is_some() && s.in_small && s.generation == generation)
            });
        }
    }

    /// Remembers an owner dropped from the small FIFO; the order holds at most as many entries
    /// as the cache holds values.
    fn remember_ghost(&mut self, hash: u64) {
        self.ghost_seq += 1;
        self.ghost.insert(hash, self.ghost_seq);
        self.ghost_order.push_back((hash, self.ghost_seq));
        let limit = self.len().max(1);
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

    /// Evicts until `extra` more bytes fit, never `keep` nor a value that is not evictable: from
    /// the small FIFO while it holds more than its share (or the main part is empty), else by
    /// CLOCK from the main part. When that policy cannot make room (only `keep` is left where it
    /// looks, within its step budget), any other evictable value goes, then ghost entries.
    pub(super) fn make_room(&mut self, extra: u64, keep: Option<u32>) {
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
            self.clock_step(keep);
        }
        for id in 0..self.slots.len() as u32 {
            if self.used_bytes() + extra <= self.capacity_bytes {
                return;
            }
            if keep != Some(id) && self.evictable(id) {
                self.evict(id);
            }
        }
        while self.used_bytes() + extra > self.capacity_bytes && !self.ghost_order.is_empty() {
            self.forget_oldest_ghost();
        }
    }

    /// Moves the CLOCK hand one main-part slot on: decrements its access count, or evicts it
    /// when the count is 0 (never `keep`, small-FIFO slots or values that are not evictable).
    fn clock_step(&mut self, keep: Option<u32>) {
        self.hand = (self.hand + 1) % self.slots.len();
        let id = self.hand as u32;
        let Some(s) = self.slots.get_mut(self.hand) else { return };
        let Some(value) = s.value.as_ref() else { return };
        if s.in_small || keep == Some(id) || !value.evictable() {
            return;
        }
        if s.freq > 0 {
            s.freq -= 1;
        } else {
            self.evict(id);
        }
    }

    /// The oldest small-FIFO entry leaves: to the main part if it was read since it came in (or
    /// may not be evicted), else out of the cache (its owner's hash to the ghost list). Stale
    /// entries are dropped. Returns whether it was `keep` (queued again: nothing left).
    fn leave_small(&mut self, id: u32, generation: u32, keep: Option<u32>) -> bool {
        let Some(s) = self.slots.get_mut(id as usize) else { return false };
        let Some(value) = s.value.as_ref() else { return false };
        if !s.in_small || s.generation != generation {
            return false;
        }
        if keep == Some(id) {
            self.small.push_back((id, generation));
            return true;
        }
        if s.freq > 0 || !value.evictable() {
            (s.in_small, s.freq) = (false, 0);
            self.small_bytes -= s.bytes;
            self.small_live -= 1;
        } else {
            let hash = s.owner.ghost_hash();
            self.evict(id);
            self.remember_ghost(hash);
        }
        false
    }
}
