//! The write path: WAL append under the apply order's log lock, commit with no lock held, then
//! (in log order, after the commit succeeded) the cache apply under the cache lock, then the
//! write-back worker's trigger (eviction.rs).

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU64, AtomicU8};

use strata_core::batch_codec::encode_batch;
use strata_core::{BatchOp, Durability, Result, Value, WriteBatch};
use strata_kit::apply_order::{ApplyOrder, Keys, Ticket, WriteSizes};

use super::eviction::CachePressure;
use super::{Counters, Store};
use crate::record_cache::RecordCache;

/// Applies a batch's ops to the cache as dirty records of `lsn` (the last op on a key wins).
fn apply_to_cache(cache: &mut RecordCache, batch: WriteBatch, lsn: u64) {
    for op in batch.into_ops() {
        match op {
            BatchOp::Put { key, value } => cache.put_dirty(key, Some(value), lsn),
            BatchOp::Delete { key } => cache.put_dirty(key, None, lsn),
        }
    }
}

/// A logged batch waiting in the apply order for its commit and its turn.
pub(crate) struct Logged {
    lsn: u64,
    batch: WriteBatch,
}

/// The order writes reach the record cache in: their log order, each after its commit
/// (`strata_kit::apply_order`, issue #19 item 4), a run of them per cache lock.
pub(crate) struct WriteOrder {
    order: ApplyOrder<Logged>,
    /// The lsn of the last batch applied to the cache; stored under the cache lock, so under
    /// that lock every batch up to it is in the cache (applies follow the log order, and a
    /// failed write stops every later apply). Later records may be logged and not applied yet.
    applied_lsn: AtomicU64,
    /// The cache's pressure after the last run (`PRESSURE_*` bits), measured by its applier
    /// under the cache lock and read by each writer of the run.
    pressure_after_run: AtomicU8,
}

const PRESSURE_OVER_CAPACITY: u8 = 1;
const PRESSURE_OVER_HARD_LIMIT: u8 = 2;

impl WriteOrder {
    /// After recovery, which applied every record `last_lsn` accounts for.
    pub(crate) fn after_replay(last_lsn: u64) -> WriteOrder {
        WriteOrder {
            order: ApplyOrder::new(),
            applied_lsn: AtomicU64::new(last_lsn),
            pressure_after_run: AtomicU8::new(0),
        }
    }

    /// Read it under the cache lock (the checkpoint's cut).
    pub(crate) fn applied_lsn(&self) -> u64 {
        self.applied_lsn.load(Acquire)
    }

    fn pressure_after_run(&self) -> CachePressure {
        let bits = self.pressure_after_run.load(Relaxed);
        CachePressure {
            over_capacity: bits & PRESSURE_OVER_CAPACITY != 0,
            over_hard_limit: bits & PRESSURE_OVER_HARD_LIMIT != 0,
        }
    }
}

