//! The hot log: FASTER's HybridLog. Addresses `[head, tail)` are in a window of in-memory pages;
//! of those, `[read_only, tail)` is the mutable region (records updated in place) and
//! `[head, read_only)` is read-only (updates copy the record to the tail). `[begin, head)` lives
//! only in the segment files. Every page below `read_only` is immutable, and a page is written
//! to its segment file before it leaves memory.
//!
//! Memory safety without an epoch framework: pages are `Arc`s, so a reader that fetched a page
//! keeps it alive even after eviction; each page has its own `RwLock` (writers hold it only to
//! copy a record in). Appends, in-place updates, `read_only` and `head` changes happen under the
//! engine's write lock; reads take no engine lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_core::{Error, Result};

use super::{
    load_tail_page, read_page_from_disk, record_in_page, record_on_disk, scan_range, Bounds, SegmentedFile,
};
use crate::record::{self, OwnedRecord, RecordView};

type Page = RwLock<Box<[u8]>>;

pub struct HybridLog {
    pub file: SegmentedFile,
    page_size: u64,
    /// The window's size when nothing is lent (at least 2 pages).
    max_pages_in_memory: usize,
    mutable_fraction: f64,
    /// Bytes of the window's memory lent to structures that outgrew their own share (the hot
    /// index's overflow buckets); the window shrinks by that much, to no fewer than 2 pages.
    lent_bytes: AtomicU64,
    bounds: Bounds,
    read_only: AtomicU64,
    /// Start of the oldest in-memory page. Changed only under the `pages` write lock.
    head: AtomicU64,
    /// `pages[i]` starts at `head + i * page_size`; the last page holds `tail`.
    pages: RwLock<VecDeque<Arc<Page>>>,
    /// Everything below this address has been written to the segment files.
    flushed_until: Mutex<u64>,
}

impl HybridLog {
    /// Opens a hot log whose durable contents are `[begin, tail)`; the tail page is loaded.
    pub fn open(
        file: SegmentedFile,
        page_size: u64,
        max_pages_in_memory: usize,
        mutable_fraction: f64,
        begin: u64,
        tail: u64,
    ) -> Result<HybridLog> {
        let max_pages = max_pages_in_memory.max(2);
        let (head, bytes) = load_tail_page(&file, page_size, begin, tail)?;
        Ok(HybridLog {
            file,
            page_size,
            max_pages_in_memory: max_pages,
            mutable_fraction,
            lent_bytes: AtomicU64::new(0),
            bounds: Bounds::new(begin, tail),
            read_only: AtomicU64::new(tail),
            head: AtomicU64::new(head),
            pages: RwLock::new(VecDeque::from([Arc::new(RwLock::new(bytes.into_boxed_slice()))])),
            flushed_until: Mutex::new(tail),
        })
    }

    pub fn begin(&self) -> u64 {
        self.bounds.begin()
    }
    pub fn tail(&self) -> u64 {
        self.bounds.tail()
    }
    pub fn read_only(&self) -> u64 {
        self.read_only.load(SeqCst)
    }
    pub fn head(&self) -> u64 {
        self.head.load(SeqCst)
    }
    pub fn truncations(&self) -> u64 {
        self.bounds.truncations()
    }
    pub fn memory_bytes(&self) -> u64 {
        self.pages.read().len() as u64 * self.page_size
    }
    pub fn size_bytes(&self) -> u64 {
        self.bounds.size_bytes()
    }

    /// Lends `bytes` of the in-memory window to another structure: from the next page change on,
    /// the window holds that much less (at least 2 pages). Caller holds the engine write lock.
    pub fn set_lent_bytes(&self, bytes: u64) {
        self.lent_bytes.store(bytes, SeqCst);
    }

    /// The number of in-memory pages the window may hold now.
    pub fn window_pages(&self) -> usize {
        let lent_pages = self.lent_bytes.load(SeqCst).div_ceil(self.page_size);
        let lent_pages = usize::try_from(lent_pages).unwrap_or(usize::MAX);
        self.max_pages_in_memory.saturating_sub(lent_pages).max(2)
    }

