//! Damaged logs: mid-log corruption is always an error naming the file and offset; a damaged
//! tail that was never acknowledged is dropped (or reported in AbsoluteConsistency mode).

mod common;

use std::sync::Arc;

use common::*;
use strata_core::{Durability, Error, RecoveryMode};
use strata_io::{MemStorage, OpenOptions, SimStorage, Storage};
use strata_wal::{Lsn, Wal, WalOptions};

const FIRST_SEGMENT: &str = "wal-0000000000000001.log";

fn strict(opts: &WalOptions) -> WalOptions {
    with_mode(opts.clone(), RecoveryMode::AbsoluteConsistency)
}

/// `count` records, each committed with `Sync`, in segments of `segment_bytes`.
fn synced_log(sim: &SimStorage, segment_bytes: u64, count: u64) -> (Arc<dyn Storage>, WalOptions) {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let opts = small_opts(segment_bytes);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=count {
        let lsn = wal.append(&payload(i, 100)).unwrap();
        wal.commit(lsn, Durability::Sync).unwrap();
    }
    wal.close().unwrap();
    (storage, opts)
}

fn position_of(storage: &dyn Storage, name: &str, lsn: Lsn) -> u64 {
    let bytes = read_file(storage, name);
    record_positions(&bytes).into_iter().find(|p| p.1 == lsn).unwrap().0
}

/// Opens and returns the error and the lsns replayed before it.
fn open_err(storage: &Arc<dyn Storage>, opts: &WalOptions) -> (Error, Vec<Lsn>) {
    let mut replayed = Vec::new();
    let result = Wal::open(storage.clone(), opts.clone(), 1, &mut |lsn, _| {
        replayed.push(lsn);
        Ok(())
    });
    (result.map(|_| ()).unwrap_err(), replayed)
}

/// Opening in both recovery modes reports damage at (`file`, `offset`) that is "not a torn tail",
/// after replaying exactly the records before `damaged_lsn`.
fn assert_not_a_torn_tail_in_both_modes(
    storage: &Arc<dyn Storage>,
    opts: &WalOptions,
    (file, offset): (&str, u64),
    damaged_lsn: Lsn,
    context: &str,
) {
    for opts in [opts.clone(), strict(opts)] {
        let (err, replayed) = open_err(storage, &opts);
        match &err {
            Error::Corruption { file: f, offset: at, what } => {
                assert_eq!((f.as_str(), *at), (file, offset), "{context}: {what}");
                assert!(what.contains("not a torn tail"), "{context}: {what}");
            }
            other => panic!("{context}: {other}"),
        }
        assert_eq!(
            replayed,
            (1..damaged_lsn).collect::<Vec<_>>(),
            "{context}: nothing past the damage is replayed"
        );
    }
}

#[test]
fn a_damaged_record_followed_by_synced_records_is_corruption_in_both_modes() {
    // Byte offsets inside record 10: crc, payload_len, lsn, synced_lsn, payload.
    for (case, delta) in [0u64, 5, 9, 17, 30].into_iter().enumerate() {
        let sim = SimStorage::new(case as u64);
        let (storage, opts) = synced_log(&sim, 64 << 10, 50);
        let offset = position_of(storage.as_ref(), FIRST_SEGMENT, 10);
        sim.flip_bit(FIRST_SEGMENT, offset + delta, 3).unwrap();
        let context = format!("byte +{delta}");
        assert_not_a_torn_tail_in_both_modes(&storage, &opts, (FIRST_SEGMENT, offset), 10, &context);
        assert!(Wal::verify(storage.as_ref(), &opts).unwrap_err().is_corruption());
    }
}

