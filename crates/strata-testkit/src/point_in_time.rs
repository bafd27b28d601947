//! Point-in-time scans, for engines whose `capabilities()` declare them (others are not
//! checked): a scan sees the store as it was when `range` returned, whatever is written while
//! it is open — overwrites and deletes of the keys it will reach, new keys inside its range,
//! and enough writes (with the engine's `Commit` maintenance when it offers it) to move the
//! engine's in-memory tables into its main structure under the open scans. Scans are opened at
//! random moments, forward and reverse, over random ranges; some are read a little before the
//! writes go on, some not at all until the end. On `MemStorage`; replayable by `STRATA_SEED`.

use std::collections::BTreeMap;
use std::ops::Bound;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Direction, Durability, Engine, KeyRange, KvIter, MaintenanceTask};
use strata_core::{Key, Value};
use strata_io::MemStorage;

use crate::escape;
use crate::keyspace::filled_value;
use crate::{seed, Failure, Target};

/// Seeds per `check` unless `STRATA_SEEDS` says otherwise.
pub const DEFAULT_SEEDS: usize = 3;
/// Writes per seed unless `STRATA_OPS` says otherwise.
const DEFAULT_WRITES: usize = 6_000;
/// Keys drawn from `0..KEYS`, so writes hit keys the scans will reach.
const KEYS: u64 = 1_500;

type Model = BTreeMap<Key, Value>;

/// An open scan, what it must yield, and what it yielded so far.
struct OpenScan {
    opened_at: usize,
    iter: KvIter,
    expected: Vec<(Key, Value)>,
    got: Vec<(Key, Value)>,
}

/// Runs the scenario for a few seeds; panics on the first scan that saw a later write.
pub fn check(target: &Target) {
    if !target.capabilities.point_in_time_scans {
        return;
    }
    for seed in seed::seeds(DEFAULT_SEEDS) {
        eprintln!("[strata-testkit] point_in_time {} seed={seed}", target.name);
        if let Err(description) = run(target, seed) {
            let check = format!("point_in_time {}", target.name);
            Failure { check, seed, op_index: None, description, recent_ops: Vec::new() }.raise();
        }
    }
}

fn key(n: u64) -> Key {
    format!("pit/{n:06}").into_bytes()
}

fn random_scan(rng: &mut SmallRng, model: &Model) -> (KeyRange, Direction, Vec<(Key, Value)>) {
    let (a, b) = (rng.gen_range(0..KEYS), rng.gen_range(0..KEYS));
    let (low, high) = (key(a.min(b)), key(a.max(b)));
    let range = KeyRange { start: Bound::Included(low.clone()), end: Bound::Excluded(high.clone()) };
    let expected = model.range(low..high).map(|(k, v)| (k.clone(), v.clone()));
    match rng.gen_bool(0.5) {
        true => (range, Direction::Forward, expected.collect()),
        false => (range, Direction::Reverse, expected.rev().collect()),
    }
}

/// Reads up to `n` more records of `scan`.
fn advance(scan: &mut OpenScan, n: usize) -> Result<(), String> {
    for item in scan.iter.by_ref().take(n) {
        scan.got.push(item.map_err(|e| format!("the scan opened at write {} failed: {e}", scan.opened_at))?);
    }
    Ok(())
}

/// One seed of `check`: the first scan that saw a later write, described.
pub fn run(target: &Target, seed: u64) -> Result<(), String> {
    let engine = (target.open)(std::sync::Arc::new(MemStorage::new())).map_err(|e| format!("open: {e}"))?;
    let mut rng = SmallRng::seed_from_u64(seed::derive(seed, 0x7069_7473));
    let mut model = Model::new();
    let mut scans: Vec<OpenScan> = Vec::new();
    let writes = seed::ops_per_seed(DEFAULT_WRITES);
    let commit = target.capabilities.maintenance.contains(&MaintenanceTask::Commit);
    for serial in 0..writes {
        if rng.gen_ratio(1, 150) {
            let (range, direction, expected) = random_scan(&mut rng, &model);
            let iter = engine.range(range, direction).map_err(|e| format!("range at write {serial}: {e}"))?;
            let mut scan = OpenScan { opened_at: serial, iter, expected, got: Vec::new() };
            let first = rng.gen_range(0..3usize) * 7;
            advance(&mut scan, first)?;
            scans.push(scan);
        }
        if commit && rng.gen_ratio(1, 1_000) {
            engine.maintenance().run(MaintenanceTask::Commit).map_err(|e| format!("commit: {e}"))?;
        }
        write_one(engine.as_ref(), &mut rng, &mut model, serial)?;
    }
    for mut scan in scans {
        advance(&mut scan, usize::MAX)?;
        if scan.got != scan.expected {
            return Err(describe(&scan));
        }
    }
    engine.close().map_err(|e| format!("close: {e}"))
}

fn write_one(
    engine: &dyn Engine,
    rng: &mut SmallRng,
    model: &mut Model,
    serial: usize,
) -> Result<(), String> {
    let k = key(rng.gen_range(0..KEYS));
    let written = if rng.gen_bool(0.2) {
        model.remove(&k);
        engine.delete(&k, Durability::Buffered)
    } else {
        let value = filled_value(rng.gen_range(0..160), serial as u64);
        model.insert(k.clone(), value.clone());
        engine.put(&k, &value, Durability::Buffered)
    };
    written.map_err(|e| format!("write {serial}: {e}"))
}

/// The first record where the scan differs from the store at its opening.
fn describe(scan: &OpenScan) -> String {
    let at = scan.got.iter().zip(&scan.expected).position(|(g, e)| g != e);
    let at = at.unwrap_or(scan.got.len().min(scan.expected.len()));
    let show = |r: Option<&(Key, Value)>| match r {
        Some((k, v)) => format!("{} ({} B)", escape::key(k), v.len()),
        None => "the end".to_string(),
    };
    format!(
        "the scan opened at write {} yielded {} records, the store then held {}; record {at}: got {}, expected {}",
        scan.opened_at,
        scan.got.len(),
        scan.expected.len(),
        show(scan.got.get(at)),
        show(scan.expected.get(at)),
    )
}
