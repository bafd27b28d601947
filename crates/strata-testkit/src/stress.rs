//! Layer 5: many threads on overlapping keys, on `MemStorage`.
//!
//! - Read-modify-write increments on a few shared counters (u64 little-endian): the final sums
//!   must equal the increments acknowledged (no lost updates).
//! - Each thread writes its own keys with increasing versions; other threads read them: a read
//!   must see at least the version acknowledged before it began, and never an older version
//!   than that reader saw before.
//! - Ordered targets: concurrent range scans must be strictly ordered and show every key with at
//!   least its version acknowledged before the scan began.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Direction, Durability, Engine, Error, KeyRange};
use strata_io::{MemStorage, Storage};

use crate::escape;
use crate::failure::{catch, panic_message};
use crate::{seed, Failure, Target};

/// Seeds per `check` unless `STRATA_SEEDS` says otherwise.
pub const DEFAULT_SEEDS: usize = 1;
const COUNTER_KEYS: usize = 3;
const OWN_KEYS_PER_THREAD: usize = 4;
const OWN_KEY_PREFIX: &[u8] = b"own/";

/// What a stress run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub seed: u64,
    pub increments: u64,
    pub versioned_writes: u64,
    pub reads: u64,
    pub scans: u64,
}

/// Runs the stress check for a few seeds; panics with the seed on the first violation.
pub fn check(target: &Target, threads: usize, ops_per_thread: usize) {
    let ops_per_thread = seed::ops_per_seed(ops_per_thread);
    for seed in seed::seeds(DEFAULT_SEEDS) {
        eprintln!(
            "[strata-testkit] stress {} seed={seed} threads={threads} ops_per_thread={ops_per_thread}",
            target.name
        );
        match run(target, seed, threads, ops_per_thread) {
            Ok(r) => eprintln!(
                "[strata-testkit] stress {} seed={seed} ok: {} increments, {} versioned writes, {} reads, {} scans",
                target.name, r.increments, r.versioned_writes, r.reads, r.scans
            ),
            Err(failure) => failure.raise(),
        }
    }
}

/// One run. The seed fixes each thread's op sequence, not the interleaving.
pub fn run(target: &Target, seed: u64, threads: usize, ops_per_thread: usize) -> Result<Report, Failure> {
    let fail = |description: String| Failure {
        check: format!("stress {}", target.name),
        seed,
        op_index: None,
        description,
        recent_ops: Vec::new(),
    };
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = match catch(|| (target.open)(storage.clone())) {
        Ok(Ok(engine)) => engine,
        Ok(Err(e)) => return Err(fail(format!("opening the engine failed: {e}"))),
        Err(panic) => return Err(fail(format!("opening the engine panicked: {panic}"))),
    };
    let shared = Arc::new(Shared {
        engine,
        ordered: target.ordered(),
        threads,
        acked_versions: (0..threads * OWN_KEYS_PER_THREAD).map(|_| AtomicU64::new(0)).collect(),
        stop: AtomicBool::new(false),
        first_failure: Mutex::new(None),
    });
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let shared = shared.clone();
            let rng = SmallRng::seed_from_u64(seed::derive(seed, 1000 + t as u64));
            thread::spawn(move || Worker::new(t, rng, &shared).run(&shared, ops_per_thread))
        })
        .collect();
    let mut report = Report { seed, ..Report::default() };
    let mut counter_totals = [0u64; COUNTER_KEYS];
    let mut last_versions = vec![0u64; threads * OWN_KEYS_PER_THREAD];
    for (t, handle) in handles.into_iter().enumerate() {
        match handle.join() {
            Ok(worker) => {
                for (total, n) in counter_totals.iter_mut().zip(worker.increments) {
                    *total += n;
                }
                for (k, v) in worker.own_versions.iter().enumerate() {
                    last_versions[t * OWN_KEYS_PER_THREAD + k] = *v;
                }
                report.increments += worker.increments.iter().sum::<u64>();
                report.versioned_writes += worker.versioned_writes;
                report.reads += worker.reads;
                report.scans += worker.scans;
            }
            Err(payload) => shared.fail(format!("thread {t} panicked: {}", panic_message(payload.as_ref()))),
        }
    }
    if let Some(what) = shared.first_failure.lock().take() {
        return Err(fail(what));
    }
    let verdict = catch(|| final_check(&*shared.engine, &counter_totals, &last_versions))
        .unwrap_or_else(|panic| Err(format!("the engine panicked: {panic}")));
    verdict.map_err(fail)?;
    // What concurrency left must also be what the log replays: without a reopen, a log order
    // that differs from the apply order under contention would pass unnoticed.
    drop(shared);
    let reopened = catch(|| (target.open)(storage.clone()).map_err(|e| format!("reopening failed: {e}")))
        .unwrap_or_else(|panic| Err(format!("reopening panicked: {panic}")))
        .and_then(|engine| {
            catch(|| final_check(&*engine, &counter_totals, &last_versions))
                .unwrap_or_else(|panic| Err(format!("the engine panicked: {panic}")))
        });
    reopened.map_err(|what| fail(format!("after close and reopen: {what}")))?;
    Ok(report)
}

