//! The key locks that make each command atomic, and how they linger through a pipeline.
//!
//! A command that writes holds the stripes of every key it touches, and the shared side of
//! `everything`, from its first read to its last write; `FLUSHALL` and `EXEC` hold `everything`
//! alone (the invariant is stated in keyspace.rs).
//!
//! **Lingering.** Inside [`KeyLockTable::linger`] (one connection's pipeline, run on one thread
//! with no `await` in it) the locks a command took stay held when it ends, until the pipeline
//! ends. Many clients writing one hot key then take turns a pipeline at a time rather than a
//! command at a time: the other worker parks once per pipeline instead of spinning and parking
//! on every command, and the engine's write path sees one writer at a time (docs/benchmarks.md,
//! "One worker per core but one").
//! Holding a lock longer changes no command's outcome: each command's writes are committed
//! before the next command runs.
//!
//! **No deadlock**: a thread waits for a lock only while it holds none. A lingering thread
//! takes further locks with `try_lock`; when one is held elsewhere it lets go of everything it
//! holds and then waits for what the command needs in stripe order, as a command outside a
//! pipeline does. A lingering thread holds at most [`MAX_LINGERING_STRIPES`], so one long
//! pipeline over many keys does not keep other clients off keys it is done with.

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;

use parking_lot::lock_api::{RawMutex as _, RawRwLock as _};
use parking_lot::{RawMutex, RawRwLock};
use smallvec::SmallVec;

/// Key stripes: keys hash to one of these; two keys on one stripe serialize their commands.
const LOCK_STRIPES: usize = 4096;

/// A lingering thread lets go of everything before taking more than this many stripes.
pub const MAX_LINGERING_STRIPES: usize = 32;

pub struct KeyLockTable {
    stripes: Box<[RawMutex]>,
    /// Commands hold it shared; `FLUSHALL` and `EXEC` hold it alone.
    everything: RawRwLock,
}

/// What a lingering thread holds past the commands that took it.
struct Held {
    /// The table these locks belong to (a process may run more than one server).
    table: *const KeyLockTable,
    shared: bool,
    stripes: SmallVec<[usize; 8]>,
}

thread_local! {
    /// Inside `linger`: the locks this thread holds for its pipeline.
    static LINGERING: RefCell<Option<Held>> = const { RefCell::new(None) };
    /// This thread runs inside `with_everything_locked` (EXEC): key locks are already held.
    static HOLDS_EVERYTHING: Cell<bool> = const { Cell::new(false) };
}

/// Locks one command holds itself (none when they linger, or inside `with_everything_locked`).
/// Not `Send`: they are released on the thread that took them.
pub struct KeyLocks<'a> {
    table: &'a KeyLockTable,
    shared: bool,
    stripes: SmallVec<[usize; 4]>,
    _not_send: PhantomData<*const ()>,
}

impl Drop for KeyLocks<'_> {
    fn drop(&mut self) {
        // SAFETY: this guard took exactly these locks on this thread and releases them once.
        unsafe { self.table.unlock(self.shared, &self.stripes) };
    }
}

impl Default for KeyLockTable {
    fn default() -> Self {
        KeyLockTable {
            stripes: (0..LOCK_STRIPES).map(|_| RawMutex::INIT).collect(),
            everything: RawRwLock::INIT,
        }
    }
}

