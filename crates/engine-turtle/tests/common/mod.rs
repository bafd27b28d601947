//! Helpers the engine's integration tests share: a small tree's configuration, keys and values
//! spread over the key space, counters, and waiting for a condition.
#![allow(dead_code)] // each test file uses its own subset

use engine_turtle::TurtleEngine;
use strata_core::{Engine, EngineConfig};

pub fn config(distance: &str) -> EngineConfig {
    EngineConfig {
        wal_segment_bytes: Some(64 << 10),
        memory_budget_bytes: 4 << 20,
        ..EngineConfig::default()
    }
    .with_engine_options([
        ("checkpoint_distance", distance),
        ("leaf_bytes", "8KiB"),
        ("max_pivots", "8"),
    ])
}

pub fn key(i: u64) -> Vec<u8> {
    format!("key-{:08}", i.wrapping_mul(0x9E37_79B9) % 1_000_000_007).into_bytes()
}

pub fn value(i: u64, round: u64) -> Vec<u8> {
    format!("value-{i}-{round}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

pub fn counter(engine: &TurtleEngine, name: &str) -> u64 {
    engine.stats().counter(name).unwrap_or_else(|| panic!("no counter {name}"))
}

pub fn wait_until(mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
