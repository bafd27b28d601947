//! The cold log's default trigger (issue #19 item 5, "space that crashes cannot leak"): with
//! `cold_log_disk_budget_bytes` left unset, cold→cold compaction keeps the cold log within about
//! twice its live bytes (engine/cold_live.rs), where a fixed budget lets it keep every
//! superseded version up to the budget. Inline maintenance, so every run is deterministic.

use std::sync::Arc;

mod common;

use common::{config, counter, key};
use engine_f2::{F2Engine, F2Options, COLD_SLACK_PAGES};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Engine};
use strata_io::{MemStorage, Storage};

const PAGE_BYTES: u64 = 4 << 10;
/// The steady live set of the overwrite workload.
const KEYS: u64 = 2_000;
const VALUE_BYTES: usize = 100;
/// A record of the workload in a log: 24 B header + `key-NNNNN` + value, 8-aligned.
const RECORD_BYTES: u64 = (24 + 9 + VALUE_BYTES as u64).next_multiple_of(8);
/// The cold log's live bytes once every key has a cold record (an upper bound before).
const LIVE_BYTES: u64 = KEYS * RECORD_BYTES;
/// Overwrites of the workload: about 15 times the live set, all moved through the hot log.
const OVERWRITES: u64 = 15 * KEYS;
/// The cold log's size is sampled after every this many writes.
const SAMPLE_EVERY: u64 = 250;

/// Small pages and a hot log of a few pages, so records move hot→cold all the time; the cold
/// budget is the default (`None`) unless a test sets it.
fn options() -> F2Options {
    F2Options {
        page_size_bytes: Some(PAGE_BYTES),
        segment_bytes: 16 << 10,
        hot_index_bytes: Some(4 << 10),
        hot_log_memory_bytes: Some(16 << 10),
        cold_index_bytes: Some(1 << 10),
        hot_log_disk_budget_bytes: Some(32 << 10),
        checkpoint_wal_bytes: Some(256 << 10),
        background_maintenance: false,
        ..F2Options::default()
    }
}

fn value(write: u64) -> Vec<u8> {
    let mut v = format!("v{write:09}").into_bytes();
    v.resize(VALUE_BYTES, b'x');
    v
}

/// What an overwrite run saw of the cold log.
struct Run {
    engine: F2Engine,
    /// The largest cold log sampled.
    max_cold_bytes: u64,
    /// Whether a sample found the cold log over 3× the live bytes before any cold→cold round.
    over_three_times_live_uncompacted: bool,
}

fn cold_bytes(engine: &F2Engine) -> u64 {
    counter(engine, "cold_log.size_bytes")
}

/// Writes every key once, then `OVERWRITES` puts of uniformly random keys (a steady live set),
/// sampling the cold log; checks every key's newest value at the end.
fn overwrite_run(storage: Arc<dyn Storage>, options: F2Options) -> Run {
    let engine = F2Engine::open_with(storage, &config(), options).unwrap();
    let mut newest = vec![0u64; KEYS as usize];
    let mut rng = SmallRng::seed_from_u64(19);
    let (mut max_cold_bytes, mut over_three_times_live_uncompacted) = (0, false);
    for write in 0..KEYS + OVERWRITES {
        let k = if write < KEYS { write } else { rng.gen_range(0..KEYS) };
        engine.put(&key(k), &value(write), Durability::None).unwrap();
        newest[k as usize] = write;
        if write % SAMPLE_EVERY == 0 {
            let cold = cold_bytes(&engine);
            max_cold_bytes = max_cold_bytes.max(cold);
            let uncompacted = counter(&engine, "compaction.cold_to_cold_runs") == 0;
            over_three_times_live_uncompacted |= uncompacted && cold > 3 * LIVE_BYTES;
        }
    }
    for (k, &write) in newest.iter().enumerate() {
        assert_eq!(engine.get(&key(k as u64)).unwrap(), Some(value(write)), "key {k}");
    }
    Run { engine, max_cold_bytes, over_three_times_live_uncompacted }
}

fn report(what: &str, run: &Run) {
    let e = &run.engine;
    eprintln!(
        "{what}: live {LIVE_BYTES} B; cold log at most {} B ({:.2}x), at the end {} B (estimate {} B); \
         {} cold→cold rounds copying {} records; {} hot→cold rounds",
        run.max_cold_bytes,
        run.max_cold_bytes as f64 / LIVE_BYTES as f64,
        cold_bytes(e),
        counter(e, "cold_log.live_estimate_bytes"),
        counter(e, "compaction.cold_to_cold_runs"),
        counter(e, "compaction.cold_to_cold_records"),
        counter(e, "compaction.hot_to_cold_runs"),
    );
}

