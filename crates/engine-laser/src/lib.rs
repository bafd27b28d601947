//! Strata engine `laser` (LASER, ../shared/papers/laser.txt): a real-time LSM-tree. Writes
//! gather in a MemTable behind the shared WAL and are flushed as level 0 runs of whole rows;
//! below level 0 every level splits the columns into groups (`layout`), each group a sorted run
//! of the key and the group's columns, and compaction moves one group at a time into the next
//! level's groups it contains, changing the layout on the way (paper §4.4). Updates of some
//! columns are logged as partial rows and folded in as they meet older data; reads and scans
//! of a projection touch only the groups holding its columns.
//!
//! Write, compaction and recovery paths: docs/ARCHITECTURE.md, section "laser". On-disk
//! structures: docs/format/laser.md, docs/format/sorted-run.md, docs/format/wal.md.

pub mod advisor;
mod cells;
mod compact;
mod engine;
mod layout;
mod manifest;
mod options;
mod profile;
mod read;
mod relayout;
mod scan;
mod table;
mod vectors;
mod version;
mod work;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{
    Capabilities, ColumnarTable, Direction, Durability, Engine, EngineConfig, EngineOptionReader, Error,
    KeyRange, KvIter, Limits, Maintenance, MaintenanceTask, Result, Schema, Stats, Value, VerifyReport,
    WriteBatch,
};
use strata_io::Storage;
use strata_kit::sorted_run::RunIter;
use strata_kit::worker::Worker;
use strata_kit::EngineFactory;

use engine::{schema_text, Inner};
pub use layout::{group_text as layout_group_text, Layout};
pub use options::{LaserOptions, ENGINE_NAME, RUNTIME_OPTIONS};
use read::LaserRead;

/// Size limits (documented in README and enforced by `strata::Db`): a key and a value are one
/// entry of a run.
pub const LIMITS: Limits =
    Limits { max_key_bytes: 64 << 10, max_value_bytes: 64 << 20, max_batch_bytes: 256 << 20 };

/// The laser engine.
pub struct LaserEngine {
    inner: Arc<Inner>,
    worker: Worker,
}

impl LaserEngine {
    /// Opens (creating if empty) the engine's files in `storage`: the manifest's runs, then the
    /// WAL records after it.
    pub fn open(storage: Arc<dyn Storage>, config: &EngineConfig) -> Result<LaserEngine> {
        let opened = engine::open(storage, config)?;
        Ok(LaserEngine { inner: opened.inner, worker: opened.worker })
    }

    /// The column groups compactions write from now on (levels take them as they compact):
    /// the one set, or under `layout=auto` the advisor's latest.
    pub fn layout(&self) -> Layout {
        self.inner.work.lock().layout.clone()
    }
}

/// Registers engine `laser` with the facade (`crates/strata/src/registry.rs`).
pub const FACTORY: EngineFactory = EngineFactory {
    name: "laser",
    open: |storage, config| Ok(Box::new(LaserEngine::open(storage, config)?)),
    file_patterns: &[("laser-", "")],
};

impl Maintenance for LaserEngine {
    /// `block_cache_bytes`: the data block cache's size, within the budget. `layout`: the
    /// column groups compactions write from now on (each level takes them as a compaction
    /// reaches it, or in place once the profiled workload says that pays), or `auto`: the
    /// design advisor's, from the profiled workload.
    fn set_option(&self, name: &str, value: &str) -> Result<()> {
        match name {
            "layout" => {
                let layout = match value.trim() {
                    "auto" => None,
                    text => Some(Layout::parse(text, self.inner.columns.count())?),
                };
                self.inner.writes.check_usable()?;
                let mut work = self.inner.work.lock();
                work.auto_layout = layout.is_none();
                if let Some(layout) = layout {
                    work.layout = layout;
                }
                drop(work);
                self.inner.signals.request();
                Ok(())
            }
            "block_cache_bytes" => {
                let budget = self.inner.memory_budget_bytes;
                let bytes =
                    EngineOptionReader::runtime_bytes(ENGINE_NAME, "block_cache_bytes", value, 0..=budget)?;
                self.inner.cache.set_capacity(bytes);
                Ok(())
            }
            _ => Err(Error::invalid(format!("engine 'laser' has no runtime option {name:?}"))),
        }
    }

