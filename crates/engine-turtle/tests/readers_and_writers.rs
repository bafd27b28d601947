//! Readers and writers do not wait for each other's device reads: the worker applies batches to
//! a copy of the tree, reads hold no lock across their reads, and a scan that reads without the
//! lock still sees every record (a table that moved between its steps starts the part again).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine_turtle::TurtleEngine;
use strata_core::{Direction, Durability, Engine, KeyRange};
use strata_io::{HookStorage, MemStorage, ReadHook, Storage};

mod common;
use common::{config, counter, key, value, wait_until};

/// Reads on the thread named `thread` wait while `held` is set (at most 20 s each); `waiting`
/// counts the reads that waited.
struct Gate {
    held: Arc<AtomicBool>,
    waiting: Arc<AtomicU64>,
}

/// A store of 6,000 records, closed, reopened over storage whose reads on `thread` wait at the
/// returned gate (held from the start when `held`).
fn store_behind_a_gate(thread: &'static str, held: bool) -> (Arc<TurtleEngine>, Gate) {
    let mem: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = TurtleEngine::open(mem.clone(), &config("64KiB")).unwrap();
    for i in 0..6_000 {
        engine.put(&key(i), &value(i, 0), Durability::None).unwrap();
    }
    engine.close().unwrap();
    drop(engine);
    let gate = Gate { held: Arc::new(AtomicBool::new(held)), waiting: Arc::new(AtomicU64::new(0)) };
    let (held_in_hook, waiting_in_hook) = (gate.held.clone(), gate.waiting.clone());
    let hook: ReadHook = Arc::new(move |_, _, _| {
        if std::thread::current().name() == Some(thread) && held_in_hook.load(SeqCst) {
            waiting_in_hook.fetch_add(1, SeqCst);
            let deadline = Instant::now() + Duration::from_secs(20);
            while held_in_hook.load(SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    });
    let storage: Arc<dyn Storage> = Arc::new(HookStorage::reads(mem, hook));
    (Arc::new(TurtleEngine::open(storage, &config("64KiB")).unwrap()), gate)
}

/// Readers never wait for an applied batch's reads: the worker applies a batch to a copy of the
/// tree and swaps it in (a batch held the tree's write lock while it read the leaves it
/// rewrote, so every get and scan of the tree waited for the device behind it).
#[test]
fn reads_of_the_tree_go_on_while_the_worker_waits_for_the_device() {
    let (engine, gate) = store_behind_a_gate("turtle-apply", false);
    gate.held.store(true, SeqCst);
    // New keys only, so the old ones are found in the tree alone; one table's worth, so no
    // writer waits for room while the worker is held.
    let mut i = 10_000;
    while counter(&engine, "tables_finalized") == 0 {
        engine.put(&key(i), &value(i, 1), Durability::None).unwrap();
        i += 1;
    }
    wait_until(|| gate.waiting.load(SeqCst) > 0);
    let reader = engine.clone();
    let (sender, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let got: Vec<_> = (0..6_000).step_by(97).map(|i| reader.get(&key(i)).unwrap()).collect();
        let scanned = reader.range(KeyRange::all(), Direction::Forward).unwrap().take(500).count();
        sender.send((got, scanned)).unwrap();
    });
    let answer = received.recv_timeout(Duration::from_secs(10));
    gate.held.store(false, SeqCst);
    let (got, scanned) = answer.expect("reads waited for the worker's device read");
    for (n, found) in got.into_iter().enumerate() {
        assert_eq!(found, Some(value(n as u64 * 97, 0)), "key {}", n * 97);
    }
    assert_eq!(scanned, 500);
    engine.close().unwrap();
}

/// Writers never wait for a scan's device reads: a chunk copies what it needs of the tables
/// under their lock and reads the tree with no lock held (it held the tables' read lock across
/// its reads, so every write waited for the device behind a scan).
#[test]
fn writes_go_on_while_a_scan_waits_for_the_device() {
    let (engine, gate) = store_behind_a_gate("scanner", true);
    let scanner = engine.clone();
    let scan = std::thread::Builder::new()
        .name("scanner".into())
        .spawn(move || scanner.range(KeyRange::all(), Direction::Forward).unwrap().take(100).count())
        .unwrap();
    wait_until(|| gate.waiting.load(SeqCst) > 0);
    let writer = engine.clone();
    let (sender, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for i in 0..50 {
            writer.put(&key(10_000 + i), &value(i, 1), Durability::None).unwrap();
        }
        sender.send(()).unwrap();
    });
    let wrote = received.recv_timeout(Duration::from_secs(10));
    gate.held.store(false, SeqCst);
    wrote.expect("writes waited for a scan's device read");
    assert_eq!(scan.join().unwrap(), 100);
    engine.close().unwrap();
}