#[test]
fn damage_in_a_full_segment_is_proven_by_records_in_later_segments() {
    let sim = SimStorage::new(10);
    let (storage, opts) = synced_log(&sim, 1024, 60);
    let segments = segment_names(storage.as_ref(), &opts);
    assert!(segments.len() >= 5);
    let positions = record_positions(&read_file(storage.as_ref(), &segments[1]));
    let (offset, lsn, _) = *positions.last().unwrap();
    sim.flip_bit(&segments[1], offset + 26, 0).unwrap();
    let (err, replayed) = open_err(&storage, &opts);
    assert!(
        matches!(&err, Error::Corruption { file, offset: at, .. } if *file == segments[1] && *at == offset),
        "{err}"
    );
    assert_eq!(replayed.last(), Some(&(lsn - 1)));
}

#[test]
fn a_damaged_last_record_never_acknowledged_is_a_torn_tail() {
    let sim = SimStorage::new(11);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let opts = small_opts(64 << 10);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=20u64 {
        let lsn = wal.append(&payload(i, 100)).unwrap();
        wal.commit(lsn, Durability::Sync).unwrap();
    }
    let last = wal.append(b"the last record, written but never acknowledged").unwrap();
    wal.commit(last, Durability::Buffered).unwrap();
    drop(wal); // the process ends without flush or close: no later record says `last` is durable
    let offset = position_of(storage.as_ref(), FIRST_SEGMENT, last);
    sim.flip_bit(FIRST_SEGMENT, offset + 30, 6).unwrap();

    let (err, replayed) = open_err(&storage, &strict(&opts));
    assert!(
        matches!(&err, Error::Corruption { file, offset: at, what } if file == FIRST_SEGMENT && *at == offset && what.contains("torn tail")),
        "{err}"
    );
    assert_eq!(replayed.len(), 20);
    assert!(Wal::verify(storage.as_ref(), &strict(&opts)).unwrap_err().is_corruption());
    assert_eq!(Wal::verify(storage.as_ref(), &opts).unwrap().records_checked, 20);

    let (wal, report, replayed) = open(&storage, &opts, 1).unwrap();
    assert_replayed_range(&replayed, 1, 20, 100);
    assert!(report.torn_tail_bytes_dropped >= 24, "{report:?}");
    assert_eq!(report.next_lsn, 21);
    assert_eq!(
        sim.durable_contents(FIRST_SEGMENT).unwrap().len() as u64,
        offset,
        "repair truncated the tail"
    );
    let lsn = wal.append(b"replacement 21").unwrap();
    wal.commit(lsn, Durability::Sync).unwrap();
    assert_eq!(segment_names(storage.as_ref(), &opts), [FIRST_SEGMENT], "the repaired segment continues");
    assert_eq!(sim.durable_contents(FIRST_SEGMENT).unwrap().len() as u64, opts.segment_bytes, "re-extended");
    assert_eq!(position_of(storage.as_ref(), FIRST_SEGMENT, 21), offset);
    wal.close().unwrap();
    let (_wal, _, replayed) = open(&storage, &strict(&opts), 1).unwrap();
    assert_eq!(replayed.last().unwrap(), &(21, b"replacement 21".to_vec()));
}

#[test]
fn a_bad_header_on_a_segment_that_is_not_the_last_is_corruption() {
    let sim = SimStorage::new(12);
    let (storage, opts) = synced_log(&sim, 1024, 40);
    let segments = segment_names(storage.as_ref(), &opts);
    sim.flip_bit(&segments[2], 20, 1).unwrap();
    for opts in [opts.clone(), strict(&opts)] {
        let (err, _) = open_err(&storage, &opts);
        assert!(matches!(&err, Error::Corruption { file, offset: 0, .. } if *file == segments[2]), "{err}");
    }
}

#[test]
fn a_bad_header_on_the_last_segment_holding_synced_records_is_corruption() {
    let sim = SimStorage::new(13);
    let (storage, opts) = synced_log(&sim, 1024, 40);
    let last = segment_names(storage.as_ref(), &opts).pop().unwrap();
    assert!(record_positions(&read_file(storage.as_ref(), &last)).len() >= 2);
    sim.flip_bit(&last, 2, 0).unwrap();
    let (err, _) = open_err(&storage, &opts);
    assert!(matches!(&err, Error::Corruption { file, offset: 0, .. } if *file == last), "{err}");
}

