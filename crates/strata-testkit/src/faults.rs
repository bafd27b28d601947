//! Layer 4: fault injection on `SimStorage`. Every call must return Ok (with a correct answer)
//! or Err — never panic, never a wrong answer. Once a call fails the check clears the faults,
//! cuts the power (`DropUnsynced`), reopens, and requires the pending-aware oracle to hold, with
//! the failed write counted as pending; then the engine must work normally again.
//!
//! Scenarios per seed: EIO (and ENOSPC) at the N-th storage op for a sweep of N, sticky and not;
//! a disk that fills up; fsync failures; bit flips in persisted files.

mod bit_flips;

use std::fmt;

use strata_core::{Direction, Durability, KeyRange};
use strata_io::{Fault, FaultKind, SimStorage, Storage};

use crate::backend::Backend;
use crate::ops::{CrashKind, Generator, Op, OpMix};
use crate::runner::{ExecError, Runner};
use crate::{seed, Failure, Target};

/// Seeds per `check` unless `STRATA_SEEDS` says otherwise.
pub const DEFAULT_SEEDS: usize = 2;
/// Ops run before any fault is armed, so the engine has state to lose.
pub(crate) const WARMUP_OPS: usize = 300;
/// Ops run with a fault armed; the fault phase stops at the first failing call.
const FAULT_PHASE_OPS: usize = 120;
/// Ops run after recovery; the engine must be fully usable again.
pub(crate) const AFTER_RECOVERY_OPS: usize = 20;
/// Fault positions tried per sweep.
const SWEEP_POINTS: u64 = 14;
/// Free space left when the disk is made nearly full.
pub(crate) const NO_SPACE_HEADROOM_BYTES: u64 = 32 << 10;
pub(crate) const NO_SPACE_MAX_WRITES: usize = 600;
pub(crate) const NO_SPACE_VALUE_BYTES: usize = 1536;

/// What a fault check did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub seed: u64,
    pub scenarios: u64,
    /// Scenarios where an injected fault made a call return an error.
    pub faults_surfaced: u64,
    /// Scenarios whose fault never fired (the engine did fewer storage ops than the fault's index).
    pub faults_not_reached: u64,
    /// Scenarios whose I/O fault failed an operation without any call returning an error: the
    /// engine retried or did without (background work); the crash oracle judges the outcome.
    pub faults_handled_quietly: u64,
    /// fsync failures the engine handled without an error (a file it can do without, such as
    /// f2's hot-index snapshot); the power loss after them decides whether that was right.
    pub syncs_failed_quietly: u64,
    pub bit_flips: bit_flips::BitFlipCounts,
}

pub use bit_flips::BitFlipCounts;

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} scenarios: {} surfaced an error, {} fault never reached, {} I/O faults and {} fsync failures \
             handled quietly; {}",
            self.scenarios,
            self.faults_surfaced,
            self.faults_not_reached,
            self.faults_handled_quietly,
            self.syncs_failed_quietly,
            self.bit_flips
        )
    }
}

/// Runs every fault scenario for a few seeds; panics on the first misbehaviour with the seed and
/// replay command.
pub fn check(target: &Target) {
    for seed in seed::seeds(DEFAULT_SEEDS) {
        eprintln!("[strata-testkit] faults {} seed={seed}", target.name);
        match run(target, seed) {
            Ok(report) => eprintln!("[strata-testkit] faults {} seed={seed} ok: {report}", target.name),
            Err(failure) => failure.raise(),
        }
    }
}

/// One seed of every scenario.
pub fn run(target: &Target, seed: u64) -> Result<Report, Failure> {
    let mut report = Report { seed, ..Report::default() };
    io_error_sweep(target, seed, &mut report)?;
    no_space(target, seed, &mut report)?;
    failed_syncs(target, seed, &mut report)?;
    bit_flips::run(target, seed, &mut report.bit_flips)?;
    Ok(report)
}

/// A fresh engine on a fresh simulated disk, warmed up with a few ops (no faults yet).
struct Scenario<'t> {
    runner: Runner<'t>,
    generator: Generator,
    sim: SimStorage,
    /// A call of the fault phase failed: the model holds its write as pending, neither durable
    /// nor refused, so a later flush is no durability point for the model.
    a_call_failed: bool,
}

