use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::options::WalStats;

/// Lock-free counters behind `Wal::stats`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub records_appended: AtomicU64,
    pub payload_bytes_appended: AtomicU64,
    pub durability_markers_appended: AtomicU64,
    pub bytes_written: AtomicU64,
    pub record_writes: AtomicU64,
    pub syncs: AtomicU64,
    pub sync_commits: AtomicU64,
    pub group_commits: AtomicU64,
    pub segments_created: AtomicU64,
    pub segments_recycled: AtomicU64,
    pub segments_removed: AtomicU64,
    pub disk_bytes: AtomicU64,
}

pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Relaxed);
}

impl Counters {
    pub fn snapshot(&self) -> WalStats {
        WalStats {
            records_appended: self.records_appended.load(Relaxed),
            payload_bytes_appended: self.payload_bytes_appended.load(Relaxed),
            durability_markers_appended: self.durability_markers_appended.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
            record_writes: self.record_writes.load(Relaxed),
            syncs: self.syncs.load(Relaxed),
            sync_commits: self.sync_commits.load(Relaxed),
            group_commits: self.group_commits.load(Relaxed),
            segments_created: self.segments_created.load(Relaxed),
            segments_recycled: self.segments_recycled.load(Relaxed),
            segments_removed: self.segments_removed.load(Relaxed),
            disk_bytes: self.disk_bytes.load(Relaxed),
        }
    }
}
