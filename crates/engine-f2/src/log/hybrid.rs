//! The hot log: FASTER's HybridLog. Addresses `[head, tail)` are in a window of in-memory pages;
//! of those, `[read_only, tail)` is the mutable region (records updated in place) and
//! `[head, read_only)` is read-only (updates copy the record to the tail). `[begin, head)` lives
//! only in the segment files. Every page below `read_only` is immutable, and a page is written
//! to its segment file before it leaves memory.
//!
//! Memory safety: the in-memory pages are frames of a [`PageRing`] (a fixed circular array;
//! page `s` in frame `(s / page_size) % (max_pages_in_memory + 1)`). A reader takes an epoch
//! guard, finds the frame (no lock, no reference count) and copies the record out; eviction
//! writes the page to its segment file, moves `head`, then retires the frame, whose buffer is
//! reused or freed only after every guard taken before the retire was dropped. A new tail page
//! whose frame is still retired waits for those readers (they hold a guard for one copy only).
//! Page bytes are atomic words; in-place updates go through the frame's seqlock, so a reader
//! racing one never returns a torn value (see `ring.rs`).
//!
//! Writers run concurrently (the engine serialises writers of one key only) and take no latch:
//! an append reserves its bytes with a CAS on the tail and copies them in under an epoch guard;
//! an in-place change checks `read_only` and writes under one guard. The thread that needs the
//! next page moves `read_only` and then waits out every older writer protection (a second
//! epoch, for writers only) before it flushes and evicts (FASTER's bump-and-wait), so no page
//! is written out while a writer still copies into it or changes it in place. Reads take no latch and do their disk reads with nothing held.

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use parking_lot::Mutex;
use strata_core::{Error, Result};

use super::epoch::Epoch;
use super::released_padding::ReleasedPadding;
use super::window::PageWindow;
use super::{
    load_tail_page, read_page_from_disk, record_in_page, record_on_disk, scan_read_pages, view_in_page,
    Bounds, SegmentedFile,
};
use crate::record::{self, OwnedRecord, RecordView};

pub struct HybridLog {
    pub file: SegmentedFile,
    page_size: u64,
    /// The window's size when nothing is lent (at least 2 pages).
    max_pages_in_memory: usize,
    mutable_fraction: f64,
    /// Bytes of the window's memory lent to structures that outgrew their own share (the hot
    /// index's overflow buckets); the window shrinks by that much, to no fewer than 2 pages.
    lent_bytes: AtomicU64,
    /// Bytes of the window lent to the read cache (engine/memory_split.rs); counted like
    /// `lent_bytes`, set by the maintenance worker only.
    read_cache_lent_bytes: AtomicU64,
    bounds: Bounds,
    /// Writers check it: records below it are never changed in place and no new append lands
    /// below it.
    read_only: AtomicU64,
    /// What `read_only` was once the writers that could have missed its move were waited out:
    /// every byte below it is complete and final. Readers that need immutable pages (compaction)
    /// go by this one; `read_only` runs ahead of it while a page turn waits.
    safe_read_only: AtomicU64,
    /// The in-memory pages `[head, last_page]`: pages below `head` are only in the segment
    /// files, `last_page` holds `tail`. Changed under `turn` only.
    window: PageWindow,
    /// Page-turn latch: one thread at a time installs the next page (moving `read_only`,
    /// flushing and evicting). Appends and in-place changes never take it.
    turn: Mutex<()>,
    /// Writers (appends, in-place changes) protect themselves here; a move of `read_only` waits
    /// for the older ones (`push_page`, `seal_to_tail`).
    writers: Epoch<()>,
    flush: Mutex<FlushState>,
    /// Padding of the pages compaction released, while records could still link into it: a
    /// read there is a lost record, not the end of a chain (see `released_padding.rs`).
    released_padding: ReleasedPadding,
}

