//! Executes ops against an engine and checks every answer against the [`Oracle`]; shared by the
//! conformance and fault-injection checks.

use std::collections::BTreeSet;
use std::fmt;

use strata_core::{Direction, Durability, Engine, Error, Key, KeyRange, Limits, Value};

use crate::backend::Backend;
use crate::escape;
use crate::failure::{catch, Failure, History};
use crate::keyspace::KeySpace;
use crate::ops::{rmw_step, CrashKind, Op};
use crate::oracle::{Observed, Oracle};
use crate::Target;

/// What a run did, counted as the runner executes ops (`conformance::run` returns it); the crash
/// counts show the oracle was exercised.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub seed: u64,
    pub ops: u64,
    pub reads: u64,
    pub writes: u64,
    pub scans: u64,
    pub flushes: u64,
    pub reopens: u64,
    pub crashes: u64,
    /// Write units not yet durable when a crash hit, summed over crashes.
    pub pending_units_at_crashes: u64,
    /// Of those, units the recovered state kept.
    pub pending_units_recovered: u64,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ops ({} reads, {} writes, {} scans), {} flushes, {} reopens, {} crashes keeping {} of {} \
             pending write units",
            self.ops,
            self.reads,
            self.writes,
            self.scans,
            self.flushes,
            self.reopens,
            self.crashes,
            self.pending_units_recovered,
            self.pending_units_at_crashes
        )
    }
}

/// Why an op did not complete as the model says.
#[derive(Debug)]
pub(crate) enum ExecError {
    /// The engine returned an error (legal only when faults are injected).
    Engine { call: &'static str, error: Error },
    /// The engine answered, wrongly.
    Wrong(String),
}

impl ExecError {
    pub(crate) fn describe(&self) -> String {
        match self {
            ExecError::Engine { call, error } => format!("{call} returned an error: {error}"),
            ExecError::Wrong(what) => what.clone(),
        }
    }
}

fn failed(call: &'static str) -> impl FnOnce(Error) -> ExecError {
    move |error| ExecError::Engine { call, error }
}

pub(crate) struct Runner<'t> {
    target: &'t Target,
    /// Names the check in failures, e.g. `conformance memory/sim`.
    check: String,
    backend: Backend,
    engine: Option<Box<dyn Engine>>,
    pub(crate) oracle: Oracle,
    pub(crate) keys: KeySpace,
    limits: Limits,
    history: History,
    next_op_index: u64,
    pub(crate) report: Report,
    /// A write that returns `Err` is recorded with `Oracle::apply_failed` (never visible to
    /// reads on this handle) instead of as a pending unit reads may see (the failed-writes check).
    pub(crate) failed_writes_hidden: bool,
}

impl<'t> Runner<'t> {
    /// Opens the engine on `backend`, which must be empty: the model starts empty.
    pub(crate) fn new(
        target: &'t Target,
        check: String,
        seed: u64,
        backend: Backend,
    ) -> Result<Runner<'t>, Failure> {
        let opened = catch(|| (target.open)(backend.storage()));
        let fail = |description: String| Failure {
            check: check.clone(),
            seed,
            op_index: None,
            description,
            recent_ops: Vec::new(),
        };
        let engine = match opened {
            Ok(Ok(engine)) => engine,
            Ok(Err(e)) => return Err(fail(format!("opening the engine on empty storage failed: {e}"))),
            Err(panic) => return Err(fail(format!("opening the engine panicked: {panic}"))),
        };
        let limits = engine.limits();
        Ok(Runner {
            target,
            check,
            backend,
            engine: Some(engine),
            oracle: Oracle::new(),
            keys: KeySpace::new(seed, limits),
            limits,
            history: History::default(),
            next_op_index: 0,
            report: Report { seed, ..Report::default() },
            failed_writes_hidden: false,
        })
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    pub(crate) fn target(&self) -> &Target {
        self.target
    }

    /// A failure at the last op executed, with the recent history.
    pub(crate) fn failure(&self, description: String) -> Failure {
        Failure {
            check: self.check.clone(),
            seed: self.report.seed,
            op_index: self.next_op_index.checked_sub(1),
            description,
            recent_ops: self.history.lines(),
        }
    }

