//! How FlexDB shares its memory budget between the MemTables and the interval cache (the
//! engine's side, sizing the cache as the MemTables grow and shrink: mem_reservation.rs).

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

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

    pub(super) fn set_fixed_cache_bytes(&self, bytes: u64) {
        self.fixed_cache_bytes.store(bytes, SeqCst);
    }

    pub(super) fn cache_bytes(&self, memtables_bytes: u64, outside_cache_bytes: u64) -> u64 {
        self.fixed_cache_bytes().unwrap_or_else(|| {
            let rest = self.budget_bytes.saturating_sub(memtables_bytes + outside_cache_bytes);
            rest.max(self.budget_bytes / Self::MIN_CACHE_DIVISOR)
        })
    }
}
