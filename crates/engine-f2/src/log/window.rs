//! The window of in-memory pages `[head, last_page]` of a log kept in a [`PageRing`]: the hot
//! log's and the read cache's. Both add pages at the top and evict the oldest one at the bottom;
//! only the owner changes the window, one change at a time (the hot log's page-turn latch, the
//! read cache's append lock), while readers look pages up concurrently.
//!
//! Every access to `head` and `last_page` is `SeqCst`, like every access in the epoch's ordering
//! argument (`epoch.rs`). What is needed of them is at least release/acquire, for the two
//! "published after" rules on the fields below.

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use super::ring::{PageRef, PageRing};

pub struct PageWindow {
    ring: PageRing,
    page_size: u64,
    /// Start of the oldest in-memory page; pages below it are not in memory. Moved only after
    /// the owner made the page reachable elsewhere or not at all (the hot log wrote it to its
    /// segment file; the read cache swung every index entry away from it), so a reader that sees
    /// the new `head` and looks elsewhere finds what it needs there. A reader that saw the old
    /// one finds the frame through the ring, under a guard that keeps it from being reclaimed,
    /// or does not find it (retired) and looks elsewhere too.
    head: AtomicU64,
    /// Start of the newest in-memory page. Stored after the page's frame was installed, so a
    /// thread that sees it finds the frame.
    last_page: AtomicU64,
}

impl PageWindow {
    /// A window of at most `max_pages` pages of `page_size` bytes holding one zeroed page, the
    /// one starting at `first_page`. The ring has one frame more than the window: the frame a
    /// new page needs was retired a page earlier, so readers have had a page's worth of appends
    /// to leave it.
    pub fn new(page_size: u64, max_pages: usize, first_page: u64) -> PageWindow {
        let ring = PageRing::new(page_size, max_pages + 1);
        ring.set_max_buffers(max_pages);
        // A fresh ring has every frame free, so this install does not fail; an owner that needs
        // the page checks for it through `ring().page`.
        ring.install(first_page);
        PageWindow {
            ring,
            page_size,
            head: AtomicU64::new(first_page),
            last_page: AtomicU64::new(first_page),
        }
    }

    pub fn ring(&self) -> &PageRing {
        &self.ring
    }

    pub fn head(&self) -> u64 {
        self.head.load(SeqCst)
    }

    pub fn last_page(&self) -> u64 {
        self.last_page.load(SeqCst)
    }

    /// Start of the page holding `address`.
    pub fn page_start(&self, address: u64) -> u64 {
        address - address % self.page_size
    }

    /// Pages in `[head, last_page]`.
    pub fn pages_in_memory(&self) -> usize {
        let pages = (self.last_page() - self.head()) / self.page_size + 1;
        usize::try_from(pages).unwrap_or(usize::MAX)
    }

    /// Calls `f` with the in-memory page holding `address` and the address's offset in it, under
    /// a guard of the ring; `None` (without taking a guard) if `address` is below `head`, or if
    /// the page has left memory meanwhile.
    pub fn with_page<R>(&self, address: u64, f: impl FnOnce(&PageRef<'_>, usize) -> R) -> Option<R> {
        if address < self.head() {
            return None;
        }
        let page_start = self.page_start(address);
        let guard = self.ring.protect();
        let page = self.ring.page(&guard, page_start)?;
        Some(f(&page, (address - page_start) as usize))
    }

    /// Adds the page starting at `page_start` (the next one after `last_page`) in its frame,
    /// waiting for readers of the frame's previous page to leave. Caller is the window's owner.
    pub fn push_waiting(&self, page_start: u64) {
        self.ring.install_waiting(page_start);
        self.last_page.store(page_start, SeqCst);
    }

    /// [`PageWindow::push_waiting`] unless a reader still holds the frame's previous page:
    /// then nothing changes and it returns false.
    pub fn try_push(&self, page_start: u64) -> bool {
        if !self.ring.install(page_start) {
            return false;
        }
        self.last_page.store(page_start, SeqCst);
        true
    }

    /// Evicts the oldest page: moves `head` past it, then retires its frame (its buffer is
    /// reclaimed once every older guard is dropped). Caller is the window's owner and has made
    /// the page's contents reachable elsewhere or not at all (see `head`).
    pub fn evict_oldest(&self) {
        let head = self.head();
        self.head.store(head + self.page_size, SeqCst);
        self.ring.retire(head);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_enter_at_the_top_and_leave_at_the_bottom() {
        let window = PageWindow::new(64, 2, 128);
        assert_eq!((window.head(), window.last_page(), window.pages_in_memory()), (128, 128, 1));
        assert_eq!(window.page_start(128 + 63), 128);
        assert_eq!(window.with_page(128 + 8, |_, offset| offset), Some(8));
        assert_eq!(window.with_page(127, |_, offset| offset), None, "below head");
        assert!(window.try_push(192));
        assert_eq!((window.last_page(), window.pages_in_memory()), (192, 2));
        let guard = window.ring().protect();
        window.evict_oldest();
        assert_eq!((window.head(), window.pages_in_memory()), (192, 1));
        assert_eq!(window.with_page(128, |_, offset| offset), None, "evicted");
        assert!(window.try_push(256));
        // 3 frames: page 320 takes the evicted page 128's frame, still held by `guard`.
        assert!(!window.try_push(320), "the frame of page 128 is still held by a reader");
        assert_eq!(window.last_page(), 256);
        drop(guard);
        window.push_waiting(320);
        assert_eq!((window.last_page(), window.pages_in_memory()), (320, 3));
        assert_eq!(window.with_page(320 + 16, |_, offset| offset), Some(16));
    }
}
