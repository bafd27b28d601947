//! f2-specific behaviour: compaction paths against a model, recovery after compaction and power
//! loss, the false-absence anomaly under concurrent cold→cold compaction, Algorithm 1's
//! ConditionalInsert retries under concurrent increments, and corruption reporting.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mod common;

use common::{config, counter, key, small_options};
use engine_f2::{F2Engine, F2Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Direction, Durability, Engine, EngineConfig, Error, KeyRange, WriteBatch};
use strata_io::{CrashMode, MemStorage, SimStorage, Storage};

fn open(storage: &Arc<dyn Storage>) -> F2Engine {
    F2Engine::open_with(storage.clone(), &config(), small_options()).unwrap()
}

fn check_model(engine: &F2Engine, model: &HashMap<Vec<u8>, Option<Vec<u8>>>) {
    for (k, v) in model {
        assert_eq!(engine.get(k).unwrap().as_ref(), v.as_ref(), "key {}", String::from_utf8_lossy(k));
    }
}

#[test]
fn compaction_matches_a_model_and_survives_reopen() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = open(&storage);
    let mut rng = SmallRng::seed_from_u64(7);
    let mut model: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
    for i in 0..6000u64 {
        // Skewed: a few hot keys get most updates, the rest go cold.
        let k = if rng.gen_bool(0.5) { key(rng.gen_range(0..8)) } else { key(rng.gen_range(0..400)) };
        match rng.gen_range(0..14) {
            10..=13 => {
                // Reads of cold keys fill the read cache; later writes must invalidate copies.
                let k = key(rng.gen_range(0..400));
                assert_eq!(engine.get(&k).unwrap(), model.get(&k).cloned().flatten(), "key {i}");
            }
            0 => {
                engine.delete(&k, Durability::None).unwrap();
                model.insert(k, None);
            }
            1 => {
                let new = engine
                    .rmw(&k, &mut |old| Some([old.unwrap_or_default(), b"+"].concat()), Durability::None)
                    .unwrap();
                model.insert(k, new);
            }
            _ => {
                let v = format!("value-{i}-{}", "x".repeat(rng.gen_range(0..60))).into_bytes();
                engine.put(&k, &v, Durability::None).unwrap();
                model.insert(k, Some(v));
            }
        }
        if i % 997 == 0 {
            check_model(&engine, &model);
        }
    }
    check_model(&engine, &model);
    for name in [
        "compaction.hot_to_cold_runs",
        "compaction.cold_to_cold_runs",
        "compaction.chunks_collected",
        "checkpoints",
        "ops.in_place_updates",
        "ops.cold_hits",
        "read_cache.inserts",
        "read_cache.hits",
        "read_cache.evicted_records",
    ] {
        assert!(counter(&engine, name) > 0, "{name} never happened: {:?}", engine.stats().engine_counters);
    }
    let report = engine.verify().unwrap();
    assert!(report.records_checked > 0);
    engine.close().unwrap();
    drop(engine);
    let engine = open(&storage);
    check_model(&engine, &model);
    let scanned: HashMap<Vec<u8>, Option<Vec<u8>>> =
        engine.scan_all().unwrap().map(|r| r.map(|(k, v)| (k, Some(v)))).collect::<Result<_, _>>().unwrap();
    let live: HashMap<_, _> =
        model.iter().filter(|(_, v)| v.is_some()).map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(scanned, live);
}

#[test]
fn power_loss_after_compaction_keeps_synced_writes() {
    let sim = SimStorage::new(11);
    // Each open gets the storage of one process lifetime, as in the kit: the engine dropped after
    // the power loss can no longer touch the disk.
    let boot = || -> Arc<dyn Storage> { Arc::new(sim.booted()) };
    let mut model: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
    let mut rng = SmallRng::seed_from_u64(3);
    for round in 0..6u64 {
        let engine = open(&boot());
        check_model(&engine, &model);
        for i in 0..800u64 {
            let k = key(rng.gen_range(0..300));
            let v = format!("r{round}-{i}").into_bytes();
            engine.put(&k, &v, Durability::None).unwrap();
            model.insert(k, Some(v));
        }
        engine.flush().unwrap();
        // Unsynced writes after the flush may or may not survive; keep the model exact by
        // writing nothing more before the crash.
        assert!(counter(&engine, "compaction.hot_to_cold_runs") > 0 || round == 0);
        sim.crash(CrashMode::Random);
        // Dropped after the power loss, as the kit does: its handles are stale, and dropping it
        // stops and joins its maintenance thread before the next instance opens.
        drop(engine);
    }
    let engine = open(&boot());
    check_model(&engine, &model);
    engine.verify().unwrap();
}

