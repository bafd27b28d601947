//! Power loss on SimStorage: every record whose `commit(Sync)` returned survives, what survives
//! is a prefix of what was appended, and repairs leave nothing a later recovery misreads.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Error, RecoveryMode};
use strata_io::{CrashMode, OpenOptions, SimStorage, Storage};
use strata_wal::WalOptions;

/// Runs rounds of workload + crash + recovery; returns (recoveries that lost records, torn tails dropped).
fn crash_rounds(seed: u64, mode: CrashMode) -> (u64, u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let sim = SimStorage::new(seed);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let opts = random_opts(&mut rng);
    let mut model = Model::default();
    let mut torn_tails = 0;
    for round in 0..4 {
        let context = format!("seed {seed} {mode:?} round {round} {opts:?}");
        let (wal, report, replayed) =
            open(&storage, &opts, model.min_lsn()).unwrap_or_else(|e| panic!("{context}: open failed: {e}"));
        model.check_recovery(&replayed, &context);
        torn_tails += u64::from(report.torn_tail_bytes_dropped > 0);
        let last_kept = model.appended.last().map_or(0, |(lsn, _)| *lsn);
        assert!(
            report.next_lsn > last_kept && report.next_lsn >= model.min_lsn(),
            "{context}: next lsn {} after lsn {last_kept}",
            report.next_lsn
        );
        let ops = rng.gen_range(0..80);
        run_workload(&wal, &mut model, &mut rng, ops).unwrap_or_else(|e| panic!("{context}: {e}"));
        sim.crash(mode);
    }
    let (_wal, _, replayed) = open(&storage, &opts, model.min_lsn()).unwrap();
    model.check_recovery(&replayed, &format!("seed {seed} final"));
    (model.recoveries_losing_records, torn_tails)
}

/// `crash_rounds` over `seeds`: (recoveries that lost unacknowledged records, torn tails dropped).
fn crash_rounds_over(seeds: std::ops::Range<u64>, mode: CrashMode) -> (u64, u64) {
    seeds.map(|seed| crash_rounds(seed, mode)).fold((0, 0), |(l, t), (dl, dt)| (l + dl, t + dt))
}

#[test]
fn acknowledged_records_survive_dropped_unsynced_data() {
    let (losing, _) = crash_rounds_over(0..120, CrashMode::DropUnsynced);
    assert!(losing > 100, "only {losing} recoveries lost unacknowledged records");
}

#[test]
fn acknowledged_records_survive_random_torn_writes() {
    let (losing, torn) = crash_rounds_over(1000..1160, CrashMode::Random);
    assert!(losing > 100 && torn > 20, "{losing} recoveries lost records, {torn} dropped a torn tail");
}

/// Writeback in any order (SimStorage `Reordered`): a later unsynced page may survive an earlier
/// one, so the log can hold records after a hole; recovery must still keep every acknowledged
/// record and replay only a prefix of the rest.
#[test]
fn acknowledged_records_survive_reordered_writeback() {
    let (losing, _) = crash_rounds_over(2000..2120, CrashMode::Reordered);
    assert!(losing > 50, "only {losing} recoveries lost unacknowledged records");
}

/// Sync a few records, leave a large one written but unsynced, crash with torn writes.
fn torn_tail_candidate(seed: u64) -> (SimStorage, Arc<dyn Storage>, WalOptions) {
    let sim = SimStorage::new(seed);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let opts = small_opts(64 << 10);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=5u64 {
        let lsn = wal.append(&payload(i, 100)).unwrap();
        wal.commit(lsn, Durability::Sync).unwrap();
    }
    for i in 6..=8u64 {
        let lsn = wal.append(&vec![i as u8; 700]).unwrap();
        wal.commit(lsn, Durability::Buffered).unwrap();
    }
    sim.crash(CrashMode::Random);
    (sim, storage, opts)
}

#[test]
fn absolute_consistency_reports_a_torn_tail_that_tolerate_mode_drops() {
    let mut torn = 0;
    for seed in 0..60 {
        let (_sim, storage, opts) = torn_tail_candidate(seed);
        let strict = with_mode(opts.clone(), RecoveryMode::AbsoluteConsistency);
        let strict_result = open(&storage, &strict, 1).map(|(_, report, replayed)| (report, replayed));
        let (_wal, report, replayed) = open(&storage, &opts, 1).unwrap();
        assert!(replayed.len() >= 5, "seed {seed}: synced records lost");
        match strict_result {
            Err(Error::Corruption { file, what, .. }) => {
                torn += 1;
                assert_eq!(file, "wal-0000000000000001.log", "seed {seed}");
                assert!(what.contains("torn tail"), "seed {seed}: {what}");
                assert!(report.torn_tail_bytes_dropped > 0, "seed {seed}: {report:?}");
            }
            Ok((strict_report, strict_replayed)) => {
                assert_eq!(
                    report.torn_tail_bytes_dropped, 0,
                    "seed {seed}: strict mode accepted a torn tail"
                );
                assert_eq!(strict_replayed, replayed);
                assert_eq!(strict_report.torn_tail_bytes_dropped, 0);
            }
            Err(other) => panic!("seed {seed}: {other}"),
        }
    }
    assert!(torn >= 10, "only {torn} of 60 crashes tore the tail");
}

