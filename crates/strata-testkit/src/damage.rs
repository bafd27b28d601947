//! The damage set: a store is filled with acknowledged data (puts, overwrites,
//! deletes, batches), flushed and closed cleanly; then, one at a time on a copy, each of its
//! files is **cut short** (below its last non-zero byte, where its synced contents end, and to
//! half of that), **deleted**, or **replaced by an empty file**. Deleting each file in turn also
//! makes every possible gap in a numbered sequence (a middle WAL segment missing).
//!
//! The store must then either refuse to open with an error naming the damaged file — a deleted
//! file may instead be reported as `Corruption` of another file, since an engine cannot always
//! know the name of a file that is gone (memory's newest snapshot) — or open with every
//! acknowledged key intact: every value as written, no deleted key back, and, for an ordered
//! engine, a full scan equal to the model. A store that opens and has lost data has lost it
//! silently: that is the failure this check exists for.
//!
//! An open that refuses must leave every other file as it was (no file removed, no non-zero
//! byte changed; a zero tail may be cut): the operator who restores the damaged file from a
//! backup must find the rest intact.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Direction, Durability, Engine, Error, Key, KeyRange, Value, WriteBatch};
use strata_io::{read_all, MemStorage, OpenOptions, Storage};

use crate::escape;
use crate::failure::catch;
use crate::{seed, Failure, Target};

/// Seeds per `check` unless `STRATA_SEEDS` says otherwise (each seed damages every file).
pub const DEFAULT_SEEDS: usize = 1;
/// Writes that build the store; enough for snapshots, table commits and several segments with
/// the small sizes each engine's kit target uses.
const WRITES: usize = 1500;
const KEYS: u64 = 400;
/// Files the facade or a lock owns, not the engine's data.
const NOT_ENGINE_FILES: [&str; 2] = ["LOCK", "STRATA-MANIFEST"];

/// A store's files by name.
type Files = BTreeMap<String, Vec<u8>>;

/// What one damage does to a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    /// Cut to one byte less than its last non-zero byte ends.
    CutBelowEnd,
    /// Cut to half of where its last non-zero byte ends.
    CutToHalf,
    Delete,
    ReplaceWithEmpty,
}

const DAMAGES: [Damage; 4] =
    [Damage::CutBelowEnd, Damage::CutToHalf, Damage::Delete, Damage::ReplaceWithEmpty];

/// What the check saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub seed: u64,
    pub files: u64,
    /// Damaged stores that refused to open with an error naming the file.
    pub refused: u64,
    /// Damaged stores that opened with every acknowledged key intact.
    pub intact: u64,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} files damaged: {} refused to open, {} opened intact",
            self.files, self.refused, self.intact
        )
    }
}

/// Runs the damage set for a few seeds; panics on the first silent loss with the seed.
pub fn check(target: &Target) {
    for seed in seed::seeds(DEFAULT_SEEDS) {
        eprintln!("[strata-testkit] damage {} seed={seed}", target.name);
        match run(target, seed) {
            Ok(report) => eprintln!("[strata-testkit] damage {} seed={seed} ok: {report}", target.name),
            Err(failure) => failure.raise(),
        }
    }
}

/// One seed: build, close, then every file × every damage.
pub fn run(target: &Target, seed: u64) -> Result<Report, Failure> {
    let fail = |description: String| Failure {
        check: format!("damage {}", target.name),
        seed,
        op_index: None,
        description,
        recent_ops: Vec::new(),
    };
    let (files, model) = build_store(target, seed).map_err(|e| fail(format!("building the store: {e}")))?;
    let mut report = Report { seed, ..Report::default() };
    for name in files.keys().filter(|n| !NOT_ENGINE_FILES.contains(&n.as_str()) && !n.ends_with(".tmp")) {
        report.files += 1;
        for damage in DAMAGES {
            let what = format!("{name} {damage:?}");
            let storage = match damaged_copy(&files, name, damage) {
                Ok(Some(storage)) => storage,
                Ok(None) => continue,
                Err(e) => return Err(fail(format!("{what}: building the damaged copy: {e}"))),
            };
            let outcome = catch(|| reopen_and_check(target, storage.clone(), &model, name, damage))
                .map_err(|panic| fail(format!("{what}: the engine panicked: {panic}")))?;
            match outcome {
                Ok(Opened::Refused) => {
                    unchanged_after_refusal(&files, name, storage.as_ref())
                        .map_err(|e| fail(format!("{what}: {e}")))?;
                    report.refused += 1
                }
                Ok(Opened::Intact) => report.intact += 1,
                Err(e) => return Err(fail(format!("{what}: {e}"))),
            }
        }
    }
    Ok(report)
}

/// Fills a store with acknowledged writes, flushes and closes it; returns its files and the
/// model of what was acknowledged.
fn build_store(target: &Target, seed: u64) -> Result<(Files, BTreeMap<Key, Value>), Error> {
    let mem = MemStorage::new();
    let engine = (target.open)(Arc::new(mem.clone()))?;
    let mut rng = SmallRng::seed_from_u64(seed::derive(seed, 31));
    let mut model = BTreeMap::new();
    let key = |i: u64| format!("damage-key-{i:05}").into_bytes();
    for i in 0..WRITES {
        let durability = if i % 50 == 49 { Durability::Sync } else { Durability::Buffered };
        let mut batch = WriteBatch::new();
        for _ in 0..if i % 10 == 0 { 3 } else { 1 } {
            let k = key(rng.gen_range(0..KEYS));
            if rng.gen_bool(0.2) {
                batch.delete(k.clone());
                model.remove(&k);
            } else {
                let value: Vec<u8> = (0..rng.gen_range(1..300)).map(|_| rng.gen()).collect();
                batch.put(k.clone(), value.clone());
                model.insert(k, value);
            }
        }
        engine.write(batch, durability)?;
    }
    engine.flush()?;
    engine.close()?;
    drop(engine);
    let mut files = BTreeMap::new();
    for name in mem.list()? {
        files.insert(name.clone(), read_all(mem.open(&name, OpenOptions::existing())?.as_ref())?);
    }
    Ok((files, model))
}

