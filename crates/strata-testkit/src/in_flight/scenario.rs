//! One scenario of the in-flight check: a store warmed up with `Sync` puts, one or two writer
//! threads held or probed by the gate, a reader thread, and a reopen at the end.

use std::collections::BTreeMap;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use strata_core::{Direction, Durability, Engine, Key, KeyRange, Value, WriteBatch};
use strata_io::{FaultKind, SimStorage};

use super::gate::{Gate, Point, Release};
use super::{Scenario, WriteKind};
use crate::escape;
use crate::failure::catch;
use crate::Target;

/// How long a writer may take to reach the watched sync or write.
const REACH_LIMIT: Duration = Duration::from_secs(10);
/// How long a held write waits for the reader: a reader the write in flight blocks is allowed,
/// and is judged the same once the write ends.
const READER_LIMIT: Duration = Duration::from_secs(1);
/// How long the second write of an Overtakes scenario gets to reach the log (or to return)
/// while the first is held; an engine that makes it wait for the first is allowed.
const OVERTAKE_WAIT: Duration = Duration::from_millis(300);

/// Keys the warm-up writes (`Sync`), each with the value `old-<key>`.
const WARM_KEYS: [&str; 6] = ["k0", "k1", "k2", "k3", "k4", "k5"];
/// A key the warm-up does not write; the failing batch puts it.
const NEW_KEY: &str = "k9";
/// The key both writes of an Overtakes scenario write.
const SHARED_KEY: &str = "k5";
/// The first write's value in an Overtakes scenario.
const FIRST_VALUE: &[u8] = b"a-k5";

/// Each key's value (`None`: absent).
type State = BTreeMap<Key, Option<Value>>;

pub(super) struct Outcome {
    pub held: bool,
    pub reads_while_held: u64,
    pub second_reached_log: bool,
}

pub(super) fn run(target: &Target, scenario: Scenario, seed: u64) -> Result<Outcome, String> {
    match scenario {
        Scenario::FailsInFlight { kind, durability, point, fault } => {
            fails_in_flight(target, Written { kind, durability }, point, fault, seed)
        }
        Scenario::Overtakes { second, durability } => {
            overtakes(target, Written { kind: second, durability }, seed)
        }
    }
}

/// A simulated disk whose syncs and writes pass through one gate.
struct Disk {
    sim: SimStorage,
    gate: Arc<Gate>,
}

impl Disk {
    fn new(seed: u64) -> Disk {
        Disk { sim: SimStorage::new(seed), gate: Arc::default() }
    }

    /// Opens the engine on a new process lifetime of the disk (no crash in between).
    fn open(&self, target: &Target) -> Result<Box<dyn Engine>, String> {
        let storage = self.gate.storage(Arc::new(self.sim.booted()));
        match catch(|| (target.open)(storage)) {
            Ok(Ok(engine)) => Ok(engine),
            Ok(Err(e)) => Err(format!("opening the engine failed: {e}")),
            Err(panic) => Err(format!("opening the engine panicked: {panic}")),
        }
    }
}

fn old_state() -> State {
    let mut state: State =
        WARM_KEYS.iter().map(|k| (k.as_bytes().to_vec(), Some(format!("old-{k}").into_bytes()))).collect();
    state.insert(NEW_KEY.as_bytes().to_vec(), None);
    state
}

fn warm_up(engine: &dyn Engine) -> Result<(), String> {
    for (key, value) in old_state() {
        if let Some(value) = value {
            engine.put(&key, &value, Durability::Sync).map_err(|e| format!("warm-up put failed: {e}"))?;
        }
    }
    engine.flush().map_err(|e| format!("warm-up flush failed: {e}"))
}

fn rmw_result(old: Option<&[u8]>) -> Option<Value> {
    let mut value = old.map_or_else(|| b"none".to_vec(), <[u8]>::to_vec);
    value.extend_from_slice(b"+rmw");
    Some(value)
}

/// The write a thread issues.
#[derive(Clone, Copy, Debug)]
struct Written {
    kind: WriteKind,
    durability: Durability,
}

