//! Issue #19 item 4, found in `f2` by the kit's in-flight check: a write was applied to the hot
//! log (record appended or updated in place, index entry swung) right after its WAL append,
//! before `Wal::commit`; a reader on another thread saw it while its fsync (or, Buffered, its
//! log write) was still running, and then the write returned `Err` (every FailsInFlight
//! scenario: put, delete, batch and rmw, Sync and Buffered). Now the key latches and the
//! shared write lock are held from the append through the commit, and the write is applied
//! only after the commit succeeded; writes of other keys still share the group commit.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use engine_f2::F2Engine;
use parking_lot::Mutex;
use strata_core::{Durability, Engine, EngineConfig};
use strata_io::{HookStorage, SimStorage, SyncHook};
use strata_testkit::Target;

fn target() -> Target {
    Target::new(
        "f2",
        Arc::new(|storage| {
            Ok(Box::new(F2Engine::open(storage, &EngineConfig::default())?) as Box<dyn Engine>)
        }),
    )
}

strata_testkit::in_flight_regressions!(target());

/// The latches held across the commit are the written keys' only: while a `Sync` put's WAL
/// fsync is held, a put of another key is logged, committed, applied and returns, and a reader
/// sees it but not the held put.
#[test]
fn a_write_of_another_key_goes_on_while_a_sync_write_waits_for_its_fsync() {
    let sim = SimStorage::new(7);
    let armed = Arc::new(AtomicBool::new(false));
    let (entered, entered_rx) = mpsc::channel::<()>();
    let (release, release_rx) = mpsc::channel::<()>();
    let channels = Mutex::new((entered, release_rx));
    let hold = armed.clone();
    let hook: SyncHook = Arc::new(move |name| {
        if name.starts_with("f2wal-") && hold.swap(false, SeqCst) {
            let channels = channels.lock();
            channels.0.send(()).unwrap();
            channels.1.recv_timeout(Duration::from_secs(30)).unwrap();
        }
        Ok(())
    });
    let storage = Arc::new(HookStorage::new(Arc::new(sim.booted()), hook));
    let engine = F2Engine::open(storage, &EngineConfig::default()).unwrap();
    // The WAL's first write creates (and syncs) its segment under its writer lock: let that
    // happen before a sync is held.
    engine.put(b"warm", b"up", Durability::Sync).unwrap();
    std::thread::scope(|scope| {
        armed.store(true, SeqCst);
        let held = scope.spawn(|| engine.put(b"a", b"1", Durability::Sync));
        entered_rx.recv_timeout(Duration::from_secs(10)).expect("the Sync put reached its fsync");
        engine.put(b"b", b"2", Durability::Buffered).unwrap();
        assert_eq!(engine.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
        assert_eq!(engine.get(b"a").unwrap(), None, "a write whose fsync is in flight is visible");
        release.send(()).unwrap();
        held.join().unwrap().unwrap();
    });
    assert_eq!(engine.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    engine.close().unwrap();
}
