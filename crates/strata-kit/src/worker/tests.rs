use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::mpsc;
use std::time::Instant;

use super::*;

const LONG: Duration = Duration::from_secs(10);

/// Waits (bounded) until `done(progress)` holds.
fn wait_until(signals: &WorkerSignals, done: impl Fn(&Progress) -> bool) -> Progress {
    let deadline = Instant::now() + LONG;
    loop {
        let p = signals.wait_for_progress(Duration::from_millis(5), |p| !done(p));
        if done(&p) {
            return p;
        }
        assert!(Instant::now() < deadline, "timed out: {p:?}");
    }
}

#[test]
fn each_request_runs_a_step_and_counts_a_round() {
    let signals = Arc::new(WorkerSignals::default());
    let steps = Arc::new(AtomicU64::new(0));
    let counted = steps.clone();
    let worker = Worker::spawn(
        "kit-test-worker",
        signals.clone(),
        move || {
            assert_eq!(std::thread::current().name(), Some("kit-test-worker"));
            counted.fetch_add(1, SeqCst);
            Ok(())
        },
        |e| e,
    )
    .unwrap();
    for round in 1..=3 {
        signals.request();
        wait_until(&signals, |p| p.rounds >= round);
    }
    assert_eq!(steps.load(SeqCst), 3);
    worker.stop_and_join();
    let p = signals.progress();
    assert!(p.exited && p.stop && p.stopping() && signals.is_stopping(), "{p:?}");
    signals.request();
    assert_eq!(steps.load(SeqCst), 3, "no step after stop");
    worker.stop_and_join(); // idempotent
}

#[test]
fn requests_made_while_a_step_runs_coalesce_into_one_more_step() {
    let signals = Arc::new(WorkerSignals::default());
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let worker = Worker::spawn(
        "kit-test-coalesce",
        signals.clone(),
        move || {
            entered_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            Ok(())
        },
        |e| e,
    )
    .unwrap();
    signals.request();
    entered.recv().unwrap();
    for _ in 0..5 {
        signals.request();
    }
    assert!(signals.progress().requested);
    release.send(()).unwrap();
    entered.recv().unwrap(); // the second step: one for the five requests
    release.send(()).unwrap();
    wait_until(&signals, |p| p.rounds == 2 && !p.requested);
    drop(release); // a third step would fail on recv and end the thread; none must start
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(signals.progress().rounds, 2);
    worker.stop_and_join();
}

#[test]
fn a_failing_step_ends_the_thread_and_wakes_waiters() {
    let signals = Arc::new(WorkerSignals::default());
    let worker =
        Worker::spawn("kit-test-failing", signals.clone(), || Err(Error::invalid("step failed")), |e| e)
            .unwrap();
    let waiter = {
        let signals = signals.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            // Waits "forever" for a condition nobody makes true: the exit must end it.
            let p = signals.wait_for_progress(LONG, |p| !p.exited);
            (p, started.elapsed())
        })
    };
    signals.request();
    let p = wait_until(&signals, |p| p.exited);
    assert_eq!((p.rounds, p.stop), (1, false), "the failed step counts; nobody called stop");
    let (seen, waited) = waiter.join().unwrap();
    assert!(seen.exited || seen.rounds == 1, "{seen:?}");
    assert!(waited < LONG / 2, "the waiter slept through the exit");
    worker.stop_and_join();
}

/// Regression: a panic in a step must reach the engine's `poison`; a thread that just ended
/// left flex acknowledging writes and `close` committing over a half-applied table.
#[test]
fn a_panicking_step_poisons_the_engine_and_marks_the_thread_exited() {
    let signals = Arc::new(WorkerSignals::default());
    let poisoned = Arc::new(Mutex::new(None));
    let recorded = poisoned.clone();
    let poison = move |e: Error| {
        *recorded.lock() = Some(e.to_string());
        e
    };
    let worker =
        Worker::spawn("kit-test-panic", signals.clone(), || panic!("step panicked"), poison).unwrap();
    signals.request();
    assert!(wait_until(&signals, |p| p.exited).exited);
    worker.stop_and_join(); // does not propagate the panic
    let text = poisoned.lock().clone().expect("the panic poisoned the engine");
    assert!(text.contains("kit-test-panic") && text.contains("step panicked"), "{text}");
}

#[test]
fn wait_for_progress_returns_at_once_when_satisfied_or_stopping_and_after_the_recheck_otherwise() {
    let signals = WorkerSignals::default();
    let started = Instant::now();
    signals.wait_for_progress(LONG, |_| false);
    assert!(started.elapsed() < LONG / 2, "satisfied: no wait");
    let started = Instant::now();
    signals.wait_for_progress(Duration::from_millis(20), |_| true);
    assert!(started.elapsed() >= Duration::from_millis(15), "nothing happened: waits the recheck");
    signals.stop();
    let started = Instant::now();
    assert!(signals.wait_for_progress(LONG, |_| true).stop);
    assert!(started.elapsed() < LONG / 2, "stopping: no wait");
    assert!(signals.stop_requested());
}

/// The shape of flex's committer: a step drops an immutable MemTable (a counter here), then
/// notifies progress; a writer waits for the counter to move past what it saw, with a recheck
/// timeout (`wait_for_room`). The notification must wake it long before the recheck.
#[test]
fn a_writer_waiting_for_room_is_woken_by_notify_progress() {
    let signals = Arc::new(WorkerSignals::default());
    let drops = Arc::new(AtomicU64::new(0));
    let (step_drops, step_signals) = (drops.clone(), signals.clone());
    let worker = Worker::spawn(
        "kit-test-committer",
        signals.clone(),
        move || {
            std::thread::sleep(Duration::from_millis(20)); // the commit
            step_drops.fetch_add(1, SeqCst);
            step_signals.notify_progress();
            std::thread::sleep(Duration::from_millis(200)); // releasing the WAL etc.
            Ok(())
        },
        |e| e,
    )
    .unwrap();
    let seen = drops.load(SeqCst);
    signals.request();
    let started = Instant::now();
    while drops.load(SeqCst) == seen {
        signals.wait_for_progress(LONG, |_| drops.load(SeqCst) == seen);
        assert!(started.elapsed() < LONG / 2, "missed the notification");
    }
    assert!(started.elapsed() < Duration::from_millis(150), "woken by the notification, not the step's end");
    worker.stop_and_join();
}

/// An engine whose state owns the `Worker` while the step holds the state: when the step drops
/// the last handle, the `Worker` is dropped on its own thread, which must not join itself.
#[test]
fn dropping_the_worker_on_its_own_thread_does_not_deadlock() {
    struct Engine {
        worker: Mutex<Option<Worker>>,
    }
    let signals = Arc::new(WorkerSignals::default());
    let engine = Arc::new(Engine { worker: Mutex::new(None) });
    let mut held = Some(engine.clone());
    let worker = Worker::spawn(
        "kit-test-self-drop",
        signals.clone(),
        move || {
            drop(held.take()); // the last handle, once the test has dropped its own
            Err(Error::invalid("done"))
        },
        |e| e,
    )
    .unwrap();
    *engine.worker.lock() = Some(worker);
    drop(engine);
    signals.request();
    assert!(wait_until(&signals, |p| p.exited).exited);
}
