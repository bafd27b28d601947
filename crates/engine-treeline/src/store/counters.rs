//! Counters reported in `Stats::engine_counters` (names as listed by `Counters::list`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Debug, Default)]
pub struct Counters {
    pub user_bytes_read: AtomicU64,
    /// Pages written back in place (each a base page, plus its overflow page when it changed).
    pub pages_written_back: AtomicU64,
    pub records_written_back: AtomicU64,
    /// Page images appended to the double-write area.
    pub double_write_pages: AtomicU64,
    /// Syncs of the double-write area (one per batch that had images).
    pub double_write_syncs: AtomicU64,
    /// Times the double-write area was emptied between checkpoints (data file synced first).
    pub double_write_rewinds: AtomicU64,
    /// Batched write-backs (each one WAL sync, at most one double-write sync).
    pub write_back_batches: AtomicU64,
    pub overflow_pages_created: AtomicU64,
    pub reorganizations: AtomicU64,
    pub pre_segments_reorganized: AtomicU64,
    /// Pieces reorganizations planned and wrote their ranges in (one per run of at most
    /// `Store::piece_records` dirty records; one for most reorganizations).
    pub reorganization_pieces: AtomicU64,
    pub post_segments_written: AtomicU64,
    /// Post segments of more than one page (page grouping at work).
    pub multi_page_segments_written: AtomicU64,
    /// Planned segments given room for forecast inserts (planned again at a lowered goal).
    pub forecast_lowered_goals: AtomicU64,
    pub checkpoints: AtomicU64,
    /// Pages scans read (base and overflow).
    pub scan_pages_read: AtomicU64,
    /// Readahead chunks scans read (a chunk may span several segments).
    pub scan_chunks: AtomicU64,
    /// Base-page reads scans issued (one per run of pages back to back in the data file).
    pub scan_base_reads: AtomicU64,
    pub records_replayed_at_open: AtomicU64,
    /// Records `bulk_load` wrote straight into segments.
    pub bulk_loaded_records: AtomicU64,
    pub pages_restored_at_open: AtomicU64,
    /// Blob runs written (values too large for a page) and their pages.
    pub blob_runs_written: AtomicU64,
    pub blob_pages_written: AtomicU64,
    /// Blob runs read (one sequential read each).
    pub blob_runs_read: AtomicU64,
    /// Releases of a blob reference no live run has (stale after a crash; `store/blobs.rs`).
    pub stale_blob_references: AtomicU64,
    /// Live runs no page referenced any more, found by the sweep after an unclean open.
    pub blob_runs_unreferenced_at_open: AtomicU64,
}

impl Counters {
    pub fn list(&self) -> Vec<(String, u64)> {
        [
            ("pages_written_back", &self.pages_written_back),
            ("records_written_back", &self.records_written_back),
            ("double_write_pages", &self.double_write_pages),
            ("double_write_syncs", &self.double_write_syncs),
            ("double_write_rewinds", &self.double_write_rewinds),
            ("write_back_batches", &self.write_back_batches),
            ("overflow_pages_created", &self.overflow_pages_created),
            ("reorganizations", &self.reorganizations),
            ("pre_segments_reorganized", &self.pre_segments_reorganized),
            ("reorganization_pieces", &self.reorganization_pieces),
            ("post_segments_written", &self.post_segments_written),
            ("multi_page_segments_written", &self.multi_page_segments_written),
            ("forecast_lowered_goals", &self.forecast_lowered_goals),
            ("checkpoints", &self.checkpoints),
            ("scan_pages_read", &self.scan_pages_read),
            ("scan_chunks", &self.scan_chunks),
            ("scan_base_reads", &self.scan_base_reads),
            ("records_replayed_at_open", &self.records_replayed_at_open),
            ("bulk_loaded_records", &self.bulk_loaded_records),
            ("pages_restored_at_open", &self.pages_restored_at_open),
            ("blob_runs_written", &self.blob_runs_written),
            ("blob_pages_written", &self.blob_pages_written),
            ("blob_runs_read", &self.blob_runs_read),
            ("stale_blob_references", &self.stale_blob_references),
            ("blob_runs_unreferenced_at_open", &self.blob_runs_unreferenced_at_open),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value.load(Relaxed)))
        .collect()
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }
}
