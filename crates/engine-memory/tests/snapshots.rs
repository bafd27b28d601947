//! Snapshots keep replay bounded and never lose data, even when a crash interrupts one.

use std::sync::Arc;

use engine_memory::MemoryEngine;
use strata_core::{Durability, Engine, EngineConfig};
use strata_io::{CrashMode, Fault, FaultKind, SimStorage, Storage};

fn config() -> EngineConfig {
    EngineConfig { wal_segment_bytes: Some(16 << 10), ..EngineConfig::default() }
}

fn counter(engine: &MemoryEngine, name: &str) -> u64 {
    engine.stats().counter(name).unwrap_or_else(|| panic!("no counter {name}"))
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:05}", i % 700).into_bytes()
}

#[test]
fn replay_after_snapshots_is_bounded_by_the_wal_tail() {
    let sim = SimStorage::new(5);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let writes = 20_000u32;
    {
        let engine = MemoryEngine::open(storage.clone(), &config()).unwrap();
        for i in 0..writes {
            engine.put(&key(i), &i.to_le_bytes(), Durability::Buffered).unwrap();
        }
        assert!(counter(&engine, "snapshots_written") >= 3, "expected several snapshots");
        engine.close().unwrap();
    }
    let wal_files = storage.list().unwrap().iter().filter(|n| n.starts_with("wal-")).count();
    assert!(wal_files <= 8, "old WAL segments were not released: {wal_files} files");
    let engine = MemoryEngine::open(storage, &config()).unwrap();
    let replayed = counter(&engine, "records_replayed_at_open");
    assert!(
        replayed < u64::from(writes) / 4,
        "replayed {replayed} of {writes} records: snapshots did not bound replay"
    );
    for i in writes - 700..writes {
        assert_eq!(engine.get(&key(i)).unwrap(), Some(i.to_le_bytes().to_vec()));
    }
}

/// Fail every storage operation of a snapshot in turn, crash, reopen: nothing acknowledged is lost.
#[test]
fn a_crash_at_any_point_of_a_snapshot_loses_nothing() {
    let mut positions_tried = 0;
    for fail_at in 0..60u64 {
        let sim = SimStorage::new(fail_at);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let engine = MemoryEngine::open(storage.clone(), &EngineConfig::default()).unwrap();
        for i in 0..2_000u32 {
            engine.put(&key(i), &i.to_le_bytes(), Durability::None).unwrap();
        }
        engine.flush().unwrap();
        sim.inject(Fault::FailOp { after_ops: fail_at, kind: FaultKind::Eio, sticky: true });
        let result = engine.snapshot();
        sim.clear_faults();
        if result.is_ok() {
            break; // the snapshot needs fewer operations than `fail_at`: every position was covered
        }
        positions_tried += 1;
        drop(engine);
        sim.crash(CrashMode::Random);
        let engine = MemoryEngine::open(storage, &EngineConfig::default()).unwrap();
        for i in 1_300..2_000u32 {
            assert_eq!(engine.get(&key(i)).unwrap(), Some(i.to_le_bytes().to_vec()), "fail_at={fail_at}");
        }
    }
    assert!(positions_tried >= 5, "the snapshot path was barely exercised ({positions_tried} positions)");
}

