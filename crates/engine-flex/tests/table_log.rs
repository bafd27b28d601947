//! Issue #19: FlexFile's logical log `flexdb-table.log` cut below the length the last commit
//! recorded as synced (in `flexdb-meta`) is corruption naming the log, with the expected and the
//! found length; bytes past that length (a torn, unsynced tail) are still dropped quietly.

use std::collections::BTreeMap;
use std::sync::Arc;

use engine_flex::flexfile::FlexFileOptions;
use engine_flex::{FlexEngine, FlexOptions};
use strata_core::{Durability, Engine, EngineConfig, Error};
use strata_io::{read_all, MemStorage, OpenOptions, Storage};

const LOG: &str = "flexdb-table.log";
const META: &str = "flexdb-meta";
/// The log's header; the first block starts here (docs/format/flexfile.md).
const LOG_HEADER_BYTES: usize = 32;

fn options() -> FlexOptions {
    FlexOptions {
        memtable_bytes: Some(8 << 10),
        max_interval_bytes: 2 << 10,
        max_interval_records: 8,
        // A long log: no tree commit resets it, so a clean close leaves several blocks in it.
        flexfile: FlexFileOptions { log_max_bytes: 1 << 20, ..FlexFileOptions::for_tests() },
        ..FlexOptions::default()
    }
}

fn open(storage: &MemStorage) -> Result<FlexEngine, Error> {
    FlexEngine::open_with(Arc::new(storage.clone()), &EngineConfig::default(), options())
}

fn read(storage: &MemStorage, name: &str) -> Vec<u8> {
    read_all(storage.open(name, OpenOptions::existing()).unwrap().as_ref()).unwrap()
}

/// A copy of `storage` with `name` replaced by `bytes`.
fn copy_with(storage: &MemStorage, name: &str, bytes: &[u8]) -> MemStorage {
    let copy = MemStorage::new();
    for file in storage.list().unwrap() {
        let contents = if file == name { bytes.to_vec() } else { read(storage, &file) };
        let f = copy.open(&file, OpenOptions::create()).unwrap();
        f.write_at(0, &contents).unwrap();
        f.sync().unwrap();
    }
    copy
}

/// A store with several commits in the table file, closed cleanly; and what it holds.
fn closed_store() -> (MemStorage, BTreeMap<Vec<u8>, Vec<u8>>) {
    let storage = MemStorage::new();
    let engine = open(&storage).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..1500u64 {
        let key = format!("key{:06}", (i * 7919) % 4000).into_bytes();
        let value = vec![(i % 251) as u8; (i % 60) as usize + 1];
        engine.put(&key, &value, Durability::Buffered).unwrap();
        model.insert(key, value);
    }
    engine.close().unwrap();
    (storage, model)
}

/// End of the first block and its copy (block header 24 bytes, entries 16 bytes each; the
/// entry count at block offset 4).
fn first_block_pair_end(log: &[u8]) -> usize {
    let count = u32::from_le_bytes(log[LOG_HEADER_BYTES + 4..LOG_HEADER_BYTES + 8].try_into().unwrap());
    LOG_HEADER_BYTES + 2 * (24 + 16 * count as usize)
}

fn check_all(engine: &FlexEngine, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(engine.get(k).unwrap().as_ref(), Some(v), "key {}", String::from_utf8_lossy(k));
    }
}

#[test]
fn a_table_log_cut_below_its_synced_length_is_corruption() {
    let (storage, _) = closed_store();
    let log = read(&storage, LOG);
    let first_pair = first_block_pair_end(&log);
    assert!(log.len() > first_pair, "the log holds more than one block ({} bytes)", log.len());
    // A byte short (a torn-looking last block), exactly between two blocks (a clean-looking
    // end), and only the header left.
    for cut in [log.len() - 1, first_pair, LOG_HEADER_BYTES] {
        let damaged = copy_with(&storage, LOG, &log[..cut]);
        let err = match open(&damaged) {
            Ok(_) => panic!("a log cut from {} to {cut} bytes opened without an error", log.len()),
            Err(e) => e,
        };
        let text = err.to_string();
        assert!(err.is_corruption(), "cut to {cut}: {err}");
        assert!(text.contains(LOG), "cut to {cut}: the error names the log: {text}");
        assert!(text.contains(&format!("expected at least {} bytes", log.len())), "cut to {cut}: {text}");
        assert!(text.contains(&format!("found {cut}")), "cut to {cut}: {text}");
    }
}

#[test]
fn a_torn_tail_past_the_synced_length_is_still_dropped_quietly() {
    let (storage, model) = closed_store();
    let mut log = read(&storage, LOG);
    // Half of a block written after the last recorded commit, as a crash would leave it.
    let torn = log[LOG_HEADER_BYTES..LOG_HEADER_BYTES + 40].to_vec();
    log.extend_from_slice(&torn);
    let damaged = copy_with(&storage, LOG, &log);
    let engine = open(&damaged).unwrap();
    check_all(&engine, &model);
    engine.close().unwrap();
}

/// A store whose `flexdb-meta` predates the log mark (format version 1) opens with the old
/// checks, and its next commit records the mark (version 2, 44 bytes).
#[test]
fn a_version_1_commit_record_still_opens_and_is_rewritten_with_the_log_mark() {
    let (storage, mut model) = closed_store();
    let meta = read(&storage, META);
    assert_eq!(meta.len(), 44);
    let mut v1 = b"STRFLXDB".to_vec();
    v1.extend_from_slice(&1u32.to_le_bytes());
    v1.extend_from_slice(&meta[12..24]); // table kind and committed lsn
    let crc = crc32c::crc32c(&v1);
    v1.extend_from_slice(&crc.to_le_bytes());
    let old = copy_with(&storage, META, &v1);
    let engine = open(&old).unwrap();
    check_all(&engine, &model);
    engine.put(b"after-upgrade", b"v", Durability::Sync).unwrap();
    model.insert(b"after-upgrade".to_vec(), b"v".to_vec());
    engine.close().unwrap();
    assert_eq!(read(&old, META).len(), 44, "the next commit writes format version 2");
    let engine = open(&old).unwrap();
    check_all(&engine, &model);
    engine.close().unwrap();
}
