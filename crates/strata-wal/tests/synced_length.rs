//! Issue #19: a log must not silently shrink. After a clean close, a segment that is cut below
//! what was synced, deleted, replaced by an empty file, or missing from the middle is
//! `Corruption` naming that segment (with the expected and the found length), in both recovery
//! modes and in `verify`; a torn unsynced tail after a crash is still dropped quietly; a log
//! written before the WAL state file existed still opens. Rules: docs/format/wal.md, "WAL state
//! file".

mod common;

use std::sync::Arc;

use common::*;
use strata_core::{Durability, Error, RecoveryMode};
use strata_io::{CrashMode, MemStorage, OpenOptions, SimStorage, Storage};
use strata_wal::{Wal, WalOptions};

const RECORDS: u64 = 60;

/// A closed log of `RECORDS` records of up to 100 bytes in 1 KiB segments (several segments).
fn closed_log(opts: &WalOptions) -> Arc<dyn Storage> {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let (wal, _, _) = open(&storage, opts, 1).unwrap();
    for i in 1..=RECORDS {
        let lsn = wal.append(&payload(i, 100)).unwrap();
        wal.commit(lsn, if i % 7 == 0 { Durability::Sync } else { Durability::None }).unwrap();
    }
    wal.close().unwrap();
    storage
}

/// The recovery error in both modes and from `verify`, which must agree on the file.
fn refused(storage: &Arc<dyn Storage>, opts: &WalOptions, file: &str) -> String {
    let mut text = String::new();
    for mode in [RecoveryMode::TolerateTornTail, RecoveryMode::AbsoluteConsistency] {
        let opts = with_mode(opts.clone(), mode);
        let err = open(storage, &opts, 1).map(|_| ()).unwrap_err();
        assert!(matches!(&err, Error::Corruption { file: f, .. } if f == file), "{mode:?}: {err}");
        let verified = Wal::verify(storage.as_ref(), &opts).unwrap_err();
        assert!(matches!(&verified, Error::Corruption { file: f, .. } if f == file), "verify: {verified}");
        text = err.to_string();
    }
    text
}

fn set_len(storage: &dyn Storage, name: &str, len: u64) {
    storage.open(name, OpenOptions::existing()).unwrap().set_len(len).unwrap();
}

#[test]
fn a_last_segment_cut_below_its_synced_length_after_close_is_corruption_naming_it() {
    let opts = small_opts(1024);
    let storage = closed_log(&opts);
    let last = segment_names(storage.as_ref(), &opts).pop().unwrap();
    let records_end = record_positions(&read_file(storage.as_ref(), &last)).last().map(|r| r.0).unwrap();
    // Cut inside the last record (a marker, written by close): the kind of cut the issue made.
    set_len(storage.as_ref(), &last, records_end + 8);
    let text = refused(&storage, &opts, &last);
    assert!(
        text.contains("expected at least") && text.contains(&format!("found {}", records_end + 8)),
        "{text}"
    );
}

#[test]
fn a_segment_cut_exactly_at_a_record_boundary_is_corruption() {
    let opts = WalOptions { preallocate: false, ..small_opts(1024) };
    let storage = closed_log(&opts);
    let last = segment_names(storage.as_ref(), &opts).pop().unwrap();
    let positions = record_positions(&read_file(storage.as_ref(), &last));
    assert!(positions.len() >= 2, "{positions:?}");
    // The file then ends cleanly (no bad record at all); only the state file knows better.
    let cut = positions[positions.len() - 1].0;
    let len = read_file(storage.as_ref(), &last).len() as u64;
    // Zeros instead of the last record, same length: the records end cleanly before the
    // durable lsn the state file records.
    let file = storage.open(&last, OpenOptions::existing()).unwrap();
    file.write_at(cut, &vec![0; (len - cut) as usize]).unwrap();
    let text = refused(&storage, &opts, &last);
    assert!(text.contains("the log ends at lsn"), "{text}");
    set_len(storage.as_ref(), &last, cut);
    let text = refused(&storage, &opts, &last);
    assert!(text.contains("shorter than its synced length"), "{text}");
}

#[test]
fn a_deleted_or_emptied_segment_is_corruption_naming_it() {
    let opts = small_opts(1024);
    let original = closed_log(&opts);
    let names = segment_names(original.as_ref(), &opts);
    assert!(names.len() >= 4, "{names:?}");
    for victim in [0, names.len() / 2, names.len() - 1] {
        for empty in [false, true] {
            let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
            for name in original.list().unwrap() {
                let bytes = read_file(original.as_ref(), &name);
                if name == names[victim] && !empty {
                    continue; // deleted
                }
                let bytes = if name == names[victim] { Vec::new() } else { bytes };
                storage.open(&name, OpenOptions::create()).unwrap().write_at(0, &bytes).unwrap();
            }
            let text = refused(&storage, &opts, &names[victim]);
            let expected = if empty { "found 0" } else { "found no file" };
            assert!(text.contains(expected), "victim {victim}, empty {empty}: {text}");
        }
    }
}

