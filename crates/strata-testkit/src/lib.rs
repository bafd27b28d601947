//! Strata's test kit (DESIGN.md §5, layers 2–5). One generic entry point per check; each engine
//! instantiates them with its [`Target`]:
//! - [`conformance`]: random ops against a `BTreeMap` model with a pending-aware crash oracle,
//!   on `MemStorage` and `SimStorage`;
//! - [`crash`]: the test binary re-runs itself as a child, SIGKILLs it and checks recovery;
//! - [`faults`]: EIO, ENOSPC, fsync failure and bit flips on `SimStorage`;
//! - [`failed_writes`]: a write, batch or rmw that returned `Err` is never seen by a reader on
//!   the same handle, and after a reopen only as an unacknowledged write may be;
//! - [`in_flight`]: a write held inside its log commit is invisible to a concurrent reader until
//!   that commit succeeded, and writes become visible in log order;
//! - [`stress`]: many threads on overlapping keys, lost-update and per-key version checks;
//! - [`bulk_load`]: `Engine::bulk_load` into an empty and a non-empty store, with an error item
//!   and a power cut mid-load;
//! - [`damage`]: every file of a cleanly closed store cut short, deleted or emptied: the reopen
//!   must fail naming the file or keep every acknowledged key (never silent loss).
//!
//! Every check prints its seed; `STRATA_SEED=<u64>` replays it, `STRATA_SEEDS=<n>` runs more
//! seeds, `STRATA_OPS=<n>` changes the ops per seed (see [`seed`]). A failure panics with the
//! seed, the op index, what differed, the last ops and the replay command.
//!
//! An engine's test file:
//! ```ignore
//! fn target() -> Target {
//!     // The checks follow the engine's own `capabilities()` (ordered scans, recovery guarantee).
//!     Target::new("memory", Arc::new(|storage: Arc<dyn Storage>| {
//!         Ok(Box::new(MemoryEngine::open(storage, &EngineConfig::default())?) as Box<dyn Engine>)
//!     }))
//! }
//! #[test] fn conformance_mem() { strata_testkit::conformance::check(&target(), StorageKind::Mem) }
//! #[test] fn conformance_sim() { strata_testkit::conformance::check(&target(), StorageKind::Sim) }
//! #[test] fn faults() { strata_testkit::faults::check(&target()) }
//! #[test] fn stress() { strata_testkit::stress::check(&target(), 4, 2000) }
//! #[test] fn process_kill() { strata_testkit::crash::process_kill(&target(), "process_kill", 10) }
//! ```

mod backend;
pub mod bulk_load;
pub mod conformance;
pub mod crash;
pub mod damage;
pub mod disk;
mod escape;
pub mod failed_writes;
mod failure;
pub mod faults;
pub mod in_flight;
#[doc(hidden)]
pub mod instantiate;
mod keyspace;
mod ops;
mod oracle;
pub mod point_in_time;
mod runner;
pub mod seed;
pub mod stress;
mod target;

pub use failure::Failure;
pub use target::{OpenFn, StorageKind, Target};
