//! The shared test kit, instantiated for engine `memory`: conformance on mem and sim storage,
//! process-kill crashes, fault injection and concurrency stress.

use std::sync::Arc;

use engine_memory::MemoryEngine;
use strata_core::{Engine, EngineConfig};
use strata_testkit::Target;

/// Small WAL segments so rollover, recycling and snapshots happen within a short test.
fn config() -> EngineConfig {
    EngineConfig { wal_segment_bytes: Some(16 << 10), ..EngineConfig::default() }
}

fn target() -> Target {
    Target::new(
        "memory",
        Arc::new(|storage| Ok(Box::new(MemoryEngine::open(storage, &config())?) as Box<dyn Engine>)),
    )
}

strata_testkit::kit_tests!(target(), process_kill_cycles = 24, stress = (8, 2_000));
