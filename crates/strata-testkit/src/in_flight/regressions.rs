//! Deterministic in-flight scenarios, as named tests each engine declares with
//! [`in_flight_regressions!`](crate::in_flight_regressions): a write becomes visible only after
//! its log commit succeeded, in log order. An engine that applies a write before its log commit
//! fails them.

use strata_core::Durability;
use strata_io::FaultKind;

use super::{run_one, Point, Report, Scenario, WriteKind};
use crate::Target;

/// Fixed: the scenarios are deterministic; the seed only seeds the simulated disk.
const SEED: u64 = 19;

fn expect_pass(target: &Target, scenario: Scenario) {
    if let Err(failure) = run_one(target, scenario, SEED, &mut Report::default()) {
        failure.raise();
    }
}

fn fails_in_flight(target: &Target, kind: WriteKind, durability: Durability) {
    let (point, fault) = match durability {
        Durability::Sync => (Point::Sync, FaultKind::Eio),
        _ => (Point::Write, FaultKind::Enospc),
    };
    expect_pass(target, Scenario::FailsInFlight { kind, durability, point, fault });
}

/// A reader must not see a `Sync` put held at its WAL fsync: the fsync then fails and the put
/// returns `Err`, so the put never took effect.
pub fn a_reader_does_not_see_a_sync_put_whose_fsync_is_in_flight_and_fails(target: &Target) {
    fails_in_flight(target, WriteKind::Put, Durability::Sync);
}

/// The same for a `Buffered` batch held at its WAL write (ENOSPC): the reader must see neither
/// its puts nor its deleted key gone.
pub fn a_reader_does_not_see_a_buffered_batch_whose_log_write_is_in_flight_and_fails(target: &Target) {
    fails_in_flight(target, WriteKind::Batch, Durability::Buffered);
}

/// The same for an rmw's result.
pub fn a_reader_does_not_see_an_rmw_whose_fsync_is_in_flight_and_fails(target: &Target) {
    fails_in_flight(target, WriteKind::Rmw, Durability::Sync);
}

/// A later `Buffered` put of a key, logged behind a `Sync` put whose fsync is still running,
/// must not be overwritten on the handle by that earlier put once its fsync ends (the log
/// replays them in lsn order).
pub fn a_later_put_of_a_key_is_not_overwritten_by_an_earlier_put_whose_fsync_ends_later(target: &Target) {
    expect_pass(target, Scenario::Overtakes { second: WriteKind::Put, durability: Durability::Buffered });
}

/// An rmw of a key logged behind a put in flight must see that put (once it committed), never
/// the value before it.
pub fn an_rmw_behind_a_put_in_flight_sees_the_put(target: &Target) {
    expect_pass(target, Scenario::Overtakes { second: WriteKind::Rmw, durability: Durability::Buffered });
}

/// Declares the scenarios above as named `#[test]`s of the calling test file, each running on
/// `$target` (a `Target` expression, evaluated per test).
#[macro_export]
macro_rules! in_flight_regressions {
    ($target:expr) => {
        #[test]
        fn a_reader_does_not_see_a_sync_put_whose_fsync_is_in_flight_and_fails() {
            $crate::in_flight::regressions::a_reader_does_not_see_a_sync_put_whose_fsync_is_in_flight_and_fails(&$target);
        }

        #[test]
        fn a_reader_does_not_see_a_buffered_batch_whose_log_write_is_in_flight_and_fails() {
            $crate::in_flight::regressions::a_reader_does_not_see_a_buffered_batch_whose_log_write_is_in_flight_and_fails(&$target);
        }

        #[test]
        fn a_reader_does_not_see_an_rmw_whose_fsync_is_in_flight_and_fails() {
            $crate::in_flight::regressions::a_reader_does_not_see_an_rmw_whose_fsync_is_in_flight_and_fails(&$target);
        }

        #[test]
        fn a_later_put_of_a_key_is_not_overwritten_by_an_earlier_put_whose_fsync_ends_later() {
            $crate::in_flight::regressions::a_later_put_of_a_key_is_not_overwritten_by_an_earlier_put_whose_fsync_ends_later(&$target);
        }

        #[test]
        fn an_rmw_behind_a_put_in_flight_sees_the_put() {
            $crate::in_flight::regressions::an_rmw_behind_a_put_in_flight_sees_the_put(&$target);
        }
    };
}