/// F2 §5.4: a cold-log read racing with cold→cold compaction (which copies the record to the tail
/// and truncates the old copy) must never report a key that exists as absent.
#[test]
fn false_absence_is_never_observed() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let options =
        F2Options { cold_index_bytes: Some(8), cold_log_disk_budget_bytes: Some(1 << 30), ..small_options() };
    let engine = Arc::new(F2Engine::open_with(storage, &config(), options).unwrap());
    for i in 0..300 {
        engine.put(&key(i), format!("v{i}").as_bytes(), Durability::None).unwrap();
    }
    engine.compact_now().unwrap();
    engine.compact_now().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|t| {
            let (engine, stop) = (engine.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    let k = i % 300;
                    assert_eq!(
                        engine.get(&key(k)).unwrap(),
                        Some(format!("v{k}").into_bytes()),
                        "false absence"
                    );
                    i += 7;
                }
            })
        })
        .collect();
    for _ in 0..40 {
        engine.compact_now().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert!(counter(&engine, "compaction.cold_to_cold_runs") >= 40);
    eprintln!("false-absence retries: {}", counter(&engine, "ops.false_absence_retries"));
}

/// Algorithm 1 under contention: increments of keys that live in the cold log race with each
/// other and with compaction; ConditionalInsert must make every increment count exactly once.
#[test]
fn concurrent_rmw_on_cold_keys_loses_no_increment() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = Arc::new(open(&storage));
    const KEYS: u64 = 64;
    const THREADS: u64 = 6;
    const PER_THREAD: u64 = 600;
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let engine = engine.clone();
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t);
                for i in 0..PER_THREAD {
                    let k = key(rng.gen_range(0..KEYS));
                    engine
                        .rmw(
                            &k,
                            &mut |old| {
                                let n = old.map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
                                Some((n + 1).to_le_bytes().to_vec())
                            },
                            Durability::None,
                        )
                        .unwrap();
                    // Filler writes push the counters out of the hot log.
                    engine.put(&key(1000 + t * PER_THREAD + i), &[7u8; 40], Durability::None).unwrap();
                    if t == 0 && i % 100 == 0 {
                        engine.compact_now().unwrap();
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let total: u64 = (0..KEYS)
        .map(|k| engine.get(&key(k)).unwrap().map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap())))
        .sum();
    assert_eq!(total, THREADS * PER_THREAD);
    assert!(counter(&engine, "ops.rmw_cold_reads") > 0);
    eprintln!("rmw retries: {}", counter(&engine, "ops.rmw_retries"));
}

