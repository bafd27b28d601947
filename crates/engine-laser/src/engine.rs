//! The engine: the kit's write path into one active MemTable, finalized tables on their way to
//! level 0, and the versions of the LSM-tree behind them (docs/ARCHITECTURE.md, "laser").

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_core::{BatchOp, EngineConfig, Error, Result, Schema, WriteBatch};
use strata_io::Storage;
use strata_kit::logged_writes::{ApplyLogged, Logged, LoggedWrites, WriteSizes};
use strata_kit::sorted_run::{BlockCache, Entry, EntryKind, MergeOperator};
use strata_kit::tables::{new_active, wait_for_room, Snapshots, Tables};
use strata_kit::versioned_memtable::{VersionedMemTable, NEWEST};
use strata_kit::worker::{Worker, WorkerSignals};
use strata_wal::WalOptions;

use crate::advisor::Workload;
use crate::cells::{entry_of_stored, stored_row, CellsMerge, PARTIAL_ROW_TAG};
use crate::layout::{ColumnSet, Columns, Layout};
use crate::manifest::{parse_run_file_name, Manifest, MANIFEST_FILE};
use crate::options::LaserOptions;
use crate::profile::Profile;
use crate::version::Version;

/// WAL segment files are named `laser-wal-{id}.log`.
pub const WAL_FILE_PREFIX: &str = "laser-wal-";

/// Finalized tables waiting for level 0 before writers wait.
const MAX_FINALIZED: usize = 2;

#[derive(Default)]
pub(crate) struct Counters {
    pub user_bytes_read: AtomicU64,
    pub flushes: AtomicU64,
    pub compactions: AtomicU64,
    pub compaction_bytes_written: AtomicU64,
    pub compaction_bytes_read: AtomicU64,
    pub writer_waits: AtomicU64,
    pub records_replayed: AtomicU64,
    pub layout_changes: AtomicU64,
    /// Levels regrouped in place into the layout (`relayout.rs`).
    pub regroups: AtomicU64,
    /// Appends to `trace_file` that failed.
    pub trace_write_failures: AtomicU64,
}

/// What the next manifest records besides the levels; changed only under `Inner::work`.
pub(crate) struct WorkState {
    pub wal_lsn: u64,
    pub next_run_id: u64,
    /// The groups compactions write each level in: a level holds them once a compaction into
    /// it has regrouped its columns (`work::regroup`); until then, the groups it was written in.
    pub layout: Layout,
    /// The advisor moves `layout` as the profiled workload asks (`layout=auto`).
    pub auto_layout: bool,
    /// The last full profile window: what regrouping a level in place would save
    /// (`relayout.rs`); `None` until a window has filled.
    pub last_workload: Option<Workload>,
}

pub(crate) struct Inner {
    pub storage: Arc<dyn Storage>,
    pub wal_options: WalOptions,
    /// The WAL, the closed flag and the poison; batches reach `tables.active` through it.
    pub writes: LoggedWrites,
    pub tables: RwLock<Tables>,
    pub snapshots: Arc<Snapshots>,
    /// The LSM-tree as of the durable manifest; swapped whole by flushes and compactions.
    pub version: RwLock<Arc<Version>>,
    pub columns: Columns,
    /// Every column: what a MemTable or level 0 entry covers.
    pub all: ColumnSet,
    pub schema: Option<Schema>,
    pub options: LaserOptions,
    pub cache: Arc<BlockCache>,
    pub direct_io: bool,
    /// One flush or compaction at a time (worker, requested checkpoints).
    pub work: Mutex<WorkState>,
    /// Bumped when a finalized table leaves the list (its writes are on disk): an rmw that
    /// read the disk before it must read again.
    pub disk_version: AtomicU64,
    pub signals: Arc<WorkerSignals>,
    pub counters: Counters,
    pub memory_budget_bytes: u64,
    /// What the workload asks of each level, for the advisor.
    pub profile: Profile,
}

