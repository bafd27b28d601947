//! Engine `f2`: F2 (Kanellis et al.) on Strata's storage layer — a hot hybrid log for write-hot
//! records (in-place updates in its mutable region), a cold log for write-cold records indexed by
//! a two-level hash index (hash chunks in their own log, about 0.25 B of memory per cold key),
//! lookup-based hot→cold and cold→cold compaction, and durability through the shared WAL plus
//! checkpoints of the logs' address ranges.
//!
//! Paths (write, read, rmw, compaction, checkpoint, recovery): docs/ARCHITECTURE.md, section `f2`.
//! On-disk formats: docs/format/f2-logs.md, docs/format/wal.md, docs/format/write-batch.md.
//! Maintenance (compaction, chunk-log GC, checkpoints) runs on one background thread; a
//! compaction round spreads its records over `F2Options::compaction_threads` workers. Every
//! checkpoint writes a hot-index snapshot (`f2-hot-index`), so an open loads the index instead of
//! scanning the hot log.

mod checkpoint;
mod engine;
mod hash;
mod hot_snapshot;
mod index;
mod log;
mod options;
mod record;

/// Internal structures, exposed only for the criterion benches (`benches/structures.rs`); not a
/// stable API.
#[doc(hidden)]
pub mod internals {
    pub use crate::hash::key_hash;
    pub use crate::index::hot::HotIndex;
    pub use crate::record::{encode as encode_record, parse_slot, seal as seal_record, Slot};
}

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use engine::Inner;
pub use options::{F2Options, COLD_SLACK_PAGES, COLD_SPACE_AMPLIFICATION};
use strata_core::{
    Capabilities, Direction, Durability, Engine, EngineConfig, Error, Key, KeyRange, KvIter, Limits,
    Maintenance, MaintenanceTask, Result, Stats, Value, VerifyReport, WriteBatch,
};
use strata_io::Storage;
use strata_kit::EngineFactory;

/// The f2 engine: shared state plus the background maintenance thread (if enabled).
pub struct F2Engine {
    inner: Arc<Inner>,
    worker: Option<strata_kit::worker::Worker>,
}

impl F2Engine {
    /// Opens (creating if empty) an f2 store with default [`F2Options`].
    pub fn open(storage: Arc<dyn Storage>, config: &EngineConfig) -> Result<F2Engine> {
        Self::open_with(storage, config, F2Options::default())
    }

    /// Opens with explicit options, overridden by `config.engine_options` (named like the
    /// fields of [`F2Options`]). Page size, segment size and the cold index's chunk count are
    /// fixed when the store is created; later opens use the stored values.
    pub fn open_with(
        storage: Arc<dyn Storage>,
        config: &EngineConfig,
        options: F2Options,
    ) -> Result<F2Engine> {
        let inner = Arc::new(Inner::open(storage, config, &options)?);
        let worker = if inner.opts.background_maintenance {
            Some(engine::worker::spawn(inner.clone())?)
        } else {
            None
        };
        Ok(F2Engine { inner, worker })
    }

    /// Every live key and value, in no particular order (for export and `strata verify`). Keys
    /// are collected up front; values are read as the iterator advances (not a snapshot).
    pub fn scan_all(&self) -> Result<impl Iterator<Item = Result<(Key, Value)>> + Send + 'static> {
        self.inner.ensure_usable()?;
        let keys = self.inner.all_keys()?;
        let inner = self.inner.clone();
        Ok(keys.into_iter().filter_map(move |key| match inner.get(&key) {
            Ok(Some(value)) => Some(Ok((key, value))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }))
    }

    /// Runs hot→cold compaction, cold→cold compaction and a checkpoint now (normally triggered by
    /// the disk budgets and WAL growth). Returns (records moved hot→cold, records copied cold→cold).
    pub fn compact_now(&self) -> Result<(u64, u64)> {
        let inner = &self.inner;
        inner.ensure_usable()?;
        let _only_one = inner.maintenance.lock();
        let moved = inner.compact_hot().map_err(|e| inner.poisoned(e))?;
        let copied = inner.compact_cold().map_err(|e| inner.poisoned(e))?;
        inner.checkpoint_locked().map_err(|e| inner.poisoned(e))?;
        Ok((moved, copied))
    }

    /// Takes a checkpoint now (normally triggered by WAL growth).
    pub fn checkpoint(&self) -> Result<()> {
        let inner = &self.inner;
        inner.ensure_usable()?;
        let _only_one = inner.maintenance.lock();
        inner.checkpoint_locked().map_err(|e| inner.poisoned(e))
    }

