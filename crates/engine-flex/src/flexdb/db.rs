//! `FlexDb`: FlexDB's whole state (MemTables, table, WAL, committer, memory budget, counters) and
//! its open, read and close paths. The write path is in `write.rs`, the commit path in
//! `commit.rs`, both numbered in the `flex` section of docs/ARCHITECTURE.md.
//!
//! Commits run on a background thread (`committer.rs`); writers only freeze a full MemTable.
//! Locks, never taken in the other order: `commit_lock` (one committer), then `mem`, then `table`.
//! The committer never holds `mem` while it waits for `table`. Readers hold `mem` and `table`
//! one after the other, never together. Writers take the log lock of `writes` alone to append,
//! and `rmw` takes `mem` (read) under it; the committer never takes it. A writer's batch is
//! applied (under `mem`) only after its WAL commit, in log order (`strata_kit::logged_writes`).

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use strata_core::{BatchOp, EngineConfig, Error, Result, Value};
use strata_io::Storage;
use strata_kit::io_cause::CountedStorage;
use strata_kit::logged_writes::LoggedWrites;
use strata_kit::memtable::MemTable;
use strata_kit::replay::{self, ReplayedWal};
use strata_kit::worker::{Worker, WorkerSignals};
use strata_wal::WalOptions;

use super::memory_budget::MemoryBudget;
use super::meta::{self, Meta};
use super::table::{Table, TableConfig};
use super::{naive_file, FlexOptions, NaiveTableFile, TableFileKind};
use crate::flexfile::{FlexFile, LogMark, TableFile};
use crate::io_kinds::{self, IoCause};

const WAL_FILE_PREFIX: &str = "flexdb-wal-";
/// The FlexFile table file: `flexdb-table.data`, `.tree` and `.log`.
const FLEXFILE_NAME: &str = "flexdb-table";

pub(crate) struct MemState {
    /// Changed only through `MemState::apply`, `FlexDb::freeze` and the commit's drop of `imm`,
    /// each of which bumps `version`.
    pub(crate) active: MemTable,
    /// The MemTable being committed; readers consult it after `active`, before the table.
    pub(crate) imm: Option<Arc<MemTable>>,
    /// `applied_lsn` when `imm` was frozen: `imm` holds every record up to it not yet in the
    /// table file.
    pub(super) imm_lsn: u64,
    /// The lsn of the last batch applied to `active`. Batches are applied in log order, after
    /// their commit, so every record up to it is in a MemTable or the table file.
    pub(super) applied_lsn: u64,
    /// Bumped by every change to either MemTable (a write, a freeze, the drop of `imm`): a scan
    /// that read the MemTables at one version knows they still hold the same entries while the
    /// version is unchanged.
    pub(crate) version: u64,
}

impl MemState {
    pub(super) fn apply(&mut self, op: BatchOp) {
        self.version += 1;
        self.active.apply(op);
    }

    /// The active MemTable's value for `key`, else the immutable one's (`Some(None)`: deleted).
    pub(super) fn get(&self, key: &[u8]) -> Option<Option<&Value>> {
        self.active.get(key).or_else(|| self.imm.as_ref().and_then(|m| m.get(key)))
    }
}

/// FlexDB: one store's state. Shared by the engine handle, the committer thread and iterators.
pub(crate) struct FlexDb {
    /// `io` as a plain storage: every file of the store is opened through it.
    pub(super) storage: Arc<dyn Storage>,
    /// Device bytes by file kind and cause (`io_kinds`).
    pub(super) io: Arc<CountedStorage>,
    pub(super) wal_options: WalOptions,
    /// The WAL, the closed flag and the poison; batches reach `mem` through it (write.rs).
    pub(super) writes: LoggedWrites,
    pub(crate) mem: RwLock<MemState>,
    pub(crate) table: RwLock<Table>,
    /// Times a committed immutable MemTable was dropped; changed only under the `mem` write lock.
    /// Scans use it to detect a commit finishing between their table and MemTable reads.
    pub(crate) imm_drops: AtomicU64,
    pub(super) commit_lock: Mutex<()>,
    /// The committer's signals: writers request commits and wait for room through them.
    pub(crate) signals: Arc<WorkerSignals>,
    /// Set when the engine is dropped: a running commit stops between steps.
    pub(super) aborting: AtomicBool,
    pub(super) committer: Mutex<Option<Worker>>,
    pub(super) memtable_bytes: u64,
    pub(super) memory: MemoryBudget,
    /// MemTable memory the interval cache's size leaves room for (see `MemoryBudget`): raised by
    /// a step when the MemTables outgrow it, lowered after each commit.
    pub(super) mem_reserved_bytes: AtomicU64,
    /// Held while the reservation and the cache's capacity are set together (`resize_cache`).
    pub(super) cache_resize: Mutex<()>,
    /// Progress of the running commit, in MemTable entries (`commit_total` = 0: none runs);
    /// read by write pacing.
    pub(super) commit_done: AtomicU64,
    pub(super) commit_total: AtomicU64,
    pub(super) step_entries: usize,
    pub(super) table_kind: TableFileKind,
    pub(super) counters: Counters,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) user_bytes_read: AtomicU64,
    pub(super) commits: AtomicU64,
    pub(super) committed_entries: AtomicU64,
    pub(super) last_commit_micros: AtomicU64,
    pub(super) records_replayed: AtomicU64,
    pub(super) open_micros: AtomicU64,
    /// Time writers spent in write pacing (all writers together).
    pub(super) paced_micros: AtomicU64,
}

