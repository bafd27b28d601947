//! The hot-index snapshot written at a clean close: the next open loads it instead of scanning
//! the hot log, falls back to the scan after a crash, and still checks the checksums of the log
//! tail pages it loads into memory.

use std::collections::HashMap;
use std::sync::Arc;

mod common;

use common::{config, counter, key, small_options};
use engine_f2::{F2Engine, F2Options};
use strata_core::{Durability, Engine};
use strata_io::{CrashMode, SimStorage, Storage};

/// No compaction: the disk budgets are far above what the tests write.
fn options() -> F2Options {
    F2Options {
        hot_log_disk_budget_bytes: Some(1 << 20),
        cold_log_disk_budget_bytes: 1 << 20,
        checkpoint_wal_bytes: None,
        ..small_options()
    }
}

fn open(storage: &Arc<dyn Storage>) -> F2Engine {
    F2Engine::open_with(storage.clone(), &config(), options()).unwrap()
}

#[test]
fn clean_reopen_loads_the_hot_index_and_a_crash_falls_back_to_the_scan() {
    let sim = SimStorage::new(1);
    let storage: Arc<dyn Storage> = Arc::new(sim.booted());
    let engine = open(&storage);
    let mut model = HashMap::new();
    for i in 0..2000u64 {
        let v = format!("value-{i}").into_bytes();
        engine.put(&key(i % 700), &v, Durability::Buffered).unwrap();
        model.insert(key(i % 700), v);
    }
    engine.close().unwrap();
    drop(engine);
    let engine = open(&storage);
    assert!(counter(&engine, "open.hot_index_entries_loaded") > 0);
    assert_eq!(counter(&engine, "open.hot_records_scanned"), 0);
    for (k, v) in &model {
        assert_eq!(engine.get(k).unwrap().as_ref(), Some(v));
    }
    // Once a newer checkpoint exists the snapshot no longer matches: after a crash the index is
    // rebuilt by scanning (and the writes after the checkpoint come back from the WAL).
    engine.put(&key(1), b"before-checkpoint", Durability::Buffered).unwrap();
    engine.checkpoint().unwrap();
    engine.put(&key(2), b"after-checkpoint", Durability::Sync).unwrap();
    model.insert(key(1), b"before-checkpoint".to_vec());
    model.insert(key(2), b"after-checkpoint".to_vec());
    sim.crash(CrashMode::DropUnsynced);
    drop(engine);
    // The storage of the next process lifetime (the dropped engine's is dead).
    let engine = open(&(Arc::new(sim.booted()) as Arc<dyn Storage>));
    assert_eq!(counter(&engine, "open.hot_index_entries_loaded"), 0);
    assert!(counter(&engine, "open.hot_records_scanned") > 0);
    for (k, v) in &model {
        assert_eq!(engine.get(k).unwrap().as_ref(), Some(v));
    }
}

/// Regression (kit fault_injection, bit flip in `f2-hot-*`): with the snapshot the hot log is no
/// longer scanned at open, and its tail page — loaded into memory, where reads skip checksums —
/// served a flipped value. The same held for the cold log's tail page.
#[test]
fn flipped_bit_in_a_loaded_tail_page_is_reported() {
    for (log, compact) in [("f2-hot-0000000000000000.seg", false), ("f2-cold-0000000000000000.seg", true)] {
        let sim = SimStorage::new(2);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let engine = open(&storage);
        // 300 records of 80 B fill 6 pages: compaction moves the oldest ones (key 0 first) to
        // the cold log, whose first page is then its tail page.
        let records = if compact { 300 } else { 20 };
        for i in 0..records {
            engine.put(&key(i), &[b'v'; 40], Durability::Buffered).unwrap();
        }
        if compact {
            assert!(engine.compact_now().unwrap().0 > 0);
        }
        engine.close().unwrap();
        drop(engine);
        // Byte 64 + 24 + 9 + 10: inside the first record's value (header 24 B, key 9 B).
        sim.flip_bit(log, 64 + 24 + 9 + 10, 3).unwrap();
        let reopened = F2Engine::open_with(storage.clone(), &config(), options());
        let outcome = reopened.and_then(|e| e.get(&key(0)));
        assert!(matches!(outcome, Err(strata_core::Error::Corruption { .. })), "{log}: {outcome:?}");
    }
}
