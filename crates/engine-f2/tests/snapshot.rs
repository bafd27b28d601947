//! The hot-index snapshot written after every checkpoint: the next open — clean or after a crash
//! — loads it instead of scanning the hot log, falls back to the scan when it belongs to an older
//! checkpoint, and still checks the checksums of the log tail pages it loads into memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

mod common;

use common::{config, counter, key, small_options};
use engine_f2::{F2Engine, F2Options};
use strata_core::{Durability, Engine};
use strata_io::{CrashMode, SimStorage, Storage};

/// No compaction: the disk budgets are far above what the tests write.
fn options() -> F2Options {
    F2Options {
        hot_log_disk_budget_bytes: Some(1 << 20),
        cold_log_disk_budget_bytes: Some(1 << 20),
        checkpoint_wal_bytes: None,
        ..small_options()
    }
}

fn open(storage: &Arc<dyn Storage>) -> F2Engine {
    F2Engine::open_with(storage.clone(), &config(), options()).unwrap()
}

type Model = HashMap<Vec<u8>, Vec<u8>>;

/// An engine on fresh sim storage (`seed`) after 2000 buffered puts over 700 keys, and the model.
fn filled(seed: u64) -> (SimStorage, Arc<dyn Storage>, F2Engine, Model) {
    let sim = SimStorage::new(seed);
    let storage: Arc<dyn Storage> = Arc::new(sim.booted());
    let engine = open(&storage);
    let mut model = HashMap::new();
    for i in 0..2000u64 {
        let v = format!("value-{i}").into_bytes();
        engine.put(&key(i % 700), &v, Durability::Buffered).unwrap();
        model.insert(key(i % 700), v);
    }
    (sim, storage, engine, model)
}

fn assert_holds(engine: &F2Engine, model: &Model) {
    for (k, v) in model {
        assert_eq!(engine.get(k).unwrap().as_ref(), Some(v), "{}", String::from_utf8_lossy(k));
    }
}

#[test]
fn clean_reopen_and_a_crash_after_a_checkpoint_both_load_the_hot_index() {
    let (sim, storage, engine, mut model) = filled(1);
    engine.close().unwrap();
    drop(engine);
    let engine = open(&storage);
    assert!(counter(&engine, "open.hot_index_entries_loaded") > 0);
    assert_eq!(counter(&engine, "open.hot_records_scanned"), 0);
    assert_holds(&engine, &model);
    // A checkpoint writes a snapshot too: after a crash the index is loaded, not rebuilt by a
    // scan, and the writes after the checkpoint come back from the WAL.
    engine.put(&key(1), b"before-checkpoint", Durability::Buffered).unwrap();
    engine.checkpoint().unwrap();
    engine.put(&key(2), b"after-checkpoint", Durability::Sync).unwrap();
    model.insert(key(1), b"before-checkpoint".to_vec());
    model.insert(key(2), b"after-checkpoint".to_vec());
    sim.crash(CrashMode::DropUnsynced);
    drop(engine);
    // The storage of the next process lifetime (the dropped engine's is dead).
    let engine = open(&(Arc::new(sim.booted()) as Arc<dyn Storage>));
    assert!(counter(&engine, "open.hot_index_entries_loaded") > 0);
    assert_eq!(counter(&engine, "open.hot_records_scanned"), 0);
    assert!(counter(&engine, "open.records_replayed") >= 1);
    assert_holds(&engine, &model);
}

/// A crash between a checkpoint and its snapshot leaves the previous checkpoint's snapshot in
/// place: it must not be used (its chain heads miss the newer records), and it is deleted.
#[test]
fn a_snapshot_of_an_older_checkpoint_is_not_used() {
    let (sim, storage, engine, mut model) = filled(3);
    engine.checkpoint().unwrap();
    let older = read_file(&storage, "f2-hot-index");
    for i in 0..300u64 {
        let v = format!("newer-{i}").into_bytes();
        engine.put(&key(i + 1000), &v, Durability::Buffered).unwrap();
        model.insert(key(i + 1000), v);
    }
    engine.checkpoint().unwrap();
    assert_ne!(read_file(&storage, "f2-hot-index"), older);
    // As if the crash came after the second checkpoint but before its snapshot was renamed.
    let file = storage.open("f2-hot-index", strata_io::OpenOptions::create()).unwrap();
    file.write_at(0, &older).unwrap();
    file.set_len(older.len() as u64).unwrap();
    file.sync().unwrap();
    sim.crash(CrashMode::DropUnsynced);
    drop(engine);
    let storage: Arc<dyn Storage> = Arc::new(sim.booted());
    let engine = open(&storage);
    assert_eq!(counter(&engine, "open.hot_index_entries_loaded"), 0);
    assert!(counter(&engine, "open.hot_records_scanned") > 0);
    assert!(!storage.exists("f2-hot-index").unwrap(), "a stale snapshot is removed");
    assert_holds(&engine, &model);
}

