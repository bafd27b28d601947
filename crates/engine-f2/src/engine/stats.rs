//! `Engine::stats`: the common figures and f2's counters (`Stats::engine_counters`), grouped as
//! memory, the logs and indexes, and what the operations and maintenance did.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use strata_core::Stats;

use super::Inner;
use crate::log::io_cause;
use crate::options;

fn load(counter: &AtomicU64) -> u64 {
    counter.load(Relaxed)
}

/// Bytes held by each structure of the memory budget's split.
struct MemoryUse {
    hot_index_bytes: u64,
    hot_log_bytes: u64,
    read_cache_bytes: u64,
    cold_index_bytes: u64,
    cold_log_bytes: u64,
    wal_buffer_bytes: u64,
}

impl MemoryUse {
    fn total_bytes(&self) -> u64 {
        self.hot_index_bytes
            + self.hot_log_bytes
            + self.read_cache_bytes
            + self.cold_index_bytes
            + self.cold_log_bytes
            + self.wal_buffer_bytes
    }
}

impl Inner {
    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        let memory = self.memory_use();
        let memory_bytes = memory.total_bytes();
        let mut counters = self.memory_counters(&memory);
        counters.extend(self.structure_counters());
        counters.extend(self.operation_counters());
        counters.extend(self.maintenance_counters());
        Stats {
            engine: "f2".into(),
            live_keys: None,
            user_bytes_written: load(&c.user_bytes_written),
            user_bytes_read: load(&c.user_bytes_read),
            io: self.storage.io_stats(),
            cache_hits: load(&c.hot_hits) + load(&c.read_cache_hits),
            cache_misses: load(&c.cold_hits),
            memory_bytes,
            disk_bytes: self.disk_bytes(),
            engine_counters: counters
                .into_iter()
                .map(|(n, v)| (n.to_string(), v))
                .chain(self.io_counters())
                .chain(self.wal.stats().counters())
                .collect(),
            notices: Vec::new(),
        }
    }

    fn memory_use(&self) -> MemoryUse {
        MemoryUse {
            hot_index_bytes: self.hot_index.memory_bytes(),
            hot_log_bytes: self.hot.memory_bytes(),
            read_cache_bytes: self.read_cache.as_ref().map_or(0, |c| c.memory_bytes()),
            cold_index_bytes: self.cold_index.memory_bytes(),
            cold_log_bytes: self.cold.memory_bytes(),
            wal_buffer_bytes: options::wal_buffer_bytes(),
        }
    }

    /// `memory.*`: each structure's bytes beside its share of the budget.
    fn memory_counters(&self, memory: &MemoryUse) -> Vec<(&'static str, u64)> {
        let [hot_index_budget, hot_log_budget, read_cache_budget, cold_index_budget] = self.opts.split_bytes;
        vec![
            ("memory.hot_index_bytes", memory.hot_index_bytes),
            ("memory.hot_index_budget_bytes", hot_index_budget),
            ("memory.hot_log_bytes", memory.hot_log_bytes),
            ("memory.hot_log_budget_bytes", hot_log_budget),
            ("memory.read_cache_bytes", memory.read_cache_bytes),
            ("memory.read_cache_budget_bytes", read_cache_budget),
            ("memory.cold_index_bytes", memory.cold_index_bytes),
            ("memory.cold_index_budget_bytes", cold_index_budget),
            ("memory.cold_log_bytes", memory.cold_log_bytes),
            ("memory.wal_buffer_bytes", memory.wal_buffer_bytes),
            ("memory.reserved_budget_bytes", self.opts.reserved_bytes),
            ("memory.hot_log_lent_bytes", self.hot_index.overrun_bytes()),
            ("memory.read_cache_lent_bytes", self.split.lent_bytes()),
            ("memory.read_cache_capacity_bytes", self.read_cache.as_ref().map_or(0, |c| c.capacity_bytes())),
            ("memory.split_step_bytes", self.split.step_bytes()),
            ("memory.split_moves_to_read_cache", load(&self.split.moves_to_read_cache)),
            ("memory.split_moves_to_hot_log", load(&self.split.moves_to_hot_log)),
            ("memory.hot_log_window_pages", self.hot.window_pages() as u64),
            ("memory.total_bytes", memory.total_bytes()),
            ("memory.budget_bytes", self.memory_budget_bytes),
        ]
    }

    /// The logs' address ranges and sizes, the indexes' entries, and the logs' point reads.
    fn structure_counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("hot_log.size_bytes", self.hot.size_bytes()),
            ("hot_log.begin", self.hot.begin()),
            ("hot_log.read_only", self.hot.read_only()),
            ("hot_log.head", self.hot.head()),
            ("hot_log.tail", self.hot.tail()),
            ("hot_log.truncations", self.hot.truncations()),
            ("hot_index.entries", self.hot_index.entry_count()),
            ("cold_log.size_bytes", self.cold.size_bytes()),
            ("cold_log.begin", self.cold.begin()),
            ("cold_log.tail", self.cold.tail()),
            ("cold_log.truncations", self.cold.truncations()),
            ("cold_log.live_estimate_bytes", self.cold_live_estimate_bytes.load(Relaxed)),
            ("cold_index.chunks", self.cold_index.chunk_count()),
            ("cold_index.chunks_in_use", self.cold_index.chunks_in_use()),
            ("chunk_log.size_bytes", self.cold_index.log.size_bytes()),
            ("hot_log.point_reads", self.hot.file.point_reads.load(Relaxed)),
            ("cold_log.point_reads", self.cold.file.point_reads.load(Relaxed)),
            ("chunk_log.point_reads", self.cold_index.log.file.point_reads.load(Relaxed)),
        ]
    }

    /// `io.<log>.<cause>.*`: each log's device reads and writes by what caused them
    /// (log/io_cause.rs), and the checkpoint files' bytes; the WAL's are `wal.bytes_written`.
    fn io_counters(&self) -> Vec<(String, u64)> {
        let mut out = io_cause::counters(&self.hot.file.io, "hot_log");
        out.extend(io_cause::counters(&self.cold.file.io, "cold_log"));
        out.extend(io_cause::counters(&self.cold_index.log.file.io, "chunk_log"));
        out.push((
            "io.checkpoint_files.write_bytes".into(),
            load(&self.counters.checkpoint_file_bytes_written),
        ));
        out
    }

    /// What reads, writes and rmw found: where a lookup hit, the read cache, and retries.
    fn operation_counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        let read_cache = self.read_cache.as_ref();
        vec![
            ("ops.in_place_updates", load(&c.in_place_updates)),
            ("ops.appends", load(&c.appends)),
            ("ops.hot_hits", load(&c.hot_hits)),
            ("read_cache.hits", load(&c.read_cache_hits)),
            ("read_cache.inserts", load(&c.read_cache_inserts)),
            ("read_cache.second_chances", load(&c.read_cache_second_chances)),
            ("read_cache.evicted_records", read_cache.map_or(0, |c| load(&c.evicted_records))),
            ("read_cache.skipped_inserts", read_cache.map_or(0, |c| load(&c.skipped_inserts))),
            ("hot_log.frame_waits", self.hot.frame_waits()),
            ("ops.cold_hits", load(&c.cold_hits)),
            ("ops.misses", load(&c.misses)),
            ("ops.cold_lookups", load(&c.cold_lookups)),
            ("ops.false_absence_retries", load(&c.false_absence_retries)),
            ("ops.hot_truncation_retries", load(&c.hot_truncation_retries)),
            ("ops.rmw_retries", load(&c.rmw_retries)),
            ("ops.rmw_cold_reads", load(&c.rmw_cold_reads)),
        ]
    }

    /// What compaction, checkpoints and the open did, and how long writers and tasks waited.
    fn maintenance_counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("compaction.hot_to_cold_runs", load(&c.hot_compactions)),
            ("compaction.hot_to_cold_records", load(&c.hot_records_to_cold)),
            ("compaction.hot_to_hot_tail_records", load(&c.hot_records_to_hot_tail)),
            ("compaction.bytes_written", load(&c.compaction_bytes_written)),
            ("compaction.cold_to_cold_runs", load(&c.cold_compactions)),
            ("compaction.cold_to_cold_records", load(&c.cold_records_copied)),
            ("compaction.chunks_collected", load(&c.chunks_collected)),
            ("checkpoints", load(&c.checkpoints)),
            ("open.records_replayed", load(&c.records_replayed)),
            ("open.hot_records_scanned", load(&c.hot_records_scanned_at_open)),
            ("open.hot_index_entries_loaded", load(&c.hot_index_entries_loaded)),
            ("checkpoint.hot_index_snapshot_failures", load(&c.hot_index_snapshot_failures)),
            ("backpressure_waits", load(&c.backpressure_waits)),
            ("backpressure_max_wait_us", load(&c.backpressure_max_wait_us)),
            ("compaction.hot_to_cold_max_us", load(&c.hot_round_max_us)),
            ("compaction.cold_to_cold_max_us", load(&c.cold_round_max_us)),
            ("compaction.chunk_gc_max_us", load(&c.chunk_gc_max_us)),
            ("checkpoint_max_us", load(&c.checkpoint_max_us)),
        ]
    }
}
