//! A damaged or missing checkpoint is corruption naming `f2-checkpoint`, found before open
//! changes anything and before it sizes memory from the damaged fields.

mod common;

use std::sync::Arc;

use common::*;
use engine_f2::F2Engine;
use strata_core::{Durability, Engine, Error, MaintenanceTask};
use strata_io::{MemStorage, OpenOptions, Storage};

const CHECKPOINT: &str = "f2-checkpoint";

/// A store with data in every log and a checkpoint naming them, cleanly closed.
fn store() -> Arc<dyn Storage> {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = F2Engine::open_with(storage.clone(), &config(), small_options()).unwrap();
    for i in 0..3_000u64 {
        engine.put(&key(i % 700), &i.to_le_bytes(), Durability::Buffered).unwrap();
    }
    engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
    engine.close().unwrap();
    storage
}

fn read(storage: &dyn Storage, name: &str) -> Vec<u8> {
    strata_io::read_all(storage.open(name, OpenOptions::existing()).unwrap().as_ref()).unwrap()
}

fn write(storage: &dyn Storage, name: &str, bytes: &[u8]) {
    storage.remove(name).unwrap();
    let file = storage.open(name, OpenOptions::create()).unwrap();
    file.write_at(0, bytes).unwrap();
    file.sync().unwrap();
}

fn is_checkpoint_corruption(result: Result<F2Engine, Error>) -> bool {
    matches!(result, Err(Error::Corruption { file, .. }) if file == CHECKPOINT)
}

/// Without a checkpoint every segment looked like a leftover: open deleted them all, then the
/// WAL (truncated behind the lost checkpoint) refused. Putting the checkpoint back recovered
/// nothing.
#[test]
fn a_missing_checkpoint_is_corruption_and_open_deletes_nothing() {
    let storage = store();
    let checkpoint = read(storage.as_ref(), CHECKPOINT);
    storage.remove(CHECKPOINT).unwrap();
    let before = storage.list().unwrap();
    let opened = F2Engine::open_with(storage.clone(), &config(), small_options());
    assert!(is_checkpoint_corruption(opened), "a missing checkpoint must be corruption naming it");
    assert_eq!(storage.list().unwrap(), before, "the failed open removed files");
    let file = storage.open(CHECKPOINT, OpenOptions::create()).unwrap();
    file.write_at(0, &checkpoint).unwrap();
    let engine = F2Engine::open_with(storage, &config(), small_options()).unwrap();
    for i in 3_000 - 700..3_000u64 {
        assert_eq!(engine.get(&key(i % 700)).unwrap(), Some(i.to_le_bytes().to_vec()));
    }
}

/// Sets the u64 field at `offset` and makes the checksum (bytes 12..16, over 16..112) valid.
fn with_field(checkpoint: &[u8], offset: usize, value: u64) -> Vec<u8> {
    let mut bytes = checkpoint.to_vec();
    bytes[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[16..112]);
    bytes[12..16].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// Checksum-valid fields that would size memory far past the budget (a 2^32-chunk cold index
/// is 32 GiB; 1 GiB pages) or overflow the replay's first lsn are corruption, not an abort.
#[test]
fn checksum_valid_checkpoint_fields_past_any_budget_or_lsn_are_corruption() {
    let storage = store();
    let checkpoint = read(storage.as_ref(), CHECKPOINT);
    let damages = [
        ("chunk_count 2^32", with_field(&checkpoint, 40, 1 << 32)),
        ("page and segment 1 GiB", with_field(&with_field(&checkpoint, 24, 1 << 30), 32, 1 << 30)),
        ("wal_lsn u64::MAX - 1", with_field(&checkpoint, 16, u64::MAX - 1)),
    ];
    for (what, damaged) in damages {
        write(storage.as_ref(), CHECKPOINT, &damaged);
        let opened = F2Engine::open_with(storage.clone(), &config(), small_options());
        assert!(is_checkpoint_corruption(opened), "{what}");
    }
    write(storage.as_ref(), CHECKPOINT, &checkpoint);
    assert!(F2Engine::open_with(storage, &config(), small_options()).is_ok());
}

/// Found by fuzzing: a checksum-valid checkpoint naming a shorter cold range made open delete
/// the live cold segment past it as a leftover, then fail at the cold tail. Leftovers are
/// removed only after the whole open succeeded.
#[test]
fn an_open_that_fails_on_a_damaged_checkpoint_removes_no_segment() {
    let storage = store();
    let checkpoint = read(storage.as_ref(), CHECKPOINT);
    let field = |o: usize| u64::from_le_bytes(checkpoint[o..o + 8].try_into().unwrap());
    let (cold_begin, cold_tail) = (field(64), field(72));
    let segment_bytes = field(32);
    assert!(cold_tail >= cold_begin + segment_bytes, "the store's cold log spans one segment only");
    let wal_lsn = field(16);
    assert!(storage.exists("f2-hot-index").unwrap(), "no hot-index snapshot to keep");
    let damages = [
        // Inside a record of the previous segment: the tail page check fails.
        ("cold tail a segment short", with_field(&checkpoint, 72, cold_tail - segment_bytes - 100)),
        // The hot-index snapshot no longer matches, and the WAL lacks the records (review).
        ("WAL lsn lowered", with_field(&checkpoint, 16, wal_lsn / 2)),
    ];
    for (what, damaged) in damages {
        write(storage.as_ref(), CHECKPOINT, &damaged);
        let before = storage.list().unwrap();
        let opened = F2Engine::open_with(storage.clone(), &config(), small_options());
        assert!(opened.is_err(), "{what}: opened");
        assert_eq!(storage.list().unwrap(), before, "{what}: the failed open removed files");
    }
}