impl Store {
    /// Step 1, appending the batch to the WAL under the log lock (ticket order = lsn order);
    /// steps 2–5 in `commit_then_apply`. Any failure from the append on poisons the store before it is
    /// returned (issue #19 item 4): the log may hold the record (and later ones) that the cache
    /// will never hold, and a failed group commit fails other writers' batches too; every read
    /// checks the poison (`check_usable`, also before each scan chunk). The cache holds a batch
    /// only once its commit succeeded, so no reader sees a write that may still fail.
    pub fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.check_usable()?;
        let payload = encode_batch(&batch);
        let keys = Keys::of(&batch);
        let sizes = WriteSizes::of(&batch, &payload);
        let (lsn, ticket) = {
            let log = self.writes.order.lock_log();
            let lsn = self.wal.append(&payload).map_err(|e| self.poison.poison(e))?;
            (lsn, log.enqueue(keys, lsn, durability, Logged { lsn, batch }))
        };
        self.commit_then_apply(lsn, ticket, sizes, durability).map_err(|e| self.poison.poison(e))
    }

    /// Atomic read-modify-write: under the log lock, once no write of `key` is logged and not
    /// yet applied (else wait for it), the current value comes from the cache, or from the pages
    /// when no write-back ran during the page read (else it may be stale and the read is
    /// retried); `f`'s result is appended under that lock and applied after its commit.
    pub fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        self.check_usable()?;
        let mut from_pages: Option<(u64, Option<Value>)> = None;
        loop {
            let log = self.writes.order.lock_log();
            if let Some(pending) = log.pending_write_of(key) {
                drop(log);
                self.writes.order.wait_done(pending);
                self.check_usable()?;
                continue;
            }
            let current = {
                let mut cache = self.cache.lock();
                match (cache.get(key), from_pages.take()) {
                    (Some(cached), _) => Some(cached),
                    (None, Some((epoch, value))) if self.page_write_epoch.load(Acquire) == epoch => {
                        Some(value)
                    }
                    (None, _) => None,
                }
            };
            let Some(current) = current else {
                drop(log);
                let epoch = self.page_write_epoch.load(Acquire);
                from_pages = Some((epoch, self.read_from_pages(key)?));
                continue;
            };
            let new = f(current.as_deref());
            let batch = WriteBatch::single(key, new.as_deref());
            let payload = encode_batch(&batch);
            let sizes = WriteSizes::of(&batch, &payload);
            let lsn = self.wal.append(&payload).map_err(|e| self.poison.poison(e))?;
            let ticket = log.enqueue(Keys::one(key), lsn, durability, Logged { lsn, batch });
            drop(log);
            self.commit_then_apply(lsn, ticket, sizes, durability).map_err(|e| self.poison.poison(e))?;
            return Ok(new);
        }
    }

    /// Steps 2–5 of the write path: commit at the requested durability (group commit, no lock
    /// held); in log order, apply to the cache as dirty records of `lsn` (`apply_run`, by this
    /// writer or another); then wake the write-back worker when the cache is over capacity or a
    /// checkpoint is due, and wait for it while the cache is far over (eviction.rs). A failed
    /// commit poisons the store first, then stops the order at this write unless the log had
    /// accepted it already (then it was or is applied like any other).
    fn commit_then_apply(
        &self,
        lsn: u64,
        ticket: Ticket<'_, Logged>,
        sizes: WriteSizes,
        durability: Durability,
    ) -> Result<()> {
        Counters::add(&self.counters.user_bytes_written, sizes.user_bytes);
        let mut apply = |run: &mut Vec<Logged>| self.apply_run(run);
        let committed = self
            .wal
            .commit_then(lsn, durability, &mut || self.writes.order.apply_appliable(&self.wal, &mut apply))
            .map_err(|e| self.poison.poison(e));
        ticket.finish(committed, &self.wal, &mut apply)?;
        self.wal_bytes_since_checkpoint.fetch_add(sizes.payload_bytes, Relaxed);
        self.make_room_after_write(self.writes.pressure_after_run())
    }

    /// Write path step 3: a run of committed batches (whose records the log accepted), in log
    /// order, under one cache lock, each op a dirty record of its batch's lsn; then the cache's
    /// pressure, measured under that lock for the run's writers. A poisoned store applies
    /// nothing more.
    fn apply_run(&self, run: &mut Vec<Logged>) -> Result<()> {
        self.poison.check()?;
        let mut cache = self.cache.lock();
        for Logged { lsn, batch } in run.drain(..) {
            apply_to_cache(&mut cache, batch, lsn);
            self.writes.applied_lsn.store(lsn, Release);
        }
        let pressure = self.pressure_of(&mut cache);
        let bits = u8::from(pressure.over_capacity) * PRESSURE_OVER_CAPACITY
            + u8::from(pressure.over_hard_limit) * PRESSURE_OVER_HARD_LIMIT;
        self.writes.pressure_after_run.store(bits, Relaxed);
        Ok(())
    }
}
