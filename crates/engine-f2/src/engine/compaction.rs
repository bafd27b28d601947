//! Lookup-based compaction (F2 §5.2), run under the maintenance lock: hot→cold (or hot→hot tail in
//! single-log mode) and cold→cold, over a small frame buffer of pages read ahead and
//! `F2Options::compaction_threads` workers that partition the records by cold-index chunk
//! (frames.rs states what is serialised and how).

mod frames;
#[cfg(test)]
mod lost_record_tests;
#[cfg(test)]
mod tests;

use std::sync::atomic::Ordering::Relaxed;

use strata_core::Result;

use super::Inner;
use crate::index::cold::ChunkBatch;
use crate::log::io_cause::IoCause;
use crate::record;
use frames::{FrameRecord, RoundPlan};

/// Reads a compaction round keeps in flight in all (chunk reads, liveness lookups that may read
/// the hot log's disk), shared by its workers: each worker fans out to this divided by the
/// worker count. On this project's 2-core VM a 4 KiB O_DIRECT read reaches ~23k IOPS one at a
/// time and ~55k with 8 in flight (../shared/MACHINE.md). The bound matters for memory too:
/// every fan-out thread may get its own malloc arena. Peak RSS of a 3M-record run at a 33 MiB
/// budget (A then C): 51 MiB before multi-threaded compaction; 88 MiB with 2 workers × (8 chunk
/// and 4 liveness readers); 77 MiB with 2 workers and this bound; 59 MiB with 1 worker (the
/// default); 51 MiB with 2 workers under `MALLOC_ARENA_MAX=2`.
const ROUND_READS_IN_FLIGHT: usize = 8;
/// Below this many records a share's lookups run in its worker.
const MIN_PARALLEL_LIVENESS_RECORDS: usize = 64;

impl Inner {
    /// Workers of a round: single-log mode copies to the hot log's tail one record at a time
    /// (`copy_to_hot_tail`, under the key's latch), so it keeps one worker.
    fn compaction_threads(&self) -> usize {
        if self.opts.single_log {
            1
        } else {
            self.opts.compaction_threads
        }
    }

    /// Each worker's share of `ROUND_READS_IN_FLIGHT`.
    fn reads_per_worker(&self) -> usize {
        (ROUND_READS_IN_FLIGHT / self.compaction_threads()).max(1)
    }

