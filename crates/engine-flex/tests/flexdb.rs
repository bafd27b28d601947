//! FlexDB behaviour beyond the shared kit: commits into the table file, interval splits and
//! merges, empty values, recovery by sampling, and readers not blocked for a whole commit.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine_flex::{FlexEngine, FlexOptions, TableFileKind};
use strata_core::{Direction, Durability, Engine, EngineConfig, Error, KeyRange};
use strata_io::{HookStorage, MemStorage, SimStorage, Storage};

fn small_options() -> FlexOptions {
    FlexOptions {
        memtable_bytes: Some(16 << 10),
        cache_bytes: Some(32 << 10),
        max_interval_bytes: 4 << 10,
        max_interval_records: 8,
        rebuild_interval_bytes: 2 << 10,
        commit_step_entries: 32,
        flexfile: engine_flex::flexfile::FlexFileOptions::for_tests(),
        ..FlexOptions::default()
    }
}

fn open(storage: &Arc<dyn Storage>, options: FlexOptions) -> FlexEngine {
    FlexEngine::open_with(storage.clone(), &EngineConfig::default(), options).unwrap()
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:08}", (i * 7919) % 100_000).into_bytes()
}

fn check_all(engine: &FlexEngine, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(engine.get(k).unwrap().as_ref(), Some(v), "key {}", String::from_utf8_lossy(k));
    }
    let forward: Vec<_> =
        engine.range(KeyRange::all(), Direction::Forward).unwrap().map(Result::unwrap).collect();
    assert_eq!(forward, model.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>());
    let reverse: Vec<_> =
        engine.range(KeyRange::all(), Direction::Reverse).unwrap().map(Result::unwrap).collect();
    assert_eq!(reverse.len(), model.len());
    assert!(reverse.iter().rev().eq(forward.iter()));
    let mid = KeyRange::from_bounds(b"key00030000".as_slice()..b"key00060000".as_slice());
    let got: Vec<_> = engine.range(mid.clone(), Direction::Reverse).unwrap().map(Result::unwrap).collect();
    let want: Vec<_> =
        model.range::<[u8], _>(mid.as_bounds()).rev().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got, want);
}

#[test]
fn commits_split_intervals_and_survive_reopen_with_empty_values_and_deletes() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = open(&storage, small_options());
    let mut model = BTreeMap::new();
    for i in 0..3000u64 {
        let value = if i % 5 == 0 { Vec::new() } else { vec![(i % 251) as u8; (i % 40) as usize + 1] };
        engine.put(&key(i), &value, Durability::None).unwrap();
        model.insert(key(i), value);
        if i % 3 == 0 {
            engine.delete(&key(i / 2), Durability::None).unwrap();
            model.remove(&key(i / 2));
        }
    }
    let stats = engine.stats();
    assert!(stats.counter("flexdb.commits").unwrap() >= 3, "{stats:?}");
    assert!(stats.counter("flexdb.intervals").unwrap() > 100, "{stats:?}");
    check_all(&engine, &model);
    engine.verify().unwrap();
    engine.close().unwrap();
    let engine = open(&storage, small_options());
    assert_eq!(
        engine.stats().counter("flexdb.records_replayed_at_open"),
        Some(0),
        "close committed everything"
    );
    check_all(&engine, &model);
    // Deleting everything merges intervals away down to the single first one.
    for k in model.keys() {
        engine.delete(k, Durability::None).unwrap();
    }
    engine.commit().unwrap();
    assert_eq!(engine.stats().counter("flexdb.intervals"), Some(1));
    check_all(&engine, &BTreeMap::new());
    engine.verify().unwrap();
    assert_eq!(engine.stats().counter("flexdb.table_file_bytes"), Some(0));
}

/// §5.4: reopening samples one extent per `rebuild_interval_bytes`, it does not read the table.
#[test]
fn reopen_rebuilds_the_index_from_samples_not_the_whole_file() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let options =
        FlexOptions { rebuild_interval_bytes: 64 << 10, memtable_bytes: Some(1 << 20), ..small_options() };
    let engine = open(&storage, options.clone());
    let mut model = BTreeMap::new();
    for i in 0..20_000u64 {
        let value = vec![b'v'; 100];
        engine.put(&key(i), &value, Durability::None).unwrap();
        model.insert(key(i), value);
    }
    engine.close().unwrap();
    let engine = open(&storage, options);
    let stats = engine.stats();
    let table_bytes = stats.counter("flexdb.table_file_bytes").unwrap();
    let sampled = stats.counter("flexdb.rebuild_bytes_read").unwrap();
    assert!(table_bytes > 2 << 20, "{table_bytes}");
    assert!(sampled * 100 < table_bytes, "sampled {sampled} of {table_bytes} bytes");
    // Intervals start large after a rebuild; commits split them as they touch them.
    check_all(&engine, &model);
    engine.verify().unwrap();
}

