//! Multi-threaded compaction (`F2Options::compaction_threads`) against a model: many rounds of
//! hot→cold and cold→cold compaction forced by tiny disk budgets, over a cold index of four
//! chunks (hundreds of keys share each chunk and its slots), so a chunk update lost between two
//! workers would lose keys. Runs with inline maintenance, so the same writes give the same
//! hot→cold rounds: any worker count must move exactly the records one worker moves. (Cold→cold
//! counts may differ: workers interleave their appends, so the cold log's pages, and with them
//! the ranges cold rounds cut, differ.)

use std::collections::BTreeMap;
use std::sync::Arc;

mod common;

use common::{config, counter, key, small_options};
use engine_f2::{F2Engine, F2Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Engine};
use strata_io::{MemStorage, Storage};

fn options(threads: usize) -> F2Options {
    F2Options {
        cold_index_bytes: Some(32),
        cold_log_disk_budget_bytes: Some(192 << 10),
        background_maintenance: false,
        compaction_threads: threads,
        compaction_frame_pages: 2,
        ..small_options()
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The whole store: every key the model ever had reads as the model says, and a full scan
/// returns exactly the model.
fn check_store(engine: &F2Engine, model: &Model, keys: u64, when: &str) {
    for i in 0..keys {
        let k = key(i);
        assert_eq!(engine.get(&k).unwrap().as_ref(), model.get(&k), "{when}: key {i}");
    }
    let scanned: Model = engine.scan_all().unwrap().map(Result::unwrap).collect();
    assert!(scanned == *model, "{when}: a full scan differs from the model");
}

/// Hot→cold records and rounds after a seeded workload with `threads` workers (the store checked
/// against the model along the way and after a reopen).
fn run(threads: usize) -> [u64; 2] {
    const KEYS: u64 = 1500;
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = F2Engine::open_with(storage.clone(), &config(), options(threads)).unwrap();
    let mut rng = SmallRng::seed_from_u64(11);
    let mut model = Model::new();
    for i in 0..12_000u64 {
        let k = key(rng.gen_range(0..KEYS));
        if rng.gen_range(0..10) == 0 {
            engine.delete(&k, Durability::None).unwrap();
            model.remove(&k);
        } else {
            let v = format!("v{i}-{}", "x".repeat(rng.gen_range(0..40))).into_bytes();
            engine.put(&k, &v, Durability::None).unwrap();
            model.insert(k, v);
        }
        if i % 3001 == 3000 {
            check_store(&engine, &model, KEYS, &format!("{threads} workers, write {i}"));
        }
    }
    check_store(&engine, &model, KEYS, &format!("{threads} workers, end"));
    let counters =
        [counter(&engine, "compaction.hot_to_cold_records"), counter(&engine, "compaction.hot_to_cold_runs")];
    assert!(counters[1] >= 10, "{threads} workers: only {} hot→cold rounds", counters[1]);
    assert!(counter(&engine, "compaction.cold_to_cold_runs") >= 3, "{threads} workers: too few cold rounds");
    engine.close().unwrap();
    let engine = F2Engine::open_with(storage, &config(), options(threads)).unwrap();
    check_store(&engine, &model, KEYS, &format!("{threads} workers, reopened"));
    counters
}

#[test]
fn any_worker_count_moves_exactly_the_live_records() {
    let one = run(1);
    assert_eq!(run(2), one, "2 workers vs 1: hot→cold records and rounds");
    assert_eq!(run(3), one, "3 workers vs 1");
}

/// The background worker with two compaction threads, against a model under backpressure.
#[test]
fn background_rounds_with_two_workers_keep_every_key() {
    let options = F2Options { background_maintenance: true, ..options(2) };
    let engine = F2Engine::open_with(Arc::new(MemStorage::new()), &config(), options).unwrap();
    let mut rng = SmallRng::seed_from_u64(3);
    let mut model = Model::new();
    for i in 0..8000u64 {
        let k = key(rng.gen_range(0..1000));
        let v = format!("v{i}").into_bytes();
        engine.put(&k, &v, Durability::None).unwrap();
        model.insert(k, v);
    }
    check_store(&engine, &model, 1000, "background");
    assert!(counter(&engine, "compaction.hot_to_cold_runs") > 0);
}
