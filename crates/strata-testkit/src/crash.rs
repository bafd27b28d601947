//! Layer 3: the process-kill crash test (sled's test_crash_recovery.rs is the model).
//!
//! The test binary re-runs itself as a child (`<own executable> <test_name> --exact`) with
//! `STRATA_CRASH_CHILD_DIR` set. The child opens the engine on real files and executes ops
//! `start..` from a generator that derives op `i` from `(seed, i)` alone, writing "ops done" to an
//! ack file (pwrite of 8 bytes at offset 0) after each op returns Ok. The parent SIGKILLs it at a
//! random moment, reopens the engine and checks every key: all acknowledged ops must be there
//! and the one op in flight may or may not be (atomically). Then the next child continues after
//! that op. Both Sync and Buffered writes are used: Buffered data was handed to the OS, so it
//! must survive a process kill.
//!
//! Every other cycle the parent checks a copy of the killed store and leaves the store itself as
//! the kill left it, so the next child runs recovery (and an early kill can land inside it);
//! the other cycles check in place, so children also start from a cleanly closed store.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{BatchOp, Direction, Durability, Key, KeyRange, Value, WriteBatch};
use strata_io::FileStorage;

use crate::escape;
use crate::failure::catch;
use crate::keyspace::filled_value;
use crate::ops::Op;
use crate::runner::scan;
use crate::{seed, Failure, Target};

/// Set in the child: the scratch directory (engine files in `db/`, the ack file, a ready marker).
pub const CHILD_DIR_ENV: &str = "STRATA_CRASH_CHILD_DIR";
const CHILD_SEED_ENV: &str = "STRATA_CRASH_SEED";
const CHILD_START_ENV: &str = "STRATA_CRASH_START";
/// Keys the ops draw from; small so checking every key after each kill is cheap.
const KEY_COUNT: u64 = 500;
/// A child that has not been killed by then stops (and the parent reports it).
const CHILD_MAX_RUNTIME: Duration = Duration::from_secs(60);
/// How long the parent waits for a child to open the engine.
const CHILD_READY_TIMEOUT: Duration = Duration::from_secs(30);
const KILL_DELAY_MS: std::ops::RangeInclusive<u64> = 20..=150;
/// Every this many cycles on average, the kill comes early (0–10 ms after spawning), often during
/// the child's startup or recovery.
const EARLY_KILL_ONE_IN: u32 = 5;
const DIFFS_SHOWN: usize = 8;

/// What a process-kill run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub seed: u64,
    pub kills: u64,
    /// Ops the children acknowledged, over all cycles.
    pub acked_ops: u64,
    /// Kills after which the op in flight turned out applied.
    pub in_flight_applied: u64,
}

/// Call from a `#[test]` named `test_name` (its full libtest path, e.g. `process_kill` or
/// `crash_tests::process_kill`). In the child process it runs the op loop; in the parent it runs
/// `cycles` kill-and-check cycles and panics with the seed on any violation.
pub fn process_kill(target: &Target, test_name: &str, cycles: usize) {
    if std::env::var_os(CHILD_DIR_ENV).is_some() {
        let _ = run(target, test_name, cycles, 0);
        return;
    }
    let seed = seed::single_seed();
    eprintln!("[strata-testkit] process-kill {} seed={seed} cycles={cycles}", target.name);
    match run(target, test_name, cycles, seed) {
        Ok(r) => eprintln!(
            "[strata-testkit] process-kill {} seed={seed} ok: {} ops acknowledged over {} kills, the op in flight \
             applied after {} of them",
            target.name, r.acked_ops, r.kills, r.in_flight_applied
        ),
        Err(failure) => failure.raise(),
    }
}

/// Like [`process_kill`] with an explicit seed, returning the first violation instead of
/// panicking. In the child process (`STRATA_CRASH_CHILD_DIR` set) it runs the op loop until
/// killed, ignoring `seed` (the parent passes its own).
pub fn run(target: &Target, test_name: &str, cycles: usize, seed: u64) -> Result<Report, Failure> {
    if let Some(dir) = std::env::var_os(CHILD_DIR_ENV) {
        run_child(target, Path::new(&dir));
        return Ok(Report::default());
    }
    run_parent(target, test_name, cycles, seed)
}

