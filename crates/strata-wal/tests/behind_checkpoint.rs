//! A power loss can leave the log behind the caller's checkpoint: the caller stored a checkpoint
//! covering records that were only handed to the OS, and the log lost them. Opening with
//! `min_lsn` past the log's end is legal; the log must stay openable (and verify clean) after the
//! caller releases it and closes, because the lsns it never held are the checkpoint's to cover.

mod common;

use std::sync::Arc;

use common::*;
use strata_core::Durability;
use strata_io::{CrashMode, SimStorage, Storage};
use strata_wal::{Lsn, Wal, WalOptions};

/// Sync records until the log has two segments, then `buffered` Buffered records in the second;
/// returns the last lsn.
fn two_segments_with_a_buffered_tail(
    wal: &Wal,
    storage: &dyn Storage,
    opts: &WalOptions,
    buffered: u64,
) -> Lsn {
    let mut lsn = 0;
    while segment_names(storage, opts).len() < 2 {
        lsn = wal.append(&payload(lsn + 1, 100)).unwrap();
        wal.commit(lsn, Durability::Sync).unwrap();
    }
    for _ in 0..buffered {
        lsn = wal.append(&payload(lsn + 1, 100)).unwrap();
        wal.commit(lsn, Durability::Buffered).unwrap();
    }
    lsn
}

#[test]
fn a_log_that_a_power_loss_left_behind_the_callers_checkpoint_reopens_after_a_release_and_close() {
    for preallocate in [false, true] {
        let opts = WalOptions { preallocate, ..small_opts(1024) };
        let sim = SimStorage::new(7);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let (wal, _, _) = open(&storage, &opts, 1).unwrap();
        // The caller's checkpoint covers every record up to `checkpoint_lsn`, the Buffered ones too.
        let checkpoint_lsn = two_segments_with_a_buffered_tail(&wal, storage.as_ref(), &opts, 3);
        sim.crash(CrashMode::DropUnsynced);
        drop(wal);
        let (wal, report, _) = open(&storage, &opts, checkpoint_lsn + 1).unwrap();
        assert!(report.last_lsn < checkpoint_lsn, "the power loss kept the Buffered records: {report:?}");
        wal.truncate_before(checkpoint_lsn + 1).unwrap();
        wal.close().unwrap();
        drop(wal);
        let reopened = open(&storage, &opts, checkpoint_lsn + 1);
        assert!(reopened.is_ok(), "preallocate {preallocate}: {:?}", reopened.err());
        let verified = Wal::verify(storage.as_ref(), &opts);
        assert!(verified.is_ok(), "preallocate {preallocate}: verify: {:?}", verified.err());
        // New records follow the checkpoint and survive another power loss.
        let (wal, _, _) = reopened.unwrap();
        let lsn = wal.append(b"after").unwrap();
        assert_eq!(lsn, checkpoint_lsn + 1);
        wal.commit(lsn, Durability::Sync).unwrap();
        sim.crash(CrashMode::DropUnsynced);
        drop(wal);
        let (_, _, replayed) = open(&storage, &opts, checkpoint_lsn + 1).unwrap();
        assert_eq!(replayed, vec![(lsn, b"after".to_vec())]);
    }
}

/// Once the log released every record (it was behind the caller's checkpoint), an open that
/// needs records the checkpoint held (the checkpoint was lost) is corruption naming the state
/// file, not an empty log.
#[test]
fn a_log_that_released_everything_refuses_a_caller_that_needs_released_records() {
    let opts = small_opts(1024);
    let sim = SimStorage::new(9);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    let checkpoint_lsn = two_segments_with_a_buffered_tail(&wal, storage.as_ref(), &opts, 3);
    sim.crash(CrashMode::DropUnsynced);
    drop(wal);
    let (wal, _, _) = open(&storage, &opts, checkpoint_lsn + 1).unwrap();
    wal.close().unwrap();
    drop(wal);
    assert!(segment_names(storage.as_ref(), &opts).is_empty(), "the open released every segment");
    let Err(err) = open(&storage, &opts, 1) else { panic!("an open needing released records must fail") };
    assert!(
        matches!(&err, strata_core::Error::Corruption { file, .. } if *file == opts.state_file_name()),
        "{err:?}"
    );
    for min_lsn in [checkpoint_lsn + 1, checkpoint_lsn + 10] {
        assert!(open(&storage, &opts, min_lsn).is_ok(), "min_lsn {min_lsn}");
    }
}