    /// Appends an encoded record; caller holds the engine write lock. May flush and evict the
    /// oldest in-memory page (handing it to the OS first).
    pub fn append(&self, bytes: &[u8]) -> Result<u64> {
        let len = bytes.len() as u64;
        if len > self.page_size {
            return Err(Error::invalid(format!(
                "record of {len} bytes exceeds the page size {}",
                self.page_size
            )));
        }
        let mut address = self.tail();
        if address % self.page_size + len > self.page_size {
            address = address - address % self.page_size + self.page_size;
        }
        let page_start = address - address % self.page_size;
        if page_start >= self.head() + self.pages.read().len() as u64 * self.page_size {
            self.push_page(page_start)?;
        }
        let page = self.page(address).ok_or_else(|| Error::invalid("hot log tail page missing"))?;
        {
            let mut bytes_guard = page.write();
            let offset = (address - page_start) as usize;
            let dst = bytes_guard.get_mut(offset..offset + bytes.len()).unwrap_or_default();
            dst.copy_from_slice(bytes);
        }
        self.bounds.set_tail(address + len);
        Ok(address)
    }

    /// Adds the page starting at `page_start` (the next one after the last), evicting the oldest
    /// pages while the window is full, and moves `read_only` so the mutable region stays
    /// `mutable_fraction` of the window. An evicted page nobody else holds is reused (zeroed)
    /// instead of freeing one page and allocating another.
    fn push_page(&self, page_start: u64) -> Result<()> {
        let window = self.window_pages();
        let mutable_pages = ((window as f64 * self.mutable_fraction) as usize).clamp(1, window - 1);
        let mutable_floor = page_start.saturating_sub((mutable_pages as u64 - 1) * self.page_size);
        self.read_only.fetch_max(mutable_floor, SeqCst);
        let mut spare: Option<Box<[u8]>> = None;
        while self.pages.read().len() + 1 > window {
            let head = self.head();
            let evict_end = head + self.page_size;
            // The evicted page is immutable from now on and on the OS before it leaves memory.
            self.read_only.fetch_max(evict_end, SeqCst);
            self.flush_until(evict_end)?;
            let evicted = {
                let mut pages = self.pages.write();
                let evicted = pages.pop_front();
                self.head.store(evict_end, SeqCst);
                evicted
            };
            // A reader still holding the page keeps it alive; then it is freed when that ends.
            if let Some(bytes) = evicted.and_then(|p| Arc::try_unwrap(p).ok()) {
                spare = Some(bytes.into_inner());
            }
        }
        let bytes = super::zeroed_page(spare, self.page_size);
        self.pages.write().push_back(Arc::new(RwLock::new(bytes)));
        Ok(())
    }

    fn page(&self, address: u64) -> Option<Arc<Page>> {
        let pages = self.pages.read();
        let head = self.head();
        if address < head {
            return None;
        }
        pages.get(((address - head) / self.page_size) as usize).cloned()
    }

    /// Writes every page byte below `target` to the segment files (not synced).
    pub fn flush_until(&self, target: u64) -> Result<()> {
        let mut flushed = self.flushed_until.lock();
        while *flushed < target {
            let page_start = *flushed - *flushed % self.page_size;
            // Pages wholly below `begin` were compacted away; their segments may be deleted.
            if page_start + self.page_size > self.begin() {
                let page =
                    self.page(page_start).ok_or_else(|| Error::invalid("unflushed hot page left memory"))?;
                // Written straight from the page (no copy): bytes below `read_only` are immutable,
                // so the read lock only waits out in-place updates of the page's mutable part.
                self.file.write_at(page_start, &page.read())?;
            }
            *flushed = (page_start + self.page_size).min(target);
        }
        Ok(())
    }

    /// Makes everything below the tail immutable (checkpoints call it under the write lock).
    pub fn seal_to_tail(&self) -> u64 {
        let tail = self.tail();
        self.read_only.fetch_max(tail, SeqCst);
        tail
    }

    /// The record at `address`, or `None` if the log was truncated past it.
    pub fn read(&self, address: u64) -> Result<Option<OwnedRecord>> {
        if address < self.begin() {
            return Ok(None);
        }
        if let Some(page) = self.page(address) {
            let page_start = address - address % self.page_size;
            return record_in_page(&self.file, &page.read(), page_start, address);
        }
        record_on_disk(&self.file, self.page_size, &self.bounds, address)
    }

