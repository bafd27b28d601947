//! Apply after commit, in log order (issue #19 item 4).
//!
//! An engine that applies a write to its in-memory structure (map, MemTable, record cache)
//! before the log accepted it lets a concurrent reader see a write that may still fail. With
//! `ApplyOrder` writers commit concurrently (the WAL's group commit) and then apply one at a
//! time, in the order their records were logged — RocksDB's order: memtable insert after the
//! WAL write (and sync) of the write group, sequence published after.
//!
//! 1. Under [`ApplyOrder::lock_log`] a writer appends its record to the WAL and takes a
//!    [`Ticket`] ([`LogGuard::enqueue`]), so ticket order is lsn order.
//! 2. With no lock held it waits for its commit (`Wal::commit`).
//! 3. [`Ticket::apply_in_turn`] waits until every earlier ticket is done, applies, and passes
//!    the turn. A ticket whose commit failed ([`Ticket::abandon`], after the engine poisoned
//!    itself), whose apply failed, or that was dropped unapplied is *abandoned*: every later
//!    ticket refuses to apply, with the abandoning failure as its error (its record follows a
//!    failed one in the log), so the applied writes are always a prefix of the log — what
//!    replay rebuilds.
//!
//! Read-modify-write must see every write logged before it, applied or not: under the log
//! lock it asks [`LogGuard::pending_write_of`] for the last unfinished ticket that may write its
//! key and, if there is one, lets go of the lock and waits for it ([`ApplyOrder::wait_done`])
//! before reading again. Keys are tracked by hash (a collision only costs a wait); a batch of
//! more than [`WIDE_BATCH_OPS`] operations counts as writing every key.
//!
//! Locks: `log` before `state`; `state` is never held while applying or parked. Waiters park
//! (`std::thread::park`) and are woken one by one as the turn reaches them, not all at once.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::thread::Thread;

use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;
use strata_core::{Error, Result, WriteBatch};

/// A batch with more operations than this is tracked as writing every key (an rmw of any key
/// waits for it), so a huge batch costs no per-key bookkeeping.
pub const WIDE_BATCH_OPS: usize = 16;

/// Orders the apply step of an engine's writes by their log order. See the module docs.
#[derive(Default)]
pub struct ApplyOrder {
    log: Mutex<()>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next_ticket: u64,
    /// Every ticket below this one is done; this one may apply.
    turn: u64,
    /// Tickets abandoned before their turn; the turn skips them.
    abandoned_ahead: BTreeSet<u64>,
    /// The first ticket abandoned and its failure: no later ticket applies.
    stopped: Option<(u64, String)>,
    /// Per key hash, the last unfinished ticket that writes it.
    pending_keys: HashMap<u64, u64, BuildHasherDefault<SpreadHasher>>,
    /// The last unfinished ticket of a wide batch.
    pending_wide: Option<u64>,
    waiters: Vec<Waiter>,
}

struct Waiter {
    /// Woken once `turn` reaches this.
    wake_at_turn: u64,
    thread: Thread,
}

/// The keys a write may change, as `enqueue` records them for `pending_write_of`.
#[derive(Clone, Debug)]
pub enum Keys {
    Hashes(SmallVec<[u64; 4]>),
    /// Every key (a wide batch).
    All,
}

impl Keys {
    pub fn one(key: &[u8]) -> Keys {
        Keys::Hashes(SmallVec::from_elem(key_hash(key), 1))
    }

    pub fn of(batch: &WriteBatch) -> Keys {
        if batch.len() > WIDE_BATCH_OPS {
            return Keys::All;
        }
        Keys::Hashes(batch.ops().iter().map(|op| key_hash(op.key())).collect())
    }
}

fn key_hash(key: &[u8]) -> u64 {
    u64::from(crc32c::crc32c(key)) ^ ((key.len() as u64) << 32)
}

/// Held while a writer appends to the log and enqueues; see [`ApplyOrder::lock_log`].
pub struct LogGuard<'a> {
    order: &'a ApplyOrder,
    _log: MutexGuard<'a, ()>,
}

/// An unfinished write an rmw must wait for ([`ApplyOrder::wait_done`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingWrite(u64);

/// A logged write's place in the apply order. Dropping it unapplied abandons it.
#[must_use = "a ticket dropped unapplied abandons its write and every later one"]
pub struct Ticket<'a> {
    order: &'a ApplyOrder,
    number: u64,
    keys: Keys,
    done: bool,
}

impl ApplyOrder {
    pub fn new() -> ApplyOrder {
        ApplyOrder::default()
    }

