//! Engines for the in-crate tests that drive maintenance themselves.

use std::sync::Arc;

use strata_core::EngineConfig;
use strata_io::MemStorage;

use crate::{F2Engine, F2Options};

/// Options of an engine where nothing runs on its own (no background thread, disk budgets and the
/// checkpoint threshold far above what a test writes): the test calls compaction itself. Pages
/// of 4 KiB, a 16 KiB hot-log window; tests override what they vary.
pub fn manual_options() -> F2Options {
    F2Options {
        page_size_bytes: Some(4 << 10),
        segment_bytes: 16 << 10,
        hot_log_memory_bytes: Some(16 << 10),
        hot_log_disk_budget_bytes: Some(64 << 20),
        cold_log_disk_budget_bytes: Some(64 << 20),
        checkpoint_wal_bytes: Some(64 << 20),
        background_maintenance: false,
        ..F2Options::default()
    }
}

/// An engine on fresh memory storage with a 256 KiB budget.
pub fn open_in_memory(options: F2Options) -> F2Engine {
    let config = EngineConfig { memory_budget_bytes: 256 << 10, ..EngineConfig::default() };
    F2Engine::open_with(Arc::new(MemStorage::new()), &config, options).unwrap()
}
