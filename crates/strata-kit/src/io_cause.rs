//! Why device bytes moved. Each thread carries the cause of the work it is doing — cause 0, a
//! user operation, unless a task entered its own with [`enter`] — and an [`IoCounts`] adds every
//! read and write it is told of to the current cause. An engine names its causes (index 0 is
//! always its user operations) and reports `io.<file kind>.<cause>.{reads,read_bytes,writes,
//! write_bytes}`, so a phase's device bytes split into what its gets, its writes and each kind of
//! background work cost; `strata bench` prints them per phase.
//!
//! Two ways to count: an engine calls [`IoCounts::record_read`]/[`record_write`] beside its own
//! I/O (f2's logs), or wraps its storage in a [`CountedStorage`] that counts every file it opens
//! under a kind chosen from the file's name (flex).
//!
//! Threads a task spawns start at cause 0: the task passes its cause on ([`current`], then
//! [`enter`] on the new thread).
//!
//! [`record_write`]: IoCounts::record_write

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use strata_core::{IoStats, Result};
use strata_io::{OpenOptions, Storage, StorageFile, StorageLock};

/// The most causes an engine may name.
pub const MAX_CAUSES: usize = 8;

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// This thread's current cause (0 unless a task entered another).
pub fn current() -> usize {
    CURRENT.with(Cell::get)
}

/// Makes `cause` (below [`MAX_CAUSES`]; larger ones count as the last) this thread's cause until
/// the guard is dropped, then the previous one again.
#[must_use = "the cause holds only while the guard lives"]
pub fn enter(cause: usize) -> CauseGuard {
    CauseGuard { previous: CURRENT.with(|c| c.replace(cause.min(MAX_CAUSES - 1))) }
}

pub struct CauseGuard {
    previous: usize,
}

impl Drop for CauseGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

/// One file kind's device reads and writes, by cause.
#[derive(Default)]
pub struct IoCounts {
    reads: [AtomicU64; MAX_CAUSES],
    read_bytes: [AtomicU64; MAX_CAUSES],
    writes: [AtomicU64; MAX_CAUSES],
    write_bytes: [AtomicU64; MAX_CAUSES],
}

impl IoCounts {
    pub fn record_read(&self, bytes: usize) {
        Self::add(&self.reads, &self.read_bytes, bytes);
    }

    pub fn record_write(&self, bytes: usize) {
        Self::add(&self.writes, &self.write_bytes, bytes);
    }

    fn add(ops: &[AtomicU64; MAX_CAUSES], bytes_by_cause: &[AtomicU64; MAX_CAUSES], bytes: usize) {
        let i = current();
        if let (Some(op), Some(b)) = (ops.get(i), bytes_by_cause.get(i)) {
            op.fetch_add(1, Relaxed);
            b.fetch_add(bytes as u64, Relaxed);
        }
    }

    /// `io.<kind>.<cause name>.<figure>` for each of `cause_names` (indexed as the causes).
    pub fn counters(&self, kind: &str, cause_names: &[&str]) -> Vec<(String, u64)> {
        let mut out = Vec::with_capacity(4 * cause_names.len());
        for (i, cause) in cause_names.iter().enumerate().take(MAX_CAUSES) {
            for (figure, values) in [
                ("reads", &self.reads),
                ("read_bytes", &self.read_bytes),
                ("writes", &self.writes),
                ("write_bytes", &self.write_bytes),
            ] {
                let value = values.get(i).map_or(0, |v| v.load(Relaxed));
                out.push((format!("io.{kind}.{cause}.{figure}"), value));
            }
        }
        out
    }
}

/// Which file kind a file name belongs to: an index into the kinds given to [`CountedStorage`].
pub type Classify = fn(&str) -> usize;

/// A storage that counts every read and write of the files it opens in the [`IoCounts`] of the
/// file's kind (`classify` of its name), under the thread's current cause. Everything else is
/// forwarded unchanged.
pub struct CountedStorage {
    inner: Arc<dyn Storage>,
    classify: Classify,
    kinds: &'static [&'static str],
    counts: Arc<[IoCounts]>,
}

impl CountedStorage {
    /// `kinds` names the file kinds `classify` returns (an index past the end counts as the last).
    pub fn new(
        inner: Arc<dyn Storage>,
        kinds: &'static [&'static str],
        classify: Classify,
    ) -> CountedStorage {
        let counts = kinds.iter().map(|_| IoCounts::default()).collect();
        CountedStorage { inner, classify, kinds, counts }
    }

    /// `io.<kind>.<cause>.<figure>` for every kind and each of `cause_names`.
    pub fn counters(&self, cause_names: &[&str]) -> Vec<(String, u64)> {
        self.kinds
            .iter()
            .zip(self.counts.iter())
            .flat_map(|(kind, c)| c.counters(kind, cause_names))
            .collect()
    }

    fn kind_of(&self, name: &str) -> usize {
        (self.classify)(name).min(self.counts.len().saturating_sub(1))
    }
}

impl fmt::Debug for CountedStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountedStorage").field("inner", &self.inner).field("kinds", &self.kinds).finish()
    }
}

