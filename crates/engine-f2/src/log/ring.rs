//! A fixed circular array of page frames under epoch protection: the in-memory pages of the hot
//! log and of the read cache. The page starting at `s` lives in frame `(s / page_size) % frames`.
//!
//! Memory safety: a reader calls [`PageRing::protect`] and then finds a page with
//! [`PageRing::page`], which checks the frame's `page_start` and hands out a [`PageRef`] that
//! borrows the guard. The owner evicts a page by [`PageRing::retire`]: the frame's `page_start`
//! is cleared (new readers do not find it) and the frame index is bumped into the epoch; its
//! buffer is reclaimed (kept as the one spare or freed) only once every protection taken before
//! the retire is released (`take_safe`, see `epoch.rs` for the ordering argument), and only a
//! reclaimed frame can be installed again. So a `PageRef` never points at freed or reused memory.
//!
//! Data races: page bytes are `AtomicU64` words, so concurrent accesses are never UB. Records are
//! 8-byte aligned and padded, so a record is a run of whole words. Appends write words no reader
//! can reach yet (the record is published afterwards by a `SeqCst` store or CAS). An in-place
//! update of a published record goes through a per-frame seqlock: readers copy the record and
//! retry if the frame's version was odd or changed, so they never return a torn value. A seqlock
//! rather than a reader/writer latch, so readers write no shared cache line and never wait for one
//! another; in-place writers of one frame exclude each other through the same version word (a CAS
//! from even to odd), held for one record's copy and write-back.
//!
//! `model.rs` model-checks retire, reclaim and reinstall against guarded readers with loom
//! (`scripts/loom.sh`); each frame's [`BufferAccess`] lets loom see every reader's use of a buffer.

use std::ptr::{self, NonNull};
use std::sync::atomic::{Ordering::Acquire, Ordering::Relaxed, Ordering::Release, Ordering::SeqCst};

use super::epoch::{Epoch, Protection};
use super::sync::{fence, spin_loop, yield_now, AtomicPtr, AtomicU64, BufferAccess, Mutex, SharedAccess};
use crate::record;

/// `Frame::page_start` of a frame that holds no page.
const NO_PAGE: u64 = u64::MAX;
const WORD_BYTES: usize = 8;
/// How often an install retries reclaiming a retired buffer before it allocates a new one (an
/// optimisation, not part of the protocol: the loom model explores one retry, not a hundred).
const SPARE_WAIT_TRIES: u32 = if cfg!(feature = "loom") { 1 } else { 100 };
/// Records up to this size are copied to the stack by [`PageRef::with_record`].
const STACK_RECORD_BYTES: usize = 512;

type Buffer = Box<[AtomicU64]>;

struct Frame {
    /// Start address of the page held, or `NO_PAGE`. Set after `words`, cleared by `retire`.
    page_start: AtomicU64,
    /// Seqlock over in-place updates: odd while one is being written; a writer makes it odd by
    /// a CAS, which also keeps other in-place writers of the frame out.
    version: AtomicU64,
    /// The page's words (`words_per_page` of them, from `Box::into_raw`), or null once
    /// reclaimed. Non-null with `page_start == NO_PAGE` means "retired, waiting for readers".
    words: AtomicPtr<AtomicU64>,
    /// Shared by every `PageRef` of the frame, taken exclusively when the buffer is taken out
    /// (a no-op outside the loom model).
    access: BufferAccess,
}

pub struct PageRing {
    page_size: u64,
    words_per_page: usize,
    frames: Box<[Frame]>,
    /// Indexes of frames retired and not yet reclaimed.
    epoch: Epoch<usize>,
    /// One reclaimed buffer kept for the next install (saves a free and an allocation per page).
    spare: Mutex<Option<Buffer>>,
    /// Buffers allocated (in frames, retired or spare).
    buffers: AtomicU64,
    /// A reclaimed buffer is kept as the spare only while `buffers` is at most this (the owner's
    /// window, which may shrink), else freed.
    max_buffers: AtomicU64,
    /// Installs that found their frame still retired and waited for readers to leave.
    frame_waits: AtomicU64,
}

