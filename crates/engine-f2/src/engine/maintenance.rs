//! Maintenance (one task at a time, under the maintenance lock; run by the background worker, or
//! inline by the writer that crosses a threshold when `F2Options::background_maintenance` is
//! off): what is due of compaction (compaction.rs), chunk-log garbage collection and checkpoints
//! (checkpointing.rs); plus `verify` and the unordered full scan.

use std::collections::HashSet;
use std::sync::atomic::Ordering::Relaxed;

use strata_core::{Error, Key, Result, VerifyReport};

use super::Inner;
use crate::checkpoint::{Checkpoint, CHECKPOINT_BYTES};
use crate::log::io_cause::IoCause;
use crate::log::{scan_read_pages, SegmentedFile};
use crate::record;

/// A checkpoint is due once it would release this fraction (as a divisor) of the live bytes.
const RELEASE_LIVE_DIVISOR: u64 = 8;
/// ... and at least this many times the hot index's size (its snapshot's bound).
const RELEASE_SNAPSHOT_MULTIPLE: u64 = 4;

impl Inner {
    /// After a write: signals the worker if maintenance is due and applies backpressure (with
    /// background maintenance); or runs what is due inline, unless another thread already is.
    pub fn maybe_maintain(&self) -> Result<()> {
        let due = self.hot.size_bytes() > self.opts.hot_trigger_bytes
            || self.cold_compaction_due()
            || self.checkpoint_due();
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

    /// Whether the cold log is over its trigger: its explicit budget's, or by default twice its
    /// estimated live bytes plus slack (`ColdTrigger`).
    pub fn cold_compaction_due(&self) -> bool {
        let live_estimate_bytes = self.cold_live_estimate_bytes.load(Relaxed);
        self.opts.cold_trigger.is_due(self.cold.size_bytes(), live_estimate_bytes)
    }

    /// Whether a checkpoint is due: the WAL grew by `checkpoint_wal_bytes` since the last one,
    /// or the bytes the next one would give back to the file system (what the logs' begins moved
    /// past the last checkpoint's, plus the WAL since) exceed [`RELEASE_LIVE_DIVISOR`]⁻¹ of
    /// the store's estimated live bytes. Space is released only after a checkpoint (a crash
    /// recovers from the last one, which still names those bytes), so without the second rule
    /// a small store's directory grows by ~5× the WAL distance (its engine writes) between
    /// checkpoints. Floor: [`RELEASE_SNAPSHOT_MULTIPLE`] hot-index sizes, so the snapshot each
    /// checkpoint writes stays a small share of the writes.
    pub fn checkpoint_due(&self) -> bool {
        let wal_bytes = self.wal_bytes_since_checkpoint.load(Relaxed);
        if wal_bytes >= self.opts.checkpoint_wal_bytes {
            return true;
        }
        // Begins only move forward, so the sum's growth is what the logs would release.
        let begins_sum = self.hot.begin() + self.cold.begin() + self.cold_index.log.begin();
        let releasable_bytes =
            wal_bytes + begins_sum.saturating_sub(self.last_checkpoint_begins_sum.load(Relaxed));
        let live_estimate_bytes = self.cold_live_estimate_bytes.load(Relaxed)
            + self.hot.size_bytes()
            + self.cold_index.live_bytes();
        let floor_bytes = RELEASE_SNAPSHOT_MULTIPLE * self.hot_index.memory_bytes();
        releasable_bytes >= (live_estimate_bytes / RELEASE_LIVE_DIVISOR).max(floor_bytes)
    }

    /// Caller holds the maintenance lock.
    pub fn maintain_locked(&self) -> Result<()> {
        let c = &self.counters;
        self.rebalance_memory()?;
        if self.hot.size_bytes() > self.opts.hot_trigger_bytes {
            timed(&c.hot_round_max_us, || self.compact_hot())?;
        }
        if self.cold_compaction_due() {
            timed(&c.cold_round_max_us, || self.compact_cold())?;
        }
        let copied =
            timed(&c.chunk_gc_max_us, || self.cold_index.collect_garbage(2 * self.opts.page_size_bytes))?;
        c.chunks_collected.fetch_add(copied, Relaxed);
        if self.checkpoint_due() {
            timed(&c.checkpoint_max_us, || self.checkpoint_locked())?;
        }
        Ok(())
    }

    /// Reads the WAL, the checkpoint and every checkpointed byte of the three logs from storage,
    /// checking every checksum.
    pub fn verify(&self) -> Result<VerifyReport> {
        let _cause = IoCause::Open.enter();
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
            let read = |p| read_disk_page(file, page, p);
            let records = scan_read_pages(file, page, begin, tail, &read, &mut |_, _| Ok(()))?;
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
        let hot_tail = self.stable_hot_tail();
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
        Error::Io { .. } => file.corruption(page_start, e.to_string()),
        other => other,
    })
}
