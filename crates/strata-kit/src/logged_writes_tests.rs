//! The write path's promises, over a real WAL: apply after commit in log order, poison before
//! the error, rmw after every write logged before it, nothing past close.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use strata_core::{Durability, Error, Result, Value, WriteBatch};
use strata_io::{Fault, SimStorage};
use strata_io::{HookStorage, MemStorage, Storage};
use strata_wal::{Wal, WalOptions};

use super::{ApplyLogged, Current, Logged, LoggedWrites, ReadCurrent, WriteSizes};

/// A map applied to by `apply_run`, recording the lsns in the order applied.
#[derive(Default)]
struct MapApplier {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    applied_lsns: Mutex<Vec<u64>>,
    after_apply_calls: AtomicU64,
    fail_apply: AtomicBool,
    fail_after_apply: AtomicBool,
    /// While set, `apply_run` waits until it is cleared.
    hold_apply: AtomicBool,
    panic_apply: AtomicBool,
}

impl ApplyLogged for MapApplier {
    fn apply_run(&self, run: &mut Vec<Logged>) -> Result<()> {
        while self.hold_apply.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        if self.fail_apply.load(SeqCst) {
            return Err(Error::invalid("apply failed"));
        }
        assert!(!self.panic_apply.load(SeqCst), "a bug in the engine's apply step");
        let mut map = self.map.lock();
        for Logged { lsn, batch } in run.drain(..) {
            for op in batch.into_ops() {
                match op {
                    strata_core::BatchOp::Put { key, value } => map.insert(key, value),
                    strata_core::BatchOp::Delete { key } => map.remove(&key),
                };
            }
            self.applied_lsns.lock().push(lsn);
        }
        Ok(())
    }

    fn after_apply(&self, _sizes: WriteSizes) -> Result<()> {
        self.after_apply_calls.fetch_add(1, SeqCst);
        match self.fail_after_apply.load(SeqCst) {
            true => Err(Error::invalid("after-apply failed")),
            false => Ok(()),
        }
    }
}

/// Reads the applier's map; `stale_first` times it answers `Stale` first.
struct MapRead<'a> {
    applier: &'a MapApplier,
    key: &'a [u8],
    stale_first: u32,
    prepares: u32,
}

impl ReadCurrent for MapRead<'_> {
    fn prepare(&mut self) -> Result<()> {
        self.prepares += 1;
        Ok(())
    }

    fn current(&mut self) -> Current {
        if self.stale_first > 0 {
            self.stale_first -= 1;
            return Current::Stale;
        }
        Current::Value(self.applier.map.lock().get(self.key).cloned())
    }
}

fn writes_on(storage: Arc<dyn Storage>) -> LoggedWrites {
    let (wal, _) = Wal::open(storage, WalOptions::default(), 1, &mut |_, _| Ok(())).unwrap();
    LoggedWrites::new(wal, "test engine")
}

fn put(key: &[u8], value: &[u8]) -> WriteBatch {
    WriteBatch::single(key, Some(value))
}

fn append_one(old: Option<&[u8]>) -> Option<Value> {
    Some([old.unwrap_or_default(), b"+"].concat())
}

#[test]
fn concurrent_writes_are_applied_once_each_in_log_order() {
    let writes = writes_on(Arc::new(MemStorage::new()));
    let applier = MapApplier::default();
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let (writes, applier) = (&writes, &applier);
            s.spawn(move || {
                for i in 0..200u8 {
                    let durability =
                        [Durability::None, Durability::Buffered, Durability::Sync][usize::from(i % 3)];
                    writes.write(put(&[t, i], &[i]), durability, applier).unwrap();
                    // Applied when the write returns.
                    assert_eq!(applier.map.lock().get(&[t, i][..]), Some(&vec![i]));
                }
            });
        }
    });
    let lsns = applier.applied_lsns.lock().clone();
    assert_eq!(lsns, (1..=800).collect::<Vec<u64>>(), "applied out of log order or not once each");
    assert_eq!(applier.after_apply_calls.load(SeqCst), 800);
    assert_eq!(writes.user_bytes_written(), 800 * 3);
}

