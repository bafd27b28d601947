//! Injected I/O failures: clear errors, a poisoned log, no panic, and after the fault clears and
//! the machine "reboots", every acknowledged record is still there.

mod common;

use std::sync::Arc;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Error};
use strata_io::{CrashMode, Fault, FaultKind, SimStorage, Storage};
use strata_wal::{Wal, WalOptions};

fn sim_with_synced_records(seed: u64, count: u64) -> (SimStorage, Arc<dyn Storage>, Wal) {
    let sim = SimStorage::new(seed);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let (wal, _, _) = open(&storage, &small_opts(4096), 1).unwrap();
    for i in 1..=count {
        let lsn = wal.append(&payload(i, 100)).unwrap();
        wal.commit(lsn, Durability::Sync).unwrap();
    }
    (sim, storage, wal)
}

fn assert_poisoned(wal: &Wal) {
    assert!(matches!(wal.append(b"more"), Err(Error::Poisoned(_))));
    assert!(matches!(wal.commit(1, Durability::Sync), Err(Error::Poisoned(_))));
    assert!(matches!(wal.commit(1, Durability::None), Err(Error::Poisoned(_))));
    assert!(matches!(wal.sync(), Err(Error::Poisoned(_))));
}

fn reboot_and_check(sim: &SimStorage, storage: &Arc<dyn Storage>, acked: u64) -> Replayed {
    sim.clear_faults();
    sim.set_capacity_bytes(None);
    sim.crash(CrashMode::DropUnsynced);
    let (_wal, _, replayed) = open(storage, &small_opts(4096), 1).unwrap();
    assert!(replayed.len() as u64 >= acked, "acknowledged records lost: {} < {acked}", replayed.len());
    assert_replayed_range(&replayed[..acked as usize].to_vec(), 1, acked, 100);
    replayed
}

#[test]
fn eio_on_write_poisons_the_log() {
    let (sim, storage, wal) = sim_with_synced_records(1, 10);
    sim.inject(Fault::FailWrite { after_writes: 0, kind: FaultKind::Eio, sticky: false });
    let lsn = wal.append(b"doomed").unwrap();
    let err = wal.commit(lsn, Durability::Sync).unwrap_err();
    assert!(matches!(&err, Error::Io { source, .. } if source.raw_os_error() == Some(5)), "{err}");
    assert_eq!(wal.durable_lsn(), 10);
    assert_poisoned(&wal);
    assert!(
        matches!(wal.commit(lsn, Durability::Buffered), Err(Error::Poisoned(msg)) if msg.contains("injected"))
    );
    let replayed = reboot_and_check(&sim, &storage, 10);
    assert_eq!(replayed.len(), 10);
}

#[test]
fn eio_on_sync_poisons_the_log_and_never_reports_durability() {
    let (sim, storage, wal) = sim_with_synced_records(2, 10);
    sim.inject(Fault::FailSync { after_syncs: 0 });
    let lsn = wal.append(b"not durable").unwrap();
    assert!(wal.commit(lsn, Durability::Sync).is_err());
    assert_eq!(wal.durable_lsn(), 10, "a failed sync must not publish durability");
    assert_poisoned(&wal);
    let replayed = reboot_and_check(&sim, &storage, 10);
    assert_eq!(replayed.len(), 10, "the record whose sync failed never became durable");
}

#[test]
fn waiters_behind_a_failed_leader_get_poisoned_not_stuck() {
    let (sim, _storage, wal) = sim_with_synced_records(3, 1);
    let wal = Arc::new(wal);
    sim.inject(Fault::FailWrite { after_writes: 0, kind: FaultKind::Eio, sticky: true });
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let wal = wal.clone();
            std::thread::spawn(move || {
                let lsn = wal.append(format!("t{t}").as_bytes())?;
                wal.commit(lsn, Durability::Sync)
            })
        })
        .collect();
    for handle in handles {
        let result = handle.join().unwrap();
        assert!(matches!(result, Err(Error::Io { .. } | Error::Poisoned(_))), "{result:?}");
    }
    assert_poisoned(&wal);
}

