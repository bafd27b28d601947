//! `F2Options::single_log` (FASTER's one-log design, kept for comparison): compaction keeps every
//! record in the hot log, values match a model across reopens and power loss, and a store
//! reopens in the other mode (same on-disk format).

use std::collections::HashMap;
use std::sync::Arc;

mod common;

use common::{config, counter, key, small_options};
use engine_f2::{F2Engine, F2Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Engine};
use strata_io::{CrashMode, SimStorage, Storage};

type Model = HashMap<Vec<u8>, Option<Vec<u8>>>;

/// `small_options` with a hot-log disk budget that holds the tests' live data (the single log
/// holds every live record).
fn options(single_log: bool) -> F2Options {
    F2Options { single_log, hot_log_disk_budget_bytes: Some(128 << 10), ..small_options() }
}

fn open(storage: &Arc<dyn Storage>, single_log: bool) -> F2Engine {
    F2Engine::open_with(storage.clone(), &config(), options(single_log)).unwrap()
}

fn check_model(engine: &F2Engine, model: &Model) {
    for (k, v) in model {
        assert_eq!(engine.get(k).unwrap().as_ref(), v.as_ref(), "key {}", String::from_utf8_lossy(k));
    }
    let mut scanned: Vec<_> = engine.scan_all().unwrap().map(Result::unwrap).collect();
    scanned.sort();
    let mut live: Vec<_> =
        model.iter().filter_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone()))).collect();
    live.sort();
    assert_eq!(scanned, live);
}

/// Skewed puts, deletes and rmws over `keys` keys; returns nothing, updates `model`.
fn run_ops(engine: &F2Engine, model: &mut Model, seed: u64, ops: u64, keys: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    for i in 0..ops {
        let k = if rng.gen_bool(0.5) { key(rng.gen_range(0..8)) } else { key(rng.gen_range(0..keys)) };
        match rng.gen_range(0..12) {
            0 => {
                engine.delete(&k, Durability::None).unwrap();
                model.insert(k, None);
            }
            1..=3 => {
                let new = engine
                    .rmw(&k, &mut |old| Some([old.unwrap_or_default(), b"+"].concat()), Durability::None)
                    .unwrap();
                model.insert(k, new);
            }
            _ => {
                let v = format!("value-{seed}-{i}-{}", "x".repeat(rng.gen_range(0..60))).into_bytes();
                engine.put(&k, &v, Durability::None).unwrap();
                model.insert(k, Some(v));
            }
        }
    }
}

#[test]
fn single_log_compaction_keeps_every_record_in_the_hot_log() {
    let sim = SimStorage::new(11);
    let boot = || -> Arc<dyn Storage> { Arc::new(sim.booted()) };
    let mut model = Model::new();
    for round in 0..3 {
        let engine = open(&boot(), true);
        check_model(&engine, &model);
        run_ops(&engine, &mut model, round, 4000, 600);
        engine.flush().unwrap();
        check_model(&engine, &model);
        assert!(counter(&engine, "compaction.hot_to_cold_runs") > 0, "no hot-log compaction ran");
        assert!(counter(&engine, "compaction.hot_to_hot_tail_records") > 0);
        assert!(counter(&engine, "compaction.bytes_written") > 0);
        assert_eq!(counter(&engine, "compaction.hot_to_cold_records"), 0);
        assert_eq!(counter(&engine, "cold_log.size_bytes"), 0, "a record reached the cold log");
        assert_eq!(counter(&engine, "cold_log.tail"), counter(&engine, "cold_log.begin"));
        if round == 1 {
            // Power loss after a flush (nothing written since): every write survives. Dropped
            // after the crash, which stops its maintenance thread before the next open.
            sim.crash(CrashMode::Random);
            drop(engine);
        } else {
            engine.close().unwrap();
        }
    }
    let engine = open(&boot(), true);
    check_model(&engine, &model);
    assert!(engine.verify().unwrap().records_checked > 0);
    engine.close().unwrap();
}

/// The format is the same in both modes: an f2 store with cold records (and a tombstone over a
/// cold key) reopens in single-log mode, whose compaction must keep that tombstone while the
/// cold log holds an older version; and the result reopens as f2 again.
#[test]
fn a_store_reopens_in_the_other_mode() {
    let storage: Arc<dyn Storage> = Arc::new(strata_io::MemStorage::new());
    let mut model = Model::new();
    let engine = open(&storage, false);
    run_ops(&engine, &mut model, 1, 3000, 400);
    engine.compact_now().unwrap();
    assert!(counter(&engine, "cold_log.size_bytes") > 0);
    let cold_key = (0..400).map(key).find(|k| model.get(k).is_some_and(Option::is_some)).unwrap();
    engine.close().unwrap();

    let engine = open(&storage, true);
    check_model(&engine, &model);
    let tombstone_at_or_above = counter(&engine, "hot_log.tail");
    engine.delete(&cold_key, Durability::None).unwrap();
    model.insert(cold_key.clone(), None);
    run_ops(&engine, &mut model, 2, 3000, 400);
    let mut rounds = 0;
    while counter(&engine, "hot_log.begin") <= tombstone_at_or_above {
        engine.compact_now().unwrap();
        rounds += 1;
        assert!(rounds < 100, "compaction does not get past the tombstone");
    }
    assert!(counter(&engine, "compaction.hot_to_hot_tail_records") > 0);
    check_model(&engine, &model);
    engine.close().unwrap();

    let engine = open(&storage, false);
    check_model(&engine, &model);
    run_ops(&engine, &mut model, 3, 2000, 400);
    check_model(&engine, &model);
    engine.close().unwrap();
}
