//! Issue #19 item 4, the `memory` report: after the first write failed with ENOSPC (the handle
//! then poisoned), a scan on the same handle returned the failed write; with four writer threads
//! a scan after the errors held 15 keys more than were acknowledged. A failed write was applied
//! to the map before its WAL commit failed and never undone. Now every write-path failure
//! poisons the engine before it returns, and reads (scan refills too) refuse a poisoned engine.

use std::sync::Arc;

use engine_memory::MemoryEngine;
use strata_core::{Engine, EngineConfig};
use strata_io::Storage;
use strata_testkit::failed_writes::regressions;

fn open(storage: Arc<dyn Storage>) -> Box<dyn Engine> {
    Box::new(MemoryEngine::open(storage, &EngineConfig::default()).unwrap())
}

#[test]
fn a_write_that_failed_with_enospc_is_not_seen_by_a_scan_on_the_same_handle() {
    regressions::a_write_that_failed_with_enospc_is_not_seen_by_a_scan_on_the_same_handle(&open);
}

#[test]
fn a_scan_begun_before_a_failed_write_does_not_show_it() {
    regressions::a_scan_begun_before_a_failed_write_does_not_show_it(&open);
}

#[test]
fn writers_failing_in_one_group_commit_are_not_visible() {
    regressions::writers_failing_in_one_group_commit_are_not_visible(&open);
}
