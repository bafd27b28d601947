//! Writes to different keys run in parallel (per-key write latches): threads write their own
//! keys, keys they share, two-key batches (latches taken in stripe order: no deadlock) and rmw
//! increments of shared counters, over a two-page hot-log window with compaction and
//! checkpoints running. No increment may be lost, and after a crash every acknowledged (synced)
//! write must come back.

use std::collections::HashMap;
use std::sync::Arc;

mod common;

use common::{config, counter, small_options};
use engine_f2::{F2Engine, F2Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Engine, WriteBatch};
use strata_io::{CrashMode, SimStorage, Storage};

const THREADS: u64 = 4;
const OPS_PER_THREAD: u64 = 4000;
const OWN_KEYS: u64 = 60;
const SHARED_KEYS: u64 = 12;
const COUNTERS: u64 = 3;

/// A thread's own keys with the last value acknowledged for each, and its increments per counter.
type ThreadResult = (HashMap<Vec<u8>, Vec<u8>>, Vec<u64>);

fn options() -> F2Options {
    F2Options { hot_log_memory_bytes: Some(8 << 10), ..small_options() }
}

fn own(t: u64, i: u64) -> Vec<u8> {
    format!("own-{t}-{i:03}").into_bytes()
}

fn shared(i: u64) -> Vec<u8> {
    format!("shared-{i:03}").into_bytes()
}

fn counter_key(i: u64) -> Vec<u8> {
    format!("counter-{i}").into_bytes()
}

fn increment(old: Option<&[u8]>) -> Option<Vec<u8>> {
    let n = old.map_or(0, |v| u64::from_le_bytes(v.try_into().expect("an 8-byte counter")));
    Some((n + 1).to_le_bytes().to_vec())
}

/// Every key's value as the engine returns it.
fn snapshot(engine: &F2Engine) -> HashMap<Vec<u8>, Option<Vec<u8>>> {
    let mut keys: Vec<Vec<u8>> = (0..THREADS).flat_map(|t| (0..OWN_KEYS).map(move |i| own(t, i))).collect();
    keys.extend((0..SHARED_KEYS).map(shared));
    keys.extend((0..COUNTERS).map(counter_key));
    keys.into_iter().map(|k| (k.clone(), engine.get(&k).unwrap())).collect()
}

#[test]
fn parallel_writers_lose_no_update_and_recover_every_acknowledged_write() {
    let sim = SimStorage::new(9);
    let storage: Arc<dyn Storage> = Arc::new(sim.booted());
    let engine = F2Engine::open_with(storage, &config(), options()).unwrap();
    let results: Vec<ThreadResult> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let engine = &engine;
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(t);
                    let mut own_model = HashMap::new();
                    let mut increments = vec![0u64; COUNTERS as usize];
                    for n in 0..OPS_PER_THREAD {
                        let sync = if n % 8 == 0 { Durability::Sync } else { Durability::Buffered };
                        match rng.gen_range(0..10) {
                            0..=3 => {
                                // Same length most of the time: in-place updates of neighbouring
                                // records by different threads.
                                let k = own(t, rng.gen_range(0..OWN_KEYS));
                                let v = format!("{t}-{n:06}{}", if n % 5 == 0 { "-longer" } else { "" });
                                engine.put(&k, v.as_bytes(), sync).unwrap();
                                own_model.insert(k, v.into_bytes());
                            }
                            4 | 5 => {
                                let k = shared(rng.gen_range(0..SHARED_KEYS));
                                engine.put(&k, format!("{t}-{n:06}").as_bytes(), sync).unwrap();
                            }
                            6 => {
                                // Two shared keys in either order.
                                let (a, b) = (rng.gen_range(0..SHARED_KEYS), rng.gen_range(0..SHARED_KEYS));
                                let mut batch = WriteBatch::new();
                                batch.put(shared(a), format!("{t}-{n:06}-a").into_bytes());
                                batch.put(shared(b), format!("{t}-{n:06}-b").into_bytes());
                                engine.write(batch, sync).unwrap();
                            }
                            _ => {
                                let c = rng.gen_range(0..COUNTERS);
                                engine.rmw(&counter_key(c), &mut increment, sync).unwrap();
                                increments[c as usize] += 1;
                            }
                        }
                    }
                    (own_model, increments)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let before = snapshot(&engine);
    for (t, (own_model, _)) in results.iter().enumerate() {
        for (k, v) in own_model {
            assert_eq!(before[k].as_ref(), Some(v), "thread {t}: key {}", String::from_utf8_lossy(k));
        }
    }
    for c in 0..COUNTERS {
        let total: u64 = results.iter().map(|(_, inc)| inc[c as usize]).sum();
        let value = before[&counter_key(c)].clone().map(|v| u64::from_le_bytes(v.try_into().unwrap()));
        assert_eq!(value, Some(total), "counter {c}: an increment was lost");
    }
    assert!(counter(&engine, "hot_log.head") > 16 << 10, "the window turned over");
    assert!(counter(&engine, "checkpoints") > 0, "checkpoints ran meanwhile");
    // Make every write durable (the last ones were buffered), then crash and reopen.
    engine.put(b"last", b"sync", Durability::Sync).unwrap();
    sim.crash(CrashMode::DropUnsynced);
    drop(engine);
    let engine = F2Engine::open_with(Arc::new(sim.booted()), &config(), options()).unwrap();
    assert_eq!(snapshot(&engine), before, "after the crash");
}
