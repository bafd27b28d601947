//! Space the logs no longer use goes back to the file system promptly, with the default
//! segment size and checkpoint policy: a small store whose logs are truncated many times over
//! (compaction, chunk-log GC) holds a few times its live data on disk, not a 64 MiB segment
//! per log (`SegmentedFile::release_below` punches the dead front of the segment holding a
//! checkpoint's begin; `checkpoint_due` takes a checkpoint once one would release an eighth of
//! the live bytes).

use std::path::Path;
use std::sync::Arc;

use engine_f2::F2Engine;
use strata_core::{Durability, Engine, EngineConfig};
use strata_io::FileStorage;

const KEYS: u64 = 20_000;
const VALUE_BYTES: usize = 200;

/// Bytes the file system allocated to the files of `dir`.
fn allocated_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().metadata().unwrap().blocks() * 512).sum()
}

fn listing(dir: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            format!("{}={}", e.file_name().to_string_lossy(), e.metadata().unwrap().blocks() * 512)
        })
        .collect();
    files.sort();
    files.join(" ")
}

#[test]
fn truncated_log_bytes_are_given_back_while_the_store_runs() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FileStorage::open_dir(dir.path(), true).unwrap());
    let config = EngineConfig { memory_budget_bytes: 1 << 20, ..EngineConfig::default() };
    let engine = F2Engine::open(storage, &config).unwrap();
    let key = |i: u64| format!("key-{i:08}").into_bytes();
    // Four rounds over the key space: about four times the live data written, so every log is
    // truncated several times over.
    for round in 0..4u8 {
        for i in 0..KEYS {
            engine.put(&key(i), &[round; VALUE_BYTES], Durability::Buffered).unwrap();
        }
    }
    let live_bytes = KEYS * (key(0).len() + VALUE_BYTES) as u64;
    let on_disk = allocated_bytes(dir.path());
    // Records carry a 24 B header; the cold log is kept within about twice its live bytes and
    // the hot log within its disk budget (4x its memory).
    assert!(
        on_disk <= 3 * live_bytes,
        "{on_disk} bytes allocated for {live_bytes} live bytes: {}",
        listing(dir.path())
    );
    assert_eq!(engine.get(&key(7)).unwrap(), Some(vec![3u8; VALUE_BYTES]));
    engine.close().unwrap();
}
