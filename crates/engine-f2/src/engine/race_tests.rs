//! Deterministic interleavings of a lookup with writers and compaction, driven by the test hooks
//! in `ops` (the hook runs on the reader's thread at a fixed point of its lookup).

use std::sync::Arc;

use strata_core::{Durability, Engine};

use super::ops::test_hooks;
use crate::engine::test_engines::{manual_options, open_in_memory};
use crate::log::FIRST_ADDRESS;
use crate::F2Engine;

fn engine() -> Arc<F2Engine> {
    Arc::new(open_in_memory(manual_options()))
}

/// A reader reads the chain head (key `k` at version 1, the first hot record); before it reads
/// that record, `k` is overwritten (version 2, published at the tail) and hot→cold compaction
/// runs: version 1 is superseded, so it is dropped, not copied to the cold log, and the hot log
/// is truncated past it. The reader's walk then meets a truncated address and the cold log has
/// no copy: the lookup must start over from the index (and find version 2), not report absence.
#[test]
fn lookup_racing_hot_truncation_of_a_superseded_record_finds_the_newer_one() {
    let engine = engine();
    let inner = engine.inner.clone();
    engine.put(b"k", b"version-1", Durability::None).unwrap();
    let page = inner.opts.page_size_bytes;
    let mut filler = 0u32;
    while inner.hot.read_only() < 2 * page {
        engine.put(format!("filler-{filler}").as_bytes(), &[7u8; 100], Durability::None).unwrap();
        filler += 1;
    }
    let (writer, hooked) = (engine.clone(), inner.clone());
    test_hooks::set_after_chain_head(move || {
        writer.put(b"k", b"version-2", Durability::None).unwrap();
        let _only_one = hooked.maintenance.lock();
        hooked.compact_hot().unwrap();
    });
    let value = engine.get(b"k").unwrap();
    assert!(inner.hot.begin() > FIRST_ADDRESS, "the hook truncated the hot log past version 1");
    assert_eq!(value.as_deref(), Some(&b"version-2"[..]));
    assert!(inner.counters.hot_truncation_retries.load(std::sync::atomic::Ordering::Relaxed) >= 1);
}

/// A reader finds `k` in the hot log's mutable region; before it decides whether to copy the
/// record into the read cache, `k` is updated in place (same length: the index entry does not
/// change) and the page leaves memory. The copy would hold the overwritten value and pass the
/// "entry unchanged" check, so only records already immutable when the lookup began are copied.
#[test]
fn a_record_read_while_mutable_is_not_copied_to_the_read_cache() {
    let engine = engine();
    let inner = engine.inner.clone();
    engine.put(b"k", b"version-1", Durability::None).unwrap();
    let k_address = inner.hot_index.find(crate::hash::key_hash(b"k")).unwrap().address();
    let (writer, hooked) = (engine.clone(), inner.clone());
    test_hooks::set_after_hot_lookup(move || {
        let in_place = hooked.counters.in_place_updates.load(std::sync::atomic::Ordering::Relaxed);
        writer.put(b"k", b"version-2", Durability::None).unwrap();
        let in_place_now = hooked.counters.in_place_updates.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(in_place_now, in_place + 1, "version 2 overwrote version 1 in place");
        let mut filler = 0u32;
        while hooked.hot.head() <= k_address {
            writer.put(format!("filler-{filler}").as_bytes(), &[7u8; 100], Durability::None).unwrap();
            filler += 1;
        }
    });
    assert_eq!(engine.get(b"k").unwrap().as_deref(), Some(&b"version-1"[..]), "read before the update");
    assert_eq!(engine.get(b"k").unwrap().as_deref(), Some(&b"version-2"[..]));
}
