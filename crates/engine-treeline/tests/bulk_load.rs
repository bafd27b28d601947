//! Bulk loading: into an empty store the segments are built directly (no write-back, overflow
//! page or reorganization) and published by one checkpoint, all or nothing.

use std::sync::Arc;

mod common;

use common::{counter, open};
use strata_core::{Direction, Durability, Engine, Error, Key, KeyRange, Value};
use strata_io::{CrashMode, Fault, FaultKind, SimStorage, Storage};

/// Keys `bulk-` + a big-endian multiple of 7,919: evenly spread, so the models are linear (decimal
/// text would jump at every carry), as TreeLine's 8-byte integer keys are.
fn records(count: u64) -> Vec<(Key, Value)> {
    let key = |i: u64| [b"bulk-".as_slice(), &(i * 7_919).to_be_bytes()].concat();
    (0..count).map(|i| (key(i), format!("value-{i}").repeat(8).into_bytes())).collect()
}

fn scan_all(engine: &dyn Engine) -> Vec<(Key, Value)> {
    engine.range(KeyRange::all(), Direction::Forward).unwrap().map(Result::unwrap).collect()
}

#[test]
fn a_bulk_load_into_an_empty_store_writes_full_segments_without_reorganizing() {
    let sim = SimStorage::new(5);
    let storage: Arc<dyn Storage> = Arc::new(sim.booted());
    let engine = open(storage);
    let records = records(5_000);
    assert_eq!(engine.bulk_load(&mut records.iter().cloned().map(Ok)).unwrap(), 5_000);
    assert_eq!(counter(&engine, "bulk_loaded_records"), 5_000);
    for name in ["reorganizations", "overflow_pages_created", "pages_written_back"] {
        assert_eq!(counter(&engine, name), 0, "{name}");
    }
    // Goal 6 (common::config) makes ~834 pages; keys this linear fill 16-page segments.
    let segments = counter(&engine, "index.segments");
    assert!(segments <= 834 / 8, "{segments} segments: page grouping did not group");
    assert_eq!(scan_all(&engine), records);
    // Published by a checkpoint: a power cut right after loses nothing and replays nothing.
    sim.crash(CrashMode::Random);
    drop(engine);
    let engine = open(Arc::new(sim.booted()));
    assert_eq!(counter(&engine, "records_replayed_at_open"), 0);
    assert_eq!(scan_all(&engine), records);
    engine.verify().unwrap();
}

#[test]
fn a_bulk_load_into_a_store_with_records_writes_them_as_batches() {
    let sim = SimStorage::new(6);
    let engine = open(Arc::new(sim.booted()));
    engine.put(&records(20)[10].0, b"earlier", Durability::Buffered).unwrap();
    let records = records(500);
    assert_eq!(engine.bulk_load(&mut records.iter().cloned().map(Ok)).unwrap(), 500);
    assert_eq!(counter(&engine, "bulk_loaded_records"), 0, "not empty: the batched path");
    assert_eq!(scan_all(&engine), records, "the loaded value wins over the earlier write");
}

/// A bulk load of `records` whose input fails after the last one (past the first 65,536-record
/// chunk, so segments were written before the error): all or nothing.
fn load_failing_at_the_end(engine: &dyn Engine, records: &[(Key, Value)]) {
    let mut input = records.iter().cloned().map(Ok).chain([Err(Error::invalid("stop"))]);
    assert!(matches!(engine.bulk_load(&mut input), Err(Error::InvalidArgument(m)) if m == "stop"));
    assert!(scan_all(engine).is_empty(), "all or nothing");
}

#[test]
fn a_failed_bulk_load_leaves_the_store_empty_and_its_pages_free() {
    let sim = SimStorage::new(7);
    let engine = open(Arc::new(sim.booted()));
    let records = records(70_000);
    load_failing_at_the_end(&engine, &records);
    // The written segments went back: free, and at the file's end, so the end moved back to
    // the header page (a new store has no segment).
    assert_eq!(counter(&engine, "data_pages"), 1, "the written segments went back");
    // The store is still empty, so the next load takes the direct path and reuses the pages.
    assert_eq!(engine.bulk_load(&mut records.iter().cloned().map(Ok)).unwrap(), 70_000);
    assert_eq!(counter(&engine, "bulk_loaded_records"), 70_000);
    assert_eq!(scan_all(&engine), records);
    engine.close().unwrap();
    let engine = open(Arc::new(sim.booted()));
    assert_eq!(scan_all(&engine), records);
}

/// The pages a failed bulk load wrote are free and at the data file's end: the next checkpoint
/// stores the lowered end and then cuts them off the file, and the store reopens from it after
/// a power cut (an open refuses a checkpoint whose end is past the file's last page).
#[test]
fn the_free_tail_of_the_data_file_is_given_back_at_a_checkpoint() {
    let sim = SimStorage::new(8);
    let engine = open(Arc::new(sim.booted()));
    let records = records(70_000);
    load_failing_at_the_end(&engine, &records);
    let data_bytes = || sim.contents("treeline-data").map_or(0, |c| c.len());
    let written = data_bytes();
    engine.put(b"kept", b"value", Durability::Sync).unwrap();
    engine.maintenance().run(strata_core::MaintenanceTask::Checkpoint).unwrap();
    assert!(data_bytes() * 100 < written, "{} of {written} bytes left", data_bytes());
    sim.crash(CrashMode::Random);
    drop(engine);
    let engine = open(Arc::new(sim.booted()));
    assert_eq!(engine.get(b"kept").unwrap().as_deref(), Some(&b"value"[..]));
    engine.verify().unwrap();
    assert_eq!(engine.bulk_load(&mut records.iter().cloned().map(Ok)).unwrap(), 70_000);
    assert_eq!(scan_all(&engine).len(), 70_001);
}

/// Regression (found by review): a page write that failed inside a bulk load left the slot it
/// had reserved at the end of the data file unreleased and the store usable, so the next
/// checkpoint (the close's) stored a data end past the file's last page, and every later open
/// refused the store as corrupt. A failed write now poisons the store: the close reports it, and
/// the reopen finds the checkpoint before the load (empty; the load can be run again) or, when
/// the failed write came after the load's checkpoint was stored (the double-write area's reset),
/// the whole load. The segments go out in writes of up to 4 MiB, so 20,000 records (~14 MB) make
/// several data writes before the checkpoint's.
#[test]
fn a_write_failing_in_a_bulk_load_leaves_a_store_that_reopens_empty_or_whole() {
    let records = records(20_000);
    for after_writes in 0..6 {
        let sim = SimStorage::new(after_writes);
        let engine = open(Arc::new(sim.booted()));
        sim.inject(Fault::FailWrite { after_writes, kind: FaultKind::Enospc, sticky: false });
        let loaded = engine.bulk_load(&mut records.iter().cloned().map(Ok));
        sim.clear_faults();
        assert!(loaded.is_err(), "write {after_writes}: the fault did not fire");
        let _ = engine.close();
        drop(engine);
        let engine = open(Arc::new(sim.booted()));
        let found = scan_all(&engine);
        assert!(found.is_empty() || found == records, "write {after_writes}: {} records", found.len());
        if found.is_empty() {
            assert_eq!(engine.bulk_load(&mut records.iter().cloned().map(Ok)).unwrap(), 20_000);
            assert_eq!(scan_all(&engine), records);
        }
        engine.verify().unwrap();
        engine.close().unwrap();
    }
}