impl KeyLockTable {
    /// Locks `keys` (any order, repeats allowed) for one command.
    pub fn lock(&self, keys: &[&[u8]]) -> KeyLocks<'_> {
        let mut locks =
            KeyLocks { table: self, shared: false, stripes: SmallVec::new(), _not_send: PhantomData };
        if HOLDS_EVERYTHING.with(Cell::get) {
            return locks;
        }
        let mut needed: SmallVec<[usize; 4]> = keys.iter().map(|k| stripe_of(k)).collect();
        needed.sort_unstable();
        needed.dedup();
        let lingered = LINGERING.with(|l| match l.borrow_mut().as_mut() {
            Some(held) if std::ptr::eq(held.table, self) => {
                self.take_lingering(held, &needed);
                true
            }
            _ => false,
        });
        if !lingered {
            self.everything.lock_shared();
            needed.iter().for_each(|&s| self.stripes[s].lock());
            (locks.shared, locks.stripes) = (true, needed);
        }
        locks
    }

    /// Runs `f` (one pipeline) with the locks its commands take lingering until it returns.
    /// `f` must not wait for another thread's pipeline (it may hold a lock that one needs).
    pub fn linger<T>(&self, f: impl FnOnce() -> T) -> T {
        let nested = LINGERING.with(|l| l.borrow().as_ref().is_some_and(|h| std::ptr::eq(h.table, self)));
        if nested {
            return f();
        }
        let outer = LINGERING
            .with(|l| l.borrow_mut().replace(Held { table: self, shared: false, stripes: SmallVec::new() }));
        // Released even if `f` panics.
        struct Release<'a>(&'a KeyLockTable, Option<Held>);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                let held = LINGERING.with(|l| std::mem::replace(&mut *l.borrow_mut(), self.1.take()));
                if let Some(mut held) = held {
                    self.0.release(&mut held);
                }
            }
        }
        let _release = Release(self, outer);
        f()
    }

    /// Runs `f` holding every key: no other client's command runs meanwhile (FLUSHALL, EXEC).
    /// Commands `f` runs take no locks of their own; nesting is allowed. A pipeline's
    /// lingering locks are let go of first (waiting for `everything` while holding them could
    /// deadlock with another pipeline).
    pub fn with_everything_locked<T>(&self, f: impl FnOnce() -> T) -> T {
        if HOLDS_EVERYTHING.with(Cell::get) {
            return f();
        }
        LINGERING.with(|l| {
            if let Some(held) = l.borrow_mut().as_mut().filter(|h| std::ptr::eq(h.table, self)) {
                self.release(held);
            }
        });
        self.everything.lock_exclusive();
        HOLDS_EVERYTHING.with(|h| h.set(true));
        // Reset even if `f` panics, so the thread's later commands lock again.
        struct Reset<'a>(&'a KeyLockTable);
        impl Drop for Reset<'_> {
            fn drop(&mut self) {
                HOLDS_EVERYTHING.with(|h| h.set(false));
                // SAFETY: taken exclusively above on this thread.
                unsafe { self.0.everything.unlock_exclusive() };
            }
        }
        let _reset = Reset(self);
        f()
    }

    /// Adds `needed` to what a lingering thread holds: without waiting if it can, else by
    /// letting go of everything and then waiting in stripe order.
    fn take_lingering(&self, held: &mut Held, needed: &[usize]) {
        if held.stripes.len() + needed.len() > MAX_LINGERING_STRIPES {
            self.release(held);
        }
        if self.try_take(held, needed) {
            return;
        }
        self.release(held);
        // Holding nothing: waiting cannot deadlock.
        self.everything.lock_shared();
        held.shared = true;
        for &s in needed {
            self.stripes[s].lock();
            held.stripes.push(s);
        }
    }

    /// Takes whatever of `needed` (and the shared lock) `held` lacks without waiting; false if
    /// one is held elsewhere (what it took meanwhile is in `held`).
    fn try_take(&self, held: &mut Held, needed: &[usize]) -> bool {
        if !held.shared {
            if !self.everything.try_lock_shared() {
                return false;
            }
            held.shared = true;
        }
        for &s in needed {
            if held.stripes.contains(&s) {
                continue;
            }
            if !self.stripes[s].try_lock() {
                return false;
            }
            held.stripes.push(s);
        }
        true
    }

    fn release(&self, held: &mut Held) {
        // SAFETY: `held` records exactly the locks this thread took for its pipeline.
        unsafe { self.unlock(held.shared, &held.stripes) };
        held.shared = false;
        held.stripes.clear();
    }

    /// # Safety
    /// The calling thread holds these stripes and, if `shared`, the shared side of
    /// `everything`, and releases each once.
    unsafe fn unlock(&self, shared: bool, stripes: &[usize]) {
        for &s in stripes.iter().rev() {
            // SAFETY: held by this thread (the caller's contract).
            unsafe { self.stripes[s].unlock() };
        }
        if shared {
            // SAFETY: as above.
            unsafe { self.everything.unlock_shared() };
        }
    }
}

fn stripe_of(key: &[u8]) -> usize {
    (xxhash_rust::xxh3::xxh3_64(key) as usize) % LOCK_STRIPES
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Two threads whose pipelines lock the same two keys in opposite orders, over and over,
    /// both lingering: neither deadlocks (each lets go of what it holds before it waits); a
    /// deadlock fails the test after a minute rather than hanging it.
    #[test]
    fn lingering_pipelines_taking_keys_in_opposite_orders_never_deadlock() {
        let table = Arc::new(KeyLockTable::default());
        let done = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = [(b"a", b"b"), (b"b", b"a")]
            .into_iter()
            .map(|(first, second)| {
                let (table, done) = (table.clone(), done.clone());
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        table.linger(|| {
                            drop(table.lock(&[first]));
                            drop(table.lock(&[second]));
                        });
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while done.load(Ordering::SeqCst) < 2 {
            assert!(std::time::Instant::now() < deadline, "two lingering pipelines deadlocked");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        threads.into_iter().for_each(|t| t.join().unwrap());
    }

    /// A command's locks outlive it inside a pipeline and are gone when the pipeline ends;
    /// `with_everything_locked` inside the pipeline lets go of them first.
    #[test]
    fn lingering_locks_are_held_until_the_pipeline_ends() {
        let table = KeyLockTable::default();
        let stripe = stripe_of(b"k");
        table.linger(|| {
            drop(table.lock(&[b"k"]));
            assert!(!table.stripes[stripe].try_lock(), "the stripe lingers after its command");
            table.with_everything_locked(|| {});
            assert!(table.stripes[stripe].try_lock(), "EXEC lets go of the pipeline's locks");
            // SAFETY: taken by the try_lock just above.
            unsafe { table.stripes[stripe].unlock() };
            drop(table.lock(&[b"k"]));
        });
        assert!(table.stripes[stripe].try_lock(), "the pipeline's end lets go of its locks");
        assert!(table.everything.try_lock_exclusive(), "and of the shared lock");
    }

    /// Outside a pipeline a command's locks are its own, released when it ends.
    #[test]
    fn a_command_outside_a_pipeline_releases_its_locks() {
        let table = KeyLockTable::default();
        let locks = table.lock(&[b"x", b"y", b"x"]);
        assert!(!table.stripes[stripe_of(b"y")].try_lock());
        drop(locks);
        assert!(table.everything.try_lock_exclusive());
    }
}
