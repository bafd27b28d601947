//! Issue #19, the `memory` report: after a clean close, its WAL segment was cut (7.6 of 8.2 MB),
//! deleted, or replaced by an empty file, and the store opened with keys missing or deleted
//! keys back, `verify` clean. Each is now `Corruption` naming the segment.

use std::sync::Arc;

use engine_memory::MemoryEngine;
use strata_core::{Durability, Engine, EngineConfig, Error, WriteBatch};
use strata_io::{MemStorage, OpenOptions, Storage};

/// 64 MiB segments as by default in the report (one segment, never snapshotted away).
fn filled_and_closed() -> (MemStorage, String) {
    let mem = MemStorage::new();
    let engine = MemoryEngine::open(Arc::new(mem.clone()), &EngineConfig::default()).unwrap();
    for i in 0..2000u32 {
        let mut batch = WriteBatch::new();
        batch.put(format!("key-{i:05}").into_bytes(), vec![i as u8; 100]);
        if i % 5 == 4 {
            batch.delete(format!("key-{:05}", i - 2).into_bytes());
        }
        engine.write(batch, Durability::Buffered).unwrap();
    }
    engine.close().unwrap();
    let segment =
        mem.list().unwrap().into_iter().find(|n| n.starts_with("wal-") && n.ends_with(".log")).unwrap();
    (mem, segment)
}

fn refused(mem: &MemStorage, segment: &str) -> String {
    let err = MemoryEngine::open(Arc::new(mem.clone()), &EngineConfig::default()).map(|_| ()).unwrap_err();
    assert!(matches!(&err, Error::Corruption { file, .. } if file == segment), "{err}");
    err.to_string()
}

#[test]
fn a_wal_segment_cut_after_a_clean_close_is_corruption_naming_it() {
    let (mem, segment) = filled_and_closed();
    let bytes = strata_io::read_all(mem.open(&segment, OpenOptions::existing()).unwrap().as_ref()).unwrap();
    let end = bytes.iter().rposition(|&b| b != 0).unwrap() as u64 + 1;
    mem.open(&segment, OpenOptions::existing()).unwrap().set_len(end * 93 / 100).unwrap();
    let text = refused(&mem, &segment);
    assert!(text.contains("expected at least") && text.contains("found"), "{text}");
}

#[test]
fn a_deleted_or_emptied_wal_segment_after_a_clean_close_is_corruption_naming_it() {
    let (mem, segment) = filled_and_closed();
    mem.open(&segment, OpenOptions::existing()).unwrap().set_len(0).unwrap();
    assert!(refused(&mem, &segment).contains("found 0"));
    mem.remove(&segment).unwrap();
    assert!(refused(&mem, &segment).contains("found no file"));
}
