//! Multi-threaded compaction at exact points: a worker held on a record of the first page while
//! the other runs ahead through the frame buffer; the hot log must not be truncated past a page
//! with an unfinished record.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use strata_core::{Durability, Engine};

use crate::engine::test_engines::{manual_options, open_in_memory};
use crate::{F2Engine, F2Options};

/// Test-only observation points of a compaction round, per engine.
pub(crate) mod hooks {
    use std::sync::{Arc, Mutex};

    use crate::engine::Inner;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Event {
        /// A worker starts the ConditionalInsert of the record at this address.
        Start(u64),
        /// ... and finished it (copied or not).
        Done(u64),
        /// The coordinator is about to truncate the hot log to this address.
        Releasing(u64),
    }

    type Hook = Arc<dyn Fn(Event) + Send + Sync>;

    /// Hooks by engine (the `Inner`'s address), so tests running at the same time do not meet.
    static HOOKS: Mutex<Vec<(usize, Hook)>> = Mutex::new(Vec::new());

    fn id(inner: &Inner) -> usize {
        std::ptr::from_ref(inner) as usize
    }

    pub fn set(inner: &Inner, hook: impl Fn(Event) + Send + Sync + 'static) {
        HOOKS.lock().unwrap().push((id(inner), Arc::new(hook)));
    }

    pub fn clear(inner: &Inner) {
        HOOKS.lock().unwrap().retain(|(i, _)| *i != id(inner));
    }

    pub fn event(inner: &Inner, event: Event) {
        let hook = HOOKS.lock().unwrap().iter().find(|(i, _)| *i == id(inner)).map(|(_, h)| h.clone());
        if let Some(hook) = hook {
            hook(event);
        }
    }
}

use hooks::Event;

const PAGE_BYTES: u64 = 4 << 10;
const FRAME_PAGES: usize = 3;

fn engine(threads: usize) -> F2Engine {
    open_in_memory(F2Options {
        page_size_bytes: Some(PAGE_BYTES),
        // Eight chunks: many keys share each, and both workers own some.
        cold_index_bytes: Some(64),
        compaction_fraction: 1.0,
        compaction_threads: threads,
        compaction_frame_pages: FRAME_PAGES,
        ..manual_options()
    })
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

/// Writes distinct keys until `pages` pages are immutable; returns how many.
fn fill(engine: &F2Engine, pages: u64) -> u32 {
    let mut n = 0;
    while engine.inner.hot.read_only() < pages * PAGE_BYTES {
        engine.put(&key(n), format!("value-{n}-{}", "v".repeat(40)).as_bytes(), Durability::None).unwrap();
        n += 1;
    }
    n
}

#[derive(Default)]
struct Observed {
    log: Vec<(String, Event)>,
    /// The worker held on its first record, and whether it was released (the other worker
    /// reached the last frame of the buffer while it was held).
    slow_worker: Option<String>,
    released: bool,
    /// The hot log's begin while the slow worker was held, after the other ran ahead.
    begin_while_held: Option<u64>,
}

/// With two workers, one is held on its first record of the first page until the other has
/// reached the last frame of the buffer. Nothing may be truncated meanwhile, and over the whole
/// round no record finishes after the truncation past its page began.
#[test]
fn truncation_never_passes_a_page_with_an_unfinished_record() {
    let engine = engine(2);
    let inner = engine.inner.clone();
    let written = fill(&engine, 8);
    let begin = inner.hot.begin();
    let last_frame_start = begin - begin % PAGE_BYTES + (FRAME_PAGES as u64 - 1) * PAGE_BYTES;
    let state = Arc::new((Mutex::new(Observed::default()), Condvar::new()));
    let (hooked_state, hooked_inner) = (state.clone(), inner.clone());
    hooks::set(&inner, move |event| {
        let worker = std::thread::current().name().unwrap_or("?").to_string();
        let (lock, cv) = &*hooked_state;
        let mut s = lock.lock().unwrap();
        s.log.push((worker.clone(), event));
        let Event::Start(address) = event else { return };
        if s.slow_worker.is_none() {
            s.slow_worker = Some(worker);
            let (mut s, timeout) =
                cv.wait_timeout_while(s, Duration::from_secs(10), |s| !s.released).unwrap();
            assert!(!timeout.timed_out(), "the other worker did not run ahead of the held one");
            s.begin_while_held = Some(hooked_inner.hot.begin());
        } else if s.slow_worker.as_deref() != Some(worker.as_str()) && address >= last_frame_start {
            s.released = true;
            cv.notify_all();
        }
    });
    let copied = inner.compact_hot_locked_for_test();
    hooks::clear(&inner);
    let s = state.0.lock().unwrap();
    assert_eq!(s.begin_while_held, Some(begin), "truncated while the first page had a record in flight");
    let mut released_to = begin;
    let (mut started, mut done) = (0u64, 0u64);
    for (worker, event) in &s.log {
        match *event {
            Event::Start(_) => started += 1,
            Event::Done(a) => {
                done += 1;
                assert!(
                    a >= released_to,
                    "{worker} finished record {a} after the truncation to {released_to}"
                );
            }
            Event::Releasing(to) => released_to = to,
        }
    }
    // Every key was written once, so every record of the round was live.
    assert_eq!((started, done), (copied, copied));
    assert!(inner.hot.begin() > begin + 6 * PAGE_BYTES, "the round went on after the held record");
    drop(s);
    for i in 0..written {
        let value = engine.get(&key(i)).unwrap().unwrap();
        assert_eq!(value, format!("value-{i}-{}", "v".repeat(40)).into_bytes());
    }
}

/// One and two workers copy the same records from the same store (the tests in
/// tests/compaction_threads.rs compare whole stores over many rounds).
#[test]
fn one_and_two_workers_copy_the_same_records() {
    let mut copied = Vec::new();
    for threads in [1, 2] {
        let engine = engine(threads);
        let written = fill(&engine, 6);
        // Half the keys superseded: only their newest records are live.
        for i in (0..written).step_by(2) {
            engine.put(&key(i), b"newer", Durability::None).unwrap();
        }
        fill_more(&engine, 10);
        copied.push(engine.inner.compact_hot_locked_for_test());
        for i in 0..written {
            let want = if i % 2 == 0 {
                b"newer".to_vec()
            } else {
                format!("value-{i}-{}", "v".repeat(40)).into_bytes()
            };
            assert_eq!(engine.get(&key(i)).unwrap(), Some(want), "{threads} workers, key {i}");
        }
    }
    assert_eq!(copied[0], copied[1]);
    assert!(copied[0] > 0);
}

/// Writes more distinct keys (numbered from one million) until `pages` pages are immutable.
fn fill_more(engine: &F2Engine, pages: u64) {
    let mut n = 1_000_000;
    while engine.inner.hot.read_only() < pages * PAGE_BYTES {
        engine.put(&key(n), b"filler", Durability::None).unwrap();
        n += 1;
    }
}

impl crate::engine::Inner {
    fn compact_hot_locked_for_test(&self) -> u64 {
        let _only_one = self.maintenance.lock();
        self.compact_hot().unwrap()
    }
}