/// Op `index` of the stream for `seed`; parent and child derive the same op independently.
fn kill_op(seed: u64, index: u64) -> Op {
    let mut rng = SmallRng::seed_from_u64(seed::derive(seed, index));
    let key = |rng: &mut SmallRng| format!("key/{:03}", rng.gen_range(0..KEY_COUNT)).into_bytes();
    let value = |rng: &mut SmallRng| filled_value(rng.gen_range(8..=64), index);
    let durability = if rng.gen_range(0..5) == 0 { Durability::Sync } else { Durability::Buffered };
    match rng.gen_range(0..100) {
        0..=59 => Op::Put { key: key(&mut rng), value: value(&mut rng), durability },
        60..=74 => Op::Delete { key: key(&mut rng), durability },
        75..=89 => {
            let mut batch = WriteBatch::new();
            for _ in 0..rng.gen_range(2..=4) {
                let op = match rng.gen_bool(0.75) {
                    true => BatchOp::Put { key: key(&mut rng), value: value(&mut rng) },
                    false => BatchOp::Delete { key: key(&mut rng) },
                };
                batch.push(op);
            }
            Op::Batch { batch, durability }
        }
        _ => Op::Rmw { key: key(&mut rng), durability },
    }
}

fn env_u64(name: &str) -> u64 {
    let text = std::env::var(name).unwrap_or_else(|_| panic!("process-kill child: {name} is not set"));
    seed::parse_u64(&text).unwrap_or_else(|| panic!("process-kill child: {name}={text:?} is not a u64"))
}

/// The child: open, then execute ops from `start` until killed. Any error panics (the parent
/// reports the child's stderr).
fn run_child(target: &Target, dir: &Path) {
    let seed = env_u64(CHILD_SEED_ENV);
    let start = env_u64(CHILD_START_ENV);
    let storage = FileStorage::open_dir(dir.join("db"), true)
        .unwrap_or_else(|e| panic!("process-kill child: opening the directory failed: {e}"));
    let engine =
        (target.open)(Arc::new(storage)).unwrap_or_else(|e| panic!("process-kill child: open failed: {e}"));
    let ack = OpenOptions::new()
        .write(true)
        .open(dir.join("ack"))
        .unwrap_or_else(|e| panic!("process-kill child: opening the ack file failed: {e}"));
    fs::write(dir.join("ready"), b"")
        .unwrap_or_else(|e| panic!("process-kill child: writing the ready marker: {e}"));
    let deadline = Instant::now() + CHILD_MAX_RUNTIME;
    for index in start.. {
        let op = kill_op(seed, index);
        if let Err(e) = op.execute_write(&*engine) {
            panic!("process-kill child: op #{index} ({op}) failed: {e}");
        }
        // A finished pwrite survives SIGKILL: the ack never claims an op that did not return Ok.
        ack.write_all_at(&(index + 1).to_le_bytes(), 0)
            .unwrap_or_else(|e| panic!("process-kill child: writing the ack file failed: {e}"));
        if Instant::now() > deadline {
            eprintln!("process-kill child: not killed after {CHILD_MAX_RUNTIME:?}; stopping");
            return;
        }
    }
}

struct Parent<'t> {
    target: &'t Target,
    test_name: String,
    seed: u64,
    dir: PathBuf,
    /// Every key's value after all ops the engine has been seen to apply.
    model: BTreeMap<Key, Value>,
    /// The first op the next child executes.
    next_op: u64,
}

fn run_parent(target: &Target, test_name: &str, cycles: usize, seed: u64) -> Result<Report, Failure> {
    let scratch =
        tempfile::tempdir().map_err(|e| setup_failure(target, seed, format!("creating a tempdir: {e}")))?;
    let mut parent = Parent {
        target,
        test_name: test_name.to_string(),
        seed,
        dir: scratch.path().to_path_buf(),
        model: BTreeMap::new(),
        next_op: 0,
    };
    let mut rng = SmallRng::seed_from_u64(seed::derive(seed, 0x6b69_6c6c));
    let mut report = Report { seed, ..Report::default() };
    for cycle in 0..cycles {
        let start = parent.next_op;
        let acked = parent.spawn_and_kill(cycle, &mut rng)?;
        report.kills += 1;
        report.acked_ops += acked - start;
        let on_a_copy = cycle % 2 == 0;
        report.in_flight_applied += u64::from(parent.check_recovery(acked, on_a_copy)?);
    }
    if report.acked_ops == 0 {
        let what = format!("no child acknowledged a single op in {cycles} cycles: the test checked nothing");
        return Err(parent.failure(None, what));
    }
    Ok(report)
}

fn setup_failure(target: &Target, seed: u64, what: String) -> Failure {
    Failure {
        check: format!("process-kill {}", target.name),
        seed,
        op_index: None,
        description: what,
        recent_ops: Vec::new(),
    }
}

