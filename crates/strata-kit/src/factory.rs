//! How an engine crate registers with the facade: one `EngineFactory` constant per crate, listed
//! in `crates/strata/src/registry.rs` behind the crate's cargo feature.

use std::sync::Arc;

use strata_core::{Engine, EngineConfig, Result};
use strata_io::Storage;

/// Opens (creating if the storage is empty) one engine on a directory's storage.
pub type OpenEngineFn = fn(Arc<dyn Storage>, &EngineConfig) -> Result<Box<dyn Engine>>;

/// One engine as the facade sees it: its `EngineKind` name, how to open it, and the names of
/// the files it writes.
#[derive(Clone, Copy)]
pub struct EngineFactory {
    /// The name recorded in a directory's manifest (`EngineKind::name`), e.g. `"flex"`.
    pub name: &'static str,
    pub open: OpenEngineFn,
    /// (prefix, suffix) of every file name the engine writes (docs/format/), so a directory
    /// whose manifest is gone can still be told from one that never held a database. Specific
    /// enough that a user's `snapshot-2024.png` or `wal-notes` is not taken for one.
    pub file_patterns: &'static [(&'static str, &'static str)],
}

impl EngineFactory {
    /// Whether `file_name` looks like one of this engine's files.
    pub fn owns_file(&self, file_name: &str) -> bool {
        self.file_patterns
            .iter()
            .any(|(prefix, suffix)| file_name.starts_with(prefix) && file_name.ends_with(suffix))
    }
}

impl std::fmt::Debug for EngineFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineFactory").field("name", &self.name).finish_non_exhaustive()
    }
}
