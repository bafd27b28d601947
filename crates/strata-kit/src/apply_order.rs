//! Apply after commit, in log order: the ordering core of [`crate::logged_writes`].
//!
//! An engine that applies a write to its in-memory structure (map, MemTable, record cache)
//! before the log accepted it lets a concurrent reader see a write that may still fail. With
//! `ApplyOrder` writers commit concurrently (the WAL's group commit) and their writes are then
//! applied in the order their records were logged — RocksDB's order: memtable insert after the
//! WAL write (and sync) of the write group, by the group's leader, sequence published after.
//!
//! 1. Under [`ApplyOrder::lock_log`] a writer appends its record to the WAL and enqueues its
//!    item (batch and lsn) with the record's lsn and durability ([`LogGuard::enqueue`]), which
//!    gives it a [`Ticket`]: ticket order is lsn order.
//! 2. With no lock held it waits for its commit (`Wal::commit_then`).
//! 3. Items are applied by an *applier*, in runs: every consecutive appliable item from the
//!    oldest unapplied one, with the engine's apply function, under one lock acquisition of
//!    the engine's structure. An item is appliable once its writer reported its commit `Ok`
//!    ([`Ticket::finish`]), or once the log shows its record as far as its durability asks
//!    ([`CommitProgress`]: written for `Buffered`/`None`, durable for `Sync`). The applier is
//!    normally the leader of the WAL round that made the records so: `Wal::commit_then` runs
//!    [`ApplyOrder::apply_appliable`] after a round and before it wakes the round's other
//!    writers, who then find their writes applied and return at once (RocksDB's write-group
//!    leader inserting the group). Otherwise `finish` applies what it can, or waits — briefly
//!    spinning while a run holding its item is applied or while the write ahead of it, one
//!    that waits for no fdatasync, is still between its append and its own `finish`; else
//!    parked until it is applied. A writer
//!    returns once its own item is applied (also when its own commit then reports an error:
//!    the log had accepted the record before the failure).
//! 4. A commit that failed before its item was applied, a run whose apply failed, or a ticket
//!    dropped unfinished *stops* the order: no ticket from there on is applied, each refusing
//!    with that failure as its error (its record follows a failed one in the log). So the
//!    applied writes are always a prefix of the log — what replay rebuilds.
//!
//! Read-modify-write must see every write logged before it, applied or not: under the log
//! lock it asks [`LogGuard::pending_write_of`] for the last unapplied ticket that may write its
//! key and, if there is one, lets go of the lock and waits for it ([`ApplyOrder::wait_done`])
//! before reading again. Keys are tracked by hash (a collision only costs a wait); a batch of
//! more than [`WIDE_BATCH_OPS`] operations counts as writing every key.
//!
//! Locks: `log` before `state`; `state` is never held while applying or parked. Waiters park
//! (`std::thread::park`) and are woken when their ticket is applied or the order stops.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::thread::Thread;

use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;
use strata_core::{Durability, Error, Result, WriteBatch};
use strata_wal::Wal;

/// A batch with more operations than this is tracked as writing every key (an rmw of any key
/// waits for it), so a huge batch costs no per-key bookkeeping.
pub const WIDE_BATCH_OPS: usize = 16;

/// Applies a run of items, oldest first, draining the vector. An `Err` means none of them
/// counts as applied (the engine must have poisoned itself: it may have applied some).
pub type ApplyRun<'f, T> = &'f mut dyn FnMut(&mut Vec<T>) -> Result<()>;

/// How far the log has accepted records: whether a record's commit at `durability` has
/// happened (the same condition `Wal::commit` waits for). Published only after the write or
/// sync succeeded, so an item it covers may be applied before its writer learns the outcome.
pub trait CommitProgress {
    fn covers(&self, lsn: u64, durability: Durability) -> bool;
}

impl CommitProgress for Wal {
    fn covers(&self, lsn: u64, durability: Durability) -> bool {
        match durability {
            Durability::Sync => self.durable_lsn() >= lsn,
            Durability::Buffered | Durability::None => self.written_lsn() >= lsn,
        }
    }
}