impl Parent<'_> {
    fn failure(&self, op_index: Option<u64>, description: String) -> Failure {
        let recent_ops = match op_index {
            Some(i) => {
                (i.saturating_sub(5)..=i).map(|j| format!("#{j:<6} {}", kill_op(self.seed, j))).collect()
            }
            None => Vec::new(),
        };
        Failure {
            check: format!("process-kill {}", self.target.name),
            seed: self.seed,
            op_index,
            description,
            recent_ops,
        }
    }

    /// Runs one child from `next_op`, kills it, returns how many ops are acknowledged in total.
    fn spawn_and_kill(&self, cycle: usize, rng: &mut SmallRng) -> Result<u64, Failure> {
        let setup = |what: String| self.failure(None, format!("cycle {cycle}: {what}"));
        fs::write(self.dir.join("ack"), self.next_op.to_le_bytes())
            .map_err(|e| setup(format!("writing the ack file: {e}")))?;
        let ready = self.dir.join("ready");
        if ready.exists() {
            fs::remove_file(&ready).map_err(|e| setup(format!("removing the ready marker: {e}")))?;
        }
        let mut child = self.spawn().map_err(|e| setup(format!("spawning the child: {e}")))?;
        if rng.gen_ratio(1, EARLY_KILL_ONE_IN) {
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..=10)));
        } else {
            let waited = Instant::now();
            while !ready.exists() {
                if child.try_wait().ok().flatten().is_some() || waited.elapsed() > CHILD_READY_TIMEOUT {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(setup(format!(
                        "the child did not open the engine:\n{}",
                        self.child_output()
                    )));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(rng.gen_range(KILL_DELAY_MS)));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(setup(format!("the child exited on its own ({status}):\n{}", self.child_output())));
        }
        child.kill().map_err(|e| setup(format!("killing the child: {e}")))?;
        child.wait().map_err(|e| setup(format!("waiting for the child: {e}")))?;
        let ack = fs::read(self.dir.join("ack")).map_err(|e| setup(format!("reading the ack file: {e}")))?;
        let acked = ack.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        match acked {
            Some(acked) if acked >= self.next_op => Ok(acked),
            _ => Err(setup(format!(
                "the ack file holds {ack:?}, expected a count of at least {}",
                self.next_op
            ))),
        }
    }

    fn spawn(&self) -> std::io::Result<Child> {
        Command::new(own_executable()?)
            .args([self.test_name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR_ENV, &self.dir)
            .env(CHILD_SEED_ENV, self.seed.to_string())
            .env(CHILD_START_ENV, self.next_op.to_string())
            .stdout(File::create(self.dir.join("child.stdout"))?)
            .stderr(File::create(self.dir.join("child.stderr"))?)
            .spawn()
    }

    fn child_output(&self) -> String {
        let read = |name: &str| fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        format!(
            "--- child stdout (is {:?} the test's exact libtest name?) ---\n{}--- child stderr ---\n{}",
            self.test_name,
            read("child.stdout"),
            read("child.stderr")
        )
    }

    /// Ops before `acked` are applied; op `acked` may be (atomically). Checks every key, adopts
    /// what happened, and moves past the in-flight op. True when the in-flight op was applied.
    /// Checks the store after a kill (on a copy of it when `on_a_copy`, leaving the store for
    /// the next child to recover).
    fn check_recovery(&mut self, acked: u64, on_a_copy: bool) -> Result<bool, Failure> {
        for index in self.next_op..acked {
            let unit = kill_op(self.seed, index).unit(|k| self.model.get(k).cloned());
            apply(&mut self.model, unit);
        }
        let in_flight = kill_op(self.seed, acked);
        let mut with_in_flight = self.model.clone();
        apply(&mut with_in_flight, in_flight.unit(|k| self.model.get(k).cloned()));

        let observed = match catch(|| self.observe(on_a_copy)) {
            Ok(Ok(observed)) => observed,
            Ok(Err(what)) => return Err(self.failure(Some(acked), format!("after the kill: {what}"))),
            Err(panic) => {
                return Err(self.failure(Some(acked), format!("after the kill the engine panicked: {panic}")))
            }
        };
        let applied = if observed == self.model {
            false
        } else if observed == with_in_flight {
            self.model = with_in_flight;
            true
        } else {
            return Err(self.failure(Some(acked), self.describe_mismatch(&observed, acked)));
        };
        self.next_op = acked + 1;
        Ok(applied)
    }

    /// Opens the engine (on a copy of its directory when `on_a_copy`), reads every key (and a
    /// full scan), closes it.
    fn observe(&self, on_a_copy: bool) -> Result<BTreeMap<Key, Value>, String> {
        let dir = if on_a_copy {
            let copy = self.dir.join("observed");
            copy_dir(&self.dir.join("db"), &copy).map_err(|e| format!("copying the store: {e}"))?;
            copy
        } else {
            self.dir.join("db")
        };
        let storage = FileStorage::open_dir(dir, true).map_err(|e| format!("opening the directory: {e}"))?;
        let engine = (self.target.open)(Arc::new(storage)).map_err(|e| format!("open failed: {e}"))?;
        let mut observed = BTreeMap::new();
        for n in 0..KEY_COUNT {
            let key = format!("key/{n:03}").into_bytes();
            if let Some(value) =
                engine.get(&key).map_err(|e| format!("get {} failed: {e}", escape::key(&key)))?
            {
                observed.insert(key, value);
            }
        }
        if self.target.ordered() {
            let scanned =
                scan(&*engine, &KeyRange::all(), Direction::Forward, None).map_err(|e| e.describe())?;
            let scanned: BTreeMap<Key, Value> = scanned.into_iter().collect();
            if scanned != observed {
                let extra = scanned.keys().find(|k| observed.get(*k) != scanned.get(*k));
                let missing = observed.keys().find(|k| !scanned.contains_key(*k));
                return Err(format!(
                    "a full scan disagrees with get: first differing scanned key {:?}, first key missing from the scan {:?}",
                    extra.map(|k| escape::key(k)),
                    missing.map(|k| escape::key(k))
                ));
            }
        }
        engine.close().map_err(|e| format!("close failed: {e}"))?;
        Ok(observed)
    }

    fn describe_mismatch(&self, observed: &BTreeMap<Key, Value>, acked: u64) -> String {
        let mut keys: Vec<&Key> = self.model.keys().chain(observed.keys()).collect();
        keys.sort();
        keys.dedup();
        let diffs: Vec<String> = keys
            .into_iter()
            .filter(|k| self.model.get(*k) != observed.get(*k))
            .take(DIFFS_SHOWN)
            .map(|k| {
                format!(
                    "\n  key {}: expected {}, recovered {}",
                    escape::key(k),
                    escape::value(self.model.get(k).map(Vec::as_slice)),
                    escape::value(observed.get(k).map(Vec::as_slice))
                )
            })
            .collect();
        format!(
            "after SIGKILL with {acked} ops acknowledged, the recovered state matches neither all acknowledged ops \
             nor those plus the op in flight (#{acked}); differences from the acknowledged state:{}",
            diffs.concat()
        )
    }
}

