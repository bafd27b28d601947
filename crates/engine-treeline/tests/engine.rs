//! Engine-level tests: the background paths run under the kit's sizes (counters), recovery from a
//! checkpoint plus the WAL, torn in-place page writes repaired from the double-write area, and
//! the maintenance tasks.

use std::collections::BTreeMap;
use std::sync::Arc;

mod common;

use common::{config, counter, key, open};
use engine_treeline::TreelineEngine;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_core::{Direction, Durability, Engine, KeyRange, MaintenanceTask};
use strata_io::{CrashMode, MemStorage, SimStorage, Storage};

fn value(i: u64, round: u64) -> Vec<u8> {
    let len = 20 + ((i * 7 + round * 13) % 90) as usize;
    format!("v{i}-{round}-").into_bytes().into_iter().cycle().take(len).collect()
}

fn check_all(engine: &TreelineEngine, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(engine.get(k).unwrap().as_ref(), Some(v), "key {}", String::from_utf8_lossy(k));
    }
    let scanned: Vec<_> =
        engine.range(KeyRange::all(), Direction::Forward).unwrap().map(Result::unwrap).collect();
    let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(scanned, expected);
    let mut reversed: Vec<_> =
        engine.range(KeyRange::all(), Direction::Reverse).unwrap().map(Result::unwrap).collect();
    reversed.reverse();
    assert_eq!(reversed, expected);
}

/// Random puts and deletes over 3,000 keys.
fn workload(engine: &TreelineEngine, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, ops: u64, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for round in 0..ops {
        let i = rng.gen_range(0..3_000);
        if rng.gen_bool(0.15) {
            engine.delete(&key(i), Durability::Buffered).unwrap();
            model.remove(&key(i));
        } else {
            engine.put(&key(i), &value(i, round), Durability::Buffered).unwrap();
            model.insert(key(i), value(i, round));
        }
    }
}

/// A store in memory after `workload(ops, seed)`, `before_close` and a clean close (so a
/// checkpoint), with the model of what it holds.
fn closed_store(
    ops: u64,
    seed: u64,
    before_close: impl FnOnce(&TreelineEngine),
) -> (Arc<MemStorage>, BTreeMap<Vec<u8>, Vec<u8>>) {
    let storage = Arc::new(MemStorage::new());
    let engine = open(storage.clone());
    let mut model = BTreeMap::new();
    workload(&engine, &mut model, ops, seed);
    before_close(&engine);
    engine.close().unwrap();
    (storage, model)
}

/// Under the kit's sizes every background path runs: write-back, the double-write area,
/// overflow pages, reorganizations into multi-page segments, forecasting and checkpoints.
#[test]
fn write_back_overflow_reorganization_and_checkpoints_run_at_kit_sizes() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = open(storage.clone());
    let mut model = BTreeMap::new();
    workload(&engine, &mut model, 6_000, 1);
    check_all(&engine, &model);
    for name in [
        "pages_written_back",
        "double_write_pages",
        "overflow_pages_created",
        "reorganizations",
        "multi_page_segments_written",
        "forecast_lowered_goals",
        "checkpoints",
    ] {
        assert!(counter(&engine, name) > 0, "{name} is 0: {:?}", engine.stats().engine_counters);
    }
    assert_eq!(counter(&engine, "memory.over_budget_bytes"), 0, "the index fits the budget");
    assert_eq!(engine.stats().notices, Vec::<String>::new());
    engine.verify().unwrap();
    engine.close().unwrap();
    let engine = open(storage);
    assert_eq!(counter(&engine, "records_replayed_at_open"), 0, "close checkpoints");
    check_all(&engine, &model);
}

/// Recovery after a power cut: the checkpoint's segments plus the WAL after it; in-place page
/// writes torn by the crash are repaired from the double-write area. Each process lifetime
/// opens its own `booted` view: the crashed engine is forgotten, not dropped, so its write-back
/// worker runs on, and through a shared view it renamed the next lifetime's WAL segments
/// (regression: CI failed with "renaming treeline-wal-…025.log to …025.free: no such file").
#[test]
fn power_cuts_recover_every_synced_write_and_repair_torn_pages() {
    let sim = SimStorage::new(7);
    let mut model = BTreeMap::new();
    let mut restored = 0;
    for cycle in 0..12u64 {
        let engine = open(Arc::new(sim.booted()));
        check_all(&engine, &model);
        restored += counter(&engine, "pages_restored_at_open");
        workload(&engine, &mut model, 400, 100 + cycle);
        engine.flush().unwrap();
        sim.crash(CrashMode::Random);
        std::mem::forget(engine); // a crashed process runs no destructors
    }
    let engine = open(Arc::new(sim.booted()));
    check_all(&engine, &model);
    engine.verify().unwrap();
    assert!(restored > 0, "no torn page was repaired in 12 crashes");
}