/// An epoch protection on a ring; pages found through it stay valid until it is dropped.
pub struct Guard<'a> {
    /// The ring whose epoch `protection` is in ([`PageRing::page`] checks it).
    ring: &'a PageRing,
    protection: Protection<'a, usize>,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        // Released first, so the reclaim below is not held back by this guard itself.
        self.protection.release();
        if self.ring.epoch.has_pending() {
            self.ring.reclaim();
        }
    }
}

/// A page found under a guard.
pub struct PageRef<'g> {
    frame: &'g Frame,
    words: &'g [AtomicU64],
    /// This reader's use of the buffer, for the loom model (zero-sized otherwise).
    _access: SharedAccess,
}

impl PageRing {
    /// A ring of `frame_count` frames (at least 2) of `page_size` bytes (a multiple of 8);
    /// buffers are allocated on first install.
    pub fn new(page_size: u64, frame_count: usize) -> PageRing {
        let frames = (0..frame_count.max(2))
            .map(|_| Frame {
                page_start: AtomicU64::new(NO_PAGE),
                version: AtomicU64::new(0),
                words: AtomicPtr::new(ptr::null_mut()),
                access: BufferAccess::default(),
            })
            .collect();
        PageRing {
            page_size,
            words_per_page: (page_size as usize).div_ceil(WORD_BYTES),
            frames,
            epoch: Epoch::new(),
            spare: Mutex::new(None),
            buffers: AtomicU64::new(0),
            max_buffers: AtomicU64::new(frame_count as u64),
            frame_waits: AtomicU64::new(0),
        }
    }

