//! Space that crashes cannot leak (issue #19, item 5): "after 200 simulated crashes and 50
//! process kills under a steady live set, disk use stays within 2× of (live data + the engine's
//! configured log and segment budgets)". Four writer threads run puts, deletes and batches with
//! Sync and Buffered durability over a fixed key space (so the live set is steady) until a crash
//! (SimStorage power loss, `CrashMode::Random`) or a SIGKILL; the directory is measured after
//! each one. The budgets are tiny so every cycle runs compaction, chunk-log GC and checkpoints.
//!
//! The full-size runs are these tests (each well under 20 s in debug). A larger, slower variant
//! (bigger pages, segments and values, longer lives between kills) is `#[ignore]`d:
//! `cargo test -p engine-f2 --test disk_use -- --ignored --nocapture`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine_f2::{F2Engine, F2Options, COLD_SLACK_PAGES, COLD_SPACE_AMPLIFICATION};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Engine, EngineConfig, WriteBatch};
use strata_io::{CrashMode, FileStorage, SimStorage, Storage};

/// Set in a process-kill child: the directory of the store it writes to until killed.
const CHILD_DIR_ENV: &str = "F2_DISK_USE_CHILD_DIR";
const CHILD_SEED_ENV: &str = "F2_DISK_USE_CHILD_SEED";
const CHILD_SCALE_ENV: &str = "F2_DISK_USE_CHILD_SCALE";
/// Written by a child right after it opened the store: "live_bytes" (key + value bytes of every
/// live key, after recovery).
const LIVE_FILE: &str = "live-bytes";

/// One size of the experiment: the store's configuration and the workload's key space.
#[derive(Clone, Copy, Debug)]
struct Scale {
    keys: u64,
    value_bytes: (usize, usize),
    page_bytes: u64,
    segment_bytes: u64,
    wal_segment_bytes: u64,
    hot_log_disk_budget_bytes: u64,
    /// `None`: the default cold trigger (about twice the cold log's live bytes).
    cold_log_disk_budget_bytes: Option<u64>,
    checkpoint_wal_bytes: u64,
    cold_index_bytes: u64,
}

const SMALL: Scale = Scale {
    keys: 2_000,
    value_bytes: (50, 150),
    page_bytes: 4 << 10,
    segment_bytes: 32 << 10,
    wal_segment_bytes: 16 << 10,
    hot_log_disk_budget_bytes: 128 << 10,
    cold_log_disk_budget_bytes: Some(512 << 10),
    checkpoint_wal_bytes: 64 << 10,
    cold_index_bytes: 1 << 10,
};

/// The ignored variant: ~8 MB live, MiB-sized segments and WAL segments.
const LARGE: Scale = Scale {
    keys: 8_000,
    value_bytes: (500, 1_500),
    page_bytes: 64 << 10,
    segment_bytes: 1 << 20,
    wal_segment_bytes: 1 << 20,
    hot_log_disk_budget_bytes: 8 << 20,
    cold_log_disk_budget_bytes: Some(16 << 20),
    checkpoint_wal_bytes: 4 << 20,
    cold_index_bytes: 8 << 10,
};

impl Scale {
    fn config(&self) -> EngineConfig {
        EngineConfig {
            wal_segment_bytes: Some(self.wal_segment_bytes),
            memory_budget_bytes: 64 * self.page_bytes,
            ..EngineConfig::default()
        }
    }

    fn options(&self) -> F2Options {
        F2Options {
            page_size_bytes: Some(self.page_bytes),
            segment_bytes: self.segment_bytes,
            hot_index_bytes: Some(4 * self.keys),
            hot_log_memory_bytes: Some(8 * self.page_bytes),
            cold_index_bytes: Some(self.cold_index_bytes),
            hot_log_disk_budget_bytes: Some(self.hot_log_disk_budget_bytes),
            cold_log_disk_budget_bytes: self.cold_log_disk_budget_bytes,
            checkpoint_wal_bytes: Some(self.checkpoint_wal_bytes),
            ..F2Options::default()
        }
    }