/// The kit's configuration with a record cache of `cache` within `budget_bytes` and checkpoints
/// 64 MiB of WAL apart: everything a test writes stays dirty until it asks for a write-back.
fn far_apart_checkpoints(cache: &str, budget_bytes: u64) -> strata_core::EngineConfig {
    let mut options =
        config().engine_option("record_cache_bytes", cache).engine_option("checkpoint_wal_bytes", "64MiB");
    options.memory_budget_bytes = budget_bytes;
    options
}

/// The double-write area rewinds between checkpoints (data file synced, area emptied, pages
/// imaged again at their next write) when checkpoints are far apart: power cuts at any point,
/// with torn in-place writes and a rewind's truncation lost or kept, recover every synced write.
/// (Canary: a rewind that skips the data sync fails here on a torn page with no image.)
#[test]
fn power_cuts_recover_every_synced_write_across_double_write_rewinds() {
    let config = config().engine_option("checkpoint_wal_bytes", "256KiB");
    let sim = SimStorage::new(11);
    let mut model = BTreeMap::new();
    let (mut rewinds, mut restored) = (0, 0);
    for cycle in 0..20u64 {
        let engine = TreelineEngine::open(Arc::new(sim.booted()), &config).unwrap();
        check_all(&engine, &model);
        restored += counter(&engine, "pages_restored_at_open");
        workload(&engine, &mut model, 600, 300 + cycle);
        engine.flush().unwrap();
        rewinds += counter(&engine, "double_write_rewinds");
        sim.crash(CrashMode::Random);
        std::mem::forget(engine); // a crashed process runs no destructors
    }
    let engine = TreelineEngine::open(Arc::new(sim.booted()), &config).unwrap();
    check_all(&engine, &model);
    engine.verify().unwrap();
    assert!(rewinds >= 20, "{rewinds} rewinds in 20 lifetimes");
    assert!(restored > 0, "no torn page was repaired in 20 crashes");
}

/// A reorganization takes its range's dirty records in pieces of bounded size: a young store's
/// one segment covers every key, so the first write-back of 3,000 dirty records reorganizes
/// them all; at a 2 MiB budget it plans and writes them in many pieces, marks each record clean
/// exactly once, and the pages hold the model, after a reopen too.
#[test]
fn a_reorganization_over_many_dirty_records_writes_them_in_pieces() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let options = far_apart_checkpoints("1MiB", 2 << 20);
    let engine = TreelineEngine::open(storage.clone(), &options).unwrap();
    let mut model = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(5);
    for round in 0..3_000 {
        let i = rng.gen_range(0..100_000);
        engine.put(&key(i), &value(i, round), Durability::Buffered).unwrap();
        model.insert(key(i), value(i, round));
    }
    assert_eq!(counter(&engine, "reorganizations"), 0, "everything still in the cache");
    engine.maintenance().run(MaintenanceTask::Commit).unwrap();
    assert_eq!(counter(&engine, "cache.dirty_records"), 0);
    assert_eq!(counter(&engine, "records_written_back"), model.len() as u64);
    let (reorganizations, pieces) =
        (counter(&engine, "reorganizations"), counter(&engine, "reorganization_pieces"));
    assert!(pieces >= reorganizations + 10, "{reorganizations} reorganizations in {pieces} pieces");
    check_all(&engine, &model);
    engine.verify().unwrap();
    engine.close().unwrap();
    let engine = TreelineEngine::open(storage, &options).unwrap();
    check_all(&engine, &model);
}

/// A commit's sweep walks lists of the next 1,024 dirty keys: with 3,000 keys dirty on many
/// pages (a cache that holds them all, checkpoints far apart) it takes several lists, and none
/// of their keys, nor a key between two lists, stays dirty; the pages hold the model.
#[test]
fn a_sweep_over_more_dirty_keys_than_its_lookahead_writes_them_all() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let options = far_apart_checkpoints("8MiB", 16 << 20);
    let engine = TreelineEngine::open(storage.clone(), &options).unwrap();
    let mut model = BTreeMap::new();
    // First into pages (one reorganization of the first page takes them all), then rewritten at
    // the same sizes: each page takes its own keys back, no reorganization.
    for round in 0..2 {
        for i in 0..3_000 {
            engine.put(&key(i), &value(i, 0), Durability::Buffered).unwrap();
            model.insert(key(i), value(i, 0));
        }
        assert_eq!(counter(&engine, "cache.dirty_records"), 3_000, "round {round}: none written back yet");
        engine.maintenance().run(MaintenanceTask::Commit).unwrap();
        assert_eq!(counter(&engine, "cache.dirty_records"), 0, "round {round}");
    }
    assert!(counter(&engine, "pages_written_back") > 20, "the second round wrote pages back one by one");
    engine.maintenance().set_option("record_cache_bytes", "4KiB").unwrap();
    check_all(&engine, &model);
    engine.close().unwrap();
}

