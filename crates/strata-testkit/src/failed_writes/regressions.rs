//! Three fixed failed-write scenarios that an engine's regression tests call with its own open
//! function: each engine keeps named tests, the scenarios are written once. Each is a way a
//! write that returned `Err` can show: to a scan, get or rmw on the same handle, to a scan begun
//! before the failure, or from a group commit whose fsync failed.

use std::sync::Arc;

use strata_core::{Direction, Durability, Engine, KeyRange};
use strata_io::{Fault, FaultKind, SimStorage, Storage};

/// Opens the engine under test on the given (booted) storage.
pub type OpenEngine<'a> = &'a dyn Fn(Arc<dyn Storage>) -> Box<dyn Engine>;

/// The items a full scan returns before its first error (none if `range` itself fails).
fn scanned_items(engine: &dyn Engine) -> usize {
    match engine.range(KeyRange::all(), Direction::Forward) {
        Ok(items) => items.take_while(Result::is_ok).count(),
        Err(_) => 0,
    }
}

/// After the first write failed with ENOSPC, neither a scan, a get nor an rmw on the same
/// handle sees it.
pub fn a_write_that_failed_with_enospc_is_not_seen_by_a_scan_on_the_same_handle(open: OpenEngine<'_>) {
    let sim = SimStorage::new(1);
    let engine = open(Arc::new(sim.booted()));
    sim.inject(Fault::FailWrite { after_writes: 0, kind: FaultKind::Enospc, sticky: true });
    assert!(engine.put(b"k", b"v", Durability::Sync).is_err());
    assert_eq!(scanned_items(engine.as_ref()), 0);
    assert!(!matches!(engine.get(b"k"), Ok(Some(_))));
    assert!(engine.rmw(b"k", &mut |old| old.map(<[u8]>::to_vec), Durability::None).is_err());
}

/// A scan opened before the failure does not show it on its next refill either.
pub fn a_scan_begun_before_a_failed_write_does_not_show_it(open: OpenEngine<'_>) {
    let sim = SimStorage::new(2);
    let engine = open(Arc::new(sim.booted()));
    for i in 0..40u8 {
        engine.put(&[b'a', i], b"ok", Durability::None).unwrap();
    }
    let mut scan = engine.range(KeyRange::all(), Direction::Forward).unwrap();
    assert!(scan.next().is_some_and(|item| item.is_ok()));
    sim.inject(Fault::FailSync { after_syncs: 0 });
    assert!(engine.put(b"z-failed", b"v", Durability::Sync).is_err());
    assert!(scan.all(|item| item.map_or(true, |(key, _)| key != b"z-failed")));
}

/// Four writers share a group commit whose fsync fails: none is acknowledged, none is visible.
pub fn writers_failing_in_one_group_commit_are_not_visible(open: OpenEngine<'_>) {
    let sim = SimStorage::new(3);
    let engine = open(Arc::new(sim.booted()));
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
    assert_eq!(scanned_items(engine.as_ref()), 0);
}

/// Declares the three scenarios above as named `#[test]`s of the calling test file, each running
/// on engines opened by `$open` (an `OpenEngine`-shaped function or closure expression).
#[macro_export]
macro_rules! failed_write_regressions {
    ($open:expr) => {
        #[test]
        fn a_write_that_failed_with_enospc_is_not_seen_by_a_scan_on_the_same_handle() {
            $crate::failed_writes::regressions::a_write_that_failed_with_enospc_is_not_seen_by_a_scan_on_the_same_handle(&$open);
        }

        #[test]
        fn a_scan_begun_before_a_failed_write_does_not_show_it() {
            $crate::failed_writes::regressions::a_scan_begun_before_a_failed_write_does_not_show_it(&$open);
        }

        #[test]
        fn writers_failing_in_one_group_commit_are_not_visible() {
            $crate::failed_writes::regressions::writers_failing_in_one_group_commit_are_not_visible(&$open);
        }
    };
}
