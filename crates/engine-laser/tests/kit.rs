//! The shared test kit, instantiated for engine `laser` as a key-value store and as a table
//! whose levels split into column groups: conformance on mem and sim storage, process-kill
//! crashes, fault injection, failed and in-flight writes, bulk load, damaged files and
//! concurrency stress. Sizes are tiny (a 4 KiB MemTable, level 0 compacted at two runs, T = 2)
//! so tables are flushed and levels compacted within each test.

use std::sync::Arc;

use engine_laser::LaserEngine;
use strata_core::{Engine, EngineConfig};
use strata_testkit::Target;

fn config() -> EngineConfig {
    EngineConfig {
        wal_segment_bytes: Some(16 << 10),
        memory_budget_bytes: 256 << 10,
        ..EngineConfig::default()
    }
    .with_engine_options([("memtable_bytes", "4KiB"), ("level0_runs", "2"), ("size_ratio", "2")])
}

fn target() -> Target {
    Target::new(
        "laser",
        Arc::new(|storage| Ok(Box::new(LaserEngine::open(storage, &config())?) as Box<dyn Engine>)),
    )
}

strata_testkit::kit_tests!(target(), process_kill_cycles = 24, stress = (8, 2_000));
