//! The write path: the kit's logged writes (`strata_kit::logged_writes`: WAL append under the
//! log lock, commit with no lock held, then the apply in log order after the commit succeeded)
//! with treeline's apply step — dirty records in the record cache under the cache lock — and
//! its follow-up: the write-back worker's trigger (eviction.rs).

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU64, AtomicU8};

use strata_core::{BatchOp, Durability, Result, Value, WriteBatch};
use strata_kit::logged_writes::{ApplyLogged, Current, Logged, ReadCurrent, WriteSizes};

use super::eviction::CachePressure;
use super::Store;
use crate::sharded_cache::ShardedCache;

/// Applies a batch's ops to the cache as dirty records of `lsn` (the last op on a key wins).
///
/// Only that last op reaches the cache: each op takes its shard's lock on its own, and a
/// write-back running between two ops of one batch on one key would write the first op's value
/// and then mark the key clean by its lsn, which the second op shares — the second value lost
/// (the kit's fault checks found it: an older value after a clean close).
fn apply_to_cache(cache: &ShardedCache, batch: WriteBatch, lsn: u64) {
    for op in last_op_per_key(batch.into_ops()) {
        match op {
            BatchOp::Put { key, value } => cache.put_dirty(key, Some(value), lsn),
            BatchOp::Delete { key } => cache.put_dirty(key, None, lsn),
        }
    }
}

/// `ops` without those a later op on the same key overrides, in their order.
fn last_op_per_key(mut ops: Vec<BatchOp>) -> Vec<BatchOp> {
    if ops.len() < 2 {
        return ops;
    }
    let key_of = |op: &BatchOp| match op {
        BatchOp::Put { key, .. } | BatchOp::Delete { key } => key.clone(),
    };
    let mut seen = std::collections::HashSet::with_capacity(ops.len());
    let mut kept: Vec<BatchOp> = Vec::with_capacity(ops.len());
    while let Some(op) = ops.pop() {
        if seen.insert(key_of(&op)) {
            kept.push(op);
        }
    }
    kept.reverse();
    kept
}

/// How far writes reached the record cache, and what its last run found.
pub(crate) struct AppliedWrites {
    /// The lsn of the last batch applied to the cache, stored (release) after its ops are in
    /// the cache: whoever loads it sees every batch up to it there (applies follow the log
    /// order, and a failed write stops every later apply). Later records may be logged and not
    /// applied yet.
    lsn: AtomicU64,
    /// The cache's pressure after the last run (`PRESSURE_*` bits), measured by its applier
    /// and read by each writer of the run.
    pressure_after_run: AtomicU8,
}

const PRESSURE_OVER_CAPACITY: u8 = 1;
const PRESSURE_OVER_HARD_LIMIT: u8 = 2;

impl AppliedWrites {
    /// After recovery, which applied every record `last_lsn` accounts for.
    pub(crate) fn after_replay(last_lsn: u64) -> AppliedWrites {
        AppliedWrites { lsn: AtomicU64::new(last_lsn), pressure_after_run: AtomicU8::new(0) }
    }

    /// The checkpoint's cut.
    pub(crate) fn lsn(&self) -> u64 {
        self.lsn.load(Acquire)
    }

    fn pressure_after_run(&self) -> CachePressure {
        let bits = self.pressure_after_run.load(Relaxed);
        CachePressure {
            over_capacity: bits & PRESSURE_OVER_CAPACITY != 0,
            over_hard_limit: bits & PRESSURE_OVER_HARD_LIMIT != 0,
        }
    }
}

/// How an rmw reads its key: from the cache, else from the pages, read with no lock held and
/// taken only when no write-back ran during the page read (else it may be stale: read again).
struct CacheOrPagesRead<'a> {
    store: &'a Store,
    key: &'a [u8],
    /// The cache missed: `prepare` reads the pages.
    needs_pages: bool,
    /// The page write epoch before the page read, and what it read.
    from_pages: Option<(u64, Option<Value>)>,
}