/// A snapshot whose entries all look valid but whose body checksum fails (an entry's tag changed
/// to one no record of its bucket has) is refused only after its entries were fed to the hot
/// index: the open starts over with a fresh index and a scan of the hot log, so the stray entry
/// is not there (the scan sets the entries of real keys, never removes others), and every key
/// reads back.
#[test]
fn a_snapshot_failing_its_checksum_after_loading_entries_is_replaced_by_a_scan() {
    let (sim, storage, engine, model) = filled(5);
    engine.close().unwrap();
    drop(engine);
    // The entry count a scan of the hot log gives; the close writes a snapshot again.
    let scanned_entries = {
        storage.remove("f2-hot-index").unwrap();
        let engine = open(&storage);
        assert!(counter(&engine, "open.hot_records_scanned") > 0);
        let entries = counter(&engine, "hot_index.entries");
        engine.close().unwrap();
        entries
    };
    assert!(read_file(&storage, "f2-hot-index").len() >= 64 + 12, "the snapshot holds an entry");
    sim.flip_bit("f2-hot-index", 64 + 5, 5).unwrap(); // bit 13 of the first entry's 14-bit tag
    let engine = open(&storage);
    assert_eq!(counter(&engine, "open.hot_index_entries_loaded"), 0);
    assert!(counter(&engine, "open.hot_records_scanned") > 0);
    assert_eq!(counter(&engine, "hot_index.entries"), scanned_entries, "a stray entry survived");
    assert_holds(&engine, &model);
}

/// Checkpoints (and their snapshots) taken while another thread keeps writing: after a crash
/// the snapshot is used and every acknowledged synced write is there. Only these explicit
/// checkpoints run (a background one cut short by the crash would leave a stale snapshot, and
/// the open would rightly scan instead).
#[test]
fn snapshots_taken_while_writers_run_recover_every_synced_write() {
    let sim = SimStorage::new(4);
    let storage: Arc<dyn Storage> = Arc::new(sim.booted());
    let only_explicit_checkpoints = F2Options { checkpoint_wal_bytes: Some(1 << 40), ..options() };
    let engine =
        Arc::new(F2Engine::open_with(storage.clone(), &config(), only_explicit_checkpoints).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (engine, stop, written) = (engine.clone(), stop.clone(), written.clone());
        std::thread::spawn(move || {
            let mut acknowledged = HashMap::new();
            let mut i = 0u64;
            while !stop.load(SeqCst) || i < 500 {
                let v = format!("value-{i}").into_bytes();
                engine.put(&key(i % 400), &v, Durability::Sync).unwrap();
                acknowledged.insert(key(i % 400), v);
                i += 1;
                written.store(i, SeqCst);
            }
            acknowledged
        })
    };
    // Every checkpoint has records below its cut (so its snapshot has entries) and writes racing it.
    while written.load(SeqCst) < 100 {
        std::thread::yield_now();
    }
    for _ in 0..20 {
        engine.checkpoint().unwrap();
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    stop.store(true, SeqCst);
    let model = writer.join().unwrap();
    sim.crash(CrashMode::DropUnsynced);
    drop(engine);
    let engine = open(&(Arc::new(sim.booted()) as Arc<dyn Storage>));
    assert!(counter(&engine, "open.hot_index_entries_loaded") > 0);
    assert_eq!(counter(&engine, "open.hot_records_scanned"), 0);
    assert_holds(&engine, &model);
}

fn read_file(storage: &Arc<dyn Storage>, name: &str) -> Vec<u8> {
    let file = storage.open(name, strata_io::OpenOptions::existing()).unwrap();
    strata_io::read_all(file.as_ref()).unwrap()
}

/// Regression (kit fault_injection, bit flip in `f2-hot-*`): with the snapshot the hot log is no
/// longer scanned at open, and its tail page — loaded into memory, where reads skip checksums —
/// served a flipped value. The same held for the cold log's tail page.
#[test]
fn flipped_bit_in_a_loaded_tail_page_is_reported() {
    for (log, compact) in [("f2-hot-0000000000000000.seg", false), ("f2-cold-0000000000000000.seg", true)] {
        let sim = SimStorage::new(2);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let engine = open(&storage);
        // 300 records of 80 B fill 6 pages: compaction moves the oldest ones (key 0 first) to
        // the cold log, whose first page is then its tail page.
        let records = if compact { 300 } else { 20 };
        for i in 0..records {
            engine.put(&key(i), &[b'v'; 40], Durability::Buffered).unwrap();
        }
        if compact {
            assert!(engine.compact_now().unwrap().0 > 0);
        }
        engine.close().unwrap();
        drop(engine);
        // Byte 64 + 24 + 9 + 10: inside the first record's value (header 24 B, key 9 B).
        sim.flip_bit(log, 64 + 24 + 9 + 10, 3).unwrap();
        let reopened = F2Engine::open_with(storage.clone(), &config(), options());
        let outcome = reopened.and_then(|e| e.get(&key(0)));
        assert!(matches!(outcome, Err(strata_core::Error::Corruption { .. })), "{log}: {outcome:?}");
    }
}