/// Orders the apply step of an engine's writes by their log order; `T` is what a writer hands
/// over to be applied (its batch and lsn). See the module docs.
pub struct ApplyOrder<T> {
    log: Mutex<()>,
    state: Mutex<State<T>>,
    /// `State::applying`, readable without the lock (set and cleared under it).
    applying: AtomicBool,
    /// `State::turn`, readable without the lock (raised under it once a run is applied): a
    /// writer whose item an applier already applied returns without taking the state lock.
    turn: AtomicU64,
}

/// How long a writer whose item is in the running run waits for it without parking: half of it
/// spinning, half yielding (then it parks: an applier that lost its CPU takes longer).
const SPIN_ROUNDS: u32 = 128;

struct State<T> {
    next_ticket: u64,
    /// Every ticket below this one is applied.
    turn: u64,
    /// One slot per ticket from `turn` on.
    slots: VecDeque<Slot<T>>,
    /// A writer is applying a run taken from the front of `slots`.
    applying: bool,
    /// The first ticket that will never be applied, and why: nothing from it on is applied.
    stopped: Option<(u64, String)>,
    /// Per key hash, the last unapplied ticket that writes it.
    pending_keys: HashMap<u64, u64, BuildHasherDefault<SpreadHasher>>,
    /// The last unapplied ticket of a wide batch.
    pending_wide: Option<u64>,
    waiters: Vec<Waiter>,
    /// The run buffer, reused between runs.
    run: Vec<T>,
}

struct Slot<T> {
    keys: Keys,
    item: Item<T>,
}

enum Item<T> {
    /// Its writer is still committing; appliable once the log covers `lsn` at `durability`.
    Logged { item: T, lsn: u64, durability: Durability },
    /// Its writer reported the commit `Ok`.
    Committed(T),
    /// In the run being applied.
    Taken,
}

impl<T> Item<T> {
    fn appliable(&self, progress: &dyn CommitProgress) -> bool {
        match self {
            Item::Logged { lsn, durability, .. } => progress.covers(*lsn, *durability),
            Item::Committed(_) => true,
            Item::Taken => false,
        }
    }

    fn into_item(self) -> Option<T> {
        match self {
            Item::Logged { item, .. } | Item::Committed(item) => Some(item),
            Item::Taken => None,
        }
    }
}

struct Waiter {
    /// Woken once `turn` passes this ticket (or the order stops).
    ticket: u64,
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
pub struct LogGuard<'a, T> {
    order: &'a ApplyOrder<T>,
    _log: MutexGuard<'a, ()>,
}

/// An unapplied write an rmw must wait for ([`ApplyOrder::wait_done`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingWrite(u64);

/// A logged write's place in the apply order. Dropping it unfinished stops the order.
#[must_use = "a ticket dropped unfinished stops the apply order"]
pub struct Ticket<'a, T> {
    order: &'a ApplyOrder<T>,
    number: u64,
    done: bool,
}

impl<T> Default for ApplyOrder<T> {
    fn default() -> Self {
        ApplyOrder {
            applying: AtomicBool::new(false),
            turn: AtomicU64::new(0),
            log: Mutex::new(()),
            state: Mutex::new(State {
                next_ticket: 0,
                turn: 0,
                slots: VecDeque::new(),
                applying: false,
                stopped: None,
                pending_keys: HashMap::default(),
                pending_wide: None,
                waiters: Vec::new(),
                run: Vec::new(),
            }),
        }
    }
}

impl<T> ApplyOrder<T> {
    pub fn new() -> ApplyOrder<T> {
        ApplyOrder::default()
    }

