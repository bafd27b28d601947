//! How FlexDB shares its memory budget between the MemTables and the interval cache.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

use super::db::{FlexDb, MemState};

/// How the memory budget is shared (see [`FlexOptions::cache_bytes`]): the sparse index and the
/// table file's structures take what they need, the MemTables what they hold now plus a step
/// (`mem_reserve_step`; two full MemTables at most), the interval cache the rest. Invariant
/// (up to one batch): MemTable memory <= `FlexDb::mem_reserved_bytes`, so the parts fit the
/// budget at every moment, yet a read-mostly workload's cache gets the MemTables' unused share.
///
/// [`FlexOptions::cache_bytes`]: super::FlexOptions::cache_bytes
pub(super) struct MemoryBudget {
    pub(super) budget_bytes: u64,
    /// `FlexOptions::cache_bytes`, changeable while open (`set_option("cache_bytes", ..)`): a
    /// fixed cache size instead of the rest; `NO_FIXED_CACHE` when unset.
    fixed_cache_bytes: AtomicU64,
}

const NO_FIXED_CACHE: u64 = u64::MAX;

impl MemoryBudget {
    /// The cache never shrinks below this share of the budget, even when the index and the
    /// table file's structures outgrow the budget (the engine then reports the excess).
    const MIN_CACHE_DIVISOR: u64 = 16;

    pub(super) fn new(budget_bytes: u64, fixed_cache_bytes: Option<u64>) -> MemoryBudget {
        MemoryBudget {
            budget_bytes,
            fixed_cache_bytes: AtomicU64::new(fixed_cache_bytes.unwrap_or(NO_FIXED_CACHE)),
        }
    }

    pub(super) fn fixed_cache_bytes(&self) -> Option<u64> {
        Some(self.fixed_cache_bytes.load(SeqCst)).filter(|&b| b != NO_FIXED_CACHE)
    }

    pub(super) fn cache_bytes(&self, memtables_bytes: u64, outside_cache_bytes: u64) -> u64 {
        self.fixed_cache_bytes().unwrap_or_else(|| {
            let rest = self.budget_bytes.saturating_sub(memtables_bytes + outside_cache_bytes);
            rest.max(self.budget_bytes / Self::MIN_CACHE_DIVISOR)
        })
    }
}

impl FlexDb {
    /// The MemTables' memory grows by this much between two re-sizings of the interval cache.
    fn mem_reserve_step(&self) -> u64 {
        (self.memtable_bytes / 4).max(1)
    }

    /// Gives the interval cache what the budget leaves once the MemTables have room for what they
    /// hold now plus a step; the sparse index and the table file's structures come first.
    /// Serialised by `cache_resize`, and the MemTables are measured inside it: two resizes that
    /// interleaved could otherwise leave a high reservation next to a cache sized for a low one,
    /// and a commit's measurement taken before writers resumed would be stale.
    pub(super) fn resize_cache(&self) {
        let _resizing = self.cache_resize.lock();
        let mem_in_use = Self::mem_in_use_bytes(&self.mem.read());
        let reserved = (mem_in_use + self.mem_reserve_step()).min(2 * self.memtable_bytes);
        let table = self.table.read();
        self.mem_reserved_bytes.store(reserved, SeqCst);
        table.set_cache_capacity(self.memory.cache_bytes(reserved, table.memory_bytes_outside_cache()));
    }

    /// Fixes the interval cache at `bytes` (a runtime knob; the caller checked it against the
    /// budget) and re-sizes it now: a smaller cache evicts at once.
    pub(crate) fn set_cache_bytes(&self, bytes: u64) {
        self.memory.fixed_cache_bytes.store(bytes, SeqCst);
        self.resize_cache();
    }

    pub(crate) fn memory_budget_bytes(&self) -> u64 {
        self.memory.budget_bytes
    }

    /// After a write: shrinks the interval cache when the MemTables outgrew their reservation
    /// (never past two full MemTables: a frozen one over its limit by a batch does not make
    /// every later write re-size the cache).
    pub(super) fn reserve_mem(&self, mem_in_use_bytes: u64) {
        let reserved = self.mem_reserved_bytes.load(SeqCst);
        if mem_in_use_bytes > reserved && reserved < 2 * self.memtable_bytes {
            self.resize_cache();
        }
    }

    pub(super) fn mem_in_use_bytes(mem: &MemState) -> u64 {
        mem.active.memory_bytes() + mem.imm.as_ref().map_or(0, |imm| imm.memory_bytes())
    }
}
