//! `FlexEngine`: FlexDB behind the `strata_core::Engine` trait. Write, commit and recovery paths
//! are numbered in the `flex` section of docs/ARCHITECTURE.md.
//!
//! Commits run on a background thread (`committer.rs`); writers only freeze a full MemTable.
//! Locks, never taken in the other order: `commit_lock` (one committer), then `mem`, then `table`.
//! The committer never holds `mem` while it waits for `table`. Readers hold `mem` and `table`
//! one after the other, never together, except `rmw`, which holds `mem` for writing across its
//! table lookup so no write to the key slips in between.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use strata_core::batch_codec::{decode_batch, encode_batch};
use strata_core::{
    BatchOp, Direction, Durability, Engine, EngineConfig, Error, KeyRange, KvIter, Limits, Result, Stats,
    Value, VerifyReport, WriteBatch,
};
use strata_io::Storage;
use strata_wal::{Wal, WalOptions};

use crate::committer::{self, Signals};
use crate::flexdb::iter::MergedRange;
use crate::flexdb::memtable::MemTable;
use crate::flexdb::meta::{self, Meta};
use crate::flexdb::record::{MAX_KEY_BYTES, MAX_VALUE_BYTES};
use crate::flexdb::table::{Entry, Table, TableConfig};
use crate::flexdb::{naive_file, FlexOptions, NaiveTableFile, TableFileKind};
use crate::flexfile::{FlexFile, TableFile};

/// Size limits of engine `flex`: a record must stay below FlexFile's 128 KiB extent limit.
pub const LIMITS: Limits =
    Limits { max_key_bytes: MAX_KEY_BYTES, max_value_bytes: MAX_VALUE_BYTES, max_batch_bytes: 8 << 20 };

const WAL_FILE_PREFIX: &str = "flexdb-wal-";
/// The FlexFile table file: `flexdb-table.data`, `.tree` and `.log`.
const FLEXFILE_NAME: &str = "flexdb-table";

/// The FlexDB engine. Cheap handles share one `Inner`.
pub struct FlexEngine {
    inner: Arc<Inner>,
}

pub(crate) struct MemState {
    /// Changed only through `MemState::apply`, `Inner::freeze` and the commit's drop of `imm`,
    /// each of which bumps `version`.
    pub(crate) active: MemTable,
    /// The MemTable being committed; readers consult it after `active`, before the table.
    pub(crate) imm: Option<Arc<MemTable>>,
    /// The WAL's last lsn when `imm` was frozen: `imm` holds every record up to it not yet in
    /// the table file.
    imm_lsn: u64,
    /// Bumped by every change to either MemTable (a write, a freeze, the drop of `imm`): a scan
    /// that read the MemTables at one version knows they still hold the same entries while the
    /// version is unchanged.
    pub(crate) version: u64,
}

impl MemState {
    fn apply(&mut self, op: BatchOp) {
        self.version += 1;
        self.active.apply(op);
    }
}

/// What a writer found after applying its batch (under the `mem` write lock).
#[derive(Clone, Copy, PartialEq)]
enum Room {
    /// The active MemTable has room.
    Free,
    /// The active MemTable has room but an immutable one is being committed: the writer is paced
    /// by the commit's progress. The value: the active MemTable's fill (0..1).
    Paced(f64),
    /// The active MemTable was full and became the immutable one: wake the committer.
    Frozen,
    /// The active MemTable is full and the committer is still busy: wait for it.
    Full,
}

