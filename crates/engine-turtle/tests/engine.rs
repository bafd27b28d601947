//! The engine's own paths beyond the kit: the tree grows through checkpoints and reopens from
//! them with deletes intact, χ changes at run time, an open replays only the WAL since the last
//! checkpoint, and reclaimed pages are reused so the store stays near its live data.

use std::sync::Arc;

use engine_turtle::TurtleEngine;
use strata_core::{Direction, Durability, Engine, EngineConfig, KeyRange, MaintenanceTask};
use strata_io::{MemStorage, Storage};

mod common;
use common::{config, counter, key, value, wait_until};

#[test]
fn the_tree_grows_through_checkpoints_and_reopens_with_deletes_intact() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = TurtleEngine::open(storage.clone(), &config("64KiB")).unwrap();
    for i in 0..6_000 {
        engine.put(&key(i), &value(i, 0), Durability::None).unwrap();
    }
    for i in (0..6_000).step_by(3) {
        engine.delete(&key(i), Durability::None).unwrap();
    }
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    assert!(counter(&engine, "checkpoints") >= 5, "{:?}", engine.stats().engine_counters);
    assert!(counter(&engine, "tree_height") >= 3, "{:?}", engine.stats().engine_counters);
    engine.close().unwrap();
    drop(engine);
    let engine = TurtleEngine::open(storage, &config("64KiB")).unwrap();
    assert_eq!(counter(&engine, "records_replayed_at_open"), 0, "the checkpoint holds everything");
    for i in 0..6_000 {
        let expected = (i % 3 != 0).then(|| value(i, 0));
        assert_eq!(engine.get(&key(i)).unwrap(), expected, "key {i}");
    }
    let scanned: Vec<_> =
        engine.range(KeyRange::all(), Direction::Reverse).unwrap().map(Result::unwrap).collect();
    assert_eq!(scanned.len(), 4_000);
    assert!(scanned.windows(2).all(|w| w[0].0 > w[1].0));
    assert!(engine.verify().unwrap().records_checked > 0);
}

#[test]
fn the_checkpoint_distance_changes_at_run_time() {
    let engine = TurtleEngine::open(Arc::new(MemStorage::new()), &config("4MiB")).unwrap();
    for i in 0..2_000 {
        engine.put(&key(i), &value(i, 0), Durability::None).unwrap();
    }
    assert_eq!(counter(&engine, "tables_finalized"), 0, "2,000 small records stay under 4 MiB");
    engine.maintenance().set_option("checkpoint_distance", "64KiB").unwrap();
    for i in 0..2_000 {
        engine.put(&key(i), &value(i, 1), Durability::None).unwrap();
    }
    assert!(counter(&engine, "tables_finalized") >= 1);
    assert_eq!(counter(&engine, "checkpoint_distance_bytes"), 64 << 10);
    assert!(engine.maintenance().set_option("checkpoint_distance", "1KiB").is_err());
    assert!(engine.maintenance().set_option("leaf_bytes", "1MiB").is_err());
}