#[test]
fn repaired_torn_tail_is_not_mistaken_for_corruption_after_the_next_crash() {
    let mut torn = 0;
    for seed in 0..60 {
        let (sim, storage, opts) = torn_tail_candidate(seed);
        let (wal, report, replayed) = open(&storage, &opts, 1).unwrap();
        torn += u64::from(report.torn_tail_bytes_dropped > 0);
        let mut expected: Vec<Vec<u8>> = replayed.into_iter().map(|(_, p)| p).collect();
        for i in 0..6u8 {
            let bytes = vec![0xA0 + i; 40];
            let lsn = wal.append(&bytes).unwrap();
            wal.commit(lsn, Durability::Sync).unwrap();
            expected.push(bytes);
        }
        sim.crash(CrashMode::Random);
        let (_wal, _, replayed) = open(&storage, &opts, 1)
            .unwrap_or_else(|e| panic!("seed {seed}: false corruption after repair: {e}"));
        let replayed: Vec<Vec<u8>> = replayed.into_iter().map(|(_, p)| p).collect();
        assert_eq!(replayed, expected, "seed {seed}");
    }
    assert!(torn >= 10, "only {torn} of 60 crashes tore the tail");
}

#[test]
fn reopening_without_a_crash_makes_replayed_records_durable_first() {
    // A process crash (no power loss) leaves written-but-unsynced records readable; once they are
    // replayed, later records name them in synced_lsn, so they must be durable.
    let sim = SimStorage::new(7);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let opts = small_opts(4096);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=10u64 {
        let lsn = wal.append(&payload(i, 100)).unwrap();
        wal.commit(lsn, Durability::Buffered).unwrap();
    }
    drop(wal);
    let (wal, _, replayed) = open(&storage, &opts, 1).unwrap();
    assert_eq!(replayed.len(), 10);
    let lsn = wal.append(b"eleven").unwrap();
    wal.commit(lsn, Durability::Sync).unwrap();
    sim.crash(CrashMode::DropUnsynced);
    let (_wal, _, replayed) = open(&storage, &opts, 1).unwrap();
    assert_eq!(replayed.len(), 11);
}

/// Rounds of workload + torn-write crash + recovery in one large segment: every round after the
/// first continues the segment the previous one left, often right after a repaired torn tail.
#[test]
fn continuing_the_last_segment_across_torn_tail_repairs_loses_no_acknowledged_record() {
    let (mut torn_then_continued, mut losing) = (0, 0);
    for seed in 2000..2080 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let sim = SimStorage::new(seed);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let opts = WalOptions { preallocate: rng.gen_bool(0.5), ..random_opts(&mut rng) };
        let opts = WalOptions { segment_bytes: 1 << 20, ..opts };
        let mut model = Model::default();
        let mut repaired = false;
        for round in 0..5 {
            let context = format!("seed {seed} round {round} {opts:?}");
            let (wal, report, replayed) = open(&storage, &opts, model.min_lsn())
                .unwrap_or_else(|e| panic!("{context}: false corruption after a repair: {e}"));
            model.check_recovery(&replayed, &context);
            let ops = rng.gen_range(1..60);
            run_workload(&wal, &mut model, &mut rng, ops).unwrap_or_else(|e| panic!("{context}: {e}"));
            assert!(segment_names(storage.as_ref(), &opts).len() <= 1, "{context}: a second segment");
            torn_then_continued += u64::from(repaired && wal.stats().records_appended > 0);
            repaired = report.torn_tail_bytes_dropped > 0;
            sim.crash(CrashMode::Random);
        }
        let (wal, _, replayed) = open(&storage, &opts, model.min_lsn()).unwrap();
        model.check_recovery(&replayed, &format!("seed {seed} final"));
        losing += model.recoveries_losing_records;
        wal.close().unwrap();
        drop(wal);
        let strict = with_mode(opts.clone(), RecoveryMode::AbsoluteConsistency);
        let (_wal, report, replayed) = open(&storage, &strict, model.min_lsn())
            .unwrap_or_else(|e| panic!("seed {seed}: strict reopen after a clean close: {e}"));
        model.check_recovery(&replayed, &format!("seed {seed} strict"));
        assert_eq!(report.torn_tail_bytes_dropped, 0);
    }
    assert!(
        torn_then_continued > 30 && losing > 100,
        "{torn_then_continued} rounds continued after a repair, {losing} recoveries lost records"
    );
}

