//! Layer 4b: **a write that returned `Err` is never seen by a reader.**
//!
//! On `SimStorage`, after a warm-up, a fault is armed (ENOSPC or EIO on the N-th write, EIO on
//! the N-th sync, an ENOSPC at the N-th storage op, or a disk that fills up) and puts, deletes,
//! batches, rmw, gets, scans and flushes run on, from one thread and (module `threads`) from
//! several threads on their own keys, each call's `Ok`/`Err` recorded. The rule:
//! - **Same handle**: a read may fail (`Poisoned` or any error), but a read that returns data
//!   must match the model in which every failed write is absent: no value of a failed put or
//!   batch, no key removed by a failed delete, no rmw result that returned `Err`, and an rmw's
//!   closure never sees one.
//! - **Reopen after a close that returned `Ok`**: a successful close (like a successful `Sync`
//!   write or flush) is a durability point; the failed writes before it are resolved as never
//!   written, so the reopened store must equal the model exactly.
//! - **Reopen after a failed close (no crash), or after a crash**: the files are whatever the
//!   failing process left; a failed write is treated like an unacknowledged one: pending, it may
//!   or may not be back (a record whose fsync failed may still be read back by the next open),
//!   under the crash oracle (prefix-consistent engines: the durable state plus a prefix of the
//!   pending units, with or without the failed ones).
//!
//! Then the engine must work normally again.

pub mod regressions;
mod threads;

use std::fmt;

use strata_core::{Direction, KeyRange};
use strata_io::{Fault, FaultKind, SimStorage, Storage};

use crate::backend::Backend;
use crate::ops::{CrashKind, Generator, Op, OpMix};
use crate::runner::{ExecError, Runner};
// Warm-up, recovery and full-disk sizes are the fault check's (`faults.rs`).
use crate::faults::{
    AFTER_RECOVERY_OPS, NO_SPACE_HEADROOM_BYTES as FULL_DISK_HEADROOM_BYTES,
    NO_SPACE_MAX_WRITES as FULL_DISK_MAX_OPS, NO_SPACE_VALUE_BYTES as FULL_DISK_VALUE_BYTES, WARMUP_OPS,
};
use crate::{seed, Failure, Target};

/// Seeds per `check` unless `STRATA_SEEDS` says otherwise.
pub const DEFAULT_SEEDS: usize = 2;
/// Most ops of a fault phase when no call fails.
const PHASE_OPS: usize = 60;
/// Ops run after the first failed call, before the phase ends: these are the reads that count.
const OPS_AFTER_ERROR: usize = 25;

/// Writes, reads and flushes with many Sync writes (their fsyncs are what `FailSync` hits); no
/// reopen or crash inside a phase (the check ends each phase with one).
const MIX: OpMix = OpMix {
    get: 14,
    put: 22,
    delete: 8,
    batch: 10,
    rmw: 8,
    range: 10,
    flush: 3,
    reopen: 0,
    crash: 0,
    sync_percent: 35,
    unbuffered_percent: 50,
};

/// Starts every wrong answer seen after a call failed.
const AFTER_FAILURE: &str =
    "after a call returned Err, the same handle disagrees with the model (failed writes absent)";

fn after_failure(wrong: ExecError) -> ExecError {
    ExecError::Wrong(format!("{AFTER_FAILURE}: {}", wrong.describe()))
}

/// What is armed for a phase.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Injection {
    Fault(Fault),
    /// `set_capacity_bytes`: the disk holds what it holds plus a little.
    FullDisk,
}

/// How a scenario ends, after the same-handle reads.
#[derive(Clone, Copy, Debug)]
pub(crate) enum End {
    /// Faults cleared, `close` (may fail), drop, open: no power loss.
    Reopen,
    Crash(CrashKind),
}