    /// `Checkpoint` (and `Commit`): the MemTables flushed to level 0, the WAL truncated.
    /// `Compact`: that, then every compaction due and every level regrouped into the layout.
    fn run(&self, task: MaintenanceTask) -> Result<()> {
        self.inner.writes.check_usable()?;
        match task {
            MaintenanceTask::Checkpoint | MaintenanceTask::Commit => self.inner.checkpoint_now(),
            MaintenanceTask::Compact => self.inner.compact_now(),
            other => Err(other.not_offered_by("laser")),
        }
    }
}

impl Engine for LaserEngine {
    fn name(&self) -> &'static str {
        "laser"
    }

    fn limits(&self) -> Limits {
        LIMITS
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            ordered: true,
            // A scan reads the tables and the version as of its start (scan.rs).
            point_in_time_scans: true,
            prefix_consistent_recovery: true,
            columnar: self.inner.schema.is_some(),
            runtime_options: RUNTIME_OPTIONS,
            maintenance: &[MaintenanceTask::Commit, MaintenanceTask::Checkpoint, MaintenanceTask::Compact],
        }
    }

    fn maintenance(&self) -> &dyn Maintenance {
        self
    }

    fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        self.inner.writes.check_usable()?;
        let value = self.inner.read(key, &self.inner.all)?;
        if let Some(v) = &value {
            self.inner.counters.user_bytes_read.fetch_add((key.len() + v.len()) as u64, Relaxed);
        }
        Ok(value)
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.inner.writes.check_usable()?;
        let batch = self.inner.stored_batch(batch)?;
        self.inner.writes.write(batch, durability, self.inner.as_ref())
    }

    /// In a table store `f` sees whole rows and must return one (or `None`); anything else is
    /// refused and nothing is written.
    fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        let inner = self.inner.as_ref();
        let mut read = LaserRead::new(inner, key, &inner.all);
        let mut refused = None;
        let mut stored = |current: Option<&[u8]>| {
            let new = f(current);
            match (&inner.schema, new) {
                (None, new) => Some(new),
                (Some(_), None) => Some(None),
                (Some(schema), Some(row)) => match schema.check_row(&row) {
                    Ok(()) => Some(Some(cells::stored_row(&row))),
                    Err(e) => {
                        refused = Some(e);
                        None
                    }
                },
            }
        };
        let written = inner.writes.rmw_or_skip(key, &mut read, &mut stored, durability, inner)?;
        if let Some(e) = refused {
            return Err(e);
        }
        Ok(match (&inner.schema, written.flatten()) {
            (Some(_), Some(stored)) => Some(stored[1..].to_vec()),
            (_, value) => value,
        })
    }

    fn range(&self, range: KeyRange, direction: Direction) -> Result<KvIter> {
        self.inner.writes.check_usable()?;
        Ok(Box::new(scan::LaserScan::new(self.inner.clone(), range, direction, self.inner.all.clone())?))
    }

    fn flush(&self) -> Result<()> {
        self.inner.writes.flush()
    }

    /// Stops the worker (a flush or compaction in progress finishes first) and closes the log;
    /// the MemTables are replayed from the log at the next open. A poisoned engine reports its
    /// poison.
    fn close(&self) -> Result<()> {
        let closed = self.inner.writes.close(|| {
            self.worker.stop_and_join();
            self.inner.work.lock()
        });
        self.inner.record_trace_rest();
        closed
    }

    fn stats(&self) -> Stats {
        let inner = &self.inner;
        let version = inner.version.read().clone();
        let tables_memory = inner.tables.read().memory_bytes();
        let c = &inner.counters;
        let (cache_hits, cache_misses) = inner.cache.hits_and_misses();
        let memory_bytes = tables_memory + version.memory_bytes() + inner.cache.used_bytes();
        let mut counters: Vec<(String, u64)> = [
            ("memtables_bytes", tables_memory),
            ("finalized_tables", inner.tables.read().finalized.len() as u64),
            ("flushes", c.flushes.load(Relaxed)),
            ("compactions", c.compactions.load(Relaxed)),
            ("compaction_bytes_read", c.compaction_bytes_read.load(Relaxed)),
            ("run_bytes_written", c.compaction_bytes_written.load(Relaxed)),
            ("writer_waits", c.writer_waits.load(Relaxed)),
            ("layout_changes", c.layout_changes.load(Relaxed)),
            ("levels_regrouped", c.regroups.load(Relaxed)),
            ("trace_write_failures", c.trace_write_failures.load(Relaxed)),
            ("records_replayed_at_open", c.records_replayed.load(Relaxed)),
            ("level0_runs", version.level0.len() as u64),
            ("levels", version.levels.len() as u64),
            ("block_cache_bytes", inner.cache.capacity_bytes()),
            ("block_cache_used_bytes", inner.cache.used_bytes()),
            ("memory.over_budget_bytes", memory_bytes.saturating_sub(inner.memory_budget_bytes)),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
        counters.push(("level0_bytes".into(), version.level0.iter().map(|r| r.meta.len_bytes).sum()));
        for level in 1..=version.levels.len() {
            counters.push((format!("level{level}_bytes"), version.level_bytes(level)));
            counters.push((format!("level{level}_groups"), version.levels[level - 1].len() as u64));
        }
        counters.extend(inner.writes.wal().stats().counters());
        Stats {
            engine: "laser".into(),
            live_keys: None,
            user_bytes_written: inner.writes.user_bytes_written(),
            user_bytes_read: c.user_bytes_read.load(Relaxed),
            io: inner.storage.io_stats(),
            cache_hits,
            cache_misses,
            memory_bytes,
            disk_bytes: strata_io::total_file_bytes(inner.storage.as_ref()),
            engine_counters: counters,
            notices: trace_notice(&inner.options, c.trace_write_failures.load(Relaxed)),
        }
    }

    /// Holds the work lock, so no flush truncates the WAL or retires a run under the check.
    fn verify(&self) -> Result<VerifyReport> {
        self.inner.writes.check_usable()?;
        let _no_work = self.inner.work.lock();
        let mut report = strata_wal::Wal::verify(self.inner.storage.as_ref(), &self.inner.wal_options)?;
        let version = self.inner.read_version()?;
        for run in version.runs() {
            let entries: RunIter =
                run.reader.iter(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, Direction::Forward);
            // Reading every entry checks every block's CRC and decoding.
            for entry in entries {
                entry?;
                report.records_checked += 1;
            }
            report.files_checked += 1;
            report.bytes_checked += run.meta.len_bytes;
        }
        Ok(report)
    }

    /// laser's own table when the store has a schema and `schema` is it; a key-value store
    /// leaves tables to the row-encoded fallback.
    fn open_table(&self, schema: &Schema) -> Option<Result<Box<dyn ColumnarTable>>> {
        let own = self.inner.schema.as_ref()?;
        if own != schema {
            return Some(Err(Error::invalid(format!(
                "this laser store's schema is {}; the table asked for {}",
                schema_text(Some(own)),
                schema_text(Some(schema))
            ))));
        }
        Some(Ok(Box::new(table::LaserTable { inner: self.inner.clone(), schema: own.clone() })))
    }
}

impl Drop for LaserEngine {
    fn drop(&mut self) {
        // Iterators still alive after this see `Error::Closed`.
        let _ = self.close();
    }
}

/// What to tell the user when the workload trace could not be written.
fn trace_notice(options: &options::LaserOptions, failures: u64) -> Vec<String> {
    match (&options.trace_file, failures) {
        (Some(path), 1..) => vec![format!(
            "laser could not append its workload trace to {} ({failures} times): the directory is missing or not writable",
            path.display()
        )],
        _ => Vec::new(),
    }
}