/// Beyond the paper (§6.3): the committer holds the table lock for bounded steps, so a reader's
/// worst get latency during a large commit stays far below the commit's duration: under a third
/// of it. Measured on the 2-core machine: 11–19% with steps of 64 entries; 40–44% with the whole
/// commit as one step (the canary: `commit_step_entries: usize::MAX`), the rest of the commit
/// (WAL sync, table sync, commit record) not holding the lock. Up to three attempts: on a loaded
/// machine one descheduling of the reader can exceed the bound.
#[test]
fn readers_are_not_blocked_for_a_whole_commit() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let options = FlexOptions { memtable_bytes: Some(64 << 20), commit_step_entries: 64, ..small_options() };
    let engine = Arc::new(open(&storage, options));
    for i in 0..20_000u64 {
        engine.put(&key(i), b"committed-before", Durability::None).unwrap();
    }
    engine.commit().unwrap();
    let mut attempts = Vec::new();
    for attempt in 0..3u8 {
        for i in 20_000..100_000u64 {
            engine.put(&key(i), &[attempt; 17], Durability::None).unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (engine, stop) = (engine.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut worst, mut reads) = (Duration::ZERO, 0u64);
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    assert!(engine.get(&key(i % 20_000)).unwrap().is_some());
                    worst = worst.max(started.elapsed());
                    reads += 1;
                    i += 13;
                }
                (worst, reads)
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        let started = Instant::now();
        engine.commit().unwrap();
        let commit_time = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        let (worst, reads) = reader.join().unwrap();
        eprintln!("commit of 80000 entries took {commit_time:?}; reader: {reads} gets, worst {worst:?}");
        assert!(commit_time > Duration::from_millis(20), "commit too quick to measure: {commit_time:?}");
        if worst * 3 < commit_time {
            return;
        }
        attempts.push((worst, commit_time));
    }
    panic!("a reader waited about as long as a whole commit (worst wait, commit): {attempts:?}");
}

/// Power loss in the middle of commits, on the simulated disk: recovery = durable WAL replayed
/// over whatever the table file holds.
#[test]
fn sync_writes_survive_power_loss_around_commits() {
    for seed in 0..4u64 {
        let sim = SimStorage::new(seed);
        // Each open gets the storage of one process lifetime: a committer of the crashed engine
        // still running can no longer touch the disk.
        let boot = || -> Arc<dyn Storage> { Arc::new(sim.booted()) };
        let mut model = BTreeMap::new();
        let mut engine = open(&boot(), small_options());
        for round in 0..6u64 {
            for i in 0..400u64 {
                let k = key(round * 131 + i);
                let v = format!("r{round}i{i}").into_bytes();
                engine.put(&k, &v, Durability::Sync).unwrap();
                model.insert(k, v);
            }
            sim.crash(strata_io::CrashMode::Random);
            drop(engine);
            engine = open(&boot(), small_options());
            check_all(&engine, &model);
        }
        engine.verify().unwrap();
    }
}

/// Regression (kit seed 1140967087395826500, `naive::fault_injection`, FailSync, timing
/// dependent): `close` joined a background commit that had just failed an fsync and poisoned the
/// engine, then skipped its own commit because of the poison and returned `Ok`: the failure never
/// surfaced. `close` now reports the poison. This checks every engine call after a committer
/// failure, `close` included, reports it.
#[test]
fn close_reports_a_sync_failure_of_the_background_committer() {
    for table_file in [TableFileKind::Naive, TableFileKind::FlexFile] {
        // Which of the committer's syncs fails: the WAL's, the table file's, the commit record's.
        for after_syncs in 0..4 {
            let sim = SimStorage::new(after_syncs);
            let storage: Arc<dyn Storage> = Arc::new(sim.clone());
            let engine = open(&storage, FlexOptions { table_file, ..small_options() });
            sim.inject(strata_io::Fault::FailSync { after_syncs });
            // Durability::None: only the committer syncs. Write until its failure shows.
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut i = 0u64;
            while engine.put(&key(i), &[7u8; 100], Durability::None).is_ok() {
                assert!(Instant::now() < deadline, "a failed sync never poisoned the engine");
                i += 1;
            }
            assert!(matches!(engine.get(&key(0)), Err(Error::Poisoned(_))));
            assert!(
                engine.close().is_err(),
                "close hid the committer's failure ({table_file:?}, {after_syncs})"
            );
        }
    }
}

