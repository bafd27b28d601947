//! Recovery reads segments through a bounded window: opening (or verifying) a log of 64 MiB
//! segments never reads, or holds, more than `RECOVERY_READ_WINDOW_BYTES` or one record at a
//! time, and records and damage that straddle a window boundary are handled like any other.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use strata_core::{Durability, Error, RecoveryMode};
use strata_io::{HookStorage, MemStorage, OpenOptions, ReadHook, Storage};
use strata_wal::{Lsn, Wal, WalOptions, RECOVERY_READ_WINDOW_BYTES};

const FIRST_SEGMENT: &str = "wal-0000000000000001.log";
const WINDOW: usize = RECOVERY_READ_WINDOW_BYTES;
/// Where recovery's first window of a segment ends: it starts after the 32-byte segment header.
const FIRST_WINDOW_END: u64 = 32 + WINDOW as u64;

/// The longest single read over all files of `recorded_log`'s storage.
struct ReadLengthRecorder(Arc<AtomicUsize>);

impl ReadLengthRecorder {
    fn longest_read_bytes(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    fn forget_reads(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// Default options: 64 MiB preallocated segments.
fn recorded_log() -> (ReadLengthRecorder, Arc<dyn Storage>, WalOptions) {
    let (storage, longest) = HookStorage::recording_longest_read(Arc::new(MemStorage::new()));
    let opts = WalOptions::default();
    assert_eq!(opts.segment_bytes, 64 << 20);
    (ReadLengthRecorder(longest), Arc::new(storage), opts)
}

fn append_all(wal: &Wal, payloads: &[Vec<u8>], durability: Durability) -> Vec<(Lsn, Vec<u8>)> {
    let mut appended = Vec::new();
    for bytes in payloads {
        let lsn = wal.append(bytes).unwrap();
        wal.commit(lsn, durability).unwrap();
        appended.push((lsn, bytes.clone()));
    }
    appended
}

/// `(offset, lsn, record_bytes)` of the record of the first segment that holds file offset `at`.
fn record_holding(storage: &dyn Storage, at: u64) -> (u64, Lsn, u64) {
    let positions = record_positions(&read_file(storage, FIRST_SEGMENT));
    let index = positions.iter().rposition(|(offset, _, _)| *offset <= at).unwrap();
    let (offset, lsn, _) = positions[index];
    let end = positions.get(index + 1).map(|p| p.0).unwrap();
    assert!(end > at, "no record holds offset {at}");
    (offset, lsn, end - offset)
}

#[test]
fn recovering_a_64_mib_segment_never_reads_more_than_a_window_at_once() {
    let (recorder, storage, opts) = recorded_log();
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    let payloads: Vec<Vec<u8>> = (1..=20).map(|lsn| payload(lsn, 400)).collect();
    let appended = append_all(&wal, &payloads, Durability::Sync);
    wal.close().unwrap();
    assert_eq!(storage.open(FIRST_SEGMENT, OpenOptions::existing()).unwrap().len().unwrap(), 64 << 20);

    recorder.forget_reads();
    let (wal, report, replayed) = open(&storage, &opts, 1).unwrap();
    assert_replayed_from(&replayed, &appended, 1);
    assert_eq!(report.segments_read, 1);
    assert!(
        recorder.longest_read_bytes() <= WINDOW,
        "open read {} bytes at once",
        recorder.longest_read_bytes()
    );
    wal.close().unwrap();

    recorder.forget_reads();
    let verified = Wal::verify(storage.as_ref(), &opts).unwrap();
    assert_eq!(verified.bytes_checked, 64 << 20, "bytes_checked still counts the whole segment");
    assert!(
        recorder.longest_read_bytes() <= WINDOW,
        "verify read {} bytes at once",
        recorder.longest_read_bytes()
    );
}

#[test]
fn records_larger_than_the_window_and_across_its_boundaries_replay_in_order() {
    let (recorder, storage, opts) = recorded_log();
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    // Small records past the first window end, then large ones mixed with small ones.
    let mut payloads: Vec<Vec<u8>> = (1..=3000).map(|lsn| payload(lsn, 1000)).collect();
    let large_bytes = [WINDOW + 1000, 2 * WINDOW + 8, WINDOW - 8, 3 * WINDOW / 2];
    for (i, len) in large_bytes.into_iter().enumerate() {
        payloads.push((0..len).map(|b| (b * 7 + i) as u8).collect());
        payloads.extend((0..300).map(|lsn| payload(lsn + 5000 * i as u64, 3000)));
    }
    let appended = append_all(&wal, &payloads, Durability::Buffered);
    wal.close().unwrap();
    let (straddler, _, straddler_bytes) = record_holding(storage.as_ref(), FIRST_WINDOW_END);
    assert!(
        straddler < FIRST_WINDOW_END && straddler_bytes < 2000,
        "a small record straddles the first window"
    );
    assert_eq!(segment_names(storage.as_ref(), &opts), [FIRST_SEGMENT]);

    recorder.forget_reads();
    let (_wal, report, replayed) = open(&storage, &opts, 1).unwrap();
    assert_replayed_from(&replayed, &appended, 1);
    assert_eq!(report.records_replayed, appended.len() as u64);
    let largest_record_bytes = (24 + 2 * WINDOW + 8).next_multiple_of(8);
    let longest = recorder.longest_read_bytes();
    assert!(longest <= largest_record_bytes, "read {longest} bytes at once");
}

/// 1500 records of 700..=1000 non-zero bytes, each committed with `Sync`: the record holding
/// `FIRST_WINDOW_END` straddles the first window.
fn log_across_the_first_window(storage: &Arc<dyn Storage>, opts: &WalOptions) -> Wal {
    let (wal, _, _) = open(storage, opts, 1).unwrap();
    for lsn in 1..=1500u64 {
        let bytes = vec![lsn as u8 | 1; 700 + (lsn as usize * 37) % 301];
        let lsn = wal.append(&bytes).unwrap();
        wal.commit(lsn, Durability::Sync).unwrap();
    }
    wal
}

#[test]
fn a_corrupt_record_straddling_a_window_boundary_is_reported_at_its_offset() {
    for damaged_side in [FIRST_WINDOW_END - 1, FIRST_WINDOW_END] {
        let (_, storage, opts) = recorded_log();
        log_across_the_first_window(&storage, &opts).close().unwrap();
        let (offset, lsn, record_bytes) = record_holding(storage.as_ref(), FIRST_WINDOW_END);
        assert!(offset + record_bytes > FIRST_WINDOW_END && offset < FIRST_WINDOW_END);
        flip_bit(storage.as_ref(), FIRST_SEGMENT, damaged_side, 3);

        let strict = with_mode(opts.clone(), RecoveryMode::AbsoluteConsistency);
        for opts in [opts.clone(), strict] {
            let mut replayed = Vec::new();
            let err = Wal::open(storage.clone(), opts.clone(), 1, &mut |lsn, _| {
                replayed.push(lsn);
                Ok(())
            })
            .map(|_| ())
            .unwrap_err();
            assert!(
                matches!(&err, Error::Corruption { file, offset: at, what }
                    if file == FIRST_SEGMENT && *at == offset && what.contains("not a torn tail")),
                "damage at {damaged_side}: {err}"
            );
            assert_eq!(replayed, (1..lsn).collect::<Vec<_>>());
            let verified = Wal::verify(storage.as_ref(), &opts).unwrap_err();
            assert!(matches!(verified, Error::Corruption { offset: at, .. } if at == offset), "{verified}");
        }
    }
}

#[test]
fn a_torn_last_record_straddling_a_window_boundary_is_dropped() {
    let (_, storage, opts) = recorded_log();
    let wal = log_across_the_first_window(&storage, &opts);
    drop(wal); // no close: nothing after the last records says they were made durable
    let (offset, lsn, record_bytes) = record_holding(storage.as_ref(), FIRST_WINDOW_END);
    let positions = record_positions(&read_file(storage.as_ref(), FIRST_SEGMENT));
    // Cut the log after the straddling record, as if the process had died right after writing it.
    let file = storage.open(FIRST_SEGMENT, OpenOptions::existing()).unwrap();
    let tail_start = offset + record_bytes;
    file.write_at(tail_start, &vec![0u8; (positions.last().unwrap().0 - tail_start) as usize + 4096])
        .unwrap();
    flip_bit(storage.as_ref(), FIRST_SEGMENT, FIRST_WINDOW_END, 1);
    let image = read_file(storage.as_ref(), FIRST_SEGMENT);
    let last_nonzero = image.iter().rposition(|&b| b != 0).unwrap() as u64;
    assert!(last_nonzero < offset + record_bytes);

    let strict = with_mode(opts.clone(), RecoveryMode::AbsoluteConsistency);
    let err = Wal::open(storage.clone(), strict, 1, &mut |_, _| Ok(())).map(|_| ()).unwrap_err();
    assert!(
        matches!(&err, Error::Corruption { file, offset: at, what }
            if file == FIRST_SEGMENT && *at == offset && what.contains("torn tail")),
        "{err}"
    );
    let (_wal, report, replayed) = open(&storage, &opts, 1).unwrap();
    assert_eq!(replayed.last().map(|r| r.0), Some(lsn - 1));
    assert_eq!(report.torn_tail_bytes_dropped, last_nonzero + 1 - offset, "{report:?}");
    assert_eq!(report.next_lsn, lsn);
}

/// A torn tail in a 64 MiB preallocated segment: recovery reads the zeros after the break once
/// (to measure the tail it drops), not a second time looking for durable records in them.
#[test]
fn a_torn_tail_reads_the_segments_trailing_zeros_once() {
    let (_, storage, opts) = recorded_log();
    drop(log_across_the_first_window(&storage, &opts)); // no close
    let positions = record_positions(&read_file(storage.as_ref(), FIRST_SEGMENT));
    let (last, _, _) = *positions.iter().max_by_key(|(_, lsn, _)| *lsn).unwrap();
    flip_bit(storage.as_ref(), FIRST_SEGMENT, last + 40, 2); // nothing after it says it was durable
    let total = Arc::new(AtomicUsize::new(0));
    let counted = total.clone();
    let hook: ReadHook = Arc::new(move |_, _, len| {
        counted.fetch_add(len, Ordering::Relaxed);
        Ok(())
    });
    let counting: Arc<dyn Storage> = Arc::new(HookStorage::reads(storage.clone(), hook));
    let (_wal, report, _) = open(&counting, &opts, 1).unwrap();
    assert!(report.torn_tail_bytes_dropped > 0, "{report:?}");
    let read = total.load(Ordering::Relaxed) as u64;
    assert!(read < (64 << 20) + (16 << 20), "recovery read {read} bytes of a 64 MiB segment");
}
