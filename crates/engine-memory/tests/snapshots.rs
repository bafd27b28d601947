//! Snapshots keep replay bounded and never lose data, even when a crash interrupts one.

use std::sync::Arc;

use engine_memory::MemoryEngine;
use strata_core::{Durability, Engine, EngineConfig};
use strata_io::{CrashMode, Fault, FaultKind, SimStorage, Storage};

fn config() -> EngineConfig {
    EngineConfig { wal_segment_bytes: 16 << 10, ..EngineConfig::default() }
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