/// Pages are flushed in pieces of at most this size (one reused buffer, no page-sized copy).
const FLUSH_PIECE_BYTES: u64 = 64 << 10;

struct FlushState {
    /// Everything below this address has been written to the segment files.
    until: u64,
    buffer: Vec<u8>,
}

impl HybridLog {
    /// Opens a hot log whose durable contents are `[begin, tail)`; the tail page is loaded. It
    /// keeps up to `released_padding_regions` regions of released padding.
    pub fn open(
        file: SegmentedFile,
        page_size: u64,
        max_pages_in_memory: usize,
        released_padding_regions: usize,
        mutable_fraction: f64,
        begin: u64,
        tail: u64,
    ) -> Result<HybridLog> {
        let max_pages = max_pages_in_memory.max(2);
        let (head, bytes) = load_tail_page(&file, page_size, begin, tail)?;
        let window = PageWindow::new(page_size, max_pages, head);
        let installed = {
            let guard = window.ring().protect();
            window.ring().page(&guard, head).is_some_and(|p| p.write(0, &bytes))
        };
        if !installed {
            return Err(Error::invalid("hot log tail page does not fit its frame"));
        }
        Ok(HybridLog {
            file,
            page_size,
            max_pages_in_memory: max_pages,
            mutable_fraction,
            lent_bytes: AtomicU64::new(0),
            read_cache_lent_bytes: AtomicU64::new(0),
            bounds: Bounds::new(begin, tail),
            read_only: AtomicU64::new(tail),
            safe_read_only: AtomicU64::new(tail),
            window,
            turn: Mutex::new(()),
            writers: Epoch::new(),
            flush: Mutex::new(FlushState { until: tail, buffer: Vec::new() }),
            released_padding: ReleasedPadding::new(released_padding_regions),
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

    /// Every byte below this address is complete and will not change (see `safe_read_only`).
    pub fn safe_read_only(&self) -> u64 {
        self.safe_read_only.load(SeqCst)
    }
    pub fn head(&self) -> u64 {
        self.window.head()
    }
    pub fn truncations(&self) -> u64 {
        self.bounds.truncations()
    }
    /// Bytes of page buffers allocated (the window, plus pages retired while readers held them)
    /// and of the released padding kept.
    pub fn memory_bytes(&self) -> u64 {
        self.window.ring().memory_bytes() + self.released_padding.memory_bytes()
    }
    pub fn size_bytes(&self) -> u64 {
        self.bounds.size_bytes()
    }
    /// New tail pages that waited for readers of their frame's previous page.
    pub fn frame_waits(&self) -> u64 {
        self.window.ring().frame_waits()
    }

    /// Lends `bytes` of the in-memory window to another structure: from the next page change on,
    /// the window holds that much less (at least 2 pages). Any writer may call it; the last store wins.
    pub fn set_lent_bytes(&self, bytes: u64) {
        self.lent_bytes.store(bytes, SeqCst);
    }

    /// Lends `bytes` of the window to the read cache (replacing what was lent to it before). A
    /// smaller window takes effect at the next page change or [`HybridLog::shrink_window`].
    pub fn set_read_cache_lent_bytes(&self, bytes: u64) {
        self.read_cache_lent_bytes.store(bytes, SeqCst);
    }

    /// The number of in-memory pages the window may hold now.
    pub fn window_pages(&self) -> usize {
        let lent = self.lent_bytes.load(SeqCst).saturating_add(self.read_cache_lent_bytes.load(SeqCst));
        let lent_pages = lent.div_ceil(self.page_size);
        let lent_pages = usize::try_from(lent_pages).unwrap_or(usize::MAX);
        self.max_pages_in_memory.saturating_sub(lent_pages).max(2)
    }

    /// Appends an encoded record, sealed at its address (`record::seal`), and returns the
    /// address. Appenders run concurrently: each reserves its bytes by a CAS on the tail, seals
    /// and copies them in, all under an epoch guard. One that needs the next page installs it
    /// under the page-turn latch (see `push_page`).
    pub fn append(&self, bytes: &mut [u8]) -> Result<u64> {
        let body_len = record::body_len(bytes)
            .ok_or_else(|| Error::invalid("hot log append: the bytes are not a record"))?;
        let len = bytes.len() as u64;
        if len > self.page_size {
            return Err(Error::invalid(format!(
                "record of {len} bytes exceeds the page size {}",
                self.page_size
            )));
        }
        loop {
            let needed_page = {
                let _writer = self.writers.guard();
                let guard = self.window.ring().protect();
                let seen = self.tail();
                let mut address = seen;
                // A page turn may have made the tail page read-only (its bytes past the tail stay
                // zero: padding); appends then go to the next page.
                if address % self.page_size + len > self.page_size || address < self.read_only() {
                    address = address - address % self.page_size + self.page_size;
                }
                let page_start = self.window.page_start(address);
                if page_start <= self.window.last_page() {
                    if !self.bounds.cas_tail(seen, address + len) {
                        continue;
                    }
                    record::seal_body(bytes, body_len, self.file.checksum_address(address));
                    let page = self.window.ring().page(&guard, page_start);
                    if !page.is_some_and(|p| p.write((address - page_start) as usize, bytes)) {
                        return Err(Error::invalid("hot log tail page missing"));
                    }
                    return Ok(address);
                }
                page_start
            };
            let _one_turner = self.turn.lock();
            if needed_page > self.window.last_page() {
                self.push_page(needed_page)?;
            }
        }
    }

    /// Adds the page starting at `page_start` (the next one after the last), evicting the oldest
    /// pages while the window is full, and moves `read_only` so the mutable region stays
    /// `mutable_fraction` of the window (at least past every evicted page). Caller holds the
    /// page-turn latch and no guard.
    ///
    /// FASTER's bump-and-wait: after `read_only` moves, every writer protection older than the
    /// move is waited out. Writers check `read_only` (in-place changes) or reserve tail bytes
    /// (appends) under one, so once the wait returns no writer is still changing or copying
    /// into a page below the new `read_only`, and it can be written out and evicted. Readers
    /// use the ring's own epoch and never delay a page turn (only the reuse of a frame).
    fn push_page(&self, page_start: u64) -> Result<()> {
        let window_pages = self.window_pages();
        self.window.ring().set_max_buffers(window_pages);
        let mutable_pages =
            ((window_pages as f64 * self.mutable_fraction) as usize).clamp(1, window_pages - 1);
        let mutable_floor = page_start.saturating_sub((mutable_pages as u64 - 1) * self.page_size);
        let evicted_pages = (self.window.pages_in_memory() + 1).saturating_sub(window_pages) as u64;
        let evict_until = self.head() + evicted_pages * self.page_size;
        let new_read_only = mutable_floor.max(evict_until);
        if self.read_only.fetch_max(new_read_only, SeqCst) < new_read_only {
            self.writers.wait_for_older();
        }
        self.safe_read_only.fetch_max(new_read_only, SeqCst);
        while self.window.pages_in_memory() + 1 > window_pages {
            // Immutable and waited for above; on the OS before it leaves memory.
            self.flush_until(self.head() + self.page_size)?;
            // Readers that see the new head go to disk; those that saw the old one hold guards
            // that keep the frame from being reclaimed.
            self.window.evict_oldest();
        }
        self.window.push_waiting(page_start);
        Ok(())
    }

    /// Evicts the oldest pages until the window holds no more than it may now (after memory was
    /// lent away), without waiting for a page turn: a read-only phase turns none. The pages
    /// become read-only first, with the writers that could have missed it waited out, and are
    /// written out before they leave, as in a page turn.
    pub fn shrink_window(&self) -> Result<()> {
        let _one_turner = self.turn.lock();
        let window_pages = self.window_pages();
        self.window.ring().set_max_buffers(window_pages);
        let excess_pages = self.window.pages_in_memory().saturating_sub(window_pages) as u64;
        if excess_pages == 0 {
            return Ok(());
        }
        let evict_until = self.head() + excess_pages * self.page_size;
        if self.read_only.fetch_max(evict_until, SeqCst) < evict_until {
            self.writers.wait_for_older();
        }
        self.safe_read_only.fetch_max(evict_until, SeqCst);
        while self.window.pages_in_memory() > window_pages {
            self.flush_until(self.head() + self.page_size)?;
            self.window.evict_oldest();
        }
        Ok(())
    }

    /// Writes every page byte below `target` to the segment files (not synced). Pages go out in
    /// pieces of at most `FLUSH_PIECE_BYTES` through one reused buffer, each copied under a guard
    /// and written with none held; bytes below `target` are immutable (below `read_only`), so the
    /// pieces of a page agree with each other.
    pub fn flush_until(&self, target: u64) -> Result<()> {
        let mut flush = self.flush.lock();
        let FlushState { until: flushed, buffer } = &mut *flush;
        while *flushed < target {
            let page_start = self.window.page_start(*flushed);
            // Pages wholly below `begin` were compacted away; their segments may be deleted.
            if page_start + self.page_size > self.begin() {
                let piece_bytes = self.page_size.min(FLUSH_PIECE_BYTES);
                for piece in (0..self.page_size).step_by(piece_bytes as usize) {
                    {
                        let guard = self.window.ring().protect();
                        let page = self.window.ring().page(&guard, page_start);
                        let page = page.ok_or_else(|| Error::invalid("unflushed hot page left memory"))?;
                        page.copy_range(piece as usize, piece_bytes as usize, buffer);
                    }
                    self.file.write_at(page_start + piece, buffer)?;
                }
            }
            *flushed = (page_start + self.page_size).min(target);
        }
        Ok(())
    }

    /// Makes everything below the tail immutable: once it returns, no in-place change below the
    /// tail is in flight or can start. Checkpoints call it under the engine's exclusive write
    /// lock, so every reserved record below the tail is complete. Caller holds no guard.
    pub fn seal_to_tail(&self) -> u64 {
        let tail = self.tail();
        if self.read_only.fetch_max(tail, SeqCst) < tail {
            self.writers.wait_for_older();
        }
        self.safe_read_only.fetch_max(tail, SeqCst);
        tail
    }

    /// The record at `address`, or `None` if the log was truncated past it (corruption if it
    /// was truncated as padding: a link never names padding, so records there were lost).
    pub fn read(&self, address: u64) -> Result<Option<OwnedRecord>> {
        if address < self.begin() {
            if self.released_padding.contains(address) {
                return Err(self.file.corruption(address, format!("a hash chain links to address {address}, which compaction released as page padding: the record there is missing")));
            }
            return Ok(None);
        }
        let in_memory = self.window.with_page(address, |page, offset| {
            page.with_record(offset, |bytes| record_in_page(&self.file, bytes, address, address))
        });
        if let Some(found) = in_memory {
            return found;
        }
        record_on_disk(&self.file, self.page_size, &self.bounds, address)
    }

    /// Whether the record at `address` is `key`'s, and its previous address, without copying
    /// it out of an in-memory page (a hash-chain step); `None` as `read` gives `None`.
    pub fn probe(&self, address: u64, key: &[u8]) -> Result<Option<(bool, u64)>> {
        if address >= self.begin() {
            let in_memory = self.window.with_page(address, |page, offset| {
                page.with_record(offset, |bytes| {
                    view_in_page(&self.file, bytes, address, address, |v| {
                        Some((v.key == key, v.prev_address))
                    })
                })
            });
            if let Some(found) = in_memory {
                return found;
            }
        }
        Ok(self.read(address)?.map(|rec| (rec.key == key, rec.prev_address)))
    }

    /// Changes the record at `address` in place if it is at or above `read_only` (`change` edits
    /// a copy, written back under the page's seqlock). The check and the change run under one
    /// guard, so a move of `read_only` past the record waits for the change before the page
    /// can be written out (`push_page`, `seal_to_tail`).
    fn change_if_mutable(&self, address: u64, change: impl FnOnce(&mut [u8]) -> bool) -> bool {
        let _writer = self.writers.guard();
        let guard = self.window.ring().protect();
        if address < self.read_only() {
            return false;
        }
        let page_start = self.window.page_start(address);
        let Some(page) = self.window.ring().page(&guard, page_start) else { return false };
        page.update_record((address - page_start) as usize, change)
    }

    /// Overwrites the value of the record at `address` if it is in the mutable region and holds
    /// a value of the same length. The caller holds the key's write latch.
    pub fn update_in_place(&self, address: u64, new_value: &[u8]) -> bool {
        self.change_if_mutable(address, |r| {
            record::overwrite_value(r, new_value, self.file.checksum_address(address))
        })
    }

    /// Rewrites the previous-address field of a record its caller appended and has not
    /// published. False if the record is below `read_only` by now (its page may have been
    /// written out already): the caller then appends a fresh copy instead.
    pub fn set_prev_address(&self, address: u64, prev: u64) -> bool {
        self.change_if_mutable(address, |r| {
            record::set_prev_address(r, prev, self.file.checksum_address(address))
        })
    }

    /// A copy of the page starting at `page_start`, from memory or disk.
    pub fn read_page(&self, page_start: u64) -> Result<Vec<u8>> {
        {
            let guard = self.window.ring().protect();
            if let Some(page) = self.window.ring().page(&guard, page_start) {
                return Ok(page.to_bytes());
            }
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
        scan_read_pages(&self.file, self.page_size, from, to, &|p| self.read_page(p), on_record)
    }

    /// Moves `begin` forward; the counter moves first so a reader that sees the new `begin` also
    /// sees the new count.
    pub fn truncate(&self, new_begin: u64) {
        self.bounds.truncate(new_begin);
        self.released_padding.forget_below(new_begin);
    }

    /// `truncate` to `page_end`, the end of a page compaction is done with, whose records ended
    /// at `padding_start` (the page ended in padding there).
    pub fn release_page(&self, page_end: u64, padding_start: Option<u64>) {
        let Some(start) = padding_start else {
            return self.truncate(page_end);
        };
        // Noted before the truncation, so no read below `begin` misses it; linkable by the
        // records appended up to the truncation, so its tail is read after it.
        self.released_padding.note(start, page_end);
        self.truncate(page_end);
        self.released_padding.linkable_below(self.tail());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use strata_io::MemStorage;

    use super::*;
    use crate::log::FIRST_ADDRESS;

    pub(super) const PAGE: u64 = 4096;

    /// An empty hot log in memory: pages of `PAGE` bytes, a window of 3 pages.
    pub(super) fn empty_log(mutable_fraction: f64) -> HybridLog {
        let file = SegmentedFile::new(Arc::new(MemStorage::new()), "f2-hot-", 16 << 10);
        HybridLog::open(file, PAGE, 3, 8, mutable_fraction, FIRST_ADDRESS, FIRST_ADDRESS).unwrap()
    }

    /// Record `i`: key `i`, a 100-byte value of `i as u8`.
    pub(super) fn encoded(i: u32) -> Vec<u8> {
        record::encode(&i.to_le_bytes(), Some(&[i as u8; 100]), 0)
    }

    /// Records stay readable while their pages move from the mutable region to read-only to
    /// disk; in-place updates only happen in the mutable region.
    #[test]
    fn regions_eviction_and_in_place_updates() {
        let log = empty_log(0.67);
        let mut addresses = Vec::new();
        for i in 0..300u32 {
            let value = [i as u8; 50];
            addresses.push(log.append(&mut record::encode(&i.to_le_bytes(), Some(&value), 0)).unwrap());
        }
        assert!(log.head() > FIRST_ADDRESS, "old pages were evicted");
        assert!(log.window.ring().memory_bytes() <= 3 * PAGE);
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

#[cfg(test)]
mod epoch_tests {
    use super::tests::{empty_log, encoded, PAGE};

    /// Compaction may not take `read_only` as "everything below is final": a page turn publishes
    /// `read_only` before it has waited out the writers that checked the old value — one may
    /// still update a record in place or copy in bytes it reserved. `safe_read_only` moves only
    /// after that wait.
    #[test]
    fn a_page_turn_waiting_for_a_writer_does_not_advance_safe_read_only() {
        let log = empty_log(0.34);
        let mut i = 0;
        while log.tail() < 2 * PAGE + PAGE / 2 {
            log.append(&mut encoded(i)).unwrap();
            i += 1;
        }
        let settled = log.safe_read_only();
        assert_eq!(settled, log.read_only());
        std::thread::scope(|s| {
            let in_flight_writer = log.writers.guard();
            let appender = s.spawn(|| {
                let mut j = 1000;
                while log.tail() < 4 * PAGE {
                    log.append(&mut encoded(j)).unwrap();
                    j += 1;
                }
            });
            let started = std::time::Instant::now();
            while log.read_only() == settled {
                assert!(started.elapsed().as_secs() < 10, "the page turn never moved read_only");
                std::thread::yield_now();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!appender.is_finished(), "the page turn did not wait for the in-flight writer");
            assert_eq!(log.safe_read_only(), settled, "safe_read_only moved before the wait ended");
            drop(in_flight_writer);
            appender.join().unwrap();
        });
        assert!(log.safe_read_only() > settled);
        assert_eq!(log.safe_read_only(), log.read_only());
    }

    /// A reader holding its guard across the eviction of its page keeps reading the page's
    /// bytes, and the frame is not reused (the appender that needs it waits) until the guard
    /// goes; later readers of the evicted page read it from disk.
    #[test]
    fn a_guarded_reader_keeps_its_page_across_eviction_and_blocks_frame_reuse() {
        // Window of 3 pages, so 4 frames: page p shares its frame with page p + 4 pages.
        let log = empty_log(0.67);
        let mut first_record = encoded(0);
        let first = log.append(&mut first_record).unwrap();
        let page_start = first - first % PAGE;
        let reuse_page = page_start + 4 * PAGE;
        let offset = (first - page_start) as usize;
        std::thread::scope(|s| {
            let guard = log.window.ring().protect();
            let page = log.window.ring().page(&guard, page_start).unwrap();
            let appender = s.spawn(|| {
                let mut i = 1;
                while log.tail() < reuse_page + PAGE / 2 {
                    log.append(&mut encoded(i)).unwrap();
                    i += 1;
                }
            });
            while log.frame_waits() == 0 {
                assert!(!appender.is_finished(), "the appender reused the frame under the reader");
                std::thread::yield_now();
            }
            // The appender is waiting for the frame: the page was evicted long ago.
            assert!(log.head() > first);
            assert!(log.tail() <= reuse_page, "nothing was appended to the frame's next page");
            assert_eq!(page.read_record(offset), first_record, "the reader's bytes are intact");
            assert_eq!(log.read(first).unwrap().unwrap().value, vec![0u8; 100], "new readers go to disk");
            drop(guard);
            appender.join().unwrap();
        });
        assert!(log.tail() > reuse_page);
        let guard = log.window.ring().protect();
        assert!(log.window.ring().page(&guard, page_start).is_none());
        assert!(log.window.ring().page(&guard, reuse_page).is_some(), "the frame now holds the new page");
        assert!(log.window.ring().memory_bytes() <= 4 * PAGE);
    }
}