    pub fn protect(&self) -> Guard<'_> {
        Guard { ring: self, protection: self.epoch.guard() }
    }

    /// The frame a page maps to, with its index.
    fn frame_of(&self, page_start: u64) -> Option<(usize, &Frame)> {
        let index = ((page_start / self.page_size) % self.frames.len() as u64) as usize;
        self.frames.get(index).map(|f| (index, f))
    }

    /// The in-memory page starting at `page_start`, valid while `guard` is held.
    pub fn page<'g>(&'g self, guard: &'g Guard<'_>, page_start: u64) -> Option<PageRef<'g>> {
        // Memory safety rests on the guard protecting *this* ring's epoch: checked in release too.
        assert!(std::ptr::eq(guard.ring, self), "a guard of another ring");
        let (_, frame) = self.frame_of(page_start)?;
        if page_start == NO_PAGE || frame.page_start.load(SeqCst) != page_start {
            return None;
        }
        let words = NonNull::new(frame.words.load(SeqCst))?;
        // Taken before the buffer is touched, so the model flags a reclaim racing this reader.
        let access = frame.access.shared();
        // SAFETY: `words` came from `Box::into_raw` of a `words_per_page` buffer. The frame held
        // this page after `guard` was taken (checked just above), so its retire comes after the
        // guard's protection and the buffer is reclaimed only after `guard` is dropped; the
        // returned reference borrows `guard`.
        let words = unsafe { std::slice::from_raw_parts(words.as_ptr().cast_const(), self.words_per_page) };
        Some(PageRef { frame, words, _access: access })
    }

    /// Installs a zeroed buffer for the page starting at `page_start` in its frame; false if
    /// the frame's previous page is still retired (a reader from before its retire is active).
    /// Installs are serialised by the caller.
    pub fn install(&self, page_start: u64) -> bool {
        self.reclaim();
        let Some((_, frame)) = self.frame_of(page_start) else { return false };
        if !frame.words.load(SeqCst).is_null() {
            return false;
        }
        let mut spare = self.spare.lock().take();
        // A retired frame's buffer usually frees within a reader's copy: wait for it briefly
        // rather than allocate a page now and free one later.
        let mut tries = 0;
        while spare.is_none() && self.epoch.has_pending() && tries < SPARE_WAIT_TRIES {
            yield_now();
            self.reclaim();
            spare = self.spare.lock().take();
            tries += 1;
        }
        let buffer = match spare {
            Some(buffer) => {
                for w in buffer.iter() {
                    w.store(0, Relaxed);
                }
                buffer
            }
            None => {
                self.buffers.fetch_add(1, SeqCst);
                (0..self.words_per_page).map(|_| AtomicU64::new(0)).collect()
            }
        };
        frame.words.store(Box::into_raw(buffer).cast::<AtomicU64>(), SeqCst);
        frame.page_start.store(page_start, SeqCst);
        true
    }

    /// [`PageRing::install`], waiting for readers of the frame's previous page to leave.
    pub fn install_waiting(&self, page_start: u64) {
        if self.install(page_start) {
            return;
        }
        self.frame_waits.fetch_add(1, SeqCst);
        while !self.install(page_start) {
            yield_now();
        }
    }

    /// Unlinks the page starting at `page_start` (new lookups do not find it); its buffer is
    /// reclaimed once every reader that could hold it has left.
    pub fn retire(&self, page_start: u64) {
        let Some((index, frame)) = self.frame_of(page_start) else { return };
        if frame.page_start.compare_exchange(page_start, NO_PAGE, SeqCst, SeqCst).is_ok() {
            self.epoch.bump(index);
            self.reclaim();
        }
    }

    /// Reclaims every retired frame no reader can reach any more: keeps one buffer as the spare,
    /// frees the others.
    pub fn reclaim(&self) {
        for index in self.epoch.take_safe() {
            let Some(frame) = self.frames.get(index) else { continue };
            let Some(buffer) = self.take_buffer(frame) else { continue };
            let mut spare = self.spare.lock();
            if spare.is_none() && self.buffers.load(SeqCst) <= self.max_buffers.load(SeqCst) {
                *spare = Some(buffer);
            } else {
                self.buffers.fetch_sub(1, SeqCst);
            }
        }
    }

    fn take_buffer(&self, frame: &Frame) -> Option<Buffer> {
        // Every reader of the frame's buffer must be done (happens-before) by now; the model
        // checks it. Before the swap, so an install that sees the frame empty is ordered after.
        frame.access.exclusive();
        let words = NonNull::new(frame.words.swap(ptr::null_mut(), SeqCst))?;
        // SAFETY: the pointer came from `Box::into_raw` of a buffer of `words_per_page` words and
        // was swapped out of the frame, so this is its only owner.
        Some(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(words.as_ptr(), self.words_per_page)) })
    }

    /// Sets how many buffers the ring keeps allocated at most once readers have left (a
    /// reclaimed buffer beyond it is freed rather than kept as the spare).
    pub fn set_max_buffers(&self, max_buffers: usize) {
        self.max_buffers.store(max_buffers as u64, SeqCst);
    }

    /// Bytes of page buffers allocated (live, retired and spare).
    pub fn memory_bytes(&self) -> u64 {
        self.buffers.load(SeqCst) * self.page_size
    }

    pub fn frame_waits(&self) -> u64 {
        self.frame_waits.load(SeqCst)
    }

    #[cfg(test)]
    pub fn retired_frames(&self) -> usize {
        self.frames
            .iter()
            .filter(|f| f.page_start.load(SeqCst) == NO_PAGE && !f.words.load(SeqCst).is_null())
            .count()
    }
}

impl Drop for PageRing {
    fn drop(&mut self) {
        for frame in self.frames.iter() {
            drop(self.take_buffer(frame));
        }
    }
}

/// Stores `bytes` into `words` (a partial last word zero padded).
fn store_bytes(words: &[AtomicU64], bytes: &[u8]) {
    for (w, chunk) in words.iter().zip(bytes.chunks(WORD_BYTES)) {
        let mut word = [0u8; WORD_BYTES];
        word.get_mut(..chunk.len()).unwrap_or_default().copy_from_slice(chunk);
        w.store(u64::from_le_bytes(word), Relaxed);
    }
}

/// Optimistic copies of a frame a reader tries before it takes the frame's version itself.
const OPTIMISTIC_READ_TRIES: u32 = 16;