/// Replaces `to` with a copy of the files in `from` (engines keep a flat directory), or with an
/// empty directory when `from` does not exist.
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    if to.exists() {
        fs::remove_dir_all(to)?;
    }
    fs::create_dir_all(to)?;
    if !from.exists() {
        return Ok(()); // killed before it created the store
    }
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

fn apply(model: &mut BTreeMap<Key, Value>, unit: Option<crate::ops::Unit>) {
    for (key, value) in unit.into_iter().flatten() {
        match value {
            Some(v) => model.insert(key, v),
            None => model.remove(&key),
        };
    }
}

/// The file this process runs, for its children. On Linux `/proc/<pid>/exe`, which stays this
/// binary after its path was replaced or deleted: a cargo build of the same test target while
/// the test runs replaces the path, and `current_exe()` then named a missing file (the spawn
/// failed: "No such file or directory") or would have run the rebuilt code in the children.
fn own_executable() -> std::io::Result<PathBuf> {
    let running = PathBuf::from(format!("/proc/{}/exe", std::process::id()));
    match running.exists() {
        true => Ok(running),
        false => std::env::current_exe(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELETE_AND_SPAWN_ENV: &str = "STRATA_TESTKIT_DELETE_SELF_AND_SPAWN";

    /// Regression (a process-kill run failed at cycle 17 with "spawning the child: No such file
    /// or directory" while cargo rebuilt the test binary): a copy of this test binary deletes
    /// itself, then spawns `own_executable()`, which must still run it.
    #[test]
    fn children_run_the_parent_s_binary_after_its_file_is_deleted() {
        if std::env::var_os(DELETE_AND_SPAWN_ENV).is_some() {
            fs::remove_file(std::env::current_exe().unwrap()).unwrap();
            let listed = Command::new(own_executable().unwrap()).arg("--list").output().unwrap();
            assert!(listed.status.success(), "{listed:?}");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("test-binary-copy");
        fs::copy(std::env::current_exe().unwrap(), &copy).unwrap();
        let name = "crash::tests::children_run_the_parent_s_binary_after_its_file_is_deleted";
        let out =
            Command::new(&copy).args([name, "--exact"]).env(DELETE_AND_SPAWN_ENV, "1").output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
        assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"), "the copy ran no test: {out:?}");
        assert!(!copy.exists(), "the copy did not delete itself");
    }

    #[test]
    fn ops_depend_only_on_seed_and_index() {
        for index in [0, 1, 17, 123_456] {
            assert_eq!(kill_op(9, index).to_string(), kill_op(9, index).to_string());
        }
        let distinct: std::collections::BTreeSet<String> =
            (0..50).map(|i| kill_op(9, i).to_string()).collect();
        assert!(distinct.len() > 45);
        assert!((0..200).all(|i| kill_op(9, i).durability().is_some()));
    }
}