#[test]
fn maintenance_tasks_write_back_reorganize_and_checkpoint() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine =
        TreelineEngine::open(storage.clone(), &config().engine_option("record_cache_bytes", "64KiB"))
            .unwrap();
    let mut model = BTreeMap::new();
    workload(&engine, &mut model, 1_500, 3);
    engine.maintenance().run(MaintenanceTask::Commit).unwrap();
    assert_eq!(counter(&engine, "cache.dirty_records"), 0);
    engine.maintenance().run(MaintenanceTask::Compact).unwrap();
    check_all(&engine, &model);
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    assert_eq!(counter(&engine, "wal_bytes_since_checkpoint"), 0);
    engine.maintenance().set_option("record_cache_bytes", "4KiB").unwrap();
    assert!(counter(&engine, "cache.bytes") <= 4 << 10);
    assert!(engine.maintenance().set_option("record_cache_bytes", "1TiB").is_err());
    check_all(&engine, &model);
}

#[test]
fn rmw_reads_through_to_pages_and_is_atomic() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = Arc::new(open(storage));
    let mut model = BTreeMap::new();
    workload(&engine, &mut model, 2_000, 5);
    let counter_key = b"counter".to_vec();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let engine = engine.clone();
            let counter_key = counter_key.clone();
            std::thread::spawn(move || {
                for i in 0..300u64 {
                    engine
                        .rmw(
                            &counter_key,
                            &mut |old| {
                                let n = old.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
                                Some((n + 1).to_le_bytes().to_vec())
                            },
                            Durability::None,
                        )
                        .unwrap();
                    engine.put(&key(i * 10), &value(i, 9), Durability::None).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(engine.get(&counter_key).unwrap(), Some(1200u64.to_le_bytes().to_vec()));
}

/// A prefix scan whose bounds lie outside the segment it starts in must still read every page
/// of that segment that can hold its keys.
#[test]
fn bounded_scans_match_the_model() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = open(storage);
    let mut model = BTreeMap::new();
    workload(&engine, &mut model, 4_000, 11);
    for (lo, hi) in [(10u64, 20u64), (0, 2_999), (1_234, 2_500), (2_990, 3_100)] {
        let range = KeyRange::from_bounds(key(lo)..key(hi));
        let got: Vec<_> =
            engine.range(range.clone(), Direction::Forward).unwrap().map(Result::unwrap).collect();
        let want: Vec<_> = model.range(key(lo)..key(hi)).map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(got, want, "{lo}..{hi}");
        let mut back: Vec<_> = engine.range(range, Direction::Reverse).unwrap().map(Result::unwrap).collect();
        back.reverse();
        assert_eq!(back, want, "{lo}..{hi} reverse");
    }
    let got: Vec<_> =
        engine.range(KeyRange::prefix(b"key-01"), Direction::Forward).unwrap().map(Result::unwrap).collect();
    assert_eq!(got.len(), model.keys().filter(|k| k.starts_with(b"key-01")).count());
}

/// On real files with `direct_io` the data file is O_DIRECT: whole-page writes at page-aligned
/// offsets (post segments several pages at once), reads bounced as needed, before and after a
/// reopen.
#[test]
fn direct_io_data_file_works_across_reorganizations_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(strata_io::FileStorage::open_dir(dir.path(), false).unwrap());
    let config = strata_core::EngineConfig { direct_io: true, ..config() };
    let engine = TreelineEngine::open(storage.clone(), &config).unwrap();
    let mut model = BTreeMap::new();
    workload(&engine, &mut model, 3_000, 21);
    assert!(counter(&engine, "reorganizations") > 0);
    check_all(&engine, &model);
    engine.close().unwrap();
    let engine = TreelineEngine::open(storage, &config).unwrap();
    check_all(&engine, &model);
    engine.verify().unwrap();
}

