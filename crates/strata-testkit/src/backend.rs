use std::sync::Arc;

use strata_io::{CrashMode, MemStorage, SimStorage, Storage};

use crate::ops::CrashKind;
use crate::StorageKind;

/// The storage a run uses; `Sim` can also crash and inject faults.
#[derive(Clone, Debug)]
pub(crate) enum Backend {
    Mem(MemStorage),
    Sim(SimStorage),
}

impl Backend {
    pub(crate) fn new(kind: StorageKind, seed: u64) -> Backend {
        match kind {
            StorageKind::Mem => Backend::Mem(MemStorage::new()),
            StorageKind::Sim => Backend::Sim(SimStorage::new(seed)),
        }
    }

    pub(crate) fn storage(&self) -> Arc<dyn Storage> {
        match self {
            Backend::Mem(mem) => Arc::new(mem.clone()),
            // One process lifetime: after a crash the old engine cannot touch the disk.
            Backend::Sim(sim) => Arc::new(sim.booted()),
        }
    }

    pub(crate) fn sim(&self) -> Option<&SimStorage> {
        match self {
            Backend::Mem(_) => None,
            Backend::Sim(sim) => Some(sim),
        }
    }
}

impl CrashKind {
    pub(crate) fn mode(self) -> CrashMode {
        match self {
            CrashKind::DropUnsynced => CrashMode::DropUnsynced,
            CrashKind::Random => CrashMode::Random,
            CrashKind::Reordered => CrashMode::Reordered,
        }
    }
}
