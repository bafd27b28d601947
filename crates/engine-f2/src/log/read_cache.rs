//! The read cache (F2 §7): an in-memory log of copies of disk-resident, read-hot records. Its
//! addresses carry [`READ_CACHE_FLAG`] so a hot-index entry can point at a cached record, whose
//! previous address continues the chain in the hot log (at most one cached record per chain, at
//! its head). Records are never written to disk. It behaves as a second-chance FIFO: a hit in the
//! older half copies the record to the tail; the oldest page is evicted when space runs out,
//! after every index entry pointing into it was swung back to the cached record's previous
//! address. A cached record is invalidated (flag byte 13) when its key is written.

//!
//! Memory: the pages are frames of a [`PageRing`] under epoch protection, like the hot log's
//! (`ring.rs`): a read takes a guard and copies the record out, eviction retires the frame and it
//! is reused only after every guard older than the retire was dropped. An insert whose frame is
//! still held that way is skipped (a reader never waits for another reader). Records are
//! immutable once published except their invalid flag, set with an atomic OR.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};

use parking_lot::Mutex;

use super::window::PageWindow;
use crate::record::{self, OwnedRecord, RecordView, Slot};

/// Set in addresses of read-cache records (hot-log addresses stay below it).
pub const READ_CACHE_FLAG: u64 = 1 << 47;
const FIRST_OFFSET: u64 = 64;

pub struct ReadCache {
    page_size: u64,
    /// Pages the cache holds at most now: its share, plus what the hot log lends it
    /// (engine/memory_split.rs). Changed under `append_lock`; never above `page_limit`.
    max_pages: AtomicUsize,
    /// The most pages it can ever hold (its ring has a frame more).
    page_limit: usize,
    tail: AtomicU64,
    /// The in-memory pages `[head, last_page]` (offsets); changed under `append_lock` only.
    window: PageWindow,
    /// Serialises inserts and evictions.
    append_lock: Mutex<()>,
    pub evicted_records: AtomicU64,
    /// Inserts skipped because the frame their new page needs was still held by a reader.
    pub skipped_inserts: AtomicU64,
}

impl ReadCache {
    /// A cache of `max_pages` (at least 2) pages of `page_size` bytes, which may grow to
    /// `page_limit` pages ([`ReadCache::resize`]).
    pub fn new(page_size: u64, max_pages: usize, page_limit: usize) -> ReadCache {
        let max_pages = max_pages.max(2);
        let page_limit = page_limit.max(max_pages);
        let window = PageWindow::new(page_size, page_limit, 0);
        window.ring().set_max_buffers(max_pages);
        ReadCache {
            page_size,
            max_pages: AtomicUsize::new(max_pages),
            page_limit,
            tail: AtomicU64::new(FIRST_OFFSET),
            window,
            append_lock: Mutex::new(()),
            evicted_records: AtomicU64::new(0),
            skipped_inserts: AtomicU64::new(0),
        }
    }

    /// Bytes of page buffers allocated (at most `max_pages` once readers of evicted pages left).
    pub fn memory_bytes(&self) -> u64 {
        self.window.ring().memory_bytes()
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.max_pages.load(SeqCst) as u64 * self.page_size
    }

    pub fn page_bytes(&self) -> u64 {
        self.page_size
    }

    /// Holds at most `pages` pages from now on (2 ..= the limit): a smaller cache evicts its
    /// oldest pages now (`unlink` as for [`ReadCache::insert`]); a larger one fills as records
    /// come.
    pub fn resize(&self, pages: usize, unlink: &mut dyn FnMut(u64, RecordView<'_>)) {
        let pages = pages.clamp(2, self.page_limit);
        let _only_one = self.append_lock.lock();
        self.max_pages.store(pages, SeqCst);
        self.window.ring().set_max_buffers(pages);
        // The tail page stays (the next insert appends to it).
        while self.window.pages_in_memory() > pages {
            self.evict_oldest(unlink);
        }
    }

    /// True for records among the oldest `bytes` of the cache (what one step less would drop).
    pub fn is_among_oldest(&self, address: u64, bytes: u64) -> bool {
        let offset = address & !READ_CACHE_FLAG;
        offset < self.tail.load(SeqCst).saturating_sub(self.capacity_bytes()) + bytes
    }

    /// The cached record at `address` (flagged), or `None` once its page was evicted.
    pub fn read(&self, address: u64) -> Option<OwnedRecord> {
        let offset = address & !READ_CACHE_FLAG;
        let found = self.window.with_page(offset, |page, at| {
            page.with_record(at, |bytes| {
                let view = RecordView::parse(bytes)?;
                let mut rec = OwnedRecord::from_view(&view);
                rec.invalid = record::is_invalid(bytes);
                Some(rec)
            })
        });
        found.flatten()
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
        self.window.with_page(offset, |page, at| page.set_byte_bits(at + record::INVALID_OFFSET, 1));
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
        let page_start = self.window.page_start(offset);
        if page_start > self.window.last_page() {
            while self.window.pages_in_memory() >= self.max_pages.load(SeqCst) {
                self.evict_oldest(unlink);
            }
            if !self.window.try_push(page_start) {
                self.skipped_inserts.fetch_add(1, SeqCst);
                return false;
            }
        }
        let written = {
            let guard = self.window.ring().protect();
            let page = self.window.ring().page(&guard, page_start);
            page.is_some_and(|p| p.write((offset - page_start) as usize, bytes))
        };
        if !written {
            return false;
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

    /// Evicts the oldest page: unlinks every record of it, moves `head` and retires its frame.
    fn evict_oldest(&self, unlink: &mut dyn FnMut(u64, RecordView<'_>)) {
        let head = self.window.head();
        {
            let guard = self.window.ring().protect();
            let page = self.window.ring().page(&guard, head);
            // The first page starts with unused bytes (offset 0 is never an address).
            let mut at = if head == 0 { FIRST_OFFSET as usize } else { 0 };
            while let Some(page) = &page {
                // Copied on the stack when small: eviction runs inside an insert, on the get path.
                let stored = page.with_record(at, |bytes| {
                    let Ok(Slot::Record(view)) = record::parse_slot(bytes, None) else { return None };
                    // Invalid records too: an in-place update of another key in the chain
                    // invalidates the head copy without swinging the entry away from it.
                    unlink((head + at as u64) | READ_CACHE_FLAG, view);
                    Some(view.stored_len())
                });
                let Some(stored) = stored else { break };
                self.evicted_records.fetch_add(1, SeqCst);
                at += stored;
            }
        }
        self.window.evict_oldest();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_read_invalidate_and_evict() {
        let cache = ReadCache::new(4096, 2, 2);
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