/// Pages freed inside the data file go back to the file system (holes) once they stayed free
/// for a checkpoint distance, and at a close: the file takes less disk than its length, and
/// every record reads back after a reopen.
#[test]
fn free_pages_inside_the_data_file_become_holes() {
    let dir = tempfile::tempdir().unwrap();
    if !strata_testkit::disk::punches_holes(dir.path()) {
        eprintln!("this file system keeps punched blocks: nothing to check");
        return;
    }
    let storage: Arc<dyn Storage> = Arc::new(strata_io::FileStorage::open_dir(dir.path(), false).unwrap());
    // Values too large for a page live in blob runs; deleting every other one frees runs in
    // the middle of the file, which nothing reuses.
    let engine = TreelineEngine::open(storage.clone(), &config()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..40u64 {
        let v = vec![i as u8; 20_000];
        engine.put(&key(i), &v, Durability::Buffered).unwrap();
        model.insert(key(i), v);
    }
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    for i in (0..40u64).step_by(2) {
        engine.delete(&key(i), Durability::Buffered).unwrap();
        model.remove(&key(i));
    }
    engine.close().unwrap();
    let data = std::fs::metadata(dir.path().join("treeline-data")).unwrap();
    let allocated = strata_testkit::disk::allocated_bytes(dir.path(), "treeline-data");
    let engine = TreelineEngine::open(storage, &config()).unwrap();
    let free_pages = counter(&engine, "free_pages");
    assert!(free_pages >= 20 * 5, "20 runs of 5 pages were deleted, {free_pages} pages are free");
    assert!(
        allocated + free_pages.saturating_sub(4) * 4096 <= data.len(),
        "{allocated} bytes allocated for a {}-byte file with {free_pages} free pages",
        data.len()
    );
    check_all(&engine, &model);
    engine.verify().unwrap();
}

/// `forecasting=false` leaves every reorganization at the goal; on (the default, as in the
/// kit-size test above) the forecast lowers it where inserts are expected.
#[test]
fn forecasting_off_never_lowers_the_goal() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = TreelineEngine::open(storage, &config().engine_option("forecasting", "false")).unwrap();
    let mut model = BTreeMap::new();
    workload(&engine, &mut model, 4_000, 1);
    assert!(counter(&engine, "reorganizations") > 0);
    assert_eq!(counter(&engine, "forecast_lowered_goals"), 0);
    check_all(&engine, &model);
}

/// A damaged checkpoint file or data page is `Error::Corruption` at open or on read, never a
/// panic or wrong data.
#[test]
fn damaged_checkpoint_and_pages_are_corruption() {
    let (storage, _) = closed_store(2_000, 4, |_| ());
    let file = storage.open("treeline-checkpoint", strata_io::OpenOptions::existing()).unwrap();
    let mut byte = [0u8];
    file.read_at(50, &mut byte).unwrap();
    file.write_at(50, &[byte[0] ^ 1]).unwrap();
    let err =
        TreelineEngine::open(storage.clone(), &config()).err().expect("a damaged checkpoint must not open");
    assert!(err.is_corruption(), "{err}");
    file.write_at(50, &byte).unwrap();
    let data = storage.open("treeline-data", strata_io::OpenOptions::existing()).unwrap();
    let pages = data.len().unwrap() / 4096;
    for page in 1..pages {
        data.write_at(page * 4096 + 200, &[0xAB; 3]).unwrap();
    }
    let engine = open(storage);
    let scan: Result<Vec<_>, _> = engine.range(KeyRange::all(), Direction::Forward).unwrap().collect();
    assert!(scan.unwrap_err().is_corruption());
    assert!(engine.verify().unwrap_err().is_corruption());
}

/// Regression (the kit's damage set, seed 14300367407470747141): a deleted data file was
/// reported as `Io` ("no such file"), and a lost checkpoint beside a data file full of pages and
/// no WAL left would have made a new, empty store. Both are now `Corruption` naming the file.
#[test]
fn a_deleted_data_file_or_a_lost_checkpoint_is_corruption_naming_it() {
    let fill = |storage: &Arc<MemStorage>| {
        let engine = open(storage.clone());
        workload(&engine, &mut BTreeMap::new(), 2_000, 9);
        engine.close().unwrap();
    };
    let names = |e: &strata_core::Error| match e {
        strata_core::Error::Corruption { file, .. } => file.clone(),
        other => panic!("expected Corruption, got {other}"),
    };
    let storage = Arc::new(MemStorage::new());
    fill(&storage);
    storage.remove("treeline-data").unwrap();
    let err = TreelineEngine::open(storage.clone(), &config()).err().expect("must not open");
    assert_eq!(names(&err), "treeline-data", "{err}");

    let storage = Arc::new(MemStorage::new());
    fill(&storage);
    for name in storage.list().unwrap() {
        if name.starts_with("treeline-wal-") || name == "treeline-checkpoint" {
            storage.remove(&name).unwrap();
        }
    }
    let err = TreelineEngine::open(storage.clone(), &config()).err().expect("must not open");
    assert_eq!(names(&err), "treeline-checkpoint", "{err}");
}

