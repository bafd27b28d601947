//! The read cache (F2 §7): an in-memory log of copies of disk-resident, read-hot records. Its
//! addresses carry [`READ_CACHE_FLAG`] so a hot-index entry can point at a cached record, whose
//! previous address continues the chain in the hot log (at most one cached record per chain, at
//! its head). Records are never written to disk. It behaves as a second-chance FIFO: a hit in the
//! older half copies the record to the tail; the oldest page is evicted when space runs out,
//! after every index entry pointing into it was swung back to the cached record's previous
//! address. A cached record is invalidated (flag byte 13) when its key is written.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::record::{self, OwnedRecord, RecordView, Slot};

/// Set in addresses of read-cache records (hot-log addresses stay below it).
pub const READ_CACHE_FLAG: u64 = 1 << 47;
const FIRST_OFFSET: u64 = 64;

type Page = RwLock<Box<[u8]>>;

pub struct ReadCache {
    page_size: u64,
    max_pages: usize,
    /// Start offset of the oldest page; changed under the `pages` write lock.
    head: AtomicU64,
    tail: AtomicU64,
    pages: RwLock<VecDeque<Arc<Page>>>,
    /// Serialises inserts and evictions.
    append_lock: Mutex<()>,
    pub evicted_records: AtomicU64,
}

impl ReadCache {
    /// A cache of `max_pages` (at least 2) pages of `page_size` bytes.
    pub fn new(page_size: u64, max_pages: usize) -> ReadCache {
        let first = Arc::new(RwLock::new(vec![0u8; page_size as usize].into_boxed_slice()));
        ReadCache {
            page_size,
            max_pages: max_pages.max(2),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(FIRST_OFFSET),
            pages: RwLock::new(VecDeque::from([first])),
            append_lock: Mutex::new(()),
            evicted_records: AtomicU64::new(0),
        }
    }

    pub fn memory_bytes(&self) -> u64 {
        self.pages.read().len() as u64 * self.page_size
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.max_pages as u64 * self.page_size
    }

    fn page(&self, offset: u64) -> Option<Arc<Page>> {
        let pages = self.pages.read();
        let head = self.head.load(SeqCst);
        let index = offset.checked_sub(head)? / self.page_size;
        pages.get(index as usize).cloned()
    }

    /// The cached record at `address` (flagged), or `None` once its page was evicted.
    pub fn read(&self, address: u64) -> Option<OwnedRecord> {
        let offset = address & !READ_CACHE_FLAG;
        let page = self.page(offset)?;
        let guard = page.read();
        let at = (offset % self.page_size) as usize;
        let bytes = guard.get(at..)?;
        let view = RecordView::parse(bytes)?;
        let mut rec = OwnedRecord::from_view(&view);
        rec.invalid = record::is_invalid(bytes);
        Some(rec)
    }