    /// The log lock: appends made under it and enqueued before it is released are applied in
    /// that order.
    pub fn lock_log(&self) -> LogGuard<'_, T> {
        LogGuard { order: self, _log: self.log.lock() }
    }

    /// Waits until `pending` is applied (`Ok`), or will never be: the order stopped at or before
    /// it, and the error is that refusal.
    pub fn wait_done(&self, pending: PendingWrite) -> Result<()> {
        let mut state = self.state.lock();
        loop {
            if state.turn > pending.0 {
                return Ok(());
            }
            if let Some(refused) = state.refusal(pending.0) {
                return Err(refused);
            }
            state = self.park(state, pending.0);
        }
    }

    /// Whether the order stopped (a write failed; no later write is applied).
    pub fn is_stopped(&self) -> bool {
        self.state.lock().stopped.is_some()
    }

    /// Parks the calling thread until `ticket` is applied, the order stops, the applier role is
    /// handed to it, or a spurious wake-up; the caller re-checks its condition.
    fn park<'a>(&'a self, mut state: MutexGuard<'a, State<T>>, ticket: u64) -> MutexGuard<'a, State<T>> {
        let me = std::thread::current();
        state.waiters.push(Waiter { ticket, thread: me.clone() });
        drop(state);
        // An unpark between the drop and here leaves a token: park then returns at once.
        std::thread::park();
        let mut state = self.state.lock();
        // An entry a spurious wake-up left behind.
        state.waiters.retain(|w| w.thread.id() != me.id());
        state
    }

    /// Ticket `number`'s commit ended with `committed`; returns once its item is applied (by
    /// this writer as the applier, or by another), or refused because the order stopped at or
    /// before it. A failed commit stops the order here unless the item was applied already
    /// (the log covered it: the failure came after) or is being applied (then its run decides).
    fn finish(
        &self,
        number: u64,
        committed: Result<()>,
        progress: &dyn CommitProgress,
        apply: ApplyRun<'_, T>,
    ) -> Result<()> {
        // Applied by another writer (a group's first to run applies the whole group): its
        // commit's result does not matter, the log had accepted the record.
        if self.turn.load(Acquire) > number {
            return Ok(());
        }
        let mut state = self.state.lock();
        match committed {
            Ok(()) => state.mark_committed(number),
            Err(e) if state.turn <= number && !state.is_taken(number) => {
                state.stop(number, e.to_string());
                return Err(e);
            }
            Err(_) => {}
        }
        let (mut waited_for_run, mut waited_for_front) = (false, false);
        loop {
            if state.turn > number {
                // A writer applies only until its own item is in.
                state.hand_over_front(progress);
                return Ok(());
            }
            if let Some(refused) = state.refusal(number) {
                return Err(refused);
            }
            if !state.applying && state.front_appliable(progress) {
                state = self.apply_run(state, progress, apply);
                continue;
            }
            if state.is_taken(number) && !waited_for_run {
                // In the run being applied: usually done within microseconds, sooner than a
                // park and a wake-up; once only, since an applier that lost its CPU is not.
                state = self.spin_while_applying(state, number);
                waited_for_run = true;
                continue;
            }
            if state.front_needs_no_sync() && !waited_for_front {
                // The write ahead waits for no fdatasync: its writer reaches `finish` (and
                // applies ours with its own) within microseconds, after at most a write to
                // the OS; once only, as above.
                state = self.spin_while_front_commits(state);
                waited_for_front = true;
                continue;
            }
            state = self.park(state, number);
        }
    }

    /// Applies every appliable item from the front, unless another writer is applying: for
    /// the leader of a WAL round (`Wal::commit_then`), before it wakes the round's other
    /// writers, which then find their writes applied.
    pub fn apply_appliable(&self, progress: &dyn CommitProgress, apply: ApplyRun<'_, T>) {
        let mut state = self.state.lock();
        // Only items enqueued by now: writers that keep writing (`None` ones need no round)
        // must not keep the leader applying for them while its round's waiters wait unwoken.
        let end = state.next_ticket;
        while state.turn < end && !state.applying && state.front_appliable(progress) {
            state = self.apply_run(state, progress, apply);
        }
        state.hand_over_front(progress);
    }

    /// Lets go of the state lock until ticket `number` is applied or the running run ends
    /// (bounded: spinning, then yielding), for a writer whose item is in that run.
    fn spin_while_applying<'a>(
        &'a self,
        state: MutexGuard<'a, State<T>>,
        number: u64,
    ) -> MutexGuard<'a, State<T>> {
        drop(state);
        for round in 0..SPIN_ROUNDS {
            if self.turn.load(Acquire) > number || !self.applying.load(Acquire) {
                break;
            }
            match round < SPIN_ROUNDS / 2 {
                true => std::hint::spin_loop(),
                false => std::thread::yield_now(),
            }
        }
        self.state.lock()
    }

    /// Lets go of the state lock until a run is applied or starts (bounded: spinning, then
    /// yielding), for a writer waiting behind a write that needs no fdatasync, still committing.
    fn spin_while_front_commits<'a>(&'a self, state: MutexGuard<'a, State<T>>) -> MutexGuard<'a, State<T>> {
        let turn = state.turn;
        drop(state);
        for round in 0..SPIN_ROUNDS {
            if self.turn.load(Acquire) != turn || self.applying.load(Acquire) {
                break;
            }
            match round < SPIN_ROUNDS / 2 {
                true => std::hint::spin_loop(),
                false => std::thread::yield_now(),
            }
        }
        self.state.lock()
    }

    /// As the applier: takes every consecutive appliable item from the front, applies them
    /// without the state lock, then marks them applied (or stops the order at the run's first
    /// ticket if `apply` failed or panicked) and wakes their writers.
    fn apply_run<'a>(
        &'a self,
        mut state: MutexGuard<'a, State<T>>,
        progress: &dyn CommitProgress,
        apply: ApplyRun<'_, T>,
    ) -> MutexGuard<'a, State<T>> {
        let first = state.turn;
        // Nothing from the stop on is applied, appliable or not (a write whose commit failed
        // after the log accepted its record returned `Err`).
        let end = state.stopped.as_ref().map_or(u64::MAX, |(stop, _)| *stop);
        let mut run = std::mem::take(&mut state.run);
        let before_stop = usize::try_from(end.saturating_sub(first)).unwrap_or(usize::MAX);
        for slot in state.slots.iter_mut().take(before_stop) {
            if !slot.item.appliable(progress) {
                break;
            }
            if let Some(item) = std::mem::replace(&mut slot.item, Item::Taken).into_item() {
                run.push(item);
            }
        }
        let taken = run.len();
        state.applying = true;
        self.applying.store(true, Release);
        drop(state);
        let panicked = StopOnUnwind { order: self, first, armed: true };
        let applied = apply(&mut run);
        panicked.disarm();
        run.clear();
        let mut state = self.state.lock();
        state.applying = false;
        self.applying.store(false, Release);
        state.run = run;
        match applied {
            Ok(()) => {
                for _ in 0..taken {
                    if let Some(slot) = state.slots.pop_front() {
                        let number = state.turn;
                        state.forget_keys(number, &slot.keys);
                    }
                    state.turn += 1;
                }
                self.turn.store(state.turn, Release);
                let last_applied = state.turn - 1;
                state.wake_through(last_applied);
            }
            Err(e) => state.stop(first, e.to_string()),
        }
        state
    }

    /// Ticket `number` was dropped unfinished: stop the order there, unless it is applied or
    /// in the running run (then the run decides, as for a failed commit in `finish`: stopping
    /// at an item the run then applies would break "nothing from the stop on is applied").
    fn abandon(&self, number: u64) {
        let mut state = self.state.lock();
        if state.turn <= number && !state.is_taken(number) {
            state.stop(number, "a write was dropped unapplied (a panic or a bug)".to_string());
        }
    }
}

