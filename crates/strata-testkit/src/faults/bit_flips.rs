//! Bit flips in persisted files: after a flip, reopening and reading everything must either
//! fail (open, read or verify) or return correct data — never a value or key that was not
//! written, never durable data silently dropped. The one tolerated loss is a suffix of the writes
//! after the last Sync write: a flip there looks like a torn tail (DESIGN §4, `RecoveryMode`).

use std::fmt;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Error};
use strata_io::Storage;

use super::Scenario;
use crate::escape;
use crate::ops::{Op, OpMix};
use crate::runner::{ExecError, Runner};
use crate::{seed, Failure, Target};

const TRIALS_PER_SEED: u64 = 24;

/// Outcomes of the bit-flip trials.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BitFlipCounts {
    pub flips: u64,
    /// Open or a read returned an error; or reads were legal and `verify` reported the damage.
    pub detected: u64,
    /// Nothing noticed, and every read returned exactly the written data (the flip hit bytes
    /// nothing reads, e.g. a dead record).
    pub undetected_intact: u64,
    /// Nothing noticed; some of the writes after the last Sync are gone: the flip hit the log's
    /// unsynced-until-flush tail, which recovery cannot tell from a torn write. Older data and
    /// values never written are failures.
    pub undetected_torn_tail: u64,
}

impl fmt::Display for BitFlipCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bit flips: {} — {} detected, {} undetected with intact data, {} undetected dropping writes after the \
             last Sync",
            self.flips, self.detected, self.undetected_intact, self.undetected_torn_tail
        )
    }
}

enum Outcome {
    Detected,
    Intact,
    /// Some of the (pending, kept) writes after the last Sync were dropped.
    TornTail(usize, usize),
}

pub(super) fn run(target: &Target, seed: u64, counts: &mut BitFlipCounts) -> Result<(), Failure> {
    for trial in 0..TRIALS_PER_SEED {
        let variant = 100 + trial;
        let mut scenario =
            Scenario::start(target, &format!("bit flip #{trial}"), seed, variant, OpMix::WRITES)?;
        // A last unsynced write, then flush and a clean close: every write is durable, so a flip
        // may drop none of them silently. Left pending, the writes since the last Sync could
        // vanish like a torn tail and pass, which `RecoveryMode` allows only after a crash.
        scenario.runner.guarded(|r| {
            let key = r.keys.write_key(scenario.generator.rng());
            r.exec(&Op::Put { key, value: b"last".to_vec(), durability: Durability::Buffered })?;
            let engine = r.engine()?;
            engine.flush().map_err(|error| ExecError::Engine { call: "flush", error })?;
            r.close()?;
            r.oracle.mark_durable();
            Ok(())
        })?;
        let mut rng = SmallRng::seed_from_u64(seed::derive(seed, variant + 1000));
        // (name, bytes up to and including the last non-zero byte, length)
        let files: Vec<(String, u64, u64)> = scenario
            .sim
            .list()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|name| {
                let durable = scenario.sim.durable_contents(&name)?;
                let used_bytes = durable.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
                Some((name, used_bytes as u64, durable.len() as u64))
            })
            .filter(|(_, _, len)| *len > 0)
            .collect();
        if files.is_empty() {
            let what = "after writes and a flush the engine has no non-empty durable file".to_string();
            return Err(scenario.runner.failure(what));
        }
        let (name, used_bytes, len_bytes) = &files[rng.gen_range(0..files.len())];
        // Mostly aim at written bytes: a zero-filled preallocated tail rarely matters.
        let span_bytes = if *used_bytes > 0 && rng.gen_ratio(9, 10) { *used_bytes } else { *len_bytes };
        let offset = rng.gen_range(0..span_bytes);
        let bit = rng.gen_range(0..8u8);
        let flip = format!("flip bit {bit} of byte {offset} of {name} ({len_bytes} bytes)");
        scenario.runner.note(flip.clone());
        if let Err(e) = scenario.sim.flip_bit(name, offset, bit) {
            return Err(scenario.runner.failure(format!("testkit: flipping a bit failed: {e}")));
        }
        let outcome = scenario.runner.guarded(read_back)?;
        counts.flips += 1;
        match outcome {
            Outcome::Detected => counts.detected += 1,
            Outcome::Intact => counts.undetected_intact += 1,
            Outcome::TornTail(pending, kept) => {
                counts.undetected_torn_tail += 1;
                eprintln!(
                    "[strata-testkit] faults {} seed={seed}: {flip}: undetected, kept {kept} of the {pending} writes \
                     after the last Sync (allowed, like a torn tail)",
                    target.name
                );
            }
        }
    }
    Ok(())
}

/// Reopens and reads every key and a full scan. An engine error there means detected. Otherwise
/// no value may be one never written to its key, and the state must be the durable one plus a
/// prefix of the writes since the last Sync (per key for non-prefix-consistent targets); only
/// then may a failing `verify` count as detection.
fn read_back(r: &mut Runner<'_>) -> Result<Outcome, ExecError> {
    let observed = match r.open_engine().and_then(|()| r.observe()) {
        Ok(observed) => observed,
        Err(ExecError::Engine { .. }) => return Ok(Outcome::Detected),
        Err(wrong) => return Err(wrong),
    };
    for (key, value) in &observed {
        if let Some(v) = value {
            if !r.oracle.was_written(key, v) {
                return Err(ExecError::Wrong(format!(
                    "undetected corruption after a bit flip: key {} returned {}, which was never written to it \
                     (the model holds {})",
                    escape::key(key),
                    escape::value(Some(v)),
                    escape::value(r.oracle.get(key).map(Vec::as_slice))
                )));
            }
        }
    }
    let intact = observed.iter().all(|(k, v)| r.oracle.get(k) == v.as_ref());
    let outcome = if intact {
        Outcome::Intact
    } else {
        match r.oracle.check_recovery(&observed, r.target().prefix_consistent()) {
            Ok(recovery) => Outcome::TornTail(recovery.pending_units, recovery.recovered_units),
            Err(what) => {
                return Err(ExecError::Wrong(format!(
                    "undetected corruption after a bit flip: open and reads succeeded but durable data is silently \
                     lost (only writes after the last Sync may go, like a torn tail). {what}"
                )))
            }
        }
    };
    // Reads were legal; `verify` noticing the flip counts as detection.
    let verified = r.engine()?.verify();
    r.close()?;
    match verified {
        Ok(_) | Err(Error::Unsupported(_)) => Ok(outcome),
        Err(_) => Ok(Outcome::Detected),
    }
}