pub(crate) struct Inner {
    storage: Arc<dyn Storage>,
    wal_options: WalOptions,
    wal: Wal,
    pub(crate) mem: RwLock<MemState>,
    pub(crate) table: RwLock<Table>,
    /// Times a committed immutable MemTable was dropped; changed only under the `mem` write lock.
    /// Scans use it to detect a commit finishing between their table and MemTable reads.
    pub(crate) imm_drops: AtomicU64,
    commit_lock: Mutex<()>,
    pub(crate) signals: Signals,
    /// Set when the engine is dropped: a running commit stops between steps.
    aborting: AtomicBool,
    committer: Mutex<Option<JoinHandle<()>>>,
    memtable_bytes: u64,
    memory: MemoryBudget,
    /// MemTable memory the interval cache's size leaves room for (see `MemoryBudget`): raised by
    /// a step when the MemTables outgrow it, lowered after each commit.
    mem_reserved_bytes: AtomicU64,
    /// Held while the reservation and the cache's capacity are set together (`resize_cache`).
    cache_resize: Mutex<()>,
    /// Progress of the running commit, in MemTable entries (`commit_total` = 0: none runs);
    /// read by write pacing.
    commit_done: AtomicU64,
    commit_total: AtomicU64,
    step_entries: usize,
    table_kind: TableFileKind,
    poison: Mutex<Option<String>>,
    poisoned: AtomicBool,
    closed: AtomicBool,
    counters: Counters,
}

/// How the memory budget is shared (see [`FlexOptions::cache_bytes`]): the sparse index and the
/// table file's structures take what they need, the MemTables what they hold now plus a step
/// (`mem_reserve_step`; two full MemTables at most), the interval cache the rest. Invariant
/// (up to one batch): MemTable memory <= `Inner::mem_reserved_bytes`, so the parts fit the
/// budget at every moment, yet a read-mostly workload's cache gets the MemTables' unused share.
struct MemoryBudget {
    budget_bytes: u64,
    /// `FlexOptions::cache_bytes`: a fixed cache size instead of the rest.
    fixed_cache_bytes: Option<u64>,
}

impl MemoryBudget {
    /// The cache never shrinks below this share of the budget, even when the index and the
    /// table file's structures outgrow the budget (the engine then reports the excess).
    const MIN_CACHE_DIVISOR: u64 = 16;

    fn cache_bytes(&self, memtables_bytes: u64, outside_cache_bytes: u64) -> u64 {
        self.fixed_cache_bytes.unwrap_or_else(|| {
            let rest = self.budget_bytes.saturating_sub(memtables_bytes + outside_cache_bytes);
            rest.max(self.budget_bytes / Self::MIN_CACHE_DIVISOR)
        })
    }
}

#[derive(Default)]
struct Counters {
    user_bytes_written: AtomicU64,
    user_bytes_read: AtomicU64,
    commits: AtomicU64,
    committed_entries: AtomicU64,
    last_commit_micros: AtomicU64,
    records_replayed: AtomicU64,
    open_micros: AtomicU64,
    /// Time writers spent in write pacing (all writers together).
    paced_micros: AtomicU64,
}

impl FlexEngine {
    pub fn open(storage: Arc<dyn Storage>, config: &EngineConfig) -> Result<FlexEngine> {
        Self::open_with(storage, config, FlexOptions::default())
    }