/// Regression (found by review): a panic in the background committer (here from the storage,
/// in the middle of a commit's table writes) ended its thread without poisoning the engine:
/// writes went on being acknowledged with nobody to commit them, and `close` committed over the
/// half-applied table. The kit's worker now hands the panic to the engine's poison.
#[test]
fn a_panic_in_the_background_committer_poisons_the_engine() {
    for table_file in [TableFileKind::Naive, TableFileKind::FlexFile] {
        let armed = Arc::new(AtomicBool::new(false));
        let trigger = armed.clone();
        let inner: Arc<dyn Storage> = Arc::new(MemStorage::new());
        let storage: Arc<dyn Storage> = Arc::new(
            HookStorage::new(inner.clone(), Arc::new(|_| Ok(()))).with_writes(Arc::new(move |name, _, _| {
                // File names carry the storage's prefix ("mem:").
                let table = name.contains("flexdb-table") || name.contains("flexdb-naive");
                assert!(!(trigger.load(Ordering::SeqCst) && table), "injected panic");
                Ok(())
            })),
        );
        let engine = open(&storage, FlexOptions { table_file, ..small_options() });
        armed.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut i = 0u64;
        while engine.put(&key(i), &[7u8; 100], Durability::None).is_ok() {
            assert!(
                Instant::now() < deadline,
                "{table_file:?}: the committer's panic never poisoned the engine"
            );
            i += 1;
        }
        assert!(matches!(engine.get(&key(0)), Err(Error::Poisoned(m)) if m.contains("flexdb-commit")));
        assert!(engine.close().is_err(), "{table_file:?}: close committed over the panic");
        drop(engine);
        armed.store(false, Ordering::SeqCst);
        let engine = open(&inner, FlexOptions { table_file, ..small_options() });
        engine.verify().unwrap();
    }
}

/// With the default split, what the engine holds (MemTables, interval cache, sparse index,
/// FlexTree and buffers) stays within the memory budget as the sparse index grows: the interval
/// cache gives way to the index after each commit.
#[test]
fn memory_stays_within_the_budget_as_the_sparse_index_grows() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let budget_bytes = 4 << 20;
    let config = EngineConfig { memory_budget_bytes: budget_bytes, ..EngineConfig::default() };
    let options = FlexOptions {
        memtable_bytes: None,
        cache_bytes: None,
        flexfile: engine_flex::flexfile::FlexFileOptions {
            max_data_bytes: 64 << 20,
            ..engine_flex::flexfile::FlexFileOptions::for_tests()
        },
        ..small_options()
    };
    let engine = FlexEngine::open_with(storage, &config, options).unwrap();
    let counter = |name: &str| engine.stats().counter(name).unwrap_or_else(|| panic!("no counter {name}"));
    let empty_cache_capacity = counter("memory.cache_capacity_bytes");
    let value = vec![7u8; 100];
    let key = |i: u64| format!("k{:010}", i.wrapping_mul(0x9e37_79b9) % 1_000_000_007).into_bytes();
    const RECORDS: u64 = 60_000; // ~7 MiB of records: larger than the budget
    for i in 0..RECORDS {
        engine.put(&key(i), &value, Durability::None).unwrap();
    }
    engine.commit().unwrap();
    for i in 0..RECORDS {
        assert_eq!(engine.get(&key(i)).unwrap().as_ref(), Some(&value));
    }
    let stats = engine.stats();
    let index_bytes = counter("memory.sparse_index_bytes");
    let capacity = counter("memory.cache_capacity_bytes");
    assert!(index_bytes > 0 && counter("memory.table_file_bytes") > 0);
    assert!(capacity < empty_cache_capacity - index_bytes / 2, "{:?}", stats.engine_counters);
    assert!(counter("memory.cache_bytes") <= capacity);
    assert!(
        stats.memory_bytes <= budget_bytes,
        "{} > {budget_bytes}: {:?}",
        stats.memory_bytes,
        stats.engine_counters
    );
    assert_eq!(counter("memory.over_budget_bytes"), 0);
    // The table file's own counters come along.
    assert!(counter("flexfile.log_commits") > 0 && counter("flexfile.write_locked_micros") > 0);
    assert!(counter("flexfile.write_locked_max_micros") <= counter("flexfile.write_locked_micros"));
}

