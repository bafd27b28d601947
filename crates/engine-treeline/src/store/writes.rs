//! The write path: WAL append + cache apply under the cache lock, commit outside it, then the
//! write-back worker's trigger (eviction.rs).

use std::sync::atomic::Ordering::{Acquire, Relaxed};

use strata_core::batch_codec::encode_batch;
use strata_core::{BatchOp, Durability, Result, Value, WriteBatch};

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

impl Store {
    /// 1–2: append the batch to the WAL and apply it to the record cache under the cache lock
    /// (WAL order is apply order; a failed append leaves the cache untouched); 3–5 in
    /// `after_write`. Any failure from the append on poisons the store before it is returned
    /// (issue #19 item 4): the batch is dirty in the cache and not undone, a failed group commit
    /// fails other writers' batches too, and every read checks the poison (`check_usable`, also
    /// before each scan chunk), so no reader sees a write that returned `Err`.
    pub fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.check_usable()?;
        let payload = encode_batch(&batch);
        let user_bytes = batch.payload_bytes() as u64;
        let (lsn, pressure) = {
            let mut cache = self.cache.lock();
            let lsn = self.wal.append(&payload).map_err(|e| self.poison.poison(e))?;
            apply_to_cache(&mut cache, batch, lsn);
            (lsn, self.pressure_of(&mut cache))
        };
        self.after_write(lsn, payload.len() as u64, user_bytes, durability, pressure)
            .map_err(|e| self.poison.poison(e))
    }

    /// Atomic read-modify-write: the current value comes from the cache, or from the pages when
    /// no write-back ran during the page read (else it may be stale and the read is retried);
    /// `f` runs, and its result is appended and applied, under the cache lock.
    pub fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        self.check_usable()?;
        let mut from_pages: Option<(u64, Option<Value>)> = None;
        loop {
            let mut cache = self.cache.lock();
            let current = match cache.get(key) {
                Some(cached) => cached,
                None => match from_pages.take() {
                    Some((epoch, value)) if self.page_write_epoch.load(Acquire) == epoch => value,
                    _ => {
                        drop(cache);
                        let epoch = self.page_write_epoch.load(Acquire);
                        from_pages = Some((epoch, self.read_from_pages(key)?));
                        continue;
                    }
                },
            };
            let new = f(current.as_deref());
            let batch = WriteBatch::single(key, new.as_deref());
            let payload = encode_batch(&batch);
            let user_bytes = batch.payload_bytes() as u64;
            let lsn = self.wal.append(&payload).map_err(|e| self.poison.poison(e))?;
            apply_to_cache(&mut cache, batch, lsn);
            let pressure = self.pressure_of(&mut cache);
            drop(cache);
            self.after_write(lsn, payload.len() as u64, user_bytes, durability, pressure)
                .map_err(|e| self.poison.poison(e))?;
            return Ok(new);
        }
    }

    /// Steps 3–5 of the write path: commit at the requested durability (group commit, outside
    /// the lock); wake the write-back worker when the cache is over capacity or a checkpoint is
    /// due, and wait for it while the cache is far over (eviction.rs).
    fn after_write(
        &self,
        lsn: u64,
        payload_bytes: u64,
        user_bytes: u64,
        durability: Durability,
        pressure: CachePressure,
    ) -> Result<()> {
        Counters::add(&self.counters.user_bytes_written, user_bytes);
        self.wal.commit(lsn, durability)?;
        self.wal_bytes_since_checkpoint.fetch_add(payload_bytes, Relaxed);
        self.make_room_after_write(pressure)
    }
}