    /// Runs `body`; an error or a panic (the engine's or the kit's) becomes a [`Failure`] at the
    /// current op.
    pub(crate) fn guarded<T>(
        &mut self,
        body: impl FnOnce(&mut Self) -> Result<T, ExecError>,
    ) -> Result<T, Failure> {
        match catch(|| body(&mut *self)) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(self.failure(e.describe())),
            Err(panic) => Err(self.failure(format!("the engine panicked: {panic}"))),
        }
    }

    /// Notes a step that is not an `Op` (fault injection, a bit flip) in the history.
    pub(crate) fn note(&mut self, what: String) {
        self.history.push(format!("       {what}"));
    }

    pub(crate) fn engine(&self) -> Result<&dyn Engine, ExecError> {
        self.engine
            .as_deref()
            .ok_or_else(|| ExecError::Wrong("no engine is open (the last open failed)".into()))
    }

    /// Executes one op and checks its result against the model. A write that returns an error
    /// is kept as a pending unit: it may or may not have been applied.
    pub(crate) fn exec(&mut self, op: &Op) -> Result<(), ExecError> {
        self.history.push(format!("#{:<5} {op}", self.next_op_index));
        self.next_op_index += 1;
        self.report.ops += 1;
        let result = self.exec_unrecorded(op);
        if let Err(failed @ ExecError::Engine { .. }) = &result {
            // Which calls failed is what a fault check's report needs to be read at all.
            self.history.push(format!("         -> {}", failed.describe()));
        }
        result
    }

    fn exec_unrecorded(&mut self, op: &Op) -> Result<(), ExecError> {
        match op {
            Op::Get { key } => self.get(key),
            Op::Put { .. } | Op::Delete { .. } | Op::Batch { .. } | Op::Rmw { .. } => self.write(op),
            Op::Range { range, direction, limit } => self.range(range, *direction, *limit),
            Op::Flush => {
                self.report.flushes += 1;
                self.engine()?.flush().map_err(failed("flush"))?;
                self.oracle.mark_durable();
                Ok(())
            }
            Op::Reopen => self.reopen(),
            Op::Crash { kind } => self.crash(*kind),
        }
    }

    fn get(&mut self, key: &[u8]) -> Result<(), ExecError> {
        self.report.reads += 1;
        let actual = self.engine()?.get(key).map_err(failed("get"))?;
        let expected = self.oracle.get(key);
        if actual.as_ref() != expected {
            return Err(ExecError::Wrong(format!(
                "get {} returned {}, but the model holds {}",
                escape::key(key),
                escape::value(actual.as_deref()),
                escape::value(expected.map(Vec::as_slice))
            )));
        }
        Ok(())
    }

    fn write(&mut self, op: &Op) -> Result<(), ExecError> {
        self.report.writes += 1;
        let Some(unit) = op.unit(|k| self.oracle.get(k).cloned()) else { return Ok(()) };
        let durability = op.durability().unwrap_or_default();
        let engine = self.engine()?;
        let result = match op {
            Op::Rmw { key, .. } => self.rmw(engine, key, durability),
            _ => op.execute_write(engine).map_err(failed("write")),
        };
        match (&result, self.failed_writes_hidden) {
            (Err(_), true) => self.oracle.apply_failed(unit),
            _ => self.oracle.apply(unit),
        }
        result?;
        match durability {
            Durability::Sync => self.oracle.mark_durable(),
            Durability::Buffered => self.oracle.mark_handed_to_os(),
            Durability::None => {}
        }
        Ok(())
    }

    fn rmw(&self, engine: &dyn Engine, key: &[u8], durability: Durability) -> Result<(), ExecError> {
        let model_old = self.oracle.get(key).cloned();
        let mut last_seen: Option<Option<Value>> = None;
        let mut step = |old: Option<&[u8]>| {
            last_seen = Some(old.map(<[u8]>::to_vec));
            rmw_step(old)
        };
        let stored = engine.rmw(key, &mut step, durability).map_err(failed("rmw"))?;
        let wrong = |what: String| Err(ExecError::Wrong(format!("rmw {}: {what}", escape::key(key))));
        match last_seen {
            None => return wrong("returned Ok without calling the closure".into()),
            Some(seen) if seen != model_old => {
                return wrong(format!(
                    "the closure saw {}, but the model holds {}",
                    escape::value(seen.as_deref()),
                    escape::value(model_old.as_deref())
                ))
            }
            Some(_) => {}
        }
        let expected = rmw_step(model_old.as_deref());
        if stored != expected {
            return wrong(format!(
                "returned {} as the stored value, expected {}",
                escape::value(stored.as_deref()),
                escape::value(expected.as_deref())
            ));
        }
        Ok(())
    }

    fn range(
        &mut self,
        range: &KeyRange,
        direction: Direction,
        limit: Option<usize>,
    ) -> Result<(), ExecError> {
        self.report.scans += 1;
        let engine = self.engine()?;
        if !self.target.ordered() {
            return match engine.range(range.clone(), direction) {
                Err(Error::Unsupported(_)) => Ok(()),
                Err(e) => Err(ExecError::Wrong(format!(
                    "an unordered engine's range must fail with Unsupported, got: {e}"
                ))),
                Ok(_) => Err(ExecError::Wrong(
                    "an unordered engine's range returned Ok, expected Unsupported".into(),
                )),
            };
        }
        let actual = scan(engine, range, direction, limit)?;
        let expected = self.oracle.range(range, direction, limit);
        if actual == expected {
            return Ok(());
        }
        let shown = escape::range(range, direction);
        let first_diff = actual.iter().zip(&expected).position(|(a, e)| a != e);
        let what = match first_diff {
            Some(i) => format!(
                "item #{i} is {} = {}, the model has {} = {}",
                escape::key(&actual[i].0),
                escape::value(Some(&actual[i].1)),
                escape::key(&expected[i].0),
                escape::value(Some(&expected[i].1))
            ),
            None if actual.len() > expected.len() => {
                format!(
                    "it returned {} items, the model {}; first extra: {}",
                    actual.len(),
                    expected.len(),
                    escape::key(&actual[expected.len()].0)
                )
            }
            None => format!(
                "it returned {} items, the model {}; first missing: {}",
                actual.len(),
                expected.len(),
                escape::key(&expected[actual.len()].0)
            ),
        };
        Err(ExecError::Wrong(format!("range {shown} (limit {limit:?}) differs from the model: {what}")))
    }

    fn reopen(&mut self) -> Result<(), ExecError> {
        self.report.reopens += 1;
        let engine =
            self.engine.take().ok_or_else(|| ExecError::Wrong("no engine is open to close".into()))?;
        let closed = engine.close();
        drop(engine);
        closed.map_err(failed("close"))?;
        self.oracle.mark_durable();
        self.open_engine()?;
        self.verify_all("after close and reopen")
    }

    /// Close (which may fail after injected faults), drop, open, without a crash. A close that
    /// returned Ok is a durability point: everything acknowledged must be back exactly and no
    /// failed write. A failed close leaves the files as the last process wrote them, so the
    /// crash oracle decides (failed and unsynced writes pending); its state becomes the model.
    /// Returns whether the close succeeded.
    pub(crate) fn reopen_after_faults(&mut self) -> Result<bool, ExecError> {
        self.history.push(format!("#{:<5} reopen (close, may fail; drop; open)", self.next_op_index));
        self.next_op_index += 1;
        let engine =
            self.engine.take().ok_or_else(|| ExecError::Wrong("no engine is open to close".into()))?;
        let closed = catch(|| engine.close())
            .map_err(|panic| ExecError::Wrong(format!("close panicked: {panic}")))?
            .is_ok();
        drop(engine);
        self.open_engine()?;
        if closed {
            self.oracle.mark_durable();
            self.verify_all("after a close that returned Ok and a reopen")?;
            return Ok(true);
        }
        let observed = self.observe()?;
        self.oracle.check_restart(&observed, self.target.prefix_consistent()).map_err(|what| {
            ExecError::Wrong(format!("after a failed close and a reopen (no crash): {what}"))
        })?;
        self.oracle.reset_to(&observed);
        Ok(false)
    }

    /// Power loss, drop, reopen; then the recovered state must pass the pending-aware oracle,
    /// and becomes the model.
    fn crash(&mut self, kind: CrashKind) -> Result<(), ExecError> {
        let Some(sim) = self.backend.sim() else {
            return Err(ExecError::Wrong("testkit bug: a crash on storage that cannot simulate one".into()));
        };
        sim.crash(kind.mode());
        // Dropped after the power loss: its handles are stale, whatever it tries to write is lost.
        self.engine = None;
        self.open_engine()?;
        let observed = self.observe()?;
        let recovery = self
            .oracle
            .check_recovery(&observed, self.target.prefix_consistent())
            .map_err(ExecError::Wrong)?;
        self.oracle.reset_to(&observed);
        self.report.crashes += 1;
        self.report.pending_units_at_crashes += recovery.pending_units as u64;
        self.report.pending_units_recovered += recovery.recovered_units as u64;
        Ok(())
    }

    pub(crate) fn open_engine(&mut self) -> Result<(), ExecError> {
        self.engine = None;
        self.engine = Some((self.target.open)(self.backend.storage()).map_err(failed("open"))?);
        Ok(())
    }

    /// Every key of the key space and the model (get), plus a full scan for ordered engines;
    /// scan and gets must agree.
    pub(crate) fn observe(&self) -> Result<Observed, ExecError> {
        let engine = self.engine()?;
        let mut keys: BTreeSet<Key> = self.keys.all().cloned().collect();
        keys.extend(self.oracle.known_keys());
        let mut observed = Observed::new();
        for key in keys {
            let value = engine.get(&key).map_err(failed("get"))?;
            observed.insert(key, value);
        }
        if !self.target.ordered() {
            return Ok(observed);
        }
        let scanned = scan(engine, &KeyRange::all(), Direction::Forward, None)?;
        for (key, value) in &scanned {
            match observed.get(key) {
                None => {
                    observed.insert(key.clone(), Some(value.clone()));
                }
                Some(got) if got.as_ref() == Some(value) => {}
                Some(got) => {
                    return Err(ExecError::Wrong(format!(
                        "a full scan returns {} = {}, but get returns {}",
                        escape::key(key),
                        escape::value(Some(value)),
                        escape::value(got.as_deref())
                    )))
                }
            }
        }
        let scanned_keys: BTreeSet<&Key> = scanned.iter().map(|(k, _)| k).collect();
        if let Some((key, _)) = observed.iter().find(|(k, v)| v.is_some() && !scanned_keys.contains(k)) {
            return Err(ExecError::Wrong(format!(
                "get finds {}, but a full scan does not return it",
                escape::key(key)
            )));
        }
        Ok(observed)
    }

    /// Reads everything back; it must equal the model exactly.
    pub(crate) fn verify_all(&self, when: &str) -> Result<(), ExecError> {
        let observed = self.observe()?;
        for (key, actual) in &observed {
            let expected = self.oracle.get(key);
            if actual.as_ref() != expected {
                return Err(ExecError::Wrong(format!(
                    "{when}: key {} is {}, the model holds {}",
                    escape::key(key),
                    escape::value(actual.as_deref()),
                    escape::value(expected.map(Vec::as_slice))
                )));
            }
        }
        Ok(())
    }

    /// `verify` must pass on an undamaged store (or be unsupported); `stats` must not panic.
    pub(crate) fn verify_and_stats(&self) -> Result<(), ExecError> {
        let engine = self.engine()?;
        match engine.verify() {
            Ok(_) | Err(Error::Unsupported(_)) => {}
            Err(error) => return Err(ExecError::Engine { call: "verify", error }),
        }
        let _ = engine.stats();
        Ok(())
    }

    /// Closes the engine; it must succeed.
    pub(crate) fn close(&mut self) -> Result<(), ExecError> {
        match self.engine.take() {
            Some(engine) => engine.close().map_err(failed("close")),
            None => Ok(()),
        }
    }
}

/// Scans up to `limit` items and checks they are strictly ordered in `direction` and inside
/// `range`.
pub(crate) fn scan(
    engine: &dyn Engine,
    range: &KeyRange,
    direction: Direction,
    limit: Option<usize>,
) -> Result<Vec<(Key, Value)>, ExecError> {
    let shown = || escape::range(range, direction);
    let iter = engine.range(range.clone(), direction).map_err(failed("range"))?;
    let mut items: Vec<(Key, Value)> = Vec::new();
    for item in iter.take(limit.unwrap_or(usize::MAX)) {
        let (key, value) = item.map_err(failed("range (next item)"))?;
        if let Some((prev, _)) = items.last() {
            let ordered = match direction {
                Direction::Forward => prev < &key,
                Direction::Reverse => prev > &key,
            };
            if !ordered {
                return Err(ExecError::Wrong(format!(
                    "range {} is not strictly ordered: {} came after {}",
                    shown(),
                    escape::key(&key),
                    escape::key(prev)
                )));
            }
        }
        if !range.contains(&key) {
            return Err(ExecError::Wrong(format!(
                "range {} returned {}, which is outside it",
                shown(),
                escape::key(&key)
            )));
        }
        items.push((key, value));
    }
    Ok(items)
}
