//! Insert forecasting (§4.6, §5.5) on a bulk-loaded store.

use std::sync::Arc;

mod common;

use common::counter;
use strata_core::{Durability, Engine, Key, Value};

/// Inserts that keep landing in the same few gaps (the shape TreeLine's §5.5 measures): with
/// forecasting, the reorganization of a hot gap leaves room there, so the inserts after it fit
/// the base pages instead of spilling into overflow pages (which reads then pay for).
#[test]
fn forecasting_leaves_room_where_inserts_keep_landing() {
    let run = |forecasting: &str| {
        let config = common::config()
            .engine_option("forecasting", forecasting)
            .engine_option("forecast_epoch_inserts", "500")
            .engine_option("record_cache_bytes", "16KiB");
        let engine =
            engine_treeline::TreelineEngine::open(Arc::new(strata_io::MemStorage::new()), &config).unwrap();
        // 8-byte keys spread over the whole key space, as the paper's (forecasts project the
        // first 8 key bytes).
        let key = |i: u64| (i * (u64::MAX / 20_000)).to_be_bytes().to_vec();
        let records: Vec<(Key, Value)> = (0..20_000).map(|i| (key(i), vec![b'v'; 40])).collect();
        engine.bulk_load(&mut records.iter().cloned().map(Ok)).unwrap();
        for i in 0..40_000u64 {
            // After one in every 1,000 records: 20 hot gaps, 2,000 inserts each, in random order
            // within the gap's first 2^32 keys.
            let offset = 1 + (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32);
            let key = (i % 20 * 1_000 * (u64::MAX / 20_000) + offset).to_be_bytes();
            engine.put(&key, b"inserted-value-of-forty-bytes-----------", Durability::Buffered).unwrap();
        }
        engine.maintenance().run(strata_core::MaintenanceTask::Checkpoint).unwrap();
        let [reorganizations, overflow_pages, lowered] =
            ["reorganizations", "overflow_pages_created", "forecast_lowered_goals"]
                .map(|n| counter(&engine, n));
        (reorganizations, overflow_pages, lowered)
    };
    let (reorgs_with, overflow_with, lowered) = run("true");
    let (reorgs_without, overflow_without, _) = run("false");
    assert!(lowered > 0, "the forecast never lowered a goal");
    assert!(
        reorgs_with <= reorgs_without,
        "reorganizations: {reorgs_with} with forecasting, {reorgs_without} without"
    );
    assert!(
        overflow_with * 4 <= overflow_without,
        "overflow pages: {overflow_with} with forecasting, {overflow_without} without"
    );
}
