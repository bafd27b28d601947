//! Engine `memory`: the whole data set in an ordered in-memory map (the kit's `MemTable`, without
//! tombstones), made durable by the shared WAL and recovered by replay, with compacting snapshots
//! so replay time stays bounded.
//!
//! Write path and recovery path: docs/ARCHITECTURE.md, section "memory".
//! On-disk structures: docs/format/wal.md, docs/format/write-batch.md,
//! docs/format/memory-snapshot.md.

mod iter;
mod snapshot;

use std::sync::atomic::{AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_core::{
    Capabilities, Direction, Durability, Engine, EngineConfig, EngineOptionReader, Error, KeyRange, KvIter,
    Limits, Maintenance, MaintenanceTask, Result, Stats, Value, VerifyReport, WriteBatch,
    LARGEST_DEFAULT_WAL_SEGMENT_BYTES,
};
use strata_io::Storage;
use strata_kit::chunked_range::ChunkedRange;
use strata_kit::logged_writes::{ApplyLogged, Current, Logged, LoggedWrites, ReadCurrent, WriteSizes};
use strata_kit::memtable::MemTable;
use strata_kit::EngineFactory;
use strata_wal::WalOptions;

/// Size limits of the memory engine (documented in README and enforced by `strata::Db`).
pub const LIMITS: Limits =
    Limits { max_key_bytes: 64 << 10, max_value_bytes: 64 << 20, max_batch_bytes: 256 << 20 };

/// The memory engine. Cheap handles share one `Inner`.
pub struct MemoryEngine {
    inner: Arc<Inner>,
}

struct Inner {
    storage: Arc<dyn Storage>,
    wal_options: WalOptions,
    /// The WAL, the closed flag and the poison; batches reach `map` through it, after their
    /// commit and in log order (strata_kit::logged_writes).
    writes: LoggedWrites,
    /// The live data, applied with `apply_without_tombstones`, so a reader never sees a write
    /// that may still fail.
    map: RwLock<MemTable>,
    /// The lsn of the last batch applied to `map`; stored under the map's write lock, so under
    /// its read lock the map is exactly the state after every record up to it (applies follow
    /// the log order, and a failed write stops every later apply).
    applied_lsn: AtomicU64,
    /// Held while a snapshot is being written; `try_lock` so only one writer takes it on.
    snapshot_lock: Mutex<()>,
    /// WAL payload bytes appended since the last snapshot.
    wal_bytes_since_snapshot: AtomicU64,
    /// Minimum WAL growth before a snapshot is considered: the WAL segment size when set,
    /// else 64 MiB. Not the budget's segment size: this engine holds all its data whatever the
    /// budget, and a snapshot stalls appliers while it streams the map, so small stores are not
    /// snapshotted more often than a 64 MiB log asks.
    snapshot_min_wal_bytes: u64,
    counters: Counters,
}

#[derive(Default)]
struct Counters {
    user_bytes_read: AtomicU64,
    snapshots_written: AtomicU64,
    /// Automatic snapshots that failed (their writes stood; see `snapshot_if_due`).
    snapshots_failed: AtomicU64,
    last_snapshot_bytes: AtomicU64,
    records_replayed: AtomicU64,
}

impl MemoryEngine {
    /// Opens (creating if empty) the engine's files in `storage`: loads the newest snapshot, then
    /// replays the WAL records after it.
    pub fn open(storage: Arc<dyn Storage>, config: &EngineConfig) -> Result<MemoryEngine> {
        EngineOptionReader::new("memory", &config.engine_options)?.finish()?; // it has no knobs
        let wal_options = WalOptions {
            segment_bytes: config.effective_wal_segment_bytes(),
            recovery_mode: config.recovery_mode,
            ..WalOptions::default()
        };
        // 1. Remove leftovers of an interrupted snapshot; find the newest complete one.
        let names = storage.list()?;
        for name in names.iter().filter(|n| n.starts_with("snapshot-") && n.ends_with(".tmp")) {
            storage.remove(name)?;
        }
        let newest = names.iter().filter_map(|n| snapshot::parse_file_name(n)).max();
        let mut map = MemTable::default();
        let mut snapshot_lsn = 0;
        if let Some(lsn) = newest {
            // 2. Load it, verifying every checksum.
            let loaded = snapshot::load(storage.as_ref(), &snapshot::file_name(lsn))?;
            if loaded.lsn != lsn {
                return Err(Error::corruption(
                    snapshot::file_name(lsn),
                    16,
                    format!("header says lsn {} but the file name says {lsn}", loaded.lsn),
                ));
            }
            snapshot_lsn = lsn;
            map = loaded.entries;
        }
        // 3. Replay the WAL after the snapshot; every record is one whole batch.
        let replayed = strata_kit::replay::open_wal(
            storage.clone(),
            wal_options.clone(),
            snapshot_lsn.saturating_add(1),
            &mut |_lsn, batch| {
                for op in batch.into_ops() {
                    map.apply_without_tombstones(op);
                }
                Ok(())
            },
        )?;
        let (wal, report, replayed_bytes) = (replayed.wal, replayed.report, replayed.payload_bytes);
        let inner = Inner {
            storage,
            wal_options,
            // Replay applied every record the log holds.
            applied_lsn: AtomicU64::new(wal.last_lsn()),
            writes: LoggedWrites::new(wal, "memory engine"),
            map: RwLock::new(map),
            snapshot_lock: Mutex::new(()),
            wal_bytes_since_snapshot: AtomicU64::new(replayed_bytes),
            snapshot_min_wal_bytes: config
                .wal_segment_bytes
                .unwrap_or(LARGEST_DEFAULT_WAL_SEGMENT_BYTES)
                .max(64 << 10),
            counters: Counters::default(),
        };
        inner.counters.records_replayed.store(report.records_replayed, Relaxed);
        Ok(MemoryEngine { inner: Arc::new(inner) })
    }

    /// Writes a snapshot now (normally triggered by WAL growth) and truncates the WAL behind it.
    pub fn snapshot(&self) -> Result<()> {
        let _only_one = self.inner.snapshot_lock.lock();
        // Checked under the lock: a close that took it first has closed the log.
        self.inner.writes.check_usable()?;
        self.inner.write_snapshot()
    }
}

impl Inner {
    /// Write path step 5: a snapshot once the WAL since the last one passed the trigger. The
    /// write that triggers it is committed and visible already, so a failed snapshot is not its
    /// failure: it is counted (`snapshots_failed`) and the next one is due after another
    /// trigger's worth of WAL. Nothing is lost: the old snapshot and the whole WAL stay until a
    /// new snapshot is durable.
    fn snapshot_if_due(&self, payload_bytes: u64) {
        let since = self.wal_bytes_since_snapshot.fetch_add(payload_bytes, Relaxed) + payload_bytes;
        // The cheap bound first: most commits stay below it and skip the map's lock.
        if since < self.snapshot_min_wal_bytes || since < self.snapshot_trigger_bytes() {
            return;
        }
        let Some(_only_one) = self.snapshot_lock.try_lock() else { return };
        if self.writes.state().is_closed()
            || self.wal_bytes_since_snapshot.load(Relaxed) < self.snapshot_trigger_bytes()
        {
            return;
        }
        if self.write_snapshot().is_err() {
            self.counters.snapshots_failed.fetch_add(1, Relaxed);
        }
    }

    /// A snapshot pays off once the WAL since the last one is as large as the data itself (bounding
    /// both replay time and the snapshot's write amplification to about 2x).
    fn snapshot_trigger_bytes(&self) -> u64 {
        self.snapshot_min_wal_bytes.max(self.map.read().data_bytes())
    }

    /// Streams `map` (the state after record `lsn`) into `tmp` and syncs it; returns its size.
    fn write_snapshot_file(
        &self,
        map: parking_lot::RwLockReadGuard<'_, MemTable>,
        tmp: &str,
        lsn: u64,
    ) -> Result<u64> {
        let mut writer = snapshot::SnapshotWriter::create(self.storage.as_ref(), tmp, lsn)?;
        // No tombstones: every entry has a value.
        for (k, v) in map.iter() {
            writer.add(k, v.unwrap_or_default())?;
        }
        drop(map);
        writer.finish()
    }

    /// Caller holds `snapshot_lock`.
    fn write_snapshot(&self) -> Result<()> {
        // Under the read lock the map is exactly the state after record `applied_lsn` (later
        // records may be logged, not yet applied: they stay in the WAL for replay).
        let lsn = {
            let map = self.map.read();
            let lsn = self.applied_lsn.load(Acquire);
            let name = snapshot::file_name(lsn);
            let tmp = format!("{name}.tmp");
            // Counted from here, failed or not: a failing snapshot is retried after another
            // trigger's worth of WAL, not at every commit.
            self.wal_bytes_since_snapshot.store(0, Relaxed);
            let written = self.write_snapshot_file(map, &tmp, lsn).and_then(|bytes| {
                self.counters.last_snapshot_bytes.store(bytes, Relaxed);
                self.storage.rename(&tmp, &name)
            });
            if let Err(e) = written {
                // Best effort: a partial file as large as the data set must not hold the disk
                // until the next open (which removes leftovers too).
                let _ = self.storage.remove(&tmp);
                return Err(e);
            }
            lsn
        };
        self.storage.sync_dir()?;
        // The snapshot is durable: older snapshots and the WAL records it covers can go.
        for old in self.storage.list()? {
            if snapshot::parse_file_name(&old).is_some_and(|l| l < lsn) {
                self.storage.remove(&old)?;
            }
        }
        self.storage.sync_dir()?;
        self.writes.wal().truncate_before(lsn + 1)?;
        self.counters.snapshots_written.fetch_add(1, Relaxed);
        Ok(())
    }
}

/// Write path steps 4 and 5 (strata_kit::logged_writes): the apply under the map's write lock,
/// then a snapshot when due.
impl ApplyLogged for Inner {
    /// A run of committed batches, in log order, under one write lock of the map.
    fn apply_run(&self, run: &mut Vec<Logged>) -> Result<()> {
        let mut map = self.map.write();
        for Logged { lsn, batch } in run.drain(..) {
            for op in batch.into_ops() {
                map.apply_without_tombstones(op);
            }
            self.applied_lsn.store(lsn, Release);
        }
        Ok(())
    }

    fn after_apply(&self, sizes: WriteSizes) -> Result<()> {
        self.snapshot_if_due(sizes.payload_bytes);
        Ok(())
    }
}

/// An rmw reads the map: it holds every applied write.
struct MapRead<'a> {
    inner: &'a Inner,
    key: &'a [u8],
}

