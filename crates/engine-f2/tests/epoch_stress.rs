//! Readers racing writers over a hot-log window and a read cache of two pages each, so pages are
//! evicted and their frames reused constantly (with compaction running in the background): every
//! value a reader gets must be one that was written for that key, never older than one the same
//! reader saw before, and never torn by an in-place update.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{config, counter, small_options};
use engine_f2::{F2Engine, F2Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Engine};
use strata_io::{MemStorage, Storage};

const KEYS_PER_WRITER: u32 = 300;
const WRITERS: u32 = 2;
const READERS: usize = 2;

fn key(id: u32) -> Vec<u8> {
    format!("stress-{id:05}").into_bytes()
}

/// Key id, version, then a filler derived from both. The writers' hot keys (the first 10 of each)
/// keep one length, so their updates are mostly in place; the others change length now and then.
fn value(id: u32, version: u32) -> Vec<u8> {
    let len = if version.is_multiple_of(3) && id % KEYS_PER_WRITER >= 10 { 72 } else { 40 };
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&id.to_le_bytes());
    v.extend_from_slice(&version.to_le_bytes());
    v.resize(len, (id.wrapping_mul(31).wrapping_add(version)) as u8);
    v
}

/// The version a value read for key `id` holds, if it is a value `value` could have written.
fn version_of(id: u32, v: &[u8]) -> Option<u32> {
    let version = u32::from_le_bytes(v.get(4..8)?.try_into().ok()?);
    (v == value(id, version)).then_some(version)
}

#[test]
fn readers_racing_eviction_only_ever_see_written_values() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let options = F2Options {
        hot_log_memory_bytes: Some(8 << 10),
        read_cache_bytes: Some(8 << 10),
        mutable_fraction: 0.5,
        ..small_options()
    };
    let engine = F2Engine::open_with(storage, &config(), options).unwrap();
    let keys = (KEYS_PER_WRITER * WRITERS) as usize;
    // Highest version whose put returned, per key.
    let acknowledged: Vec<AtomicU32> = (0..keys).map(|_| AtomicU32::new(0)).collect();
    for id in 0..keys as u32 {
        engine.put(&key(id), &value(id, 0), Durability::None).unwrap();
    }
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_millis(1500);
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (engine, acknowledged, stop) = (&engine, &acknowledged, &stop);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(u64::from(w));
                let mut versions = vec![0u32; KEYS_PER_WRITER as usize];
                while Instant::now() < deadline {
                    // Skewed: half the writes go to 10 keys (in-place updates), half anywhere.
                    let local = if rng.gen_bool(0.5) {
                        rng.gen_range(0..10)
                    } else {
                        rng.gen_range(0..KEYS_PER_WRITER)
                    };
                    let id = w * KEYS_PER_WRITER + local;
                    let version = &mut versions[local as usize];
                    *version += 1;
                    engine.put(&key(id), &value(id, *version), Durability::None).unwrap();
                    acknowledged[id as usize].store(*version, SeqCst);
                }
                stop.store(true, SeqCst);
            });
        }
        for r in 0..READERS {
            let (engine, acknowledged, stop) = (&engine, &acknowledged, &stop);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(100 + r as u64);
                let mut seen = vec![0u32; keys];
                let mut reads = 0u64;
                while !stop.load(SeqCst) || reads < 1000 {
                    // Half the reads on the writers' hot keys (racing in-place updates), half anywhere
                    // (disk, read cache, evicted pages).
                    let id = if rng.gen_bool(0.5) {
                        rng.gen_range(0..WRITERS) * KEYS_PER_WRITER + rng.gen_range(0..10)
                    } else {
                        rng.gen_range(0..keys as u32)
                    };
                    let floor = acknowledged[id as usize].load(SeqCst).max(seen[id as usize]);
                    let got = engine.get(&key(id)).unwrap().expect("every key was written");
                    let version = version_of(id, &got)
                        .unwrap_or_else(|| panic!("key {id}: a value nobody wrote: {got:?}"));
                    // One put per key can be in flight: its version is the acknowledged one + 1.
                    let ceiling = acknowledged[id as usize].load(SeqCst) + 1;
                    assert!(
                        (floor..=ceiling).contains(&version),
                        "key {id}: version {version} outside [{floor}, {ceiling}]"
                    );
                    seen[id as usize] = version;
                    reads += 1;
                }
            });
        }
    });
    for id in 0..keys as u32 {
        let got = engine.get(&key(id)).unwrap().unwrap();
        assert_eq!(version_of(id, &got), Some(acknowledged[id as usize].load(SeqCst)), "key {id}");
    }
    assert!(counter(&engine, "ops.in_place_updates") > 1000, "readers raced in-place updates");
    assert!(counter(&engine, "hot_log.head") > 64 << 10, "the window turned over many times");
    assert!(counter(&engine, "read_cache.evicted_records") > 0, "the read cache turned over");
    assert!(counter(&engine, "compaction.hot_to_cold_runs") > 0, "compaction ran too");
    engine.close().unwrap();
}
