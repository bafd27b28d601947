//! Issue #19 item 4, found in `treeline` by the kit's `failed_writes` check: a batch whose WAL
//! commit failed stayed in the record cache as a dirty record, and reads (which refuse only a
//! poisoned store) showed it; only maintenance failures poisoned. Now every write-path failure
//! from the WAL append on poisons the store before it returns.

use std::sync::Arc;

use engine_treeline::TreelineEngine;
use strata_core::{Engine, EngineConfig};
use strata_io::Storage;

fn open(storage: Arc<dyn Storage>) -> Box<dyn Engine> {
    Box::new(TreelineEngine::open(storage, &EngineConfig::default()).unwrap())
}

strata_testkit::failed_write_regressions!(open);