#[test]
fn a_deleted_or_damaged_state_file_is_corruption_naming_it() {
    let opts = small_opts(1024);
    let storage = closed_log(&opts);
    let state = opts.state_file_name();
    let bytes = read_file(storage.as_ref(), &state);
    set_len(storage.as_ref(), &state, bytes.len() as u64 - 1);
    refused(&storage, &opts, &state);
    storage.remove(&state).unwrap();
    let text = refused(&storage, &opts, &state);
    assert!(text.contains("found none"), "{text}");
}

/// A crash never leaves the log shorter than the state file says: what it records was durable.
/// The unsynced tail after the last Sync commit is torn and dropped quietly, as before.
#[test]
fn a_torn_unsynced_tail_after_a_crash_is_still_dropped_quietly() {
    for seed in 0..40 {
        let sim = SimStorage::new(seed);
        let storage: Arc<dyn Storage> = Arc::new(sim.booted());
        let opts = small_opts(1024);
        let (wal, _, _) = open(&storage, &opts, 1).unwrap();
        let mut acked = 0;
        for i in 1..=RECORDS {
            let lsn = wal.append(&payload(i, 100)).unwrap();
            let durability = if i % 9 == 0 { Durability::Sync } else { Durability::Buffered };
            wal.commit(lsn, durability).unwrap();
            if durability == Durability::Sync {
                acked = lsn;
            }
        }
        sim.crash(CrashMode::Random);
        drop(wal);
        let storage: Arc<dyn Storage> = Arc::new(sim.booted());
        let (_wal, _, replayed) = open(&storage, &opts, 1).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(replayed.len() as u64 >= acked, "seed {seed}: {} < {acked}", replayed.len());
        assert_replayed_range(&replayed, 1, replayed.len() as u64, 100);
    }
}

/// Rewrites a segment header as format version 1 (what the log wrote before the state file).
fn make_version_1(storage: &dyn Storage, name: &str) {
    let file = storage.open(name, OpenOptions::existing()).unwrap();
    let mut header = [0u8; 32];
    file.read_at(0, &mut header).unwrap();
    header[8..12].copy_from_slice(&1u32.to_le_bytes());
    let mut covered = header[..12].to_vec();
    covered.extend_from_slice(&header[16..]);
    let masked = crc32c::crc32c(&covered).rotate_right(15).wrapping_add(0xa282_ead8);
    header[12..16].copy_from_slice(&masked.to_le_bytes());
    file.write_at(0, &header).unwrap();
}

#[test]
fn a_log_written_before_the_state_file_opens_and_gains_one_at_close() {
    let opts = small_opts(1024);
    let storage = closed_log(&opts);
    storage.remove(&opts.state_file_name()).unwrap();
    for name in segment_names(storage.as_ref(), &opts) {
        make_version_1(storage.as_ref(), &name);
    }
    Wal::verify(storage.as_ref(), &opts).unwrap();
    let (wal, _, replayed) = open(&storage, &opts, 1).unwrap();
    assert_eq!(replayed.len() as u64, RECORDS);
    // A read-only session writes nothing, so the old log stays without a state file.
    wal.close().unwrap();
    assert!(!storage.exists(&opts.state_file_name()).unwrap());
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    let lsn = wal.append(b"one more").unwrap();
    wal.commit(lsn, Durability::Sync).unwrap();
    wal.close().unwrap();
    assert!(storage.exists(&opts.state_file_name()).unwrap());
    // Now protected: cutting the last segment (still version 1) is caught.
    let last = segment_names(storage.as_ref(), &opts).pop().unwrap();
    set_len(storage.as_ref(), &last, 40);
    refused(&storage, &opts, &last);
}

/// The protection an old log has until it is written again: the record rules alone. A cut at a
/// record boundary of its last segment looks like a clean end and is not detected.
#[test]
fn a_log_written_before_the_state_file_keeps_only_the_record_rules() {
    let opts = WalOptions { preallocate: false, ..small_opts(1024) };
    let storage = closed_log(&opts);
    storage.remove(&opts.state_file_name()).unwrap();
    let names = segment_names(storage.as_ref(), &opts);
    for name in &names {
        make_version_1(storage.as_ref(), name);
    }
    let last = names.last().unwrap();
    let positions = record_positions(&read_file(storage.as_ref(), last));
    set_len(storage.as_ref(), last, positions[positions.len() - 1].0);
    let (_wal, _, replayed) = open(&storage, &opts, 1).unwrap();
    assert!((replayed.len() as u64) < RECORDS + 1);
}

/// Truncation rewrites the state file before it releases segments, so a later open (with the
/// caller's new `min_lsn`) does not miss them, and a deleted survivor is still caught.
#[test]
fn truncation_keeps_the_state_file_in_step() {
    let opts = WalOptions { recycle_segments: 1, ..small_opts(1024) };
    let storage = closed_log(&opts);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in RECORDS + 1..=2 * RECORDS {
        wal.append(&payload(i, 100)).unwrap();
    }
    let synced = wal.sync().unwrap();
    wal.truncate_before(synced - 10).unwrap();
    wal.close().unwrap();
    let (_wal, _, replayed) = open(&storage, &opts, synced - 10).unwrap();
    assert!(!replayed.is_empty());
    drop(_wal);
    let names = segment_names(storage.as_ref(), &opts);
    storage.remove(&names[0]).unwrap();
    refused(&storage, &opts, &names[0]);
}
