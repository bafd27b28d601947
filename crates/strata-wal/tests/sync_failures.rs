//! A failed sync anywhere (a record's fdatasync, a new segment's fsync, the directory sync that
//! makes its name durable, the state file's), then a reopen in a live process (no power loss),
//! more acknowledged records, and a power loss: every record acknowledged before or after the
//! reopen survives. And a log that a crash left behind the caller's checkpoint stays openable.

mod common;

use std::sync::Arc;

use common::*;
use strata_core::Durability;
use strata_io::{CrashMode, Fault, SimStorage, Storage};
use strata_wal::{Lsn, Wal, WalOptions};

const RECORDS: usize = 40;

/// What the caller of the log knows: the lsns acknowledged as durable, and the lsn its
/// "checkpoint" covers everything below (it released the log below it, so opens pass it as
/// `min_lsn`).
#[derive(Default)]
struct Caller {
    acknowledged: Vec<Lsn>,
    checkpoint_lsn: Lsn,
}

impl Caller {
    /// Sync commits of 100-byte records until one fails (at most `records`), releasing all but
    /// the last few records as it goes, so full segments are recycled as `.free` files.
    fn commit_until_failure(&mut self, wal: &Wal, records: usize) -> bool {
        for _ in 0..records {
            let next = wal.durable_lsn() + 1;
            let committed = wal
                .append(&payload(next, 100))
                .and_then(|lsn| wal.commit(lsn, Durability::Sync).map(|()| lsn));
            let Ok(lsn) = committed else { return false };
            self.acknowledged.push(lsn);
            self.checkpoint_lsn = self.checkpoint_lsn.max(lsn.saturating_sub(4)).max(1);
            if wal.truncate_before(self.checkpoint_lsn).is_err() {
                return false;
            }
        }
        true
    }

    fn open(&self, storage: &Arc<dyn Storage>, opts: &WalOptions, what: &str) -> (Wal, Replayed) {
        let (wal, _, replayed) = open(storage, opts, self.checkpoint_lsn.max(1))
            .unwrap_or_else(|e| panic!("{what} ({opts:?}): {e}"));
        (wal, replayed)
    }
}

/// One run: the `after_syncs`-th sync fails; returns (acknowledged lsns missing after the power
/// loss, whether the fault fired before the workload ended).
fn run(opts: &WalOptions, after_syncs: u64) -> (Vec<Lsn>, bool) {
    let sim = SimStorage::new(after_syncs);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let mut caller = Caller::default();
    let context = format!("sync {after_syncs} failed");
    let (wal, _) = caller.open(&storage, opts, &format!("{context}: first open"));
    sim.inject(Fault::FailSync { after_syncs });
    let fired = !caller.commit_until_failure(&wal, RECORDS);
    drop(wal);
    sim.clear_faults();
    // The same process (or the next one, before any power loss) opens the log again.
    let (wal, _) = caller.open(&storage, opts, &format!("{context}: reopen"));
    caller.commit_until_failure(&wal, 3);
    drop(wal);
    sim.crash(CrashMode::DropUnsynced);
    let (_, replayed) = caller.open(&storage, opts, &format!("{context}: open after the power loss"));
    let missing = caller
        .acknowledged
        .iter()
        .filter(|&&lsn| lsn >= caller.checkpoint_lsn && !replayed.iter().any(|(l, _)| *l == lsn))
        .copied()
        .collect();
    (missing, fired)
}

#[test]
fn records_acknowledged_after_a_failed_sync_and_a_reopen_survive_a_power_loss() {
    // Small segments, so the sweep covers rollovers (segment fsync, directory sync, state file)
    // and recycling; it goes on until the fault no longer fires: every sync was failed once.
    for preallocate in [false, true] {
        let opts = WalOptions { preallocate, ..small_opts(1024) };
        let swept = (0..1000).find(|&after_syncs| {
            let (missing, fired) = run(&opts, after_syncs);
            assert!(
                missing.is_empty(),
                "preallocate {preallocate}, sync {after_syncs} failed: lost {missing:?}"
            );
            !fired
        });
        let syncs = swept.expect("the workload's syncs were not all failed once");
        assert!(syncs > 60, "only {syncs} syncs in the workload");
    }
}