impl<'t> Scenario<'t> {
    /// `seed` is the check's (failures report it, so it replays); `variant` varies the disk and
    /// the ops between scenarios of one seed.
    fn start(
        target: &'t Target,
        name: &str,
        seed: u64,
        variant: u64,
        mix: OpMix,
    ) -> Result<Scenario<'t>, Failure> {
        let scenario_seed = seed::derive(seed, variant);
        let sim = SimStorage::new(seed::derive(scenario_seed, 21));
        let check = format!("faults {}: {name}", target.name);
        let mut runner = Runner::new(target, check, seed, Backend::Sim(sim.clone()))?;
        runner.oracle.track_written_values();
        let mut generator = Generator::new(seed::derive(scenario_seed, 22), mix, runner.limits());
        runner.guarded(|r| {
            for _ in 0..WARMUP_OPS {
                let op = generator.next_op(&r.keys);
                r.exec(&op)?;
            }
            Ok(())
        })?;
        Ok(Scenario { runner, generator, sim, a_call_failed: false })
    }

    /// Runs up to `ops` ops (drawn by `next`); stops at the first engine error and returns it.
    /// Wrong answers are failures.
    fn until_error(
        &mut self,
        ops: usize,
        mut next: impl FnMut(&mut Generator, &Runner<'_>) -> Op,
    ) -> Result<Option<ExecError>, Failure> {
        let Scenario { runner, generator, .. } = self;
        let error = runner.guarded(|r| {
            for _ in 0..ops {
                let op = next(generator, r);
                match r.exec(&op) {
                    Ok(()) => {}
                    Err(e @ ExecError::Engine { .. }) => return Ok(Some(e)),
                    Err(wrong) => return Err(wrong),
                }
            }
            Ok(None)
        })?;
        self.a_call_failed |= error.is_some();
        Ok(error)
    }

    /// After a failure: a few more calls (results ignored, faults still armed: they must not
    /// panic), clear faults, power loss, reopen; the oracle must hold and the engine must work.
    fn recover(&mut self) -> Result<(), Failure> {
        let Scenario { runner, generator, sim, a_call_failed } = self;
        runner.guarded(|r| {
            if let Ok(engine) = r.engine() {
                let key = r.keys.write_key(generator.rng());
                let _ = engine.get(&key);
                let _ = engine.range(KeyRange::all(), Direction::Forward).map(|items| items.take(3).count());
                // A flush that returns Ok is a durability point, faults or not, unless a failed
                // call left a write pending (whose fate stays open): the power loss below must
                // then keep every write before the flush instead of forgiving their loss.
                let flushed = engine.flush().is_ok();
                let _ = engine.stats();
                if flushed && !*a_call_failed {
                    r.oracle.mark_durable();
                    r.note("flush returned Ok: a durability point".into());
                }
            }
            sim.clear_faults();
            sim.set_capacity_bytes(None);
            r.note("clear faults".into());
            r.exec(&Op::Crash { kind: CrashKind::DropUnsynced })?;
            for _ in 0..AFTER_RECOVERY_OPS {
                let op = generator.next_op(&r.keys);
                r.exec(&op)?;
            }
            r.exec(&Op::Reopen)?;
            r.close()
        })
    }

    /// After a failure, the process starts again before any power loss (the page cache still
    /// holds what a failed fsync never wrote): clear faults, close (may fail), reopen, check; more
    /// ops; then the power loss, and the oracle must hold. A record read back from the page cache
    /// at the reopen that never reaches the disk would vanish here, and with it every write
    /// acknowledged after it, which recovery then cannot reach.
    fn recover_in_the_same_boot(&mut self) -> Result<(), Failure> {
        let Scenario { runner, generator, sim, .. } = self;
        runner.guarded(|r| {
            sim.clear_faults();
            r.note("clear faults".into());
            r.reopen_after_faults()?;
            for _ in 0..AFTER_RECOVERY_OPS {
                let op = generator.next_op(&r.keys);
                r.exec(&op)?;
            }
            r.exec(&Op::Crash { kind: CrashKind::DropUnsynced })?;
            r.exec(&Op::Reopen)?;
            r.close()
        })
    }

    fn inject(&mut self, fault: Fault) {
        self.runner.note(format!("inject {fault:?}"));
        self.sim.inject(fault);
    }
}

