//! Values too large for a page (docs/format/treeline.md, "Blob runs"): up to 16 MiB at the
//! default page size, read in one sequential read, their space reused, damage reported, and no
//! run lost or leaked across power cuts.

use std::collections::BTreeMap;
use std::sync::Arc;

mod common;

use common::{counter, key, open};
use engine_treeline::TreelineEngine;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_core::{Direction, Durability, Engine, Error, KeyRange, MaintenanceTask};
use strata_io::{CrashMode, MemStorage, OpenOptions, SimStorage, Storage};

fn big(len: usize, seed: u64) -> Vec<u8> {
    (0..len).map(|i| (i as u64 * 31 + seed * 7 + i as u64 / 997) as u8).collect()
}

fn check_all(engine: &TreelineEngine, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        let got = engine.get(k).unwrap();
        assert!(
            got.as_ref() == Some(v),
            "key {}: {:?} bytes",
            String::from_utf8_lossy(k),
            got.map(|g| g.len())
        );
    }
    let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let scanned: Vec<_> =
        engine.range(KeyRange::all(), Direction::Forward).unwrap().map(Result::unwrap).collect();
    assert!(scanned == expected, "forward scan differs");
    let mut reversed: Vec<_> =
        engine.range(KeyRange::all(), Direction::Reverse).unwrap().map(Result::unwrap).collect();
    reversed.reverse();
    assert!(reversed == expected, "reverse scan differs");
}

#[test]
fn values_up_to_16_mib_round_trip_through_blob_runs() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = open(storage.clone());
    let mut model = BTreeMap::new();
    let sizes = [1_735, 1_800, 4_000, 70_000, 1 << 20, 16 << 20];
    for (i, &len) in sizes.iter().enumerate() {
        let k = key(i as u64 * 10);
        engine.put(&k, &big(len, i as u64), Durability::Buffered).unwrap();
        model.insert(k, big(len, i as u64));
        let small = key(i as u64 * 10 + 5);
        engine.put(&small, b"small", Durability::Buffered).unwrap();
        model.insert(small, b"small".to_vec());
    }
    check_all(&engine, &model);
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    assert!(counter(&engine, "blob_runs_written") >= 5, "{:?}", engine.stats().engine_counters);
    check_all(&engine, &model);
    // Large over small, small over large, large over large, and a delete.
    for (i, len) in [(0u64, 2_000usize), (1, 10), (3, 300_000)] {
        engine.put(&key(i * 10), &big(len, 99 + i), Durability::Buffered).unwrap();
        model.insert(key(i * 10), big(len, 99 + i));
    }
    engine.delete(&key(40), Durability::Buffered).unwrap();
    model.remove(&key(40));
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    check_all(&engine, &model);
    engine.verify().unwrap();
    engine.close().unwrap();
    let engine = open(storage);
    check_all(&engine, &model);
    assert_eq!(engine.limits().max_value_bytes, 16 << 20, "the facade refuses more");
}

/// A point read of a large value not in the cache costs its page read and one read of the run.
#[test]
fn a_large_value_is_read_in_one_sequential_read() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = open(storage.clone());
    let value = big(1 << 20, 3);
    engine.put(b"large", &value, Durability::Buffered).unwrap();
    engine.close().unwrap();
    let engine = open(storage);
    let before = engine.stats().io;
    assert_eq!(engine.get(b"large").unwrap(), Some(value));
    let after = engine.stats().io;
    assert_eq!(after.read_ops - before.read_ops, 2, "the page, then the whole run");
    assert!(after.bytes_read - before.bytes_read < (1 << 20) + 3 * 4096);
}