/// The default keeps the cold log of an overwrite workload within 3× its live bytes (plus the
/// trigger's slack and one page being appended to), and the estimate survives a reopen.
#[test]
fn default_keeps_the_cold_log_near_its_live_bytes_under_overwrites() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let run = overwrite_run(storage.clone(), options());
    report("default", &run);
    let bound = 3 * LIVE_BYTES + (COLD_SLACK_PAGES + 1) * PAGE_BYTES;
    assert!(run.max_cold_bytes <= bound, "cold log reached {} B, bound {bound} B", run.max_cold_bytes);
    assert!(counter(&run.engine, "compaction.cold_to_cold_runs") > 0);
    // The estimate is persisted in the checkpoint `close` takes.
    let estimate = counter(&run.engine, "cold_log.live_estimate_bytes");
    assert!(estimate > 0 && estimate <= cold_bytes(&run.engine), "estimate {estimate}");
    run.engine.close().unwrap();
    drop(run);
    let reopened = F2Engine::open_with(storage, &config(), options()).unwrap();
    assert_eq!(counter(&reopened, "cold_log.live_estimate_bytes"), estimate);
}

/// An explicit budget keeps today's fixed trigger: the same workload's cold log grows past 3×
/// its live bytes with no cold→cold round (as it did under the old 64 GiB default), and a small
/// budget bounds it instead.
#[test]
fn an_explicit_budget_is_a_fixed_trigger() {
    let old_default = F2Options { cold_log_disk_budget_bytes: Some(64 << 30), ..options() };
    let run = overwrite_run(Arc::new(MemStorage::new()), old_default);
    report("64 GiB budget", &run);
    assert!(run.over_three_times_live_uncompacted);
    assert_eq!(counter(&run.engine, "compaction.cold_to_cold_runs"), 0);

    // Its trigger (0.8 × 2 MiB) is far enough above 3× live for a sample to land in between.
    let budget_bytes = 2 << 20;
    let small = F2Options { cold_log_disk_budget_bytes: Some(budget_bytes), ..options() };
    let run = overwrite_run(Arc::new(MemStorage::new()), small);
    report("2 MiB budget", &run);
    assert!(run.over_three_times_live_uncompacted, "no cold round before the budget's trigger");
    assert!(counter(&run.engine, "compaction.cold_to_cold_runs") > 0);
    // Over the trigger (0.8 × budget) by at most what is appended before the round runs (the
    // hot→cold round of the same maintenance, a fifth of the hot log's 32 KiB budget).
    assert!(run.max_cold_bytes <= budget_bytes, "cold log reached {} B", run.max_cold_bytes);
}

/// A cold log that is all live (every key written once, never overwritten) is not compacted in
/// a loop: a round that finds its range live backs off until the log doubles, so the rounds
/// grow with the logarithm of the log, and they copy less than the data once over.
#[test]
fn an_all_live_cold_log_is_not_compacted_in_a_loop() {
    let keys = 20_000u64;
    let engine = F2Engine::open_with(Arc::new(MemStorage::new()), &config(), options()).unwrap();
    for k in 0..keys {
        engine.put(&key(k), &value(k), Durability::None).unwrap();
    }
    let (rounds, copied) = (
        counter(&engine, "compaction.cold_to_cold_runs"),
        counter(&engine, "compaction.cold_to_cold_records"),
    );
    let cold = cold_bytes(&engine);
    eprintln!(
        "all live: {keys} keys, cold log {cold} B (estimate {} B), {rounds} cold→cold rounds copying {copied} records",
        counter(&engine, "cold_log.live_estimate_bytes")
    );
    let doublings = (cold / (COLD_SLACK_PAGES * PAGE_BYTES)).max(1).ilog2() as u64;
    assert!(rounds <= doublings + 3, "{rounds} rounds for {doublings} doublings");
    assert!(copied <= keys, "{copied} records copied");
    for k in (0..keys).step_by(97) {
        assert_eq!(engine.get(&key(k)).unwrap(), Some(value(k)));
    }
}
