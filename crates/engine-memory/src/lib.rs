//! Engine `memory`: the whole data set in an ordered in-memory map (the kit's `MemTable`, without
//! tombstones), made durable by the shared WAL and recovered by replay, with compacting snapshots
//! so replay time stays bounded.
//!
//! Write path and recovery path: docs/ARCHITECTURE.md, section "memory".
//! On-disk structures: docs/format/wal.md, docs/format/write-batch.md,
//! docs/format/memory-snapshot.md.

mod iter;
mod snapshot;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_core::batch_codec::encode_batch;
use strata_core::{
    Capabilities, Direction, Durability, Engine, EngineConfig, EngineOptionReader, Error, KeyRange, KvIter,
    Limits, Maintenance, MaintenanceTask, Poison, Result, Stats, Value, VerifyReport, WriteBatch,
};
use strata_io::Storage;
use strata_kit::apply_order::{ApplyOrder, Keys, Ticket, WriteSizes};
use strata_kit::memtable::MemTable;
use strata_kit::EngineFactory;
use strata_wal::{Wal, WalOptions};

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
    wal: Wal,
    /// The live data, applied with `apply_without_tombstones`, only after the write's WAL commit
    /// succeeded and in WAL order (`order`), so a reader never sees a write that may still fail.
    map: RwLock<MemTable>,
    /// Writers append under its log lock; their batches are applied in its order, a run at a
    /// time, after their commit (strata_kit::apply_order).
    order: ApplyOrder<Logged>,
    /// The lsn of the last batch applied to `map`; stored under the map's write lock, so under
    /// its read lock the map is exactly the state after every record up to it (applies follow
    /// the log order, and a failed write stops every later apply).
    applied_lsn: AtomicU64,
    /// Held while a snapshot is being written; `try_lock` so only one writer takes it on.
    snapshot_lock: Mutex<()>,
    /// WAL payload bytes appended since the last snapshot.
    wal_bytes_since_snapshot: AtomicU64,
    /// Minimum WAL growth before a snapshot is considered.
    snapshot_min_wal_bytes: u64,
    closed: AtomicBool,
    /// Set before any write, batch, rmw or flush returns `Err` (issue #19 item 4): the log may
    /// hold records that were never applied (their commit failed, or they follow one that did),
    /// so every later read, write and scan refill refuses with `Poisoned`. A reopen replays what
    /// the log holds.
    poison: Poison,
    counters: Counters,
}

/// A logged batch waiting in the apply order for its commit and its turn.
struct Logged {
    lsn: u64,
    batch: WriteBatch,
}

#[derive(Default)]
struct Counters {
    user_bytes_written: AtomicU64,
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
            segment_bytes: config.wal_segment_bytes,
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
            wal,
            map: RwLock::new(map),
            order: ApplyOrder::new(),
            snapshot_lock: Mutex::new(()),
            wal_bytes_since_snapshot: AtomicU64::new(replayed_bytes),
            snapshot_min_wal_bytes: config.wal_segment_bytes.max(64 << 10),
            closed: AtomicBool::new(false),
            poison: Poison::labelled("memory engine"),
            counters: Counters::default(),
        };
        inner.counters.records_replayed.store(report.records_replayed, Relaxed);
        Ok(MemoryEngine { inner: Arc::new(inner) })
    }

    /// Writes a snapshot now (normally triggered by WAL growth) and truncates the WAL behind it.
    pub fn snapshot(&self) -> Result<()> {
        let _only_one = self.inner.snapshot_lock.lock();
        // Checked under the lock: a close that took it first has closed the log.
        self.inner.ensure_open()?;
        self.inner.write_snapshot()
    }

    /// `rmw`: under the log lock, once no write of `key` is pending, the closure's result is
    /// appended; it is applied after its commit, in log order.
    fn rmw_and_commit(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        let inner = &self.inner;
        let (lsn, ticket, sizes, stored) = loop {
            let log = inner.order.lock_log();
            // A write of the key logged but not applied yet: the map does not show it.
            if let Some(pending) = log.pending_write_of(key) {
                drop(log);
                inner.order.wait_done(pending);
                inner.ensure_open()?;
                continue;
            }
            let new = f(inner.map.read().get(key).flatten().map(Vec::as_slice));
            let batch = WriteBatch::single(key, new.as_deref());
            let payload = encode_batch(&batch);
            let sizes = WriteSizes::of(&batch, &payload);
            let lsn = inner.wal.append(&payload)?;
            break (lsn, log.enqueue(Keys::one(key), lsn, durability, Logged { lsn, batch }), sizes, new);
        };
        inner.commit_then_apply(lsn, ticket, sizes, durability)?;
        Ok(stored)
    }
}

impl Inner {
    /// Not closed and not poisoned: every read and write starts here.
    fn ensure_open(&self) -> Result<()> {
        if self.closed.load(Relaxed) {
            return Err(Error::Closed);
        }
        self.poison.check()
    }