/// What a write call returned, and what an rmw's closure was given.
struct Done {
    result: Result<(), String>,
    rmw_saw: Option<Option<Value>>,
}

impl Written {
    /// The keys a failing write changes, with their new state over `old`.
    fn failing_changes(self, old: &State) -> State {
        let old_of = |k: &str| old.get(k.as_bytes()).cloned().flatten();
        let changes: Vec<(&str, Option<Value>)> = match self.kind {
            WriteKind::Put => vec![("k0", Some(b"new-k0".to_vec()))],
            WriteKind::Delete => vec![("k1", None)],
            WriteKind::Batch => {
                vec![("k2", Some(b"new-k2".to_vec())), ("k3", None), (NEW_KEY, Some(b"new-k9".to_vec()))]
            }
            WriteKind::Rmw => vec![("k4", rmw_result(old_of("k4").as_deref()))],
        };
        changes.into_iter().map(|(k, v)| (k.as_bytes().to_vec(), v)).collect()
    }

    /// Issues the write `failing_changes` describes, or (`shared`) the second write of an
    /// Overtakes scenario on `SHARED_KEY`.
    fn issue(self, engine: &dyn Engine, shared: bool) -> Done {
        let mut rmw_saw = None;
        let (put_key, put_value, delete_key, rmw_key) = match shared {
            false => ("k0", &b"new-k0"[..], "k1", "k4"),
            true => (SHARED_KEY, &b"b-k5"[..], SHARED_KEY, SHARED_KEY),
        };
        let result = match self.kind {
            WriteKind::Put => engine.put(put_key.as_bytes(), put_value, self.durability),
            WriteKind::Delete => engine.delete(delete_key.as_bytes(), self.durability),
            WriteKind::Batch => {
                let mut batch = WriteBatch::new();
                batch.put(b"k2".to_vec(), b"new-k2".to_vec()).delete(b"k3".to_vec());
                batch.put(NEW_KEY.as_bytes().to_vec(), b"new-k9".to_vec());
                engine.write(batch, self.durability)
            }
            WriteKind::Rmw => engine
                .rmw(
                    rmw_key.as_bytes(),
                    &mut |old| {
                        rmw_saw = Some(old.map(<[u8]>::to_vec));
                        rmw_result(old)
                    },
                    self.durability,
                )
                .map(drop),
        };
        Done { result: result.map_err(|e| e.to_string()), rmw_saw }
    }

    /// `SHARED_KEY`'s value after the first put and then this write (as the second).
    fn after_first(self) -> Option<Value> {
        match self.kind {
            WriteKind::Put | WriteKind::Batch => Some(b"b-k5".to_vec()),
            WriteKind::Delete => None,
            WriteKind::Rmw => rmw_result(Some(FIRST_VALUE)),
        }
    }
}

/// One value a reader saw: `how` it read it.
struct Look {
    how: &'static str,
    key: Key,
    value: Option<Value>,
}

/// Gets every key of `keys` and (ordered engines) scans everything both ways; a read that fails
/// is left out (errors are allowed). A scan's keys outside `keys` are looks too.
fn look(engine: &dyn Engine, keys: &[Key], ordered: bool) -> Vec<Look> {
    let mut looks = Vec::new();
    for key in keys {
        if let Ok(value) = engine.get(key) {
            looks.push(Look { how: "get", key: key.clone(), value });
        }
    }
    if !ordered {
        return looks;
    }
    for (how, direction) in [("forward scan", Direction::Forward), ("reverse scan", Direction::Reverse)] {
        let Ok(items) = engine.range(KeyRange::all(), direction) else { continue };
        let Ok(scanned) = items.collect::<strata_core::Result<BTreeMap<Key, Value>>>() else { continue };
        for key in keys {
            looks.push(Look { how, key: key.clone(), value: scanned.get(key).cloned() });
        }
        for (key, value) in scanned.into_iter().filter(|(k, _)| !keys.contains(k)) {
            looks.push(Look { how, key, value: Some(value) });
        }
    }
    looks
}