    /// The round over a log whose live range starts at `begin` and holds `size` bytes: its
    /// oldest `compaction_fraction`, cut at a page boundary and not past `limit`; `None` if that
    /// is empty.
    fn round_plan<'a>(
        &self,
        file: &'a crate::log::SegmentedFile,
        begin: u64,
        size: u64,
        limit: u64,
    ) -> Option<RoundPlan<'a>> {
        let page = self.opts.page_size_bytes;
        let want = begin + ((size as f64 * self.opts.compaction_fraction) as u64).max(page);
        let until = want.min(limit);
        let until = until - until % page;
        (until > begin).then(|| RoundPlan {
            file,
            page_size_bytes: page,
            from: begin,
            until,
            threads: self.compaction_threads(),
            frame_pages: self.opts.compaction_frame_pages,
            chunk_count: self.cold_index.chunk_count(),
        })
    }

    /// Hot→cold compaction: every record in the oldest part of the hot log that is still the
    /// newest of its key in the hot log (ConditionalInsert's lookup) is upserted into the cold
    /// log; then the hot log is truncated and index entries below the new begin are cleared.
    /// Only the immutable region is compacted, so write-hot records in the mutable region never
    /// move (no FASTER death spiral). With `F2Options::single_log` the live records are copied to
    /// the hot log's tail instead (FASTER, for comparison): those copies push the mutable region,
    /// write-hot records included, out of memory.
    ///
    /// The hot log is truncated after each page (once every record of it and of the pages before
    /// it is done), so writers held back by the hot log's disk budget resume after one page, not
    /// a whole round. (Index entries left pointing below `begin` read as "not in the hot log";
    /// they are cleared once per round.) A round stops early if the engine is closing.
    pub fn compact_hot(&self) -> Result<u64> {
        let _cause = IoCause::HotToCold.enter();
        let begin = self.hot.begin();
        // Not past `safe_read_only`: above it a page turn may still be waiting for a writer that
        // changes a record in place or has reserved bytes it has not copied in yet.
        let limit = self.hot.safe_read_only();
        let Some(plan) = self.round_plan(&self.hot.file, begin, self.hot.size_bytes(), limit) else {
            return Ok(0);
        };
        let outcome = frames::run_round(
            &plan,
            &|page_start| self.hot.read_page(page_start),
            &|share| self.hot_share_to_target(share),
            &mut |page_end, padding_start| {
                #[cfg(test)]
                tests::hooks::event(self, tests::hooks::Event::Releasing(page_end));
                match &self.read_cache {
                    Some(cache) => cache.exclusive(|| self.hot.release_page(page_end, padding_start)),
                    None => self.hot.release_page(page_end, padding_start),
                }
                self.worker.notify_progress();
                !self.opts.background_maintenance || self.worker_may_continue()
            },
        )?;
        // An entry into the round's padding is a record the round never saw: it was not copied,
        // and clearing the entry would hand its key's older cold value out silently.
        let lost = |address: u64| address >= begin && outcome.padding.contains(address);
        if let Err(address) = self.hot_index.invalidate_below(outcome.released_until, &lost) {
            return Err(self.hot.file.corruption(address, format!("the hot index points at address {address}, which the log holds as padding: the record is missing"),
            ));
        }
        self.counters.hot_compactions.fetch_add(1, Relaxed);
        let target = if self.opts.single_log {
            &self.counters.hot_records_to_hot_tail
        } else {
            &self.counters.hot_records_to_cold
        };
        target.fetch_add(outcome.copied, Relaxed);
        Ok(outcome.copied)
    }

    /// ConditionalInsert of a worker's share of a hot-log page: the live records first (a record
    /// is live if no newer record of its key is in the hot log), then their chunks read in one
    /// parallel batch, then the appends (a record superseded meanwhile is still copied: the hot
    /// log's newer record shadows the cold copy, as when the check races a writer).
    fn hot_share_to_target(&self, share: &[FrameRecord<'_>]) -> Result<u64> {
        let live = self.hot_live_records(share)?;
        let mut copied = 0;
        if self.opts.single_log {
            for r in live {
                copied +=
                    u64::from(self.copy_to_hot_tail(r.view.key, r.view.value_opt(), r.hash, r.address)?);
                #[cfg(test)]
                tests::hooks::event(self, tests::hooks::Event::Done(r.address));
            }
            return Ok(copied);
        }
        let mut batch = self.cold_index.read_batch(live.iter().map(|r| r.hash), self.reads_per_worker())?;
        for r in live {
            self.cold_append_in(&mut batch, r.view.key, r.view.value_opt(), r.hash)?;
            copied += 1;
            #[cfg(test)]
            tests::hooks::event(self, tests::hooks::Event::Done(r.address));
        }
        Ok(copied)
    }

    /// The records of `share` that no newer record of their key supersedes in the hot log, in
    /// order. A lookup may read older hot records from disk, so a large share is checked by up to
    /// `reads_per_worker` threads at once (lookups only read; nothing here is serialised).
    fn hot_live_records<'s, 'f>(&self, share: &'s [FrameRecord<'f>]) -> Result<Vec<&'s FrameRecord<'f>>> {
        let cause = IoCause::current();
        let check = |part: &[FrameRecord<'f>]| -> Result<Vec<bool>> {
            let _cause = cause.enter();
            part.iter()
                .map(|r| {
                    #[cfg(test)]
                    tests::hooks::event(self, tests::hooks::Event::Start(r.address));
                    let newer = self.hot_has_newer(r.view.key, r.hash, r.address)?;
                    #[cfg(test)]
                    if newer {
                        tests::hooks::event(self, tests::hooks::Event::Done(r.address));
                    }
                    Ok(!newer)
                })
                .collect()
        };
        let live = strata_kit::parallel::map_parts(
            share,
            self.reads_per_worker(),
            MIN_PARALLEL_LIVENESS_RECORDS,
            "a liveness reader",
            check,
        )?;
        Ok(share.iter().zip(live).filter_map(|(r, live)| live.then_some(r)).collect())
    }

    /// Cold→cold compaction: live records of the oldest part of the cold log are copied to its
    /// tail (ConditionalInsert with the cold log as source and target), then the log is truncated
    /// once, at the end of the round (cold lookups retry after each truncation, §5.4).
    /// Tombstones are dropped: every older record of their key is in the truncated part too.
    /// A complete round re-measures the cold log's live-bytes estimate (cold_live.rs).
    pub fn compact_cold(&self) -> Result<u64> {
        let _cause = IoCause::ColdToCold.enter();
        let begin = self.cold.begin();
        // The tail page is still being appended to.
        let tail = self.cold.tail();
        let limit = tail - tail % self.opts.page_size_bytes;
        let Some(plan) = self.round_plan(&self.cold.file, begin, self.cold.size_bytes(), limit) else {
            return Ok(0);
        };
        let outcome = frames::run_round(
            &plan,
            &|page_start| self.cold.read_page(page_start),
            &|share| self.cold_share_to_tail(share),
            &mut |_, _| !self.opts.background_maintenance || self.worker_may_continue(),
        )?;
        self.check_cold_round_end(&outcome, tail)?;
        if outcome.released_until > begin {
            self.cold.truncate(outcome.released_until);
        }
        if outcome.released_until == plan.until {
            // Only this round appends to the cold log (maintenance lock), so everything past the
            // old tail is its copies: the live part of the range, as laid out in the log.
            let copied_bytes = self.cold.tail() - tail;
            let estimate =
                super::cold_live::estimate_after_round(plan.until - begin, copied_bytes, tail - plan.until);
            self.cold_live_estimate_bytes.store(estimate, Relaxed);
        }
        self.counters.cold_compactions.fetch_add(1, Relaxed);
        self.counters.cold_records_copied.fetch_add(outcome.copied, Relaxed);
        Ok(outcome.copied)
    }

    /// A cold round whose last page ended in padding: the cold log turns to a new page only when
    /// a record does not fit, so the first record after the round must not have fit there, or
    /// records went missing that the round skipped and would truncate away (a lost write). The
    /// round's own pages were checked as it loaded them; this is the page after its end.
    fn check_cold_round_end(&self, outcome: &frames::RoundOutcome, tail: u64) -> Result<()> {
        let end = outcome.released_until;
        let Some((gap_at, _)) = outcome.padding.ending_at(end) else {
            return Ok(());
        };
        let gap_bytes = end - gap_at;
        if end >= tail {
            // The tail never follows padding: a record that does not fit moves it past the page
            // start.
            return Err(self.cold.file.corruption(gap_at, format!("{gap_bytes} bytes of page padding at address {gap_at} end the cold log: the records there are missing")));
        }
        let next_record_bytes = match self.cold.read(end)? {
            Some(next) => record::stored_len(next.key.len(), next.value.len()) as u64,
            // Below `begin`: not reached (only this round moves the cold log's `begin`, after
            // this check, under the maintenance lock).
            None => return Ok(()),
        };
        crate::log::check_gap(&self.cold.file, gap_at, gap_bytes, next_record_bytes)
    }

    /// ConditionalInsert of a worker's share of a cold-log page: its chunks read in one parallel
    /// batch, then per record in log order the liveness check (no newer record of the key in the
    /// cold log; the chunk comes from the batch, which follows the copies) and the copy.
    fn cold_share_to_tail(&self, share: &[FrameRecord<'_>]) -> Result<u64> {
        let records: Vec<&FrameRecord<'_>> = share.iter().filter(|r| !r.view.is_tombstone()).collect();
        let mut batch =
            self.cold_index.read_batch(records.iter().map(|r| r.hash), self.reads_per_worker())?;
        let mut copied = 0;
        for r in records {
            if !self.cold_has_newer_in(&batch, r.view.key, r.hash, r.address)? {
                self.cold_append_in(&mut batch, r.view.key, r.view.value_opt(), r.hash)?;
                copied += 1;
            }
        }
        Ok(copied)
    }

    /// Appends a record to the cold log and points its cold-index entry at it, with the chunk
    /// taken from (and kept current in) `batch`. The caller is the only writer of the record's
    /// chunk (see frames.rs); the cold log serialises concurrent appends itself.
    fn cold_append_in(
        &self,
        batch: &mut ChunkBatch,
        key: &[u8],
        value: Option<&[u8]>,
        hash: u64,
    ) -> Result<()> {
        let placement = self.cold_index.place_in(batch, hash, self.cold.begin())?;
        let mut bytes = record::encode(key, value, placement.prev_address);
        self.counters.compaction_bytes_written.fetch_add(bytes.len() as u64, Relaxed);
        let address = self.cold.append(&mut bytes)?;
        self.cold_index.commit_in(batch, placement, address)
    }
}
