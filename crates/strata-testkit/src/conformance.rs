//! Layer 2: random operations against a `BTreeMap` model, on `MemStorage` or `SimStorage`.
//!
//! Ops: get, put/delete with random durability, write batches (duplicate keys: last wins),
//! read-modify-write, forward and reverse ranges (random, empty, inverted, prefix, limited),
//! flush, clean reopen, and on sim storage simulated power loss. Reads between crashes must
//! match the model exactly; after a crash the pending-aware oracle decides (see `oracle`). A run
//! ends with a clean reopen that must return everything acknowledged, and a passing `verify`.

use crate::backend::Backend;
use crate::ops::{Generator, Op, OpMix};
use crate::runner::Runner;
use crate::{seed, StorageKind, Target};

pub use crate::runner::Report;
pub use crate::Failure;

/// Seeds per `check` unless `STRATA_SEEDS` says otherwise.
pub const DEFAULT_SEEDS: usize = 3;
/// Operations per seed unless `STRATA_OPS` says otherwise.
pub const DEFAULT_OPS_PER_SEED: usize = 1500;

/// One conformance run.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    pub seed: u64,
    pub storage: StorageKind,
    pub ops: usize,
}

impl Config {
    pub fn new(storage: StorageKind, seed: u64) -> Config {
        Config { seed, storage, ops: DEFAULT_OPS_PER_SEED }
    }

    pub fn with_ops(mut self, ops: usize) -> Config {
        self.ops = ops;
        self
    }
}

/// Runs the suite for a few seeds (see [`crate::seed`]); panics with the seed, the failing op,
/// what differed, the recent ops and the replay command.
pub fn check(target: &Target, storage: StorageKind) {
    let ops = seed::ops_per_seed(DEFAULT_OPS_PER_SEED);
    for seed in seed::seeds(DEFAULT_SEEDS) {
        let label = format!("conformance {}/{}", target.name, storage.name());
        eprintln!("[strata-testkit] {label} seed={seed} ops={ops}");
        match run(target, &Config::new(storage, seed).with_ops(ops)) {
            Ok(report) => eprintln!("[strata-testkit] {label} seed={seed} ok: {report}"),
            Err(failure) => failure.raise(),
        }
    }
}

/// One seeded run; `Err` describes the first misbehaviour (an engine panic included).
pub fn run(target: &Target, cfg: &Config) -> Result<Report, Failure> {
    let check = format!("conformance {}/{}", target.name, cfg.storage.name());
    let backend = Backend::new(cfg.storage, seed::derive(cfg.seed, 1));
    let mut runner = Runner::new(target, check, cfg.seed, backend)?;
    let mix = match cfg.storage {
        StorageKind::Sim => OpMix::CONFORMANCE,
        StorageKind::Mem => OpMix::CONFORMANCE.without_crashes(),
    };
    let mut generator = Generator::new(seed::derive(cfg.seed, 2), mix, runner.limits());
    runner.guarded(|runner| {
        for _ in 0..cfg.ops {
            let op = generator.next_op(&runner.keys);
            runner.exec(&op)?;
        }
        runner.exec(&Op::Reopen)?;
        runner.verify_and_stats()?;
        runner.close()?;
        Ok(runner.report)
    })
}