/// The MemTables reserve budget only for what they hold (plus a step): a read-mostly store's
/// interval cache gets the rest, writes take it back step by step, a commit returns it, and the
/// parts stay within the budget throughout.
#[test]
fn the_interval_cache_lends_the_memtables_unused_share_and_writes_take_it_back() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let budget_bytes: u64 = 4 << 20;
    let config = EngineConfig { memory_budget_bytes: budget_bytes, ..EngineConfig::default() };
    let options = FlexOptions { memtable_bytes: None, cache_bytes: None, ..small_options() };
    let engine = FlexEngine::open_with(storage, &config, options).unwrap();
    let counter = |name: &str| engine.stats().counter(name).unwrap_or_else(|| panic!("no counter {name}"));
    let limit = counter("memory.memtable_limit_bytes");
    let step = limit / 4;
    let within_budget = |when: &str| {
        let stats = engine.stats();
        let (in_use, reserved) =
            (counter("memory.memtables_bytes"), counter("memory.memtables_reserved_bytes"));
        assert!(in_use <= reserved, "{when}: MemTables {in_use} > reserved {reserved}");
        assert!(stats.memory_bytes <= budget_bytes, "{when}: {:?}", stats.engine_counters);
    };
    let value = vec![3u8; 100];
    let mut i = 0u64;
    let mut write_until = |target_bytes: u64| {
        while counter("memory.memtables_bytes") < target_bytes {
            engine.put(&key(i), &value, Durability::None).unwrap();
            i += 1;
        }
    };
    write_until(limit / 2);
    engine.commit().unwrap();
    within_budget("after a commit");
    let idle_capacity = counter("memory.cache_capacity_bytes");
    assert_eq!(counter("memory.memtables_reserved_bytes"), counter("memory.memtables_bytes") + step);
    assert!(idle_capacity > budget_bytes - 2 * limit, "the unused MemTable share goes to the cache");

    write_until(limit / 2 + step / 2);
    within_budget("MemTable half full");
    let busy_capacity = counter("memory.cache_capacity_bytes");
    assert!(busy_capacity + limit / 2 - step <= idle_capacity, "{busy_capacity} vs {idle_capacity}");

    engine.commit().unwrap();
    within_budget("after the second commit");
    assert!(counter("memory.cache_capacity_bytes") > busy_capacity, "a commit gives the memory back");
}

fn scan_key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// A fresh engine holding the even keys below `end` (`scan_key`) with `value`, in its MemTable,
/// and the model of it.
fn with_even_keys(
    storage: &Arc<dyn Storage>,
    options: &FlexOptions,
    end: u32,
    value: &[u8],
) -> (FlexEngine, BTreeMap<Vec<u8>, Vec<u8>>) {
    let engine = open(storage, options.clone());
    let mut model = BTreeMap::new();
    for i in (0..end).step_by(2) {
        engine.put(&scan_key(i), value, Durability::None).unwrap();
        model.insert(scan_key(i), value.to_vec());
    }
    (engine, model)
}

