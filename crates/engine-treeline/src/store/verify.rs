//! `verify` (every persisted byte the store relies on, checked) and `stats`.

use std::sync::atomic::Ordering::Relaxed;

use strata_core::{Result, Stats, VerifyReport};

use super::scan::check_base_pages;
use super::Store;
use crate::checkpoint_file::Checkpoint;
use crate::double_write::DoubleWrite;
use crate::forecast::ForecastState;
use crate::index::SegmentEntry;
use crate::options::ENGINE_NAME;
use crate::page::Page;

impl Store {
    /// Checks the WAL, the checkpoint file, the double-write area and every page the index
    /// references (under `maint`, so no page changes meanwhile).
    pub fn verify(&self) -> Result<VerifyReport> {
        self.check_usable()?;
        let maint = self.maint.lock();
        let mut report = strata_wal::Wal::verify(self.storage.as_ref(), &self.wal_options)?;
        let checkpoint = Checkpoint::load(self.storage.as_ref())?;
        report.files_checked += 1;
        if ForecastState::load(self.storage.as_ref())?.is_some() {
            report.files_checked += 1;
        }
        let images = DoubleWrite::recover(self.storage.as_ref(), self.page_size(), maint.generation)?;
        report.files_checked += 1;
        report.bytes_checked += maint.double_write.bytes();
        report.records_checked += images.len() as u64 + u64::from(checkpoint.is_some());
        let (records, pages) = self.verify_segments()?;
        report.records_checked += records;
        report.files_checked += 1;
        report.bytes_checked += pages * self.page_size().bytes() as u64;
        Ok(report)
    }

    /// Reads every page the index references and checks it as a read or scan would: its
    /// checksum, that it is the page the index places there (head or member `i` of its segment,
    /// or the overflow page of its base page), that its fences lie within its segment's bounds
    /// and that a segment's base pages tile its range. Returns the records and pages checked.
    fn verify_segments(&self) -> Result<(u64, u64)> {
        let segments: Vec<(Vec<u8>, SegmentEntry, Option<Vec<u8>>)> = {
            let index = self.index.read();
            let mut entries = index.iter().map(|(lower, entry)| (lower.to_vec(), entry.clone())).peekable();
            let mut segments = Vec::with_capacity(index.len());
            while let Some((lower, entry)) = entries.next() {
                let upper = entries.peek().map(|(next, _)| next.clone());
                segments.push((lower, entry, upper));
            }
            segments
        };
        let (mut records, mut pages) = (0, 0);
        for (lower, entry, upper) in &segments {
            let base: Vec<Page> = (0..usize::from(entry.pages))
                .map(|i| self.data.read_page(entry.base_page(i)))
                .collect::<Result<_>>()?;
            check_base_pages(self, entry, 0, &base, lower, upper.as_deref())?;
            for (i, page) in base.iter().enumerate() {
                records += page.record_count() as u64;
                pages += 1;
                if let Some(overflow) = self.read_checked_overflow(entry, i, page)? {
                    records += overflow.record_count() as u64;
                    pages += 1;
                }
            }
        }
        Ok((records, pages))
    }

    pub fn stats(&self) -> Stats {
        let t = self.cache.totals();
        let (cache_bytes, cache_len, dirty, hits, misses, evictions) =
            (self.cache.used_bytes(), t.records, t.dirty_records, t.hits, t.misses, t.evictions);
        let (base_pages, overflow_pages) = self.index.read().page_counts();
        let (segments, free_pages, data_pages, deferred, blob_runs, blob_pages) = {
            let maint = self.maint.try_lock();
            let index = self.index.read();
            let free = maint.as_ref().map_or(0, |m| m.free.free_pages());
            let data_pages = maint.as_ref().map_or(0, |m| m.free.end());
            let deferred = maint.as_ref().map_or(0, |m| m.freed_since_checkpoint.len() as u64);
            let blob_runs = maint.as_ref().map_or(0, |m| m.blobs.len() as u64);
            let blob_pages = maint.as_ref().map_or(0, |m| m.blobs.values().map(|b| b.pages).sum());
            (index.len() as u64, free, data_pages, deferred, blob_runs, blob_pages)
        };
        let index_bytes = self.index_memory_bytes.load(Relaxed);
        let mut counters = self.counters.list();
        counters.extend([
            ("cache.records".to_string(), cache_len),
            ("cache.dirty_records".to_string(), dirty),
            ("cache.bytes".to_string(), cache_bytes),
            ("cache.capacity_bytes".to_string(), self.effective_cache_bytes()),
            ("memory.over_budget_bytes".to_string(), self.over_budget_bytes()),
            ("cache.evictions".to_string(), evictions),
            ("cache.shards".to_string(), self.cache.shard_count() as u64),
            ("index.segments".to_string(), segments),
            ("index.bytes".to_string(), index_bytes),
            ("forecast.memory_bound_bytes".to_string(), self.forecaster_memory_bytes),
            ("index.base_pages".to_string(), base_pages),
            ("index.overflow_pages".to_string(), overflow_pages),
            ("free_pages".to_string(), free_pages),
            ("data_pages".to_string(), data_pages),
            ("page_size_bytes".to_string(), self.page_size().bytes() as u64),
            ("blob_runs".to_string(), blob_runs),
            ("blob_pages".to_string(), blob_pages),
            ("slots_freed_since_checkpoint".to_string(), deferred),
            ("double_write_bytes".to_string(), self.double_write_bytes.load(Relaxed)),
            ("wal_bytes_since_checkpoint".to_string(), self.wal_bytes_since_checkpoint.load(Relaxed)),
        ]);
        counters.extend(self.writes.wal().stats().counters());
        Stats {
            engine: ENGINE_NAME.into(),
            live_keys: None,
            user_bytes_written: self.writes.user_bytes_written(),
            user_bytes_read: self.counters.user_bytes_read.load(Relaxed),
            io: self.storage.io_stats(),
            cache_hits: hits,
            cache_misses: misses,
            memory_bytes: cache_bytes + self.held_memory_bytes(),
            disk_bytes: strata_io::total_file_bytes(self.storage.as_ref()),
            engine_counters: counters,
            notices: self.memory_notices(segments),
        }
    }

    /// The notice stats carry while the index leaves the record cache less than its floor
    /// (`options::CACHE_FLOOR_BUDGET_DIVISOR`): memory then exceeds the budget.
    fn memory_notices(&self, segments: u64) -> Vec<String> {
        let over = self.over_budget_bytes();
        if over == 0 {
            return Vec::new();
        }
        let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
        vec![format!(
            "treeline: the memory budget ({:.1} MiB) cannot hold the index ({:.1} MiB for {segments} \
             segments), the forecaster ({:.1} MiB) and a record cache of a quarter of it; the cache \
             keeps that floor ({:.1} MiB), so memory exceeds the budget by {:.1} MiB. Raise the memory \
             budget, or use larger pages (page_size_bytes) for a smaller index.",
            mib(self.config.memory_budget_bytes),
            mib(self.index_memory_bytes.load(Relaxed)),
            mib(self.forecaster_memory_bytes),
            mib(self.effective_cache_bytes()),
            mib(over),
        )]
    }
}
