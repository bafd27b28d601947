//! A new store's page size, chosen from its first records (`page_size_bytes=auto`, the
//! default): what it chooses, that an explicit size is kept, and that a crash anywhere in the
//! choice loses no synced write and leaves a store that opens at the size its checkpoint names.

use std::collections::BTreeMap;
use std::sync::Arc;

mod common;

use common::{counter, key};
use engine_treeline::TreelineEngine;
use strata_core::{Direction, Durability, Engine, EngineConfig, KeyRange, MaintenanceTask};
use strata_io::{CrashMode, MemStorage, OpenOptions, SimStorage, Storage};

/// Defaults but a budget that holds every record, so no write-back runs until asked for.
fn config(page_size: Option<&str>) -> EngineConfig {
    let config = EngineConfig { memory_budget_bytes: 64 << 20, ..EngineConfig::default() };
    match page_size {
        Some(size) => config.engine_option("page_size_bytes", size),
        None => config,
    }
}

fn open(storage: Arc<dyn Storage>) -> TreelineEngine {
    TreelineEngine::open(storage, &config(None)).unwrap()
}

fn value(len: usize, seed: u64) -> Vec<u8> {
    (0..len).map(|i| (i as u64 * 7 + seed) as u8).collect()
}

fn fill(engine: &TreelineEngine, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, records: u64, len: usize) {
    for i in 0..records {
        let (k, v) = (key(i * 7 % records), value(len, i));
        engine.put(&k, &v, Durability::Buffered).unwrap();
        model.insert(k, v);
    }
}

fn check_all(engine: &TreelineEngine, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(engine.get(k).unwrap().as_ref(), Some(v), "key {}", String::from_utf8_lossy(k));
    }
    let scanned: Vec<_> =
        engine.range(KeyRange::all(), Direction::Forward).unwrap().map(Result::unwrap).collect();
    assert!(scanned.iter().map(|(k, v)| (k, v)).eq(model.iter()), "scan differs");
}

#[test]
fn a_new_store_chooses_its_page_size_from_its_first_records() {
    for (value_bytes, page_bytes) in [(100, 4096), (500, 8192), (1000, 16384), (2000, 32768)] {
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        let engine = open(storage.clone());
        let mut model = BTreeMap::new();
        fill(&engine, &mut model, 1500, value_bytes);
        assert_eq!(engine.page_size_bytes(), 4096, "nothing written back yet");
        engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
        assert_eq!(engine.page_size_bytes(), page_bytes, "{value_bytes}-byte values");
        assert_eq!(counter(&engine, "page_size_bytes"), page_bytes as u64);
        assert_eq!(engine.limits().max_key_bytes, page_bytes / 16);
        check_all(&engine, &model);
        engine.close().unwrap();
        let engine = open(storage);
        assert_eq!(engine.page_size_bytes(), page_bytes, "kept at reopen");
        check_all(&engine, &model);
        engine.verify().unwrap();
    }
}

#[test]
fn an_explicit_page_size_is_kept_whatever_the_records() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = TreelineEngine::open(storage.clone(), &config(Some("4KiB"))).unwrap();
    let mut model = BTreeMap::new();
    fill(&engine, &mut model, 500, 1000);
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    assert_eq!(engine.page_size_bytes(), 4096);
    engine.close().unwrap();
    // An existing store keeps its page size whatever the options say.
    let engine = TreelineEngine::open(storage, &config(Some("auto"))).unwrap();
    fill(&engine, &mut model, 600, 1000);
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    assert_eq!(engine.page_size_bytes(), 4096);
    check_all(&engine, &model);
}

/// A new store whose first write-back chose 16 KiB pages and wrote some, then lost power
/// before any checkpoint referenced a page: its checkpoint names 16 KiB and an empty index.
fn chosen_then_crashed(seed: u64) -> (SimStorage, BTreeMap<Vec<u8>, Vec<u8>>) {
    let sim = SimStorage::new(seed);
    let engine = open(Arc::new(sim.booted()));
    let mut model = BTreeMap::new();
    fill(&engine, &mut model, 400, 1000);
    engine.maintenance().run(MaintenanceTask::Commit).unwrap();
    assert_eq!(engine.page_size_bytes(), 16384);
    engine.flush().unwrap();
    sim.crash(CrashMode::Random);
    std::mem::forget(engine);
    (sim, model)
}

#[test]
fn a_crash_after_the_choice_keeps_the_size_and_every_synced_write() {
    let (sim, mut model) = chosen_then_crashed(3);
    let engine = open(Arc::new(sim.booted()));
    assert_eq!(engine.page_size_bytes(), 16384);
    check_all(&engine, &model);
    // Still a store no checkpoint references a page of: small records now choose again, but
    // never a smaller size than the one the WAL's records were accepted under.
    for k in model.keys() {
        engine.delete(k, Durability::Buffered).unwrap();
    }
    model.clear();
    fill(&engine, &mut model, 400, 20);
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    assert_eq!(engine.page_size_bytes(), 16384);
    check_all(&engine, &model);
    engine.verify().unwrap();
}

/// The data file's header lags the checkpoint (a crash between the checkpoint naming the new
/// size and the header written for it), is torn or is gone: no checkpoint references a page
/// of it, so open writes it again for the checkpoint's size and the WAL brings every record.
#[test]
fn open_rewrites_a_new_stores_data_header_that_lags_its_checkpoint() {
    let old_header = {
        let storage = MemStorage::new();
        TreelineEngine::open(Arc::new(storage.clone()), &config(Some("4KiB"))).unwrap().close().unwrap();
        strata_io::read_all(storage.open("treeline-data", OpenOptions::existing()).unwrap().as_ref()).unwrap()
    };
    assert_eq!(old_header.len(), 4096, "an empty store's data file is its header");
    type Damage = fn(&dyn Storage, &[u8]);
    let damages: [(&str, Damage); 3] = [
        ("a 4 KiB header", |s, old| {
            let file = s.open("treeline-data", OpenOptions::existing()).unwrap();
            file.set_len(0).unwrap();
            file.write_at(0, old).unwrap();
            file.sync().unwrap();
        }),
        ("an empty file", |s, _| {
            s.open("treeline-data", OpenOptions::existing()).unwrap().set_len(0).unwrap()
        }),
        ("no file", |s, _| s.remove("treeline-data").unwrap()),
    ];
    for (seed, (what, damage)) in (10..).zip(damages) {
        let (sim, model) = chosen_then_crashed(seed);
        damage(&sim.booted(), &old_header);
        let engine = open(Arc::new(sim.booted()));
        assert_eq!(engine.page_size_bytes(), 16384, "{what}");
        check_all(&engine, &model);
        engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
        engine.verify().unwrap();
        engine.close().unwrap();
        check_all(&open(Arc::new(sim.booted())), &model);
    }
}
