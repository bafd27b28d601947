//! Every device byte f2 moves is accounted for by cause (`io.<log>.<cause>.*`, the WAL's
//! `wal.bytes_written` and `io.checkpoint_files.write_bytes`): the causes add up to what the
//! storage itself counted, and each kind of work lands under its own cause.

use std::sync::Arc;

mod common;

use common::{config, counter, key, small_options};
use engine_f2::{F2Engine, F2Options};
use strata_core::{Durability, Engine, Stats, WriteBatch};
use strata_io::{MemStorage, Storage};

fn sum_of(stats: &Stats, suffix: &str) -> u64 {
    stats
        .engine_counters
        .iter()
        .filter(|(n, _)| n.starts_with("io.") && n.ends_with(suffix))
        .map(|(_, v)| v)
        .sum()
}

#[test]
fn the_causes_add_up_to_the_storage_bytes_and_each_kind_of_work_has_its_own() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    // Maintenance inline: no background work moves bytes between reading the storage's
    // totals and the engine's counters.
    let options = F2Options { background_maintenance: false, ..small_options() };
    let engine = F2Engine::open_with(storage.clone(), &config(), options).unwrap();
    for round in 0..6u64 {
        for i in 0..600u64 {
            let mut batch = WriteBatch::new();
            batch.put(key(i), vec![round as u8; 40 + (i % 7) as usize]);
            engine.write(batch, Durability::Buffered).unwrap();
        }
        for i in (0..600u64).step_by(7) {
            assert!(engine.get(&key(i)).unwrap().is_some());
        }
    }
    engine.flush().unwrap();
    let stats = engine.stats();
    for name in [
        "io.hot_log.user.write_bytes",
        "io.hot_log.hot_to_cold.read_bytes",
        "io.cold_log.hot_to_cold.write_bytes",
        "io.chunk_log.hot_to_cold.write_bytes",
        "io.cold_log.cold_to_cold.read_bytes",
        "io.cold_log.user.read_bytes",
        "io.chunk_log.user.read_bytes",
        "io.checkpoint_files.write_bytes",
    ] {
        assert!(counter(&engine, name) > 0, "{name} is 0: {:?}", stats.engine_counters);
    }
    let written = sum_of(&stats, ".write_bytes") + counter(&engine, "wal.bytes_written");
    assert_eq!(written, stats.io.bytes_written, "{:?}", stats.engine_counters);
    assert_eq!(sum_of(&stats, ".read_bytes"), stats.io.bytes_read, "{:?}", stats.engine_counters);
    assert_eq!(sum_of(&stats, ".reads"), stats.io.read_ops);
}