/// What open built.
pub(crate) struct Opened {
    pub inner: Arc<Inner>,
    pub worker: Worker,
}

/// The store's schema and layout: the manifest's schema, which a schema given at open must
/// match, and the layout given at open, else the manifest's; a new store takes the options'.
fn shape(options: &LaserOptions, manifest: Option<&Manifest>) -> Result<(Option<Schema>, Layout)> {
    let Some(m) = manifest else {
        let columns = options.schema.as_ref().map_or(1, |s| s.columns().len());
        return Ok((options.schema.clone(), options.layout.clone().unwrap_or_else(|| Layout::rows(columns))));
    };
    if options.schema.as_ref().is_some_and(|s| Some(s) != m.schema.as_ref()) {
        return Err(Error::invalid(format!(
            "this laser store was created with schema {}; it cannot change",
            schema_text(m.schema.as_ref())
        )));
    }
    // A layout given at open replaces the manifest's: the levels take it as they compact.
    Ok((m.schema.clone(), options.layout.clone().unwrap_or_else(|| m.layout.clone())))
}

pub(crate) fn schema_text(schema: Option<&Schema>) -> String {
    match schema {
        None => "none (a key-value store)".into(),
        Some(s) => {
            s.columns().iter().map(|c| format!("{}:{}", c.name, c.width_bytes)).collect::<Vec<_>>().join(",")
        }
    }
}

/// Opens (creating if empty) the store: manifest, runs, WAL replay.
pub(crate) fn open(storage: Arc<dyn Storage>, config: &EngineConfig) -> Result<Opened> {
    let options = LaserOptions::from_config(config)?;
    let wal_options = WalOptions {
        segment_bytes: config.effective_wal_segment_bytes(),
        recovery_mode: config.recovery_mode,
        file_prefix: WAL_FILE_PREFIX.to_string(),
        ..WalOptions::default()
    };
    // 1. The manifest fixes the shape; a new store records its own before any write.
    let (manifest, schema, layout) = open_manifest(storage.as_ref(), &options)?;
    let columns = Columns::of_schema(schema.as_ref());
    let all = columns.all();
    let column_count = columns.count();
    let auto_layout = options.layout.is_none();
    // 2. The runs it names.
    let cache = BlockCache::new(options.block_cache_bytes.unwrap_or(0));
    let version = Version::open(&manifest, &columns, &storage, config.direct_io, &cache)?;
    // 3. The WAL after the manifest, into the active table.
    let mut active = VersionedMemTable::default();
    let mut last_lsn = manifest.wal_lsn;
    let replayed = strata_kit::replay::open_wal(
        storage.clone(),
        wal_options.clone(),
        last_lsn + 1,
        &mut |lsn, batch| {
            for op in batch.into_ops() {
                apply_op(&all, &mut active, op, lsn, None)?;
            }
            last_lsn = lsn;
            Ok(())
        },
    )?;
    // Only now, with the WAL found whole, is anything removed: run files the manifest does not
    // name are leftovers of a flush or compaction that never reached it. A failed open changes
    // nothing.
    remove_leftover_runs(storage.as_ref(), &manifest)?;
    let signals = Arc::new(WorkerSignals::default());
    let inner = Arc::new(Inner {
        storage,
        wal_options,
        writes: LoggedWrites::new(replayed.wal, "laser engine"),
        tables: RwLock::new(Tables::new(new_active(active, last_lsn))),
        snapshots: Arc::default(),
        version: RwLock::new(Arc::new(version)),
        columns,
        all,
        schema,
        memory_budget_bytes: config.memory_budget_bytes,
        options,
        cache,
        direct_io: config.direct_io,
        work: Mutex::new(WorkState {
            wal_lsn: manifest.wal_lsn,
            next_run_id: manifest.next_run_id,
            layout,
            auto_layout,
            last_workload: None,
        }),
        disk_version: AtomicU64::new(0),
        signals: signals.clone(),
        counters: Counters::default(),
        profile: Profile::new(column_count, signals.clone()),
    });
    inner.resize_block_cache();
    inner.counters.records_replayed.store(replayed.report.records_replayed, Relaxed);
    let worker = spawn_worker(&inner, signals)?;
    inner.finalize_if_full();
    Ok(Opened { inner, worker })
}