impl ReadCurrent for MapRead<'_> {
    fn current(&mut self) -> Current {
        Current::Value(self.inner.map.read().get(self.key).flatten().cloned())
    }
}

/// Registers engine `memory` with the facade (`crates/strata/src/registry.rs`).
pub const FACTORY: EngineFactory = EngineFactory {
    name: "memory",
    open: |storage, config| Ok(Box::new(MemoryEngine::open(storage, config)?)),
    file_patterns: &[("wal-", ".log"), ("wal-", ".free"), ("wal-state", ""), ("snapshot-", ".snap")],
};

impl Maintenance for MemoryEngine {
    fn set_option(&self, name: &str, _value: &str) -> Result<()> {
        Err(Error::invalid(format!("engine 'memory' has no runtime option {name:?}")))
    }

    /// `Checkpoint`: a snapshot now, and the WAL behind it truncated.
    fn run(&self, task: MaintenanceTask) -> Result<()> {
        match task {
            MaintenanceTask::Checkpoint => self.snapshot(),
            other => Err(other.not_offered_by("memory")),
        }
    }
}

impl Engine for MemoryEngine {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn limits(&self) -> Limits {
        LIMITS
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            ordered: true,
            // Scans read the map in chunks, each under its own read lock (iter.rs).
            point_in_time_scans: false,
            prefix_consistent_recovery: true,
            columnar: false,
            runtime_options: &[],
            maintenance: &[MaintenanceTask::Checkpoint],
        }
    }

    fn maintenance(&self) -> &dyn Maintenance {
        self
    }

    fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        self.inner.writes.check_usable()?;
        let value = self.inner.map.read().get(key).flatten().cloned();
        if let Some(v) = &value {
            self.inner.counters.user_bytes_read.fetch_add((key.len() + v.len()) as u64, Relaxed);
        }
        Ok(value)
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.inner.writes.write(batch, durability, self.inner.as_ref())
    }

    fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        let inner = self.inner.as_ref();
        inner.writes.rmw(key, &mut MapRead { inner, key }, f, durability, inner)
    }

    fn range(&self, range: KeyRange, direction: Direction) -> Result<KvIter> {
        self.inner.writes.check_usable()?;
        Ok(Box::new(ChunkedRange::new(self.inner.clone(), range, direction, iter::CHUNK_SIZES)))
    }

    fn flush(&self) -> Result<()> {
        self.inner.writes.flush()
    }

    /// Closes the log; a poisoned engine reports its poison: the log did not accept all of its
    /// writes, so the close vouches for nothing.
    fn close(&self) -> Result<()> {
        let writes = &self.inner.writes;
        if !writes.state().mark_closed() {
            return Ok(());
        }
        // A snapshot in progress finishes first: after close returns, the directory (and its
        // lock) may belong to another opener, and the snapshot renames and removes files there.
        let _no_snapshot = self.inner.snapshot_lock.lock();
        let closed = writes.wal().close();
        writes.state().check_not_poisoned()?;
        closed
    }

    fn stats(&self) -> Stats {
        let inner = &self.inner;
        let (live_keys, memory_bytes) = {
            let map = inner.map.read();
            (map.len() as u64, map.memory_bytes())
        };
        let c = &inner.counters;
        Stats {
            engine: "memory".into(),
            live_keys: Some(live_keys),
            user_bytes_written: inner.writes.user_bytes_written(),
            user_bytes_read: c.user_bytes_read.load(Relaxed),
            io: inner.storage.io_stats(),
            cache_hits: 0,
            cache_misses: 0,
            memory_bytes,
            disk_bytes: strata_io::total_file_bytes(inner.storage.as_ref()),
            engine_counters: [
                ("snapshots_written", c.snapshots_written.load(Relaxed)),
                ("snapshots_failed", c.snapshots_failed.load(Relaxed)),
                ("last_snapshot_bytes", c.last_snapshot_bytes.load(Relaxed)),
                ("records_replayed_at_open", c.records_replayed.load(Relaxed)),
                ("wal_bytes_since_snapshot", inner.wal_bytes_since_snapshot.load(Relaxed)),
            ]
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .chain(inner.writes.wal().stats().counters())
            .collect(),
            notices: Vec::new(),
        }
    }

    fn verify(&self) -> Result<VerifyReport> {
        self.inner.writes.check_usable()?;
        let inner = &self.inner;
        // Hold the snapshot lock so no snapshot is renamed or removed under us.
        let _no_snapshot = inner.snapshot_lock.lock();
        let mut report = strata_wal::Wal::verify(inner.storage.as_ref(), &inner.wal_options)?;
        for name in inner.storage.list()? {
            if snapshot::parse_file_name(&name).is_some() {
                let loaded = snapshot::load(inner.storage.as_ref(), &name)?;
                report.files_checked += 1;
                report.bytes_checked += loaded.file_bytes;
                report.records_checked += loaded.entries.len() as u64;
            }
        }
        Ok(report)
    }
}

impl Drop for MemoryEngine {
    fn drop(&mut self) {
        // Iterators still alive after this see `Error::Closed`.
        let _ = self.close();
    }
}
