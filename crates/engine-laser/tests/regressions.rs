//! Bugs found while building laser, each with the test that would have caught it.

use std::sync::Arc;

use engine_laser::LaserEngine;
use strata_core::{Direction, Durability, Engine, EngineConfig, KeyRange, Maintenance, MaintenanceTask};
use strata_io::MemStorage;

fn config() -> EngineConfig {
    EngineConfig { memory_budget_bytes: 1 << 20, ..EngineConfig::default() }.with_engine_options([
        ("memtable_bytes", "4KiB"),
        ("level0_runs", "1"),
        ("size_ratio", "2"),
    ])
}

/// Found by the kit's conformance check: the single-pass compaction used the empty key as its
/// "write every older entry" mark, so a compaction meeting a real empty key wrote the level's
/// older entries before it, out of order.
#[test]
fn the_empty_key_goes_through_compactions_in_order() {
    let engine = LaserEngine::open(Arc::new(MemStorage::new()), &config()).unwrap();
    for round in 0..4u8 {
        for i in 0..300u32 {
            engine.put(format!("k{i:05}").as_bytes(), &[round; 40], Durability::None).unwrap();
        }
        engine.put(b"", &[round], Durability::None).unwrap();
        engine.run(MaintenanceTask::Compact).unwrap();
    }
    assert!(engine.stats().counter("levels").unwrap() >= 2, "deep enough to compact level into level");
    assert_eq!(engine.get(b"").unwrap(), Some(vec![3]));
    let keys: Vec<Vec<u8>> =
        engine.range(KeyRange::all(), Direction::Forward).unwrap().map(|r| r.unwrap().0).collect();
    assert_eq!(keys.len(), 301);
    assert!(keys.windows(2).all(|w| w[0] < w[1]));
}

/// Found by the `laser_manifest` fuzz target (its check of the undamaged seed store): `verify`
/// listed the WAL's segments while a flush, its work lock already released, truncated the log
/// behind the flushed table, and failed opening a removed segment. A flush now truncates under
/// the work lock, which `verify` holds.
#[test]
fn verify_during_flushes_never_fails() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn strata_io::Storage> =
        Arc::new(strata_io::FileStorage::open_dir(dir.path(), true).unwrap());
    let config = EngineConfig { wal_segment_bytes: Some(16 << 10), ..config() };
    let engine = Arc::new(LaserEngine::open(storage, &config).unwrap());
    let writer = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            for i in 0..30_000u32 {
                engine.put(format!("k{:05}", i % 2_000).as_bytes(), &[7; 60], Durability::None).unwrap();
            }
        })
    };
    let mut verified = 0;
    while !writer.is_finished() {
        engine.verify().unwrap();
        verified += 1;
    }
    writer.join().unwrap();
    assert!(engine.stats().counter("flushes").unwrap() >= 10 && verified > 10, "{verified} verifies");
}

/// Found by the `laser_wal` fuzz target (CI's smoke run): an open that then failed on a damaged
/// WAL had already removed the run files the manifest does not name. Leftovers now go only once
/// the WAL is found whole: a failed open changes nothing.
#[test]
fn a_failed_open_removes_no_leftover_run() {
    use strata_io::{OpenOptions, Storage};
    let storage = Arc::new(MemStorage::new());
    let engine = LaserEngine::open(storage.clone(), &config()).unwrap();
    engine.put(b"k", b"v", Durability::Sync).unwrap();
    engine.close().unwrap();
    let leftover = "laser-9999999999999999.run";
    storage.open(leftover, OpenOptions::create()).unwrap().write_at(0, b"an interrupted flush").unwrap();
    let segment = storage
        .list()
        .unwrap()
        .into_iter()
        .find(|n| n.starts_with("laser-wal-") && n.ends_with(".log"))
        .unwrap();
    storage.remove(&segment).unwrap();
    assert!(LaserEngine::open(storage.clone(), &config()).is_err(), "a WAL segment is missing");
    assert!(storage.exists(leftover).unwrap(), "the failed open removed a leftover run file");
}
