use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc;
use std::time::Duration;

use parking_lot::Mutex;
use strata_core::{Error, WriteBatch};

use super::{ApplyOrder, Keys, Ticket, WIDE_BATCH_OPS};

/// Runs `f` as an apply step that succeeds.
fn ok(f: impl FnOnce()) -> impl FnOnce() -> strata_core::Result<()> {
    move || {
        f();
        Ok(())
    }
}

fn enqueue<'a>(order: &'a ApplyOrder, key: &[u8]) -> Ticket<'a> {
    order.lock_log().enqueue(Keys::one(key))
}

/// The later ticket's commit ends first; it still applies second.
#[test]
fn a_later_ticket_waits_for_an_earlier_one_to_apply() {
    let order = ApplyOrder::new();
    let applied = Mutex::new(Vec::new());
    let first = enqueue(&order, b"k");
    let second = enqueue(&order, b"k");
    std::thread::scope(|scope| {
        let later = scope.spawn(|| second.apply_in_turn(ok(|| applied.lock().push(2))));
        std::thread::sleep(Duration::from_millis(50));
        assert!(applied.lock().is_empty(), "the later ticket applied before the earlier one");
        first.apply_in_turn(ok(|| applied.lock().push(1))).unwrap();
        later.join().unwrap().unwrap();
    });
    assert_eq!(*applied.lock(), [1, 2]);
}

/// Abandoning a ticket (its commit failed) stops every later one, already waiting or not, with
/// that failure as their error; earlier ones still apply.
#[test]
fn an_abandoned_ticket_stops_the_later_ones_and_not_the_earlier() {
    let order = ApplyOrder::new();
    let earlier = enqueue(&order, b"a");
    let failed = enqueue(&order, b"b");
    let waiting = enqueue(&order, b"c");
    let late = enqueue(&order, b"d");
    std::thread::scope(|scope| {
        let (started, running) = mpsc::channel();
        let waiter = scope.spawn(move || {
            started.send(()).unwrap();
            waiting.apply_in_turn(|| Ok(()))
        });
        running.recv().unwrap();
        failed.abandon(&Error::invalid("the disk is full"));
        let refused = waiter.join().unwrap();
        assert!(
            matches!(&refused, Err(Error::Poisoned(why)) if why.contains("the disk is full")),
            "a refused write names the failure that stopped the order: {refused:?}"
        );
    });
    assert!(order.is_stopped());
    earlier.apply_in_turn(|| Ok(())).unwrap();
    assert!(matches!(late.apply_in_turn(|| Ok(())), Err(Error::Poisoned(_))));
    let after = enqueue(&order, b"e");
    let ran = AtomicBool::new(false);
    assert!(after.apply_in_turn(ok(|| ran.store(true, SeqCst))).is_err());
    assert!(!ran.load(SeqCst), "a write after the abandoned one was applied");
}

/// An apply that fails or panics, or a ticket dropped unapplied, passes the turn on
/// (abandoned), so no later writer waits forever.
#[test]
fn an_apply_that_fails_or_panics_releases_the_turn() {
    let order = ApplyOrder::new();
    let failing = enqueue(&order, b"a");
    let next = enqueue(&order, b"b");
    let failed = failing.apply_in_turn(|| -> strata_core::Result<()> { Err(Error::invalid("apply failed")) });
    assert!(failed.is_err());
    assert!(next.apply_in_turn(|| Ok(())).is_err(), "the order is stopped");

    let order = ApplyOrder::new();
    let panicking = enqueue(&order, b"a");
    let next = enqueue(&order, b"b");
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        panicking.apply_in_turn(|| -> strata_core::Result<()> { panic!("apply panicked") })
    }));
    assert!(caught.is_err());
    assert!(next.apply_in_turn(|| Ok(())).is_err());

    let order = ApplyOrder::new();
    drop(enqueue(&order, b"a"));
    assert!(enqueue(&order, b"b").apply_in_turn(|| Ok(())).is_err());
}

