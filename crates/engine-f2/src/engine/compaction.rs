//! Lookup-based compaction (F2 §5.2), run under the maintenance lock: hot→cold (or hot→hot tail in
//! single-log mode) and cold→cold, a page at a time.

use std::sync::atomic::Ordering::Relaxed;

use strata_core::Result;

use super::Inner;
use crate::hash::key_hash;
use crate::index::cold::ChunkBatch;
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
}
