//! Engine building blocks that two or more Strata engines use. A piece lives here once a second
//! engine needs it; engines never depend on each other. docs/ARCHITECTURE.md ("The shared kit")
//! lists what is here and what is planned.

/// Sticky failure state; it lives in strata-core because the WAL (below this crate) uses it.
pub use strata_core::Poison;

pub mod apply_order;
pub mod cache;
pub mod chunked_range;
mod factory;
pub mod inline_key;
pub mod io_cause;
pub mod logged_writes;
pub mod memtable;
pub mod open_state;
pub mod parallel;
pub mod replay;
pub mod small_file;
pub mod sorted_run;
pub mod tables;
pub mod versioned_memtable;
pub mod worker;

pub use factory::{EngineFactory, OpenEngineFn};