    /// Runs `f` while no insert can publish (hot-log truncation uses it, so an insert's
    /// "not truncated since the lookup" check and its CAS are atomic with respect to it).
    pub fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        let _no_inserts = self.append_lock.lock();
        f()
    }

    /// True for records in the older half of the cache (a hit there earns a second chance).
    pub fn is_old(&self, address: u64) -> bool {
        let offset = address & !READ_CACHE_FLAG;
        offset < self.tail.load(SeqCst).saturating_sub(self.capacity_bytes() / 2)
    }

    /// Marks a cached record invalid (its key was written).
    pub fn invalidate(&self, address: u64) {
        let offset = address & !READ_CACHE_FLAG;
        if let Some(page) = self.page(offset) {
            let mut guard = page.write();
            if let Some(bytes) = guard.get_mut((offset % self.page_size) as usize..) {
                record::set_invalid(bytes);
            }
        }
    }

    /// Appends `bytes` (an encoded record) and calls `publish(address)`, which must swing the
    /// index entry to it; if it returns false the new record is invalidated. When a page must be
    /// freed first, `unlink(address, record)` is called for every record of the oldest page so
    /// no index entry points into it when it goes. Returns false if the record was not
    /// published.
    pub fn insert(
        &self,
        bytes: &[u8],
        publish: &mut dyn FnMut(u64) -> bool,
        unlink: &mut dyn FnMut(u64, RecordView<'_>),
    ) -> bool {
        let len = bytes.len() as u64;
        if len > self.page_size {
            return false;
        }
        let _only_one = self.append_lock.lock();
        let mut offset = self.tail.load(SeqCst);
        if offset % self.page_size + len > self.page_size {
            offset = offset - offset % self.page_size + self.page_size;
        }
        let page_start = offset - offset % self.page_size;
        let last_start = self.head.load(SeqCst) + (self.pages.read().len() as u64 - 1) * self.page_size;
        if page_start > last_start {
            let spare =
                if self.pages.read().len() >= self.max_pages { self.evict_oldest(unlink) } else { None };
            let bytes = super::zeroed_page(spare, self.page_size);
            self.pages.write().push_back(Arc::new(RwLock::new(bytes)));
        }
        let Some(page) = self.page(offset) else { return false };
        {
            let mut guard = page.write();
            let at = (offset - page_start) as usize;
            match guard.get_mut(at..at + bytes.len()) {
                Some(dst) => dst.copy_from_slice(bytes),
                None => return false,
            }
        }
        self.tail.store(offset + len, SeqCst);
        let address = offset | READ_CACHE_FLAG;
        if publish(address) {
            true
        } else {
            self.invalidate(address);
            false
        }
    }

    /// Evicts the oldest page; returns its bytes for reuse unless a reader still holds it.
    fn evict_oldest(&self, unlink: &mut dyn FnMut(u64, RecordView<'_>)) -> Option<Box<[u8]>> {
        let head = self.head.load(SeqCst);
        let page = self.page(head)?;
        {
            let guard = page.read();
            // The first page starts with unused bytes (offset 0 is never an address).
            let mut at = if head == 0 { FIRST_OFFSET as usize } else { 0 };
            while let Some(rest) = guard.get(at..) {
                let Ok(Slot::Record(view)) = record::parse_slot(rest, false) else { break };
                // Invalid records too: an in-place update of another key in the chain invalidates
                // the head copy without swinging the entry away from it.
                unlink((head + at as u64) | READ_CACHE_FLAG, view);
                self.evicted_records.fetch_add(1, SeqCst);
                at += view.stored_len();
            }
        }
        drop(page);
        let evicted = {
            let mut pages = self.pages.write();
            let evicted = pages.pop_front();
            self.head.store(head + self.page_size, SeqCst);
            evicted
        };
        evicted.and_then(|p| Arc::try_unwrap(p).ok()).map(RwLock::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_read_invalidate_and_evict() {
        let cache = ReadCache::new(4096, 2);
        let mut unlinked = Vec::new();
        let mut addresses = Vec::new();
        for i in 0..200u32 {
            let bytes = record::encode(&i.to_le_bytes(), Some(&[7u8; 40]), 1000 + u64::from(i));
            let mut published = 0;
            assert!(cache.insert(
                &bytes,
                &mut |a| {
                    published = a;
                    true
                },
                &mut |a, v| unlinked.push((a, v.prev_address))
            ));
            addresses.push(published);
        }
        // Old pages were evicted: every record of them, the very first included, was unlinked
        // (entry → previous address) first, in address order.
        assert_eq!(unlinked.first().copied(), Some((addresses[0], 1000)));
        let evicted = addresses.iter().filter(|&&a| cache.read(a).is_none()).count();
        assert_eq!(unlinked.len(), evicted);
        assert!(unlinked.iter().zip(&addresses).all(|((a, _), b)| a == b));
        assert!(cache.read(addresses[0]).is_none());
        let last = *addresses.last().unwrap();
        let rec = cache.read(last).unwrap();
        assert_eq!((rec.prev_address, rec.invalid), (1199, false));
        cache.invalidate(last);
        assert!(cache.read(last).unwrap().invalid);
        assert!(cache.memory_bytes() <= 2 * 4096);
    }
}