/// `auto` χ: a read phase shrinks it and gives the block cache the room the active table no
/// longer grows into (the table stays until the next write); a write phase grows it again; a
/// fixed value stops it moving.
#[test]
fn auto_distance_follows_the_write_share() {
    let engine = TurtleEngine::open(Arc::new(MemStorage::new()), &config("auto")).unwrap();
    assert_eq!(counter(&engine, "checkpoint_distance_auto"), 1);
    assert_eq!(counter(&engine, "checkpoint_distance_bytes"), 1 << 20, "a quarter of the 4 MiB budget");
    for i in 0..6_000 {
        engine.put(&key(i), &value(i, 0), Durability::None).unwrap();
    }
    assert_eq!(counter(&engine, "checkpoint_distance_changes"), 0, "a load keeps the largest");
    wait_until(|| counter(&engine, "finalized_tables") == 0);
    let finalized = counter(&engine, "tables_finalized");
    for i in 0..30_000 {
        engine.get(&key(i % 6_000)).unwrap();
    }
    assert!(
        counter(&engine, "checkpoint_distance_bytes") < 128 << 10,
        "{:?}",
        engine.stats().engine_counters
    );
    assert!(counter(&engine, "write_share_permille") < 50);
    assert_eq!(counter(&engine, "tables_finalized"), finalized, "the active table serves reads");
    // The cache is what the budget leaves after the tables and the room to grow to the new χ.
    let stats = engine.stats();
    let (tree, used) = (counter(&engine, "tree_memory_bytes"), counter(&engine, "block_cache_used_bytes"));
    let tables = stats.memory_bytes - tree - used;
    let chi = counter(&engine, "checkpoint_distance_bytes");
    assert_eq!(counter(&engine, "block_cache_bytes"), (4 << 20) - tables - chi - tree);
    let over = stats.memory_bytes.saturating_sub(4 << 20);
    assert_eq!(counter(&engine, "memory.over_budget_bytes"), over, "what its own count is over the budget");
    engine.put(&key(0), &value(0, 1), Durability::None).unwrap();
    assert_eq!(counter(&engine, "tables_finalized"), finalized + 1, "the next write finalizes it");
    wait_until(|| counter(&engine, "finalized_tables") == 0);
    for i in 0..30_000 {
        engine.put(&key(i % 6_000), &value(i, 1), Durability::None).unwrap();
    }
    assert!(counter(&engine, "checkpoint_distance_bytes") >= 512 << 10);
    engine.maintenance().set_option("checkpoint_distance", "256KiB").unwrap();
    for i in 0..30_000 {
        engine.get(&key(i % 6_000)).unwrap();
    }
    assert_eq!(counter(&engine, "checkpoint_distance_bytes"), 256 << 10, "a fixed χ stays");
    assert_eq!(counter(&engine, "checkpoint_distance_auto"), 0);
    engine.maintenance().set_option("checkpoint_distance", "auto").unwrap();
    for i in 0..30_000 {
        engine.get(&key(i % 6_000)).unwrap();
    }
    assert!(counter(&engine, "checkpoint_distance_bytes") < 128 << 10);
    for i in 0..6_000 {
        assert_eq!(engine.get(&key(i)).unwrap(), Some(value(24_000 + i, 1)), "key {i}");
    }
}

/// A table's apply writes its new runs out once they hold more than χ (a spill: no record),
/// so memory stays near χ however much it rewrites; a reopen finds every record, spilled runs
/// or not.
#[test]
fn new_runs_spill_past_the_checkpoint_distance_and_the_store_reopens_whole() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = TurtleEngine::open(storage.clone(), &config("64KiB")).unwrap();
    let mut most_new = 0;
    for i in 0..20_000 {
        engine.put(&key(i % 5_000), &value(i, 3), Durability::None).unwrap();
        if i % 200 == 0 {
            most_new = most_new.max(counter(&engine, "tree_new_run_bytes"));
        }
    }
    let spills = counter(&engine, "spills");
    assert!(spills > 0, "{:?}", engine.stats().engine_counters);
    // One batch's merge can rewrite a node's whole buffer before the spill after it: the
    // sampled most is about 170 KB with spills and about 310 KB without.
    let bound = 4 * (64 << 10);
    assert!(most_new <= bound, "{most_new} bytes of new runs with χ = 64 KiB ({spills} spills)");
    engine.close().unwrap();
    drop(engine);
    let engine = TurtleEngine::open(storage, &config("64KiB")).unwrap();
    for i in 15_000..20_000 {
        assert_eq!(engine.get(&key(i % 5_000)).unwrap(), Some(value(i, 3)), "key {i}");
    }
    assert!(engine.verify().unwrap().records_checked > 0);
}

/// A close while a large table is being applied stops the apply between batches (it waited
/// for the whole table: 38 s with χ = 1 GiB at 20M records); the next open replays the table
/// and finds every acknowledged write.
#[test]
fn a_close_during_a_large_apply_stops_it_and_the_table_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        let storage: Arc<dyn Storage> = Arc::new(strata_io::FileStorage::open_dir(dir.path(), true).unwrap());
        TurtleEngine::open(storage, &config("16MiB")).unwrap()
    };
    let engine = open();
    for i in 0..40_000 {
        engine.put(&key(i), &value(i, 4), Durability::None).unwrap();
    }
    engine.flush().unwrap();
    let engine = Arc::new(engine);
    let checkpointer = {
        let engine = engine.clone();
        std::thread::spawn(move || engine.maintenance().run(MaintenanceTask::Checkpoint))
    };
    wait_until(|| counter(&engine, "batches_applied") > 0 || checkpointer.is_finished());
    engine.close().unwrap();
    let stopped = counter(&engine, "checkpoints") == 0;
    let checkpointed = checkpointer.join().unwrap();
    match checkpointed {
        Ok(()) => assert!(!stopped),
        Err(e) => {
            assert!(matches!(e, strata_core::Error::Closed), "a stopped checkpoint reports the close: {e}")
        }
    }
    drop(engine);
    let engine = open();
    if stopped {
        assert_eq!(counter(&engine, "records_replayed_at_open"), 40_000, "the table is replayed whole");
    }
    for i in 0..40_000 {
        assert_eq!(engine.get(&key(i)).unwrap(), Some(value(i, 4)), "key {i}");
    }
    assert!(engine.verify().unwrap().records_checked > 0);
}

