//! Loom model of the epoch (`epoch.rs`) and the page ring (`ring.rs`): every interleaving of two
//! or three threads (with three, those of at most 3 or 4 preemptions; `LOOM_MAX_PREEMPTIONS`
//! overrides), and every value each atomic load may read under the C11 model (`SeqCst` as loom
//! models it, see `sync::model_seq_cst_fence`). Built only with the `loom` feature:
//! `bash scripts/loom.sh`.
//!
//! The invariants checked:
//! - A reader that found a page under a guard keeps a live, unchanged buffer until it drops the
//!   page: each frame's `BufferAccess` makes loom fail the model when a buffer is taken out of its
//!   frame (to be reused or freed) without every use of it happening-before, whether or not the
//!   explored schedule overlapped them; the page's bytes are checked too.
//! - A retired frame is reclaimed, and so installable again, only after every guard that could
//!   have seen its page is gone; once none is held, it is reclaimed (no frame stays retired).
//! - An epoch item is handed back by `take_safe` only after every protection older than its bump
//!   is released; `wait_for_older` returns only after every older protection's work is done.
//!
//! A page's bytes are all its marker once it is published in `newest` (filled before), so a
//! reader that sees other bytes saw a reused buffer.

use std::sync::atomic::Ordering::SeqCst;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use super::epoch::Epoch;
use super::ring::PageRing;
use super::sync::{AtomicPtr, AtomicU64};

/// Two words: a page copy is more than one load.
const PAGE: u64 = 16;
/// Page `p` and page `p + 2 * PAGE` share a frame.
const FRAMES: usize = 2;
/// Wait loops (`install_waiting`, `wait_for_older`) make executions long.
const MAX_BRANCHES: usize = 20_000;

/// Explores every execution of `model`, or with `preemptions` those with at most that many
/// preemptions. `LOOM_MAX_PREEMPTIONS` overrides the bound (of every test).
fn check(preemptions: Option<usize>, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = preemptions;
    }
    builder.max_branches = builder.max_branches.max(MAX_BRANCHES);
    builder.check(model);
}

fn marker(page_start: u64) -> u8 {
    (page_start / PAGE) as u8 + 1
}

/// The owner's side: installs `page_start` (waiting for readers of its frame's previous page),
/// fills it with its marker, then publishes it as the newest page.
fn install_filled(ring: &PageRing, newest: &AtomicU64, page_start: u64) {
    ring.install_waiting(page_start);
    {
        let guard = ring.protect();
        let page = ring.page(&guard, page_start).expect("the owner finds the page it installed");
        assert!(page.write(0, &[marker(page_start); PAGE as usize]));
    }
    newest.store(page_start, SeqCst);
}

/// A reader: under one guard, looks up the newest published page and the one before it, and
/// keeps every page it found while it looks up the next, then reads them all again.
fn read_newest(ring: &PageRing, newest: &AtomicU64) {
    let guard = ring.protect();
    let top = newest.load(SeqCst);
    let mut found = Vec::new();
    for page_start in [top.saturating_sub(PAGE), top] {
        if let Some(page) = ring.page(&guard, page_start) {
            assert_marked(page_start, &page.to_bytes());
            found.push((page_start, page));
        }
    }
    for (page_start, page) in &found {
        assert_marked(*page_start, &page.to_bytes());
    }
}

fn assert_marked(page_start: u64, bytes: &[u8]) {
    assert!(bytes.iter().all(|&b| b == marker(page_start)), "page {page_start} read as {bytes:?}");
}

/// A reader on its own thread.
fn spawn_reader(ring: &Arc<PageRing>, newest: &Arc<AtomicU64>) -> thread::JoinHandle<()> {
    let (ring, newest) = (ring.clone(), newest.clone());
    thread::spawn(move || read_newest(&ring, &newest))
}

/// Once every reader is joined nothing holds a retired frame back: the next reclaim takes all.
fn assert_all_reclaimed(ring: &PageRing) {
    ring.reclaim();
    assert_eq!(ring.retired_frames(), 0, "a retired frame outlived every guard");
}

/// (1) A reader pins the epoch and reads page 0 while the owner retires it and installs page
/// `2 * PAGE` in the same frame (which must wait for the reader, or find the frame reclaimed).
#[test]
fn a_guarded_reader_keeps_its_page_while_the_owner_retires_and_reinstalls_the_frame() {
    check(None, || {
        let ring = Arc::new(PageRing::new(PAGE, FRAMES));
        let newest = Arc::new(AtomicU64::new(0));
        install_filled(&ring, &newest, 0);
        let reader = spawn_reader(&ring, &newest);
        ring.retire(0);
        install_filled(&ring, &newest, 2 * PAGE);
        reader.join().unwrap();
        assert_all_reclaimed(&ring);
    });
}

/// (2) Two readers and one owner that turns two pages: installs page 1, retires page 0,
/// reinstalls page 0's frame with page 2, retires page 1. Readers take guards at any point.
#[test]
fn two_readers_and_an_owner_turning_pages_through_both_frames() {
    // Every execution is too many (1.5 million at 4 preemptions, 150 s); 3 give 92,000 (11 s).
    check(Some(3), || {
        let ring = Arc::new(PageRing::new(PAGE, FRAMES));
        let newest = Arc::new(AtomicU64::new(0));
        install_filled(&ring, &newest, 0);
        let readers = [spawn_reader(&ring, &newest), spawn_reader(&ring, &newest)];
        install_filled(&ring, &newest, PAGE);
        ring.retire(0);
        install_filled(&ring, &newest, 2 * PAGE);
        ring.retire(PAGE);
        for reader in readers {
            reader.join().unwrap();
        }
        assert_all_reclaimed(&ring);
    });
}