    /// Opens with explicit options, overridden by `config.engine_options` (named like the fields
    /// of [`FlexOptions`]).
    pub fn open_with(
        storage: Arc<dyn Storage>,
        config: &EngineConfig,
        mut options: FlexOptions,
    ) -> Result<FlexEngine> {
        let started = Instant::now();
        options.apply_engine_options(config)?;
        let budget = config.memory_budget_bytes;
        // At most 1 TiB: sums of MemTable sizes must not overflow.
        let memtable_bytes =
            options.memtable_bytes.unwrap_or((budget / 6).clamp(64 << 10, 256 << 20)).min(1 << 40);
        let memory = MemoryBudget { budget_bytes: budget, fixed_cache_bytes: options.cache_bytes };
        // Sized again below, once the sparse index exists.
        let cache_bytes = memory.cache_bytes(2 * memtable_bytes, 0);
        // 1. The commit record says up to which lsn the table file is complete.
        let meta = meta::load(storage.as_ref())?;
        if let Some(m) = meta {
            if m.table_kind != options.table_file.code() {
                return Err(Error::Incompatible(format!(
                    "the store's table file kind is {} but {:?} was requested",
                    m.table_kind, options.table_file
                )));
            }
        }
        let committed_lsn = meta.map_or(0, |m| m.committed_lsn);
        // 2. Table file recovery (its own), then the sparse index by sampling extents (§5.4).
        let (file, file_name): (Arc<dyn TableFile>, String) = match options.table_file {
            TableFileKind::Naive => {
                (Arc::new(NaiveTableFile::open(storage.clone())?), naive_file::FILE_NAME.into())
            }
            TableFileKind::FlexFile => (
                Arc::new(FlexFile::open(storage.clone(), FLEXFILE_NAME, options.flexfile)?),
                format!("{FLEXFILE_NAME}.data"),
            ),
        };
        let table_config = TableConfig {
            max_interval_bytes: options.max_interval_bytes.max(1),
            max_interval_records: options.max_interval_records.max(2),
            rebuild_interval_bytes: options.rebuild_interval_bytes.max(1),
            cache_bytes,
            scan_readahead_bytes: options.scan_readahead_bytes,
        };
        let table = Table::open(file, file_name, table_config)?;
        // 3. Replay the WAL after the last completed commit into the MemTable. The table file may
        //    hold a prefix of the interrupted commit; the MemTable shadows every key it touched.
        let wal_options = WalOptions {
            segment_bytes: config.wal_segment_bytes,
            recovery_mode: config.recovery_mode,
            file_prefix: WAL_FILE_PREFIX.to_string(),
            ..WalOptions::default()
        };
        let mut active = MemTable::default();
        let (wal, report) =
            Wal::open(storage.clone(), wal_options.clone(), committed_lsn + 1, &mut |lsn, payload| {
                let batch = decode_batch(payload).map_err(|what| {
                    Error::corruption("flexdb-wal", 0, format!("record lsn {lsn} holds a bad batch: {what}"))
                })?;
                for op in batch.into_ops() {
                    active.apply(op);
                }
                Ok(())
            })?;
        let inner = Inner {
            storage,
            wal_options,
            wal,
            mem: RwLock::new(MemState { active, imm: None, imm_lsn: 0, version: 0 }),
            table: RwLock::new(table),
            imm_drops: AtomicU64::new(0),
            commit_lock: Mutex::new(()),
            signals: Signals::default(),
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
            poison: Mutex::new(None),
            poisoned: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            counters: Counters::default(),
        };
        inner.counters.records_replayed.store(report.records_replayed, Relaxed);
        inner.counters.open_micros.store(started.elapsed().as_micros() as u64, Relaxed);
        inner.resize_cache();
        let inner = Arc::new(inner);
        *inner.committer.lock() = Some(committer::spawn(inner.clone())?);
        Ok(FlexEngine { inner })
    }

    /// Commits the MemTables into the table file now, in the caller's thread (normally the
    /// background committer does it when the MemTable is full).
    pub fn commit(&self) -> Result<()> {
        self.inner.check_usable()?;
        self.inner.commit_now()
    }
}

impl Inner {
    pub(crate) fn check_usable(&self) -> Result<()> {
        if self.closed.load(Relaxed) {
            return Err(Error::Closed);
        }
        if self.poisoned.load(Relaxed) {
            return Err(Error::Poisoned(self.poison.lock().clone().unwrap_or_default()));
        }
        Ok(())
    }

    /// Makes the engine refuse every later operation: the table file and its index may disagree.
    fn poison(&self, e: Error) -> Error {
        let mut p = self.poison.lock();
        if p.is_none() {
            *p = Some(e.to_string());
        }
        self.poisoned.store(true, Relaxed);
        e
    }

    /// The MemTables' memory grows by this much between two re-sizings of the interval cache.
    fn mem_reserve_step(&self) -> u64 {
        (self.memtable_bytes / 4).max(1)
    }