fn final_check(engine: &dyn Engine, counter_totals: &[u64], last_versions: &[u64]) -> Result<(), String> {
    for (c, expected) in counter_totals.iter().enumerate() {
        let value = engine.get(&counter_key(c)).map_err(|e| format!("final get of a counter failed: {e}"))?;
        let actual =
            decode_u64(value.as_deref()).map_err(|v| format!("counter {c} holds a malformed value {v}"))?;
        if actual != *expected {
            return Err(format!(
                "lost updates: counter {c} is {actual}, but {expected} increments were acknowledged"
            ));
        }
    }
    for (slot, expected) in last_versions.iter().enumerate() {
        let key = own_key(slot / OWN_KEYS_PER_THREAD, slot % OWN_KEYS_PER_THREAD);
        let value = engine.get(&key).map_err(|e| format!("final get failed: {e}"))?;
        let actual =
            decode_version(value.as_deref()).map_err(|v| format!("key {} holds {v}", escape::key(&key)))?;
        if actual != *expected {
            return Err(format!(
                "key {} ends at version {actual}, its last write was {expected}",
                escape::key(&key)
            ));
        }
    }
    engine.close().map_err(|e| format!("close failed: {e}"))
}

struct Shared {
    engine: Box<dyn Engine>,
    ordered: bool,
    threads: usize,
    /// Per own key (thread-major): the highest version whose write returned Ok.
    acked_versions: Vec<AtomicU64>,
    stop: AtomicBool,
    first_failure: Mutex<Option<String>>,
}

impl Shared {
    fn fail(&self, what: String) {
        self.first_failure.lock().get_or_insert(what);
        self.stop.store(true, Ordering::SeqCst);
    }
}

struct Worker {
    thread: usize,
    rng: SmallRng,
    increments: [u64; COUNTER_KEYS],
    own_versions: [u64; OWN_KEYS_PER_THREAD],
    /// The highest version this worker has seen per own key of every thread.
    seen_versions: Vec<u64>,
    versioned_writes: u64,
    reads: u64,
    scans: u64,
}

impl Worker {
    fn new(thread: usize, rng: SmallRng, shared: &Shared) -> Worker {
        Worker {
            thread,
            rng,
            increments: [0; COUNTER_KEYS],
            own_versions: [0; OWN_KEYS_PER_THREAD],
            seen_versions: vec![0; shared.threads * OWN_KEYS_PER_THREAD],
            versioned_writes: 0,
            reads: 0,
            scans: 0,
        }
    }