/// Stops the order at a run's first ticket if the apply function panics, so no writer waits
/// forever for a run that never finished.
struct StopOnUnwind<'a, T> {
    order: &'a ApplyOrder<T>,
    first: u64,
    armed: bool,
}

impl<T> StopOnUnwind<'_, T> {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl<T> Drop for StopOnUnwind<'_, T> {
    fn drop(&mut self) {
        if self.armed {
            let mut state = self.order.state.lock();
            state.applying = false;
            self.order.applying.store(false, Release);
            state.stop(self.first, "a panic while applying a run of writes".to_string());
        }
    }
}

impl<T> State<T> {
    fn slot_mut(&mut self, number: u64) -> Option<&mut Slot<T>> {
        let index = usize::try_from(number.checked_sub(self.turn)?).ok()?;
        self.slots.get_mut(index)
    }

    /// The oldest unapplied item can be applied now (never one at or after the stop).
    fn front_appliable(&self, progress: &dyn CommitProgress) -> bool {
        let stopped_here = self.stopped.as_ref().is_some_and(|(stop, _)| *stop <= self.turn);
        !stopped_here && self.slots.front().is_some_and(|slot| slot.item.appliable(progress))
    }

    /// The front item's writer is still committing a write that waits for no fdatasync.
    fn front_needs_no_sync(&self) -> bool {
        self.slots.front().is_some_and(|slot| {
            matches!(slot.item, Item::Logged { durability: Durability::None | Durability::Buffered, .. })
        })
    }