#[test]
fn a_failed_commit_poisons_before_the_error_and_is_never_applied() {
    let storage = SimStorage::new(7);
    let writes = writes_on(Arc::new(storage.clone()));
    let applier = MapApplier::default();
    writes.write(put(b"a", b"1"), Durability::Sync, &applier).unwrap();
    storage.inject(Fault::FailSync { after_syncs: 0 });
    let err = writes.write(put(b"b", b"2"), Durability::Sync, &applier).unwrap_err();
    assert!(!matches!(err, Error::Poisoned(_)), "the writer sees its own failure: {err}");
    assert!(writes.state().is_poisoned(), "the error returned before the engine was poisoned");
    assert_eq!(applier.map.lock().get(&b"b"[..]), None, "a write whose commit failed was applied");
    assert_eq!(*applier.applied_lsns.lock(), [1]);
    storage.clear_faults();
    let refused = writes.write(put(b"c", b"3"), Durability::Buffered, &applier).unwrap_err();
    assert!(matches!(refused, Error::Poisoned(ref m) if m.starts_with("test engine: ")), "{refused}");
    assert!(matches!(writes.flush(), Err(Error::Poisoned(_))));
}

#[test]
fn a_write_whose_commit_ends_after_the_engine_was_poisoned_is_not_applied() {
    let poison_at_sync = Arc::new(AtomicBool::new(false));
    let cell: Arc<OnceLock<LoggedWrites>> = Arc::new(OnceLock::new());
    let storage = {
        let (poison_at_sync, cell) = (poison_at_sync.clone(), cell.clone());
        HookStorage::new(
            Arc::new(MemStorage::new()),
            Arc::new(move |_| {
                // Another part of the engine failed while this write's fsync ran.
                if poison_at_sync.load(SeqCst) {
                    cell.get().unwrap().poison(Error::invalid("a background step failed"));
                }
                Ok(())
            }),
        )
    };
    let _ = cell.set(writes_on(Arc::new(storage)));
    let writes = cell.get().unwrap();
    let applier = MapApplier::default();
    poison_at_sync.store(true, SeqCst);
    let err = writes.write(put(b"a", b"1"), Durability::Sync, &applier).unwrap_err();
    assert!(matches!(err, Error::Poisoned(ref m) if m.contains("a background step failed")), "{err}");
    assert_eq!(applier.map.lock().get(&b"a"[..]), None, "a poisoned engine applied a write");
}

#[test]
fn a_failed_apply_or_after_apply_poisons_and_refuses_every_later_write() {
    for fail_apply in [true, false] {
        let writes = writes_on(Arc::new(MemStorage::new()));
        let applier = MapApplier::default();
        applier.fail_apply.store(fail_apply, SeqCst);
        applier.fail_after_apply.store(!fail_apply, SeqCst);
        assert!(writes.write(put(b"a", b"1"), Durability::Buffered, &applier).is_err());
        assert!(writes.state().is_poisoned(), "fail_apply {fail_apply}: not poisoned");
        applier.fail_apply.store(false, SeqCst);
        applier.fail_after_apply.store(false, SeqCst);
        let refused = writes.write(put(b"b", b"2"), Durability::Buffered, &applier).unwrap_err();
        assert!(matches!(refused, Error::Poisoned(_)), "{refused}");
        assert_eq!(applier.map.lock().get(&b"b"[..]), None);
    }
}

#[test]
fn an_rmw_waits_for_an_unapplied_write_of_its_key() {
    let writes = writes_on(Arc::new(MemStorage::new()));
    let applier = MapApplier::default();
    applier.hold_apply.store(true, SeqCst);
    let logged = Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            logged.wait();
            writes.write(put(b"k", b"1"), Durability::None, &applier).unwrap();
        });
        logged.wait();
        // The write is logged (or about to be) and held before its apply.
        while writes.wal().last_lsn() == 0 {
            std::thread::yield_now();
        }
        let release = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            applier.hold_apply.store(false, SeqCst);
        });
        let mut read = MapRead { applier: &applier, key: b"k", stale_first: 0, prepares: 0 };
        let mut seen = Vec::new();
        let mut f = |old: Option<&[u8]>| {
            seen.push(old.map(<[u8]>::to_vec));
            append_one(old)
        };
        let stored = writes.rmw(b"k", &mut read, &mut f, Durability::None, &applier).unwrap();
        assert_eq!(stored.as_deref(), Some(&b"1+"[..]), "the rmw ran before the write logged before it");
        assert_eq!(seen, [Some(b"1".to_vec())]);
        release.join().unwrap();
    });
    assert_eq!(applier.map.lock().get(&b"k"[..]).map(Vec::as_slice), Some(&b"1+"[..]));
}

