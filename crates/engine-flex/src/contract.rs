//! Engine `flex` in the facade's contract: its registration, capabilities and maintenance.

use strata_core::{Capabilities, EngineOptionReader, Error, Maintenance, MaintenanceTask, Result};
use strata_kit::EngineFactory;

use crate::FlexEngine;

/// Registers engine `flex` with the facade (`crates/strata/src/registry.rs`).
pub const FACTORY: EngineFactory = EngineFactory {
    name: "flex",
    open: |storage, config| Ok(Box::new(FlexEngine::open(storage, config)?)),
    file_patterns: &[("flexdb-", "")],
};

pub(crate) const CAPABILITIES: Capabilities = Capabilities {
    ordered: true,
    // A scan reads the MemTables and the table file window by window (flexdb/iter.rs).
    point_in_time_scans: false,
    prefix_consistent_recovery: true,
    columnar: false,
    runtime_options: &["cache_bytes"],
    maintenance: &[MaintenanceTask::Commit],
};

impl Maintenance for FlexEngine {
    /// `cache_bytes`: the interval cache's size, read as at open (up to the memory budget); a
    /// smaller cache evicts at once.
    fn set_option(&self, name: &str, value: &str) -> Result<()> {
        match name {
            "cache_bytes" => {
                let budget = self.memory_budget_bytes().max(4 << 10);
                self.set_cache_bytes(EngineOptionReader::runtime_bytes(
                    "flex",
                    "cache_bytes",
                    value,
                    0..=budget,
                )?)
            }
            other => Err(Error::invalid(format!("engine 'flex' has no runtime option {other:?}"))),
        }
    }

    /// `Commit`: the MemTables into the table file now, in the caller's thread.
    fn run(&self, task: MaintenanceTask) -> Result<()> {
        match task {
            MaintenanceTask::Commit => self.commit(),
            other => Err(other.not_offered_by("flex")),
        }
    }
}
