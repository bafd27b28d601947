//! The failed-writes rule from several threads at once: each thread writes only its own keys
//! (`t<i>/k<j>`), so its own model is exact for them whatever the interleaving, while the
//! threads' Sync writes share the WAL's group commits — a failing group fsync fails every
//! waiter, and none of their writes may be visible afterwards.
//!
//! Per thread the model is sound but weaker than a global one: another thread's Sync write may
//! have made this thread's Buffered writes durable, which the thread's model still counts as
//! pending (allowed either way). After a crash each thread's keys are checked against its own
//! model (prefix-consistent engines: the WAL order restricted to one thread is that thread's
//! program order, so a global prefix is a prefix per thread).

use std::collections::{BTreeMap, VecDeque};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Direction, Durability, Engine, Key, KeyRange, WriteBatch};
use strata_io::SimStorage;

use super::{arm, disarm, End, Injection, Report, FULL_DISK_VALUE_BYTES, OPS_AFTER_ERROR};
use crate::backend::Backend;
use crate::escape;
use crate::failure::catch;
use crate::ops::{rmw_step, Unit};
use crate::oracle::{Observed, Oracle};
use crate::runner::scan;
use crate::{seed, Failure, Target};

const THREADS: usize = 4;
const KEYS_PER_THREAD: usize = 6;
const OPS_PER_THREAD: usize = 40;
const FULL_DISK_OPS_PER_THREAD: usize = 200;
const RECENT_OPS_SHOWN: usize = 20;

/// One writer thread: its keys, its model and its recent ops.
struct Worker {
    thread: usize,
    rng: SmallRng,
    oracle: Oracle,
    keys: Vec<Key>,
    value_bytes: usize,
    serial: u64,
    recent: VecDeque<String>,
    failed_calls: u64,
}

pub(super) fn run(
    target: &Target,
    seed: u64,
    index: u64,
    injection: Injection,
    end: End,
    report: &mut Report,
) -> Result<(), Failure> {
    let check = format!("failed writes {}: {THREADS} threads, {injection:?}, then {end:?}", target.name);
    let fail = |description: String, recent_ops: Vec<String>| Failure {
        check: check.clone(),
        seed,
        op_index: None,
        description,
        recent_ops,
    };
    let scenario_seed = seed::derive(seed, 900 + index);
    let sim = SimStorage::new(seed::derive(scenario_seed, 1));
    let backend = Backend::Sim(sim.clone());
    let engine = open(target, &backend).map_err(|e| fail(e, Vec::new()))?;
    let note = arm(&sim, injection);
    let (ops, value_bytes) = match injection {
        Injection::FullDisk => (FULL_DISK_OPS_PER_THREAD, FULL_DISK_VALUE_BYTES),
        Injection::Fault(_) => (OPS_PER_THREAD, 0),
    };
    let workers = write_concurrently(&*engine, scenario_seed, ops, value_bytes)
        .map_err(|(what, recent)| fail(format!("{note}: {what}"), recent))?;
    let failed: u64 = workers.iter().map(|w| w.failed_calls).sum();
    report.failed_calls += failed;
    report.faults_not_reached += u64::from(failed == 0);
    let same_handle = catch(|| observe(&*engine, &workers, target.ordered(), true))
        .unwrap_or_else(|panic| Err(format!("the engine panicked: {panic}")));
    if let Err(what) =
        same_handle.and_then(|observed| exact(&workers, &observed, "on the same handle after the failures"))
    {
        return Err(fail(format!("{note}: {what}"), Vec::new()));
    }
    disarm(&sim);
    let verdict = catch(|| finish(target, &backend, engine, workers, end))
        .unwrap_or_else(|panic| Err(format!("the engine panicked: {panic}")));
    verdict.map_err(|what| fail(format!("{note}, cleared, {end:?}: {what}"), Vec::new()))
}

fn open(target: &Target, backend: &Backend) -> Result<Box<dyn Engine>, String> {
    match catch(|| (target.open)(backend.storage())) {
        Ok(Ok(engine)) => Ok(engine),
        Ok(Err(e)) => Err(format!("opening the engine failed: {e}")),
        Err(panic) => Err(format!("opening the engine panicked: {panic}")),
    }
}

type WorkerFailure = (String, Vec<String>);

fn write_concurrently(
    engine: &dyn Engine,
    scenario_seed: u64,
    ops: usize,
    value_bytes: usize,
) -> Result<Vec<Worker>, WorkerFailure> {
    let results: Vec<Result<Worker, WorkerFailure>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|thread| {
                let rng = SmallRng::seed_from_u64(seed::derive(scenario_seed, 10 + thread as u64));
                let worker = Worker::new(thread, rng, value_bytes);
                scope.spawn(move || worker.run(engine, ops))
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(t, h)| h.join().unwrap_or_else(|_| Err((format!("thread {t} panicked"), Vec::new()))))
            .collect()
    });
    results.into_iter().collect()
}

