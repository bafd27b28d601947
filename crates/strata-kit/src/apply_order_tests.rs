use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::mpsc;
use std::time::Duration;

use parking_lot::Mutex;
use strata_core::{Durability, Error, Result, WriteBatch};

use super::{ApplyOrder, CommitProgress, Keys, Ticket, WIDE_BATCH_OPS};

/// Items are numbers the tests choose; each record's lsn is its item + 1.
type Order = ApplyOrder<u64>;

/// A log whose records up to `accepted` are written and durable: none unless a test says.
#[derive(Default)]
struct Log {
    accepted: AtomicU64,
}

impl CommitProgress for Log {
    fn covers(&self, lsn: u64, _: Durability) -> bool {
        self.accepted.load(SeqCst) >= lsn
    }
}

static NOTHING_ACCEPTED: Log = Log { accepted: AtomicU64::new(0) };

fn enqueue<'a>(order: &'a Order, key: &[u8], item: u64) -> Ticket<'a, u64> {
    order.lock_log().enqueue(Keys::one(key), item + 1, Durability::Sync, item)
}

/// An apply function that records each run it is given.
fn recording(runs: &Mutex<Vec<Vec<u64>>>) -> impl FnMut(&mut Vec<u64>) -> Result<()> + '_ {
    move |run: &mut Vec<u64>| {
        runs.lock().push(std::mem::take(run));
        Ok(())
    }
}

fn applied(runs: &Mutex<Vec<Vec<u64>>>) -> Vec<u64> {
    runs.lock().iter().flatten().copied().collect()
}

fn finish_ok(ticket: Ticket<'_, u64>, runs: &Mutex<Vec<Vec<u64>>>) -> Result<()> {
    ticket.finish(Ok(()), &NOTHING_ACCEPTED, &mut recording(runs))
}

/// The later ticket's commit ends first; it is applied second, with the earlier one, in one run
/// by whichever writer found both appliable — and its writer returns only then.
#[test]
fn a_later_ticket_waits_for_an_earlier_one_and_one_run_applies_both() {
    let order = Order::new();
    let runs = Mutex::new(Vec::new());
    let first = enqueue(&order, b"k", 0);
    let second = enqueue(&order, b"k", 1);
    std::thread::scope(|scope| {
        let runs = &runs;
        let later = scope.spawn(move || finish_ok(second, runs));
        std::thread::sleep(Duration::from_millis(50));
        assert!(applied(runs).is_empty(), "the later ticket applied before the earlier one");
        assert!(!later.is_finished(), "the later writer returned before its item was applied");
        finish_ok(first, runs).unwrap();
        later.join().unwrap().unwrap();
    });
    assert_eq!(*runs.lock(), [vec![0, 1]], "one run, in ticket order");
}

/// Once the log covers an item (its record written or synced as asked), the first writer to
/// run applies it with its own, before that item's writer has even learned its commit's
/// outcome; that writer then returns at once (even if its commit reports an error: the log had
/// accepted the record before the failure).
#[test]
fn an_item_the_log_covers_is_applied_without_waiting_for_its_writer() {
    let order = Order::new();
    let runs = Mutex::new(Vec::new());
    let log = Log::default();
    let slow = enqueue(&order, b"a", 0);
    let fast = enqueue(&order, b"b", 1);
    log.accepted.store(2, SeqCst); // both records accepted (a group commit)
    fast.finish(Ok(()), &log, &mut recording(&runs)).unwrap();
    assert_eq!(*runs.lock(), [vec![0, 1]], "the running writer applied the whole group");
    slow.finish(Err(Error::invalid("failed after the record was accepted")), &log, &mut recording(&runs))
        .unwrap();
    assert!(!order.is_stopped());
}

/// An apply function that announces each run and applies it once the test says so.
fn held(
    runs: &Mutex<Vec<Vec<u64>>>,
    entered: mpsc::Sender<()>,
    release: mpsc::Receiver<()>,
) -> impl FnMut(&mut Vec<u64>) -> Result<()> + '_ {
    move |run: &mut Vec<u64>| {
        entered.send(()).unwrap();
        release.recv().expect("a run the test did not expect");
        runs.lock().push(std::mem::take(run));
        Ok(())
    }
}