/// Windows that skip their MemTable reads (what the last read noted ahead says the MemTables
/// hold nothing before) must not skip a window holding a MemTable entry: sparse MemTable puts and
/// deletes among table keys, and a MemTable that changes between windows, show in scans of both
/// directions and from several starts.
#[test]
fn scans_see_sparse_memtable_entries_among_table_keys() {
    let k = scan_key;
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let options = FlexOptions { memtable_bytes: Some(64 << 20), ..small_options() };
    let (mut engine, mut model) = with_even_keys(&storage, &options, 3000, b"table");
    engine.close().unwrap(); // the table holds the even keys; windows of ~8 records
    engine = open(&storage, options);
    for i in [301, 901, 1501, 2999] {
        engine.put(&k(i), b"mem", Durability::None).unwrap();
        model.insert(k(i), b"mem".to_vec());
    }
    for i in [1200, 2400] {
        engine.delete(&k(i), Durability::None).unwrap();
        model.remove(&k(i));
    }
    for (start, end) in [(0, 3000), (300, 2500), (902, 1502), (1000, 1100)] {
        for direction in [Direction::Forward, Direction::Reverse] {
            let range = KeyRange::from_bounds(k(start)..k(end));
            let got: Vec<_> = engine.range(range, direction).unwrap().map(Result::unwrap).collect();
            let mut want: Vec<_> =
                model.range(k(start)..k(end)).map(|(a, b)| (a.clone(), b.clone())).collect();
            if direction == Direction::Reverse {
                want.reverse();
            }
            assert!(got == want, "{start}..{end} {direction:?}");
        }
    }
    // A write between two windows, past the scan's first window (reopen rebuilt intervals of
    // ~2 KiB, ~100 records, so it ends near k01800) but before the MemTable entry that window
    // noted ahead (the tombstone of k02400): only the MemTables' version tells the scan to look.
    let mut scan = engine.range(KeyRange::from_bounds(k(1600)..), Direction::Forward).unwrap();
    let first: Vec<_> = scan.by_ref().take(5).map(Result::unwrap).collect();
    engine.put(&k(2201), b"late", Durability::None).unwrap();
    model.insert(k(2201), b"late".to_vec());
    let rest: Vec<_> = scan.map(Result::unwrap).collect();
    let want: Vec<_> = model.range(k(1600)..).map(|(a, b)| (a.clone(), b.clone())).collect();
    assert_eq!(first, want[..5]);
    assert!(rest == want[5..], "the scan missed the write between windows");
}

/// A write and a delete made while a scan runs, a few windows ahead of it (the window it is in
/// was read before them and keeps what it read), show in what it returns; in both directions,
/// with the keys in the table file and with them in the MemTable. Guards any reuse of what a scan
/// read for an earlier window (an experiment that reused MemTable entries without checking for
/// writes fails it).
#[test]
fn a_running_scan_sees_writes_made_ahead_of_it() {
    let k = scan_key;
    for in_table in [true, false] {
        for direction in [Direction::Forward, Direction::Reverse] {
            let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
            // Large MemTables: no commit runs while the scan does.
            let options = FlexOptions { memtable_bytes: Some(64 << 20), ..small_options() };
            let (mut engine, mut model) = with_even_keys(&storage, &options, 2000, b"old");
            if in_table {
                engine.close().unwrap(); // commits the MemTable
                engine = open(&storage, options);
            }
            let forward = direction == Direction::Forward;
            let mut scan = engine.range(KeyRange::all(), direction).unwrap();
            let first: Vec<_> = scan.by_ref().take(10).map(Result::unwrap).collect();
            // Past the window the scan is in (reopen rebuilds intervals of ~2 KiB, ~120 records;
            // MemTable-only windows hold 64 entries), so it must read them after the writes.
            let (new_key, deleted) = if forward { (k(801), k(840)) } else { (k(1199), k(1160)) };
            engine.put(&new_key, b"new", Durability::None).unwrap();
            engine.delete(&deleted, Durability::None).unwrap();
            model.insert(new_key, b"new".to_vec());
            model.remove(&deleted);
            let rest: Vec<_> = scan.map(Result::unwrap).collect();
            let mut want: Vec<_> = model.into_iter().collect();
            if !forward {
                want.reverse();
            }
            assert_eq!(first, want[..10], "in_table {in_table}, {direction:?}");
            assert!(rest == want[10..], "in_table {in_table}, {direction:?}: the scan missed the writes");
        }
    }
}

fn engine_counter(engine: &FlexEngine, name: &str) -> u64 {
    let stats = engine.stats();
    stats.engine_counters.iter().find(|(n, _)| n == name).map_or_else(|| panic!("no counter {name}"), |c| c.1)
}