/// EIO/ENOSPC at the N-th storage op after warm-up, N swept over the fault phase's op count.
fn io_error_sweep(target: &Target, seed: u64, report: &mut Report) -> Result<(), Failure> {
    // Same seed, no fault: how many storage ops the fault phase performs — the fewer of two
    // runs, since an engine's background work (a worker applying tables) makes the count vary
    // from run to run, and a sweep past what a run does never fires.
    let (mut calibration, mut phase_ops) = calibrate(target, seed)?;
    let (second, second_ops) = calibrate(target, seed)?;
    if second_ops < phase_ops {
        (calibration, phase_ops) = (second, second_ops);
    }

    let (scenarios_before, not_reached_before) = (report.scenarios, report.faults_not_reached);
    let step = (phase_ops / SWEEP_POINTS).max(1);
    let points = (0..4).chain((4..phase_ops).step_by(step as usize)).filter(|n| *n < phase_ops.max(1));
    for (i, after_ops) in points.enumerate() {
        let faults = [
            Fault::FailOp { after_ops, kind: FaultKind::Eio, sticky: false },
            Fault::FailOp { after_ops, kind: FaultKind::Eio, sticky: true },
            match i % 2 {
                0 => Fault::FailOp { after_ops, kind: FaultKind::Enospc, sticky: true },
                _ => Fault::FailWrite { after_writes: after_ops / 3, kind: FaultKind::Eio, sticky: false },
            },
        ];
        for fault in faults {
            sweep_point(target, seed, fault, report)?;
        }
    }
    // The sweep points lie inside the calibrated phase, so nearly every fault fires; many that
    // do not mean the phase's I/O differs run to run and the sweep tests less than it claims.
    let (scenarios, not_reached) =
        (report.scenarios - scenarios_before, report.faults_not_reached - not_reached_before);
    if not_reached * 4 > scenarios {
        let what = format!(
            "{not_reached} of {scenarios} swept faults never fired: the sweep missed the engine's I/O"
        );
        return Err(calibration.runner.failure(what));
    }
    Ok(())
}

/// How many times a swept fault's scenario runs while its fault does not fire: an engine's
/// background work (a worker applying tables) moves the phase's I/O count from run to run, more
/// so on a loaded machine, and a point near the calibrated end may fall past one run's I/O.
const SWEEP_POINT_ATTEMPTS: u32 = 3;

/// One swept fault: the scenario runs (again while the fault does not fire, up to
/// `SWEEP_POINT_ATTEMPTS`), each run recovered and checked against the oracle.
fn sweep_point(target: &Target, seed: u64, fault: Fault, report: &mut Report) -> Result<(), Failure> {
    for attempt in 1..=SWEEP_POINT_ATTEMPTS {
        let mut scenario = Scenario::start(target, &format!("{fault:?}"), seed, 0, OpMix::FAULTS)?;
        scenario.inject(fault);
        let error = scenario.until_error(FAULT_PHASE_OPS, |g, r| g.next_op(&r.keys))?;
        let fired = scenario.sim.faults_fired() > 0;
        let (surfaced, last_attempt) = (error.is_some(), attempt == SWEEP_POINT_ATTEMPTS);
        match error {
            Some(e) => {
                report.faults_surfaced += 1;
                scenario.runner.note(format!("it failed: {}", e.describe()));
            }
            None if fired => report.faults_handled_quietly += 1,
            None if last_attempt => report.faults_not_reached += 1,
            None => {}
        }
        scenario.recover()?;
        if surfaced || fired || last_attempt {
            report.scenarios += 1;
            return Ok(());
        }
    }
    Ok(())
}

/// A fault phase with no fault injected: the scenario (recovered) and the storage ops it did.
fn calibrate(target: &Target, seed: u64) -> Result<(Scenario<'_>, u64), Failure> {
    let mut calibration = Scenario::start(target, "calibration", seed, 0, OpMix::FAULTS)?;
    let ops_before = calibration.sim.op_count();
    if let Some(e) = calibration.until_error(FAULT_PHASE_OPS, |g, r| g.next_op(&r.keys))? {
        return Err(calibration.runner.failure(format!("without any fault injected: {}", e.describe())));
    }
    let phase_ops = calibration.sim.op_count() - ops_before;
    calibration.recover()?;
    Ok((calibration, phase_ops))
}