    /// Gives the interval cache what the budget leaves once the MemTables have room for what they
    /// hold now plus a step; the sparse index and the table file's structures come first.
    /// Serialised by `cache_resize`, and the MemTables are measured inside it: two resizes that
    /// interleaved could otherwise leave a high reservation next to a cache sized for a low one,
    /// and a commit's measurement taken before writers resumed would be stale (review finding,
    /// session 4).
    fn resize_cache(&self) {
        let _resizing = self.cache_resize.lock();
        let mem_in_use = Self::mem_in_use_bytes(&self.mem.read());
        let reserved = (mem_in_use + self.mem_reserve_step()).min(2 * self.memtable_bytes);
        let table = self.table.read();
        self.mem_reserved_bytes.store(reserved, SeqCst);
        table.set_cache_capacity(self.memory.cache_bytes(reserved, table.memory_bytes_outside_cache()));
    }

    /// After a write: shrinks the interval cache when the MemTables outgrew their reservation
    /// (never past two full MemTables: a frozen one over its limit by a batch does not make
    /// every later write re-size the cache).
    fn reserve_mem(&self, mem_in_use_bytes: u64) {
        let reserved = self.mem_reserved_bytes.load(SeqCst);
        if mem_in_use_bytes > reserved && reserved < 2 * self.memtable_bytes {
            self.resize_cache();
        }
    }

    fn mem_in_use_bytes(mem: &MemState) -> u64 {
        mem.active.memory_bytes() + mem.imm.as_ref().map_or(0, |imm| imm.memory_bytes())
    }

    pub(crate) fn note_read(&self, bytes: u64) {
        self.counters.user_bytes_read.fetch_add(bytes, Relaxed);
    }

    /// Write path steps 1–4 (arch notes): append and apply under `mem`, then wait for durability.
    fn write_batch(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.check_usable()?;
        let payload = encode_batch(&batch);
        let user_bytes = batch.payload_bytes() as u64;
        let (lsn, room, mem_in_use) = {
            let mut mem = self.mem.write();
            let lsn = self.wal.append(&payload)?;
            for op in batch.into_ops() {
                mem.apply(op);
            }
            (lsn, self.freeze_if_full(&mut mem), Self::mem_in_use_bytes(&mem))
        };
        self.after_append(lsn, user_bytes, durability, room, mem_in_use)
    }

    /// Write path steps 4–5, with no lock held; `mem_in_use` is the MemTables' memory right after
    /// the write.
    fn after_append(
        &self,
        lsn: u64,
        user_bytes: u64,
        durability: Durability,
        room: Room,
        mem_in_use: u64,
    ) -> Result<()> {
        self.reserve_mem(mem_in_use);
        self.counters.user_bytes_written.fetch_add(user_bytes, Relaxed);
        self.wal.commit(lsn, durability)?;
        match room {
            Room::Free => Ok(()),
            Room::Paced(fill) => {
                self.pace(fill);
                Ok(())
            }
            Room::Frozen => {
                self.signals.wake_committer();
                Ok(())
            }
            Room::Full => self.wait_for_room(),
        }
    }

    /// Write pacing: while a commit runs, a writer whose write left the active MemTable more than
    /// `PACE_SLACK` fuller than the commit is done waits (in short sleeps) for the commit to catch
    /// up, so writers slow down smoothly instead of all stopping for the rest of a commit once
    /// both MemTables are full (measured before: a 3 s worst insert during a 10M-record load).
    fn pace(&self, fill: f64) {
        const PACE_SLACK: f64 = 0.25;
        const PACE_SLEEP: Duration = Duration::from_micros(500);
        let mut waiting_since = None;
        loop {
            let (done, total) = (self.commit_done.load(Relaxed), self.commit_total.load(Relaxed));
            if total == 0 || fill <= done as f64 / total as f64 + PACE_SLACK {
                break;
            }
            if self.poisoned.load(Relaxed) || self.closed.load(Relaxed) || self.signals.stopping() {
                break;
            }
            waiting_since.get_or_insert_with(Instant::now);
            std::thread::sleep(PACE_SLEEP);
        }
        if let Some(since) = waiting_since {
            self.counters.paced_micros.fetch_add(since.elapsed().as_micros() as u64, Relaxed);
        }
    }

