//! Every compiled-in peer engine survives a put/get/delete/scan round trip, a close and a reopen.
//! Peers are behind cargo features, so default CI compiles none of this; run with
//! `cargo test -p strata-bench --features peers` after `bash scripts/install-peer-deps.sh`.
#![cfg(any(feature = "rocksdb", feature = "lmdb", feature = "redb", feature = "fjall", feature = "sled"))]

use std::path::Path;

use strata_bench::adapter::{KvAdapter, OpenParams};
use strata_bench::peers::{open_peer, peer_names};

const RECORD_COUNT: u64 = 300;

/// Even numbers only, so odd keys are known-absent and fall between records.
fn key(i: u64) -> [u8; 8] {
    (i * 2).to_be_bytes()
}

/// Lengths differ per record, so `get` returning a length checks which value came back.
fn value_len(i: u64, generation: u64) -> usize {
    (8 + (i * 7 + generation * 13) % 120) as usize
}

fn value(i: u64, generation: u64) -> Vec<u8> {
    vec![(i % 251) as u8; value_len(i, generation)]
}

fn open(name: &str, dir: &Path, direct_io: bool, sync_writes: bool) -> Box<dyn KvAdapter> {
    let params = OpenParams {
        dir: dir.to_path_buf(),
        memory_budget_bytes: 16 << 20,
        direct_io,
        sync_writes,
        threads: 2,
    };
    let adapter = open_peer(name, &params)
        .unwrap_or_else(|| panic!("{name} is not compiled in"))
        .unwrap_or_else(|e| panic!("{name} failed to open: {e:#}"));
    assert_eq!(adapter.name(), name);
    adapter
}

fn round_trip(name: &str, direct_io: bool, sync_writes: bool) {
    let dir = tempfile::tempdir().unwrap();
    let adapter = open(name, dir.path(), direct_io, sync_writes);
    let config = adapter.config_description();
    for wanted in ["library", "memory", "compression", "direct I/O", "durability"] {
        assert!(config.iter().any(|(setting, _)| setting == wanted), "{name}: no '{wanted}' in {config:?}");
    }
    assert!(adapter.engine_stats().is_none());

    for i in 0..RECORD_COUNT {
        adapter.put(&key(i), &value(i, 0)).unwrap();
    }
    for i in 0..RECORD_COUNT {
        assert_eq!(adapter.get(&key(i)).unwrap(), Some(value_len(i, 0)), "{name}: record {i}");
        let absent = (i * 2 + 1).to_be_bytes();
        assert_eq!(adapter.get(&absent).unwrap(), None, "{name}: odd key {i}");
    }
    // Overwrite, read-modify-write, delete (twice: deleting an absent key is not an error).
    adapter.put(&key(5), &value(5, 1)).unwrap();
    adapter.read_modify_write(&key(6), &value(6, 2)).unwrap();
    adapter.delete(&key(7)).unwrap();
    adapter.delete(&key(7)).unwrap();
    assert_eq!(adapter.get(&key(5)).unwrap(), Some(value_len(5, 1)));
    assert_eq!(adapter.get(&key(6)).unwrap(), Some(value_len(6, 2)));
    assert_eq!(adapter.get(&key(7)).unwrap(), None);

    // Scans start at the first key >= start and stop at `count` or at the end.
    let live = RECORD_COUNT - 1;
    assert_eq!(adapter.scan(&[], 10).unwrap(), 10);
    assert_eq!(adapter.scan(&[], 10_000).unwrap(), live as usize);
    assert_eq!(adapter.scan(&key(250), 10_000).unwrap(), (RECORD_COUNT - 250) as usize);
    assert_eq!(adapter.scan(&(250u64 * 2 + 1).to_be_bytes(), 10_000).unwrap(), (RECORD_COUNT - 251) as usize);
    assert_eq!(adapter.scan(&key(0), 0).unwrap(), 0);
    assert_eq!(adapter.scan(&key(RECORD_COUNT), 5).unwrap(), 0);
    // The deleted record (7) is skipped.
    assert_eq!(adapter.scan(&key(5), 10_000).unwrap(), (RECORD_COUNT - 5 - 1) as usize);
    assert_eq!(adapter.scan(&key(RECORD_COUNT - 3), 10).unwrap(), 3);

    // Settling (finish background work before a checkpoint copy) keeps every record.
    adapter.settle().unwrap();
    assert_eq!(adapter.scan(&[], 10_000).unwrap(), live as usize);
    adapter.flush().unwrap();
    adapter.close().unwrap();

    let reopened = open(name, dir.path(), direct_io, sync_writes);
    for i in 0..RECORD_COUNT {
        let expected = match i {
            5 => Some(value_len(5, 1)),
            6 => Some(value_len(6, 2)),
            7 => None,
            _ => Some(value_len(i, 0)),
        };
        assert_eq!(reopened.get(&key(i)).unwrap(), expected, "{name}: record {i} after reopen");
    }
    assert_eq!(reopened.scan(&[], 10_000).unwrap(), live as usize);
    // Writes after a reopen work and survive another one.
    reopened.put(&key(RECORD_COUNT), &value(RECORD_COUNT, 0)).unwrap();
    reopened.close().unwrap();
    let again = open(name, dir.path(), direct_io, sync_writes);
    assert_eq!(again.get(&key(RECORD_COUNT)).unwrap(), Some(value_len(RECORD_COUNT, 0)));
    assert_eq!(again.scan(&[], 10_000).unwrap(), RECORD_COUNT as usize);
    again.close().unwrap();
}

