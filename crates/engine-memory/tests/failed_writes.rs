//! Issue #19 item 4, the `memory` report: after the first write failed with ENOSPC (the handle
//! then poisoned), a scan on the same handle returned the failed write; with four writer threads
//! a scan after the errors held 15 keys more than were acknowledged. A failed write was applied
//! to the map before its WAL commit failed and never undone. Now every write-path failure
//! poisons the engine before it returns, and reads (scan refills too) refuse a poisoned engine.

use std::sync::Arc;

use engine_memory::MemoryEngine;
use strata_core::{Engine, EngineConfig};
use strata_io::Storage;

fn open(storage: Arc<dyn Storage>) -> Box<dyn Engine> {
    Box::new(MemoryEngine::open(storage, &EngineConfig::default()).unwrap())
}

strata_testkit::failed_write_regressions!(open);