impl ReadCurrent for CacheOrPagesRead<'_> {
    fn prepare(&mut self) -> Result<()> {
        if std::mem::take(&mut self.needs_pages) {
            let epoch = self.store.page_write_epoch.load(Acquire);
            self.from_pages = Some((epoch, self.store.read_from_pages(self.key)?));
        }
        Ok(())
    }

    fn current(&mut self) -> Current {
        // The epoch is loaded after the shard lock was released: a write-back that marked the
        // key clean (and so could have let it be evicted) bumped it before.
        match (self.store.cache.get(self.key), self.from_pages.take()) {
            (Some(cached), _) => Current::Value(cached),
            (None, Some((epoch, value))) if self.store.page_write_epoch.load(Acquire) == epoch => {
                Current::Value(value)
            }
            (None, _) => {
                self.needs_pages = true;
                Current::Stale
            }
        }
    }
}

impl Store {
    /// The write path (`strata_kit::logged_writes`): the cache holds a batch only once its
    /// commit succeeded, so no reader sees a write that may still fail; any failure from the
    /// append on poisons the store before it is returned.
    pub fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.writes.write(batch, durability, self)
    }

    /// Atomic read-modify-write; `f` sees every write logged before it (`CacheOrPagesRead`
    /// says how the value is read).
    pub fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        let mut read = CacheOrPagesRead { store: self, key, needs_pages: false, from_pages: None };
        self.writes.rmw(key, &mut read, f, durability, self)
    }
}

/// Write path steps 3 and 4 (docs/ARCHITECTURE.md, treeline).
impl ApplyLogged for Store {
    /// A run of committed batches, in log order, each op a dirty record of its batch's lsn in
    /// its key's shard, behind the batch gate when a batch has several ops (no scan sees half
    /// of one); then the cache's pressure, for the run's writers.
    fn apply_run(&self, run: &mut Vec<Logged>) -> Result<()> {
        let multi_op = run.iter().any(|l| l.batch.len() > 1);
        let gate = multi_op.then(|| self.cache.gate_batches());
        for Logged { lsn, batch } in run.drain(..) {
            apply_to_cache(&self.cache, batch, lsn);
            self.applied.lsn.store(lsn, Release);
        }
        drop(gate);
        let pressure = self.cache_pressure();
        let bits = u8::from(pressure.over_capacity) * PRESSURE_OVER_CAPACITY
            + u8::from(pressure.over_hard_limit) * PRESSURE_OVER_HARD_LIMIT;
        self.applied.pressure_after_run.store(bits, Relaxed);
        Ok(())
    }

    /// Wakes the write-back worker when the cache is over capacity or a checkpoint is due, and
    /// waits for it while the cache is far over (eviction.rs).
    fn after_apply(&self, sizes: WriteSizes) -> Result<()> {
        self.wal_bytes_since_checkpoint.fetch_add(sizes.payload_bytes, Relaxed);
        self.make_room_after_write(self.applied.pressure_after_run())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, value: &str) -> BatchOp {
        BatchOp::Put { key: key.as_bytes().to_vec(), value: value.as_bytes().to_vec() }
    }

    /// Regression (kit fault checks, seed 1029887700372295563): a batch putting one key twice
    /// reached the sharded cache op by op, and a write-back between the two ops lost the second.
    #[test]
    fn a_batch_reaches_the_cache_as_its_last_op_per_key() {
        let ops = vec![
            put("a", "1"),
            put("b", "1"),
            BatchOp::Delete { key: b"a".to_vec() },
            put("c", "1"),
            put("a", "2"),
        ];
        assert_eq!(last_op_per_key(ops), vec![put("b", "1"), put("c", "1"), put("a", "2")]);
        assert_eq!(last_op_per_key(vec![put("x", "1")]), vec![put("x", "1")]);
    }
}
