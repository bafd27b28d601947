//! The split of memory between the hot log's window and the read cache moves with the workload
//! (engine/memory_split.rs): reads of a working set the read cache cannot hold take memory from
//! the hot log; updates that the smaller window turns into appends take it back.

use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{config, counter, key};
use engine_f2::{F2Engine, F2Options};
use strata_core::{Durability, Engine, EngineConfig};
use strata_io::{MemStorage, Storage};

fn options(memory_split: bool) -> F2Options {
    options_with(memory_split, true)
}

fn options_with(memory_split: bool, background_maintenance: bool) -> F2Options {
    F2Options {
        page_size_bytes: Some(4 << 10),
        segment_bytes: 64 << 10,
        hot_log_memory_bytes: Some(256 << 10),
        read_cache_bytes: Some(32 << 10),
        hot_log_disk_budget_bytes: Some(8 << 20),
        memory_split,
        background_maintenance,
        ..F2Options::default()
    }
}

fn open(memory_split: bool) -> F2Engine {
    open_with(options(memory_split))
}

fn open_with(options: F2Options) -> F2Engine {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let config = EngineConfig { memory_budget_bytes: 1 << 20, ..config() };
    F2Engine::open_with(storage, &config, options).unwrap()
}

/// Waits (for the maintenance worker) until `done` holds, up to ten seconds.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while !done() {
        if started.elapsed() > Duration::from_secs(10) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// Loads 4,000 records, then reads the 1,500 oldest (on disk; ten times what the read cache
/// holds) with a skew like a zipfian's (key rank `k` about as often as `1/k`, so one more step of
/// cache always serves a few more gets); returns the share of the gets that read no device.
fn load_then_read_a_skewed_working_set(engine: &F2Engine, gets: u64) -> f64 {
    for i in 0..4_000 {
        engine.put(&key(i), &[i as u8; 100], Durability::None).unwrap();
    }
    let device_reads = |e: &F2Engine| counter(e, "io.hot_log.user.reads") + counter(e, "ops.cold_hits");
    let before = device_reads(engine);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..gets {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let uniform = (state >> 11) as f64 / (1u64 << 53) as f64;
        let k = (1_500f64.powf(uniform) as u64).saturating_sub(1).min(1_499);
        assert_eq!(engine.get(&key(k)).unwrap(), Some(vec![k as u8; 100]));
    }
    1.0 - (device_reads(engine) - before) as f64 / gets as f64
}

#[test]
fn reads_of_a_working_set_the_cache_cannot_hold_borrow_the_hot_logs_memory_and_updates_take_it_back() {
    let engine = open(true);
    let window_pages = counter(&engine, "memory.hot_log_window_pages");
    let capacity = counter(&engine, "memory.read_cache_capacity_bytes");
    load_then_read_a_skewed_working_set(&engine, 60_000);
    assert!(
        eventually(|| counter(&engine, "memory.read_cache_capacity_bytes") > capacity),
        "the read cache never grew: {:?}",
        engine.stats().engine_counters
    );
    let lent = counter(&engine, "memory.read_cache_lent_bytes");
    assert!(lent >= 64 << 10, "only {lent} bytes lent after 60,000 skewed reads of a 1,500-key working set");
    assert!(counter(&engine, "memory.hot_log_window_pages") < window_pages);
    // The hot log gave the memory up, not only the right to use it: together the two hold no
    // more than their shares (plus the pages the hot log keeps of released padding and one
    // spare buffer for its next page).
    let held = counter(&engine, "memory.hot_log_bytes") + counter(&engine, "memory.read_cache_bytes");
    let shares =
        counter(&engine, "memory.hot_log_budget_bytes") + counter(&engine, "memory.read_cache_budget_bytes");
    assert!(held <= shares + (8 << 10), "hot log and read cache hold {held} bytes for shares of {shares}");
    // Updates of a few keys, each appended again shortly after its record turned read-only in
    // the smaller window: the hot log takes its memory back.
    let moves_back = counter(&engine, "memory.split_moves_to_hot_log");
    for round in 0..400u64 {
        for i in 0..100 {
            engine.put(&key(3_000 + i), &[round as u8; 100], Durability::None).unwrap();
        }
    }
    assert!(
        eventually(|| counter(&engine, "memory.read_cache_lent_bytes") < lent),
        "no memory went back to the hot log: {:?}",
        engine.stats().engine_counters
    );
    assert!(counter(&engine, "memory.split_moves_to_hot_log") > moves_back);
    for i in 0..4_000 {
        let expected = if (3_000..3_100).contains(&i) { vec![399u16 as u8; 100] } else { vec![i as u8; 100] };
        assert_eq!(engine.get(&key(i)).unwrap(), Some(expected), "key {i}");
    }
}

#[test]
fn a_borrowing_read_cache_serves_more_of_the_working_set_than_a_fixed_split() {
    let fixed = open(false);
    let fixed_hits = load_then_read_a_skewed_working_set(&fixed, 100_000);
    assert_eq!(counter(&fixed, "memory.read_cache_lent_bytes"), 0);
    let split = open(true);
    let split_hits = load_then_read_a_skewed_working_set(&split, 100_000);
    eprintln!("gets without a device read: split {split_hits:.2}, fixed {fixed_hits:.2}");
    assert!(split_hits > fixed_hits + 0.15, "hits from memory: split {split_hits:.2}, fixed {fixed_hits:.2}");
}

#[test]
fn without_a_background_worker_the_get_that_ends_a_window_resizes() {
    let engine = open_with(options_with(true, false));
    let capacity = counter(&engine, "memory.read_cache_capacity_bytes");
    load_then_read_a_skewed_working_set(&engine, 60_000);
    let lent = counter(&engine, "memory.read_cache_lent_bytes");
    assert!(lent > 0, "nothing lent: {:?}", engine.stats().engine_counters);
    assert_eq!(
        counter(&engine, "memory.read_cache_capacity_bytes"),
        capacity + lent,
        "the loan was not carried out"
    );
}