/// Automatic checkpoints write back only records dirty since before the cut before last, so a
/// record rewritten all the time stays dirty in the cache across them; its latest synced value
/// must come back after a power cut from the WAL the checkpoint kept for it.
#[test]
fn a_hot_record_skipped_by_automatic_checkpoints_survives_a_power_cut() {
    let sim = SimStorage::new(11);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let engine =
        TreelineEngine::open(storage.clone(), &config().engine_option("record_cache_bytes", "64KiB"))
            .unwrap();
    let hot = b"hot-record".to_vec();
    let mut model = BTreeMap::new();
    let mut round = 0;
    while counter(&engine, "checkpoints") < 4 {
        round += 1;
        assert!(round < 200_000, "no automatic checkpoints: {:?}", engine.stats().engine_counters);
        let cold = key(round % 3_000);
        engine.put(&cold, &value(round, round), Durability::Buffered).unwrap();
        model.insert(cold, value(round, round));
        let hot_value = format!("hot-{round}").into_bytes();
        engine.put(&hot, &hot_value, Durability::Buffered).unwrap();
        model.insert(hot.clone(), hot_value);
    }
    engine.flush().unwrap();
    sim.crash(CrashMode::Random);
    drop(engine); // its worker and close fail on the crashed handles
    let engine = open(storage);
    assert!(counter(&engine, "records_replayed_at_open") > 0);
    check_all(&engine, &model);
}

/// Write-back batches pages: many pages per WAL sync and double-write sync.
#[test]
fn write_back_batches_pages_under_one_sync() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine =
        TreelineEngine::open(storage, &config().engine_option("record_cache_bytes", "64KiB")).unwrap();
    let mut model = BTreeMap::new();
    workload(&engine, &mut model, 6_000, 5);
    engine.maintenance().run(MaintenanceTask::Commit).unwrap();
    let (pages, batches) = (counter(&engine, "pages_written_back"), counter(&engine, "write_back_batches"));
    assert!(pages >= 4 * batches, "{pages} pages in {batches} batches");
    assert!(counter(&engine, "double_write_syncs") <= batches);
    check_all(&engine, &model);
}

/// With one-page segments (page grouping off), a long forward scan still reads in doubling
/// chunks: a chunk that reaches its segment's end goes on into the next segments, and segments
/// back to back in the data file are read in one I/O, instead of one read per segment.
#[test]
fn a_long_scan_over_one_page_segments_reads_few_chunks() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let config = config().engine_option("page_grouping", "false").engine_option("record_cache_bytes", "4KiB");
    let engine = TreelineEngine::open(storage, &config).unwrap();
    let records: Vec<_> = (0..600u64).map(|i| (key(i), value(i, 0))).collect();
    engine.bulk_load(&mut records.iter().cloned().map(Ok)).unwrap();
    let segments = counter(&engine, "index.segments");
    assert!(segments >= 60, "{segments} one-page segments");
    let [chunks_before, reads_before] = ["scan_chunks", "scan_base_reads"].map(|n| counter(&engine, n));
    let scanned: Vec<_> =
        engine.range(KeyRange::all(), Direction::Forward).unwrap().map(Result::unwrap).collect();
    assert_eq!(scanned, records);
    let chunks = counter(&engine, "scan_chunks") - chunks_before;
    // 2, 4, 8, then 16 pages per chunk.
    assert!(chunks <= 3 + segments.div_ceil(16), "{chunks} chunks for {segments} segments");
    // The bulk load wrote the segments back to back: one read per chunk.
    assert_eq!(counter(&engine, "scan_base_reads") - reads_before, chunks);
}

/// A page gets one double-write image per checkpoint interval: later in-place writes of it are
/// repaired by that image plus the WAL replay. With checkpoints far apart, a few hot keys are
/// written back many times but imaged about once per page; a power cut still loses nothing.
#[test]
fn a_page_is_double_written_once_between_checkpoints() {
    let sim = SimStorage::new(21);
    let config =
        config().engine_option("checkpoint_wal_bytes", "64MiB").engine_option("record_cache_bytes", "8KiB");
    let engine = TreelineEngine::open(Arc::new(sim.booted()), &config).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..3_600u64 {
        if round == 600 {
            // From here on the segments are in a checkpoint: their in-place writes need images.
            engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
        }
        let i = round % 600;
        engine.put(&key(i), &value(i, round), Durability::Buffered).unwrap();
        model.insert(key(i), value(i, round));
    }
    engine.flush().unwrap();
    let (images, pages) = (counter(&engine, "double_write_pages"), counter(&engine, "pages_written_back"));
    assert_eq!(counter(&engine, "checkpoints"), 1, "one interval after the first checkpoint");
    assert!(images > 0 && images * 3 <= pages, "{images} images for {pages} in-place page writes");
    // Power cuts while pages imaged once are rewritten in place: each recovery restores the
    // (older) images and replays the WAL over them.
    let mut engine = engine;
    let mut restored = 0;
    for cycle in 0..8u64 {
        sim.crash(CrashMode::Random);
        drop(engine);
        engine = TreelineEngine::open(Arc::new(sim.booted()), &config).unwrap();
        restored += counter(&engine, "pages_restored_at_open");
        check_all(&engine, &model);
        for round in 0..1_200u64 {
            let i = (round * 7 + cycle) % 600;
            engine.put(&key(i), &value(i, round + cycle * 10_000), Durability::Buffered).unwrap();
            model.insert(key(i), value(i, round + cycle * 10_000));
        }
        engine.flush().unwrap();
    }
    assert!(restored > 0, "no torn page was repaired");
    engine.verify().unwrap();
}

