//! `BlockCache`: data blocks of sorted runs kept in memory, shared by every run opened with it
//! (`RunReader::open_cached`). A block is cached decoded and checked (`DecodedBlock`: CRC,
//! restarts, key order and agreement with the run's index verified once), so a hit costs a
//! reference count: a point read binary-searches it, a scan walks it. Built on
//! the kit's slot cache (`crate::cache`, S3-FIFO + CLOCK): each open run has a unique id and a
//! slot number per data block, and a slot is a hit only while it still holds that run's block,
//! so a run dropped and its extent rewritten can never be answered from the cache.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::Mutex;

use super::block::DecodedBlock;
use crate::cache::{Cache, CacheValue};

impl CacheValue for DecodedBlock {
    type Spare = ();

    fn memory_bytes(&self) -> u64 {
        self.memory_bytes() as u64
    }
}

/// See the module documentation.
pub struct BlockCache {
    cache: Mutex<Cache<(u64, u64), Arc<DecodedBlock>>>,
    next_run_id: AtomicU64,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache").field("used_bytes", &self.used_bytes()).finish()
    }
}

/// A slot number that is no slot.
pub(super) const NO_SLOT: u32 = u32::MAX;

impl BlockCache {
    /// A cache of at most `capacity_bytes` of blocks (0: nothing is cached).
    pub fn new(capacity_bytes: u64) -> Arc<BlockCache> {
        Arc::new(BlockCache { cache: Mutex::new(Cache::new(capacity_bytes)), next_run_id: AtomicU64::new(1) })
    }

    /// A new run's id (never reused while the cache lives).
    pub(super) fn run_id(&self) -> u64 {
        self.next_run_id.fetch_add(1, Relaxed)
    }

    /// The cached block `block` of run `run`, whose slot number is in `slot`.
    pub(super) fn get(&self, slot: &AtomicU32, run: u64, block: u64) -> Option<Arc<DecodedBlock>> {
        let at = slot.load(Relaxed);
        let mut cache = self.cache.lock();
        if at == NO_SLOT {
            cache.count_miss();
            return None;
        }
        cache.get(at, |owner| *owner == (run, block)).cloned()
    }

    /// Caches `value` as block `block` of run `run`, its slot number into `slot`.
    pub(super) fn insert(&self, slot: &AtomicU32, run: u64, block: u64, value: Arc<DecodedBlock>) {
        let evicted = {
            let mut cache = self.cache.lock();
            let (at, evicted) = cache.insert((run, block), value);
            slot.store(at.unwrap_or(NO_SLOT), Relaxed);
            evicted
        };
        drop(evicted); // freed outside the lock
    }

    /// Changes the capacity (evicting at once when it shrinks).
    pub fn set_capacity(&self, capacity_bytes: u64) {
        let evicted = self.cache.lock().set_capacity(capacity_bytes);
        drop(evicted);
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.cache.lock().capacity_bytes()
    }

    pub fn used_bytes(&self) -> u64 {
        self.cache.lock().used_bytes()
    }

    /// Reads answered from the cache, and reads that went to the file.
    pub fn hits_and_misses(&self) -> (u64, u64) {
        let cache = self.cache.lock();
        (cache.hits(), cache.misses())
    }
}
