//! Issue #19 item 4, found in `memory` by the kit's in-flight check: a write was applied to the
//! map under its write lock right after the WAL append, before `Wal::commit`; a reader on
//! another thread saw it while its fsync (or, Buffered, its log write) was still running, and
//! then the write returned `Err` (every FailsInFlight scenario: put, delete, batch and rmw,
//! Sync and Buffered). Now the map is changed only after the commit succeeded, in log order
//! (`strata_kit::apply_order`); the Overtakes scenarios guard that order, and that an rmw sees
//! a put logged before it.

use std::sync::Arc;

use engine_memory::MemoryEngine;
use strata_core::{Engine, EngineConfig};
use strata_testkit::Target;

fn target() -> Target {
    Target::new(
        "memory",
        Arc::new(|storage| {
            Ok(Box::new(MemoryEngine::open(storage, &EngineConfig::default())?) as Box<dyn Engine>)
        }),
    )
}

strata_testkit::in_flight_regressions!(target());