/// `double_write=false` (devices with atomic page writes) writes no images and still recovers
/// from a clean close and a process crash that tears nothing.
#[test]
fn double_write_off_writes_no_images() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let config = config().engine_option("double_write", "false");
    let engine = TreelineEngine::open(storage.clone(), &config).unwrap();
    let mut model = BTreeMap::new();
    workload(&engine, &mut model, 4_000, 6);
    assert!(counter(&engine, "pages_written_back") > 0);
    assert_eq!(counter(&engine, "double_write_pages"), 0);
    engine.close().unwrap();
    let engine = TreelineEngine::open(storage, &config).unwrap();
    check_all(&engine, &model);
}

/// Readahead: a short forward scan reads the page holding its start and the next one, not its
/// whole segment; a full scan still returns every record once, in order.
#[test]
fn a_short_scan_reads_two_pages_not_its_whole_segment() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = open(storage);
    let mut model = BTreeMap::new();
    workload(&engine, &mut model, 6_000, 8);
    engine.maintenance().run(MaintenanceTask::Compact).unwrap();
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    assert!(counter(&engine, "multi_page_segments_written") > 0);
    let before = counter(&engine, "scan_pages_read");
    let start = key(1_500);
    let got: Vec<_> = engine
        .range(KeyRange::from_bounds(start.clone()..), Direction::Forward)
        .unwrap()
        .take(3)
        .map(Result::unwrap)
        .collect();
    let expected: Vec<_> = model.range(start..).take(3).map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got, expected);
    let read = counter(&engine, "scan_pages_read") - before;
    assert!(read <= 4, "a 3-record scan read {read} pages (2 base pages and their overflow pages at most)");
    check_all(&engine, &model);
}

