//! `Engine::bulk_load` against a model, on `SimStorage` (an engine may override the default
//! batched path, e.g. `treeline` writes segments directly into an empty store):
//! - **into an empty store**: every record readable (gets, and full scans when ordered), the
//!   same after a power cut right after `bulk_load` returned (it is a durability point), and
//!   ordinary writes and a reopen work on top;
//! - **into a store with data**: the loaded records win over earlier writes of their keys, the
//!   other keys are kept;
//! - **an `Err` item** from the input ends the load with that error, and the store then holds a
//!   prefix of the records before it (possibly none), on the same handle and after a reopen;
//! - **a power cut mid-load**: after recovery the store holds a prefix of the records (engines
//!   without prefix-consistent recovery: any subset, each with its loaded value).

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Direction, Durability, Engine, Error, Key, KeyRange, Value};
use strata_io::{CrashMode, SimStorage, Storage};

use crate::keyspace::filled_value;
use crate::{seed, Failure, Target};

/// Seeds per `check` unless `STRATA_SEEDS` says otherwise.
pub const DEFAULT_SEEDS: usize = 2;
/// Records per load unless `STRATA_OPS` says otherwise.
const DEFAULT_RECORDS: usize = 3_000;
/// Largest value drawn, before the engine's limit.
const VALUE_MAX_BYTES: usize = 600;

type Model = BTreeMap<Key, Value>;

/// Runs the four scenarios for a few seeds; panics on the first disagreement with the seed.
pub fn check(target: &Target) {
    for seed in seed::seeds(DEFAULT_SEEDS) {
        eprintln!("[strata-testkit] bulk_load {} seed={seed}", target.name);
        let fail = |description: String| Failure {
            check: format!("bulk_load {}", target.name),
            seed,
            op_index: None,
            description,
            recent_ops: Vec::new(),
        };
        let scenarios: [(&str, Scenario); 4] = [
            ("into an empty store", into_an_empty_store),
            ("into a store with data", into_a_store_with_data),
            ("an Err item mid-load", an_error_item_mid_load),
            ("a power cut mid-load", a_power_cut_mid_load),
        ];
        for (name, scenario) in scenarios {
            if let Err(e) = scenario(target, seed) {
                fail(format!("{name}: {e}")).raise();
            }
        }
    }
}

type Scenario = fn(&Target, u64) -> Result<(), String>;

/// Sorted distinct records: keys `bulk/<16 hex digits>` with a random tail on some, values of
/// 0 to `VALUE_MAX_BYTES` bytes (within the engine's limits).
fn records(target: &Target, seed: u64) -> Result<Vec<(Key, Value)>, String> {
    let engine = open(target, &SimStorage::new(seed))?;
    let limits = engine.limits();
    let _ = engine.close();
    let mut rng = SmallRng::seed_from_u64(seed::derive(seed, 0x6275_6c6b));
    let mut model = Model::new();
    while model.len() < seed::ops_per_seed(DEFAULT_RECORDS) {
        let mut key = format!("bulk/{:016x}", rng.gen::<u64>()).into_bytes();
        if rng.gen_bool(0.2) {
            key.extend(std::iter::repeat_n(b'.', rng.gen_range(1..40)));
        }
        key.truncate(limits.max_key_bytes);
        let len = rng.gen_range(0..=VALUE_MAX_BYTES.min(limits.max_value_bytes));
        model.insert(key, filled_value(len, rng.gen()));
    }
    Ok(model.into_iter().collect())
}

fn open(target: &Target, sim: &SimStorage) -> Result<Box<dyn Engine>, String> {
    let storage: Arc<dyn Storage> = Arc::new(sim.booted());
    (target.open)(storage).map_err(|e| format!("open failed: {e}"))
}

fn load(engine: &dyn Engine, records: &[(Key, Value)]) -> strata_core::Result<u64> {
    engine.bulk_load(&mut records.iter().cloned().map(Ok))
}

fn into_an_empty_store(target: &Target, seed: u64) -> Result<(), String> {
    let records = records(target, seed)?;
    let sim = SimStorage::new(seed);
    let engine = open(target, &sim)?;
    let loaded = load(engine.as_ref(), &records).map_err(|e| format!("bulk_load failed: {e}"))?;
    if loaded != records.len() as u64 {
        return Err(format!("bulk_load returned {loaded}, {} records were given", records.len()));
    }
    let mut model: Model = records.into_iter().collect();
    equals(target, engine.as_ref(), &model, "after bulk_load")?;
    sim.crash(crash_mode(seed));
    drop(engine);
    let engine = open(target, &sim)?;
    equals(target, engine.as_ref(), &model, "after a power cut right after bulk_load returned")?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let keys: Vec<Key> = model.keys().cloned().collect();
    for serial in 0..300u64 {
        let key = keys[rng.gen_range(0..keys.len())].clone();
        let written = if rng.gen_bool(0.2) {
            engine.delete(&key, Durability::Buffered).map(|()| model.remove(&key)).map(|_| ())
        } else {
            let value = filled_value(rng.gen_range(0..200), serial);
            engine.put(&key, &value, Durability::Buffered).map(|()| {
                model.insert(key, value);
            })
        };
        written.map_err(|e| format!("a write after the load failed: {e}"))?;
    }
    engine.close().map_err(|e| format!("close failed: {e}"))?;
    let engine = open(target, &sim)?;
    equals(target, engine.as_ref(), &model, "after writes on the loaded store and a reopen")
}

