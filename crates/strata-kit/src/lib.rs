//! Engine building blocks that two or more Strata engines use. A piece lives here once a second
//! engine needs it; engines never depend on each other. docs/ARCHITECTURE.md ("The shared kit")
//! lists what is here and what is planned.

pub mod cache;
mod factory;
pub mod inline_key;
pub mod memtable;

pub use factory::{EngineFactory, OpenEngineFn};