    fn is_taken(&mut self, number: u64) -> bool {
        self.slot_mut(number).is_some_and(|slot| matches!(slot.item, Item::Taken))
    }

    /// The writer reported its commit `Ok`: the item is appliable whatever the log's progress.
    fn mark_committed(&mut self, number: u64) {
        if let Some(slot) = self.slot_mut(number) {
            if let Item::Logged { .. } = slot.item {
                if let Some(item) = std::mem::replace(&mut slot.item, Item::Taken).into_item() {
                    slot.item = Item::Committed(item);
                }
            }
        }
    }

    /// The error of a ticket the stopped order will never apply.
    fn refusal(&self, number: u64) -> Option<Error> {
        let (first, cause) = self.stopped.as_ref().filter(|(first, _)| *first <= number)?;
        let why = match *first == number {
            true => format!("{cause} (this write was not applied)"),
            false => format!("{cause} (a write logged before this one failed)"),
        };
        Some(Error::Poisoned(why))
    }

    /// Stops the order at `number` (or keeps an earlier stop) and wakes every waiter.
    fn stop(&mut self, number: u64, cause: String) {
        if self.stopped.as_ref().is_none_or(|(first, _)| number < *first) {
            self.stopped = Some((number, cause));
        }
        for waiter in self.waiters.drain(..) {
            waiter.thread.unpark();
        }
    }

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

    /// Leaves the applier role to the front item's writer when nobody is applying and that item
    /// is appliable: wakes it if it is parked in `finish` (parked while another run was applied
    /// or while its item was not appliable yet); otherwise it has not reached `finish` yet and
    /// applies when it does. Whoever ends a run without taking the next one calls this, so an
    /// appliable front never waits for a wake-up that does not come.
    fn hand_over_front(&mut self, progress: &dyn CommitProgress) {
        if !self.applying && self.front_appliable(progress) {
            let front = self.turn;
            self.wake_through(front);
        }
    }

    /// Wakes the waiters of tickets up to `ticket`.
    fn wake_through(&mut self, ticket: u64) {
        self.waiters.retain(|w| {
            let wake = w.ticket <= ticket;
            if wake {
                w.thread.unpark();
            }
            !wake
        });
    }
}

impl<'a, T> LogGuard<'a, T> {
    /// The last unapplied write that may change `key` (an rmw must wait for it: its value is
    /// not applied yet), if any.
    pub fn pending_write_of(&self, key: &[u8]) -> Option<PendingWrite> {
        let state = self.order.state.lock();
        let by_key = state.pending_keys.get(&key_hash(key)).copied();
        by_key.max(state.pending_wide).map(PendingWrite)
    }

    /// Enqueues the record just appended under this guard (`lsn`, committed at `durability`)
    /// with the item that applies it; returns its ticket.
    pub fn enqueue(&self, keys: Keys, lsn: u64, durability: Durability, item: T) -> Ticket<'a, T> {
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
        state.slots.push_back(Slot { keys, item: Item::Logged { item, lsn, durability } });
        Ticket { order: self.order, number, done: false }
    }
}

impl<T> Ticket<'_, T> {
    /// Ends this write once its commit returned `committed` (with the engine poisoned first
    /// when it failed, so a writer refused behind it finds the engine poisoned); returns once
    /// its item is applied, in log order, by `apply` — run by this writer or by another one
    /// (module docs, step 3); every writer passes the same function. `Err` when the write was
    /// not applied: its commit failed first, or the order stopped at or before it (an earlier
    /// write failed, or a run holding it failed to apply), with that failure in the error.
    pub fn finish(
        mut self,
        committed: Result<()>,
        progress: &dyn CommitProgress,
        apply: ApplyRun<'_, T>,
    ) -> Result<()> {
        self.done = true;
        self.order.finish(self.number, committed, progress, apply)
    }
}

impl<T> Drop for Ticket<'_, T> {
    fn drop(&mut self) {
        if !self.done {
            self.order.abandon(self.number);
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