fn into_a_store_with_data(target: &Target, seed: u64) -> Result<(), String> {
    let records = records(target, seed)?;
    let sim = SimStorage::new(seed);
    let engine = open(target, &sim)?;
    let mut model = Model::new();
    for (i, (key, _)) in records.iter().enumerate().step_by(61) {
        let mut key = key.clone();
        if i % 2 == 0 {
            key.push(b'+'); // a key the load does not have
        }
        let value = filled_value(10, i as u64);
        engine.put(&key, &value, Durability::Buffered).map_err(|e| format!("put failed: {e}"))?;
        model.insert(key, value);
    }
    load(engine.as_ref(), &records).map_err(|e| format!("bulk_load failed: {e}"))?;
    model.extend(records);
    equals(target, engine.as_ref(), &model, "after bulk_load over earlier writes")?;
    engine.close().map_err(|e| format!("close failed: {e}"))?;
    let engine = open(target, &sim)?;
    equals(target, engine.as_ref(), &model, "after bulk_load over earlier writes and a reopen")
}

fn an_error_item_mid_load(target: &Target, seed: u64) -> Result<(), String> {
    let records = records(target, seed)?;
    let cut = records.len() / 3;
    let sim = SimStorage::new(seed);
    let engine = open(target, &sim)?;
    let mut input =
        records.iter().take(cut).cloned().map(Ok).chain(std::iter::once(Err(Error::invalid("stop"))));
    match engine.bulk_load(&mut input) {
        Err(Error::InvalidArgument(msg)) if msg == "stop" => {}
        other => return Err(format!("expected the input's InvalidArgument(\"stop\"), got {other:?}")),
    }
    let prefix = |what: &str, engine: &dyn Engine| holds_a_prefix(target, engine, &records[..cut], what);
    prefix("on the same handle after the Err", engine.as_ref())?;
    let _ = engine.close();
    let engine = open(target, &sim)?;
    prefix("after a reopen", engine.as_ref())
}

/// Each seed's power cut: in-order prefixes with a torn last write, any subset of written pages
/// (page-cache writeback order), or every unsynced write lost.
fn crash_mode(seed: u64) -> CrashMode {
    [CrashMode::Random, CrashMode::Reordered, CrashMode::DropUnsynced][(seed % 3) as usize]
}

fn a_power_cut_mid_load(target: &Target, seed: u64) -> Result<(), String> {
    let records = records(target, seed)?;
    let cut_at = records.len() * 2 / 3;
    let sim = SimStorage::new(seed);
    let engine = open(target, &sim)?;
    let crasher = sim.clone();
    let mut input = records.iter().cloned().enumerate().map(|(i, record)| {
        if i == cut_at {
            crasher.crash(crash_mode(seed));
        }
        Ok(record)
    });
    // Ok or Err: the process is gone either way.
    let _ = engine.bulk_load(&mut input);
    drop(engine);
    let engine = open(target, &sim)?;
    holds_a_prefix(target, engine.as_ref(), &records, "after a power cut mid-load")
}

/// The store holds exactly `records[..j]` for some `j` (prefix-consistent engines), or a subset
/// of `records` with their values (others).
fn holds_a_prefix(
    target: &Target,
    engine: &dyn Engine,
    records: &[(Key, Value)],
    what: &str,
) -> Result<(), String> {
    let mut present = Vec::new();
    for (i, (key, value)) in records.iter().enumerate() {
        match engine.get(key).map_err(|e| format!("{what}: get failed: {e}"))? {
            Some(found) if found == *value => present.push(i),
            Some(_) => return Err(format!("{what}: record {i} holds a value it was never given")),
            None => {}
        }
    }
    if target.prefix_consistent() && present.iter().enumerate().any(|(n, &i)| n != i) {
        return Err(format!("{what}: {} of the records present, but not a prefix", present.len()));
    }
    if target.ordered() {
        let expected: Model = present.iter().map(|&i| records[i].clone()).collect();
        equals(target, engine, &expected, what)?;
    }
    Ok(())
}

/// Every model key reads back its value; an ordered engine's full scans equal the model.
fn equals(target: &Target, engine: &dyn Engine, model: &Model, what: &str) -> Result<(), String> {
    for (key, value) in model {
        let found = engine.get(key).map_err(|e| format!("{what}: get failed: {e}"))?;
        if found.as_ref() != Some(value) {
            return Err(format!(
                "{what}: key {:?} reads {:?} bytes, expected {}",
                key.escape_ascii().to_string(),
                found.map(|v| v.len()),
                value.len()
            ));
        }
    }
    if !target.ordered() {
        return Ok(());
    }
    for direction in [Direction::Forward, Direction::Reverse] {
        let scan =
            engine.range(KeyRange::all(), direction).map_err(|e| format!("{what}: range failed: {e}"))?;
        let mut scanned: Vec<(Key, Value)> =
            scan.collect::<strata_core::Result<_>>().map_err(|e| format!("{what}: scan failed: {e}"))?;
        if direction == Direction::Reverse {
            scanned.reverse();
        }
        if scanned.len() != model.len() || scanned.iter().zip(model).any(|(a, (k, v))| a.0 != *k || a.1 != *v)
        {
            return Err(format!(
                "{what}: a {direction:?} scan returned {} records, the model has {}",
                scanned.len(),
                model.len()
            ));
        }
    }
    Ok(())
}