    /// The log lock: appends made under it and enqueued before it is released are applied in
    /// that order.
    pub fn lock_log(&self) -> LogGuard<'_> {
        LogGuard { order: self, _log: self.log.lock() }
    }

    /// Waits until `pending` is done (applied or abandoned).
    pub fn wait_done(&self, pending: PendingWrite) {
        let mut state = self.state.lock();
        while state.turn <= pending.0 {
            state = self.park(state, pending.0 + 1);
        }
    }

    /// Whether an abandoned write stopped the order (every later write refuses to apply).
    pub fn is_stopped(&self) -> bool {
        self.state.lock().stopped.is_some()
    }

    /// Parks the calling thread until `turn` reaches `wake_at_turn`, a ticket is abandoned, or
    /// a spurious wake-up; the caller re-checks its condition.
    fn park<'a>(&'a self, mut state: MutexGuard<'a, State>, wake_at_turn: u64) -> MutexGuard<'a, State> {
        let me = std::thread::current();
        state.waiters.push(Waiter { wake_at_turn, thread: me.clone() });
        drop(state);
        // An unpark between the drop and here leaves a token: park then returns at once.
        std::thread::park();
        let mut state = self.state.lock();
        // An entry a spurious wake-up left behind.
        state.waiters.retain(|w| w.thread.id() != me.id());
        state
    }

    /// Ticket `number` applied in its turn: pass the turn on.
    fn finish(&self, number: u64, keys: &Keys) {
        let mut state = self.state.lock();
        state.forget_keys(number, keys);
        debug_assert_eq!(state.turn, number, "applied out of turn");
        state.turn = number + 1;
        state.advance();
    }

    /// Ticket `number` will never apply (because of `cause`): stop every later one, and pass the
    /// turn on if it is this ticket's (else the turn skips it when it comes).
    fn abandon(&self, number: u64, keys: &Keys, cause: String) {
        let mut state = self.state.lock();
        state.forget_keys(number, keys);
        if state.stopped.as_ref().is_none_or(|(first, _)| number < *first) {
            state.stopped = Some((number, cause));
        }
        if state.turn == number {
            state.turn = number + 1;
        } else {
            state.abandoned_ahead.insert(number);
        }
        state.advance();
        // Later tickets waiting for their turn must learn that it will not come.
        for waiter in state.waiters.drain(..) {
            waiter.thread.unpark();
        }
    }
}

impl State {
    fn forget_keys(&mut self, number: u64, keys: &Keys) {
        match keys {
            Keys::Hashes(hashes) => {
                for hash in hashes {
                    if self.pending_keys.get(hash) == Some(&number) {
                        self.pending_keys.remove(hash);
                    }
                }
            }
            Keys::All if self.pending_wide == Some(number) => self.pending_wide = None,
            Keys::All => {}
        }
    }

    /// Skips abandoned tickets and wakes the waiters the turn reached.
    fn advance(&mut self) {
        while self.abandoned_ahead.remove(&self.turn) {
            self.turn += 1;
        }
        let turn = self.turn;
        self.waiters.retain(|w| {
            let wake = w.wake_at_turn <= turn;
            if wake {
                w.thread.unpark();
            }
            !wake
        });
    }
}

impl<'a> LogGuard<'a> {
    /// The last unfinished write that may change `key` (an rmw must wait for it: its value is
    /// not applied yet), if any.
    pub fn pending_write_of(&self, key: &[u8]) -> Option<PendingWrite> {
        let state = self.order.state.lock();
        let by_key = state.pending_keys.get(&key_hash(key)).copied();
        by_key.max(state.pending_wide).map(PendingWrite)
    }

    /// The ticket of the record just appended under this guard.
    pub fn enqueue(&self, keys: Keys) -> Ticket<'a> {
        let mut state = self.order.state.lock();
        let number = state.next_ticket;
        state.next_ticket += 1;
        match &keys {
            Keys::Hashes(hashes) => {
                for &hash in hashes {
                    state.pending_keys.insert(hash, number);
                }
            }
            Keys::All => state.pending_wide = Some(number),
        }
        Ticket { order: self.order, number, keys, done: false }
    }
}

impl Ticket<'_> {
    /// Waits until every earlier ticket is done, then runs `apply` and passes the turn on. An
    /// `Err` from `apply` abandons the ticket (the engine must have poisoned itself). Refuses,
    /// without running `apply`, when an earlier ticket was abandoned.
    pub fn apply_in_turn<R>(mut self, apply: impl FnOnce() -> Result<R>) -> Result<R> {
        let order = self.order;
        let mut state = order.state.lock();
        loop {
            if let Some((_, cause)) = state.stopped.as_ref().filter(|(first, _)| *first < self.number) {
                let refused = Error::Poisoned(format!("{cause} (a write logged before this one failed)"));
                drop(state);
                // Dropping `self` abandons this ticket too.
                return Err(refused);
            }
            if state.turn == self.number {
                break;
            }
            state = order.park(state, self.number);
        }
        drop(state);
        // A panic in `apply` drops `self` unfinished: abandoned, so no later write waits forever.
        match apply() {
            Ok(applied) => {
                self.done = true;
                order.finish(self.number, &self.keys);
                Ok(applied)
            }
            Err(e) => {
                self.abandon(&e);
                Err(e)
            }
        }
    }

    /// This write will never apply: its commit failed with `cause`. Every later write refuses
    /// to apply, with `cause` in its error. Poison the engine first, so a refused writer finds
    /// it poisoned.
    pub fn abandon(mut self, cause: &Error) {
        self.done = true;
        self.order.abandon(self.number, &self.keys, cause.to_string());
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if !self.done {
            let cause = "a write was dropped unapplied (a panic or a bug)".to_string();
            self.order.abandon(self.number, &self.keys, cause);
        }
    }
}

/// Spreads a 32-bit key hash over 64 bits (the map's control bytes use the top bits).
#[derive(Default)]
struct SpreadHasher(u64);

impl Hasher for SpreadHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
#[path = "apply_order_tests.rs"]
mod tests;