/// Open step 1: the manifest, and the schema and layout the store runs with (`shape`); a new
/// store's manifest is stored first.
fn open_manifest(
    storage: &dyn Storage,
    options: &LaserOptions,
) -> Result<(Manifest, Option<Schema>, Layout)> {
    let loaded = Manifest::load(storage)?;
    let (schema, layout) = shape(options, loaded.as_ref())?;
    let manifest = match loaded {
        Some(m) => m,
        None => {
            refuse_files_without_manifest(storage)?;
            let m = Manifest {
                wal_lsn: 0,
                next_run_id: 1,
                schema: schema.clone(),
                layout: layout.clone(),
                level0: vec![],
                levels: vec![],
            };
            m.store(storage)?;
            m
        }
    };
    Ok((manifest, schema, layout))
}

/// A new store records its manifest before it writes anything else: runs or WAL segments with
/// no manifest are a store whose manifest was lost, never a new one (whose open would then
/// remove the runs as leftovers).
fn refuse_files_without_manifest(storage: &dyn Storage) -> Result<()> {
    let ours = storage.list()?.into_iter().find(|n| n.starts_with("laser-") && !n.starts_with(MANIFEST_FILE));
    match ours {
        Some(name) => Err(Error::corruption(
            MANIFEST_FILE,
            0,
            format!("the manifest is missing, but the directory holds laser's {name}"),
        )),
        None => Ok(()),
    }
}

fn remove_leftover_runs(storage: &dyn Storage, manifest: &Manifest) -> Result<()> {
    let named = |id: u64| {
        manifest.level0.iter().any(|r| r.id == id)
            || manifest.levels.iter().flatten().any(|g| g.run.is_some_and(|r| r.id == id))
    };
    let mut removed = false;
    for name in storage.list()? {
        if parse_run_file_name(&name).is_some_and(|id| !named(id)) {
            storage.remove(&name)?;
            removed = true;
        }
    }
    if removed {
        storage.sync_dir()?;
    }
    Ok(())
}

fn spawn_worker(inner: &Arc<Inner>, signals: Arc<WorkerSignals>) -> Result<Worker> {
    Worker::spawn_for("laser-compact", signals, inner, Inner::work_step, |inner, e| inner.writes.poison(e))
}

/// Applies one logged op to a MemTable. A table's partial row folds into the key's entry
/// already in the table (a whole row, another partial row or a delete), so a table holds one
/// entry per key (and older versions only while a snapshot reads them).
pub(crate) fn apply_op(
    all: &ColumnSet,
    entries: &mut VersionedMemTable,
    op: BatchOp,
    lsn: u64,
    newest_snapshot: Option<u64>,
) -> Result<()> {
    let op = match op {
        BatchOp::Put { key, value } if !all.is_variable() && value.first() == Some(&PARTIAL_ROW_TAG) => {
            match entries.get_at(&key, NEWEST) {
                Some(older) => {
                    let folded = fold_partial(all, &key, older.map(Vec::as_slice), &value)?;
                    match folded {
                        Some(value) => BatchOp::Put { key, value },
                        None => BatchOp::Delete { key },
                    }
                }
                None => BatchOp::Put { key, value },
            }
        }
        op => op,
    };
    entries.apply(op, lsn, newest_snapshot);
    Ok(())
}