/// Overwriting large values again and again reuses the runs the old ones left (after the next
/// checkpoint), so the data file stays near the live data.
#[test]
fn the_space_of_replaced_runs_is_reused() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = open(storage.clone());
    for round in 0..40u64 {
        for i in 0..4 {
            engine.put(&key(i), &big(100_000, round * 4 + i), Durability::Buffered).unwrap();
        }
        engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    }
    let data_bytes = storage.open("treeline-data", OpenOptions::existing()).unwrap().len().unwrap();
    assert!(data_bytes < 3 * 4 * 100_000, "the data file holds {data_bytes} bytes for 400 KB of values");
    for i in 0..4 {
        engine.delete(&key(i), Durability::Buffered).unwrap();
    }
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    let data_bytes = storage.open("treeline-data", OpenOptions::existing()).unwrap().len().unwrap();
    assert!(data_bytes <= 8 * 4096, "every run was given back: {data_bytes} bytes left");
}

/// Page offsets in `treeline-data` where a run of `value` starts (runs hold the bare value).
fn blob_run_offsets(storage: &dyn Storage, value: &[u8]) -> Vec<u64> {
    let file = storage.open("treeline-data", OpenOptions::existing()).unwrap();
    let bytes = strata_io::read_all(file.as_ref()).unwrap();
    let head = &value[..64];
    (0..bytes.len() / 4096)
        .filter(|p| &bytes[p * 4096..p * 4096 + 64] == head)
        .map(|p| (p * 4096) as u64)
        .collect()
}

#[test]
fn a_damaged_blob_run_is_corruption_naming_the_file_and_the_run() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = open(storage.clone());
    engine.put(b"large", &big(50_000, 1), Durability::Buffered).unwrap();
    engine.put(b"small", b"v", Durability::Buffered).unwrap();
    engine.close().unwrap();
    let runs = blob_run_offsets(storage.as_ref(), &big(50_000, 1));
    assert_eq!(runs.len(), 1);
    let file = storage.open("treeline-data", OpenOptions::existing()).unwrap();
    file.write_at(runs[0] + 30_000, &[0x5A; 4]).unwrap();
    let engine = open(storage);
    let err = engine.get(b"large").unwrap_err();
    assert!(
        matches!(&err, Error::Corruption { file, offset, .. } if file == "treeline-data" && *offset == runs[0]),
        "{err:?}"
    );
    assert_eq!(engine.get(b"small").unwrap(), Some(b"v".to_vec()), "other records stay readable");
    let scan: Result<Vec<_>, _> = engine.range(KeyRange::all(), Direction::Forward).unwrap().collect();
    assert!(scan.unwrap_err().is_corruption());
}

/// Random puts of small and large values and deletes, power cuts after each flush: every synced
/// write survives, and once everything is deleted no run is left behind (a crash between
/// checkpoints must not leak the runs that recovery can no longer reach).
#[test]
fn power_cuts_lose_no_large_value_and_leak_no_run() {
    let sim = SimStorage::new(23);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(5);
    for cycle in 0..10u64 {
        let engine = open(Arc::new(sim.booted()));
        check_all(&engine, &model);
        for round in 0..150u64 {
            let k = key(rng.gen_range(0..200));
            if rng.gen_bool(0.1) {
                engine.delete(&k, Durability::Buffered).unwrap();
                model.remove(&k);
                continue;
            }
            let len = if rng.gen_bool(0.3) { rng.gen_range(1_800..20_000) } else { rng.gen_range(10..300) };
            let v = big(len, cycle * 1_000 + round);
            engine.put(&k, &v, Durability::Buffered).unwrap();
            model.insert(k, v);
        }
        engine.flush().unwrap();
        sim.crash(CrashMode::Random);
        std::mem::forget(engine);
    }
    let engine = open(Arc::new(sim.booted()));
    check_all(&engine, &model);
    engine.verify().unwrap();
    for k in model.keys() {
        engine.delete(k, Durability::Buffered).unwrap();
    }
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    let runs = counter(&engine, "blob_runs");
    assert_eq!(runs, 0, "runs left after every record was deleted: {:?}", engine.stats().engine_counters);
}
