//! The background maintenance thread: writers are held to the hot log's disk budget
//! (backpressure) while compaction runs off their path, and the thread never touches storage
//! after the engine is closed or, after a power loss, dropped.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{config, counter, key, small_options};
use engine_f2::{F2Engine, F2Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Engine};
use strata_io::{CrashMode, MemStorage, SimStorage, Storage};

const PAGE_BYTES: u64 = 4 << 10;
const HOT_DISK_BUDGET_BYTES: u64 = 32 << 10;

fn options() -> F2Options {
    F2Options {
        page_size_bytes: Some(PAGE_BYTES),
        hot_log_disk_budget_bytes: Some(HOT_DISK_BUDGET_BYTES),
        background_maintenance: true,
        ..small_options()
    }
}

#[test]
fn writers_are_held_to_the_hot_log_disk_budget() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = F2Engine::open_with(storage.clone(), &config(), options()).unwrap();
    let mut rng = SmallRng::seed_from_u64(5);
    let mut model = HashMap::new();
    for i in 0..6000u64 {
        let k = key(rng.gen_range(0..2000));
        let v = format!("value-{i}-{}", "x".repeat(rng.gen_range(0..60))).into_bytes();
        engine.put(&k, &v, Durability::Buffered).unwrap();
        model.insert(k, v);
        let hot_bytes = counter(&engine, "hot_log.size_bytes");
        assert!(hot_bytes <= HOT_DISK_BUDGET_BYTES + PAGE_BYTES, "hot log {hot_bytes} B after write {i}");
    }
    assert!(counter(&engine, "compaction.hot_to_cold_runs") > 0);
    for (k, v) in &model {
        assert_eq!(engine.get(k).unwrap().as_ref(), Some(v));
    }
    engine.close().unwrap();
    let engine = F2Engine::open_with(storage, &config(), options()).unwrap();
    for (k, v) in &model {
        assert_eq!(engine.get(k).unwrap().as_ref(), Some(v));
    }
}

/// Writes enough to keep the worker busy, then ends the engine with `finish`; afterwards the
/// storage must see no operation at all.
fn assert_quiet_after(finish: impl FnOnce(&SimStorage, F2Engine)) {
    let sim = SimStorage::new(3);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let engine = F2Engine::open_with(storage.clone(), &config(), options()).unwrap();
    for i in 0..3000u64 {
        engine.put(&key(i % 1500), format!("v{i:040}").as_bytes(), Durability::Buffered).unwrap();
    }
    finish(&sim, engine);
    let before = storage.io_stats();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(storage.io_stats(), before, "storage touched after the engine ended");
}

#[test]
fn no_storage_access_after_close() {
    assert_quiet_after(|_, engine| engine.close().unwrap());
}

#[test]
fn no_storage_access_after_a_crashed_engine_is_dropped() {
    assert_quiet_after(|sim, engine| {
        sim.crash(CrashMode::Random);
        drop(engine);
    });
}
