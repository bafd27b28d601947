//! Strata engine `turtle` (TurtleKV, ../shared/papers/turtlekv.txt): updates gather in one Big
//! MemTable of the checkpoint distance χ, then enter the TurtleTree (`tree`: a B^ε+-tree whose
//! node buffers are level-tiered sorted runs) as leaf-sized batches, and a copy-on-write
//! checkpoint into `turtle-pages` (`pages`) makes them durable and frees the WAL behind them.
//!
//! Write path and recovery path: docs/ARCHITECTURE.md, section "turtle". On-disk structures:
//! docs/format/turtle.md, docs/format/sorted-run.md, docs/format/wal.md.

mod apply;
mod checkpoint;
mod distance;
mod engine;
mod iter;
mod options;
pub mod pages;
mod settle;
pub mod tree;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{
    AutoOr, Capabilities, Direction, Durability, Engine, EngineConfig, EngineOptionReader, Error, KeyRange,
    KvIter, Limits, Maintenance, MaintenanceTask, Result, Stats, Value, VerifyReport, WriteBatch,
};
use strata_io::Storage;
use strata_kit::worker::Worker;
use strata_kit::EngineFactory;

use engine::{Inner, TurtleRead};
pub use options::{Settle, TurtleOptions, CHECKPOINT_DISTANCE_RANGE, ENGINE_NAME, RUNTIME_OPTIONS};

/// Size limits (documented in README and enforced by `strata::Db`): a key is a pivot in a node
/// page; a value is one entry of a run.
pub const LIMITS: Limits =
    Limits { max_key_bytes: 64 << 10, max_value_bytes: 64 << 20, max_batch_bytes: 256 << 20 };

/// The turtle engine.
pub struct TurtleEngine {
    inner: Arc<Inner>,
    worker: Worker,
}

impl TurtleEngine {
    /// Opens (creating if empty) the engine's files in `storage`: the last checkpoint's tree,
    /// then the WAL records after it.
    pub fn open(storage: Arc<dyn Storage>, config: &EngineConfig) -> Result<TurtleEngine> {
        let opened = engine::open(storage, config)?;
        Ok(TurtleEngine { inner: opened.inner, worker: opened.worker })
    }
}

/// Registers engine `turtle` with the facade (`crates/strata/src/registry.rs`).
pub const FACTORY: EngineFactory = EngineFactory {
    name: "turtle",
    open: |storage, config| Ok(Box::new(TurtleEngine::open(storage, config)?)),
    file_patterns: &[("turtle-", "")],
};

impl Maintenance for TurtleEngine {
    /// `checkpoint_distance`: the size at which the active MemTable is finalized, from the
    /// next write on, or `auto`, which chooses it from the next window of operations on.
    fn set_option(&self, name: &str, value: &str) -> Result<()> {
        match name {
            "checkpoint_distance" => {
                let distance = EngineOptionReader::runtime_bytes_or_auto(
                    ENGINE_NAME,
                    "checkpoint_distance",
                    value,
                    CHECKPOINT_DISTANCE_RANGE,
                )?;
                let _choosing = self.inner.tuner.choosing.lock();
                self.inner.tuner.set_auto(distance == AutoOr::Auto);
                if let AutoOr::Fixed(bytes) = distance {
                    self.inner.set_checkpoint_distance(bytes);
                }
                Ok(())
            }
            "settle" => {
                let name = EngineOptionReader::runtime_choice(ENGINE_NAME, "settle", value, &Settle::NAMES)?;
                self.inner.tuner.set_settle(Settle::from_name(name).unwrap_or(Settle::Auto));
                self.inner.signals.request(); // `always` settles now
                Ok(())
            }
            "block_cache_bytes" => {
                let budget = self.inner.memory_budget_bytes;
                let bytes =
                    EngineOptionReader::runtime_bytes(ENGINE_NAME, "block_cache_bytes", value, 0..=budget)?;
                self.inner.block_cache_pinned.store(true, Relaxed);
                self.inner.pages.block_cache().set_capacity(bytes);
                Ok(())
            }
            _ => Err(Error::invalid(format!("engine 'turtle' has no runtime option {name:?}"))),
        }
    }

    /// `Checkpoint` (and `Commit`): the MemTables into the tree, a checkpoint, the WAL truncated.
    fn run(&self, task: MaintenanceTask) -> Result<()> {
        match task {
            MaintenanceTask::Checkpoint | MaintenanceTask::Commit => {
                self.inner.writes.check_usable()?;
                self.inner.checkpoint_now()
            }
            MaintenanceTask::Compact => {
                self.inner.writes.check_usable()?;
                self.inner.compact_now()
            }
            other => Err(other.not_offered_by("turtle")),
        }
    }
}

