//! Checkpoints (the logs' durable ranges plus the WAL position they cover), each followed by a
//! hot-index snapshot so that opening after a crash loads the index instead of scanning the hot
//! log. Caller holds the maintenance lock.

use std::sync::atomic::Ordering::Relaxed;

use strata_core::Result;

use super::Inner;
use crate::checkpoint::{Checkpoint, CHECKPOINT_BYTES};
use crate::hot_snapshot;
use crate::index::hot::HotIndex;
use crate::log::io_cause::IoCause;
use crate::log::{FIRST_ADDRESS, READ_CACHE_FLAG};

impl Inner {
    /// Takes a checkpoint: seals the hot log at the tail (under the write lock, together with the
    /// WAL position), writes and fsyncs every log up to its tail, durably replaces the checkpoint
    /// file, deletes segments below the new begins and truncates the WAL. Caller holds the
    /// maintenance lock. Refused on a poisoned engine, at the cut and again before the
    /// checkpoint file is stored: a failed hot-log write or fsync leaves state (a batch half
    /// applied, pages a failed fsync marked clean but never wrote) that no checkpoint may name.
    pub fn checkpoint_locked(&self) -> Result<()> {
        let _cause = IoCause::Checkpoint.enter();
        let (wal_lsn, hot_tail) = self.seal_for_checkpoint()?;
        self.wal_bytes_since_checkpoint.store(0, Relaxed);
        self.hot.flush_until(hot_tail)?;
        self.cold.flush()?;
        self.cold_index.log.flush()?;
        for file in [&self.hot.file, &self.cold.file, &self.cold_index.log.file] {
            file.sync_all()?;
        }
        self.storage.sync_dir()?;
        let ck = Checkpoint {
            wal_lsn,
            page_size_bytes: self.opts.page_size_bytes,
            segment_bytes: self.opts.segment_bytes,
            chunk_count: self.opts.chunk_count,
            hot_begin: self.hot.begin(),
            hot_tail,
            cold_begin: self.cold.begin(),
            cold_tail: self.cold.tail(),
            chunk_begin: self.cold_index.log.begin(),
            chunk_tail: self.cold_index.log.tail(),
            cold_truncations: self.cold.truncations(),
            // Set only under the maintenance lock, like the cold range above, so it describes it.
            cold_live_estimate_bytes: self.cold_live_estimate_bytes.load(Relaxed),
        };
        self.state.check_not_poisoned()?;
        ck.store(self.storage.as_ref())?;
        self.counters.checkpoint_file_bytes_written.fetch_add(CHECKPOINT_BYTES as u64, Relaxed);
        *self.last_checkpoint.lock() = ck;
        self.last_checkpoint_begins_sum.store(ck.begins_sum(), Relaxed);
        for (file, begin) in [
            (&self.hot.file, ck.hot_begin),
            (&self.cold.file, ck.cold_begin),
            (&self.cold_index.log.file, ck.chunk_begin),
        ] {
            file.release_below(begin)?;
        }
        self.storage.sync_dir()?;
        self.wal.truncate_before(wal_lsn + 1)?;
        self.counters.checkpoints.fetch_add(1, Relaxed);
        // After the checkpoint is durable: a crash before the snapshot is in place leaves the
        // previous one, which does not match this checkpoint, so the next open scans the hot
        // log instead.
        if self.write_hot_index_snapshot().is_err() {
            self.counters.hot_index_snapshot_failures.fetch_add(1, Relaxed);
            // Best effort: a leftover file would not match the new checkpoint anyway.
            let _ = self.storage.remove(hot_snapshot::FILE_NAME);
        }
        Ok(())
    }

    /// Writes `f2-hot-index` for the last checkpoint (after every checkpoint; caller holds the
    /// maintenance lock, so compaction cannot move the hot log's begin or clear entries
    /// meanwhile). Each entry is the chain head as of the checkpoint's hot tail `T`: a read-cache
    /// copy is skipped, records at or above `T` (written concurrently) are walked past, and
    /// chains wholly below the hot log's begin are left out. Writers keep running: every entry
    /// whose chain reaches below `T` was published before the checkpoint's cut (which excludes
    /// writers), and entries created later hold only records at or above `T`.
    pub fn write_hot_index_snapshot(&self) -> Result<()> {
        let ck = *self.last_checkpoint.lock();
        let key = hot_snapshot::SnapshotKey {
            wal_lsn: ck.wal_lsn,
            hot_begin: ck.hot_begin,
            hot_tail: ck.hot_tail,
            bucket_count: self.hot_index.bucket_count(),
        };
        let mut writer = hot_snapshot::Writer::create(self.storage.as_ref())?;
        let mut failed = None;
        self.hot_index.for_each_entry(|bucket, tag, address| {
            if failed.is_some() {
                return;
            }
            let head = self.snapshot_head(HotIndex::hash_for(bucket, tag), address, ck.hot_tail);
            let pushed = match head {
                Ok(Some(a)) if a >= ck.hot_begin.max(FIRST_ADDRESS) => writer.push(bucket, tag, a),
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(e) = pushed {
                failed = Some(e);
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let entries = writer.finish(self.storage.as_ref(), &key)?;
        self.counters.checkpoint_file_bytes_written.fetch_add(hot_snapshot::file_bytes(entries), Relaxed);
        Ok(())
    }

    /// The newest hot-log address below `tail` on the chain whose entry holds `address`.
    fn snapshot_head(&self, hash: u64, address: u64, tail: u64) -> Result<Option<u64>> {
        let mut address = address;
        if address & READ_CACHE_FLAG != 0 {
            let Some(head) = self.chain_head(hash) else { return Ok(None) };
            address = head.hot_address;
        }
        while address >= tail {
            let Some(rec) = self.hot.read(address)? else { return Ok(None) };
            if rec.prev_address >= address {
                return Ok(None);
            }
            address = rec.prev_address;
        }
        Ok(Some(address))
    }
}

#[cfg(test)]
mod tests {
    use strata_core::{Durability, Engine, Error};

    use crate::checkpoint::FILE_NAME;
    use crate::engine::test_engines::{manual_options, open_in_memory};

    /// A poisoned engine stores no checkpoint, even for a caller that passed the poison check
    /// before it waited for the maintenance lock (`checkpoint`, `compact_now`, `close` beside a
    /// failing one) or the worker after a failure in the middle of its round: the checkpoint
    /// would cover what the failure left, a batch half-applied by a failed hot-log write or
    /// hot-log pages a failed fsync marked clean without writing (the failed flush had already
    /// moved past them).
    #[test]
    fn a_poisoned_engine_stores_no_checkpoint() {
        let engine = open_in_memory(manual_options());
        for i in 0..200u32 {
            engine.put(format!("k{i}").as_bytes(), &[7; 64], Durability::Buffered).unwrap();
        }
        let inner = engine.inner.clone();
        let _only_one = inner.maintenance.lock();
        inner.checkpoint_locked().unwrap();
        let stored = || {
            strata_io::read_all(
                inner.storage.open(FILE_NAME, strata_io::OpenOptions::existing()).unwrap().as_ref(),
            )
            .unwrap()
        };
        let before = stored();
        engine.put(b"after", b"v", Durability::Buffered).unwrap();
        inner.poisoned(Error::io("a failed hot-log write", std::io::Error::other("injected")));
        assert!(matches!(inner.checkpoint_locked(), Err(Error::Poisoned(_))));
        assert_eq!(stored(), before, "a checkpoint was stored on a poisoned engine");
    }
}