/// Regression: a write whose apply panicked stops the order but poisons nothing (its writer
/// unwound), and an rmw of its key waited for it in a loop that never ended.
#[test]
fn an_rmw_behind_a_write_whose_apply_panicked_fails_instead_of_spinning() {
    let writes = Arc::new(writes_on(Arc::new(MemStorage::new())));
    let applier = Arc::new(MapApplier::default());
    applier.panic_apply.store(true, SeqCst);
    let writer = {
        let (writes, applier) = (writes.clone(), applier.clone());
        std::thread::spawn(move || writes.write(put(b"k", b"1"), Durability::None, applier.as_ref()))
    };
    assert!(writer.join().is_err(), "the apply step was meant to panic");
    applier.panic_apply.store(false, SeqCst);
    let (done, result) = std::sync::mpsc::channel();
    {
        let (writes, applier) = (writes.clone(), applier.clone());
        std::thread::spawn(move || {
            let mut read = MapRead { applier: &applier, key: b"k", stale_first: 0, prepares: 0 };
            let _ =
                done.send(writes.rmw(b"k", &mut read, &mut append_one, Durability::None, applier.as_ref()));
        });
    }
    let rmw = result.recv_timeout(Duration::from_secs(10)).expect("the rmw is still waiting");
    assert!(matches!(rmw, Err(Error::Poisoned(_))), "{rmw:?}");
    assert!(writes.state().is_poisoned());
}

#[test]
fn an_rmw_prepares_again_when_its_read_is_stale_and_runs_f_once() {
    let writes = writes_on(Arc::new(MemStorage::new()));
    let applier = MapApplier::default();
    writes.write(put(b"k", b"v"), Durability::None, &applier).unwrap();
    let mut read = MapRead { applier: &applier, key: b"k", stale_first: 2, prepares: 0 };
    let mut calls = 0;
    let mut f = |old: Option<&[u8]>| {
        calls += 1;
        append_one(old)
    };
    let stored = writes.rmw(b"k", &mut read, &mut f, Durability::Sync, &applier).unwrap();
    assert_eq!(stored.as_deref(), Some(&b"v+"[..]));
    assert_eq!((read.prepares, calls), (3, 1));
}

#[test]
fn nothing_is_logged_once_closed() {
    let writes = writes_on(Arc::new(MemStorage::new()));
    let applier = MapApplier::default();
    assert!(writes.state().mark_closed());
    assert!(matches!(writes.write(put(b"a", b"1"), Durability::Sync, &applier), Err(Error::Closed)));
    let mut read = MapRead { applier: &applier, key: b"a", stale_first: 0, prepares: 0 };
    let rmw = writes.rmw(b"a", &mut read, &mut append_one, Durability::Sync, &applier);
    assert!(matches!(rmw, Err(Error::Closed)));
    assert_eq!(writes.wal().last_lsn(), 0, "a closed engine appended to its log");
    assert!(!writes.state().is_poisoned(), "refusing a write after close is no failure");
}

/// Found by CI (turtle's close-while-writers-wait test): a writer that passed the closed check
/// just before a close, and reached the log just after the close closed it, poisoned the engine
/// with the log's `Closed`, so the close reported the engine poisoned. Nothing was logged: the
/// writer gets `Closed` and the engine stays clean.
#[test]
fn a_write_that_reaches_a_log_closed_under_it_is_refused_without_poison() {
    let writes = writes_on(Arc::new(MemStorage::new()));
    let applier = MapApplier::default();
    writes.wal().close().unwrap();
    assert!(matches!(writes.write(put(b"a", b"1"), Durability::None, &applier), Err(Error::Closed)));
    let mut read = MapRead { applier: &applier, key: b"a", stale_first: 0, prepares: 0 };
    let rmw = writes.rmw(b"a", &mut read, &mut append_one, Durability::None, &applier);
    assert!(matches!(rmw, Err(Error::Closed)));
    assert!(!writes.state().is_poisoned(), "a write racing a close is no failure");
    assert!(applier.map.lock().is_empty());
}
