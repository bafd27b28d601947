//! How an engine crate registers with the facade: one `EngineFactory` constant per crate, listed
//! in `crates/strata/src/registry.rs` behind the crate's cargo feature.

use std::sync::Arc;

use strata_core::{Engine, EngineConfig, Result};
use strata_io::Storage;

/// Opens (creating if the storage is empty) one engine on a directory's storage.
pub type OpenEngineFn = fn(Arc<dyn Storage>, &EngineConfig) -> Result<Box<dyn Engine>>;

/// One engine as the facade sees it: its `EngineKind` name and how to open it.
#[derive(Clone, Copy)]
pub struct EngineFactory {
    /// The name recorded in a directory's manifest (`EngineKind::name`), e.g. `"flex"`.
    pub name: &'static str,
    pub open: OpenEngineFn,
}

impl std::fmt::Debug for EngineFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineFactory").field("name", &self.name).finish_non_exhaustive()
    }
}