/// `pending_write_of` names the last unfinished write of a key (and only of that key), and
/// `wait_done` returns once it applied.
#[test]
fn an_rmw_finds_the_pending_write_of_its_key_and_waits_for_it() {
    let order = ApplyOrder::new();
    let first = enqueue(&order, b"k");
    let second = enqueue(&order, b"k");
    let other = enqueue(&order, b"other");
    {
        let log = order.lock_log();
        assert!(log.pending_write_of(b"unwritten").is_none());
        let pending = log.pending_write_of(b"k").expect("k has unfinished writes");
        assert_ne!(Some(pending), log.pending_write_of(b"other"));
    }
    let pending = order.lock_log().pending_write_of(b"k").unwrap();
    std::thread::scope(|scope| {
        let (done, waited) = mpsc::channel();
        let order = &order;
        scope.spawn(move || {
            order.wait_done(pending);
            done.send(()).unwrap();
        });
        first.apply_in_turn(|| Ok(())).unwrap();
        assert!(waited.recv_timeout(Duration::from_millis(50)).is_err(), "woke before the last write of k");
        second.apply_in_turn(|| Ok(())).unwrap();
        waited.recv_timeout(Duration::from_secs(10)).expect("woken once the last write of k applied");
    });
    assert!(order.lock_log().pending_write_of(b"k").is_none());
    assert!(order.lock_log().pending_write_of(b"other").is_some());
    other.apply_in_turn(|| Ok(())).unwrap();
    assert!(order.lock_log().pending_write_of(b"other").is_none());
}

/// A batch wider than `WIDE_BATCH_OPS` is pending for every key.
#[test]
fn a_wide_batch_is_pending_for_every_key() {
    let order = ApplyOrder::new();
    let mut batch = WriteBatch::new();
    for i in 0..=WIDE_BATCH_OPS {
        batch.put(vec![i as u8], b"v".to_vec());
    }
    let wide = order.lock_log().enqueue(Keys::of(&batch));
    assert!(matches!(Keys::of(&batch), Keys::All));
    assert!(order.lock_log().pending_write_of(b"anything").is_some());
    wide.apply_in_turn(|| Ok(())).unwrap();
    assert!(order.lock_log().pending_write_of(b"anything").is_none());
}

/// Many writers, commits ending in any order: applies happen in ticket order, every one once.
#[test]
fn concurrent_writers_apply_in_ticket_order() {
    let order = ApplyOrder::new();
    let log = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for t in 0..4u8 {
            let (order, log) = (&order, &log);
            scope.spawn(move || {
                for i in 0..500u32 {
                    let (number, ticket) = {
                        let guard = order.lock_log();
                        let ticket = guard.enqueue(Keys::one(&[t]));
                        (ticket.number, ticket)
                    };
                    if i % 7 == 0 {
                        std::thread::yield_now();
                    }
                    ticket.apply_in_turn(ok(|| log.lock().push(number))).unwrap();
                }
            });
        }
    });
    let applied = log.into_inner();
    assert_eq!(applied, (0..2000).collect::<Vec<u64>>());
}

/// Regression (found by `enospc_real_fs` on treeline): a writer refused behind an abandoned
/// write returned a bare "an earlier write failed", which also became the engine's poison cause
/// when it won the race to poison; the real failure (no space) was lost. The refusal carries it.
#[test]
fn a_refused_write_names_the_failure_that_stopped_the_order() {
    let order = ApplyOrder::new();
    let failed = enqueue(&order, b"a");
    let later = enqueue(&order, b"b");
    let no_space = Error::io("wal-1.log", std::io::Error::from_raw_os_error(28));
    failed.abandon(&no_space);
    let refused = later.apply_in_turn(|| Ok(())).unwrap_err();
    assert!(refused.is_no_space(), "{refused}");
}