/// An open replays the WAL written since the last checkpoint, not the store's history.
#[test]
fn an_open_replays_only_the_log_since_the_last_checkpoint() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = TurtleEngine::open(storage.clone(), &config("64KiB")).unwrap();
    for i in 0..20_000 {
        engine.put(&key(i % 3_000), &value(i, 1), Durability::None).unwrap();
    }
    let checkpoints = counter(&engine, "checkpoints");
    assert!(checkpoints >= 10, "{checkpoints} checkpoints");
    engine.close().unwrap();
    drop(engine);
    let engine = TurtleEngine::open(storage, &config("64KiB")).unwrap();
    let replayed = counter(&engine, "records_replayed_at_open");
    // At most three tables' worth (one active, two finalized) of ~100-byte records.
    assert!(replayed < 3 * (64 << 10) / 60, "{replayed} records replayed");
    for i in 17_000..20_000 {
        assert_eq!(engine.get(&key(i % 3_000)).unwrap(), Some(value(i, 1)));
    }
}

/// Overwriting the same keys again and again frees the replaced runs and node pages, and the
/// pages file reuses them: it stops growing once the tree's shape is steady. (At these tiny
/// sizes the file is several times the records: every run and node page fills whole 4 KiB
/// pages, and nodes buffer up to `leaf_bytes · (pivots − 1)`.)
#[test]
fn replaced_pages_are_reused_and_the_pages_file_stays_near_the_live_data() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = TurtleEngine::open(storage.clone(), &config("64KiB")).unwrap();
    let mut ends = Vec::new();
    for round in 0..12 {
        for i in 0..3_000 {
            engine.put(&key(i), &value(i, round), Durability::None).unwrap();
        }
        engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
        ends.push(counter(&engine, "pages_end_bytes"));
    }
    let live: u64 = (0..3_000u64).map(|i| (key(i).len() + value(i, 11).len()) as u64).sum();
    let (end, free) = (counter(&engine, "pages_end_bytes"), counter(&engine, "pages_free_bytes"));
    assert!(counter(&engine, "page_bytes_freed") > 4 * end, "freed pages are counted");
    eprintln!("pages end per round {ends:?}; live {live}; free {free}");
    assert!(ends[11] <= ends[5] * 3 / 2, "the file keeps growing: {ends:?} for {live} bytes of records");
}

/// The extents a checkpoint frees go back to the file system (holes), and so do the free holes
/// an open finds: after rounds of overwrites the pages file takes little more disk than the
/// extents the tree uses, though its free holes are many times that; every record reads back
/// after a reopen.
#[test]
fn freed_extents_become_holes_so_the_file_takes_about_what_the_tree_uses() {
    let dir = tempfile::tempdir().unwrap();
    if !strata_testkit::disk::punches_holes(dir.path()) {
        eprintln!("this file system keeps punched blocks: nothing to check");
        return;
    }
    let storage: Arc<dyn Storage> = Arc::new(strata_io::FileStorage::open_dir(dir.path(), false).unwrap());
    let allocated = |name: &str| strata_testkit::disk::allocated_bytes(dir.path(), name);
    let engine = TurtleEngine::open(storage.clone(), &config("64KiB")).unwrap();
    for round in 0..8 {
        for i in 0..3_000 {
            engine.put(&key(i), &value(i, round), Durability::None).unwrap();
        }
        engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    }
    let (end, free) = (counter(&engine, "pages_end_bytes"), counter(&engine, "pages_free_bytes"));
    let used = end - free;
    let on_disk = allocated(engine_turtle::pages::PAGES_FILE);
    eprintln!("pages end {end}, free {free}, allocated {on_disk}");
    assert!(free > used / 4, "the check needs free holes: end {end}, free {free}");
    assert!(on_disk <= used + (64 << 10), "allocated {on_disk} for {used} used bytes (end {end})");
    engine.close().unwrap();
    drop(engine);
    let engine = TurtleEngine::open(storage, &config("64KiB")).unwrap();
    assert!(allocated(engine_turtle::pages::PAGES_FILE) <= used + (64 << 10));
    for i in 0..3_000 {
        assert_eq!(engine.get(&key(i)).unwrap(), Some(value(i, 7)), "key {i}");
    }
}