    /// Under the `mem` write lock, after a write: freezes a full active MemTable if it can.
    fn freeze_if_full(&self, mem: &mut MemState) -> Room {
        let active_bytes = mem.active.memory_bytes();
        if active_bytes < self.memtable_bytes {
            match mem.imm {
                Some(_) => Room::Paced(active_bytes as f64 / self.memtable_bytes as f64),
                None => Room::Free,
            }
        } else if self.freeze(mem) {
            Room::Frozen
        } else {
            Room::Full
        }
    }

    /// Commit path step 1: the active MemTable becomes the immutable one, unless one exists or
    /// it is empty. Appends happen under `mem`, so every record up to the frozen lsn is in the
    /// new immutable MemTable or older.
    fn freeze(&self, mem: &mut MemState) -> bool {
        if mem.imm.is_some() || mem.active.is_empty() {
            return false;
        }
        mem.imm = Some(Arc::new(std::mem::take(&mut mem.active)));
        mem.imm_lsn = self.wal.last_lsn();
        mem.version += 1;
        true
    }

    /// Backpressure: both MemTables are full; wait until the committer drops the immutable one,
    /// then freeze. A write that got here is already applied and logged, so a closing engine
    /// ends the wait without an error; a poisoned one reports it.
    fn wait_for_room(&self) -> Result<()> {
        loop {
            let drops_seen = self.imm_drops.load(SeqCst);
            let room = self.freeze_if_full(&mut self.mem.write());
            match room {
                Room::Free | Room::Paced(_) => return Ok(()),
                Room::Frozen => {
                    self.signals.wake_committer();
                    return Ok(());
                }
                Room::Full => {}
            }
            if self.poisoned.load(Relaxed) {
                return self.check_usable();
            }
            if self.closed.load(Relaxed) || self.signals.stopping() {
                return Ok(());
            }
            self.signals.wait_for_room(self, drops_seen);
        }
    }

    /// Commits whatever is in the MemTables, in the caller's thread: the immutable one first,
    /// then the active one.
    pub(crate) fn commit_now(&self) -> Result<()> {
        loop {
            self.commit_frozen()?;
            let mut mem = self.mem.write();
            if mem.imm.is_some() {
                continue; // a writer froze one meanwhile: commit that first
            }
            if !self.freeze(&mut mem) {
                return Ok(()); // nothing to commit
            }
            drop(mem);
            return self.commit_frozen();
        }
    }

    /// Commit path steps 2–7 (arch notes) for the immutable MemTable, if there is one: make the
    /// WAL durable up to it, apply it to the table file in bounded steps, sync the table file,
    /// record the commit, drop the MemTable, release the WAL. Stops between steps (without an
    /// error that poisons) when the engine is being dropped.
    pub(crate) fn commit_frozen(&self) -> Result<()> {
        let _one_committer = self.commit_lock.lock();
        self.check_usable()?;
        let started = Instant::now();
        let (imm, frozen_lsn) = {
            let mem = self.mem.read();
            match &mem.imm {
                Some(imm) => (imm.clone(), mem.imm_lsn),
                None => return Ok(()),
            }
        };
        // Pacing starts with the WAL sync: writers that fill the active MemTable faster than the
        // sync returns would otherwise find both MemTables full before the first step.
        self.commit_done.store(0, Relaxed);
        self.commit_total.store(imm.len().max(1) as u64, Relaxed);
        let applied = self.wal.sync().map(|_| ()).map_err(|e| self.poison(e)).and_then(|()| {
            let entries: Vec<Entry<'_>> = imm.iter().map(|(k, v)| (k, v.as_deref())).collect();
            self.apply_steps(&entries)
        });
        // Also on errors: pacing must not wait for a commit that stopped.
        self.commit_total.store(0, Relaxed);
        applied?;
        self.table.read().sync().map_err(|e| self.poison(e))?;
        self.check_aborting()?;
        let meta = Meta { table_kind: self.table_kind.code(), committed_lsn: frozen_lsn };
        meta::store(self.storage.as_ref(), &meta).map_err(|e| self.poison(e))?;
        self.check_aborting()?;
        {
            let mut mem = self.mem.write();
            mem.imm = None;
            mem.version += 1;
            self.imm_drops.fetch_add(1, SeqCst);
        }
        self.signals.notify_drained();
        self.wal.truncate_before(frozen_lsn + 1).map_err(|e| self.poison(e))?;
        self.resize_cache();
        self.counters.commits.fetch_add(1, Relaxed);
        self.counters.committed_entries.fetch_add(imm.len() as u64, Relaxed);
        self.counters.last_commit_micros.store(started.elapsed().as_micros() as u64, Relaxed);
        Ok(())
    }