    fn run(mut self, shared: &Shared, ops: usize) -> Worker {
        for _ in 0..ops {
            if shared.stop.load(Ordering::Relaxed) {
                break;
            }
            let result = match self.rng.gen_range(0..100) {
                0..=39 => self.increment(shared),
                40..=64 => self.write_own(shared),
                65..=84 => self.read_other(shared),
                _ if shared.ordered => self.scan(shared),
                _ => self.read_other(shared),
            };
            if let Err(what) = result {
                shared.fail(format!("thread {}: {what}", self.thread));
                break;
            }
        }
        self
    }

    fn durability(&mut self) -> Durability {
        match self.rng.gen_range(0..100) {
            0..=1 => Durability::Sync,
            2..=11 => Durability::Buffered,
            _ => Durability::None,
        }
    }

    fn increment(&mut self, shared: &Shared) -> Result<(), String> {
        let c = self.rng.gen_range(0..COUNTER_KEYS);
        let mut malformed = None;
        let mut add_one = |old: Option<&[u8]>| match decode_u64(old) {
            Ok(n) => Some((n + 1).to_le_bytes().to_vec()),
            Err(shown) => {
                malformed = Some(shown);
                old.map(<[u8]>::to_vec)
            }
        };
        let durability = self.durability();
        let stored = shared
            .engine
            .rmw(&counter_key(c), &mut add_one, durability)
            .map_err(|e| format!("rmw failed: {e}"))?;
        if let Some(shown) = malformed {
            return Err(format!("the rmw closure saw a malformed counter value {shown}"));
        }
        match decode_u64(stored.as_deref()) {
            Ok(n) if n >= 1 => {}
            _ => {
                return Err(format!(
                    "rmw returned {} as the new counter value",
                    escape::value(stored.as_deref())
                ))
            }
        }
        self.increments[c] += 1;
        Ok(())
    }

    fn write_own(&mut self, shared: &Shared) -> Result<(), String> {
        let k = self.rng.gen_range(0..OWN_KEYS_PER_THREAD);
        let version = self.own_versions[k] + 1;
        let mut value = version.to_le_bytes().to_vec();
        value.resize(8 + self.rng.gen_range(0..64), b'v');
        let durability = self.durability();
        shared
            .engine
            .put(&own_key(self.thread, k), &value, durability)
            .map_err(|e| format!("put failed: {e}"))?;
        self.own_versions[k] = version;
        shared.acked_versions[self.thread * OWN_KEYS_PER_THREAD + k].store(version, Ordering::SeqCst);
        self.versioned_writes += 1;
        Ok(())
    }

    fn read_other(&mut self, shared: &Shared) -> Result<(), String> {
        let slot = self.rng.gen_range(0..shared.acked_versions.len());
        let key = own_key(slot / OWN_KEYS_PER_THREAD, slot % OWN_KEYS_PER_THREAD);
        let floor = shared.acked_versions[slot].load(Ordering::SeqCst);
        let value = shared.engine.get(&key).map_err(|e| format!("get failed: {e}"))?;
        let version = decode_version(value.as_deref())
            .map_err(|shown| format!("get {} returned a malformed value {shown}", escape::key(&key)))?;
        self.reads += 1;
        self.check_version(&key, slot, version, floor)
    }

