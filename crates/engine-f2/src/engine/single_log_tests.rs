//! The defining difference of `F2Options::single_log` (FASTER's one log, F2 §2 Figure 2):
//! compaction there copies live write-cold records to the hot log's tail, which pushes a
//! write-hot record out of the mutable region; f2 moves them to the cold log and leaves it there.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{Durability, Engine};

use crate::engine::test_engines::{manual_options, open_in_memory};
use crate::hash::key_hash;
use crate::F2Options;

/// Loads 1000 write-cold keys (about 34 pages, all live), then writes the write-hot key (in the
/// mutable region, 3 pages of 4) and runs one hot-log compaction round over half the log.
/// Returns (the hot key's address was mutable after the round, its next update was in place).
fn hot_key_after_one_compaction_round(single_log: bool) -> (bool, bool) {
    let options =
        F2Options { read_cache_bytes: Some(0), compaction_fraction: 0.5, single_log, ..manual_options() };
    let engine = Arc::new(open_in_memory(options));
    let inner = engine.inner.clone();
    for i in 0..1000u32 {
        engine.put(format!("cold-{i:04}").as_bytes(), &[1u8; 100], Durability::None).unwrap();
    }
    engine.put(b"hot", &[0u8; 100], Durability::None).unwrap();
    let hot_address = || inner.hot_index.find(key_hash(b"hot")).unwrap().address();
    assert!(hot_address() >= inner.hot.read_only(), "a fresh write is in the mutable region");
    let copied = {
        let _only_one = inner.maintenance.lock();
        inner.compact_hot().unwrap()
    };
    assert!(copied > 400, "about half of the 1000 live records were copied, not {copied}");
    let mutable_after_round = hot_address() >= inner.hot.read_only();
    let in_place_before = inner.counters.in_place_updates.load(Relaxed);
    engine.put(b"hot", &[2u8; 100], Durability::None).unwrap();
    let updated_in_place = inner.counters.in_place_updates.load(Relaxed) == in_place_before + 1;
    assert_eq!(engine.get(b"hot").unwrap(), Some(vec![2u8; 100]));
    for i in (0..1000u32).step_by(97) {
        assert_eq!(engine.get(format!("cold-{i:04}").as_bytes()).unwrap(), Some(vec![1u8; 100]));
    }
    let to_cold = inner.counters.hot_records_to_cold.load(Relaxed);
    let to_hot_tail = inner.counters.hot_records_to_hot_tail.load(Relaxed);
    if single_log {
        assert_eq!((to_cold, to_hot_tail, inner.cold.size_bytes()), (0, copied, 0));
    } else {
        assert_eq!((to_cold, to_hot_tail), (copied, 0));
    }
    engine.close().unwrap();
    (mutable_after_round, updated_in_place)
}

#[test]
fn f2_compaction_leaves_a_write_hot_record_in_the_mutable_region() {
    assert_eq!(hot_key_after_one_compaction_round(false), (true, true));
}

#[test]
fn single_log_compaction_pushes_a_write_hot_record_out_of_the_mutable_region() {
    assert_eq!(hot_key_after_one_compaction_round(true), (false, false));
}
