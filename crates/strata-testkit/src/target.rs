use std::fmt;
use std::sync::Arc;

use strata_core::{Capabilities, Engine, Result};
use strata_io::{MemStorage, Storage};

/// Opens (creating if needed) an engine on the given storage. Called again after every reopen and
/// every simulated crash, always with the same storage.
pub type OpenFn = Arc<dyn Fn(Arc<dyn Storage>) -> Result<Box<dyn Engine>> + Send + Sync>;

/// An engine under test, as every check sees it. The checks follow the engine's own
/// `capabilities()`: `ordered` (an unordered engine's `range` must be `Error::Unsupported`) and
/// `prefix_consistent_recovery` (when false, the crash oracle only requires each key to hold its
/// durable value or one of its pending values, and no write batch to be partly applied).
#[derive(Clone)]
pub struct Target {
    /// Shown in seeds lines and failures, e.g. `"memory"`.
    pub name: &'static str,
    pub open: OpenFn,
    /// What the engine reported when `Target::new` opened it on an empty `MemStorage`.
    pub capabilities: Capabilities,
}

impl Target {
    /// A target whose capabilities are read from the engine itself: `open` runs once on an empty
    /// `MemStorage` and the engine is closed again. Panics (this is test setup) when that fails.
    pub fn new(name: &'static str, open: OpenFn) -> Target {
        let engine = open(Arc::new(MemStorage::new())).unwrap_or_else(|e| {
            panic!("target {name}: opening the engine to read its capabilities failed: {e}")
        });
        let capabilities = engine.capabilities();
        if let Err(e) = engine.close() {
            panic!("target {name}: closing the engine after reading its capabilities failed: {e}");
        }
        Target { name, open, capabilities }
    }

    pub fn ordered(&self) -> bool {
        self.capabilities.ordered
    }

    pub fn prefix_consistent(&self) -> bool {
        self.capabilities.prefix_consistent_recovery
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("capabilities", &self.capabilities)
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