/// A snapshot is due after the write that crosses its trigger; that write is committed and
/// visible before the snapshot starts. One storage operation fails in turn: where it hits the
/// snapshot, the write still returns `Ok` (it used to return the snapshot's error for a write
/// readers had already seen), the partial snapshot is removed, and everything written survives
/// a reopen.
#[test]
fn a_failed_automatic_snapshot_is_not_the_failure_of_the_write_that_triggered_it() {
    let value = vec![7u8; 1000];
    let mut snapshot_failures_seen = 0;
    for fail_at in 0..40u64 {
        let sim = SimStorage::new(fail_at);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let engine = MemoryEngine::open(storage.clone(), &config()).unwrap();
        // Just below the trigger: max(segment size, 64 KiB) of WAL payload (one small key, so
        // the live data stays below it).
        let mut i = 0u32;
        while counter(&engine, "wal_bytes_since_snapshot") + 2_100 < 64 << 10 {
            engine.put(&key(i % 3), &value, Durability::Buffered).unwrap();
            i += 1;
        }
        assert_eq!(counter(&engine, "snapshots_written"), 0);
        sim.inject(Fault::FailOp { after_ops: fail_at, kind: FaultKind::Eio, sticky: false });
        let triggering = engine.put(b"crossing", &value, Durability::Buffered);
        let second = engine.put(b"crossing-2", &value, Durability::Buffered);
        sim.clear_faults();
        if triggering.is_err() || second.is_err() {
            continue; // the fault hit the log: an ordinary failed write
        }
        let failed = counter(&engine, "snapshots_failed");
        snapshot_failures_seen += failed;
        if failed > 0 {
            assert_eq!(engine.get(b"crossing").unwrap(), Some(value.clone()), "fail_at={fail_at}");
            let leftovers: Vec<String> = storage
                .list()
                .unwrap()
                .into_iter()
                .filter(|n| n.starts_with("snapshot-") && n.ends_with(".tmp"))
                .collect();
            assert!(leftovers.is_empty(), "fail_at={fail_at}: a failed snapshot left {leftovers:?}");
        }
        engine.close().unwrap();
        drop(engine);
        let engine = MemoryEngine::open(storage, &config()).unwrap();
        for k in [&b"crossing"[..], b"crossing-2"] {
            assert_eq!(engine.get(k).unwrap(), Some(value.clone()), "fail_at={fail_at}");
        }
    }
    assert!(snapshot_failures_seen >= 3, "the fault hit a snapshot only {snapshot_failures_seen} times");
}

/// A snapshot in progress when `close` is called finishes before `close` returns: after it the
/// directory (and its lock) may belong to another opener, and a late snapshot would rename and
/// remove files there. The snapshot's first write is held until `close` has had time to return.
#[test]
fn close_waits_for_a_snapshot_in_progress() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::time::Duration;
    let (held, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let hook = {
        let (held, release) = (held.clone(), release.clone());
        Arc::new(move |name: &str, _offset: u64, _len: usize| {
            if name.ends_with(".snap.tmp") {
                held.store(true, SeqCst);
                while !release.load(SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            Ok(())
        })
    };
    let inner: Arc<dyn Storage> = Arc::new(SimStorage::new(9));
    let storage: Arc<dyn Storage> =
        Arc::new(strata_io::HookStorage::new(inner, Arc::new(|_| Ok(()))).with_writes(hook));
    let engine = Arc::new(MemoryEngine::open(storage.clone(), &config()).unwrap());
    for i in 0..100 {
        engine.put(&key(i), b"value", Durability::Buffered).unwrap();
    }
    std::thread::scope(|s| {
        let snapshotting = s.spawn(|| engine.snapshot());
        while !held.load(SeqCst) {
            std::thread::yield_now();
        }
        let closing = s.spawn(|| engine.close());
        std::thread::sleep(Duration::from_millis(200));
        let closed_early = closing.is_finished();
        // Released before any assertion, so a failure cannot leave the scope waiting forever.
        release.store(true, SeqCst);
        let (snapshot, close) = (snapshotting.join().unwrap(), closing.join().unwrap());
        assert!(!closed_early, "close returned while a snapshot was still being written");
        snapshot.unwrap();
        close.unwrap();
    });
    let names = storage.list().unwrap();
    assert!(
        !names.iter().any(|n| n.ends_with(".tmp")),
        "a snapshot's temporary file outlived close: {names:?}"
    );
    assert!(names.iter().any(|n| n.ends_with(".snap")), "the snapshot did not finish: {names:?}");
}