    fn scan(&mut self, shared: &Shared) -> Result<(), String> {
        let floors: Vec<u64> = shared.acked_versions.iter().map(|v| v.load(Ordering::SeqCst)).collect();
        let direction = if self.rng.gen_bool(0.5) { Direction::Forward } else { Direction::Reverse };
        let items = shared
            .engine
            .range(KeyRange::prefix(OWN_KEY_PREFIX), direction)
            .map_err(|e| format!("range failed: {e}"))?;
        let mut previous: Option<Vec<u8>> = None;
        let mut seen = vec![false; floors.len()];
        for item in items {
            let (key, value) = item.map_err(|e: Error| format!("range item failed: {e}"))?;
            if let Some(prev) = &previous {
                let ordered = match direction {
                    Direction::Forward => prev < &key,
                    Direction::Reverse => prev > &key,
                };
                if !ordered {
                    return Err(format!(
                        "concurrent scan {direction:?} not strictly ordered: {} after {}",
                        escape::key(&key),
                        escape::key(prev)
                    ));
                }
            }
            let slot = parse_own_key(&key, shared.threads).ok_or_else(|| {
                format!("scan of {:?} returned an unknown key {}", "own/", escape::key(&key))
            })?;
            let version = decode_version(Some(&value))
                .map_err(|shown| format!("scan returned a malformed value {shown}"))?;
            self.check_version(&key, slot, version, floors[slot])?;
            seen[slot] = true;
            previous = Some(key);
        }
        if let Some(slot) = (0..floors.len()).find(|s| floors[*s] > 0 && !seen[*s]) {
            let key = own_key(slot / OWN_KEYS_PER_THREAD, slot % OWN_KEYS_PER_THREAD);
            return Err(format!(
                "scan missed {}, written (version {}) before it began",
                escape::key(&key),
                floors[slot]
            ));
        }
        self.scans += 1;
        Ok(())
    }

    fn check_version(&mut self, key: &[u8], slot: usize, version: u64, floor: u64) -> Result<(), String> {
        if version < floor {
            return Err(format!(
                "read of {} saw version {version}, but version {floor} was acknowledged before the read began",
                escape::key(key)
            ));
        }
        if version < self.seen_versions[slot] {
            return Err(format!(
                "{} went backwards: version {version} after this thread saw {}",
                escape::key(key),
                self.seen_versions[slot]
            ));
        }
        self.seen_versions[slot] = version;
        Ok(())
    }
}

fn counter_key(c: usize) -> Vec<u8> {
    format!("ctr/{c}").into_bytes()
}

fn own_key(thread: usize, k: usize) -> Vec<u8> {
    let mut key = OWN_KEY_PREFIX.to_vec();
    key.extend_from_slice(format!("{thread:04}/{k}").as_bytes());
    key
}

/// The slot of an own key, if `key` is one.
fn parse_own_key(key: &[u8], threads: usize) -> Option<usize> {
    let rest = std::str::from_utf8(key.strip_prefix(OWN_KEY_PREFIX)?).ok()?;
    let (thread, k) = rest.split_once('/')?;
    let (thread, k): (usize, usize) = (thread.parse().ok()?, k.parse().ok()?);
    (thread < threads && k < OWN_KEYS_PER_THREAD && own_key(thread, k) == key)
        .then_some(thread * OWN_KEYS_PER_THREAD + k)
}

/// An absent value counts as 0; anything but 8 bytes is malformed (shown escaped in the error).
fn decode_u64(value: Option<&[u8]>) -> Result<u64, String> {
    match value {
        None => Ok(0),
        Some(bytes) => bytes.try_into().map(u64::from_le_bytes).map_err(|_| escape::value(Some(bytes))),
    }
}

/// The version at the front of an own key's value (absent = 0).
fn decode_version(value: Option<&[u8]>) -> Result<u64, String> {
    match value {
        Some(bytes) if bytes.len() >= 8 => decode_u64(bytes.get(..8)),
        other => decode_u64(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_keys_round_trip() {
        assert_eq!(parse_own_key(&own_key(3, 2), 4), Some(3 * OWN_KEYS_PER_THREAD + 2));
        assert_eq!(parse_own_key(&own_key(3, 2), 3), None);
        assert_eq!(parse_own_key(b"own/x/1", 4), None);
        assert_eq!(decode_u64(None), Ok(0));
        assert_eq!(decode_u64(Some(&7u64.to_le_bytes())), Ok(7));
        assert!(decode_u64(Some(b"short")).is_err());
        assert_eq!(decode_version(Some(b"\x05\0\0\0\0\0\0\0vvv")), Ok(5));
        assert!(decode_version(Some(b"short")).is_err());
    }
}
