//! Power loss on SimStorage: every record whose `commit(Sync)` returned survives, what survives
//! is a prefix of what was appended, and repairs leave nothing a later recovery misreads.

mod common;

use std::sync::Arc;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Error, RecoveryMode};
use strata_io::{CrashMode, SimStorage, Storage};
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
        assert_eq!(
            report.next_lsn as usize,
            model.appended.len().max((model.checkpoint as usize).saturating_sub(1)) + 1
        );
        let ops = rng.gen_range(0..80);
        run_workload(&wal, &mut model, &mut rng, ops).unwrap_or_else(|e| panic!("{context}: {e}"));
        sim.crash(mode);
    }
    let (_wal, _, replayed) = open(&storage, &opts, model.min_lsn()).unwrap();
    model.check_recovery(&replayed, &format!("seed {seed} final"));
    (model.recoveries_losing_records, torn_tails)
}

#[test]
fn acknowledged_records_survive_dropped_unsynced_data() {
    let mut losing = 0;
    for seed in 0..120 {
        losing += crash_rounds(seed, CrashMode::DropUnsynced).0;
    }
    assert!(losing > 100, "only {losing} recoveries lost unacknowledged records");
}

#[test]
fn acknowledged_records_survive_random_torn_writes() {
    let (mut losing, mut torn) = (0, 0);
    for seed in 1000..1160 {
        let (l, t) = crash_rounds(seed, CrashMode::Random);
        (losing, torn) = (losing + l, torn + t);
    }
    assert!(losing > 100 && torn > 20, "{losing} recoveries lost records, {torn} dropped a torn tail");
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
