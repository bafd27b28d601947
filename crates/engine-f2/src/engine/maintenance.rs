//! Maintenance (one task at a time, under the maintenance lock; run by the background worker, or
//! inline by the writer that crosses a threshold when `F2Options::background_maintenance` is
//! off): lookup-based hot→cold and cold→cold compaction (F2 §5.2), chunk-log garbage
//! collection, checkpoints; plus `verify` and the unordered full scan.

use std::collections::HashSet;
use std::sync::atomic::Ordering::Relaxed;

use strata_core::{Error, Key, Result, VerifyReport};

use super::Inner;
use crate::checkpoint::{Checkpoint, CHECKPOINT_BYTES};
use crate::hash::key_hash;
use crate::hot_snapshot;
use crate::index::cold::ChunkBatch;
use crate::index::hot::HotIndex;
use crate::log::{scan_range, SegmentedFile, FIRST_ADDRESS, READ_CACHE_FLAG};
use crate::record::{self, OwnedRecord};

/// A record of the page a compaction step works on: where it is, its key's hash, its bytes.
struct StepRecord {
    address: u64,
    hash: u64,
    rec: OwnedRecord,
}

impl Inner {
    /// The end of the compaction step starting at `at`: the next page boundary, or `until`.
    fn page_step_end(&self, at: u64, until: u64) -> u64 {
        let page = self.opts.page_size_bytes;
        (at - at % page + page).min(until)
    }

    /// After a write: signals the worker if maintenance is due and applies backpressure (with
    /// background maintenance); or runs what is due inline, unless another thread already is.
    pub fn maybe_maintain(&self) -> Result<()> {
        let due = self.hot.size_bytes() > self.opts.hot_trigger_bytes
            || self.cold.size_bytes() > self.opts.cold_trigger_bytes
            || self.wal_bytes_since_checkpoint.load(Relaxed) >= self.opts.checkpoint_wal_bytes;
        if !due {
            return Ok(());
        }
        if self.opts.background_maintenance {
            self.worker.request();
            return self.wait_for_hot_room();
        }
        let Some(_only_one) = self.maintenance.try_lock() else { return Ok(()) };
        self.ensure_usable()?;
        self.maintain_locked().map_err(|e| self.poisoned(e))
    }

    /// Caller holds the maintenance lock.
    pub fn maintain_locked(&self) -> Result<()> {
        let c = &self.counters;
        if self.hot.size_bytes() > self.opts.hot_trigger_bytes {
            timed(&c.hot_round_max_us, || self.compact_hot())?;
        }
        if self.cold.size_bytes() > self.opts.cold_trigger_bytes {
            timed(&c.cold_round_max_us, || self.compact_cold())?;
        }
        let copied =
            timed(&c.chunk_gc_max_us, || self.cold_index.collect_garbage(2 * self.opts.page_size_bytes))?;
        c.chunks_collected.fetch_add(copied, Relaxed);
        if self.wal_bytes_since_checkpoint.load(Relaxed) >= self.opts.checkpoint_wal_bytes {
            timed(&c.checkpoint_max_us, || self.checkpoint_locked())?;
        }
        Ok(())
    }

    /// The oldest `compaction_fraction` of a log, cut at a page boundary and not past `limit`.
    fn compaction_until(&self, begin: u64, size: u64, limit: u64) -> u64 {
        let page = self.opts.page_size_bytes;
        let want = begin + ((size as f64 * self.opts.compaction_fraction) as u64).max(page);
        let until = want.min(limit);
        until - until % page
    }

