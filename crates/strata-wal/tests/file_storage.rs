//! The log on real files: rollover, preallocation, recycling and reopening.

mod common;

use std::sync::Arc;

use common::*;
use strata_core::{Durability, RecoveryMode};
use strata_io::{FileStorage, Storage};
use strata_wal::{Wal, WalOptions};

#[test]
fn the_log_round_trips_through_real_files() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::open_dir(dir.path(), true).unwrap());
    let opts = WalOptions { recycle_segments: 2, ..small_opts(8192) };
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    let mut checkpoint = 1;
    let mut appended = Vec::new();
    for i in 1..=1500u64 {
        let lsn = wal.append(&payload(i, 200)).unwrap();
        appended.push((lsn, payload(i, 200)));
        wal.commit(lsn, if i % 10 == 0 { Durability::Sync } else { Durability::Buffered }).unwrap();
        if i % 500 == 0 {
            checkpoint = wal.sync().unwrap() - 50;
            wal.truncate_before(checkpoint).unwrap();
        }
    }
    let stats = wal.stats();
    assert!(stats.segments_recycled > 0 && stats.segments_removed > 0, "{stats:?}");
    wal.close().unwrap();
    drop(wal);

    for name in segment_names(storage.as_ref(), &opts) {
        let len = std::fs::metadata(dir.path().join(&name)).unwrap().len();
        assert!(len >= opts.segment_bytes, "{name} is {len} bytes: not preallocated");
    }
    let (wal, report, replayed) = open(&storage, &opts, checkpoint).unwrap();
    assert_replayed_from(&replayed, &appended, checkpoint);
    let last_data_lsn = appended.last().unwrap().0;
    assert_eq!(report.next_lsn, last_data_lsn + 2, "after the marker close() wrote");
    wal.close().unwrap();
    let verified = Wal::verify(storage.as_ref(), &opts).unwrap();
    assert_eq!(verified.files_checked as usize, segment_names(storage.as_ref(), &opts).len());
}

/// The CLI opens the log once per command: every session continues the one segment file instead
/// of leaving a new preallocated segment behind.
#[test]
fn open_append_close_cycles_leave_one_segment_file() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::open_dir(dir.path(), true).unwrap());
    let opts = small_opts(64 << 10);

    // A session that only reads creates nothing.
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    wal.close().unwrap();
    assert!(storage.list().unwrap().is_empty(), "{:?}", storage.list().unwrap());

    let mut appended = Vec::new();
    for session in 0..12u64 {
        let (wal, report, replayed) = open(&storage, &opts, 1).unwrap();
        assert_replayed_from(&replayed, &appended, 1);
        assert_eq!(report.torn_tail_bytes_dropped, 0);
        for i in 0..3 {
            let bytes = payload(session * 3 + i, 200);
            let lsn = wal.append(&bytes).unwrap();
            wal.commit(lsn, Durability::Buffered).unwrap();
            appended.push((lsn, bytes));
        }
        let stats = wal.stats();
        assert_eq!(stats.segments_created, u64::from(session == 0), "session {session}: {stats:?}");
        wal.close().unwrap();
        assert_eq!(wal.stats().durability_markers_appended, 1);
        assert_eq!(segment_names(storage.as_ref(), &opts), ["wal-0000000000000001.log"], "session {session}");
    }
    let len = std::fs::metadata(dir.path().join("wal-0000000000000001.log")).unwrap().len();
    assert_eq!(len, opts.segment_bytes, "preallocated once, never grown");

    // A read-only session changes no byte.
    let before = read_file(storage.as_ref(), "wal-0000000000000001.log");
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    wal.sync().unwrap();
    wal.close().unwrap();
    assert!(read_file(storage.as_ref(), "wal-0000000000000001.log") == before, "a read-only session wrote");

    // Strict recovery of the continued segment after clean closes finds nothing to complain about.
    let strict = WalOptions { recovery_mode: RecoveryMode::AbsoluteConsistency, ..opts.clone() };
    let (_wal, report, replayed) = open(&storage, &strict, 1).unwrap();
    assert_replayed_from(&replayed, &appended, 1);
    assert_eq!(report.torn_tail_bytes_dropped, 0);
    let verified = Wal::verify(storage.as_ref(), &strict).unwrap();
    assert_eq!(verified.records_checked, 12 * 4, "36 records and 12 durability markers");
}