/// Found by the `turtle_wal` fuzz target: `verify` listed the WAL's segments while a checkpoint
/// truncated the log, and failed opening a segment just removed. It now holds off checkpoints.
#[test]
fn verify_during_checkpoints_never_fails() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(strata_io::FileStorage::open_dir(dir.path(), true).unwrap());
    let config = config("64KiB");
    let config = EngineConfig { wal_segment_bytes: Some(16 << 10), ..config };
    let engine = Arc::new(TurtleEngine::open(storage, &config).unwrap());
    let writer = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            for i in 0..30_000 {
                engine.put(&key(i % 2_000), &value(i, 2), Durability::None).unwrap();
            }
        })
    };
    let mut verified = 0;
    while !writer.is_finished() {
        engine.verify().unwrap();
        verified += 1;
    }
    writer.join().unwrap();
    assert!(counter(&engine, "checkpoints") >= 10 && verified > 10, "{verified} verifies");
}

/// Found by review: a writer waiting for room (two finalized tables ahead of it) when a close
/// came returned `Closed` from its after-apply step, which the write path records as the
/// engine's failure: the write (already applied and logged) was reported failed and `close`
/// returned `Poisoned`. A close now lets waiting writers return.
#[test]
fn a_close_while_writers_wait_for_room_closes_cleanly() {
    for round in 0..5 {
        let engine = Arc::new(TurtleEngine::open(Arc::new(MemStorage::new()), &config("64KiB")).unwrap());
        let writers: Vec<_> = (0..4)
            .map(|t| {
                let engine = engine.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        match engine.put(&key(t * 100_000 + i), &value(i, round), Durability::None) {
                            Ok(()) => {}
                            Err(strata_core::Error::Closed) => return,
                            Err(e) => panic!("round {round}: a write failed with {e}"),
                        }
                    }
                })
            })
            .collect();
        while counter(&engine, "writer_waits") == 0 && !writers.iter().all(|w| w.is_finished()) {
            std::thread::yield_now();
        }
        engine.close().unwrap_or_else(|e| panic!("round {round}: close failed: {e}"));
        for writer in writers {
            writer.join().unwrap();
        }
    }
}

/// A scan reads a copy of the active table's first entries, not the table under its lock: where
/// the copy holds only deletes that hide the tree's records, the scan reads past them (and
/// records written in between are found), both ways and from any start.
#[test]
fn scans_read_past_many_deletes_in_the_active_table() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = TurtleEngine::open(storage, &config("4MiB")).unwrap();
    let k = |i: u64| format!("k{i:06}").into_bytes();
    for i in 0..3_000 {
        engine.put(&k(i), &value(i, 0), Durability::None).unwrap();
    }
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    for i in 0..2_000 {
        engine.delete(&k(i), Durability::None).unwrap();
    }
    for i in (2_100..2_200).chain(500..510) {
        engine.put(&k(i), &value(i, 1), Durability::None).unwrap();
    }
    let expected = |i: u64| match i {
        500..510 | 2_100..2_200 => Some(value(i, 1)),
        0..2_000 => None,
        _ => Some(value(i, 0)),
    };
    for (from, to) in [(0, 3_000), (3, 2_150), (495, 2_005), (1_999, 2_001), (505, 600)] {
        let want: Vec<(Vec<u8>, Vec<u8>)> =
            (from..to).filter_map(|i| expected(i).map(|v| (k(i), v))).collect();
        let range = KeyRange::from_bounds(k(from)..k(to));
        let forward: Vec<_> =
            engine.range(range.clone(), Direction::Forward).unwrap().map(Result::unwrap).collect();
        assert_eq!(forward, want, "forward {from}..{to}");
        let mut reverse: Vec<_> =
            engine.range(range, Direction::Reverse).unwrap().map(Result::unwrap).collect();
        reverse.reverse();
        assert_eq!(reverse, want, "reverse {from}..{to}");
    }
    assert_eq!(counter(&engine, "checkpoints"), 1, "the deletes stayed in the active table");
}

/// `memory.over_budget_bytes` is what the engine's own count holds beyond its budget: zero
/// within it, the excess when a fixed χ larger than the budget lets the tables pass it.
#[test]
fn memory_over_the_budget_is_reported() {
    let budget = 4u64 << 20; // common::config's
    let engine = TurtleEngine::open(Arc::new(MemStorage::new()), &config("16MiB")).unwrap();
    assert_eq!(counter(&engine, "memory.over_budget_bytes"), 0);
    let mut i = 0;
    while counter(&engine, "memtables_bytes") <= budget + (512 << 10) {
        engine.put(&key(i), &value(i, 0), Durability::None).unwrap();
        i += 1;
    }
    let stats = engine.stats();
    let over = stats.engine_counters.iter().find(|(n, _)| n == "memory.over_budget_bytes").unwrap().1;
    assert!(over >= 512 << 10, "{over}");
    assert_eq!(over, stats.memory_bytes - budget);
    engine.close().unwrap();
}