/// While a write was in flight that then failed, every look must show the old state.
fn judge_looks(looks: &[Look], old: &State, changes: &State, write: Written) -> Result<(), String> {
    for look in looks {
        let old_value = old.get(&look.key).cloned().flatten();
        if look.value == old_value {
            continue;
        }
        let shown = format!("{} = {}", escape::key(&look.key), escape::value(look.value.as_deref()));
        if changes.get(&look.key).is_some_and(|new| *new == look.value) {
            return Err(format!(
                "while a {write:?} was in flight, a reader's {} showed {shown}, which only that write \
                 makes; the write then returned Err (a failed write was visible before it failed)",
                look.how
            ));
        }
        return Err(format!(
            "while a {write:?} was in flight, a reader's {} showed {shown}; before it the key held {}",
            look.how,
            escape::value(old_value.as_deref())
        ));
    }
    Ok(())
}

fn fails_in_flight(
    target: &Target,
    write: Written,
    point: Point,
    fault: FaultKind,
    seed: u64,
) -> Result<Outcome, String> {
    let disk = Disk::new(seed);
    let engine = disk.open(target)?;
    warm_up(&*engine)?;
    let old = old_state();
    let keys: Vec<Key> = old.keys().cloned().collect();
    let changes = write.failing_changes(&old);
    let (ordered, gate, engine_ref) = (target.ordered(), &disk.gate, &*engine);
    let (held, looks, done) = std::thread::scope(|scope| {
        let writer = scope.spawn(move || {
            gate.hold_next(point);
            write.issue(engine_ref, false)
        });
        let id = writer.thread().id();
        let held = gate.wait_reached(id, Instant::now() + REACH_LIMIT, &|| writer.is_finished()).is_some();
        let mut looks = Vec::new();
        if held {
            let (seen, looked) = mpsc::channel();
            let keys = &keys;
            let reader = scope.spawn(move || {
                let looks = look(engine_ref, keys, ordered);
                let _ = seen.send(());
                looks
            });
            let _ = looked.recv_timeout(READER_LIMIT);
            gate.release(id, Release::Fail(fault));
            looks = reader.join().map_err(|_| "the reader panicked".to_string())?;
        }
        let done = writer.join().map_err(|_| "the writer panicked".to_string())?;
        Ok::<_, String>((held, looks, done))
    })?;
    let outcome = Outcome { held, reads_while_held: looks.len() as u64, second_reached_log: false };
    match (&done.result, held) {
        (Ok(()), true) => {
            return Err(format!("the {write:?} returned Ok although its {point:?} failed with {fault:?}"))
        }
        (Err(e), false) => return Err(format!("the {write:?} failed with no fault injected: {e}")),
        (Err(_), true) => {
            judge_looks(&looks, &old, &changes, write)?;
            let after = look(&*engine, &keys, target.ordered());
            judge_looks(&after, &old, &changes, write)
                .map_err(|what| format!("after the write returned Err: {what}"))?;
        }
        (Ok(()), false) => {}
    }
    let failed = done.result.is_err();
    let closed = engine.close().is_ok();
    drop(engine);
    let engine = disk.open(target)?;
    check_reopened(&*engine, &old, &changes, failed && closed, !failed)?;
    engine.close().map_err(|e| format!("closing the reopened engine failed: {e}"))?;
    Ok(outcome)
}

