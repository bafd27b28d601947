//! The window the WAL state file deliberately leaves (issue #19; docs/format/wal.md, "The window
//! that leaves"): the file is not rewritten at every sync, so records of the last segment made
//! durable after it was last written (lsn above its `durable_lsn`) are protected by the record
//! rules alone. These tests pin down both sides of that boundary, so a change to it (a state
//! file rewritten in `sync`, say) has to change them and the documentation together.

mod common;

use std::sync::Arc;

use common::*;
use strata_core::{Durability, Error, RecoveryMode};
use strata_io::{MemStorage, OpenOptions, Storage};
use strata_wal::WalOptions;

const RECORDS: u64 = 10;

/// `RECORDS` records, each committed `Sync` (acknowledged as durable), in one segment; then the
/// process "crashes" (the log is dropped without `close`; `MemStorage` keeps every write). The
/// state file still lists the segment with its header only and `durable_lsn` 0.
fn crashed_after_sync_writes() -> (Arc<dyn Storage>, WalOptions, String) {
    let opts = WalOptions { preallocate: false, ..small_opts(64 << 10) };
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=RECORDS {
        let lsn = wal.append(&payload(i, 100)).unwrap();
        wal.commit(lsn, Durability::Sync).unwrap();
    }
    drop(wal);
    let segments = segment_names(storage.as_ref(), &opts);
    assert_eq!(segments.len(), 1, "{segments:?}");
    (storage, opts, segments[0].clone())
}

/// The offset of the record with `lsn` in segment `name`.
fn offset_of(storage: &dyn Storage, name: &str, lsn: u64) -> u64 {
    let positions = record_positions(&read_file(storage, name));
    positions
        .iter()
        .find(|p| p.1 == lsn)
        .map(|p| p.0)
        .unwrap_or_else(|| panic!("no lsn {lsn}: {positions:?}"))
}

fn replayed_in(storage: &Arc<dyn Storage>, opts: &WalOptions, mode: RecoveryMode) -> Result<u64, Error> {
    open(storage, &with_mode(opts.clone(), mode), 1).map(|(_, _, replayed)| replayed.len() as u64)
}

/// Both recovery modes, each on a freshly built and damaged log (opening may repair).
fn in_both_modes(damage: impl Fn(&dyn Storage, &str), check: impl Fn(RecoveryMode, Result<u64, Error>)) {
    for mode in [RecoveryMode::TolerateTornTail, RecoveryMode::AbsoluteConsistency] {
        let (storage, opts, segment) = crashed_after_sync_writes();
        damage(storage.as_ref(), &segment);
        check(mode, replayed_in(&storage, &opts, mode));
    }
}

/// The window itself: after a crash, the last segment cut at a record boundary above the state
/// file's durable lsn opens in both modes without the acknowledged records past the cut.
#[test]
fn after_a_crash_a_cut_at_a_record_boundary_above_the_durable_lsn_is_not_detected() {
    let cut_before_6 = |storage: &dyn Storage, segment: &str| {
        let cut = offset_of(storage, segment, 6);
        storage.open(segment, OpenOptions::existing()).unwrap().set_len(cut).unwrap();
    };
    in_both_modes(cut_before_6, |mode, replayed| {
        assert_eq!(replayed.ok(), Some(5), "{mode:?}: records 6..=10 were acknowledged, and lost quietly");
    });
}

/// The same cut inside a record is a torn tail: dropped in `TolerateTornTail`, an error in
/// `AbsoluteConsistency`.
#[test]
fn after_a_crash_a_cut_inside_a_record_above_the_durable_lsn_is_a_torn_tail() {
    let cut_inside_6 = |storage: &dyn Storage, segment: &str| {
        let cut = offset_of(storage, segment, 6) + 8;
        storage.open(segment, OpenOptions::existing()).unwrap().set_len(cut).unwrap();
    };
    in_both_modes(cut_inside_6, |mode, replayed| match mode {
        RecoveryMode::TolerateTornTail => assert_eq!(replayed.ok(), Some(5)),
        RecoveryMode::AbsoluteConsistency => assert!(replayed.is_err(), "{replayed:?}"),
    });
}

/// Inside the window a later record still vouches for an earlier one: each record here was
/// appended after the one before it was synced (`synced_lsn`), so damage to record 6 with 7..=10
/// intact is mid-log corruption in both modes.
#[test]
fn damage_inside_the_window_with_a_later_record_surviving_is_corruption() {
    let overwrite_record_6 = |storage: &dyn Storage, segment: &str| {
        let (from, to) = (offset_of(storage, segment, 6), offset_of(storage, segment, 7));
        let file = storage.open(segment, OpenOptions::existing()).unwrap();
        file.write_at(from, &vec![0xff; (to - from) as usize]).unwrap();
    };
    in_both_modes(overwrite_record_6, |mode, replayed| {
        assert!(matches!(&replayed, Err(Error::Corruption { .. })), "{mode:?}: {replayed:?}");
    });
}