#[test]
fn enospc_while_creating_a_segment_is_reported_as_no_space() {
    let sim = SimStorage::new(4);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let (wal, _, _) = open(&storage, &small_opts(4096), 1).unwrap();
    let first = wal.append(&payload(1, 100)).unwrap();
    wal.commit(first, Durability::Sync).unwrap();
    sim.set_capacity_bytes(Some(4096 + 1000));
    let mut acked = first;
    let err = loop {
        let lsn = wal.append(&payload(acked + 1, 100)).unwrap();
        match wal.commit(lsn, Durability::Sync) {
            Ok(()) => acked = lsn,
            Err(e) => break e,
        }
        assert!(acked < 1000, "the segment never rolled over");
    };
    assert!(err.is_no_space(), "{err}");
    let later = wal.append(b"x").unwrap_err();
    assert!(matches!(later, Error::Poisoned(_)) && later.is_no_space(), "{later}");
    assert!(wal.sync().unwrap_err().is_no_space());
    reboot_and_check(&sim, &storage, acked);
}

/// Issue #19: on a disk with less room than one preallocated segment, the first write used to
/// fail (the segment's preallocation was refused) and so did every later one. Preallocation now
/// shrinks to what fits; records go in until the disk is really full, and those acknowledged
/// survive a power loss.
#[test]
fn a_disk_smaller_than_a_segment_takes_writes_until_it_is_full() {
    let sim = SimStorage::new(5);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    sim.set_capacity_bytes(Some(3000));
    let opts = WalOptions { segment_bytes: 1 << 20, ..small_opts(4096) };
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    let mut acked = 0;
    let err = loop {
        let lsn = wal.append(&payload(acked + 1, 100)).unwrap();
        match wal.commit(lsn, Durability::Sync) {
            Ok(()) => acked = lsn,
            Err(e) => break e,
        }
        assert!(acked < 1000, "a 3000-byte disk never filled up");
    };
    assert!(err.is_no_space(), "{err}");
    assert!(acked >= 10, "only {acked} records fit on the disk");
    drop(wal);
    sim.set_capacity_bytes(None);
    sim.crash(CrashMode::DropUnsynced);
    let (wal, _, replayed) = open(&storage, &opts, 1).unwrap();
    assert!(replayed.len() as u64 >= acked, "acknowledged records lost: {} < {acked}", replayed.len());
    assert_replayed_range(&replayed[..acked as usize].to_vec(), 1, acked, 100);
    let lsn = wal.append(b"after space was freed").unwrap();
    wal.commit(lsn, Durability::Sync).unwrap();
}

/// A fault at every operation position of a small workload, then a crash and a reboot.
#[test]
fn a_fault_at_any_operation_loses_no_acknowledged_record() {
    for fault_at in 0..220u64 {
        let mut rng = SmallRng::seed_from_u64(fault_at);
        let sim = SimStorage::new(fault_at);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let opts = random_opts(&mut rng);
        let mut model = Model::default();
        let context = format!("fault at op {fault_at} {opts:?}");
        let (wal, _, _) = open(&storage, &opts, 1).unwrap();
        let kind = if rng.gen_bool(0.5) { FaultKind::Eio } else { FaultKind::Enospc };
        sim.inject(Fault::FailOp { after_ops: fault_at % 110, kind, sticky: rng.gen_bool(0.5) });
        let failure = run_workload(&wal, &mut model, &mut rng, 60);
        if let Err(e) = &failure {
            assert!(matches!(e, Error::Io { .. } | Error::Poisoned(_)), "{context}: {e}");
        }
        drop(wal);
        sim.clear_faults();
        sim.crash(if rng.gen_bool(0.5) { CrashMode::Random } else { CrashMode::DropUnsynced });
        let (wal, _, replayed) = open(&storage, &opts, model.min_lsn())
            .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
        model.check_recovery(&replayed, &context);
        run_workload(&wal, &mut model, &mut rng, 20)
            .unwrap_or_else(|e| panic!("{context}: after reboot: {e}"));
    }
}

#[test]
fn a_failing_open_reports_the_error_and_a_later_open_succeeds() {
    let (sim, storage, wal) = sim_with_synced_records(6, 50);
    wal.close().unwrap();
    drop(wal);
    let before = sim.op_count();
    drop(open(&storage, &small_opts(4096), 1).unwrap());
    let open_ops = sim.op_count() - before;
    assert!(open_ops >= 4, "open took {open_ops} counted operations");
    for after_ops in 0..open_ops {
        sim.inject(Fault::FailOp { after_ops, kind: FaultKind::Eio, sticky: false });
        let result = open(&storage, &small_opts(4096), 1);
        assert!(
            matches!(result, Err(Error::Io { .. })),
            "fault at op {after_ops}: {:?}",
            result.map(|r| r.1)
        );
        sim.clear_faults();
    }
    let (_wal, _, replayed) = open(&storage, &small_opts(4096), 1).unwrap();
    assert_replayed_range(&replayed, 1, 50, 100);
}