#[test]
fn batches_are_atomic_and_range_is_unsupported() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = open(&storage);
    let mut batch = WriteBatch::new();
    batch.put(b"a".to_vec(), b"1".to_vec()).put(b"b".to_vec(), b"2".to_vec()).delete(b"a".to_vec());
    engine.write(batch, Durability::Sync).unwrap();
    assert_eq!(engine.get(b"a").unwrap(), None);
    assert_eq!(engine.get(b"b").unwrap(), Some(b"2".to_vec()));
    match engine.range(KeyRange::all(), Direction::Forward) {
        Err(Error::Unsupported(msg)) => assert!(msg.contains("hash-indexed")),
        other => panic!("expected Unsupported, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn flipped_bit_in_a_checkpointed_log_is_reported() {
    let sim = SimStorage::new(5);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let engine = open(&storage);
    for i in 0..3000u64 {
        engine.put(&key(i % 1500), format!("value {i}").as_bytes(), Durability::None).unwrap();
    }
    engine.close().unwrap();
    drop(engine);
    let engine = open(&storage);
    // Damage the key of the first record of the checkpointed cold log.
    let begin = counter(&engine, "cold_log.begin");
    assert!(counter(&engine, "cold_log.tail") > begin + 64);
    drop(engine);
    let segment_bytes = small_options().segment_bytes;
    sim.flip_bit(&format!("f2-cold-{:016}.seg", begin / segment_bytes), begin % segment_bytes + 26, 2)
        .unwrap();
    let engine = open(&storage);
    assert!(matches!(engine.verify(), Err(Error::Corruption { .. })));
    // Reading every key either returns the written value or reports corruption; never garbage.
    for k in 0..1500u64 {
        match engine.get(&key(k)) {
            Ok(Some(v)) => assert!(v.starts_with(b"value ")),
            Ok(None) => panic!("key {k} vanished"),
            Err(e) => assert!(e.is_corruption(), "{e}"),
        }
    }
}

/// Regression: an in-place update of one key invalidated the read-cache copy of another key at
/// the head of the same hash chain without swinging the index entry away from it; evicting that
/// copy's page then skipped it (it was invalid), leaving the entry pointing into freed cache
/// memory and the next lookup of the chain spinning forever.
#[test]
fn evicting_an_invalidated_chain_head_copy_unlinks_it() {
    use engine_f2::internals::key_hash;
    // Two keys in the same hot-index bucket (32 buckets) with the same 14-bit tag: one chain.
    let chain_of = |k: &[u8]| {
        let h = key_hash(k);
        (h & 31, (h >> 48) & 0x3fff)
    };
    let first = b"chain-a".to_vec();
    let target = chain_of(&first);
    let second = (0u64..)
        .map(|i| format!("chain-b{i}").into_bytes())
        .find(|k| chain_of(k) == target)
        .expect("a colliding key");
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let options = F2Options { read_cache_bytes: Some(8 << 10), ..small_options() };
    let engine = Arc::new(F2Engine::open_with(storage, &config(), options).unwrap());
    engine.put(&first, b"first-value", Durability::None).unwrap();
    for i in 0..600 {
        engine.put(&key(i), &[1u8; 40], Durability::None).unwrap();
    }
    engine.put(&second, b"second-v1", Durability::None).unwrap();
    // `first` is on disk now: this read caches it at the head of the shared chain.
    assert_eq!(engine.get(&first).unwrap(), Some(b"first-value".to_vec()));
    // Same-length update of `second` (mutable region): in place, invalidating the cached copy.
    engine.put(&second, b"second-v2", Durability::None).unwrap();
    assert!(counter(&engine, "ops.in_place_updates") >= 1);
    // Fill the read cache so the copy's page is evicted.
    for i in 0..600 {
        engine.get(&key(i)).unwrap();
    }
    assert!(counter(&engine, "read_cache.evicted_records") > 0);
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = engine.clone();
    std::thread::spawn(move || {
        let _ = tx.send((reader.get(&first).unwrap(), reader.get(&second).unwrap()));
    });
    let got = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("lookup of the chain hung");
    assert_eq!(got, (Some(b"first-value".to_vec()), Some(b"second-v2".to_vec())));
}

/// The hot index's overflow buckets (one entry per distinct key in the hot log, far more than
/// its share holds) are paid for by the hot log's in-memory window, so the engine's reported
/// memory, WAL buffers included, stays within the budget and every key stays readable.
#[test]
fn hot_index_overflow_is_paid_for_by_the_hot_log_window() {
    let budget_bytes = 4u64 << 20;
    let config = EngineConfig { memory_budget_bytes: budget_bytes, ..EngineConfig::default() };
    let options = F2Options {
        page_size_bytes: Some(4 << 10),
        segment_bytes: 64 << 10,
        hot_index_bytes: Some(4 << 10),
        read_cache_bytes: Some(0),
        cold_index_bytes: Some(256),
        hot_log_disk_budget_bytes: Some(256 << 20),
        ..F2Options::default()
    };
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = F2Engine::open_with(storage, &config, options).unwrap();
    let full_window_pages = counter(&engine, "memory.hot_log_window_pages");
    let keys = 40_000u64;
    for i in 0..keys {
        engine.put(&key(i), &[i as u8; 40], Durability::None).unwrap();
    }
    let total = counter(&engine, "memory.total_bytes");
    let lent = counter(&engine, "memory.hot_log_lent_bytes");
    assert!(lent > 0, "{keys} keys overflow a 64-bucket index");
    assert!(counter(&engine, "memory.hot_log_window_pages") < full_window_pages);
    assert!(total <= budget_bytes, "reported memory {total} exceeds the budget {budget_bytes}");
    assert_eq!(engine.stats().memory_bytes, total);
    assert_eq!(counter(&engine, "compaction.hot_to_cold_runs"), 0);
    for i in (0..keys).step_by(97) {
        assert_eq!(engine.get(&key(i)).unwrap(), Some(vec![i as u8; 40]), "key {i}");
    }
}

/// Issue #19: `close()` on an engine poisoned by a failed checkpoint returned `Ok`. Poison is
/// sticky: close reports it, and so does a second close.
#[test]
fn close_of_a_poisoned_engine_returns_the_poison() {
    let sim = SimStorage::new(19);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let engine = open(&storage);
    for i in 0..50u64 {
        engine.put(&key(i), b"value", Durability::Buffered).unwrap();
    }
    sim.inject(strata_io::Fault::FailSync { after_syncs: 0 });
    assert!(engine.checkpoint().is_err(), "the checkpoint's fsync failed");
    sim.clear_faults();
    assert!(matches!(engine.get(&key(1)), Err(Error::Poisoned(_)) | Ok(_)));
    let closed = engine.close();
    assert!(matches!(&closed, Err(Error::Poisoned(_))), "{closed:?}");
    assert!(matches!(engine.close(), Err(Error::Poisoned(_))));
}