/// A leader (`apply_appliable`, after its WAL round) applies only items enqueued when it began,
/// so writers that keep writing cannot keep it from waking its round's waiters; an item
/// enqueued and committed while its run was applied is left to its writer, parked meanwhile
/// (another run was being applied) and woken to apply it.
#[test]
fn a_leader_leaves_later_items_to_their_writer_and_wakes_it() {
    let order = Order::new();
    let log = Log::default();
    let (leader_runs, writer_runs) = (Mutex::new(Vec::new()), Mutex::new(Vec::new()));
    let first = enqueue(&order, b"a", 0);
    log.accepted.store(1, SeqCst);
    std::thread::scope(|scope| {
        let (order, log, leader_runs, writer_runs) = (&order, &log, &leader_runs, &writer_runs);
        let (entered_tx, entered) = mpsc::channel();
        let (release, release_rx) = mpsc::channel();
        let leader =
            scope.spawn(move || order.apply_appliable(log, &mut held(leader_runs, entered_tx, release_rx)));
        entered.recv_timeout(Duration::from_secs(10)).expect("the leader's run began");
        let second = enqueue(order, b"b", 1);
        let writer = scope.spawn(move || second.finish(Ok(()), log, &mut recording(writer_runs)));
        std::thread::sleep(Duration::from_millis(50));
        assert!(!writer.is_finished(), "returned before its item was applied");
        release.send(()).unwrap();
        drop(release); // a second run of the leader's fails
        leader.join().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !writer.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if !writer.is_finished() {
            drop(enqueue(order, b"c", 2)); // stops the order: wakes the writer, ends the scope
            panic!("the writer of an appliable item left at the front was never woken");
        }
        writer.join().unwrap().unwrap();
    });
    first.finish(Ok(()), &log, &mut recording(&leader_runs)).unwrap();
    assert_eq!(*leader_runs.lock(), [vec![0]], "the leader applied only what was enqueued before it");
    assert_eq!(*writer_runs.lock(), [vec![1]]);
}

/// A ticket dropped unfinished (its writer panicked) while its item is in the running run does
/// not stop the order when that run is applied: nothing from a stop on may ever be applied.
#[test]
fn a_ticket_dropped_while_its_item_is_applied_does_not_stop_the_order() {
    let order = Order::new();
    let log = Log::default();
    let runs = Mutex::new(Vec::new());
    let dropped = enqueue(&order, b"a", 0);
    log.accepted.store(1, SeqCst);
    std::thread::scope(|scope| {
        let (order, log, runs) = (&order, &log, &runs);
        let (entered_tx, entered) = mpsc::channel();
        let (release, release_rx) = mpsc::channel();
        let leader = scope.spawn(move || order.apply_appliable(log, &mut held(runs, entered_tx, release_rx)));
        entered.recv_timeout(Duration::from_secs(10)).expect("the leader's run began");
        drop(dropped);
        release.send(()).unwrap();
        leader.join().unwrap();
    });
    assert!(!order.is_stopped(), "the order stopped at a write that was then applied");
    finish_ok(enqueue(&order, b"b", 1), &runs).unwrap();
    assert_eq!(applied(&runs), [0, 1]);
}

/// A write whose commit reported an error before its item was applied is never applied, even
/// though the log covers its record (it was written, then the log failed): the writer already
/// returned `Err`, so no other writer's run may take it, nor anything after it.
#[test]
fn a_covered_item_whose_commit_failed_first_is_never_applied() {
    let order = Order::new();
    let runs = Mutex::new(Vec::new());
    let log = Log::default();
    let earlier = enqueue(&order, b"a", 0);
    let failed = enqueue(&order, b"b", 1);
    let later = enqueue(&order, b"c", 2);
    log.accepted.store(3, SeqCst);
    assert!(failed
        .finish(Err(Error::invalid("poisoned after the write")), &log, &mut recording(&runs))
        .is_err());
    order.apply_appliable(&log, &mut recording(&runs));
    assert_eq!(applied(&runs), [0], "only the write before the failed one");
    assert!(earlier.finish(Ok(()), &log, &mut recording(&runs)).is_ok());
    assert!(later.finish(Ok(()), &log, &mut recording(&runs)).is_err());
    assert_eq!(applied(&runs), [0]);
}

