//! `Cache<K, V>`: a byte-bounded cache of values of any type (`V: CacheValue`) in numbered slots,
//! each slot recording its owner (`K: CacheKey`). A caller remembers the slot number next to
//! what it caches (flex: in its sparse index) and finds the value again by slot and owner, with
//! no hashing and no search; a slot now owned by someone else is a miss. Slot numbers stay below
//! `u32::MAX`, which a caller may store for "no slot". Not internally locked.
//!
//! Replacement: CLOCK behind a small probationary FIFO (S3-FIFO, Yang et al., SOSP '23). A new
//! value enters the small FIFO (1/`SMALL_SHARE_DIVISOR` of the bytes); when it leaves, it joins
//! the CLOCK-managed main part only if it was read again meanwhile, else its owner's hash goes
//! to a ghost list and the value is dropped. A value whose owner's hash is in the ghost list
//! enters the main part directly. So values read once (a scan's tail, or uniformly spread reads)
//! do not push out the ones read over and over. Main-part slots carry a 2-bit access count that
//! the CLOCK hand decrements instead of a reference bit.
//!
//! The owner keeps control of eviction: a value whose `CacheValue::evictable` is false (a dirty
//! record not yet written back) is never evicted, and every value the cache lets go is handed
//! back (`insert`, `update`, `set_capacity` return them), so the owner can observe evictions and
//! drop what it gets outside its lock (freeing is the slow part of an eviction).
//!
//! Buffer reuse: eviction keeps the buffers (`CacheValue::Spare`) of up to `spare_count`
//! unshared values of at most `spare_max_bytes` each (outside the capacity), for the next miss
//! to fill (`take_spare`), so a miss usually allocates nothing.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use crate::inline_key::InlineKey;

mod replacement;
#[cfg(test)]
mod tests;

/// A value the cache can hold.
///
/// Invariant: `memory_bytes` and `slack_bytes` do not change while the value is cached (the
/// cache counts them when the value comes and goes; replace a value with `Cache::update`).
pub trait CacheValue: Sized {
    /// Reusable buffers of an evicted value, for the next miss to fill (`()`: none).
    type Spare: Default;

    /// What the value holds in memory, counted against the capacity.
    fn memory_bytes(&self) -> u64;

    /// Of `memory_bytes`, what is allocated but unused (reported, not policy).
    fn slack_bytes(&self) -> u64 {
        0
    }

    /// Whether the cache may evict the value now; `false` (say, dirty and not yet written back)
    /// keeps it cached even past the capacity until the owner replaces or invalidates it.
    fn evictable(&self) -> bool {
        true
    }

    /// The value's buffers for reuse, or the value itself when it cannot give them up (shared).
    fn into_spare(self) -> Result<Self::Spare, Self> {
        Err(self)
    }

    /// How large a value `spare` can hold without growing (for `take_spare`'s best fit).
    fn spare_capacity(spare: &Self::Spare) -> usize {
        let _ = spare;
        0
    }
}

/// A shared value: readers hold clones while it is cached; its buffers are reused only once
/// no reader holds it any more.
impl<T: CacheValue> CacheValue for Arc<T> {
    type Spare = T::Spare;

    fn memory_bytes(&self) -> u64 {
        T::memory_bytes(self)
    }

    fn slack_bytes(&self) -> u64 {
        T::slack_bytes(self)
    }

    fn evictable(&self) -> bool {
        T::evictable(self)
    }

    fn into_spare(self) -> Result<T::Spare, Self> {
        Arc::try_unwrap(self).and_then(|value| value.into_spare().map_err(Arc::new))
    }

    fn spare_capacity(spare: &T::Spare) -> usize {
        T::spare_capacity(spare)
    }
}

/// A slot's owner as the cache stores it.
pub trait CacheKey: Default {
    /// The owner's identity in the ghost list: a well-mixed 64-bit hash (a collision only makes
    /// admission misjudge one value).
    fn ghost_hash(&self) -> u64;
}

/// Two hardware CRCs with different seeds: cheaper than SipHash on the insert path.
fn bytes_hash(bytes: &[u8]) -> u64 {
    let high = crc32c::crc32c_append(0x9E37_79B9, bytes);
    (u64::from(high) << 32) | u64::from(crc32c::crc32c(bytes))
}

