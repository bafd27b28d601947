//! Issue #19 item 4, the `flex` report: after the first write failed with ENOSPC (the handle
//! then poisoned), a scan on the same handle returned the failed write. The batch was applied
//! to the active MemTable before its WAL commit failed, and the engine's poison (which every
//! read checks) was set only by commit-path failures. Now every write-path failure from the WAL
//! append on poisons the engine before it returns.

use std::sync::Arc;

use engine_flex::FlexEngine;
use strata_core::{Engine, EngineConfig};
use strata_io::Storage;

fn open(storage: Arc<dyn Storage>) -> Box<dyn Engine> {
    Box::new(FlexEngine::open(storage, &EngineConfig::default()).unwrap())
}

strata_testkit::failed_write_regressions!(open);