/// The driver shares one adapter between worker threads: disjoint writers plus readers of
/// everything must see every record exactly once at the end.
fn shared_between_threads(name: &str) {
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 150;
    let dir = tempfile::tempdir().unwrap();
    let adapter = open(name, dir.path(), false, false);
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let adapter = &adapter;
            scope.spawn(move || {
                for n in 0..PER_THREAD {
                    let i = n * THREADS + thread;
                    adapter.put(&key(i), &value(i, 0)).unwrap();
                    assert_eq!(adapter.get(&key(i)).unwrap(), Some(value_len(i, 0)), "{name}: {i}");
                    adapter.scan(&key(i), 3).unwrap();
                }
            });
        }
    });
    assert_eq!(adapter.scan(&[], 10_000).unwrap(), (THREADS * PER_THREAD) as usize, "{name}");
    adapter.close().unwrap();
}

#[test]
fn compiled_peers_are_listed() {
    for name in ["rocksdb", "rocksdb-weak", "rocksdb-point", "rocksdb-blob", "lmdb", "redb", "fjall", "sled"]
    {
        let compiled = match name {
            "rocksdb" | "rocksdb-weak" | "rocksdb-point" | "rocksdb-blob" => cfg!(feature = "rocksdb"),
            "lmdb" => cfg!(feature = "lmdb"),
            "redb" => cfg!(feature = "redb"),
            "fjall" => cfg!(feature = "fjall"),
            _ => cfg!(feature = "sled"),
        };
        assert_eq!(peer_names().contains(&name), compiled, "{name}");
    }
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_round_trip() {
    round_trip("rocksdb", false, false);
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_round_trip_direct_io_sync_writes() {
    round_trip("rocksdb", true, true);
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_weak_round_trip_direct_io() {
    round_trip("rocksdb-weak", true, false);
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_point_lookup_tuning_round_trip_direct_io() {
    round_trip("rocksdb-point", true, false);
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_blob_files_round_trip_direct_io() {
    round_trip("rocksdb-blob", true, false);
}

#[cfg(feature = "lmdb")]
#[test]
fn lmdb_round_trip() {
    round_trip("lmdb", false, false);
}

#[cfg(feature = "lmdb")]
#[test]
fn lmdb_round_trip_direct_io_sync_writes() {
    round_trip("lmdb", true, true);
}

#[cfg(feature = "redb")]
#[test]
fn redb_round_trip() {
    round_trip("redb", false, false);
}

#[cfg(feature = "redb")]
#[test]
fn redb_round_trip_direct_io_sync_writes() {
    round_trip("redb", true, true);
}

#[cfg(feature = "fjall")]
#[test]
fn fjall_round_trip() {
    round_trip("fjall", false, false);
}

#[cfg(feature = "fjall")]
#[test]
fn fjall_round_trip_direct_io_sync_writes() {
    round_trip("fjall", true, true);
}

#[cfg(feature = "sled")]
#[test]
fn sled_round_trip() {
    round_trip("sled", false, false);
}

#[cfg(feature = "sled")]
#[test]
fn sled_round_trip_direct_io_sync_writes() {
    round_trip("sled", true, true);
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_shared_between_threads() {
    shared_between_threads("rocksdb");
}

#[cfg(feature = "lmdb")]
#[test]
fn lmdb_shared_between_threads() {
    shared_between_threads("lmdb");
}

#[cfg(feature = "redb")]
#[test]
fn redb_shared_between_threads() {
    shared_between_threads("redb");
}

#[cfg(feature = "fjall")]
#[test]
fn fjall_shared_between_threads() {
    shared_between_threads("fjall");
}

#[cfg(feature = "sled")]
#[test]
fn sled_shared_between_threads() {
    shared_between_threads("sled");
}
