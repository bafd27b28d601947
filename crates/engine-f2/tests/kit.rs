//! The shared test kit, instantiated for engine `f2`: conformance on mem and sim storage,
//! process-kill crashes, fault injection and concurrency stress. Pages, segments, budgets and
//! checkpoint intervals are tiny so hot→cold and cold→cold compaction, chunk-log garbage
//! collection, page eviction and checkpoints all run within each test.

use std::sync::Arc;

mod common;

use common::config;
use engine_f2::{F2Engine, F2Options};
use strata_core::Engine;
use strata_testkit::Target;

fn options() -> F2Options {
    F2Options {
        page_size_bytes: Some(8 << 10),
        segment_bytes: 32 << 10,
        hot_index_bytes: Some(4 << 10),
        hot_log_memory_bytes: Some(32 << 10),
        cold_index_bytes: Some(256),
        hot_log_disk_budget_bytes: Some(64 << 10),
        cold_log_disk_budget_bytes: Some(16 << 10),
        checkpoint_wal_bytes: Some(32 << 10),
        // Not the default (1): the kit also covers rounds whose workers split the chunks.
        compaction_threads: 2,
        ..F2Options::default()
    }
}

fn target() -> Target {
    Target::new(
        "f2",
        Arc::new(|storage| {
            Ok(Box::new(F2Engine::open_with(storage, &config(), options())?) as Box<dyn Engine>)
        }),
    )
}

strata_testkit::kit_tests!(target(), process_kill_cycles = 24, stress = (8, 2_000));

/// The same kit for `F2Options::single_log` (FASTER's one-log design, kept for comparison):
/// its compaction copies live records to the hot log's own tail, so it must stay as correct and
/// crash-safe as the f2 design. Same options as the f2 target; the kit's live data outgrows
/// that hot-log budget, so rounds (each copying a few live records) run often.
mod single_log {
    use super::*;

    fn target() -> Target {
        Target::new(
            "f2-single-log",
            Arc::new(|storage| {
                let options = F2Options { single_log: true, ..super::options() };
                Ok(Box::new(F2Engine::open_with(storage, &config(), options)?) as Box<dyn Engine>)
            }),
        )
    }

    strata_testkit::kit_tests!(target(), process_kill_cycles = 12, stress = (4, 1_000));
}