/// What a check did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub seed: u64,
    pub scenarios: u64,
    /// Calls (writes, reads, flushes) that returned `Err`.
    pub failed_calls: u64,
    /// Reads after the first failed call that returned data (all checked against the model).
    pub reads_answered_after_failure: u64,
    /// Reads after the first failed call that returned an error (allowed).
    pub reads_refused_after_failure: u64,
    /// Scenarios whose fault never fired.
    pub faults_not_reached: u64,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} scenarios ({} fault never reached): {} calls failed; after a failure {} reads answered \
             (checked), {} refused",
            self.scenarios,
            self.faults_not_reached,
            self.failed_calls,
            self.reads_answered_after_failure,
            self.reads_refused_after_failure
        )
    }
}

/// Runs every scenario for a few seeds; panics on the first violation with the seed.
pub fn check(target: &Target) {
    for seed in seed::seeds(DEFAULT_SEEDS) {
        eprintln!("[strata-testkit] failed writes {} seed={seed}", target.name);
        match run(target, seed) {
            Ok(report) => {
                eprintln!("[strata-testkit] failed writes {} seed={seed} ok: {report}", target.name)
            }
            Err(failure) => failure.raise(),
        }
    }
}

/// Every injection, once from one thread and once from several; the two runs of an injection
/// end differently (clean reopen / crash), and the seed flips which one does which.
pub fn run(target: &Target, seed: u64) -> Result<Report, Failure> {
    let mut report = Report { seed, ..Report::default() };
    for (index, injection) in injections().into_iter().enumerate() {
        let index = index as u64;
        let crash =
            if (index + seed).is_multiple_of(3) { CrashKind::Random } else { CrashKind::DropUnsynced };
        let (first, second) = match (index + seed) % 2 {
            0 => (End::Reopen, End::Crash(crash)),
            _ => (End::Crash(crash), End::Reopen),
        };
        one_thread(target, seed, index, injection, first, &mut report)?;
        threads::run(target, seed, index, injection, second, &mut report)?;
        report.scenarios += 2;
    }
    Ok(report)
}

fn injections() -> Vec<Injection> {
    let mut out = Vec::new();
    for n in [0, 1, 3, 8] {
        let sticky = n % 2 == 1;
        out.push(Injection::Fault(Fault::FailWrite { after_writes: n, kind: FaultKind::Enospc, sticky }));
        out.push(Injection::Fault(Fault::FailWrite {
            after_writes: n,
            kind: FaultKind::Eio,
            sticky: !sticky,
        }));
        out.push(Injection::Fault(Fault::FailSync { after_syncs: n }));
    }
    out.push(Injection::Fault(Fault::FailOp { after_ops: 5, kind: FaultKind::Enospc, sticky: false }));
    out.push(Injection::Fault(Fault::FailOp { after_ops: 12, kind: FaultKind::Eio, sticky: true }));
    out.push(Injection::FullDisk);
    out
}

/// Arms `injection` on `sim`; returns a note for the history.
pub(crate) fn arm(sim: &SimStorage, injection: Injection) -> String {
    match injection {
        Injection::Fault(fault) => {
            sim.inject(fault);
            format!("inject {fault:?}")
        }
        Injection::FullDisk => {
            let used: u64 = sim
                .list()
                .unwrap_or_default()
                .iter()
                .filter_map(|n| sim.contents(n))
                .map(|c| c.len() as u64)
                .sum();
            let capacity = used + FULL_DISK_HEADROOM_BYTES;
            sim.set_capacity_bytes(Some(capacity));
            format!("set capacity to {capacity} bytes ({used} in use)")
        }
    }
}

pub(crate) fn disarm(sim: &SimStorage) {
    sim.clear_faults();
    sim.set_capacity_bytes(None);
}