/// A run of scans (no writes) makes the worker settle the tree (`settle=auto`; gets do not):
/// its buffers flush into the leaves until each node buffers a hundredth of the data below it,
/// and the settled tree is checkpointed, so a reopen finds it settled, every record in place.
/// `settle=off` never settles; `Compact` settles until nothing is buffered.
#[test]
fn scans_settle_the_buffers_into_the_leaves_and_a_reopen_keeps_it() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = TurtleEngine::open(storage.clone(), &config("auto")).unwrap();
    for i in 0..20_000 {
        engine.put(&key(i), &value(i, 0), Durability::None).unwrap();
    }
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    let checkpoints = counter(&engine, "checkpoints");
    let loaded = counter(&engine, "tree_buffer_pending_bytes");
    let leaves = counter(&engine, "tree_leaf_bytes");
    assert!(loaded > leaves / 20, "the load leaves {loaded} bytes buffered over {leaves}");
    assert_eq!(counter(&engine, "settle_steps"), 0, "a load does not settle");
    for i in 0..40_000 {
        engine.get(&key(i % 20_000)).unwrap();
    }
    assert!(counter(&engine, "write_share_permille") < 10);
    assert_eq!(counter(&engine, "settle_steps"), 0, "gets meet filters: they do not settle");
    let settled = |engine: &TurtleEngine| {
        let height = counter(engine, "tree_height");
        let bound = (height - 1) * counter(engine, "tree_leaf_bytes") / 100;
        counter(engine, "tree_buffer_pending_bytes") <= bound
            && counter(engine, "tree_buffer_run_bytes") <= 2 * bound + (64 << 10)
    };
    for round in 0.. {
        for i in 0..2_000 {
            let range = KeyRange::from_bounds(key(i)..);
            engine.range(range, Direction::Forward).unwrap().take(5).for_each(|r| drop(r.unwrap()));
        }
        if settled(&engine) {
            break;
        }
        assert!(round < 1_000, "not settled: {:?}", engine.stats().engine_counters);
    }
    // The worker's round ends with a checkpoint of the settled tree; no read asks for another.
    let mut last = (0, 0);
    wait_until(|| {
        let now = (counter(&engine, "settle_steps"), counter(&engine, "checkpoints"));
        let still = now == last && now.1 > checkpoints;
        last = now;
        std::thread::sleep(std::time::Duration::from_millis(50));
        still
    });
    let pending = counter(&engine, "tree_buffer_pending_bytes");
    engine.close().unwrap();
    drop(engine);
    let off = config("64KiB").engine_option("settle", "off");
    let engine = TurtleEngine::open(storage.clone(), &off).unwrap();
    assert_eq!(counter(&engine, "tree_buffer_pending_bytes"), pending, "the settled tree was checkpointed");
    for i in 0..20_000 {
        engine.put(&key(i), &value(i, 1), Durability::None).unwrap();
    }
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    for i in 0..10_000 {
        let range = KeyRange::from_bounds(key(i)..);
        engine.range(range, Direction::Forward).unwrap().take(5).for_each(|r| drop(r.unwrap()));
    }
    assert_eq!(counter(&engine, "settle_steps"), 0, "settle=off never settles");
    let err = engine.maintenance().set_option("settle", "sometimes").unwrap_err().to_string();
    assert!(err.contains("one of auto, always, off"), "{err}");
    // Compact: nothing buffered afterwards, checkpointed, every record in place.
    assert!(counter(&engine, "tree_buffer_pending_bytes") > 0);
    engine.maintenance().run(MaintenanceTask::Compact).unwrap();
    assert_eq!(counter(&engine, "tree_buffer_pending_bytes"), 0);
    assert_eq!(counter(&engine, "tree_buffer_run_bytes"), 0);
    engine.close().unwrap();
    drop(engine);
    let engine = TurtleEngine::open(storage, &off).unwrap();
    assert_eq!(counter(&engine, "tree_buffer_run_bytes"), 0, "the compacted tree was checkpointed");
    for i in (0..20_000).step_by(7) {
        assert_eq!(engine.get(&key(i)).unwrap(), Some(value(i, 1)), "key {i}");
    }
}
