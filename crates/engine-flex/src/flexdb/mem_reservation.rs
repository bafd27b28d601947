//! FlexDB's memory reservation: the interval cache gets what the budget (memory_budget.rs)
//! leaves once the MemTables have room for what they hold plus a step.

use std::sync::atomic::Ordering::SeqCst;

use super::db::{FlexDb, MemState};

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
        self.memory.set_fixed_cache_bytes(bytes);
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