    /// Overwrites the value of the record at `address` if it is in the mutable region and holds
    /// a value of the same length. Caller holds the engine write lock.
    pub fn update_in_place(&self, address: u64, new_value: &[u8]) -> bool {
        if address < self.read_only() {
            return false;
        }
        let Some(page) = self.page(address) else { return false };
        let mut guard = page.write();
        let offset = (address % self.page_size) as usize;
        guard.get_mut(offset..).is_some_and(|r| record::overwrite_value(r, new_value))
    }

    /// Rewrites the previous-address field of a record appended under the current write lock.
    pub fn set_prev_address(&self, address: u64, prev: u64) -> bool {
        let Some(page) = self.page(address) else { return false };
        let mut guard = page.write();
        let offset = (address % self.page_size) as usize;
        guard.get_mut(offset..).is_some_and(|r| record::set_prev_address(r, prev))
    }

    /// A copy of the page starting at `page_start`, from memory or disk.
    pub fn read_page(&self, page_start: u64) -> Result<Vec<u8>> {
        if let Some(page) = self.page(page_start) {
            return Ok(page.read().to_vec());
        }
        read_page_from_disk(&self.file, self.page_size, page_start)
    }

    /// Visits every record in `[from, to)`, checking checksums.
    pub fn scan(
        &self,
        from: u64,
        to: u64,
        on_record: &mut dyn FnMut(u64, RecordView<'_>) -> Result<()>,
    ) -> Result<u64> {
        scan_range(&self.file, self.page_size, from, to, &mut |p| self.read_page(p), on_record)
    }

    /// Moves `begin` forward; the counter moves first so a reader that sees the new `begin` also
    /// sees the new count.
    pub fn truncate(&self, new_begin: u64) {
        self.bounds.truncate(new_begin);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use strata_io::MemStorage;

    use super::*;
    use crate::log::FIRST_ADDRESS;

    /// Records stay readable while their pages move from the mutable region to read-only to
    /// disk; in-place updates only happen in the mutable region.
    #[test]
    fn regions_eviction_and_in_place_updates() {
        let storage = Arc::new(MemStorage::new());
        let file = SegmentedFile::new(storage, "f2-hot-", 16 << 10);
        let log = HybridLog::open(file, 4096, 3, 0.67, FIRST_ADDRESS, FIRST_ADDRESS).unwrap();
        let mut addresses = Vec::new();
        for i in 0..300u32 {
            let value = [i as u8; 50];
            addresses.push(log.append(&record::encode(&i.to_le_bytes(), Some(&value), 0)).unwrap());
        }
        assert!(log.head() > FIRST_ADDRESS, "old pages were evicted");
        assert!(log.memory_bytes() <= 3 * 4096);
        assert!(log.read_only() >= log.head() && log.read_only() <= log.tail());
        for (i, &a) in addresses.iter().enumerate() {
            let rec = log.read(a).unwrap().unwrap();
            assert_eq!((rec.key.as_slice(), rec.value[0]), (&(i as u32).to_le_bytes()[..], i as u8));
        }
        let newest = *addresses.last().unwrap();
        assert!(log.update_in_place(newest, &[9u8; 50]));
        assert!(!log.update_in_place(newest, &[9u8; 51]), "a different length is never in place");
        assert!(!log.update_in_place(addresses[0], &[9u8; 50]), "on-disk records are immutable");
        assert_eq!(log.read(newest).unwrap().unwrap().value, vec![9u8; 50]);
        let sealed = log.seal_to_tail();
        assert!(!log.update_in_place(newest, &[8u8; 50]), "a checkpoint seals everything");
        log.flush_until(sealed).unwrap();
        let scanned = log.scan(FIRST_ADDRESS, sealed, &mut |_, _| Ok(())).unwrap();
        assert_eq!(scanned, 300);
        log.truncate(addresses[100]);
        assert!(log.read(addresses[99]).unwrap().is_none());
        assert_eq!(log.truncations(), 1);
    }
}
