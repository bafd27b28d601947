//! Engine `flex` in the facade's contract: its registration, capabilities and maintenance.

use strata_core::{Capabilities, Error, Maintenance, MaintenanceTask, Result};
use strata_kit::EngineFactory;

use crate::FlexEngine;

/// Registers engine `flex` with the facade (`crates/strata/src/registry.rs`).
pub const FACTORY: EngineFactory =
    EngineFactory { name: "flex", open: |storage, config| Ok(Box::new(FlexEngine::open(storage, config)?)) };

pub(crate) const CAPABILITIES: Capabilities = Capabilities {
    ordered: true,
    // A scan reads the MemTables and the table file window by window (flexdb/iter.rs).
    point_in_time_scans: false,
    prefix_consistent_recovery: true,
    columnar: false,
    runtime_options: &[],
    maintenance: &[MaintenanceTask::Commit],
};

impl Maintenance for FlexEngine {
    fn set_option(&self, name: &str, _value: &str) -> Result<()> {
        Err(Error::invalid(format!("engine 'flex' has no runtime option {name:?}")))
    }

    /// `Commit`: the MemTables into the table file now, in the caller's thread.
    fn run(&self, task: MaintenanceTask) -> Result<()> {
        match task {
            MaintenanceTask::Commit => self.commit(),
            other => Err(Error::unsupported(format!("engine 'flex' has no '{}' task", other.name()))),
        }
    }
}
