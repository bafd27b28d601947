//! The shared test kit, instantiated for engine `memory`: conformance on mem and sim storage,
//! process-kill crashes, fault injection and concurrency stress.

use std::sync::Arc;

use engine_memory::MemoryEngine;
use strata_core::{Engine, EngineConfig};
use strata_testkit::{conformance, crash, faults, stress, StorageKind, Target};

/// Small WAL segments so rollover, recycling and snapshots happen within a short test.
fn config() -> EngineConfig {
    EngineConfig { wal_segment_bytes: 16 << 10, ..EngineConfig::default() }
}

fn target() -> Target {
    Target {
        name: "memory",
        open: Arc::new(|storage| Ok(Box::new(MemoryEngine::open(storage, &config())?) as Box<dyn Engine>)),
        ordered: true,
        prefix_consistent: true,
    }
}

#[test]
fn conformance_mem() {
    conformance::check(&target(), StorageKind::Mem);
}

#[test]
fn conformance_sim() {
    conformance::check(&target(), StorageKind::Sim);
}

#[test]
fn process_kill_crash() {
    crash::process_kill(&target(), "process_kill_crash", 24);
}

#[test]
fn fault_injection() {
    faults::check(&target());
}

#[test]
fn concurrency_stress() {
    stress::check(&target(), 8, 2_000);
}