/// SplitMix64's finalizer: spreads close integers (block numbers) over all 64 bits.
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl CacheKey for InlineKey {
    fn ghost_hash(&self) -> u64 {
        bytes_hash(self)
    }
}

impl CacheKey for Vec<u8> {
    fn ghost_hash(&self) -> u64 {
        bytes_hash(self)
    }
}

impl CacheKey for u64 {
    fn ghost_hash(&self) -> u64 {
        mix64(*self)
    }
}

/// (file, block) and the like.
impl CacheKey for (u64, u64) {
    fn ghost_hash(&self) -> u64 {
        mix64(mix64(self.0) ^ self.1)
    }
}

/// The small FIFO's share of the capacity: 1/10, as in the S3-FIFO paper.
const SMALL_SHARE_DIVISOR: u64 = 10;
/// Highest access count of a main-part slot.
const MAX_FREQ: u8 = 3;
/// Bytes counted per ghost entry: hash and sequence number in the map (with its slack) and in the
/// FIFO order.
pub const GHOST_ENTRY_BYTES: u64 = 40;
/// Default spare-buffer limits (`set_spare_limits`).
const DEFAULT_SPARE_COUNT: usize = 8;
const DEFAULT_SPARE_MAX_BYTES: u64 = 32 << 10;

struct Slot<K, V> {
    owner: K,
    value: Option<V>,
    bytes: u64,
    /// Reads since it entered the small FIFO (in it), or its CLOCK count (in the main part).
    freq: u8,
    in_small: bool,
    /// Bumped whenever the slot gets a new value: names one occupancy in the small FIFO.
    generation: u32,
}

/// See the module documentation.
pub struct Cache<K, V: CacheValue> {
    slots: Vec<Slot<K, V>>,
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
    /// Sums of `bytes` and of `slack_bytes` over the cached values.
    data_bytes: u64,
    slack_bytes: u64,
    capacity_bytes: u64,
    spare: Vec<V::Spare>,
    spare_count: usize,
    spare_max_bytes: u64,
    /// Values let go and not yet handed to the caller.
    evicted: Vec<V>,
    hits: u64,
    misses: u64,
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

impl<K: CacheKey, V: CacheValue> Cache<K, V> {
    pub fn new(capacity_bytes: u64) -> Self {
        Cache {
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
            spare_count: DEFAULT_SPARE_COUNT,
            spare_max_bytes: DEFAULT_SPARE_MAX_BYTES,
            evicted: Vec::new(),
            hits: 0,
            misses: 0,
        }
    }

    /// Keeps the buffers of up to `count` evicted values of at most `max_bytes` each (0: none).
    pub fn set_spare_limits(&mut self, count: usize, max_bytes: u64) {
        (self.spare_count, self.spare_max_bytes) = (count, max_bytes);
        self.spare.truncate(count);
    }

    /// Cached values plus the ghost list.
    pub fn used_bytes(&self) -> u64 {
        self.data_bytes + self.ghost_order.len() as u64 * GHOST_ENTRY_BYTES
    }

