//! The log on real files: rollover, preallocation, recycling and reopening.

mod common;

use std::sync::Arc;

use common::*;
use strata_core::Durability;
use strata_io::{FileStorage, Storage};
use strata_wal::{Wal, WalOptions};

#[test]
fn the_log_round_trips_through_real_files() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::open_dir(dir.path(), true).unwrap());
    let opts = WalOptions { recycle_segments: 2, ..small_opts(8192) };
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    let mut checkpoint = 1;
    for i in 1..=1500u64 {
        let lsn = wal.append(&payload(i, 200)).unwrap();
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
    assert_replayed_range(&replayed, checkpoint, 1500, 200);
    assert_eq!(report.next_lsn, 1501);
    wal.close().unwrap();
    let verified = Wal::verify(storage.as_ref(), &opts).unwrap();
    assert_eq!(verified.files_checked as usize, segment_names(storage.as_ref(), &opts).len());
}