#[test]
fn an_unfinished_last_segment_without_records_is_removed_in_both_modes() {
    for mode in [RecoveryMode::TolerateTornTail, RecoveryMode::AbsoluteConsistency] {
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        let opts = with_mode(small_opts(1024), mode);
        let (wal, _, _) = open(&storage, &opts, 1).unwrap();
        for i in 1..=30u64 {
            wal.append(&payload(i, 100)).unwrap();
        }
        wal.close().unwrap();
        let mut segments = segment_names(storage.as_ref(), &opts);
        let next_id = opts.parse_segment_name(segments.last().unwrap()).unwrap() + 1;
        let unfinished = opts.segment_name(next_id);
        let file = storage.open(&unfinished, OpenOptions::create()).unwrap();
        file.write_at(0, b"STRWAL01\x01\x00").unwrap();
        drop(file);
        let (wal, report, replayed) = open(&storage, &opts, 1).unwrap();
        assert_replayed_range(&replayed, 1, 30, 100);
        assert!(!storage.exists(&unfinished).unwrap(), "{mode:?}");
        assert!(report.torn_tail_bytes_dropped > 0);
        wal.append(b"31").unwrap();
        wal.close().unwrap();
        segments.push(opts.segment_name(next_id + 1));
        assert_eq!(
            segment_names(storage.as_ref(), &opts),
            segments,
            "the id of the removed file is not reused"
        );
    }
}

#[test]
fn a_missing_segment_in_the_middle_is_corruption() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let opts = small_opts(1024);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=60u64 {
        wal.append(&payload(i, 100)).unwrap();
    }
    wal.close().unwrap();
    let segments = segment_names(storage.as_ref(), &opts);
    storage.remove(&segments[2]).unwrap();
    let (err, replayed) = open_err(&storage, &opts);
    // The WAL state file lists it, so the error names the missing segment itself, and recovery
    // refuses before replaying anything.
    assert!(matches!(&err, Error::Corruption { file, offset: 0, .. } if *file == segments[2]), "{err}");
    assert!(err.to_string().contains("found no file"), "{err}");
    assert!(replayed.is_empty(), "{replayed:?}");
    // Without the state file (a log written before it existed) the lsn gap still gives it away.
    storage.remove(&opts.state_file_name()).unwrap();
    let (err, _) = open_err(&storage, &opts);
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn flipped_bits_found_by_verify_through_the_plain_file_interface() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let opts = small_opts(2048);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=100u64 {
        let lsn = wal.append(&payload(i, 100)).unwrap();
        wal.commit(lsn, Durability::Sync).unwrap();
    }
    wal.close().unwrap();
    let segments = segment_names(storage.as_ref(), &opts);
    let report = Wal::verify(storage.as_ref(), &opts).unwrap();
    assert_eq!(report.files_checked, segments.len() as u64);
    assert_eq!(report.records_checked, 101, "100 records and the durability marker close() wrote");
    let total: u64 = segments.iter().map(|n| read_file(storage.as_ref(), n).len() as u64).sum();
    assert_eq!(report.bytes_checked, total);
    let offset = position_of(storage.as_ref(), &segments[0], 3);
    flip_bit(storage.as_ref(), &segments[0], offset + 25, 4);
    let err = Wal::verify(storage.as_ref(), &opts).unwrap_err();
    assert!(
        matches!(&err, Error::Corruption { file, offset: at, .. } if *file == segments[0] && *at == offset)
    );
}