    fn limits_for(page_size_bytes: u64) -> Limits {
        let record_bytes = page_size_bytes as usize - record::HEADER_BYTES - record::RECORD_ALIGN_BYTES;
        let max_key_bytes = (record_bytes / 4).min(4096);
        Limits {
            max_key_bytes,
            max_value_bytes: record_bytes - max_key_bytes,
            max_batch_bytes: (strata_wal::MAX_PAYLOAD_BYTES / 2).min(256 << 20),
        }
    }
}

/// Registers engine `f2` with the facade (`crates/strata/src/registry.rs`).
pub const FACTORY: EngineFactory =
    EngineFactory { name: "f2", open: |storage, config| Ok(Box::new(F2Engine::open(storage, config)?)) };

impl Maintenance for F2Engine {
    fn set_option(&self, name: &str, _value: &str) -> Result<()> {
        Err(Error::invalid(format!("engine 'f2' has no runtime option {name:?}")))
    }

    /// `Compact`: hot→cold and cold→cold compaction, then a checkpoint; `Checkpoint`: a
    /// checkpoint alone.
    fn run(&self, task: MaintenanceTask) -> Result<()> {
        match task {
            MaintenanceTask::Compact => self.compact_now().map(drop),
            MaintenanceTask::Checkpoint => self.checkpoint(),
            other => Err(other.not_offered_by("f2")),
        }
    }
}