    fn open(&self, storage: Arc<dyn Storage>) -> F2Engine {
        F2Engine::open_with(storage, &self.config(), self.options()).unwrap()
    }

    /// The configured log and segment budgets, each with the slack its mechanism allows
    /// (docs/ARCHITECTURE.md, f2, "Recovery path": the space bound).
    fn budgets(&self) -> u64 {
        let wal_recycled = strata_wal::WalOptions::default().recycle_segments as u64;
        // Hash chunks: 32 entries of 8 B behind a 24 B header and a 4 B key, 8-aligned.
        let chunk_record = (24 + 4 + 32 * 8u64).next_multiple_of(8);
        let chunks = (self.cold_index_bytes / 8).next_power_of_two();
        // The chunk log is collected beyond twice its live chunks plus two pages.
        let chunk_log = 2 * chunks * chunk_record + 2 * self.page_bytes;
        // The WAL since the last checkpoint, its active segment and the recycled `.free` ones.
        let wal = self.checkpoint_wal_bytes + (1 + wal_recycled) * self.wal_segment_bytes;
        // Segments are deleted whole: each of the three logs may hold one partly dead segment
        // below its begin and one partly written at its tail.
        let segments = 3 * 2 * self.segment_bytes;
        // The hot-index snapshot: 12 B per entry, at most one entry per key.
        let snapshot = 64 + 12 * self.keys;
        self.hot_log_disk_budget_bytes + self.cold_log_budget_bytes() + chunk_log + wal + segments + snapshot
    }

    /// The cold log's budget: the configured one, or the default trigger's bound for the largest
    /// live set the key space allows (every key live with the largest value, as records) plus
    /// the trigger's slack and the page being appended to.
    fn cold_log_budget_bytes(&self) -> u64 {
        let largest_record = (24 + key(0).len() as u64 + self.value_bytes.1 as u64).next_multiple_of(8);
        let default_bound =
            COLD_SPACE_AMPLIFICATION * self.keys * largest_record + (COLD_SLACK_PAGES + 1) * self.page_bytes;
        self.cold_log_disk_budget_bytes.unwrap_or(default_bound)
    }