    /// Hot→cold compaction: every record in the oldest part of the hot log that is still the
    /// newest of its key in the hot log (ConditionalInsert's lookup) is upserted into the cold
    /// log; then the hot log is truncated and index entries below the new begin are cleared.
    /// Only the immutable region is compacted, so write-hot records in the mutable region never
    /// move (no FASTER death spiral). With `F2Options::single_log` the live records are copied to
    /// the hot log's tail instead (FASTER, for comparison): those copies push the mutable region,
    /// write-hot records included, out of memory.
    ///
    /// The range is processed a page at a time and the hot log truncated after each page, so
    /// writers held back by the hot log's disk budget resume after one page, not a whole round.
    /// (Index entries left pointing below `begin` read as "not in the hot log"; they are cleared
    /// once per round.) A round stops early if the engine is closing.
    pub fn compact_hot(&self) -> Result<u64> {
        let begin = self.hot.begin();
        let until = self.compaction_until(begin, self.hot.size_bytes(), self.hot.read_only());
        if until <= begin {
            return Ok(0);
        }
        let mut copied = 0;
        let mut step_begin = begin;
        while step_begin < until {
            let step_end = self.page_step_end(step_begin, until);
            // The step's live records first, then their chunks read in one parallel batch, then
            // the appends (a record superseded meanwhile is still copied: the hot log's newer
            // record shadows the cold copy, as when the check races a writer).
            let mut live: Vec<StepRecord> = Vec::new();
            self.hot.scan(step_begin, step_end, &mut |address, view| {
                let hash = key_hash(view.key);
                if !self.hot_has_newer(view.key, hash, address)? {
                    live.push(StepRecord { address, hash, rec: OwnedRecord::from_view(&view) });
                }
                Ok(())
            })?;
            if self.opts.single_log {
                for r in &live {
                    copied +=
                        u64::from(self.copy_to_hot_tail(&r.rec.key, r.rec.value_opt(), r.hash, r.address)?);
                }
            } else {
                let mut batch = self.cold_index.read_batch(live.iter().map(|r| r.hash))?;
                for r in &live {
                    self.cold_append_in(&mut batch, &r.rec.key, r.rec.value_opt(), r.hash)?;
                    copied += 1;
                }
            }
            match &self.read_cache {
                Some(cache) => cache.exclusive(|| self.hot.truncate(step_end)),
                None => self.hot.truncate(step_end),
            }
            self.worker.notify_progress();
            step_begin = step_end;
            if self.opts.background_maintenance && !self.worker_may_continue() {
                break;
            }
        }
        self.hot_index.invalidate_below(step_begin);
        self.counters.hot_compactions.fetch_add(1, Relaxed);
        let target = if self.opts.single_log {
            &self.counters.hot_records_to_hot_tail
        } else {
            &self.counters.hot_records_to_cold
        };
        target.fetch_add(copied, Relaxed);
        Ok(copied)
    }

    /// Single-log mode (`F2Options::single_log`, FASTER's design): ConditionalInsert of the
    /// record of `key` at `address` into the hot log's own tail. Under the write lock (appends
    /// to the hot log are serialised by it) the liveness check is repeated, since a writer may
    /// have published a newer record since the caller's check; that repeat costs no reads in
    /// the usual case (the chain head is `address` itself). A tombstone is dropped when the
    /// cold log is empty: every older record of its key is below `address`, so in the part
    /// being truncated. Returns whether the record was copied.
    fn copy_to_hot_tail(&self, key: &[u8], value: Option<&[u8]>, hash: u64, address: u64) -> Result<bool> {
        if value.is_none() && self.cold.size_bytes() == 0 {
            return Ok(false);
        }
        let _w = self.write_lock.lock();
        if self.hot_has_newer(key, hash, address)? {
            return Ok(false);
        }
        super::ops::apply_op(&self.hot, &self.hot_index, self.read_cache.as_ref(), key, value, None)?;
        let bytes = record::stored_len(key.len(), value.map_or(0, <[u8]>::len));
        self.counters.compaction_bytes_written.fetch_add(bytes as u64, Relaxed);
        Ok(true)
    }

    /// Cold→cold compaction: live records of the oldest part of the cold log are copied to its
    /// tail (ConditionalInsert with the cold log as source and target), then the log is truncated.
    /// Tombstones are dropped: every older record of their key is in the truncated part too.
    pub fn compact_cold(&self) -> Result<u64> {
        let begin = self.cold.begin();
        let tail = self.cold.tail();
        let until =
            self.compaction_until(begin, self.cold.size_bytes(), tail - tail % self.opts.page_size_bytes);
        if until <= begin {
            return Ok(0);
        }
        let mut copied = 0;
        let mut step_begin = begin;
        while step_begin < until {
            // A page of records, their chunks read in one parallel batch, then the liveness check
            // and the copy of each in log order (the batch follows the copies).
            let step_end = self.page_step_end(step_begin, until);
            let mut records: Vec<StepRecord> = Vec::new();
            self.cold.scan(step_begin, step_end, &mut |address, view| {
                if !view.is_tombstone() {
                    let hash = key_hash(view.key);
                    records.push(StepRecord { address, hash, rec: OwnedRecord::from_view(&view) });
                }
                Ok(())
            })?;
            let mut batch = self.cold_index.read_batch(records.iter().map(|r| r.hash))?;
            for r in &records {
                if !self.cold_has_newer_in(&batch, &r.rec.key, r.hash, r.address)? {
                    self.cold_append_in(&mut batch, &r.rec.key, r.rec.value_opt(), r.hash)?;
                    copied += 1;
                }
            }
            step_begin = step_end;
        }
        self.cold.truncate(until);
        self.counters.cold_compactions.fetch_add(1, Relaxed);
        self.counters.cold_records_copied.fetch_add(copied, Relaxed);
        Ok(copied)
    }

