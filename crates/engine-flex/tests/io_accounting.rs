//! Every device byte flex writes is accounted for by file kind and cause (issue 35, item 1):
//! the `io.<kind>.<cause>.write_bytes` counters add up to what the storage saw, and the bytes
//! garbage collection copied are counted as GC's even when a commit's flush wrote them.

use std::sync::Arc;

use engine_flex::{FlexEngine, FlexOptions};
use strata_core::{Durability, Engine, EngineConfig, Stats};
use strata_io::{MemStorage, Storage};

fn counter(stats: &Stats, name: &str) -> u64 {
    stats.counter(name).unwrap_or_else(|| panic!("no counter {name}"))
}

/// The sum of the counters named `io.*.*.<figure>`.
fn sum_of(stats: &Stats, figure: &str) -> u64 {
    let suffix = format!(".{figure}");
    stats
        .engine_counters
        .iter()
        .filter(|(n, _)| n.starts_with("io.") && n.ends_with(&suffix))
        .map(|(_, v)| v)
        .sum()
}

#[test]
fn written_bytes_add_up_by_kind_and_cause_with_gc_copies_counted_as_gc() {
    let storage = Arc::new(MemStorage::new());
    let options = FlexOptions {
        memtable_bytes: Some(16 << 10),
        cache_bytes: Some(32 << 10),
        max_interval_bytes: 4 << 10,
        max_interval_records: 8,
        commit_step_entries: 32,
        flexfile: engine_flex::flexfile::FlexFileOptions::for_tests(),
        ..FlexOptions::default()
    };
    let dyn_storage: Arc<dyn Storage> = storage.clone();
    let engine = FlexEngine::open_with(dyn_storage, &EngineConfig::default(), options).unwrap();
    // Keys written once ("cold") share segments with keys then overwritten again and again
    // ("hot"): the segments' dead versions sit beside live cold records, so GC must copy.
    let put = |key: String, value_len: usize, fill: u64| {
        engine.put(key.as_bytes(), &vec![fill as u8; value_len], Durability::None).unwrap();
    };
    for i in 0..2000u64 {
        put(format!("cold{i:05}"), 100, i);
        put(format!("hot{:05}", i % 200), 100 + (i % 50) as usize, i);
    }
    for round in 0..60u64 {
        for i in 0..200u64 {
            put(format!("hot{i:05}"), 100 + ((i + round) % 50) as usize, round + i);
        }
    }
    engine.flush().unwrap();
    let stats = engine.stats();
    let relocated = counter(&stats, "flexfile.gc_bytes_relocated");
    assert!(relocated > 0, "the workload made no garbage collection");
    assert_eq!(counter(&stats, "io.data.gc.write_bytes"), relocated, "GC's copies, whoever flushed them");
    assert!(counter(&stats, "io.data.gc.read_bytes") >= relocated, "GC reads what it copies");
    assert!(counter(&stats, "io.data.commit.write_bytes") > 0);
    assert!(counter(&stats, "io.log.commit.write_bytes") > 0);
    assert!(counter(&stats, "io.tree.commit.write_bytes") > 0);
    // A buffered write's WAL bytes reach the device when some thread flushes the log: the
    // writer, the WAL's own flusher or the commit's sync.
    let wal_bytes: u64 =
        ["user", "commit"].iter().map(|c| counter(&stats, &format!("io.wal.{c}.write_bytes"))).sum();
    let wal_own: Vec<_> = stats
        .engine_counters
        .iter()
        .filter(|(n, _)| n.starts_with("wal") || n.starts_with("io.wal"))
        .collect();
    assert!(wal_bytes >= counter(&stats, "wal.bytes_written"), "the WAL's own count {wal_own:?}");
    assert!(counter(&stats, "io.meta.commit.write_bytes") > 0);
    assert_eq!(counter(&stats, "io.data.user.write_bytes"), 0, "users never write the table");
    let device = storage.io_stats();
    assert_eq!(
        sum_of(&stats, "write_bytes"),
        device.bytes_written,
        "every written byte has a kind and a cause"
    );
    assert_eq!(sum_of(&stats, "read_bytes"), device.bytes_read, "every read byte too");
    engine.close().unwrap();
}