/// Regression (fuzzing `treeline_checkpoint` with recomputed checksums): a segment lower bound in
/// the checkpoint's index that disagrees with the pages' fences made a scan return keys out of
/// order; it is corruption now.
#[test]
fn an_index_bound_that_disagrees_with_the_page_fences_is_corruption_in_a_scan() {
    let (storage, _) = closed_store(3_000, 12, |_| ());
    let file = storage.open("treeline-checkpoint", strata_io::OpenOptions::existing()).unwrap();
    let mut bytes = strata_io::read_all(file.as_ref()).unwrap();
    // Payload at 12; segment count at payload 40; the first segment's bound is empty (2 bytes of
    // length, then its fixed fields); the second segment's bound follows.
    let first = 12 + 44;
    let first_len = usize::from(u16::from_le_bytes([bytes[first], bytes[first + 1]]));
    assert_eq!(first_len, 0);
    let fixed = 8 + 1 + 1 + 2 + 8; // first page, page count, has-model, prefix length, production id
    let has_model = bytes[first + 2 + 9] == 1;
    let pages = usize::from(bytes[first + 2 + 8]);
    let second = first + 2 + fixed + if has_model { 24 } else { 0 } + 8 * pages;
    let len = usize::from(u16::from_le_bytes([bytes[second], bytes[second + 1]]));
    assert!(len > 0);
    bytes[second + 1 + len] -= 1; // the bound's last byte: still above the first bound, below its pages
    let body = bytes.len() - 4;
    let crc = crc32c::crc32c(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
    file.write_at(0, &bytes).unwrap();
    let engine = open(storage);
    let scan: Result<Vec<_>, _> = engine.range(KeyRange::all(), Direction::Forward).unwrap().collect();
    match scan {
        Ok(records) => panic!("a scan over a disagreeing index returned {} records", records.len()),
        Err(e) => assert!(e.is_corruption(), "{e}"),
    }
}

/// Regression (`treeline_checkpoint` fuzz target, out of memory): a checkpoint whose data end
/// page lies far past the data file made the open derive a free list of billions of pages that
/// are not there. The data file holds every page below the end (they are synced before the
/// checkpoint), so a larger end is corruption naming the checkpoint and the field's offset.
#[test]
fn a_checkpoint_claiming_pages_past_the_data_file_is_corruption() {
    use engine_treeline::checkpoint_file::{self, Checkpoint};
    let (storage, _) = closed_store(2_000, 5, |_| ());
    let mut checkpoint = Checkpoint::load(storage.as_ref()).unwrap().unwrap();
    let file_pages =
        storage.open("treeline-data", strata_io::OpenOptions::existing()).unwrap().len().unwrap() / 4096;
    assert_eq!(checkpoint.data_end_page, file_pages, "a clean close ends at the file's last page");
    checkpoint.data_end_page = 1 << 40;
    checkpoint.store(storage.as_ref()).unwrap();
    let err = TreelineEngine::open(storage.clone(), &config()).err().expect("must not open");
    match &err {
        strata_core::Error::Corruption { file, offset, .. } => {
            assert_eq!(file, checkpoint_file::FILE_NAME, "{err}");
            assert_eq!(
                *offset,
                (checkpoint_file::FORMAT.payload_offset() + checkpoint_file::DATA_END_PAGE) as u64
            );
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("past the"), "{err}");
}

/// Regression (`treeline_checkpoint` fuzz target, crash-1a0bc4c6…: one bit of a page id flipped
/// and the checksum made valid again, and a scan returned keys out of order). An index entry
/// that leads to a free page still holding records of another place or time — as a base page
/// or as an overflow page — is corruption naming the data file, for scans and point reads.
#[test]
fn an_index_entry_leading_to_a_stale_free_page_is_corruption() {
    use engine_treeline::checkpoint_file::Checkpoint;
    // Reorganizing every segment with an overflow page frees their old pages, stale from now on.
    let (storage, model) =
        closed_store(3_000, 21, |engine| engine.maintenance().run(MaintenanceTask::Compact).unwrap());
    let original = Checkpoint::load(storage.as_ref()).unwrap().unwrap();
    let used: std::collections::BTreeSet<u64> = original.index.used_pages().collect();
    let free: Vec<u64> = (1..original.data_end_page).filter(|id| !used.contains(id)).collect();
    assert!(!free.is_empty(), "the workload left no freed pages to point at");
    let one_page: Vec<Vec<u8>> =
        original.index.iter().filter(|(_, e)| e.pages == 1).map(|(k, _)| k.clone()).take(3).collect();
    assert!(!one_page.is_empty());
    let mut checked = 0;
    for (lower, stale) in one_page.iter().flat_map(|l| free.iter().take(4).map(move |&f| (l.clone(), f))) {
        for as_overflow in [false, true] {
            let mut checkpoint = original.clone();
            let mut entry = checkpoint.index.to_mut().remove(&lower).unwrap();
            if as_overflow {
                entry.overflow[0] = stale;
            } else {
                entry.first_page = stale;
            }
            checkpoint.index.to_mut().insert(lower.clone(), entry);
            checkpoint.store(storage.as_ref()).unwrap();
            let Ok(engine) = TreelineEngine::open(storage.clone(), &config()) else { continue };
            checked += 1;
            let scan: Result<Vec<_>, _> =
                engine.range(KeyRange::all(), Direction::Forward).unwrap().collect();
            match scan {
                Ok(records) => {
                    let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                    assert_eq!(
                        records, expected,
                        "stale page {stale} at {lower:?} (overflow: {as_overflow})"
                    );
                }
                Err(e) => assert!(e.is_corruption(), "{e}"),
            }
            for (k, v) in &model {
                match engine.get(k) {
                    Ok(got) => assert_eq!(got.as_ref(), Some(v), "stale page {stale}"),
                    Err(e) => assert!(e.is_corruption(), "{e}"),
                }
            }
        }
    }
    assert!(checked > 0, "no damaged checkpoint opened");
    original.store(storage.as_ref()).unwrap();
}

/// `verify` checks what a read or scan checks of every page the index references, not only the
/// checksums: an index entry leading to a stale free page (checksum-valid, the checkpoint
/// resealed) was reported as a clean store.
#[test]
fn verify_reports_an_index_entry_leading_to_a_stale_free_page() {
    use engine_treeline::checkpoint_file::Checkpoint;
    let (storage, _) =
        closed_store(3_000, 21, |engine| engine.maintenance().run(MaintenanceTask::Compact).unwrap());
    let original = Checkpoint::load(storage.as_ref()).unwrap().unwrap();
    let used: std::collections::BTreeSet<u64> = original.index.used_pages().collect();
    let stale = (1..original.data_end_page).find(|id| !used.contains(id)).expect("a freed page");
    let mut checkpoint = original.clone();
    let lower = checkpoint.index.iter().find(|(_, e)| e.pages == 1).map(|(k, _)| k.clone()).unwrap();
    let mut entry = checkpoint.index.to_mut().remove(&lower).unwrap();
    entry.first_page = stale;
    checkpoint.index.to_mut().insert(lower, entry);
    checkpoint.store(storage.as_ref()).unwrap();
    let engine = TreelineEngine::open(storage, &config()).unwrap();
    let verified = engine.verify();
    assert!(
        matches!(&verified, Err(strata_core::Error::Corruption { file, .. }) if file == "treeline-data"),
        "{verified:?}"
    );
}

/// Found by review: the segment model agrees with the page fences only for keys carrying the
/// segment's common prefix. A scan from a key without it ("key-/zzzz" with records "key-0…")
/// was routed to a later page of the first segment and silently skipped the records before it
/// (8 of 1,579 here), forward and reverse alike.
#[test]
fn a_scan_from_a_key_without_the_segments_prefix_skips_nothing() {
    let (storage, model) =
        closed_store(3_000, 23, |engine| engine.maintenance().run(MaintenanceTask::Compact).unwrap());
    let engine = open(storage);
    let starts: [&[u8]; 5] = [b"aaaaazzzz", b"key-/zzzz", b"key-/\xff\xff", b"key-00001z", b"key-0"];
    for start in starts {
        let forward: Vec<_> = engine
            .range(KeyRange::from_bounds(start.to_vec()..), Direction::Forward)
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect();
        let expected: Vec<_> = model.range(start.to_vec()..).map(|(k, _)| k.clone()).collect();
        assert_eq!(forward.len(), expected.len(), "forward from {:?}", String::from_utf8_lossy(start));
        assert_eq!(forward, expected);
        let reverse: Vec<_> = engine
            .range(KeyRange::from_bounds(start.to_vec()..), Direction::Reverse)
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect();
        let expected_reverse: Vec<_> = expected.iter().rev().cloned().collect();
        assert_eq!(reverse, expected_reverse, "reverse from {:?}", String::from_utf8_lossy(start));
    }
}

/// An index larger than the budget: the record cache keeps its floor, a quarter of the budget
/// (with the cache shrunk to 4 KiB, every read of such a store went to its pages), and stats say
/// by how much the engine is over its budget, in a notice from the first `stats()` after open.
#[test]
fn an_index_too_large_for_the_budget_leaves_the_cache_its_floor_and_says_so() {
    let config = strata_core::EngineConfig { memory_budget_bytes: 256 << 10, ..Default::default() }
        .with_engine_options([("goal", "1"), ("page_grouping", "false"), ("forecasting", "false")]);
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = TreelineEngine::open(storage.clone(), &config).unwrap();
    assert_eq!(engine.stats().notices, Vec::<String>::new(), "an empty index fits");
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..5_000).map(|i| (key(i), b"v".to_vec())).collect();
    engine.bulk_load(&mut records.into_iter().map(Ok)).unwrap();
    assert_eq!(counter(&engine, "index.segments"), 5_000);
    assert!(counter(&engine, "index.bytes") > 256 << 10, "{:?}", engine.stats().engine_counters);
    assert_eq!(counter(&engine, "cache.capacity_bytes"), 64 << 10);
    assert!(counter(&engine, "memory.over_budget_bytes") > 0);
    assert_eq!(engine.get(&key(4_321)).unwrap().as_deref(), Some(&b"v"[..]));
    engine.close().unwrap();
    let engine = TreelineEngine::open(storage, &config).unwrap();
    let notices = engine.stats().notices;
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains("memory budget (0.2 MiB) cannot hold the index"), "{}", notices[0]);
    assert!(notices[0].contains("for 5000 segments"), "{}", notices[0]);
}

