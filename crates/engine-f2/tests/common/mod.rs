//! Helpers shared by f2's integration tests.
#![allow(dead_code)]

use engine_f2::{F2Engine, F2Options};
use strata_core::{Engine, EngineConfig};

pub fn config() -> EngineConfig {
    EngineConfig {
        wal_segment_bytes: Some(16 << 10),
        memory_budget_bytes: 256 << 10,
        ..EngineConfig::default()
    }
}

/// Tiny budgets: every few hundred writes move records hot→cold, compact the cold log, collect
/// chunk-log garbage and take a checkpoint.
pub fn small_options() -> F2Options {
    F2Options {
        page_size_bytes: Some(4 << 10),
        segment_bytes: 16 << 10,
        hot_index_bytes: Some(2 << 10),
        hot_log_memory_bytes: Some(16 << 10),
        cold_index_bytes: Some(64),
        hot_log_disk_budget_bytes: Some(32 << 10),
        cold_log_disk_budget_bytes: Some(64 << 10),
        checkpoint_wal_bytes: Some(24 << 10),
        ..F2Options::default()
    }
}

pub fn key(i: u64) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

pub fn counter(engine: &F2Engine, name: &str) -> u64 {
    engine.stats().counter(name).unwrap_or_else(|| panic!("no counter {name}"))
}
