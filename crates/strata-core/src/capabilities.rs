//! What an engine can do, as the engine itself reports it, and the maintenance side of the
//! contract (runtime knobs, work the caller may ask for now). The facade checks a request against
//! `Capabilities` before it reaches the engine, so an engine's `Maintenance` only sees names and
//! tasks it declared.

use crate::Result;

/// Maintenance work a caller may ask an engine to do now instead of waiting for its triggers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MaintenanceTask {
    /// Move what sits only in memory and the log (a MemTable, a record cache's dirty records) into
    /// the engine's main structure, so recovery has less log to replay.
    Commit,
    /// Reclaim space and reorganize: compaction, garbage collection, merging.
    Compact,
    /// Persist a recovery point (checkpoint, snapshot) and drop the log it covers.
    Checkpoint,
}

impl MaintenanceTask {
    pub const ALL: [MaintenanceTask; 3] =
        [MaintenanceTask::Commit, MaintenanceTask::Compact, MaintenanceTask::Checkpoint];

    pub fn name(self) -> &'static str {
        match self {
            MaintenanceTask::Commit => "commit",
            MaintenanceTask::Compact => "compact",
            MaintenanceTask::Checkpoint => "checkpoint",
        }
    }

    /// The error for an engine asked for a task it does not declare (the facade refuses those
    /// first; an engine's `Maintenance::run` uses it for the arms it never sees).
    pub fn not_offered_by(self, engine: &str) -> crate::Error {
        crate::Error::unsupported(format!("the '{engine}' engine has no '{}' maintenance task", self.name()))
    }

    /// The task named `name` (`"commit"`, `"compact"`, `"checkpoint"`).
    pub fn from_name(name: &str) -> Option<MaintenanceTask> {
        MaintenanceTask::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// What an engine supports. Tests, the bench and the facade read this instead of keeping their
/// own per-engine flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// `range` works; an unordered engine returns `Error::Unsupported` from it.
    pub ordered: bool,
    /// A scan sees the store as of one moment (writes during the scan are not seen).
    pub point_in_time_scans: bool,
    /// After a crash the store holds a prefix of the acknowledged write history (a WAL engine);
    /// otherwise each key holds its durable value or one of its pending ones, and no batch is
    /// partly applied.
    pub prefix_consistent_recovery: bool,
    /// The engine stores tables column by column itself (`Engine::open_table` returns its own
    /// table); otherwise tables are row-encoded values (`RowEncodedTable`).
    pub columnar: bool,
    /// Engine options that `set_option` may change while the store is open.
    pub runtime_options: &'static [&'static str],
    /// Tasks `Maintenance::run` accepts.
    pub maintenance: &'static [MaintenanceTask],
}

/// Runtime knobs and maintenance on demand. The facade has already checked that `name` is in
/// `Capabilities::runtime_options` and `task` in `Capabilities::maintenance`.
pub trait Maintenance: Send + Sync {
    /// Changes a runtime knob. The value text is parsed as at open (`EngineOptionReader`); a value
    /// out of range is `Error::InvalidArgument` and leaves the knob as it was.
    fn set_option(&self, name: &str, value: &str) -> Result<()>;

    /// Runs `task` now and returns when it is done.
    fn run(&self, task: MaintenanceTask) -> Result<()>;
}

/// For engines with no runtime knobs and no maintenance (their `Capabilities` list none, so the
/// facade never calls these).
pub struct NoMaintenance;

impl Maintenance for NoMaintenance {
    fn set_option(&self, name: &str, _value: &str) -> Result<()> {
        Err(crate::Error::invalid(format!("no runtime option {name:?}")))
    }

    fn run(&self, task: MaintenanceTask) -> Result<()> {
        Err(crate::Error::unsupported(format!("no '{}' maintenance task", task.name())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_names_round_trip() {
        for task in MaintenanceTask::ALL {
            assert_eq!(MaintenanceTask::from_name(task.name()), Some(task));
        }
        assert_eq!(MaintenanceTask::from_name("vacuum"), None);
    }
}
