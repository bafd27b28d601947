use std::sync::Arc;

use strata_core::{Durability, EngineConfig, RecoveryMode};
use strata_io::Storage;

use crate::EngineKind;

/// How to open a database. A builder: `Options::new(EngineKind::Memory).memory_budget_bytes(512 << 20)`.
#[derive(Clone, Debug)]
pub struct Options {
    /// `None`: use whatever engine the directory's manifest names (the directory must exist).
    pub(crate) engine: Option<EngineKind>,
    pub(crate) create_if_missing: bool,
    pub(crate) error_if_exists: bool,
    pub(crate) default_durability: Durability,
    pub(crate) engine_config: EngineConfig,
    pub(crate) storage: Option<Arc<dyn Storage>>,
}

impl Options {
    /// Open (creating if missing) a database of this engine kind.
    pub fn new(engine: EngineKind) -> Self {
        Options {
            engine: Some(engine),
            create_if_missing: true,
            error_if_exists: false,
            default_durability: Durability::default(),
            engine_config: EngineConfig::default(),
            storage: None,
        }
    }

    /// Open an existing database with the engine its manifest names.
    pub fn existing() -> Self {
        Options { engine: None, create_if_missing: false, ..Options::new(EngineKind::Memory) }
    }

    pub fn engine(&self) -> Option<EngineKind> {
        self.engine
    }

    pub fn create_if_missing(mut self, yes: bool) -> Self {
        self.create_if_missing = yes;
        self
    }

    pub fn error_if_exists(mut self, yes: bool) -> Self {
        self.error_if_exists = yes;
        self
    }

    /// Durability of `put`, `delete` and `rmw` (the `_with` variants take it explicitly).
    /// Default: `Durability::Buffered`.
    pub fn default_durability(mut self, durability: Durability) -> Self {
        self.default_durability = durability;
        self
    }

    /// Total memory the engine may use for caches, buffers and indexes.
    pub fn memory_budget_bytes(mut self, bytes: u64) -> Self {
        self.engine_config.memory_budget_bytes = bytes;
        self
    }

    pub fn recovery_mode(mut self, mode: RecoveryMode) -> Self {
        self.engine_config.recovery_mode = mode;
        self
    }

    pub fn wal_segment_bytes(mut self, bytes: u64) -> Self {
        self.engine_config.wal_segment_bytes = Some(bytes);
        self
    }

    /// Use O_DIRECT for data files where the engine supports it.
    pub fn direct_io(mut self, yes: bool) -> Self {
        self.engine_config.direct_io = yes;
        self
    }

    /// Sets one engine-specific knob by name, e.g. `engine_option("max_interval_records", "64")`
    /// for flex or `engine_option("read_cache_bytes", "64MiB")` for f2 (the names are the fields of
    /// each engine's options struct; docs/ARCHITECTURE.md lists them). `Db::open` fails with
    /// `Error::InvalidArgument` for a name the engine does not know or a value it cannot take.
    /// Knobs are not stored: each open uses the ones it is given. Setting a name again replaces
    /// its value.
    pub fn engine_option(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.engine_config = self.engine_config.engine_option(name, value);
        self
    }

    /// Run on this storage instead of files under the path given to `Db::open` (in-memory or
    /// simulated disks for tests; the path is then only used in messages).
    pub fn storage(mut self, storage: Arc<dyn Storage>) -> Self {
        self.storage = Some(storage);
        self
    }

    pub fn engine_config(&self) -> &EngineConfig {
        &self.engine_config
    }
}