/// A nearly full disk: writes must eventually fail with a no-space error; after space is freed
/// and the power cut, the oracle holds.
fn no_space(target: &Target, seed: u64, report: &mut Report) -> Result<(), Failure> {
    let mut scenario = Scenario::start(target, "disk full", seed, 1, OpMix::FAULTS)?;
    let used_bytes: u64 = scenario
        .sim
        .list()
        .unwrap_or_default()
        .iter()
        .filter_map(|name| scenario.sim.contents(name))
        .map(|c| c.len() as u64)
        .sum();
    let capacity_bytes = used_bytes + NO_SPACE_HEADROOM_BYTES;
    scenario.runner.note(format!("set capacity to {capacity_bytes} bytes ({used_bytes} in use)"));
    scenario.sim.set_capacity_bytes(Some(capacity_bytes));
    let mut writes = 0;
    let error = scenario.until_error(NO_SPACE_MAX_WRITES, |g, r| {
        writes += 1;
        if writes % 8 == 0 {
            Op::Flush
        } else {
            g.sized_put(&r.keys, NO_SPACE_VALUE_BYTES)
        }
    })?;
    report.scenarios += 1;
    match error {
        Some(ExecError::Engine { error, .. }) if error.is_no_space() => report.faults_surfaced += 1,
        Some(other) => {
            let what = format!(
                "the disk filled up, and the first error is not a no-space error: {}",
                other.describe()
            );
            return Err(scenario.runner.failure(what));
        }
        None => {
            let what = format!(
                "{NO_SPACE_MAX_WRITES} writes of {NO_SPACE_VALUE_BYTES} bytes (with flushes) all succeeded on a \
                 disk with {NO_SPACE_HEADROOM_BYTES} bytes free"
            );
            return Err(scenario.runner.failure(what));
        }
    }
    scenario.recover()
}

/// The N-th fsync fails (and the data it covered stays volatile). The engine reports it (the
/// failing Sync write or flush returns Err, later calls may say Poisoned) or handles it (a file
/// it can do without); either way after a power cut the oracle holds — an engine that
/// acknowledged a write the failed fsync covered loses it there. Each of
/// the first 16 fsyncs fails in turn, twice: power loss right after the failure, and a restart in
/// the same boot first (`Scenario::recover_in_the_same_boot`).
fn failed_syncs(target: &Target, seed: u64, report: &mut Report) -> Result<(), Failure> {
    for (after_syncs, same_boot) in (0..16u64).flat_map(|n| [(n, false), (n, true)]) {
        let name = format!(
            "FailSync {after_syncs}{}",
            if same_boot { ", restart before the power loss" } else { "" }
        );
        let mut scenario = Scenario::start(target, &name, seed, 2, OpMix::SYNC_HEAVY)?;
        scenario.inject(Fault::FailSync { after_syncs });
        let mut acked_sync_writes = 0u64;
        let mut last_was_sync = false;
        let error = scenario.until_error(FAULT_PHASE_OPS, |g, r| {
            // Counts the previous op: it returned Ok, or we would not be asked for another.
            acked_sync_writes += u64::from(last_was_sync);
            let op = g.next_op(&r.keys);
            last_was_sync = op.durability() == Some(Durability::Sync);
            op
        })?;
        acked_sync_writes += u64::from(last_was_sync && error.is_none());
        report.scenarios += 1;
        match error {
            Some(_) => report.faults_surfaced += 1,
            // Each acknowledged Sync write needs its own fsync; more than `after_syncs` of them
            // means the failing fsync happened without an error. Fine for a file the engine can
            // do without; an engine that acknowledged writes the failed fsync covered loses them
            // at the power loss below, and the crash oracle fails it there.
            None if acked_sync_writes > after_syncs => report.syncs_failed_quietly += 1,
            None => report.faults_not_reached += 1,
        }
        if same_boot {
            scenario.recover_in_the_same_boot()?;
        } else {
            scenario.recover()?;
        }
    }
    Ok(())
}