    /// Values cached now.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Of `used_bytes`, what the cached values hold allocated and do not use.
    pub fn slack_bytes(&self) -> u64 {
        self.slack_bytes
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    /// Lookups that found their value (`get`).
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// Lookups that did not (`get`, `count_miss`).
    pub fn misses(&self) -> u64 {
        self.misses
    }

    /// Counts a miss the caller found without asking the cache (it knew of no slot).
    pub fn count_miss(&mut self) {
        self.misses += 1;
    }

    /// Changes the capacity, evicting down to it; returns the values evicted.
    pub fn set_capacity(&mut self, capacity_bytes: u64) -> Vec<V> {
        self.capacity_bytes = capacity_bytes;
        self.make_room(0, None);
        std::mem::take(&mut self.evicted)
    }

    /// The value in `slot` if `is_owner` accepts the slot's owner; counts a hit or a miss and
    /// touches the slot's access count.
    #[inline]
    pub fn get(&mut self, slot: u32, is_owner: impl FnOnce(&K) -> bool) -> Option<&V> {
        let found = self.slots.get_mut(slot as usize).filter(|s| s.value.is_some() && is_owner(&s.owner));
        match found {
            Some(s) => {
                self.hits += 1;
                s.freq = (s.freq + 1).min(MAX_FREQ);
                s.value.as_ref()
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// `get` without counting or touching anything.
    pub fn peek(&self, slot: u32, is_owner: impl FnOnce(&K) -> bool) -> Option<&V> {
        self.slots.get(slot as usize).filter(|s| is_owner(&s.owner)).and_then(|s| s.value.as_ref())
    }

    /// Whether `slot` holds a value of an owner `is_owner` accepts; counts nothing.
    pub fn contains(&self, slot: u32, is_owner: impl FnOnce(&K) -> bool) -> bool {
        self.peek(slot, is_owner).is_some()
    }

    /// Buffers to fill a value of `len` bytes into: the evicted value's that fit it best (the
    /// smallest that holds it, else the largest), or new empty ones.
    pub fn take_spare(&mut self, len: usize) -> V::Spare {
        let capacity = |i: &usize| self.spare.get(*i).map_or(0, V::spare_capacity);
        let best = (0..self.spare.len())
            .filter(|i| capacity(i) >= len)
            .min_by_key(capacity)
            .or_else(|| (0..self.spare.len()).max_by_key(capacity));
        best.map(|i| self.spare.swap_remove(i)).unwrap_or_default()
    }

    /// Caches `value` for `owner` (in the small FIFO, or in the main part if the ghost list knows
    /// the owner), evicting as needed. Returns its slot, and the values let go whose buffers were
    /// not kept as spare ones. `None`: not cached (larger than the capacity, or values that may
    /// not be evicted leave no room); `value` is then among those returned.
    pub fn insert(&mut self, owner: K, value: V) -> (Option<u32>, Vec<V>) {
        let bytes = value.memory_bytes();
        if bytes > self.capacity_bytes {
            return (None, vec![value]);
        }
        let in_small = self.ghost.remove(&owner.ghost_hash()).is_none();
        self.make_room(bytes, None);
        if self.used_bytes() + bytes > self.capacity_bytes {
            self.evicted.push(value);
            return (None, std::mem::take(&mut self.evicted));
        }
        let id = self.free.pop().unwrap_or_else(|| {
            let (owner, value) = (K::default(), None);
            self.slots.push(Slot { owner, value, bytes: 0, freq: 0, in_small: false, generation: 0 });
            (self.slots.len() - 1) as u32
        });
        self.slack_bytes += value.slack_bytes();
        self.data_bytes += bytes;
        let generation = {
            let s = &mut self.slots[id as usize];
            s.generation = s.generation.wrapping_add(1);
            (s.owner, s.value, s.bytes, s.freq, s.in_small) = (owner, Some(value), bytes, 0, in_small);
            s.generation
        };
        if in_small {
            self.small.push_back((id, generation));
            self.small_bytes += bytes;
            self.small_live += 1;
        }
        (Some(id), std::mem::take(&mut self.evicted))
    }

    /// Write-through: replaces the value in `slot` if `is_owner` accepts its owner (and drops it
    /// if now larger than the capacity). Returns the values let go, the old one included.
    pub fn update(&mut self, slot: u32, is_owner: impl FnOnce(&K) -> bool, value: V) -> Vec<V> {
        let Some(s) = self.slots.get_mut(slot as usize).filter(|s| s.value.is_some() && is_owner(&s.owner))
        else {
            return vec![value];
        };
        let bytes = value.memory_bytes();
        self.data_bytes = self.data_bytes - s.bytes + bytes;
        if s.in_small {
            self.small_bytes = self.small_bytes - s.bytes + bytes;
        }
        s.bytes = bytes;
        let old_slack = s.value.as_ref().map_or(0, V::slack_bytes);
        self.slack_bytes = self.slack_bytes - old_slack + value.slack_bytes();
        if let Some(old) = s.value.replace(value) {
            self.evicted.push(old);
        }
        if bytes > self.capacity_bytes {
            if let Some(dropped) = self.remove(slot) {
                self.evicted.push(dropped);
            }
        } else {
            self.make_room(0, Some(slot));
        }
        std::mem::take(&mut self.evicted)
    }

    /// Empties `slot` (whoever owns it), returning its value.
    pub fn invalidate(&mut self, slot: u32) -> Option<V> {
        self.remove(slot)
    }
}
