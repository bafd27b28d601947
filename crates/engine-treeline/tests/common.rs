//! Helpers shared by treeline's integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use engine_treeline::TreelineEngine;
use strata_core::{Engine, EngineConfig};
use strata_io::Storage;

/// Tiny sizes: a 4 KiB record cache over 4 KiB pages, so a few writes start write-backs, a few
/// hundred fill pages into overflow pages and reorganizations (goal 6, ε 4: the kit's records
/// average ~700 bytes, 5 to a page, and its keys are far from linear, so these make multi-page
/// segments), 24 KiB of WAL trigger a checkpoint, and forecasting epochs are 8 inserts.
pub fn config() -> EngineConfig {
    config_with_page_size("4KiB")
}

/// `config()` with `page_size_bytes` set to `page_size` (`auto`: chosen from the first records;
/// the kit's average ~700 bytes choose 16 KiB pages).
pub fn config_with_page_size(page_size: &str) -> EngineConfig {
    EngineConfig {
        wal_segment_bytes: Some(16 << 10),
        memory_budget_bytes: 256 << 10,
        ..EngineConfig::default()
    }
    .with_engine_options([
        ("record_cache_bytes", "4KiB"),
        ("checkpoint_wal_bytes", "24KiB"),
        ("goal", "6"),
        ("epsilon", "4"),
        ("forecast_epoch_inserts", "8"),
        ("reorg_radius", "2"),
        ("page_size_bytes", page_size),
    ])
}

pub fn open(storage: Arc<dyn Storage>) -> TreelineEngine {
    TreelineEngine::open(storage, &config()).unwrap()
}

pub fn key(i: u64) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

pub fn counter(engine: &TreelineEngine, name: &str) -> u64 {
    engine.stats().counter(name).unwrap_or_else(|| panic!("no counter {name}"))
}