/// One thread: warm-up, fault phase, same-handle reads, the end, then normal use again.
fn one_thread(
    target: &Target,
    seed: u64,
    index: u64,
    injection: Injection,
    end: End,
    report: &mut Report,
) -> Result<(), Failure> {
    let scenario_seed = seed::derive(seed, 700 + index);
    let sim = SimStorage::new(seed::derive(scenario_seed, 1));
    let check = format!("failed writes {}: one thread, {injection:?}, then {end:?}", target.name);
    let mut runner = Runner::new(target, check, seed, Backend::Sim(sim.clone()))?;
    let mut generator = Generator::new(seed::derive(scenario_seed, 2), MIX, runner.limits());
    runner.guarded(|r| (0..WARMUP_OPS).try_for_each(|_| r.exec(&generator.next_op(&r.keys))))?;
    runner.failed_writes_hidden = true;
    let note = arm(&sim, injection);
    runner.note(note);
    let counts = runner.guarded(|r| fault_phase(r, &mut generator, injection))?;
    report.failed_calls += counts.failed;
    report.faults_not_reached += u64::from(counts.failed == 0);
    let reads = runner.guarded(same_handle_reads)?;
    report.reads_answered_after_failure += counts.answered + reads.answered;
    report.reads_refused_after_failure += counts.refused + reads.refused;
    disarm(&sim);
    runner.note("clear faults".into());
    runner.guarded(|r| match end {
        End::Reopen => r.reopen_after_faults().map(drop),
        End::Crash(kind) => r.exec(&Op::Crash { kind }),
    })?;
    runner.failed_writes_hidden = false;
    runner.guarded(|r| {
        for _ in 0..AFTER_RECOVERY_OPS {
            r.exec(&generator.next_op(&r.keys))?;
        }
        r.exec(&Op::Reopen)?;
        r.close()
    })
}

#[derive(Default)]
struct Counts {
    failed: u64,
    /// Reads after the first failure that returned data / an error.
    answered: u64,
    refused: u64,
}

/// Runs ops until `OPS_AFTER_ERROR` ops after the first failed call. Engine errors are allowed
/// (a failed write becomes a failed unit of the model); a wrong answer is the failure.
fn fault_phase(
    r: &mut Runner<'_>,
    generator: &mut Generator,
    injection: Injection,
) -> Result<Counts, ExecError> {
    let mut counts = Counts::default();
    let max_ops = match injection {
        Injection::FullDisk => FULL_DISK_MAX_OPS,
        Injection::Fault(_) => PHASE_OPS,
    };
    let mut since_error: Option<usize> = None;
    for i in 0..max_ops {
        if since_error.is_some_and(|n| n >= OPS_AFTER_ERROR) {
            break;
        }
        let op = match injection {
            Injection::FullDisk if i % 4 != 3 => generator.sized_put(&r.keys, FULL_DISK_VALUE_BYTES),
            _ => generator.next_op(&r.keys),
        };
        let is_read = matches!(op, Op::Get { .. } | Op::Range { .. });
        let result = r.exec(&op);
        if since_error.is_some() && is_read {
            match result {
                Ok(()) => counts.answered += 1,
                Err(_) => counts.refused += 1,
            }
        }
        match result {
            Ok(()) => {}
            Err(ExecError::Engine { .. }) => {
                counts.failed += 1;
                since_error.get_or_insert(0);
            }
            Err(wrong) if since_error.is_some() => return Err(after_failure(wrong)),
            Err(wrong) => return Err(wrong),
        }
        if let Some(n) = &mut since_error {
            *n += 1;
        }
    }
    Ok(counts)
}

/// Gets every key the model or the key space knows and (ordered engines) a full scan, on the
/// handle that saw the failures. Errors are allowed; data must match the model.
fn same_handle_reads(r: &mut Runner<'_>) -> Result<Counts, ExecError> {
    let mut counts = Counts::default();
    let mut keys: Vec<_> = r.keys.all().cloned().collect();
    keys.extend(r.oracle.known_keys());
    keys.sort();
    keys.dedup();
    let mut reads = keys.into_iter().map(|key| Op::Get { key }).collect::<Vec<_>>();
    if r.target().ordered() {
        reads.push(Op::Range { range: KeyRange::all(), direction: Direction::Forward, limit: None });
        reads.push(Op::Range { range: KeyRange::all(), direction: Direction::Reverse, limit: Some(5) });
    }
    for op in reads {
        match r.exec(&op) {
            Ok(()) => counts.answered += 1,
            Err(ExecError::Engine { .. }) => counts.refused += 1,
            Err(wrong) => return Err(after_failure(wrong)),
        }
    }
    Ok(counts)
}