/// Waiting for an in-place writer of a frame (a copy and write-back of one record): spin
/// briefly, then yield, in case the writer's thread is not running.
fn back_off(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        spin_loop();
    } else {
        yield_now();
    }
}

impl PageRef<'_> {
    fn word_range(&self, offset: usize, len: usize) -> Option<&[AtomicU64]> {
        if !offset.is_multiple_of(WORD_BYTES) {
            return None;
        }
        let first = offset / WORD_BYTES;
        self.words.get(first..first.checked_add(len.div_ceil(WORD_BYTES))?)
    }

    /// Runs `copy` until it ran while no in-place update of the frame did (the seqlock's
    /// optimistic read). After `OPTIMISTIC_READ_TRIES` failures it takes the version like a
    /// writer, copies, and puts the same version back (nothing changed), so a reader never
    /// starves behind a stream of updates to other records of its frame.
    fn read_consistently<R>(&self, mut copy: impl FnMut() -> R) -> R {
        let mut spins = 0;
        for _ in 0..OPTIMISTIC_READ_TRIES {
            let before = self.frame.version.load(Acquire);
            if before.is_multiple_of(2) {
                let out = copy();
                fence(Acquire);
                if self.frame.version.load(Relaxed) == before {
                    return out;
                }
            }
            back_off(&mut spins);
        }
        let version = self.lock_version();
        let out = copy();
        self.frame.version.store(version, Release);
        out
    }

    /// Copies `words` out under the frame's seqlock.
    fn copy_consistent(&self, words: &[AtomicU64], out: &mut Vec<u8>) {
        self.read_consistently(|| {
            out.clear();
            for w in words {
                out.extend_from_slice(&w.load(Relaxed).to_le_bytes());
            }
        });
    }

    /// A consistent copy of the record slot at `offset` (its stored length, cut at the page
    /// end); empty if `offset` is not a record position. The bytes are not checked.
    pub fn read_record(&self, offset: usize) -> Vec<u8> {
        let mut out = Vec::new();
        self.read_consistently(|| self.copy_record(offset, &mut out));
        out
    }

    /// Calls `f` with a consistent copy of the record slot at `offset` (as [`PageRef::read_record`]),
    /// made on the stack when the record is small (no allocation on the read path).
    pub fn with_record<R>(&self, offset: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        let mut stack = [0u8; STACK_RECORD_BYTES];
        match self.read_consistently(|| self.copy_small_record(offset, &mut stack)) {
            Some(len) => f(stack.get(..len).unwrap_or_default()),
            None => f(&self.read_record(offset)),
        }
    }

    /// Copies the record slot at `offset` into `out` if it fits; its length, or `None`.
    fn copy_small_record(&self, offset: usize, out: &mut [u8; STACK_RECORD_BYTES]) -> Option<usize> {
        if !offset.is_multiple_of(WORD_BYTES) {
            return Some(0);
        }
        let rest = self.words.get(offset / WORD_BYTES..).unwrap_or_default();
        let copy = |words: &[AtomicU64], out: &mut [u8]| -> usize {
            let mut len = 0;
            for (w, slot) in words.iter().zip(out.chunks_exact_mut(WORD_BYTES)) {
                slot.copy_from_slice(&w.load(Relaxed).to_le_bytes());
                len += WORD_BYTES;
            }
            len
        };
        let header_words = record::HEADER_BYTES / WORD_BYTES;
        let header_len = copy(rest.get(..header_words).unwrap_or(rest), out);
        let stored = record::stored_len_of_header(out.get(..header_len)?).unwrap_or(0);
        if stored > STACK_RECORD_BYTES {
            return None;
        }
        let words = rest.get(..stored / WORD_BYTES).unwrap_or(rest);
        Some(header_len.max(copy(words, out)))
    }

    /// Copies the record slot at `offset` into `out` with no consistency check.
    fn copy_record(&self, offset: usize, out: &mut Vec<u8>) {
        out.clear();
        if !offset.is_multiple_of(WORD_BYTES) {
            return;
        }
        // Room for a small record at once, and for a larger one once its header says how
        // large: not a reallocation per doubling as its words arrive.
        out.reserve(STACK_RECORD_BYTES);
        let rest = self.words.get(offset / WORD_BYTES..).unwrap_or_default();
        let header_words = record::HEADER_BYTES / WORD_BYTES;
        for w in rest.iter().take(header_words) {
            out.extend_from_slice(&w.load(Relaxed).to_le_bytes());
        }
        let stored = record::stored_len_of_header(out).unwrap_or(0);
        out.reserve(stored.saturating_sub(out.len()));
        for w in rest.iter().take(stored.div_ceil(WORD_BYTES)).skip(header_words) {
            out.extend_from_slice(&w.load(Relaxed).to_le_bytes());
        }
    }

    /// A consistent copy of the page bytes `[offset, offset + len)` (word aligned; cut at the
    /// page end) into `out`.
    pub fn copy_range(&self, offset: usize, len: usize, out: &mut Vec<u8>) {
        let words = self.words.get(offset / WORD_BYTES..).unwrap_or_default();
        let words = words.get(..len.div_ceil(WORD_BYTES)).unwrap_or(words);
        self.copy_consistent(words, out);
    }

    /// A consistent copy of the whole page.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.words.len() * WORD_BYTES);
        self.copy_consistent(self.words, &mut out);
        out
    }

    /// Writes `bytes` at `offset` (a word boundary; a partial last word is zero padded). For
    /// bytes no reader can reach yet (an append). False if it does not fit.
    pub fn write(&self, offset: usize, bytes: &[u8]) -> bool {
        let Some(words) = self.word_range(offset, bytes.len()) else { return false };
        store_bytes(words, bytes);
        true
    }

    /// Changes the published record at `offset` in place: `change` gets a copy of it and
    /// returns whether to write it back. All of it runs with the frame's version odd (taken by
    /// CAS, so in-place writers of one frame take turns; readers retry meanwhile).
    pub fn update_record(&self, offset: usize, change: impl FnOnce(&mut [u8]) -> bool) -> bool {
        let version = self.lock_version();
        let mut copy = Vec::new();
        self.copy_record(offset, &mut copy);
        let words = self.word_range(offset, copy.len());
        let changed = !copy.is_empty() && words.is_some() && change(&mut copy);
        if let (true, Some(words)) = (changed, words) {
            store_bytes(words, &copy);
        }
        self.frame.version.store(version + 2, Release);
        changed
    }

    /// Makes the frame's version odd (from the even `version` returned), waiting out another
    /// in-place writer.
    fn lock_version(&self) -> u64 {
        let mut spins = 0;
        loop {
            let version = self.frame.version.load(Relaxed);
            if version.is_multiple_of(2)
                && self.frame.version.compare_exchange_weak(version, version + 1, Acquire, Relaxed).is_ok()
            {
                // Orders the odd version before the data stores that follow (seqlock writer).
                fence(Release);
                return version;
            }
            back_off(&mut spins);
        }
    }

    /// Sets bits `mask` of the byte at `offset` atomically (a flag no reader needs consistent
    /// with anything else: the read cache's invalid byte).
    pub fn set_byte_bits(&self, offset: usize, mask: u8) {
        if let Some(w) = self.words.get(offset / WORD_BYTES) {
            w.fetch_or(u64::from(mask) << (8 * (offset % WORD_BYTES)), SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_frame_is_reused_only_after_its_readers_leave() {
        let ring = PageRing::new(64, 2);
        assert!(ring.install(0));
        let reader = ring.protect();
        let page = ring.page(&reader, 0).unwrap();
        assert!(page.write(8, &[5u8; 16]));
        ring.retire(0);
        assert!(ring.page(&ring.protect(), 0).is_none(), "new readers do not find it");
        assert!(!ring.install(128), "page 128 shares frame 0, still held by the reader");
        assert_eq!(page.to_bytes().get(8..24), Some(&[5u8; 16][..]), "the reader's page is intact");
        assert_eq!(ring.retired_frames(), 1);
        drop(reader);
        assert_eq!(ring.retired_frames(), 0, "dropping the last old guard reclaims the frame");
        assert!(ring.install(128));
        let guard = ring.protect();
        assert_eq!(ring.page(&guard, 128).unwrap().to_bytes(), vec![0u8; 64], "reused zeroed");
        assert_eq!(ring.memory_bytes(), 64, "the reclaimed buffer was reused");
    }

    /// The protocol under contention (and under miri, which flags any access to a freed buffer):
    /// the owner installs page i, fills it, and retires page i-1, while readers look up the two
    /// newest pages and read them through their guard. A reader sees a page's own bytes or the
    /// zeroes it was installed with, never another page's or freed memory.
    #[test]
    fn readers_racing_retire_and_reinstall_see_only_their_page() {
        const PAGE: u64 = 64;
        let rounds: u64 = if cfg!(miri) { 40 } else { 5_000 };
        let marker = |page: u64| (page % 251) as u8 + 1;
        let ring = PageRing::new(PAGE, 2);
        let newest = AtomicU64::new(0);
        // Set when the owner's loop ends, also by a panic in it, so the readers stop either way.
        struct Done<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
            }
        }
        let owner_done = std::sync::atomic::AtomicBool::new(false);
        assert!(ring.install(0));
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    while !owner_done.load(SeqCst) {
                        let guard = ring.protect();
                        let top = newest.load(SeqCst);
                        for page in [top.saturating_sub(1), top] {
                            if let Some(found) = ring.page(&guard, page * PAGE) {
                                let bytes = found.to_bytes();
                                assert!(
                                    bytes.iter().all(|&b| b == 0 || b == marker(page)),
                                    "page {page}: {bytes:?}"
                                );
                            }
                        }
                    }
                });
            }
            let _done = Done(&owner_done);
            for page in 0..=rounds {
                if page > 0 {
                    ring.install_waiting(page * PAGE);
                }
                let guard = ring.protect();
                assert!(ring.page(&guard, page * PAGE).unwrap().write(0, &[marker(page); PAGE as usize]));
                drop(guard);
                newest.store(page, SeqCst);
                if page > 0 {
                    ring.retire((page - 1) * PAGE);
                }
            }
        });
        ring.retire(rounds * PAGE);
        ring.reclaim();
        assert_eq!(ring.retired_frames(), 0, "every retired frame is reclaimed once readers left");
    }

    #[test]
    #[should_panic(expected = "a guard of another ring")]
    fn a_guard_of_another_ring_is_rejected() {
        let (ring, other) = (PageRing::new(64, 2), PageRing::new(64, 2));
        assert!(ring.install(0));
        let foreign = other.protect();
        let _ = ring.page(&foreign, 0);
    }

    #[test]
    fn in_place_updates_and_flags() {
        let ring = PageRing::new(4096, 2);
        assert!(ring.install(0));
        let guard = ring.protect();
        let page = ring.page(&guard, 0).unwrap();
        let rec = record::encode(b"key", Some(b"value-1"), 7);
        assert!(page.write(64, &rec));
        assert_eq!(page.read_record(64), rec);
        page.with_record(64, |bytes| assert_eq!(bytes, rec.as_slice()));
        let large = record::encode(b"large", Some(&[3u8; 700]), 9);
        assert!(page.write(1024, &large));
        page.with_record(1024, |bytes| assert_eq!(bytes, large.as_slice(), "copied to the heap"));
        assert!(page.update_record(64, |r| record::overwrite_value(r, b"value-2", 64)));
        let mut updated = record::encode(b"key", Some(b"value-2"), 7);
        assert!(record::seal(&mut updated, 64));
        assert_eq!(page.read_record(64), updated);
        assert!(page.read_record(65).is_empty(), "not a record position");
        page.set_byte_bits(64 + 13, 1);
        assert!(record::is_invalid(&page.read_record(64)));
        assert_eq!(page.read_record(4090).len(), 0, "a slot cut at the page end is empty or short");
    }
}
