//! `Wal::commit_then`: the caller that ran a round runs its `after_round` hook (where an engine
//! applies the round's writes, strata_kit::apply_order) before the round's other waiters are
//! woken, with no WAL lock held; not after a failed round, not for a caller that only waited; a
//! panic in the hook still wakes the waiters.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::*;
use parking_lot::Mutex;
use strata_core::{Durability, Error, Result};
use strata_io::{HookStorage, MemStorage, Storage, SyncHook};
use strata_wal::{Lsn, Wal};

const BOUNDED_WAIT: Duration = Duration::from_secs(10);
/// Long enough for a spawned thread to reach its wait for the running round.
const SETTLE: Duration = Duration::from_millis(200);

/// A log whose next file sync, once armed, announces itself and waits for the test's verdict.
struct Gated {
    wal: Arc<Wal>,
    armed: Arc<AtomicBool>,
    entered: Receiver<()>,
    release: Sender<Result<()>>,
}

fn gated() -> Gated {
    let armed = Arc::new(AtomicBool::new(false));
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<Result<()>>();
    let release_rx = Mutex::new(release_rx);
    let hook_armed = armed.clone();
    let hook: SyncHook = Arc::new(move |_| {
        if !hook_armed.swap(false, SeqCst) {
            return Ok(());
        }
        let _ = entered_tx.send(());
        release_rx.lock().recv().unwrap_or_else(|_| Err(Error::invalid("the test went away")))
    });
    let storage: Arc<dyn Storage> = Arc::new(HookStorage::new(Arc::new(MemStorage::new()), hook));
    let (wal, _, _) = open(&storage, &small_opts(64 << 10), 1).unwrap();
    let lsn = wal.append(b"creates the segment").unwrap();
    wal.commit(lsn, Durability::Sync).unwrap();
    Gated { wal: Arc::new(wal), armed, entered, release }
}

/// A thread that waits in `commit_then(lsn, Sync)` behind the round a leader runs; `returned` is
/// set when its commit returns, `led` if its own hook ran.
struct Waiter {
    handle: thread::JoinHandle<Result<()>>,
    returned: Arc<AtomicBool>,
    led: Arc<AtomicBool>,
}

fn wait_behind_the_round(wal: &Arc<Wal>, lsn: Lsn) -> Waiter {
    let (returned, led) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (wal, done, ran) = (wal.clone(), returned.clone(), led.clone());
    let handle = thread::spawn(move || {
        let result = wal.commit_then(lsn, Durability::Sync, &mut || ran.store(true, SeqCst));
        done.store(true, SeqCst);
        result
    });
    thread::sleep(SETTLE);
    Waiter { handle, returned, led }
}

fn join_within<T>(what: &str, handle: thread::JoinHandle<T>) -> thread::Result<T> {
    let deadline = std::time::Instant::now() + BOUNDED_WAIT;
    while !handle.is_finished() {
        assert!(std::time::Instant::now() < deadline, "{what} did not return within {BOUNDED_WAIT:?}");
        thread::sleep(Duration::from_millis(5));
    }
    handle.join()
}

/// The leader's hook runs once, after its fdatasync, while the waiter of that round still waits
/// (it returns only after the hook), and it can append and commit (no WAL lock is held).
#[test]
fn the_leader_runs_after_round_before_waking_the_round_and_without_a_wal_lock() {
    let gated = gated();
    let wal = &gated.wal;
    let (waiting, leading) = (wal.append(b"waiter").unwrap(), wal.append(b"leader").unwrap());
    gated.armed.store(true, SeqCst);
    let hook_runs = Arc::new(AtomicU32::new(0));
    let waiter_returned_during_hook = Arc::new(AtomicBool::new(true));
    let waiter_returned = Arc::new(Mutex::new(None::<Arc<AtomicBool>>));
    let leader = {
        let (wal, runs, during, returned) =
            (wal.clone(), hook_runs.clone(), waiter_returned_during_hook.clone(), waiter_returned.clone());
        thread::spawn(move || {
            wal.commit_then(leading, Durability::Sync, &mut || {
                runs.fetch_add(1, SeqCst);
                thread::sleep(SETTLE);
                let returned = returned.lock().clone().expect("the waiter started");
                during.store(returned.load(SeqCst), SeqCst);
                // Last: this commit's round wakes every waiter.
                let lsn = wal.append(b"appended by the hook").unwrap();
                wal.commit(lsn, Durability::Buffered).unwrap();
            })
        })
    };
    gated.entered.recv_timeout(BOUNDED_WAIT).expect("the leader's fdatasync never began");
    let waiter = wait_behind_the_round(wal, waiting);
    *waiter_returned.lock() = Some(waiter.returned.clone());
    gated.release.send(Ok(())).unwrap();
    join_within("the leader", leader).unwrap().unwrap();
    join_within("the waiter", waiter.handle).unwrap().unwrap();
    assert_eq!(hook_runs.load(SeqCst), 1, "the leader's hook runs once, for its round");
    assert!(
        !waiter_returned_during_hook.load(SeqCst),
        "the round's waiter returned while its leader's hook ran"
    );
    assert!(!waiter.led.load(SeqCst), "a caller that only waited ran its hook");
}

/// A failed round runs no hook: its writes are not accepted.
#[test]
fn a_failed_round_runs_no_hook() {
    let gated = gated();
    let lsn = gated.wal.append(b"fails").unwrap();
    gated.armed.store(true, SeqCst);
    gated.release.send(Err(Error::invalid("the fdatasync failed"))).unwrap();
    let mut ran = false;
    assert!(gated.wal.commit_then(lsn, Durability::Sync, &mut || ran = true).is_err());
    assert!(!ran, "the hook ran after a failed round");
}

/// A panic in the leader's hook reaches the leader, and the round's waiter still returns `Ok`
/// (the round succeeded); the log is not poisoned by it.
#[test]
fn a_panic_in_the_hook_still_wakes_the_round() {
    let gated = gated();
    let wal = &gated.wal;
    let (waiting, leading) = (wal.append(b"waiter").unwrap(), wal.append(b"leader").unwrap());
    gated.armed.store(true, SeqCst);
    let leader = {
        let wal = wal.clone();
        thread::spawn(move || wal.commit_then(leading, Durability::Sync, &mut || panic!("the hook panicked")))
    };
    gated.entered.recv_timeout(BOUNDED_WAIT).expect("the leader's fdatasync never began");
    let waiter = wait_behind_the_round(wal, waiting);
    gated.release.send(Ok(())).unwrap();
    assert!(join_within("the leader", leader).is_err(), "the hook's panic reaches its caller");
    join_within("the waiter", waiter.handle).unwrap().unwrap();
    let later = wal.append(b"later").unwrap();
    wal.commit(later, Durability::Sync).unwrap();
}