#[test]
fn stale_records_in_recycled_segments_end_the_log_cleanly_even_in_strict_mode() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let opts = strict(&WalOptions { recycle_segments: 2, ..small_opts(1024) });
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for _ in 0..200 {
        wal.append(&[0x5A; 40]).unwrap(); // 64-byte records fill every segment
    }
    let checkpoint = wal.sync().unwrap();
    wal.truncate_before(checkpoint).unwrap();
    wal.close().unwrap();
    assert_eq!(free_names(storage.as_ref(), &opts).len(), 2);

    // The log continues the last segment until it is full, then takes a recycled one.
    let (wal, _, _) = open(&storage, &opts, checkpoint).unwrap();
    let mut lsns = vec![checkpoint];
    let mut in_recycled = 0;
    while in_recycled < 3 {
        let lsn = wal.append(&[lsns.len() as u8; 60]).unwrap(); // 88-byte records: they end inside a stale one
        wal.commit(lsn, Durability::Buffered).unwrap();
        lsns.push(lsn);
        in_recycled += u64::from(wal.stats().segments_recycled == 1);
    }
    drop(wal); // no close
    let active = segment_names(storage.as_ref(), &opts).pop().unwrap();
    let bytes = read_file(storage.as_ref(), &active);
    let end = 32 + 3 * 88;
    assert_eq!(record_positions(&bytes).len(), 3);
    assert!(bytes[end + 24..end + 200].iter().any(|&b| b != 0), "stale records follow the end marker");

    let (wal, report, replayed) = open(&storage, &opts, checkpoint).unwrap();
    assert_eq!(replayed.iter().map(|r| r.0).collect::<Vec<Lsn>>(), lsns);
    assert_eq!(report.torn_tail_bytes_dropped, 0);
    Wal::verify(storage.as_ref(), &opts).unwrap();

    // Continuing that segment first cuts the stale bytes off, then extends it again.
    let lsn = wal.append(&[0xEE; 60]).unwrap();
    wal.commit(lsn, Durability::Buffered).unwrap();
    lsns.push(lsn);
    assert_eq!(segment_names(storage.as_ref(), &opts).pop().unwrap(), active);
    let bytes = read_file(storage.as_ref(), &active);
    assert_eq!(bytes.len() as u64, opts.segment_bytes);
    assert!(bytes[end + 88..].iter().all(|&b| b == 0), "stale records were cut off");
    wal.close().unwrap();
    let (_wal, report, replayed) = open(&storage, &opts, checkpoint).unwrap();
    assert_eq!(replayed.iter().map(|r| r.0).collect::<Vec<Lsn>>(), lsns);
    assert_eq!(report.torn_tail_bytes_dropped, 0);
}

#[test]
fn recovery_never_panics_and_never_returns_damaged_records() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    let original: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let opts = WalOptions { preallocate: false, ..small_opts(1024) };
    let (wal, _, _) = open(&original, &opts, 1).unwrap();
    for i in 1..=80u64 {
        let lsn = wal.append(&payload(i, 100)).unwrap();
        wal.commit(lsn, if i % 3 == 0 { Durability::Sync } else { Durability::Buffered }).unwrap();
    }
    wal.close().unwrap();
    let mut names = segment_names(original.as_ref(), &opts);
    // The state file is copied undamaged: it makes every damage to what close made durable an
    // error (rules S1–S3); the record rules alone are tested on crafted logs elsewhere.
    names.push(opts.state_file_name());
    let images: Vec<Vec<u8>> = names.iter().map(|n| read_file(original.as_ref(), n)).collect();

    let mut rng = SmallRng::seed_from_u64(0xC0FFEE);
    let mut accepted = 0;
    for round in 0..300 {
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        // Damage one segment, more often a late one (where a tail can be tolerated).
        let segments = names.len() - 1;
        let victim = segments - 1 - rng.gen_range(0..segments).min(rng.gen_range(0..segments));
        for (index, (name, image)) in names.iter().zip(&images).enumerate() {
            let mut image = image.clone();
            match if index == victim { rng.gen_range(0..5) } else { 9 } {
                0 => image.truncate(rng.gen_range(0..=image.len())),
                1..=3 => {
                    for _ in 0..rng.gen_range(1..4) {
                        let at = rng.gen_range(0..image.len());
                        image[at] ^= 1 << rng.gen_range(0..8);
                    }
                }
                4 if rng.gen_bool(0.3) => continue, // the segment goes missing
                _ => {}
            }
            storage.open(name, OpenOptions::create()).unwrap().write_at(0, &image).unwrap();
        }
        let mode = if rng.gen_bool(0.5) {
            RecoveryMode::TolerateTornTail
        } else {
            RecoveryMode::AbsoluteConsistency
        };
        let _ = Wal::verify(storage.as_ref(), &with_mode(opts.clone(), mode));
        if let Ok((_wal, _, replayed)) = open(&storage, &with_mode(opts.clone(), mode), 1) {
            accepted += 1;
            for (i, (lsn, bytes)) in replayed.iter().enumerate() {
                assert_eq!(*lsn, i as u64 + 1, "round {round}");
                assert_eq!(bytes, &payload(*lsn, 100), "round {round}: damaged lsn {lsn} was replayed");
            }
            // Everything was durable after close: an accepted log lost nothing.
            assert_eq!(replayed.len(), 80, "round {round}: acknowledged records lost silently");
        }
    }
    // Damage that misses every record (a flip in the trailing bytes, a cut at the end) is fine.
    assert!(accepted < 150, "{accepted} of 300 damaged logs were accepted");
}

