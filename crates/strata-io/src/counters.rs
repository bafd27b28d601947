use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use strata_core::IoStats;

/// Lock-free I/O counters shared by all files of one storage.
#[derive(Debug, Default)]
pub struct Counters {
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    read_ops: AtomicU64,
    write_ops: AtomicU64,
    sync_ops: AtomicU64,
}

impl Counters {
    pub fn on_read(&self, bytes: usize) {
        self.read_ops.fetch_add(1, Relaxed);
        self.bytes_read.fetch_add(bytes as u64, Relaxed);
    }
    pub fn on_write(&self, bytes: usize) {
        self.write_ops.fetch_add(1, Relaxed);
        self.bytes_written.fetch_add(bytes as u64, Relaxed);
    }
    pub fn on_sync(&self) {
        self.sync_ops.fetch_add(1, Relaxed);
    }
    pub fn snapshot(&self) -> IoStats {
        IoStats {
            bytes_read: self.bytes_read.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
            read_ops: self.read_ops.load(Relaxed),
            write_ops: self.write_ops.load(Relaxed),
            sync_ops: self.sync_ops.load(Relaxed),
        }
    }
}