/// A power loss during the fdatasync of the durability marker `sync()` appends: the data it had
/// already made durable survives, and a torn marker is a torn tail like any other.
#[test]
fn a_torn_durability_marker_is_tolerated() {
    let (mut torn, mut intact, mut lost) = (0, 0, 0);
    for seed in 0..200 {
        let sim = SimStorage::new(seed);
        let CrashAtSync { storage: crashing, file_syncs, crash_at_sync } = CrashAtSync::new(sim.clone());
        let opts = small_opts(64 << 10);
        let (wal, _, _) = open(&crashing, &opts, 1).unwrap();
        let count = 5 + seed % 20;
        for i in 1..=count {
            let lsn = wal.append(&payload(i, 100)).unwrap();
            wal.commit(lsn, Durability::Buffered).unwrap();
        }
        // sync(): the first fdatasync covers the records, the second one the marker.
        crash_at_sync.store(file_syncs.load(Ordering::SeqCst) + 2, Ordering::SeqCst);
        assert!(wal.sync().is_err(), "seed {seed}: the power loss went unnoticed");
        assert_eq!(wal.durable_lsn(), count, "seed {seed}");
        drop(wal);

        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let strict = open(&storage, &with_mode(opts.clone(), RecoveryMode::AbsoluteConsistency), 1);
        let (wal, report, replayed) = open(&storage, &opts, 1)
            .unwrap_or_else(|e| panic!("seed {seed}: a torn marker was taken for corruption: {e}"));
        assert_replayed_range(&replayed, 1, count, 100);
        match (report.last_lsn, report.torn_tail_bytes_dropped) {
            (last, 0) if last == count + 1 => intact += 1,
            (last, 0) if last == count => lost += 1,
            (last, dropped) if last == count && dropped > 0 => {
                torn += 1;
                let err = strict.map(|_| ()).unwrap_err();
                assert!(
                    matches!(&err, Error::Corruption { what, .. } if what.contains("torn tail")),
                    "seed {seed}: {err}"
                );
            }
            other => panic!("seed {seed}: {other:?}"),
        }
        // The repaired log takes new records, and a clean close leaves it clean.
        let lsn = wal.append(b"after the power loss").unwrap();
        wal.commit(lsn, Durability::Sync).unwrap();
        wal.close().unwrap();
        drop(wal);
        let strict = with_mode(opts.clone(), RecoveryMode::AbsoluteConsistency);
        let (_wal, _, replayed) = open(&storage, &strict, 1).unwrap();
        assert_eq!(replayed.len() as u64, count + 1, "seed {seed}");
    }
    assert!(torn >= 5 && intact > 20 && lost > 20, "torn {torn}, intact {intact}, lost {lost}");
}

/// Records of an earlier attempt at the next lsns can sit behind the end of the log: written out
/// of order before a crash, they reached the disk while the end marker in front of them stayed.
/// Continuing the segment must cut them off before writing: otherwise a torn write that lands
/// the new record but not its end marker puts such a record exactly where the next lsn belongs.
#[test]
fn records_of_a_lost_attempt_behind_the_end_of_the_log_are_cut_off_before_continuing() {
    let sim = SimStorage::new(77);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let opts = small_opts(4096);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=10u8 {
        let lsn = wal.append(&[i; 40]).unwrap(); // 64-byte records
        wal.commit(lsn, Durability::Sync).unwrap();
    }
    wal.close().unwrap(); // marker at lsn 11
    drop(wal);
    let segment = segment_names(storage.as_ref(), &opts).pop().unwrap();
    let end = 32 + 10 * 64 + 24;
    // The lost attempt wrote lsns 12 and 13 at `end` and `end + 64`; only 13 reached the disk.
    let lost = storage.open(&segment, OpenOptions::existing()).unwrap();
    lost.write_at(end as u64 + 64, &encode_test_record(13, 11, &[0xBA; 40])).unwrap();
    lost.sync().unwrap();
    drop(lost);

    let (wal, report, replayed) = open(&storage, &opts, 1).unwrap();
    assert_eq!(replayed.len(), 10);
    assert_eq!(report.next_lsn, 12);
    let lsn = wal.append(&[0x12; 40]).unwrap();
    assert_eq!(lsn, 12);
    wal.commit(lsn, Durability::Buffered).unwrap();
    // Power loss: the new record reached the disk, its end marker did not.
    let mut image = sim.durable_contents(&segment).unwrap();
    let written = sim.contents(&segment).unwrap();
    image.resize(image.len().max(end + 64), 0);
    image[end..end + 64].copy_from_slice(&written[end..end + 64]);
    drop(wal);

    let rebooted: Arc<dyn Storage> = Arc::new(strata_io::MemStorage::new());
    rebooted.open(&segment, OpenOptions::create()).unwrap().write_at(0, &image).unwrap();
    let state = opts.state_file_name();
    let state_image = sim.durable_contents(&state).unwrap();
    rebooted.open(&state, OpenOptions::create()).unwrap().write_at(0, &state_image).unwrap();
    let (_wal, _, replayed) = open(&rebooted, &opts, 1).unwrap();
    let lsns: Vec<u64> = replayed.iter().map(|r| r.0).collect();
    assert_eq!(lsns, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12], "a record of the lost attempt was replayed");
}