/// A node of the epoch-level model: `value` is its generation (never 0), set to 0 when it is
/// reclaimed. Reclaimed nodes are kept, not freed, until the model ends, so a buggy reclaim
/// is reported by loom (a write not ordered after a reader's read) without a real use after free.
struct Node {
    value: UnsafeCell<u64>,
}

impl Node {
    fn new(value: u64) -> *mut Node {
        Box::into_raw(Box::new(Node { value: UnsafeCell::new(value) }))
    }
}

/// A pointer readers follow under a guard of `epoch`, swapped by an owner that bumps the old
/// node into the epoch and reclaims what `take_safe` hands back.
struct Published {
    current: AtomicPtr<Node>,
    epoch: Epoch<Box<Node>>,
    reclaimed: Reclaimed,
}

/// Reclaimed nodes, kept boxed: a buggy model's reader may still hold a pointer to one, which
/// must stay where it is (a `Vec<Node>` would move it).
type Reclaimed = loom::sync::Mutex<Vec<Box<Node>>>;

impl Published {
    fn new() -> Published {
        Published {
            current: AtomicPtr::new(Node::new(1)),
            epoch: Epoch::new(),
            reclaimed: loom::sync::Mutex::new(Vec::new()),
        }
    }

    /// Reads the current node twice under one guard (the second time after the owner may have
    /// swapped and bumped it); each node read must be live.
    fn read_twice(&self) {
        let _guard = self.epoch.guard();
        let first = self.current.load(SeqCst);
        let second = self.current.load(SeqCst);
        for node in [first, second, first] {
            // SAFETY: `node` was current after the guard was taken, so it is reclaimed (never
            // freed before the model ends) only after the guard goes; the model checks that.
            let value = unsafe { &*node }.value.with(|v| unsafe { *v });
            assert_ne!(value, 0, "read a reclaimed node");
        }
    }

    /// Replaces the current node by one of generation `value` and defers the old one.
    fn swap_in(&self, value: u64) {
        let old = self.current.swap(Node::new(value), SeqCst);
        // SAFETY: `old` came from `Node::new` and was unlinked just now by this, its only owner.
        self.epoch.bump(unsafe { Box::from_raw(old) });
    }

    /// Reclaims the nodes the epoch hands back (poisons them: see `Node`).
    fn reclaim(&self) {
        for node in self.epoch.take_safe() {
            reclaim_now(&self.reclaimed, node);
        }
    }
}

fn reclaim_now(reclaimed: &Reclaimed, node: Box<Node>) {
    node.value.with_mut(|v| unsafe { *v = 0 });
    reclaimed.lock().unwrap().push(node);
}

impl Drop for Published {
    fn drop(&mut self) {
        // A failing model unwinds through here: no loom operation then (a second panic aborts).
        if std::thread::panicking() {
            return;
        }
        // SAFETY: the model's threads are joined; the current node came from `Node::new`.
        drop(unsafe { Box::from_raw(self.current.load(SeqCst)) });
    }
}

/// (3) Epoch advance and reclaim while guards are held: two readers each hold one guard across
/// two reads while the owner swaps twice, bumping each old node, and reclaims after each bump.
#[test]
fn nodes_bumped_while_guards_are_held_are_reclaimed_only_after_they_go() {
    // Every execution is too many (not done in 10 minutes); 4 preemptions take 6 s, 5 take 36 s.
    check(Some(4), || {
        let shared = Arc::new(Published::new());
        let readers = [(); 2].map(|()| {
            let shared = shared.clone();
            thread::spawn(move || shared.read_twice())
        });
        for generation in 2..=3 {
            shared.swap_in(generation);
            shared.reclaim();
        }
        for reader in readers {
            reader.join().unwrap();
        }
        shared.reclaim();
        assert!(!shared.epoch.has_pending(), "an item outlived every protection");
    });
}

/// (3b) FASTER's bump-and-wait, as the hot log's page turn uses it (`hybrid.rs`): a writer
/// protects itself, checks `read_only` and writes below it only if it was not moved past; the
/// turner moves `read_only`, waits for older protections, then reads the page (a flush). The
/// flush must come after every write that passed the check.
#[test]
fn wait_for_older_orders_every_checked_write_before_the_flush() {
    check(None, || {
        let epoch = Arc::new(Epoch::<()>::new());
        let read_only = Arc::new(AtomicU64::new(0));
        let page = Arc::new(UnsafeCell::new(0u64));
        let writer = {
            let (epoch, read_only, page) = (epoch.clone(), read_only.clone(), page.clone());
            thread::spawn(move || {
                let _writer = epoch.guard();
                if read_only.load(SeqCst) == 0 {
                    page.with_mut(|p| unsafe { *p += 1 });
                }
            })
        };
        read_only.fetch_max(1, SeqCst);
        epoch.wait_for_older();
        let flushed = page.with(|p| unsafe { *p });
        writer.join().unwrap();
        assert_eq!(page.with(|p| unsafe { *p }), flushed, "a write landed after the flush");
    });
}

/// The harness's own canary: an owner that reclaims a node right after unlinking it, skipping
/// the epoch, is caught (loom reports the reclaim racing a reader's read).
#[test]
#[should_panic(expected = "Causality violation")]
fn the_model_catches_a_reclaim_that_skips_the_epoch() {
    check(None, || {
        let shared = Arc::new(Published::new());
        let reader = {
            let shared = shared.clone();
            thread::spawn(move || shared.read_twice())
        };
        let old = shared.current.swap(Node::new(2), SeqCst);
        // SAFETY: as in `swap_in`; the node is reclaimed at once instead of bumped.
        reclaim_now(&shared.reclaimed, unsafe { Box::from_raw(old) });
        reader.join().unwrap();
    });
}
