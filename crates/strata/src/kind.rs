use std::fmt;
use std::str::FromStr;

use strata_core::Error;

/// Which storage engine a database uses. Recorded in the directory's manifest at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EngineKind {
    /// The whole data set in an ordered in-memory map, durable through a WAL and snapshots.
    Memory,
    /// Update-in-place pages with a record cache and learned page grouping (TreeLine).
    Treeline,
    /// B^ε-tree with tiered node buffers and a checkpoint-distance knob (TurtleKV).
    Turtle,
    /// Real-time LSM-tree with row and column-group layouts (LASER).
    Laser,
    /// Sorted table over a log-structured file with O(log N) insert-range (FlexDB).
    Flex,
    /// Hot/cold hash-indexed record logs for skewed point workloads (F2).
    F2,
}

impl EngineKind {
    pub const ALL: [EngineKind; 6] = [
        EngineKind::Memory,
        EngineKind::Treeline,
        EngineKind::Turtle,
        EngineKind::Laser,
        EngineKind::Flex,
        EngineKind::F2,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Memory => "memory",
            EngineKind::Treeline => "treeline",
            EngineKind::Turtle => "turtle",
            EngineKind::Laser => "laser",
            EngineKind::Flex => "flex",
            EngineKind::F2 => "f2",
        }
    }

    /// The engine of this build whose files `name` looks like, if any (each engine's factory
    /// names its file patterns; an engine this build does not hold recognises none).
    pub fn owning_file(name: &str) -> Option<EngineKind> {
        crate::registry::factory_owning_file(name).and_then(|factory| factory.name.parse().ok())
    }

    /// True when this build can open the engine (its crate is registered: `registry.rs`).
    pub fn is_available(self) -> bool {
        crate::registry::factory(self).is_some()
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EngineKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        EngineKind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            let names: Vec<&str> = EngineKind::ALL.iter().map(|k| k.name()).collect();
            Error::invalid(format!("unknown engine {s:?}; expected one of: {}", names.join(", ")))
        })
    }
}