/// Regression guard for the sharded record cache: a scan merges every shard's records, so
/// without the batch gate it could take one key of a two-key batch before the apply and the
/// other after it.
#[test]
fn a_scan_never_sees_half_of_a_batch_across_cache_shards() {
    let config =
        config().engine_option("record_cache_bytes", "128KiB").engine_option("record_cache_shards", "16");
    let engine = Arc::new(TreelineEngine::open(Arc::new(MemStorage::new()), &config).unwrap());
    let keys: Vec<Vec<u8>> = (0..8u8).map(|i| vec![b'k', i]).collect();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (engine, keys, stop) = (engine.clone(), keys.clone(), stop.clone());
        std::thread::spawn(move || {
            for n in 0u64.. {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let mut batch = strata_core::WriteBatch::new();
                for k in &keys {
                    batch.put(k.clone(), n.to_le_bytes().to_vec());
                }
                engine.write(batch, Durability::Buffered).unwrap();
            }
        })
    };
    let mut scans_during_writes = 0;
    while scans_during_writes < 20_000 {
        let values: Vec<Vec<u8>> =
            engine.range(KeyRange::all(), Direction::Forward).unwrap().map(|r| r.unwrap().1).collect();
        assert!(values.windows(2).all(|w| w[0] == w[1]), "a scan saw half of a batch: {values:?}");
        scans_during_writes += usize::from(values.len() == keys.len());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
}