impl Worker {
    fn new(thread: usize, rng: SmallRng, value_bytes: usize) -> Worker {
        let keys = (0..KEYS_PER_THREAD).map(|j| format!("t{thread}/k{j}").into_bytes()).collect();
        Worker {
            thread,
            rng,
            oracle: Oracle::new(),
            keys,
            value_bytes,
            serial: 0,
            recent: VecDeque::new(),
            failed_calls: 0,
        }
    }

    /// Runs up to `ops` ops, stopping `OPS_AFTER_ERROR` ops after the first failed call.
    fn run(mut self, engine: &dyn Engine, ops: usize) -> Result<Worker, WorkerFailure> {
        let mut since_error: Option<usize> = None;
        for i in 0..ops {
            if since_error.is_some_and(|n| n >= OPS_AFTER_ERROR) {
                break;
            }
            let outcome =
                catch(|| self.step(engine)).unwrap_or_else(|p| Err(format!("the engine panicked: {p}")));
            match outcome {
                Ok(true) => {}
                Ok(false) => {
                    self.failed_calls += 1;
                    since_error.get_or_insert(0);
                }
                Err(what) => {
                    let what = format!("thread {} op #{i}: {what}", self.thread);
                    return Err((what, self.recent.into_iter().collect()));
                }
            }
            if let Some(n) = &mut since_error {
                *n += 1;
            }
        }
        Ok(self)
    }

    fn log(&mut self, line: String) {
        if self.recent.len() == RECENT_OPS_SHOWN {
            self.recent.pop_front();
        }
        self.recent.push_back(format!("t{} {line}", self.thread));
    }

    /// One random op. `Ok(true)`: the call succeeded; `Ok(false)`: it returned an error
    /// (allowed); `Err`: a wrong answer.
    fn step(&mut self, engine: &dyn Engine) -> Result<bool, String> {
        let key = self.keys[self.rng.gen_range(0..self.keys.len())].clone();
        let durability = match self.rng.gen_range(0..10) {
            0..=3 => Durability::Sync,
            4..=6 => Durability::Buffered,
            _ => Durability::None,
        };
        match self.rng.gen_range(0..100) {
            0..=14 => self.get(engine, &key),
            15..=49 => {
                let value = self.value();
                self.log(format!(
                    "put {} = {} {durability:?}",
                    escape::key(&key),
                    escape::value(Some(&value))
                ));
                let result = engine.put(&key, &value, durability);
                Ok(self.record(Unit::from([(key, Some(value))]), durability, result.is_ok()))
            }
            50..=59 => {
                self.log(format!("delete {} {durability:?}", escape::key(&key)));
                let result = engine.delete(&key, durability);
                Ok(self.record(Unit::from([(key, None)]), durability, result.is_ok()))
            }
            60..=79 => self.batch(engine, durability),
            _ => self.rmw(engine, key, durability),
        }
    }

    fn value(&mut self) -> Vec<u8> {
        self.serial += 1;
        let mut value = format!("t{}v{}", self.thread, self.serial).into_bytes();
        value.resize(value.len().max(self.value_bytes), b'.');
        value
    }

    /// Records a write's outcome in the model; returns whether it succeeded.
    fn record(&mut self, unit: Unit, durability: Durability, ok: bool) -> bool {
        if !ok {
            self.log("  -> Err".into());
            self.oracle.apply_failed(unit);
            return false;
        }
        self.oracle.apply(unit);
        if durability == Durability::Sync {
            self.oracle.mark_durable();
        }
        true
    }

    fn get(&mut self, engine: &dyn Engine, key: &[u8]) -> Result<bool, String> {
        self.log(format!("get {}", escape::key(key)));
        let Ok(actual) = engine.get(key) else { return Ok(false) };
        let expected = self.oracle.get(key);
        if actual.as_ref() != expected {
            return Err(format!(
                "get {} returned {}, but the model (failed writes absent) holds {}",
                escape::key(key),
                escape::value(actual.as_deref()),
                escape::value(expected.map(Vec::as_slice))
            ));
        }
        Ok(true)
    }

    fn batch(&mut self, engine: &dyn Engine, durability: Durability) -> Result<bool, String> {
        let mut batch = WriteBatch::new();
        let mut unit = Unit::new();
        for _ in 0..self.rng.gen_range(2..=4) {
            let key = self.keys[self.rng.gen_range(0..self.keys.len())].clone();
            if self.rng.gen_bool(0.25) {
                batch.delete(key.clone());
                unit.insert(key, None);
            } else {
                let value = self.value();
                batch.put(key.clone(), value.clone());
                unit.insert(key, Some(value));
            }
        }
        self.log(format!("batch of {} ops {durability:?}", batch.len()));
        let result = engine.write(batch, durability);
        Ok(self.record(unit, durability, result.is_ok()))
    }

