//! Engine `treeline`: TreeLine (Yu et al., VLDB 2022) on Strata — an update-in-place
//! store with a record cache, page grouping by learned linear models, and insert forecasting.
//!
//! Write, write-back, reorganization and recovery paths: docs/ARCHITECTURE.md, section "Engine
//! `treeline`". On-disk structures: docs/format/treeline.md (data pages, the data file header,
//! `treeline-checkpoint`, `treeline-dwb`), docs/format/wal.md and docs/format/write-batch.md.
//!
//! Modules, one per structure of the paper:
//! * [`page`]: the slotted data page (fences with prefix compression, sorted slots, checksum,
//!   validation of untrusted bytes).
//! * [`key_projection`]: order-preserving `u64` projections of byte-string keys, for the models.
//! * [`model`]: the optimal streaming PLR ±ε and the Phase II/III segment planner.
//! * [`forecast`]: insert forecasting by epochs of equi-depth histograms (§4.6).
//! * [`free_space`]: segment slots of the data file, a free list per size class.
//! * [`record_cache`]: the record cache and its CLOCK-with-priorities policy (§4.2).
//! * [`index`]: the in-memory index (§4.3) and its byte form.
//! * [`checkpoint_file`], [`double_write`], [`data_file`]: the files besides the shared WAL.
//! * `store`: the engine proper — write path, write-back, reorganization (§4.5), checkpoints,
//!   scans, recovery.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing))]

pub mod blob;
pub mod checkpoint_file;
pub mod data_file;
pub mod double_write;
pub mod forecast;
pub mod free_space;
pub mod index;
pub mod key_projection;
pub mod model;
pub mod options;
pub mod page;
pub mod record_cache;
pub mod sharded_cache;
mod store;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{
    Capabilities, Direction, Durability, Engine, EngineConfig, Error, Key, KeyRange, KvIter, Limits,
    Maintenance, MaintenanceTask, Result, Stats, Value, VerifyReport, WriteBatch,
};
use strata_io::Storage;
use strata_kit::EngineFactory;

pub use crate::options::TreelineOptions;
use crate::options::{ENGINE_NAME, RUNTIME_OPTIONS};
use crate::store::{BulkLoad, RangeIter, Store, Sweep};

/// Registers engine `treeline` with the facade (`crates/strata/src/registry.rs`).
pub const FACTORY: EngineFactory = EngineFactory {
    name: ENGINE_NAME,
    open: |storage, config| Ok(Box::new(TreelineEngine::open(storage, config)?)),
    file_patterns: &[("treeline-", "")],
};

/// The treeline engine; cheap handles share one store.
pub struct TreelineEngine {
    store: Arc<Store>,
    /// Evicts and checkpoints in the background (store/eviction.rs).
    write_back: strata_kit::worker::Worker,
}

impl TreelineEngine {
    /// Opens (creating if the storage is empty) a store with the knobs in `config`.
    pub fn open(storage: Arc<dyn Storage>, config: &EngineConfig) -> Result<TreelineEngine> {
        let store = Store::open(storage, config)?;
        let write_back = store::spawn_write_back_worker(&store)?;
        Ok(TreelineEngine { store, write_back })
    }

    /// The store's page size: with `page_size_bytes=auto` (the default), 4 KiB until a new
    /// store's first write-back or bulk load chooses it from its records.
    pub fn page_size_bytes(&self) -> usize {
        self.store.page_size().bytes()
    }
}

impl Maintenance for TreelineEngine {
    fn set_option(&self, name: &str, value: &str) -> Result<()> {
        match name {
            "record_cache_bytes" => {
                let bytes = options::parse_record_cache_bytes(&self.store.config, value)?;
                self.store.record_cache_bytes.store(bytes, Relaxed);
                self.store.evict_while_over_capacity()
            }
            other => Err(Error::invalid(format!("engine 'treeline' has no runtime option {other:?}"))),
        }
    }

    fn run(&self, task: MaintenanceTask) -> Result<()> {
        match task {
            MaintenanceTask::Commit => self.store.commit_dirty_records(),
            MaintenanceTask::Checkpoint => self.store.checkpoint_now(),
            MaintenanceTask::Compact => self.store.compact(),
            other => Err(other.not_offered_by("treeline")),
        }
    }
}

impl Engine for TreelineEngine {
    fn name(&self) -> &'static str {
        ENGINE_NAME
    }

    /// Keys up to `P/16` bytes (from the page size); values up to 16 MiB at every page size
    /// (a record too large for a page keeps its value in a blob run); a batch may hold two of
    /// the largest values.
    fn limits(&self) -> Limits {
        Limits {
            max_key_bytes: self.store.page_size().max_key_bytes(),
            max_value_bytes: blob::MAX_VALUE_BYTES,
            max_batch_bytes: 2 * blob::MAX_VALUE_BYTES + (1 << 20),
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            ordered: true,
            point_in_time_scans: false,
            prefix_consistent_recovery: true,
            columnar: false,
            runtime_options: RUNTIME_OPTIONS,
            maintenance: &[MaintenanceTask::Commit, MaintenanceTask::Compact, MaintenanceTask::Checkpoint],
        }
    }

    fn maintenance(&self) -> &dyn Maintenance {
        self
    }

    fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        self.store.get(key)
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.store.write(batch, durability)
    }

    /// Into an empty store, segments are built and written directly and published by one
    /// checkpoint (all or nothing); otherwise the records are written as batches.
    fn bulk_load(&self, records: &mut dyn Iterator<Item = Result<(Key, Value)>>) -> Result<u64> {
        match self.store.bulk_load(records)? {
            BulkLoad::Loaded(loaded) => Ok(loaded),
            BulkLoad::NotEmpty => strata_core::bulk_load_by_writes(self, records),
        }
    }

    fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        self.store.rmw(key, f, durability)
    }

    fn range(&self, range: KeyRange, direction: Direction) -> Result<KvIter> {
        self.store.check_usable()?;
        Ok(Box::new(RangeIter::new(self.store.clone(), range, direction)))
    }

    fn flush(&self) -> Result<()> {
        self.store.writes.flush()
    }

    /// Checkpoints (so the next open replays nothing) and closes the WAL. A poisoned store only
    /// closes its WAL: recovery starts from the last good checkpoint.
    fn close(&self) -> Result<()> {
        let store = &self.store;
        if !store.writes.state().mark_closed() {
            return Ok(());
        }
        self.write_back.stop_and_join();
        let checkpointed = match store.writes.state().check_not_poisoned() {
            Ok(()) => {
                let mut maint = store.maint.lock();
                store.maintain(|| store.checkpoint(&mut maint, Sweep::All))
            }
            Err(e) => Err(e),
        };
        let closed = store.writes.wal().close();
        checkpointed.and(closed)
    }

    fn stats(&self) -> Stats {
        self.store.stats()
    }

    fn verify(&self) -> Result<VerifyReport> {
        self.store.verify()
    }
}

impl Drop for TreelineEngine {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
