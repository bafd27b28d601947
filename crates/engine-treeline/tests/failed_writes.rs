//! Issue #19 item 4, found in `treeline` by the kit's `failed_writes` check: a batch whose WAL
//! commit failed stayed in the record cache as a dirty record, and reads (which refuse only a
//! poisoned store) showed it; only maintenance failures poisoned. Now every write-path failure
//! from the WAL append on poisons the store before it returns.

use std::sync::Arc;

use engine_treeline::TreelineEngine;
use strata_core::{Direction, Durability, Engine, EngineConfig, KeyRange};
use strata_io::{Fault, FaultKind, SimStorage};

fn open(sim: &SimStorage) -> TreelineEngine {
    TreelineEngine::open(Arc::new(sim.booted()), &EngineConfig::default()).unwrap()
}

/// The items a full scan returns before its first error (none if `range` itself fails).
fn scanned_items(engine: &dyn Engine) -> usize {
    match engine.range(KeyRange::all(), Direction::Forward) {
        Ok(items) => items.take_while(Result::is_ok).count(),
        Err(_) => 0,
    }
}

#[test]
fn a_write_that_failed_with_enospc_is_not_seen_by_a_scan_on_the_same_handle() {
    let sim = SimStorage::new(1);
    let engine = open(&sim);
    sim.inject(Fault::FailWrite { after_writes: 0, kind: FaultKind::Enospc, sticky: true });
    assert!(engine.put(b"k", b"v", Durability::Sync).is_err());
    assert_eq!(scanned_items(&engine), 0);
    assert!(!matches!(engine.get(b"k"), Ok(Some(_))));
    assert!(engine.rmw(b"k", &mut |old| old.map(<[u8]>::to_vec), Durability::None).is_err());
}

/// A scan opened before the failure must not show it on its next refill either.
#[test]
fn a_scan_begun_before_a_failed_write_does_not_show_it() {
    let sim = SimStorage::new(2);
    let engine = open(&sim);
    for i in 0..40u8 {
        engine.put(&[b'a', i], b"ok", Durability::None).unwrap();
    }
    let mut scan = engine.range(KeyRange::all(), Direction::Forward).unwrap();
    assert!(scan.next().is_some_and(|item| item.is_ok()));
    sim.inject(Fault::FailSync { after_syncs: 0 });
    assert!(engine.put(b"z-failed", b"v", Durability::Sync).is_err());
    assert!(scan.all(|item| item.map_or(true, |(key, _)| key != b"z-failed")));
}

#[test]
fn writers_failing_in_one_group_commit_are_not_visible() {
    let sim = SimStorage::new(3);
    let engine = open(&sim);
    sim.inject(Fault::FailSync { after_syncs: 0 });
    let acknowledged: usize = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..4u8)
            .map(|t| {
                let engine = &engine;
                scope.spawn(move || {
                    (0..16u8).filter(|i| engine.put(&[t, *i], b"v", Durability::Sync).is_ok()).count()
                })
            })
            .collect();
        writers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(acknowledged, 0, "the first fsync failed and poisoned the log");
    assert_eq!(scanned_items(&engine), 0);
}
