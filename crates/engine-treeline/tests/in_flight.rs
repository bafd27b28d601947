//! Issue #19 item 4, found in `treeline` by the kit's in-flight check: a batch was applied to
//! the record cache (as dirty records) under the cache lock right after its WAL append, before
//! `Wal::commit`; a reader on another thread saw it while its fsync (or, Buffered, its log
//! write) was still running, and then the write returned `Err` (every FailsInFlight scenario:
//! put, delete, batch and rmw, Sync and Buffered). Now a batch reaches the cache only after its
//! commit succeeded, in log order (`strata_kit::apply_order`), and a checkpoint cuts at the last
//! applied lsn; the Overtakes scenarios guard that order, and that an rmw sees a put logged
//! before it.

use std::sync::Arc;

use engine_treeline::TreelineEngine;
use strata_core::{Engine, EngineConfig};
use strata_testkit::Target;

fn target() -> Target {
    Target::new(
        "treeline",
        Arc::new(|storage| {
            Ok(Box::new(TreelineEngine::open(storage, &EngineConfig::default())?) as Box<dyn Engine>)
        }),
    )
}

strata_testkit::in_flight_regressions!(target());