/// A flipped bit in the last data records is proven to be corruption by the durability marker
/// that `sync()` (an engine's flush) or `close()` wrote after them.
#[test]
fn a_flipped_bit_in_the_last_records_after_sync_or_close_is_corruption_in_both_modes() {
    let last_payload = b"the last record before the flush".to_vec();
    for (case, delta) in [0u64, 5, 9, 17, 30].into_iter().enumerate() {
        for close in [false, true] {
            let context = format!("byte +{delta}, {}", if close { "close" } else { "sync" });
            let sim = SimStorage::new(case as u64);
            let storage: Arc<dyn Storage> = Arc::new(sim.clone());
            let opts = small_opts(64 << 10);
            let (wal, _, _) = open(&storage, &opts, 1).unwrap();
            for i in 1..=19u64 {
                let lsn = wal.append(&payload(i, 100)).unwrap();
                wal.commit(lsn, Durability::Buffered).unwrap();
            }
            let last = wal.append(&last_payload).unwrap();
            wal.commit(last, Durability::Sync).unwrap();
            if close {
                wal.close().unwrap();
            } else {
                assert_eq!(wal.sync().unwrap(), last);
            }
            drop(wal);
            let offset = position_of(storage.as_ref(), FIRST_SEGMENT, last);
            sim.flip_bit(FIRST_SEGMENT, offset + delta, 2).unwrap();
            assert_not_a_torn_tail_in_both_modes(&storage, &opts, (FIRST_SEGMENT, offset), last, &context);
            for opts in [opts.clone(), strict(&opts)] {
                let err = Wal::verify(storage.as_ref(), &opts).unwrap_err();
                assert!(
                    matches!(&err, Error::Corruption { file, offset: at, .. } if file == FIRST_SEGMENT && *at == offset),
                    "{context}: {err}"
                );
            }
        }
    }
}

/// The inherent limit: a `Sync` commit writes no marker, so when the process ends without a
/// flush or close, nothing after the last records says they were durable, and damage to them
/// looks exactly like a torn tail.
#[test]
fn damage_to_the_last_sync_commits_without_a_flush_still_looks_like_a_torn_tail() {
    let sim = SimStorage::new(21);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let opts = small_opts(64 << 10);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=20u64 {
        let lsn = wal.append(&payload(i, 100)).unwrap();
        wal.commit(lsn, Durability::Sync).unwrap();
    }
    assert_eq!(wal.stats().durability_markers_appended, 0, "commit(Sync) writes no marker");
    drop(wal);
    let offset = position_of(storage.as_ref(), FIRST_SEGMENT, 20);
    sim.flip_bit(FIRST_SEGMENT, offset + 9, 0).unwrap();
    let (err, _) = open_err(&storage, &strict(&opts));
    assert!(matches!(&err, Error::Corruption { what, .. } if what.contains("torn tail")), "{err}");
    let (_wal, report, replayed) = open(&storage, &opts, 1).unwrap();
    assert_replayed_range(&replayed, 1, 19, 100);
    assert!(report.torn_tail_bytes_dropped > 0);
}
