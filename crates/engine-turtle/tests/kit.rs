//! The shared test kit, instantiated for engine `turtle`: conformance on mem and sim storage,
//! process-kill crashes, fault injection, failed and in-flight writes, bulk load, damaged files
//! and concurrency stress. Sizes are tiny (a 4 KiB MemTable, 2 KiB leaves, 4 pivots) so tables
//! are finalized, applied, split into leaves and nodes, and checkpointed within each test; the
//! worker settles the tree after every table (`settle=always`), so settling meets crashes,
//! faults and concurrent writers too.

use std::sync::Arc;

use engine_turtle::TurtleEngine;
use strata_core::{Engine, EngineConfig};
use strata_testkit::Target;

fn config() -> EngineConfig {
    EngineConfig {
        wal_segment_bytes: Some(16 << 10),
        memory_budget_bytes: 256 << 10,
        ..EngineConfig::default()
    }
    .with_engine_options([
        ("checkpoint_distance", "4KiB"),
        ("leaf_bytes", "2KiB"),
        ("max_pivots", "4"),
        ("settle", "always"),
    ])
}

fn target() -> Target {
    Target::new(
        "turtle",
        Arc::new(|storage| Ok(Box::new(TurtleEngine::open(storage, &config())?) as Box<dyn Engine>)),
    )
}

strata_testkit::kit_tests!(target(), process_kill_cycles = 24, stress = (8, 2_000));