    /// Appends `batch` to the WAL, waits for the requested durability (concurrent writers share
    /// one fsync), then applies it in log order. Any failure poisons the engine before it is
    /// returned: the log may hold the record (or later ones) that was never applied.
    fn commit_batch(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.ensure_open()?;
        self.append_and_commit(batch, durability).map_err(|e| self.poison.poison(e))
    }

    fn append_and_commit(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        let payload = encode_batch(&batch);
        let keys = Keys::of(&batch);
        let sizes = WriteSizes::of(&batch, &payload);
        let (lsn, ticket) = {
            let log = self.order.lock_log();
            let lsn = self.wal.append(&payload)?;
            (lsn, log.enqueue(keys, lsn, durability, Logged { lsn, batch }))
        };
        self.commit_then_apply(lsn, ticket, sizes, durability)
    }

    /// Write path steps 3–5: `Wal::commit`, then the apply in log order (after every earlier
    /// write; by this writer or another, `apply_run`), then a snapshot if one is due. A failed
    /// commit poisons the engine first, then stops the order at this write unless the log had
    /// accepted it already (then it was or is applied like any other).
    fn commit_then_apply(
        &self,
        lsn: u64,
        ticket: Ticket<'_, Logged>,
        sizes: WriteSizes,
        durability: Durability,
    ) -> Result<()> {
        self.counters.user_bytes_written.fetch_add(sizes.user_bytes, Relaxed);
        let mut apply = |run: &mut Vec<Logged>| self.apply_run(run);
        let committed = self
            .wal
            .commit_then(lsn, durability, &mut || self.order.apply_appliable(&self.wal, &mut apply))
            .map_err(|e| self.poison.poison(e));
        ticket.finish(committed, &self.wal, &mut apply)?;
        self.snapshot_if_due(sizes.payload_bytes);
        Ok(())
    }

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
        if self.closed.load(Relaxed)
            || self.wal_bytes_since_snapshot.load(Relaxed) < self.snapshot_trigger_bytes()
        {
            return;
        }
        if self.write_snapshot().is_err() {
            self.counters.snapshots_failed.fetch_add(1, Relaxed);
        }
    }

    /// Write path step 4, by whichever writer applies: a run of committed batches (whose
    /// records the log accepted), in log order, under one write lock of the map. A poisoned
    /// engine applies nothing more.
    fn apply_run(&self, run: &mut Vec<Logged>) -> Result<()> {
        self.poison.check()?;
        let mut map = self.map.write();
        for Logged { lsn, batch } in run.drain(..) {
            for op in batch.into_ops() {
                map.apply_without_tombstones(op);
            }
            self.applied_lsn.store(lsn, Release);
        }
        Ok(())
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
        self.wal.truncate_before(lsn + 1)?;
        self.counters.snapshots_written.fetch_add(1, Relaxed);
        Ok(())
    }
}

/// Registers engine `memory` with the facade (`crates/strata/src/registry.rs`).
pub const FACTORY: EngineFactory = EngineFactory {
    name: "memory",
    open: |storage, config| Ok(Box::new(MemoryEngine::open(storage, config)?)),
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
        self.inner.ensure_open()?;
        let value = self.inner.map.read().get(key).flatten().cloned();
        if let Some(v) = &value {
            self.inner.counters.user_bytes_read.fetch_add((key.len() + v.len()) as u64, Relaxed);
        }
        Ok(value)
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.inner.commit_batch(batch, durability)
    }

    fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        self.inner.ensure_open()?;
        // As in `commit_batch`: after a failure the map may hold the result; hide it.
        self.rmw_and_commit(key, f, durability).map_err(|e| self.inner.poison.poison(e))
    }

    fn range(&self, range: KeyRange, direction: Direction) -> Result<KvIter> {
        self.inner.ensure_open()?;
        Ok(Box::new(iter::ChunkedRange::new(self.inner.clone(), range, direction)))
    }

    fn flush(&self) -> Result<()> {
        self.inner.ensure_open()?;
        self.inner.wal.sync().map(|_| ()).map_err(|e| self.inner.poison.poison(e))
    }

    /// Closes the log; a poisoned engine reports its poison: the log did not accept all of its
    /// writes, so the close vouches for nothing.
    fn close(&self) -> Result<()> {
        if self.inner.closed.swap(true, Relaxed) {
            return Ok(());
        }
        // A snapshot in progress finishes first: after close returns, the directory (and its
        // lock) may belong to another opener, and the snapshot renames and removes files there.
        let _no_snapshot = self.inner.snapshot_lock.lock();
        let closed = self.inner.wal.close();
        self.inner.poison.check()?;
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
            user_bytes_written: c.user_bytes_written.load(Relaxed),
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
            .chain(inner.wal.stats().counters())
            .collect(),
        }
    }

    fn verify(&self) -> Result<VerifyReport> {
        self.inner.ensure_open()?;
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