/// A failed commit whose item was not applied stops every later ticket, already waiting or
/// not, with that failure as their error; earlier ones still apply.
#[test]
fn a_failed_commit_stops_the_later_tickets_and_not_the_earlier() {
    let order = Order::new();
    let runs = Mutex::new(Vec::new());
    let earlier = enqueue(&order, b"a", 0);
    let failed = enqueue(&order, b"b", 1);
    let waiting = enqueue(&order, b"c", 2);
    let late = enqueue(&order, b"d", 3);
    std::thread::scope(|scope| {
        let runs = &runs;
        let (started, running) = mpsc::channel();
        let waiter = scope.spawn(move || {
            started.send(()).unwrap();
            finish_ok(waiting, runs)
        });
        running.recv().unwrap();
        let own =
            failed.finish(Err(Error::invalid("the disk is full")), &NOTHING_ACCEPTED, &mut recording(runs));
        assert!(own.is_err());
        let refused = waiter.join().unwrap();
        assert!(
            matches!(&refused, Err(Error::Poisoned(why)) if why.contains("the disk is full")),
            "a refused write names the failure that stopped the order: {refused:?}"
        );
    });
    assert!(order.is_stopped());
    finish_ok(earlier, &runs).unwrap();
    assert!(matches!(finish_ok(late, &runs), Err(Error::Poisoned(_))));
    assert!(finish_ok(enqueue(&order, b"e", 4), &runs).is_err());
    assert_eq!(applied(&runs), [0], "only the write before the failed one was applied");
}

/// A run whose apply fails or panics, or a ticket dropped unfinished, stops the order there, so
/// no later writer waits forever and none is applied.
#[test]
fn a_failed_or_panicking_run_or_a_dropped_ticket_stops_the_order() {
    let failing_apply = |_: &mut Vec<u64>| -> Result<()> { Err(Error::invalid("apply failed")) };
    let order = Order::new();
    let failing = enqueue(&order, b"a", 0);
    let next = enqueue(&order, b"b", 1);
    let failed = failing.finish(Ok(()), &NOTHING_ACCEPTED, &mut { failing_apply });
    assert!(matches!(&failed, Err(Error::Poisoned(why)) if why.contains("apply failed")), "{failed:?}");
    assert!(finish_ok(next, &Mutex::new(Vec::new())).is_err(), "the order is stopped");

    let order = Order::new();
    let panicking = enqueue(&order, b"a", 0);
    let next = enqueue(&order, b"b", 1);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        panicking.finish(Ok(()), &NOTHING_ACCEPTED, &mut |_: &mut Vec<u64>| -> Result<()> {
            panic!("apply panicked")
        })
    }));
    assert!(caught.is_err());
    assert!(finish_ok(next, &Mutex::new(Vec::new())).is_err());

    let order = Order::new();
    drop(enqueue(&order, b"a", 0));
    assert!(finish_ok(enqueue(&order, b"b", 1), &Mutex::new(Vec::new())).is_err());
}