/// Where a file's non-zero bytes end.
fn non_zero_end(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1)
}

/// A copy of the store with `damage` applied to `victim`; `None` when the damage changes
/// nothing (an empty file cannot be cut).
fn damaged_copy(files: &Files, victim: &str, damage: Damage) -> Result<Option<Arc<dyn Storage>>, Error> {
    let storage = MemStorage::new();
    for (name, bytes) in files {
        let bytes = if name == victim {
            let end = non_zero_end(bytes);
            match damage {
                Damage::CutBelowEnd if end == 0 => return Ok(None),
                Damage::CutBelowEnd => &bytes[..end - 1],
                Damage::CutToHalf if end < 2 => return Ok(None),
                Damage::CutToHalf => &bytes[..end / 2],
                Damage::Delete => continue,
                Damage::ReplaceWithEmpty if bytes.is_empty() => return Ok(None),
                Damage::ReplaceWithEmpty => &[][..],
            }
        } else {
            bytes.as_slice()
        };
        let file = storage.open(name, OpenOptions::create())?;
        file.write_at(0, bytes)?;
        file.sync()?;
    }
    Ok(Some(Arc::new(storage)))
}

/// After a refused open: every file but the victim (and `.tmp` leftovers) is still there with the
/// same non-zero bytes.
fn unchanged_after_refusal(files: &Files, victim: &str, storage: &dyn Storage) -> Result<(), String> {
    for (name, before) in files.iter().filter(|(n, _)| *n != victim && !n.ends_with(".tmp")) {
        let now = match storage.open(name, OpenOptions::existing()).and_then(|f| read_all(f.as_ref())) {
            Ok(now) => now,
            Err(e) => return Err(format!("the open refused, but it removed or broke {name}: {e}")),
        };
        if now[..non_zero_end(&now)] != before[..non_zero_end(before)] {
            return Err(format!("the open refused, but it changed {name}"));
        }
    }
    Ok(())
}

enum Opened {
    Refused,
    Intact,
}

/// Opens the damaged store: an error must name the file (see the module docs); an engine that
/// opens must hold exactly the acknowledged data.
fn reopen_and_check(
    target: &Target,
    storage: Arc<dyn Storage>,
    model: &BTreeMap<Key, Value>,
    victim: &str,
    damage: Damage,
) -> Result<Opened, String> {
    let engine = match (target.open)(storage) {
        Err(e) if refusal(&e, victim, damage) => return Ok(Opened::Refused),
        Err(e) => {
            return Err(format!("the open failed, but not with Corruption naming the damaged file: {e}"))
        }
        Ok(engine) => engine,
    };
    let checked = check_contents(engine.as_ref(), target, model, victim, damage);
    let _ = engine.close();
    checked.map(|()| Opened::Intact)
}

/// A damaged file is reported as `Corruption` naming it (a deleted one may be reported as
/// corruption of another file: its name is not always known). An `Io` error ("failed to fill
/// whole buffer", "No such file or directory") is not a diagnosis.
fn refusal(e: &Error, victim: &str, damage: Damage) -> bool {
    e.is_corruption() && (e.to_string().contains(victim) || damage == Damage::Delete)
}

fn check_contents(
    engine: &dyn Engine,
    target: &Target,
    model: &BTreeMap<Key, Value>,
    victim: &str,
    damage: Damage,
) -> Result<(), String> {
    let silent = "the store opened without an error but";
    for i in 0..KEYS {
        let key = format!("damage-key-{i:05}").into_bytes();
        let got = match engine.get(&key) {
            Ok(got) => got,
            // Damage found while reading (a file read lazily) is reported, not silent.
            Err(e) if refusal(&e, victim, damage) => return Ok(()),
            Err(e) => {
                return Err(format!(
                    "{silent} get({}) failed, not with Corruption naming it: {e}",
                    escape::key(&key)
                ))
            }
        };
        if got.as_ref() != model.get(&key) {
            let state = match (&got, model.get(&key)) {
                (None, Some(_)) => "an acknowledged key is missing",
                (Some(_), None) => "a deleted key came back",
                _ => "a key holds a value that is not its acknowledged one",
            };
            return Err(format!("{silent} {state}: {} (silent loss)", escape::key(&key)));
        }
    }
    if target.ordered() {
        let scanned: Result<Vec<(Key, Value)>, Error> =
            engine.range(KeyRange::all(), Direction::Forward).map_err(|e| e.to_string())?.collect();
        match scanned {
            Ok(items) if items.iter().map(|(k, v)| (k, v)).eq(model.iter()) => {}
            Ok(items) => {
                return Err(format!(
                    "{silent} a full scan holds {} items, {} were acknowledged",
                    items.len(),
                    model.len()
                ))
            }
            Err(e) if refusal(&e, victim, damage) => {}
            Err(e) => return Err(format!("{silent} a full scan failed: {e}")),
        }
    }
    Ok(())
}