impl FlexDb {
    /// Recovery path (arch notes): opens the store in `storage` with `options` (already merged
    /// with `config.engine_options`) and starts its committer thread.
    pub(crate) fn open(
        storage: Arc<dyn Storage>,
        config: &EngineConfig,
        options: &FlexOptions,
    ) -> Result<Arc<FlexDb>> {
        let started = Instant::now();
        let _opening = IoCause::Open.enter();
        let io = io_kinds::counted(storage);
        let storage: Arc<dyn Storage> = io.clone();
        let budget = config.memory_budget_bytes;
        // At most 1 TiB: sums of MemTable sizes must not overflow.
        let memtable_bytes =
            options.memtable_bytes.unwrap_or((budget / 3).clamp(64 << 10, 256 << 20)).min(1 << 40);
        let memory = MemoryBudget::new(budget, options.cache_bytes);
        // 1. The commit record says up to which lsn the table file is complete.
        let meta = load_meta(storage.as_ref(), options.table_file)?;
        let committed_lsn = meta.map_or(0, |m| m.committed_lsn);
        require_table_files(storage.as_ref(), options.table_file, committed_lsn)?;
        // 2. Table file recovery (its own; a FlexFile log cut below the length the record names
        //    as synced is corruption), then the sparse index by sampling extents (§5.4).
        //    The cache is sized again below, once the sparse index exists.
        let synced_log = meta.and_then(|m| m.table_log);
        let table = open_table(&storage, options, synced_log, memory.cache_bytes(2 * memtable_bytes, 0))?;
        // 3. Replay the WAL after the last completed commit into the MemTable. The table file may
        //    hold a prefix of the interrupted commit; the MemTable shadows every key it touched.
        let wal_options = WalOptions {
            segment_bytes: config.effective_wal_segment_bytes(),
            recovery_mode: config.recovery_mode,
            file_prefix: WAL_FILE_PREFIX.to_string(),
            ..WalOptions::default()
        };
        let mut active = MemTable::default();
        let ReplayedWal { wal, report, .. } =
            replay::open_wal(storage.clone(), wal_options.clone(), committed_lsn + 1, &mut |_, batch| {
                for op in batch.into_ops() {
                    active.apply(op);
                }
                Ok(())
            })?;
        // Replay applied every record the log holds.
        let applied_lsn = wal.last_lsn();
        let db = FlexDb {
            storage,
            io,
            wal_options,
            writes: LoggedWrites::new(wal, ""),
            mem: RwLock::new(MemState { active, imm: None, imm_lsn: 0, applied_lsn, version: 0 }),
            table: RwLock::new(table),
            imm_drops: AtomicU64::new(0),
            commit_lock: Mutex::new(()),
            signals: Arc::default(),
            aborting: AtomicBool::new(false),
            committer: Mutex::new(None),
            memtable_bytes,
            mem_reserved_bytes: AtomicU64::new(2 * memtable_bytes),
            cache_resize: Mutex::new(()),
            memory,
            commit_done: AtomicU64::new(0),
            commit_total: AtomicU64::new(0),
            step_entries: options.commit_step_entries.max(1),
            table_kind: options.table_file,
            counters: Counters::default(),
        };
        db.counters.records_replayed.store(report.records_replayed, Relaxed);
        db.counters.open_micros.store(started.elapsed().as_micros() as u64, Relaxed);
        db.resize_cache();
        // 5. Start the committer.
        let db = Arc::new(db);
        db.start_committer()?;
        Ok(db)
    }

    /// `Err` once closed or poisoned.
    pub(crate) fn check_usable(&self) -> Result<()> {
        self.writes.check_usable()
    }

    /// Makes the engine refuse every later operation: the table file and its index may disagree,
    /// or the WAL holds a record no MemTable will hold (its commit failed, write.rs).
    pub(super) fn poison(&self, e: Error) -> Error {
        self.writes.poison(e)
    }

    pub(crate) fn note_read(&self, bytes: u64) {
        self.counters.user_bytes_read.fetch_add(bytes, Relaxed);
    }