/// Recovery samples the table file every `rebuild_interval_bytes` (here 4× the interval limit),
/// so the rebuilt intervals are over the limits; the first reads split them in the index (§5.4)
/// and cache the pieces, instead of decoding and caching all of each one on every miss. Gets and
/// scans (both directions) stay right through the splits, `verify` passes, and a later commit
/// and reopen work on the split index.
#[test]
fn intervals_rebuilt_over_the_limits_are_split_on_first_access() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    // A cache that holds the whole table: after the first pass nothing is loaded again.
    let sparse =
        FlexOptions { rebuild_interval_bytes: 16 << 10, cache_bytes: Some(4 << 20), ..small_options() };
    let mut engine = open(&storage, small_options());
    let mut model = BTreeMap::new();
    for i in 0..3000 {
        engine.put(&key(i), format!("value-{i:06}").as_bytes(), Durability::None).unwrap();
        model.insert(key(i), format!("value-{i:06}").into_bytes());
    }
    engine.close().unwrap();
    engine = open(&storage, sparse.clone());
    let rebuilt = engine_counter(&engine, "flexdb.intervals");
    assert!(rebuilt < 3000 / 8 / 2, "sampling made {rebuilt} intervals, expected far fewer than 375");
    // Gets in key order, one thread: each get splits the interval it loaded before returning and
    // caches the pieces, so every sampled interval is read once and no piece is read again.
    let loads = engine_counter(&engine, "flexdb.interval_loads");
    for (k, v) in &model {
        assert_eq!(engine.get(k).unwrap().as_ref(), Some(v));
    }
    let loaded = engine_counter(&engine, "flexdb.interval_loads") - loads;
    assert_eq!(loaded, rebuilt, "split pieces were read again");
    assert_eq!(engine_counter(&engine, "flexdb.intervals_split_on_access"), rebuilt);
    engine.close().unwrap();
    // The rest with a small cache: splits of intervals evicted meanwhile, pieces evicting pieces.
    let sparse = FlexOptions { rebuild_interval_bytes: 16 << 10, ..small_options() };
    engine = open(&storage, sparse.clone());
    // A scan in each direction first (splits under running scans), then every key by get.
    let mut forward = engine.range(KeyRange::all(), Direction::Forward).unwrap();
    let mut reverse = engine.range(KeyRange::all(), Direction::Reverse).unwrap();
    let (mut seen_forward, mut seen_reverse) = (Vec::new(), Vec::new());
    loop {
        let (f, r) = (forward.next(), reverse.next());
        if f.is_none() && r.is_none() {
            break;
        }
        seen_forward.extend(f.map(Result::unwrap));
        seen_reverse.extend(r.map(Result::unwrap));
    }
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(seen_forward == want, "forward scan across splits");
    seen_reverse.reverse();
    assert!(seen_reverse == want, "reverse scan across splits");
    check_all(&engine, &model);
    let split = engine_counter(&engine, "flexdb.intervals_split_on_access");
    let intervals = engine_counter(&engine, "flexdb.intervals");
    assert!(split >= rebuilt / 2, "only {split} of {rebuilt} intervals split");
    assert!(intervals >= 3000 / 8, "{intervals} intervals for 3000 records of at most 8 each");
    engine.verify().unwrap();
    for i in (0..3000).step_by(3) {
        engine.put(&key(i), b"changed", Durability::None).unwrap();
        model.insert(key(i), b"changed".to_vec());
    }
    engine.close().unwrap();
    let engine = open(&storage, sparse);
    check_all(&engine, &model);
    engine.verify().unwrap();
}

/// A commit that grows a cached interval past the record limit splits it and keeps the pieces
/// cached: reading every key again loads nothing from the table file.
#[test]
fn a_commit_that_splits_a_cached_interval_keeps_the_pieces_cached() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = open(&storage, FlexOptions { cache_bytes: Some(4 << 20), ..small_options() });
    let k = |i: u32| format!("k{i:05}").into_bytes();
    for i in 0..8 {
        engine.put(&k(i * 10), b"first", Durability::None).unwrap();
    }
    engine.commit().unwrap();
    assert_eq!(engine_counter(&engine, "flexdb.intervals"), 1);
    for i in 0..8 {
        assert_eq!(engine.get(&k(i * 10)).unwrap().as_deref(), Some(&b"first"[..]));
    }
    let loads = engine_counter(&engine, "flexdb.interval_loads");
    for i in 0..8 {
        engine.put(&k(i * 10 + 5), b"second", Durability::None).unwrap();
    }
    engine.commit().unwrap();
    assert!(engine_counter(&engine, "flexdb.intervals") >= 2, "16 records split into pieces of at most 8");
    for i in 0..8 {
        assert_eq!(engine.get(&k(i * 10)).unwrap().as_deref(), Some(&b"first"[..]));
        assert_eq!(engine.get(&k(i * 10 + 5)).unwrap().as_deref(), Some(&b"second"[..]));
    }
    assert_eq!(engine_counter(&engine, "flexdb.interval_loads"), loads, "the pieces were read again");
}