/// After a reopen without power loss: keys the write did not touch hold their old values; the
/// touched ones all old (`must_be_old`: a close that returned Ok resolved a failed write as never
/// written), all new (`must_be_new`: the write succeeded), or else either, as a whole.
fn check_reopened(
    engine: &dyn Engine,
    old: &State,
    changes: &State,
    must_be_old: bool,
    must_be_new: bool,
) -> Result<(), String> {
    let mut touched = State::new();
    for (key, old_value) in old {
        let value = engine.get(key).map_err(|e| format!("get {} after the reopen: {e}", escape::key(key)))?;
        match changes.get(key) {
            Some(_) => {
                touched.insert(key.clone(), value);
            }
            None if value != *old_value => {
                return Err(format!(
                    "after the reopen {} is {}, but no write changed it from {}",
                    escape::key(key),
                    escape::value(value.as_deref()),
                    escape::value(old_value.as_deref())
                ))
            }
            None => {}
        }
    }
    let all_old = touched.iter().all(|(k, v)| old.get(k) == Some(v));
    let all_new = touched == *changes;
    let fine = match (must_be_old, must_be_new) {
        (true, _) => all_old,
        (_, true) => all_new,
        _ => all_old || all_new,
    };
    if fine {
        return Ok(());
    }
    let shown: Vec<String> = touched
        .iter()
        .map(|(k, v)| format!("{} = {}", escape::key(k), escape::value(v.as_deref())))
        .collect();
    Err(format!(
        "after the reopen the written keys hold {} (must be {})",
        shown.join(", "),
        match (must_be_old, must_be_new) {
            (true, _) => "their old values: a close that returned Ok made the failed write never written",
            (_, true) => "the new values: the write was acknowledged",
            _ => "all old or all new: a failed write is whole or absent",
        }
    ))
}

fn overtakes(target: &Target, second: Written, seed: u64) -> Result<Outcome, String> {
    let disk = Disk::new(seed);
    let engine = disk.open(target)?;
    warm_up(&*engine)?;
    let (gate, engine_ref) = (&disk.gate, &*engine);
    let key = SHARED_KEY.as_bytes();
    let (first, done, reached_log) = std::thread::scope(|scope| {
        let first = scope.spawn(move || {
            gate.hold_next(Point::Sync);
            engine_ref.put(key, FIRST_VALUE, Durability::Sync).map_err(|e| e.to_string())
        });
        let first_id = first.thread().id();
        if gate.wait_reached(first_id, Instant::now() + REACH_LIMIT, &|| first.is_finished()).is_none() {
            let first = first.join().map_err(|_| "the first writer panicked".to_string())?;
            return Ok((first, None, false));
        }
        let writer = scope.spawn(move || {
            gate.probe_next(Point::Write);
            second.issue(engine_ref, true)
        });
        let second_id = writer.thread().id();
        let deadline = Instant::now() + OVERTAKE_WAIT;
        let reached_log = gate.wait_reached(second_id, deadline, &|| writer.is_finished()).is_some();
        gate.release(first_id, Release::Proceed);
        let first = first.join().map_err(|_| "the first writer panicked".to_string())?;
        let done = writer.join().map_err(|_| "the second writer panicked".to_string())?;
        Ok::<_, String>((first, Some(done), reached_log))
    })?;
    first.map_err(|e| format!("the first put failed with no fault injected: {e}"))?;
    let outcome = Outcome { held: done.is_some(), reads_while_held: 0, second_reached_log: reached_log };
    let Some(done) = done else { return Ok(outcome) };
    done.result.map_err(|e| format!("the second write ({second:?}) failed with no fault injected: {e}"))?;
    if second.kind == WriteKind::Rmw && done.rmw_saw != Some(Some(FIRST_VALUE.to_vec())) {
        return Err(format!(
            "the rmw's closure saw {}, but the put of {} logged before the rmw began (and then \
             acknowledged) wrote {}: a lost update",
            escape::value(done.rmw_saw.flatten().as_deref()),
            escape::key(key),
            escape::value(Some(FIRST_VALUE))
        ));
    }
    let expected = second.after_first();
    let on_handle = engine.get(key).map_err(|e| format!("get after both writes returned: {e}"))?;
    if on_handle != expected {
        return Err(format!(
            "after both writes returned, {} is {} on the handle, but the {second:?} logged after the \
             first put leaves {} (as a reopen replays it): the first put, whose fsync ended later, \
             was applied over the later write",
            escape::key(key),
            escape::value(on_handle.as_deref()),
            escape::value(expected.as_deref())
        ));
    }
    engine.close().map_err(|e| format!("close after both writes: {e}"))?;
    drop(engine);
    let engine = disk.open(target)?;
    let mut changes = State::new();
    changes.insert(key.to_vec(), expected);
    check_reopened(&*engine, &old_state(), &changes, false, true)?;
    engine.close().map_err(|e| format!("closing the reopened engine failed: {e}"))?;
    Ok(outcome)
}