    /// Issue #19 item 5: 2 × (live data + the configured budgets).
    fn bound(&self, live_bytes: u64) -> u64 {
        2 * (live_bytes + self.budgets())
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

/// Writes until `stop` is set or a write fails (the disk crashed under it), counting the writes
/// that succeeded in `written`.
fn writer(engine: &F2Engine, scale: Scale, stop: &AtomicBool, written_count: &AtomicU64, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    while !stop.load(SeqCst) {
        let durability = if rng.gen_bool(0.2) { Durability::Sync } else { Durability::Buffered };
        let value = vec![b'v'; rng.gen_range(scale.value_bytes.0..scale.value_bytes.1)];
        let op = rng.gen_range(0..10);
        let mut k = || key(rng.gen_range(0..scale.keys));
        let written = match op {
            0 => engine.delete(&k(), durability),
            1 => {
                let mut batch = WriteBatch::new();
                for _ in 0..4 {
                    batch.put(k(), value.clone());
                }
                batch.delete(k());
                engine.write(batch, durability)
            }
            _ => engine.put(&k(), &value, durability),
        };
        if written.is_err() {
            return;
        }
        written_count.fetch_add(1, SeqCst);
    }
}

/// Four writers on `engine` until `stop` is set (or their writes fail).
fn run_writers(
    engine: &Arc<F2Engine>,
    scale: Scale,
    stop: &Arc<AtomicBool>,
    written_count: &Arc<AtomicU64>,
    seed: u64,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..4)
        .map(|t| {
            let (engine, stop, written_count) = (engine.clone(), stop.clone(), written_count.clone());
            std::thread::spawn(move || writer(&engine, scale, &stop, &written_count, seed * 4 + t))
        })
        .collect()
}

/// Waits until `written_count` reaches `target` (or a generous time passed: writes that fail
/// stop counting). A crash point measured in writes, not in time, gives every cycle the same
/// work however loaded the machine is.
fn wait_for_writes(written_count: &AtomicU64, target: u64) {
    let started = Instant::now();
    while written_count.load(SeqCst) < target && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn live_bytes(engine: &F2Engine) -> u64 {
    engine.scan_all().unwrap().map(|kv| kv.map(|(k, v)| (k.len() + v.len()) as u64).unwrap()).sum()
}

fn listing(storage: &dyn Storage) -> String {
    let mut names = storage.list().unwrap();
    names.sort();
    let len =
        |n: &str| storage.open(n, strata_io::OpenOptions::existing()).and_then(|f| f.len()).unwrap_or(0);
    names.iter().map(|n| format!("{n}={}", len(n))).collect::<Vec<_>>().join(" ")
}

fn check_bound(what: &str, disk: u64, live: u64, scale: &Scale, storage: &dyn Storage) {
    assert!(
        disk <= scale.bound(live),
        "{what}: {disk} bytes on disk, over the bound 2 × (live {live} + budgets {}) = {}; files: {}",
        scale.budgets(),
        scale.bound(live),
        listing(storage)
    );
}

/// At least 200 SimStorage crashes of four writers on one store of `scale`, more (up to 400)
/// until the cycles reached 200 checkpoints and 200 hot→cold rounds; each cycle crashes after
/// a random number of writes, so the coverage does not depend on the machine's load. Checks the bound after each crash, before and after recovery. Returns the cold→cold
/// rounds run.
fn crash_cycles(scale: Scale) -> u64 {
    let sim = SimStorage::new(5);
    let mut rng = SmallRng::seed_from_u64(9);
    let (mut max_disk, mut checkpoints, mut compactions, mut cold_rounds, mut crashes) = (0, 0, 0, 0, 0);
    for cycle in 0..400u64 {
        if cycle >= 200 && checkpoints >= 200 && compactions >= 200 {
            break;
        }
        crashes += 1;
        let storage: Arc<dyn Storage> = Arc::new(sim.booted());
        // Measured before the reopen, as the crash left it, and after recovery.
        let left = strata_io::total_file_bytes(storage.as_ref());
        let engine = Arc::new(scale.open(storage.clone()));
        let live = live_bytes(&engine);
        check_bound(&format!("after crash {cycle}"), left, live, &scale, storage.as_ref());
        max_disk = max_disk.max(left);
        let stop = Arc::new(AtomicBool::new(false));
        let written_count = Arc::new(AtomicU64::new(0));
        let writers = run_writers(&engine, scale, &stop, &written_count, cycle);
        // About 1.5 checkpoints' worth of WAL per cycle on average (a checkpoint per
        // `checkpoint_wal_bytes`, ~130 B of WAL per write at SMALL).
        wait_for_writes(&written_count, rng.gen_range(1..1_500));
        sim.crash(CrashMode::Random);
        stop.store(true, SeqCst);
        writers.into_iter().for_each(|w| w.join().unwrap());
        let counter = |name| engine.stats().counter(name).unwrap();
        checkpoints += counter("checkpoints");
        compactions += counter("compaction.hot_to_cold_runs");
        cold_rounds += counter("compaction.cold_to_cold_runs");
        // Its handles are stale; dropping it joins its maintenance thread before the next open.
        drop(engine);
    }
    eprintln!(
        "{crashes} crashes: at most {max_disk} bytes on disk (bound with no live data {}); {checkpoints} checkpoints, \
         {compactions} hot-to-cold rounds, {cold_rounds} cold-to-cold rounds",
        scale.bound(0)
    );
    // The cycles must reach the states a crash can leave behind: after checkpoints (segments to
    // delete below each begin) and compaction rounds (cold and chunk appends past a checkpoint).
    assert!(checkpoints >= 200 && compactions >= 200, "{checkpoints} checkpoints, {compactions} rounds");
    cold_rounds
}

#[test]
fn disk_use_stays_bounded_across_crashes() {
    crash_cycles(SMALL);
}

/// The same with the cold log's default trigger (no cold budget): its live-bytes estimate comes
/// back from the checkpoint each crash restores, with the cold range it describes.
#[test]
fn disk_use_stays_bounded_across_crashes_with_the_default_cold_trigger() {
    let cold_rounds = crash_cycles(Scale { cold_log_disk_budget_bytes: None, ..SMALL });
    assert!(cold_rounds > 0, "no cold-to-cold round ran");
}

/// The process-kill child: opens the store, reports its live bytes, writes until killed.
fn child(dir: &Path) {
    let scale = if std::env::var_os(CHILD_SCALE_ENV).is_some() { LARGE } else { SMALL };
    let seed: u64 = std::env::var(CHILD_SEED_ENV).unwrap().parse().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::open_dir(dir.join("db"), true).unwrap());
    let engine = Arc::new(scale.open(storage));
    std::fs::write(dir.join(LIVE_FILE), live_bytes(&engine).to_string()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Never stops: the parent kills this process.
    let written_count = Arc::new(AtomicU64::new(0));
    run_writers(&engine, scale, &stop, &written_count, seed).into_iter().for_each(|w| w.join().unwrap());
}

/// `kills` SIGKILLs of a child (this test binary re-run as `test_name`) writing to one store,
/// each `lifetime_ms` after the spawn; checks the directory after each kill. Returns the most
/// bytes seen on disk.
fn process_kills(test_name: &str, scale: Scale, kills: u64, lifetime_ms: std::ops::Range<u64>) -> u64 {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, mut rng) = (tmp.path(), SmallRng::seed_from_u64(1));
    let storage = FileStorage::open_dir(dir.join("db"), true).unwrap();
    let (mut live, mut max_disk) = (0, 0);
    for kill in 0..kills {
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command.args([test_name, "--exact", "--nocapture", "--test-threads=1", "--include-ignored"]);
        command.env(CHILD_DIR_ENV, dir).env(CHILD_SEED_ENV, kill.to_string());
        if scale.keys == LARGE.keys {
            command.env(CHILD_SCALE_ENV, "1");
        }
        let mut child = command.stdout(std::process::Stdio::null()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(rng.gen_range(lifetime_ms.clone())));
        child.kill().unwrap();
        child.wait().unwrap();
        // The live bytes the child found at its open (the one before, if it was killed first).
        if let Ok(reported) = std::fs::read_to_string(dir.join(LIVE_FILE)) {
            live = reported.parse().unwrap_or(live);
        }
        let disk = strata_io::total_file_bytes(&storage);
        max_disk = max_disk.max(disk);
        check_bound(&format!("after kill {kill}"), disk, live, &scale, &storage);
    }
    let disk = strata_io::total_file_bytes(&storage);
    let engine = scale.open(Arc::new(storage.clone()));
    check_bound("after the last kill", disk, live_bytes(&engine), &scale, &storage);
    max_disk
}

#[test]
fn disk_use_stays_bounded_across_process_kills() {
    if let Some(dir) = std::env::var_os(CHILD_DIR_ENV) {
        return child(Path::new(&dir));
    }
    let max = process_kills("disk_use_stays_bounded_across_process_kills", SMALL, 50, 20..200);
    eprintln!("50 kills: at most {max} bytes on disk (bound with no live data {})", SMALL.bound(0));
}

/// Larger pages, segments and values (~8 MB live), a second or so between kills. About a
/// minute in debug: `cargo test -p engine-f2 --test disk_use -- --ignored --nocapture`.
#[test]
#[ignore]
fn disk_use_stays_bounded_across_process_kills_large() {
    if let Some(dir) = std::env::var_os(CHILD_DIR_ENV) {
        return child(Path::new(&dir));
    }
    let max = process_kills("disk_use_stays_bounded_across_process_kills_large", LARGE, 50, 300..1_500);
    eprintln!("50 kills (large): at most {max} bytes on disk (bound with no live data {})", LARGE.bound(0));
}