    /// Appends a record to the cold log and points its cold-index entry at it, with the chunk
    /// taken from (and kept current in) `batch`. Caller holds the maintenance lock (the cold log
    /// has a single writer).
    fn cold_append_in(
        &self,
        batch: &mut ChunkBatch,
        key: &[u8],
        value: Option<&[u8]>,
        hash: u64,
    ) -> Result<()> {
        let placement = self.cold_index.place_in(batch, hash, self.cold.begin())?;
        let bytes = record::encode(key, value, placement.prev_address);
        self.counters.compaction_bytes_written.fetch_add(bytes.len() as u64, Relaxed);
        let address = self.cold.append(&bytes)?;
        self.cold_index.commit_in(batch, placement, address)
    }

    /// Takes a checkpoint: seals the hot log at the tail (under the write lock, together with the
    /// WAL position), writes and fsyncs every log up to its tail, durably replaces the checkpoint
    /// file, deletes segments below the new begins and truncates the WAL. Caller holds the
    /// maintenance lock.
    pub fn checkpoint_locked(&self) -> Result<()> {
        let (wal_lsn, hot_tail) = {
            let _w = self.write_lock.lock();
            (self.wal.last_lsn(), self.hot.seal_to_tail())
        };
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
        };
        ck.store(self.storage.as_ref())?;
        *self.last_checkpoint.lock() = ck;
        for (file, begin) in [
            (&self.hot.file, ck.hot_begin),
            (&self.cold.file, ck.cold_begin),
            (&self.cold_index.log.file, ck.chunk_begin),
        ] {
            file.remove_outside(begin, u64::MAX)?;
        }
        self.storage.sync_dir()?;
        self.wal.truncate_before(wal_lsn + 1)?;
        self.counters.checkpoints.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Writes `f2-hot-index` for the last checkpoint (at close, after the final checkpoint; caller
    /// holds the maintenance lock). Each entry is the chain head as of the checkpoint's hot tail
    /// `T`: a read-cache copy is skipped, records at or above `T` (written concurrently) are
    /// walked past, and chains wholly below the hot log's begin are left out.
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
        writer.finish(self.storage.as_ref(), &key)?;
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

    /// Reads the WAL, the checkpoint and every checkpointed byte of the three logs from storage,
    /// checking every checksum.
    pub fn verify(&self) -> Result<VerifyReport> {
        let _only_one = self.maintenance.lock();
        let mut report = strata_wal::Wal::verify(self.storage.as_ref(), &self.wal_options)?;
        let ck = Checkpoint::load(self.storage.as_ref())?;
        let Some(ck) = ck else { return Ok(report) };
        report.files_checked += 1;
        report.bytes_checked += CHECKPOINT_BYTES as u64;
        let page = ck.page_size_bytes;
        for (file, begin, tail) in [
            (&self.hot.file, ck.hot_begin, ck.hot_tail),
            (&self.cold.file, ck.cold_begin, ck.cold_tail),
            (&self.cold_index.log.file, ck.chunk_begin, ck.chunk_tail),
        ] {
            let records =
                scan_range(file, page, begin, tail, &mut |p| read_disk_page(file, page, p), &mut |_, _| {
                    Ok(())
                })?;
            report.records_checked += records;
            report.bytes_checked += tail - begin;
            report.files_checked += (tail - begin).div_ceil(ck.segment_bytes);
        }
        Ok(report)
    }

    /// Every key stored in the hot or cold log (live or not), deduplicated.
    pub fn all_keys(&self) -> Result<Vec<Key>> {
        let _only_one = self.maintenance.lock();
        let mut seen = HashSet::new();
        let mut keys = Vec::new();
        let mut visit = |_: u64, view: record::RecordView<'_>| {
            if seen.insert(view.key.to_vec()) {
                keys.push(view.key.to_vec());
            }
            Ok(())
        };
        let hot_tail = {
            let _w = self.write_lock.lock();
            self.hot.tail()
        };
        self.hot.scan(self.hot.begin(), hot_tail, &mut visit)?;
        self.cold.scan(self.cold.begin(), self.cold.tail(), &mut visit)?;
        Ok(keys)
    }
}

/// Runs `f`, recording its duration in `max_us` if it is the longest so far.
fn timed<T>(max_us: &std::sync::atomic::AtomicU64, f: impl FnOnce() -> T) -> T {
    let started = std::time::Instant::now();
    let out = f();
    max_us.fetch_max(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX), Relaxed);
    out
}

fn read_disk_page(file: &SegmentedFile, page_size: u64, page_start: u64) -> Result<Vec<u8>> {
    crate::log::read_page_from_disk(file, page_size, page_start).map_err(|e| match e {
        Error::Io { .. } => {
            Error::corruption(file.file_of(page_start), page_start % file.segment_bytes(), e.to_string())
        }
        other => other,
    })
}