/// A stored partial row over the key's older stored value (`None`: a delete): the stored value
/// it folds into (`None`: a delete).
fn fold_partial(
    all: &ColumnSet,
    key: &[u8],
    older: Option<&[u8]>,
    partial: &[u8],
) -> Result<Option<Vec<u8>>> {
    let bad = |e: String| Error::corruption("laser memtable", 0, e);
    let operator = CellsMerge { set: all.clone() };
    let operand = &partial[1..];
    let folded = match older.map(|v| entry_of_stored(all, Some(v))).transpose().map_err(bad)? {
        Some(e) if e.kind == EntryKind::Put => operator.apply(key, Some(&e.value), operand)?,
        Some(e) if e.kind == EntryKind::Merge => Entry::merge(operator.combine(key, &e.value, operand)?),
        _ => operator.apply(key, None, operand)?,
    };
    Ok(match folded.kind {
        EntryKind::Put => Some(stored_row(&folded.value)),
        EntryKind::Merge => Some([&[PARTIAL_ROW_TAG][..], &folded.value].concat()),
        EntryKind::Delete => None,
    })
}

impl Inner {
    /// A write batch as the log stores it: a table's whole rows tagged (a value that is not one
    /// row of the schema is refused before anything is logged).
    pub(crate) fn stored_batch(&self, batch: WriteBatch) -> Result<WriteBatch> {
        let Some(schema) = &self.schema else { return Ok(batch) };
        let mut stored = WriteBatch::new();
        let mut rows = 0;
        for op in batch.into_ops() {
            match op {
                BatchOp::Put { key, value } => {
                    schema.check_row(&value)?;
                    stored.put(key, stored_row(&value));
                    rows += 1;
                }
                BatchOp::Delete { key } => {
                    stored.delete(key);
                }
            }
        }
        self.profile.inserts(rows);
        Ok(stored)
    }

    /// Unless pinned, the block cache gets what the budget leaves after the MemTables (the
    /// active one and `MAX_FINALIZED` finalized ones, full) and the runs' indexes and filters,
    /// at least an eighth of the budget.
    pub(crate) fn resize_block_cache(&self) {
        if let Some(bytes) = self.options.block_cache_bytes {
            self.cache.set_capacity(bytes);
            return;
        }
        let budget = self.memory_budget_bytes;
        let tables = (MAX_FINALIZED as u64 + 1) * self.options.memtable_bytes;
        let runs = self.version.read().memory_bytes();
        self.cache.set_capacity(budget.saturating_sub(tables + runs).max(budget / 8));
    }

    /// Finalizes the active table once it holds `memtable_bytes`, and wakes the worker.
    pub(crate) fn finalize_if_full(&self) {
        let mut tables = self.tables.write();
        let full = tables.active.read().entries.memory_bytes() >= self.options.memtable_bytes;
        if full && tables.finalize_active() {
            drop(tables);
            self.signals.request();
        }
    }

    /// Writers wait while more than `MAX_FINALIZED` tables wait for level 0 (kit
    /// `wait_for_room`).
    fn wait_for_room(&self) -> Result<()> {
        let full = || self.tables.read().finalized.len() > MAX_FINALIZED;
        let counted = || {
            self.counters.writer_waits.fetch_add(1, Relaxed);
        };
        wait_for_room(full, &self.writes, &self.signals, counted)
    }

    /// The current version, to read with no lock held, once the engine is known not to be
    /// poisoned (a failed flush or compaction poisons it).
    pub(crate) fn read_version(&self) -> Result<Arc<Version>> {
        let version = self.version.read().clone();
        self.writes.state().check_not_poisoned()?;
        Ok(version)
    }
}

/// Write path step 4 (strata_kit::logged_writes): committed batches into the active table; a
/// full table is finalized after the run.
impl ApplyLogged for Inner {
    fn apply_run(&self, run: &mut Vec<Logged>) -> Result<()> {
        self.tables.read().apply_logged(run, &self.snapshots, |entries, op, lsn, snapshot| {
            apply_op(&self.all, entries, op, lsn, snapshot)
        })?;
        self.finalize_if_full();
        Ok(())
    }

    fn after_apply(&self, _sizes: WriteSizes) -> Result<()> {
        self.wait_for_room()
    }
}