impl Storage for CountedStorage {
    fn open(&self, name: &str, opts: OpenOptions) -> Result<Arc<dyn StorageFile>> {
        let file = self.inner.open(name, opts)?;
        Ok(Arc::new(CountedFile { inner: file, counts: self.counts.clone(), kind: self.kind_of(name) }))
    }
    fn exists(&self, name: &str) -> Result<bool> {
        self.inner.exists(name)
    }
    fn remove(&self, name: &str) -> Result<()> {
        self.inner.remove(name)
    }
    fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn list(&self) -> Result<Vec<String>> {
        self.inner.list()
    }
    fn sync_dir(&self) -> Result<()> {
        self.inner.sync_dir()
    }
    fn lock(&self, name: &str) -> Result<Box<dyn StorageLock>> {
        self.inner.lock(name)
    }
    fn io_stats(&self) -> IoStats {
        self.inner.io_stats()
    }
    fn location(&self) -> String {
        self.inner.location()
    }
}

struct CountedFile {
    inner: Arc<dyn StorageFile>,
    counts: Arc<[IoCounts]>,
    kind: usize,
}

impl CountedFile {
    fn counts(&self) -> Option<&IoCounts> {
        self.counts.get(self.kind)
    }
}

impl fmt::Debug for CountedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl StorageFile for CountedFile {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_at(offset, buf)?;
        if let Some(c) = self.counts() {
            c.record_read(buf.len());
        }
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.inner.write_at(offset, data)?;
        if let Some(c) = self.counts() {
            c.record_write(data.len());
        }
        Ok(())
    }
    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len_bytes: u64) -> Result<()> {
        self.inner.set_len(len_bytes)
    }
    fn allocate(&self, len_bytes: u64) -> Result<()> {
        self.inner.allocate(len_bytes)
    }
    fn punch_hole(&self, offset: u64, len_bytes: u64) -> Result<()> {
        self.inner.punch_hole(offset, len_bytes)
    }
}

#[cfg(test)]
mod tests {
    use strata_io::MemStorage;

    use super::*;

    const CAUSES: [&str; 3] = ["user", "compaction", "checkpoint"];

    fn counter(counters: &[(String, u64)], name: &str) -> u64 {
        counters.iter().find(|(n, _)| n == name).map_or(u64::MAX, |(_, v)| *v)
    }

    #[test]
    fn bytes_go_to_the_cause_entered_on_this_thread_and_back_after_the_guard() {
        let counts = IoCounts::default();
        counts.record_read(100);
        {
            let _compacting = enter(1);
            counts.record_read(4096);
            counts.record_write(512);
            {
                let _nested = enter(2);
                counts.record_write(7);
            }
            counts.record_read(4096);
        }
        counts.record_write(3);
        let c = counts.counters("hot", &CAUSES);
        assert_eq!(counter(&c, "io.hot.user.read_bytes"), 100);
        assert_eq!(counter(&c, "io.hot.user.write_bytes"), 3);
        assert_eq!(counter(&c, "io.hot.compaction.reads"), 2);
        assert_eq!(counter(&c, "io.hot.compaction.read_bytes"), 8192);
        assert_eq!(counter(&c, "io.hot.compaction.write_bytes"), 512);
        assert_eq!(counter(&c, "io.hot.checkpoint.writes"), 1);
        // Another thread starts as a user thread, whatever this one entered.
        let _here = enter(1);
        std::thread::scope(|s| s.spawn(|| assert_eq!(current(), 0)).join().unwrap());
        assert_eq!(c.len(), 4 * CAUSES.len());
    }

    #[test]
    fn a_counted_storage_counts_each_file_under_its_kind_and_adds_up_to_the_storage() {
        let inner = Arc::new(MemStorage::new());
        let classify: Classify = |name| usize::from(name.ends_with(".log"));
        let storage = CountedStorage::new(inner.clone(), &["data", "log"], classify);
        let data = storage.open("t.data", OpenOptions::create()).unwrap();
        let log = storage.open("t.log", OpenOptions::create()).unwrap();
        data.write_at(0, &[1; 300]).unwrap();
        {
            let _gc = enter(1);
            data.write_at(300, &[2; 20]).unwrap();
            log.write_at(0, &[3; 40]).unwrap();
        }
        let mut buf = [0u8; 320];
        data.read_at(0, &mut buf).unwrap();
        let c = storage.counters(&CAUSES);
        assert_eq!(counter(&c, "io.data.user.write_bytes"), 300);
        assert_eq!(counter(&c, "io.data.compaction.write_bytes"), 20);
        assert_eq!(counter(&c, "io.log.compaction.write_bytes"), 40);
        assert_eq!(counter(&c, "io.data.user.read_bytes"), 320);
        let sum = |figure: &str| c.iter().filter(|(n, _)| n.ends_with(figure)).map(|(_, v)| v).sum::<u64>();
        assert_eq!(sum(".write_bytes"), storage.io_stats().bytes_written);
        assert_eq!(sum(".read_bytes"), storage.io_stats().bytes_read);
    }
}
