//! Strata's test kit (DESIGN.md §5, layers 2–5). One generic entry point per check; each engine
//! instantiates them with its [`Target`]:
//! - [`conformance`]: random ops against a `BTreeMap` model with a pending-aware crash oracle,
//!   on `MemStorage` and `SimStorage`;
//! - [`crash`]: the test binary re-runs itself as a child, SIGKILLs it and checks recovery;
//! - [`faults`]: EIO, ENOSPC, fsync failure and bit flips on `SimStorage`;
//! - [`stress`]: many threads on overlapping keys, lost-update and per-key version checks.
//!
//! Every check prints its seed; `STRATA_SEED=<u64>` replays it (see [`seed`]).

mod backend;
pub mod conformance;
mod escape;
mod failure;
mod keyspace;
mod ops;
mod oracle;
mod runner;
pub mod seed;
mod target;

pub use failure::Failure;
pub use target::{OpenFn, StorageKind, Target};