/// `pending_write_of` names the last unapplied write of a key (and only of that key), and
/// `wait_done` returns once it is applied, or once the order stopped at it.
#[test]
fn an_rmw_finds_the_pending_write_of_its_key_and_waits_for_it() {
    let order = Order::new();
    let runs = Mutex::new(Vec::new());
    let first = enqueue(&order, b"k", 0);
    let second = enqueue(&order, b"k", 1);
    let other = enqueue(&order, b"other", 2);
    {
        let log = order.lock_log();
        assert!(log.pending_write_of(b"unwritten").is_none());
        let pending = log.pending_write_of(b"k").expect("k has unapplied writes");
        assert_ne!(Some(pending), log.pending_write_of(b"other"));
    }
    let pending = order.lock_log().pending_write_of(b"k").unwrap();
    std::thread::scope(|scope| {
        let (done, waited) = mpsc::channel();
        let order = &order;
        scope.spawn(move || {
            order.wait_done(pending).unwrap();
            done.send(()).unwrap();
        });
        finish_ok(first, &runs).unwrap();
        assert!(waited.recv_timeout(Duration::from_millis(50)).is_err(), "woke before the last write of k");
        finish_ok(second, &runs).unwrap();
        waited.recv_timeout(Duration::from_secs(10)).expect("woken once the last write of k applied");
    });
    assert!(order.lock_log().pending_write_of(b"k").is_none());
    let pending_other = order.lock_log().pending_write_of(b"other").unwrap();
    assert!(other.finish(Err(Error::invalid("failed")), &NOTHING_ACCEPTED, &mut recording(&runs)).is_err());
    // Returns the refusal: the order stopped at it.
    assert!(matches!(order.wait_done(pending_other), Err(Error::Poisoned(_))));
}

/// A batch wider than `WIDE_BATCH_OPS` is pending for every key.
#[test]
fn a_wide_batch_is_pending_for_every_key() {
    let order = Order::new();
    let mut batch = WriteBatch::new();
    for i in 0..=WIDE_BATCH_OPS {
        batch.put(vec![i as u8], b"v".to_vec());
    }
    assert!(matches!(Keys::of(&batch), Keys::All));
    let wide = order.lock_log().enqueue(Keys::of(&batch), 1, Durability::Buffered, 0);
    assert!(order.lock_log().pending_write_of(b"anything").is_some());
    finish_ok(wide, &Mutex::new(Vec::new())).unwrap();
    assert!(order.lock_log().pending_write_of(b"anything").is_none());
}

/// Many writers, commits ending in any order and the log accepting records as it goes: every
/// item is applied once, in ticket order.
#[test]
fn concurrent_writers_apply_in_ticket_order() {
    let order = Order::new();
    let runs = Mutex::new(Vec::new());
    let log = Log::default();
    let next_item = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for t in 0..4u8 {
            let (order, runs, log, next_item) = (&order, &runs, &log, &next_item);
            scope.spawn(move || {
                for i in 0..500u32 {
                    let ticket = {
                        let guard = order.lock_log();
                        let item = next_item.fetch_add(1, SeqCst);
                        guard.enqueue(Keys::one(&[t]), item + 1, Durability::Buffered, item)
                    };
                    if i % 7 == 0 {
                        std::thread::yield_now();
                    }
                    if i % 3 == 0 {
                        log.accepted.fetch_max(next_item.load(SeqCst) / 2, SeqCst);
                    }
                    ticket.finish(Ok(()), log, &mut recording(runs)).unwrap();
                }
            });
        }
    });
    assert_eq!(applied(&runs), (0..2000).collect::<Vec<u64>>());
}

/// Regression (found by `enospc_real_fs` on treeline): a writer refused behind a failed write
/// returned a bare "an earlier write failed", which also became the engine's poison cause when
/// it won the race to poison; the real failure (no space) was lost. The refusal carries it.
#[test]
fn a_refused_write_names_the_failure_that_stopped_the_order() {
    let order = Order::new();
    let failed = enqueue(&order, b"a", 0);
    let later = enqueue(&order, b"b", 1);
    let no_space = Error::io("wal-1.log", std::io::Error::from_raw_os_error(28));
    assert!(failed.finish(Err(no_space), &NOTHING_ACCEPTED, &mut |_: &mut Vec<u64>| Ok(())).is_err());
    let refused = finish_ok(later, &Mutex::new(Vec::new())).unwrap_err();
    assert!(refused.is_no_space(), "{refused}");
}
