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
pub const FACTORY: EngineFactory = EngineFactory {
    name: "f2",
    open: |storage, config| Ok(Box::new(F2Engine::open(storage, config)?)),
    file_patterns: &[("f2-", ""), ("f2wal-", "")],
};

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
        if self.inner.state.is_closed() {
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
        // Poison is sticky: a poisoned engine's close reports it, every time, because it skips
        // the final checkpoint, and a close that skipped it must not look like a clean one.
        if inner.state.is_closed() {
            return inner.state.check_not_poisoned();
        }
        // The worker is gone before the final checkpoint (and before a crashed engine's handle
        // is dropped), so it never touches storage after close.
        engine::worker::stop_and_join(inner, self.worker.as_ref());
        let checkpointed = if !inner.state.is_poisoned() {
            let _only_one = inner.maintenance.lock();
            inner.checkpoint_locked().map_err(|e| inner.poisoned(e))
        } else {
            inner.state.check_not_poisoned()
        };
        if !inner.state.mark_closed() {
            return inner.state.check_not_poisoned();
        }
        let closed = inner.wal.close();
        checkpointed.and(closed)
    }

    fn stats(&self) -> Stats {
        self.inner.stats()
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
