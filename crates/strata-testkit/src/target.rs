use std::fmt;
use std::sync::Arc;

use strata_core::{Engine, Result};
use strata_io::Storage;

/// Opens (creating if needed) an engine on the given storage. Called again after every reopen and
/// every simulated crash, always with the same storage.
pub type OpenFn = Arc<dyn Fn(Arc<dyn Storage>) -> Result<Box<dyn Engine>> + Send + Sync>;

/// An engine under test, as every check sees it.
#[derive(Clone)]
pub struct Target {
    /// Shown in seeds lines and failures, e.g. `"memory"`.
    pub name: &'static str,
    pub open: OpenFn,
    /// Supports `range()`. Unordered engines must return `Error::Unsupported` from `range`.
    pub ordered: bool,
    /// Crash recovery yields a prefix of the write history (WAL engines). When false, the crash
    /// oracle only requires each key to hold its durable value or one of its pending values, and
    /// no write batch to be partly applied.
    pub prefix_consistent: bool,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("ordered", &self.ordered)
            .field("prefix_consistent", &self.prefix_consistent)
            .finish_non_exhaustive()
    }
}

/// Which storage backend a conformance run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageKind {
    /// `MemStorage`: fast, no crashes.
    Mem,
    /// `SimStorage`: adds simulated power loss (torn and dropped unsynced writes) to the op mix.
    Sim,
}

impl StorageKind {
    pub fn name(self) -> &'static str {
        match self {
            StorageKind::Mem => "mem",
            StorageKind::Sim => "sim",
        }
    }
}