    /// The value of `key`: the MemTables first, then the table. Counts the bytes read.
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        self.check_usable()?;
        let value = self.lookup(key)?;
        if let Some(v) = &value {
            self.note_read((key.len() + v.len()) as u64);
        }
        Ok(value)
    }

    fn lookup(&self, key: &[u8]) -> Result<Option<Value>> {
        if let Some(v) = self.mem.read().get(key) {
            return Ok(v.cloned());
        }
        // A commit may finish between the two locks: the table then holds the same or newer data.
        let table = self.table.read();
        let found = table.get(key);
        let split_due = table.has_oversized();
        drop(table);
        if split_due {
            self.split_oversized_without_waiting();
        }
        found
    }

    /// Splits the intervals readers found over the limits (table_oversized.rs) if the table's
    /// write lock is free right now; otherwise the committer or a later reader does.
    pub(crate) fn split_oversized_without_waiting(&self) {
        let dropped = self.table.try_write().map(|mut table| table.split_oversized());
        drop(dropped); // after the write lock
    }

    /// Makes every acknowledged write durable in the WAL.
    pub(crate) fn flush(&self) -> Result<()> {
        self.writes.flush()
    }

    /// Close: stop the committer thread (`commit`: after its current commit; otherwise between
    /// two steps of it) and join it, optionally commit the MemTables (so the next open replays
    /// little; the WAL covers them anyway), then close the WAL. Later calls return
    /// `Error::Closed`.
    pub(crate) fn shutdown(&self, commit: bool) -> Result<()> {
        if self.writes.state().is_closed() {
            return Ok(());
        }
        if !commit {
            self.aborting.store(true, SeqCst);
        }
        let committer = self.committer.lock().take();
        match committer {
            Some(worker) => worker.stop_and_join(),
            None => self.signals.stop(),
        }
        // A commit the thread ran may have failed and poisoned the engine: close reports it.
        let committed = if commit { self.check_usable().and_then(|()| self.commit_now()) } else { Ok(()) };
        if !self.writes.state().mark_closed() {
            return committed;
        }
        let closed = self.writes.wal().close();
        committed.and(closed)
    }
}

/// The commit record (`None` for a new store); refuses a store whose table file is of another
/// kind than `kind`.
fn load_meta(storage: &dyn Storage, kind: TableFileKind) -> Result<Option<Meta>> {
    let meta = meta::load(storage)?;
    if let Some(m) = meta {
        if m.table_kind != kind.code() {
            return Err(Error::Incompatible(format!(
                "the store's table file kind is {} but {kind:?} was requested",
                m.table_kind
            )));
        }
    }
    Ok(meta)
}

/// After a commit (`committed_lsn > 0`) the table file's files exist: the commit synced them
/// before `flexdb-meta` named it. One that is missing now was deleted, and opening would create
/// an empty one in its place — every committed key gone without an error.
fn require_table_files(storage: &dyn Storage, kind: TableFileKind, committed_lsn: u64) -> Result<()> {
    if committed_lsn == 0 {
        return Ok(());
    }
    let names = match kind {
        TableFileKind::Naive => vec![naive_file::FILE_NAME.to_string()],
        TableFileKind::FlexFile => {
            ["data", "tree", "log"].iter().map(|ext| format!("{FLEXFILE_NAME}.{ext}")).collect()
        }
    };
    for name in names {
        if !storage.exists(&name)? {
            return Err(Error::corruption(
                &name,
                0,
                format!(
                    "missing table file: {} records a commit up to lsn {committed_lsn} that it holds \
                     (expected the file, found none)",
                    meta::FILE_NAME
                ),
            ));
        }
    }
    Ok(())
}

/// Opens (recovers) the table file of `options.table_file` and rebuilds the table's index.
/// `synced_log`: how far the commit record says the FlexFile log was synced.
fn open_table(
    storage: &Arc<dyn Storage>,
    options: &FlexOptions,
    synced_log: Option<LogMark>,
    cache_bytes: u64,
) -> Result<Table> {
    let (file, file_name): (Arc<dyn TableFile>, String) = match options.table_file {
        TableFileKind::Naive => {
            (Arc::new(NaiveTableFile::open(storage.clone())?), naive_file::FILE_NAME.into())
        }
        TableFileKind::FlexFile => (
            Arc::new(FlexFile::open_checked(storage.clone(), FLEXFILE_NAME, options.flexfile, synced_log)?),
            format!("{FLEXFILE_NAME}.data"),
        ),
    };
    let table_config = TableConfig {
        max_interval_bytes: options.max_interval_bytes.max(1),
        max_interval_records: options.max_interval_records.max(2),
        rebuild_interval_bytes: options.rebuild_interval_bytes.max(1),
        cache_bytes,
        scan_readahead_bytes: options.scan_readahead_bytes,
        rewrite_above_extents: options.rewrite_above_extents.max(1),
    };
    Table::open(file, file_name, table_config)
}