    /// Commit path step 3: the immutable MemTable's entries into the table, a step at a time.
    fn apply_steps(&self, entries: &[Entry<'_>]) -> Result<()> {
        for step in entries.chunks(self.step_entries) {
            self.check_aborting()?;
            // Readers keep going while the table file collects garbage ahead of the step's writes
            // and while the step's intervals are read from it.
            // Split what readers found over the limits first: a split after the prefetch would
            // make the step read those intervals again under the write lock.
            if self.table.read().has_oversized() {
                let dropped = self.table.write().split_oversized();
                drop(dropped); // after the write lock
            }
            let prefetched = {
                let table = self.table.read();
                table.maintain_file().map_err(|e| self.poison(e))?;
                table.prefetch(step).map_err(|e| self.poison(e))?
            };
            self.table.write().apply_sorted(step, &prefetched).map_err(|e| self.poison(e))?;
            self.commit_done.fetch_add(step.len() as u64, Relaxed);
        }
        self.check_aborting()
    }

    /// The engine is being dropped: a running commit stops before its next step or file change.
    fn check_aborting(&self) -> Result<()> {
        if self.aborting.load(SeqCst) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Close: stop the committer thread (`commit`: after its current commit; otherwise between
    /// two steps of it) and join it, optionally commit the MemTables (so the next open replays
    /// little; the WAL covers them anyway), then close the WAL. Later calls return
    /// `Error::Closed`.
    fn shutdown(&self, commit: bool) -> Result<()> {
        if self.closed.load(Relaxed) {
            return Ok(());
        }
        if !commit {
            self.aborting.store(true, SeqCst);
        }
        self.signals.stop();
        let committer = self.committer.lock().take();
        if let Some(thread) = committer {
            let _ = thread.join();
        }
        // A commit the thread ran may have failed and poisoned the engine: close reports it.
        let committed = if commit { self.check_usable().and_then(|()| self.commit_now()) } else { Ok(()) };
        if self.closed.swap(true, Relaxed) {
            return committed;
        }
        let closed = self.wal.close();
        committed.and(closed)
    }

    fn lookup(&self, key: &[u8]) -> Result<Option<Value>> {
        {
            let mem = self.mem.read();
            if let Some(v) = mem.active.get(key) {
                return Ok(v.cloned());
            }
            if let Some(v) = mem.imm.as_ref().and_then(|m| m.get(key)) {
                return Ok(v.cloned());
            }
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

    fn disk_bytes(&self) -> u64 {
        strata_io::total_file_bytes(self.storage.as_ref())
    }
}

impl Engine for FlexEngine {
    fn name(&self) -> &'static str {
        "flex"
    }

    fn limits(&self) -> Limits {
        LIMITS
    }

    fn capabilities(&self) -> strata_core::Capabilities {
        crate::contract::CAPABILITIES
    }

    fn maintenance(&self) -> &dyn strata_core::Maintenance {
        self
    }

    fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        self.inner.check_usable()?;
        let value = self.inner.lookup(key)?;
        if let Some(v) = &value {
            self.inner.note_read((key.len() + v.len()) as u64);
        }
        Ok(value)
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.inner.write_batch(batch, durability)
    }

    fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        let inner = &self.inner;
        inner.check_usable()?;
        // The table is read before taking the `mem` write lock, never under it: waiting there for
        // the table's read lock (held for writing by a commit step) would stall every reader and
        // writer behind `mem`. The value read stays current unless a commit finished in between
        // (the same argument as a scan window's, src/flexdb/iter.rs): a commit changes only keys
        // of the immutable MemTable, which `mem` shows until the commit drops it and bumps
        // `imm_drops` under the `mem` write lock; if that counter moved, read again.
        let (lsn, user_bytes, room, stored, mem_in_use) = loop {
            let drops_seen = inner.imm_drops.load(SeqCst);
            let in_mem = {
                let mem = inner.mem.read();
                mem.active.get(key).is_some() || mem.imm.as_ref().is_some_and(|m| m.get(key).is_some())
            };
            let table_value = if in_mem { None } else { Some(inner.table.read().get(key)?) };
            #[cfg(test)]
            rmw_tests::after_table_read();
            let mut mem = inner.mem.write();
            let current = match (
                mem.active.get(key).or_else(|| mem.imm.as_ref().and_then(|m| m.get(key))),
                table_value,
            ) {
                (Some(v), _) => v.cloned(),
                (None, Some(v)) if inner.imm_drops.load(SeqCst) == drops_seen => v,
                (None, _) => continue, // a commit moved the key into the table meanwhile
            };
            let new = f(current.as_deref());
            let batch = WriteBatch::single(key, new.as_deref());
            let lsn = inner.wal.append(&encode_batch(&batch))?;
            let user_bytes = batch.payload_bytes() as u64;
            for op in batch.into_ops() {
                mem.apply(op);
            }
            break (lsn, user_bytes, inner.freeze_if_full(&mut mem), new, Inner::mem_in_use_bytes(&mem));
        };
        inner.after_append(lsn, user_bytes, durability, room, mem_in_use)?;
        Ok(stored)
    }

    fn range(&self, range: KeyRange, direction: Direction) -> Result<KvIter> {
        self.inner.check_usable()?;
        Ok(Box::new(MergedRange::new(self.inner.clone(), range, direction)))
    }

    fn flush(&self) -> Result<()> {
        self.inner.check_usable()?;
        self.inner.wal.sync().map(|_| ())
    }

    fn close(&self) -> Result<()> {
        self.inner.shutdown(true)
    }

    fn stats(&self) -> Stats {
        let inner = &self.inner;
        let (mem_bytes, mem_entries) = {
            let mem = inner.mem.read();
            let imm = mem.imm.as_ref().map_or(0, |m| m.memory_bytes());
            (mem.active.memory_bytes() + imm, mem.active.len() as u64)
        };
        // One read lock for the whole table snapshot.
        let t = inner.table.read();
        let cache = t.cache_stats();
        let (cache_capacity, index_bytes, file_memory) =
            (t.cache_capacity_bytes(), t.index().memory_bytes(), t.file_memory_bytes());
        let intervals = t.index().interval_count() as u64;
        let (table_bytes, rebuild_bytes, loads, file_counters) =
            (t.file_len(), t.rebuild_bytes_read, t.interval_loads.load(Relaxed), t.file_counters());
        let split_on_access = t.intervals_split_on_access;
        drop(t);
        let memory_bytes = mem_bytes + cache.used_bytes + index_bytes + file_memory;
        let c = &inner.counters;
        Stats {
            engine: "flex".into(),
            live_keys: None,
            user_bytes_written: c.user_bytes_written.load(Relaxed),
            user_bytes_read: c.user_bytes_read.load(Relaxed),
            io: inner.storage.io_stats(),
            cache_hits: cache.hits,
            cache_misses: cache.misses,
            memory_bytes,
            disk_bytes: inner.disk_bytes(),
            engine_counters: [
                ("flexdb.commits", c.commits.load(Relaxed)),
                ("flexdb.committed_entries", c.committed_entries.load(Relaxed)),
                ("flexdb.last_commit_micros", c.last_commit_micros.load(Relaxed)),
                ("flexdb.memtable_entries", mem_entries),
                ("flexdb.intervals", intervals),
                ("flexdb.interval_loads", loads),
                ("flexdb.cached_intervals", cache.intervals),
                ("flexdb.table_file_bytes", table_bytes),
                ("flexdb.rebuild_bytes_read", rebuild_bytes),
                ("flexdb.intervals_split_on_access", split_on_access),
                ("flexdb.records_replayed_at_open", c.records_replayed.load(Relaxed)),
                ("flexdb.open_micros", c.open_micros.load(Relaxed)),
                ("flexdb.write_paced_micros", c.paced_micros.load(Relaxed)),
                ("memory.budget_bytes", inner.memory.budget_bytes),
                ("memory.memtables_bytes", mem_bytes),
                ("memory.memtable_limit_bytes", inner.memtable_bytes),
                ("memory.memtables_reserved_bytes", inner.mem_reserved_bytes.load(Relaxed)),
                ("memory.cache_bytes", cache.used_bytes),
                ("memory.cache_slack_bytes", cache.slack_bytes),
                ("memory.cache_capacity_bytes", cache_capacity),
                ("memory.sparse_index_bytes", index_bytes),
                ("memory.table_file_bytes", file_memory),
                ("memory.over_budget_bytes", memory_bytes.saturating_sub(inner.memory.budget_bytes)),
            ]
            .into_iter()
            .chain(file_counters)
            .map(|(name, value)| (name.to_string(), value))
            .chain(inner.wal.stats().counters())
            .collect(),
        }
    }

    fn verify(&self) -> Result<VerifyReport> {
        self.inner.check_usable()?;
        let inner = &self.inner;
        let mut report = Wal::verify(inner.storage.as_ref(), &inner.wal_options)?;
        if let Some(m) = meta::load(inner.storage.as_ref())? {
            if m.table_kind != inner.table_kind.code() {
                return Err(Error::corruption(
                    "flexdb-meta",
                    12,
                    format!("table file kind {} does not match the open table file", m.table_kind),
                ));
            }
            report.files_checked += 1;
        }
        let (records, bytes) = inner.table.read().verify()?;
        report.files_checked += 1;
        report.records_checked += records;
        report.bytes_checked += bytes;
        Ok(report)
    }
}

impl Drop for FlexEngine {
    fn drop(&mut self) {
        // No commit here: after a simulated power loss the handle is stale. Iterators still alive
        // see `Error::Closed`.
        let _ = self.inner.shutdown(false);
    }
}

#[cfg(test)]
mod rmw_tests;

#[cfg(test)]
mod pace_tests {
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::Arc;
    use std::time::Duration;

    use strata_core::EngineConfig;
    use strata_io::MemStorage;

    use super::FlexEngine;

    /// A writer whose MemTable is further ahead of the running commit than the slack waits until
    /// the commit's progress catches up, and only that long; with no commit running it never waits.
    #[test]
    fn a_writer_ahead_of_the_commit_waits_for_its_progress() {
        let engine = FlexEngine::open(Arc::new(MemStorage::new()), &EngineConfig::default()).unwrap();
        let inner = engine.inner.clone();
        inner.pace(0.9); // no commit running
        assert_eq!(inner.counters.paced_micros.load(Relaxed), 0);
        inner.commit_done.store(0, Relaxed);
        inner.commit_total.store(100, Relaxed);
        inner.pace(0.2); // within the slack
        assert_eq!(inner.counters.paced_micros.load(Relaxed), 0);
        let writer = {
            let inner = inner.clone();
            std::thread::spawn(move || inner.pace(0.9))
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!writer.is_finished(), "a writer 90% full against a commit 0% done went on");
        inner.commit_done.store(60, Relaxed); // 0.60 + 0.25 < 0.9: still waits
        std::thread::sleep(Duration::from_millis(10));
        assert!(!writer.is_finished(), "a writer 90% full against a commit 60% done went on");
        inner.commit_done.store(70, Relaxed);
        writer.join().unwrap();
        // It waited (the time depends on when its thread started; 100 ms is generous).
        assert!(inner.counters.paced_micros.load(Relaxed) > 0);
        inner.commit_total.store(0, Relaxed);
    }
}