impl Engine for F2Engine {
    fn name(&self) -> &'static str {
        "f2"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // Hash-indexed: `range` is Unsupported.
            ordered: false,
            point_in_time_scans: false,
            prefix_consistent_recovery: true,
            columnar: false,
            runtime_options: &[],
            maintenance: &[MaintenanceTask::Compact, MaintenanceTask::Checkpoint],
        }
    }

    fn maintenance(&self) -> &dyn Maintenance {
        self
    }

    /// Keys up to a quarter of a page (at most 4 KiB); a record (key + value + 24 B header) must
    /// fit in one log page.
    fn limits(&self) -> Limits {
        Self::limits_for(self.inner.opts.page_size_bytes)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        self.inner.get(key)
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.inner.write(batch, durability)
    }

    fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        self.inner.rmw(key, f, durability)
    }

    fn range(&self, _range: KeyRange, _direction: Direction) -> Result<KvIter> {
        // Unsupported whatever the engine's state — except closed — even when the background
        // worker poisoned it meanwhile (the caller did nothing that failed).
        if self.inner.closed.load(Relaxed) {
            return Err(Error::Closed);
        }
        Err(Error::unsupported(
            "f2 is hash-indexed and keeps no key order, so it has no ordered range scans; use F2Engine::scan_all for an unordered full iteration",
        ))
    }

    fn flush(&self) -> Result<()> {
        self.inner.ensure_usable()?;
        self.inner.wal.sync().map(|_| ()).map_err(|e| self.inner.poisoned(e))
    }

    fn close(&self) -> Result<()> {
        let inner = &self.inner;
        // Poison is sticky: a poisoned engine's close reports it, every time (issue #19: it
        // returned Ok, skipping the final checkpoint without a word).
        if inner.closed.load(Relaxed) {
            return inner.poison.check();
        }
        // The worker is gone before the final checkpoint (and before a crashed engine's handle
        // is dropped), so it never touches storage after close.
        engine::worker::stop_and_join(inner, self.worker.as_ref());
        let checkpointed = if !inner.poison.is_poisoned() {
            let _only_one = inner.maintenance.lock();
            inner.checkpoint_locked().map_err(|e| inner.poisoned(e))
        } else {
            inner.poison.check()
        };
        if inner.closed.swap(true, Relaxed) {
            return inner.poison.check();
        }
        let closed = inner.wal.close();
        checkpointed.and(closed)
    }

    fn stats(&self) -> Stats {
        let inner = &self.inner;
        let c = &inner.counters;
        let [hot_index_budget, hot_log_budget, read_cache_budget, cold_index_budget] = inner.opts.split_bytes;
        let hot_index_bytes = inner.hot_index.memory_bytes();
        let hot_log_bytes = inner.hot.memory_bytes();
        let cold_index_bytes = inner.cold_index.memory_bytes();
        let cold_log_memory_bytes = inner.cold.memory_bytes();
        let read_cache_bytes = inner.read_cache.as_ref().map_or(0, |c| c.memory_bytes());
        let wal_buffer_bytes = options::wal_buffer_bytes();
        let memory_bytes = hot_index_bytes
            + hot_log_bytes
            + read_cache_bytes
            + cold_index_bytes
            + cold_log_memory_bytes
            + wal_buffer_bytes;
        let disk_bytes = inner.disk_bytes();
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed);
        let counters: Vec<(&str, u64)> = vec![
            ("memory.hot_index_bytes", hot_index_bytes),
            ("memory.hot_index_budget_bytes", hot_index_budget),
            ("memory.hot_log_bytes", hot_log_bytes),
            ("memory.hot_log_budget_bytes", hot_log_budget),
            ("memory.read_cache_bytes", read_cache_bytes),
            ("memory.read_cache_budget_bytes", read_cache_budget),
            ("memory.cold_index_bytes", cold_index_bytes),
            ("memory.cold_index_budget_bytes", cold_index_budget),
            ("memory.cold_log_bytes", cold_log_memory_bytes),
            ("memory.wal_buffer_bytes", wal_buffer_bytes),
            ("memory.reserved_budget_bytes", inner.opts.reserved_bytes),
            ("memory.hot_log_lent_bytes", inner.hot_index.overrun_bytes()),
            ("memory.hot_log_window_pages", inner.hot.window_pages() as u64),
            ("memory.total_bytes", memory_bytes),
            ("memory.budget_bytes", inner.memory_budget_bytes),
            ("hot_log.size_bytes", inner.hot.size_bytes()),
            ("hot_log.begin", inner.hot.begin()),
            ("hot_log.read_only", inner.hot.read_only()),
            ("hot_log.head", inner.hot.head()),
            ("hot_log.tail", inner.hot.tail()),
            ("hot_log.truncations", inner.hot.truncations()),
            ("hot_index.entries", inner.hot_index.entry_count()),
            ("cold_log.size_bytes", inner.cold.size_bytes()),
            ("cold_log.begin", inner.cold.begin()),
            ("cold_log.tail", inner.cold.tail()),
            ("cold_log.truncations", inner.cold.truncations()),
            ("cold_log.live_estimate_bytes", inner.cold_live_estimate_bytes.load(Relaxed)),
            ("cold_index.chunks", inner.cold_index.chunk_count()),
            ("cold_index.chunks_in_use", inner.cold_index.chunks_in_use()),
            ("chunk_log.size_bytes", inner.cold_index.log.size_bytes()),
            ("hot_log.point_reads", inner.hot.file.point_reads.load(Relaxed)),
            ("cold_log.point_reads", inner.cold.file.point_reads.load(Relaxed)),
            ("chunk_log.point_reads", inner.cold_index.log.file.point_reads.load(Relaxed)),
            ("ops.in_place_updates", load(&c.in_place_updates)),
            ("ops.appends", load(&c.appends)),
            ("ops.hot_hits", load(&c.hot_hits)),
            ("read_cache.hits", load(&c.read_cache_hits)),
            ("read_cache.inserts", load(&c.read_cache_inserts)),
            ("read_cache.second_chances", load(&c.read_cache_second_chances)),
            (
                "read_cache.evicted_records",
                inner.read_cache.as_ref().map_or(0, |c| c.evicted_records.load(Relaxed)),
            ),
            (
                "read_cache.skipped_inserts",
                inner.read_cache.as_ref().map_or(0, |c| c.skipped_inserts.load(Relaxed)),
            ),
            ("hot_log.frame_waits", inner.hot.frame_waits()),
            ("ops.cold_hits", load(&c.cold_hits)),
            ("ops.misses", load(&c.misses)),
            ("ops.cold_lookups", load(&c.cold_lookups)),
            ("ops.false_absence_retries", load(&c.false_absence_retries)),
            ("ops.hot_truncation_retries", load(&c.hot_truncation_retries)),
            ("ops.rmw_retries", load(&c.rmw_retries)),
            ("ops.rmw_cold_reads", load(&c.rmw_cold_reads)),
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
        ];
        Stats {
            engine: "f2".into(),
            live_keys: None,
            user_bytes_written: load(&c.user_bytes_written),
            user_bytes_read: load(&c.user_bytes_read),
            io: inner.storage.io_stats(),
            cache_hits: load(&c.hot_hits) + load(&c.read_cache_hits),
            cache_misses: load(&c.cold_hits),
            memory_bytes,
            disk_bytes,
            engine_counters: counters
                .into_iter()
                .map(|(n, v)| (n.to_string(), v))
                .chain(inner.wal.stats().counters())
                .collect(),
        }
    }

    fn verify(&self) -> Result<VerifyReport> {
        self.inner.ensure_usable()?;
        self.inner.verify()
    }
}

impl Drop for F2Engine {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
