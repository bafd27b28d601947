//! Layer 5b: **a write in flight is not visible before its log commit
//! succeeded, and writes become visible in log order.**
//!
//! `failed_writes` judges reads made after a write returned `Err`; a read made *while* the write
//! is in flight is not judged there. This check closes that gap deterministically: on
//! `SimStorage`, behind a storage hook ([`gate`]) that stops one chosen thread at its next file
//! sync or write (its log commit — group commit runs it on the caller's thread) until the
//! check releases it:
//! - **Fails in flight**: a put, delete, batch or rmw (`Sync`, stopped at its fsync; or
//!   `Buffered`, stopped at its log write) is held while a reader thread gets every key and
//!   scans forward and backward; then the held call fails (EIO / ENOSPC) and the write returns
//!   `Err`. The reader must have seen none of it: no new value, no deleted key gone. A reader
//!   blocked by the write in flight is allowed (it is released after a second and judged the
//!   same). Then the engine reopens (no power loss) with the failed write whole or absent.
//! - **Overtakes**: a `Sync` put of a key is held at its fsync; a second write of the same key
//!   (put, delete or rmw, `Buffered`; a put also with `None`) starts after it, so it is logged
//!   after it, and gets up to 300 ms to reach the log (or to return) before the fsync is let
//!   through. Both must succeed; the handle must then show the second write's result, as a
//!   reopen (which replays the log in order) does, and an rmw's closure must have seen the
//!   first put. An engine that applies after commit but not in log order fails here: its
//!   second write is applied first and then overwritten by the first.
//!
//! The canary `InFlightWriteVisible` (applies before persisting, poisons on failure) must fail
//! it; the correct canary persists before it applies and passes.

mod gate;
pub mod regressions;
mod scenario;

use std::fmt;

use strata_core::Durability;
use strata_io::FaultKind;

pub use self::gate::Point;
use crate::{seed, Failure, Target};

/// The write whose visibility a scenario checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    Put,
    Delete,
    /// Two puts (one of a new key) and a delete.
    Batch,
    Rmw,
}

/// One scenario of the check (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// A `kind` write with `durability` is held at `point` while a reader looks, then that call
    /// fails with `fault`.
    FailsInFlight { kind: WriteKind, durability: Durability, point: Point, fault: FaultKind },
    /// A `Sync` put held at its fsync, then `second` of the same key with `durability`; the
    /// fsync then succeeds.
    Overtakes { second: WriteKind, durability: Durability },
}

/// Every scenario the check runs.
pub fn scenarios() -> Vec<Scenario> {
    let mut out = Vec::new();
    for kind in [WriteKind::Put, WriteKind::Delete, WriteKind::Batch, WriteKind::Rmw] {
        out.push(Scenario::FailsInFlight {
            kind,
            durability: Durability::Sync,
            point: Point::Sync,
            fault: FaultKind::Eio,
        });
        out.push(Scenario::FailsInFlight {
            kind,
            durability: Durability::Buffered,
            point: Point::Write,
            fault: FaultKind::Enospc,
        });
    }
    for (second, durability) in [
        (WriteKind::Put, Durability::Buffered),
        (WriteKind::Put, Durability::None),
        (WriteKind::Delete, Durability::Buffered),
        (WriteKind::Rmw, Durability::Buffered),
    ] {
        out.push(Scenario::Overtakes { second, durability });
    }
    out
}

/// What a check did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub seed: u64,
    pub scenarios: u64,
    /// Scenarios whose write never reached the watched sync or write (its durability needed
    /// none, or the engine does that I/O on another thread): nothing was held.
    pub not_reached: u64,
    /// Reads (gets, and scans counted once per key) that answered while a write was held.
    pub reads_while_held: u64,
    /// Overtakes scenarios where the second write reached the log while the first was held
    /// (the others waited for it, which is allowed).
    pub second_reached_log: u64,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} scenarios ({} never held): {} reads answered while a write was held; {} second \
             writes reached the log behind a held one",
            self.scenarios, self.not_reached, self.reads_while_held, self.second_reached_log
        )
    }
}

/// Runs every scenario; panics on the first violation. Scenarios are deterministic; the seed
/// only seeds the simulated disk.
pub fn check(target: &Target) {
    let seed = seed::single_seed();
    eprintln!("[strata-testkit] in-flight writes {} seed={seed}", target.name);
    match run(target, seed) {
        Ok(report) => eprintln!("[strata-testkit] in-flight writes {} seed={seed} ok: {report}", target.name),
        Err(failure) => failure.raise(),
    }
}

/// Every scenario in turn.
pub fn run(target: &Target, seed: u64) -> Result<Report, Failure> {
    let mut report = Report { seed, ..Report::default() };
    for (index, scenario) in scenarios().into_iter().enumerate() {
        run_one(target, scenario, seed::derive(seed, index as u64), &mut report)?;
    }
    Ok(report)
}

/// One scenario; a violation is a `Failure` naming it.
pub fn run_one(target: &Target, scenario: Scenario, seed: u64, report: &mut Report) -> Result<(), Failure> {
    let outcome = crate::failure::catch(|| scenario::run(target, scenario, seed))
        .unwrap_or_else(|panic| Err(format!("the engine panicked: {panic}")));
    // A `Sync` write must fsync before it returns; one never held there (the engine does that
    // I/O on another thread) would pass vacuously. Every engine holds every
    // scenario; a `Buffered` one may legitimately do no I/O in a test engine (the kit's canary).
    let must_hold = matches!(scenario, Scenario::FailsInFlight { durability: Durability::Sync, .. });
    let outcome = outcome.and_then(|outcome| match (outcome.held, must_hold) {
        (false, true) => {
            Err("the Sync write was never held at its fsync: the scenario checked nothing".into())
        }
        _ => Ok(outcome),
    });
    let outcome = outcome.map_err(|description| Failure {
        check: format!("in-flight writes {}: {scenario:?}", target.name),
        seed,
        op_index: None,
        description,
        recent_ops: Vec::new(),
    })?;
    report.scenarios += 1;
    report.not_reached += u64::from(!outcome.held);
    report.reads_while_held += outcome.reads_while_held;
    report.second_reached_log += u64::from(outcome.second_reached_log);
    Ok(())
}