    fn rmw(&mut self, engine: &dyn Engine, key: Key, durability: Durability) -> Result<bool, String> {
        self.log(format!("rmw {} {durability:?}", escape::key(&key)));
        let model_old = self.oracle.get(&key).cloned();
        let mut seen = None;
        let result = engine.rmw(
            &key,
            &mut |old| {
                seen = Some(old.map(<[u8]>::to_vec));
                rmw_step(old)
            },
            durability,
        );
        let expected = rmw_step(model_old.as_deref());
        if let Some(seen) = seen.filter(|s| *s != model_old) {
            return Err(format!(
                "rmw {}: the closure saw {}, but the model (failed writes absent) holds {}",
                escape::key(&key),
                escape::value(seen.as_deref()),
                escape::value(model_old.as_deref())
            ));
        }
        if let Ok(stored) = &result {
            if *stored != expected {
                return Err(format!(
                    "rmw {}: returned {}",
                    escape::key(&key),
                    escape::value(stored.as_deref())
                ));
            }
        }
        Ok(self.record(Unit::from([(key, expected)]), durability, result.is_ok()))
    }
}

/// Reads every worker key (get) and, for ordered engines, a full scan; a key outside every
/// worker's keys is an error. With `errors_allowed`, a read that fails leaves its key out (the
/// same handle after failures); otherwise every read must succeed.
fn observe(
    engine: &dyn Engine,
    workers: &[Worker],
    ordered: bool,
    errors_allowed: bool,
) -> Result<Observed, String> {
    let mut observed = Observed::new();
    for key in workers.iter().flat_map(|w| w.keys.iter()) {
        match engine.get(key) {
            Ok(value) => {
                observed.insert(key.clone(), value);
            }
            Err(_) if errors_allowed => {}
            Err(e) => return Err(format!("get {} failed: {e}", escape::key(key))),
        }
    }
    if !ordered {
        return Ok(observed);
    }
    let scanned = match scan(engine, &KeyRange::all(), Direction::Forward, None) {
        Ok(items) => items,
        Err(_) if errors_allowed => return Ok(observed),
        Err(e) => return Err(format!("a full scan failed: {}", e.describe())),
    };
    let mut in_scan: BTreeMap<&Key, &Vec<u8>> = scanned.iter().map(|(k, v)| (k, v)).collect();
    for (key, value) in &observed {
        let shown = in_scan.remove(key);
        if shown != value.as_ref() {
            return Err(format!(
                "a full scan shows {} as {}, get as {}",
                escape::key(key),
                escape::value(shown.map(Vec::as_slice)),
                escape::value(value.as_deref())
            ));
        }
    }
    if let Some((key, value)) = in_scan.into_iter().next() {
        return Err(format!(
            "a full scan returns {} = {}, a key no thread ever wrote",
            escape::key(key),
            escape::value(Some(value))
        ));
    }
    Ok(observed)
}

/// Every key read must hold exactly its worker's model value.
fn exact(workers: &[Worker], observed: &Observed, when: &str) -> Result<(), String> {
    for worker in workers {
        for key in &worker.keys {
            let Some(actual) = observed.get(key) else { continue };
            let expected = worker.oracle.get(key);
            if actual.as_ref() != expected {
                return Err(format!(
                    "{when}: key {} is {}, the model (failed writes absent) holds {}",
                    escape::key(key),
                    escape::value(actual.as_deref()),
                    escape::value(expected.map(Vec::as_slice))
                ));
            }
        }
    }
    Ok(())
}

/// The scenario's end: a reopen (exact after a successful close, else the crash oracle) or a
/// crash; then the engine must close cleanly.
fn finish(
    target: &Target,
    backend: &Backend,
    engine: Box<dyn Engine>,
    mut workers: Vec<Worker>,
    end: End,
) -> Result<(), String> {
    let closed = match end {
        End::Reopen => engine.close().is_ok(),
        End::Crash(kind) => {
            if let Some(sim) = backend.sim() {
                sim.crash(kind.mode());
            }
            false
        }
    };
    drop(engine);
    let engine = open(target, backend)?;
    let observed = observe(&*engine, &workers, target.ordered(), false)?;
    if closed {
        workers.iter_mut().for_each(|w| w.oracle.mark_durable());
        exact(&workers, &observed, "after a close that returned Ok and a reopen")?;
    } else {
        for worker in &workers {
            let own: Observed =
                worker.keys.iter().map(|k| (k.clone(), observed.get(k).cloned().flatten())).collect();
            worker
                .oracle
                .check_recovery(&own, target.prefix_consistent())
                .map_err(|what| format!("thread {}'s keys: {what}", worker.thread))?;
        }
    }
    engine.close().map_err(|e| format!("closing the reopened engine failed: {e}"))
}