/// A scan chunk reads the finalized tables and the tree before it copies the active table: a
/// table finalized in between would leave its records in neither copy, so the part starts
/// again. Records written once before the scans, then carried from the active table into the
/// finalized list and the tree by a writer's other keys, are in every scan.
#[test]
fn scans_see_records_while_their_table_is_finalized_and_applied() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = Arc::new(TurtleEngine::open(storage, &config("64KiB")).unwrap());
    let stable = |i: u64| format!("b{i:05}").into_bytes();
    let churn = |i: u64| format!("c{:05}", i % 3_000).into_bytes();
    let done = Arc::new(AtomicBool::new(false));
    let (writer_engine, writer_done) = (engine.clone(), done.clone());
    let writer = std::thread::spawn(move || {
        let mut i = 0;
        while !writer_done.load(SeqCst) {
            writer_engine.put(&churn(i), &value(i, 2), Durability::None).unwrap();
            i += 1;
        }
    });
    for round in 0..80u64 {
        for i in 0..200 {
            engine.put(&stable(round * 200 + i), &value(i, round), Durability::None).unwrap();
        }
        let seen: Vec<Vec<u8>> = engine
            .range(KeyRange::from_bounds(b"b".to_vec()..b"c".to_vec()), Direction::Forward)
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect();
        let expected: Vec<Vec<u8>> = (0..(round + 1) * 200).map(stable).collect();
        assert_eq!(seen.len(), expected.len(), "round {round}");
        assert_eq!(seen, expected, "round {round}");
    }
    done.store(true, SeqCst);
    writer.join().unwrap();
    assert!(counter(&engine, "tables_finalized") > 40, "{:?}", engine.stats().engine_counters);
}

/// Found at 20M records (docs/benchmarks.md): when `auto` χ fell at the end of a load, the next
/// write finalized the active table, already above the new χ, into a list of two finalized
/// tables, and every writer then waited for the worker to apply a whole table of the load's χ
/// (3.5 s without a completed operation in YCSB A). With the list full, the active table now
/// grows to the χ it began under; the lower χ takes over once the list has room.
#[test]
fn a_falling_distance_never_makes_writers_wait_for_a_full_list() {
    let (engine, gate) = store_behind_a_gate("turtle-apply", false);
    engine.maintenance().set_option("checkpoint_distance", "256KiB").unwrap();
    gate.held.store(true, SeqCst);
    let mut i = 10_000;
    let mut put = |engine: &TurtleEngine| {
        engine.put(&key(i), &value(i, 1), Durability::None).unwrap();
        i += 1;
    };
    // Two tables finalized while the worker waits in the first one's apply.
    while counter(&engine, "finalized_tables") < 2 {
        put(&engine);
    }
    wait_until(|| gate.waiting.load(SeqCst) > 0);
    for _ in 0..200 {
        put(&engine);
    }
    assert!(counter(&engine, "memtables_bytes") > 64 << 10, "{:?}", engine.stats().engine_counters);
    engine.maintenance().set_option("checkpoint_distance", "64KiB").unwrap();
    let (writer, (sender, received)) = (engine.clone(), std::sync::mpsc::channel());
    std::thread::spawn(move || {
        for n in 0..200 {
            writer.put(&key(50_000 + n), &value(n, 2), Durability::None).unwrap();
        }
        sender.send(()).unwrap();
    });
    let wrote = received.recv_timeout(Duration::from_secs(10));
    let waits = counter(&engine, "writer_waits");
    gate.held.store(false, SeqCst);
    wrote.expect("writers waited for the worker after χ fell");
    assert_eq!(waits, 0);
    // Once the list has room, the next write finalizes the table at the lower χ.
    wait_until(|| counter(&engine, "finalized_tables") < 2);
    let finalized = counter(&engine, "tables_finalized");
    engine.put(&key(60_000), &value(0, 3), Durability::None).unwrap();
    assert_eq!(counter(&engine, "tables_finalized"), finalized + 1);
    for n in (0..200).step_by(7) {
        assert_eq!(engine.get(&key(50_000 + n)).unwrap(), Some(value(n, 2)));
    }
    engine.close().unwrap();
}

/// Found at 20M records (docs/benchmarks.md): at a load's end three tables of χ = budget/4 and
/// new runs of up to χ more left the block cache's floor over the budget (863 MB of 838 by the
/// engine's own count). New runs now get what the budget leaves beside the tables, the tree's
/// indexes and filters and the cache's floor, when that is less than χ.
#[test]
fn new_runs_get_only_the_room_the_tables_leave_in_the_budget() {
    let (engine, gate) = store_behind_a_gate("turtle-apply", false);
    let budget = 4u64 << 20; // common::config's
    let distance = 1536u64 << 10;
    engine.maintenance().set_option("checkpoint_distance", "1536KiB").unwrap();
    assert_eq!(counter(&engine, "tree_new_run_room_bytes"), distance, "an idle store: χ");
    gate.held.store(true, SeqCst);
    // Tables of about three quarters of the budget while the worker waits in the first one's
    // apply (short of a third table: a writer would wait for the held worker).
    let mut i = 10_000;
    while counter(&engine, "finalized_tables") < 2 || counter(&engine, "memtables_bytes") < 2_900 << 10 {
        engine.put(&key(i), &value(i, 1), Durability::None).unwrap();
        i += 1;
    }
    wait_until(|| gate.waiting.load(SeqCst) > 0);
    let (tables, room) = (counter(&engine, "memtables_bytes"), counter(&engine, "tree_new_run_room_bytes"));
    gate.held.store(false, SeqCst);
    assert!(room < distance && room <= budget - tables - budget / 8, "room {room} beside tables of {tables}");
    engine.close().unwrap();
}