impl Engine for TurtleEngine {
    fn name(&self) -> &'static str {
        "turtle"
    }

    fn limits(&self) -> Limits {
        LIMITS
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            ordered: true,
            // A scan reads the tables and the tree as of its start (iter.rs).
            point_in_time_scans: true,
            prefix_consistent_recovery: true,
            columnar: false,
            runtime_options: RUNTIME_OPTIONS,
            maintenance: &[MaintenanceTask::Commit, MaintenanceTask::Checkpoint, MaintenanceTask::Compact],
        }
    }

    fn maintenance(&self) -> &dyn Maintenance {
        self
    }

    fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        self.inner.writes.check_usable()?;
        self.inner.note_ops(1, 0, 0);
        let value = self.inner.get(key)?;
        if let Some(v) = &value {
            self.inner.counters.user_bytes_read.fetch_add((key.len() + v.len()) as u64, Relaxed);
        }
        Ok(value)
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.inner.note_ops(0, 0, batch.len() as u64);
        self.inner.writes.write(batch, durability, self.inner.as_ref())
    }

    fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        let inner = self.inner.as_ref();
        inner.note_ops(0, 0, 1);
        let mut read = TurtleRead { inner, key, tree_value: None };
        inner.writes.rmw(key, &mut read, f, durability, inner)
    }

    fn range(&self, range: KeyRange, direction: Direction) -> Result<KvIter> {
        self.inner.writes.check_usable()?;
        self.inner.note_ops(0, 1, 0);
        Ok(Box::new(iter::TurtleScan::new(self.inner.clone(), range, direction)?))
    }

    fn flush(&self) -> Result<()> {
        self.inner.writes.flush()
    }

    /// Stops the worker (a checkpoint in progress finishes first) and closes the log; the
    /// MemTables are replayed from the log at the next open. A poisoned engine reports its
    /// poison: the log did not accept all of its writes, so the close vouches for nothing.
    fn close(&self) -> Result<()> {
        self.inner.writes.close(|| {
            self.worker.stop_and_join();
            self.inner.apply_lock.lock()
        })
    }

    fn stats(&self) -> Stats {
        let inner = &self.inner;
        let (tables_memory, finalized) = {
            let tables = inner.tables.read();
            (tables.memory_bytes(), tables.finalized.len() as u64)
        };
        let (tree_memory, height, leaves, bytes) = {
            // A copy, walked with no lock held (the worker's swap does not wait for it).
            let tree = inner.tree.read().clone();
            let shape = (tree.height() as u64, tree.leaf_count() as u64);
            (tree.memory(), shape.0, shape.1, tree.bytes())
        };
        let c = &inner.counters;
        let cache = inner.pages.block_cache();
        let (cache_hits, cache_misses) = cache.hits_and_misses();
        let memory_bytes = tables_memory + tree_memory.total_bytes + cache.used_bytes();
        let (write_share, scan_share) = inner.tuner.shares_permille();
        Stats {
            engine: "turtle".into(),
            live_keys: None,
            user_bytes_written: inner.writes.user_bytes_written(),
            user_bytes_read: c.user_bytes_read.load(Relaxed),
            io: inner.storage.io_stats(),
            cache_hits,
            cache_misses,
            memory_bytes,
            disk_bytes: strata_io::total_file_bytes(inner.storage.as_ref()),
            engine_counters: [
                ("checkpoint_distance_bytes", inner.checkpoint_distance_bytes.load(Relaxed)),
                ("checkpoint_distance_auto", u64::from(inner.tuner.is_auto())),
                ("checkpoint_distance_changes", inner.tuner.changes.load(Relaxed)),
                ("write_share_permille", write_share),
                ("scan_share_permille", scan_share),
                ("finalized_tables", finalized),
                ("memtables_bytes", tables_memory),
                ("tables_finalized", c.tables_finalized.load(Relaxed)),
                ("batches_applied", c.batches_applied.load(Relaxed)),
                ("checkpoints", c.checkpoints.load(Relaxed)),
                ("spills", c.spills.load(Relaxed)),
                ("tree_new_run_bytes", tree_memory.new_run_bytes),
                ("tree_new_run_room_bytes", inner.new_run_room_bytes(tree_memory)),
                ("page_bytes_freed", c.bytes_freed.load(Relaxed)),
                ("pages_end_bytes", inner.pages.end()),
                ("pages_free_bytes", inner.pages.free_bytes()),
                ("tree_height", height),
                ("tree_leaves", leaves),
                ("tree_leaf_bytes", bytes.leaves),
                ("tree_buffer_run_bytes", bytes.buffer_runs),
                ("tree_buffer_pending_bytes", bytes.buffer_pending),
                ("tree_memory_bytes", tree_memory.total_bytes),
                ("block_cache_bytes", cache.capacity_bytes()),
                ("block_cache_used_bytes", cache.used_bytes()),
                ("writer_waits", c.writer_waits.load(Relaxed)),
                ("settle_steps", c.settle_steps.load(Relaxed)),
                ("records_replayed_at_open", c.records_replayed.load(Relaxed)),
                ("memory.over_budget_bytes", memory_bytes.saturating_sub(inner.memory_budget_bytes)),
            ]
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .chain(inner.writes.wal().stats().counters())
            .collect(),
            notices: Vec::new(),
        }
    }

    /// Holds `apply_lock`, so no checkpoint truncates the WAL under the check.
    fn verify(&self) -> Result<VerifyReport> {
        self.inner.writes.check_usable()?;
        let _no_checkpoint = self.inner.apply_lock.lock();
        let mut report = strata_wal::Wal::verify(self.inner.storage.as_ref(), &self.inner.wal_options)?;
        report.records_checked += self.inner.read_tree()?.verify()?;
        report.files_checked += 1;
        report.bytes_checked += self.inner.pages.end();
        Ok(report)
    }
}

impl Drop for TurtleEngine {
    fn drop(&mut self) {
        // Iterators still alive after this see `Error::Closed`.
        let _ = self.close();
    }
}
