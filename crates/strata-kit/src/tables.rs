//! The MemTables of an engine that keeps one active table and finalized ones on their way to
//! disk (turtle's tree, laser's level 0): the active one, written under its own lock, and the
//! finalized ones, immutable and read with no lock; and the live snapshots, whose lsns decide
//! which older versions the active table keeps (`VersionedMemTable`).
//!
//! Lock order: the engine's lock around `Tables`, then the active table's lock. A writer holds the tables' read
//! lock and the active table's write lock; finalizing takes both write locks, moves the
//! active table's entries into a `Frozen` table and leaves a pointer to it behind, so a view
//! that holds the old active table finds its entries there. A snapshot registers its lsn under
//! the active table's read lock, so every write either sees the registration or comes after
//! the snapshot.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::versioned_memtable::{VersionedMemTable, NEWEST};
use parking_lot::{Mutex, RwLock};
use strata_core::{borrow_bound, Direction, Key, KeyRange, Value};

/// A finalized MemTable: no more writes; `last_lsn` is the last WAL record it holds.
#[derive(Debug)]
pub struct Frozen {
    pub entries: VersionedMemTable,
    pub last_lsn: u64,
}

/// The active MemTable and the last WAL record applied to it (for a new, empty one: the last
/// applied to the table before it, so it is always the store's newest lsn). Once finalized its
/// entries are in `frozen`.
#[derive(Debug, Default)]
pub struct ActiveState {
    pub entries: VersionedMemTable,
    pub last_lsn: u64,
    pub frozen: Option<Arc<Frozen>>,
}

/// The active table, shared with the views that read it.
pub type Active = RwLock<ActiveState>;

pub fn new_active(entries: VersionedMemTable, last_lsn: u64) -> Arc<Active> {
    Arc::new(RwLock::new(ActiveState { entries, last_lsn, frozen: None }))
}

/// The active table and the finalized ones, oldest first.
pub struct Tables {
    pub active: Arc<Active>,
    pub finalized: VecDeque<Arc<Frozen>>,
}

impl Tables {
    pub fn new(active: Arc<Active>) -> Tables {
        Tables { active, finalized: VecDeque::new() }
    }

    /// Moves a non-empty active table's entries to the finalized list; a new empty table takes
    /// its place.
    pub fn finalize_active(&mut self) -> bool {
        let mut active = self.active.write();
        if active.entries.is_empty() {
            return false;
        }
        let entries = std::mem::take(&mut active.entries);
        let frozen = Arc::new(Frozen { entries, last_lsn: active.last_lsn });
        active.frozen = Some(frozen.clone());
        let last_lsn = active.last_lsn;
        drop(active);
        self.active = new_active(VersionedMemTable::default(), last_lsn);
        self.finalized.push_back(frozen);
        true
    }

    /// Write path step 4 for an engine whose writes enter the active table (`ApplyLogged::
    /// apply_run`): every op of the run's batches, oldest first, by `apply` (the engine's own
    /// fold; `VersionedMemTable::apply` for most) with the newest live snapshot, under the
    /// active table's write lock, its last lsn recorded. An error leaves the run half-applied:
    /// the engine poisons itself (logged_writes).
    pub fn apply_logged(
        &self,
        run: &mut Vec<crate::logged_writes::Logged>,
        snapshots: &Snapshots,
        mut apply: impl FnMut(
            &mut VersionedMemTable,
            strata_core::BatchOp,
            u64,
            Option<u64>,
        ) -> strata_core::Result<()>,
    ) -> strata_core::Result<()> {
        let mut active = self.active.write();
        let newest_snapshot = snapshots.newest();
        for crate::logged_writes::Logged { lsn, batch } in run.drain(..) {
            for op in batch.into_ops() {
                apply(&mut active.entries, op, lsn, newest_snapshot)?;
            }
            active.last_lsn = lsn;
        }
        Ok(())
    }

    /// The oldest finalized table leaves (the engine's disk structure holds it durably).
    pub fn remove_oldest_finalized(&mut self) {
        self.finalized.pop_front();
    }

    pub fn memory_bytes(&self) -> u64 {
        let finalized: u64 = self.finalized.iter().map(|f| f.entries.memory_bytes()).sum();
        self.active.read().entries.memory_bytes() + finalized
    }

    /// `key` in the tables, newest first: `Some(None)` a delete, `None` not there (look on
    /// disk).
    pub fn get(&self, key: &[u8]) -> Option<Option<Value>> {
        if let Some(found) = self.active.read().entries.get_at(key, NEWEST) {
            return Some(found.cloned());
        }
        self.finalized.iter().rev().find_map(|f| f.entries.get_at(key, NEWEST).map(|v| v.cloned()))
    }
}

/// The tables as of one applied write (`lsn`), registered as a live snapshot so the active
/// table keeps the versions it reads: what a point-in-time scan reads besides the disk.
pub struct TablesView {
    pub lsn: u64,
    /// The table that was active: writes after `lsn` may still land in it (they are not seen).
    pub active: Arc<Active>,
    /// Newest first.
    pub finalized: Vec<Arc<Frozen>>,
    pub registration: Registration,
}

impl Tables {
    /// The view as of now, the active table's last lsn registered under its read lock (see the
    /// module docs). The caller holds the lock around `Tables`, so whatever it reads of the
    /// disk under it holds exactly the tables that left the list.
    pub fn view(&self, snapshots: &Arc<Snapshots>) -> TablesView {
        let (lsn, registration) = {
            let active = self.active.read();
            (active.last_lsn, snapshots.register(active.last_lsn))
        };
        TablesView {
            lsn,
            active: self.active.clone(),
            finalized: self.finalized.iter().rev().cloned().collect(),
            registration,
        }
    }
}

/// Writers wait while more than `max_finalized` tables wait for the disk (`full`). The
/// writer's own write is applied already: a close meanwhile is not its failure (the tables
/// stay in the WAL for the next open), a poisoned engine is. `on_wait` counts each wait.
pub fn wait_for_room(
    full: impl Fn() -> bool,
    writes: &crate::logged_writes::LoggedWrites,
    signals: &crate::worker::WorkerSignals,
    on_wait: impl Fn(),
) -> strata_core::Result<()> {
    loop {
        if !full() {
            return Ok(());
        }
        let state = writes.state();
        if state.is_poisoned() {
            return writes.check_usable();
        }
        if state.is_closed() || signals.is_stopping() {
            return Ok(());
        }
        on_wait();
        signals.wait_for_progress(std::time::Duration::from_millis(50), |_| full());
    }
}

/// The lsns of the live snapshots, each with how many snapshots share it.
#[derive(Debug, Default)]
pub struct Snapshots {
    live: Mutex<BTreeMap<u64, usize>>,
    /// How many registrations `live` holds: a write with none live takes no lock. Changed
    /// under `live`'s lock; a registration happens under the active table's read lock and the
    /// writer reads it under that table's write lock, so the writer sees every registration
    /// that precedes its write.
    count: AtomicUsize,
}

impl Snapshots {
    /// The newest live snapshot's lsn. Called under the active table's write lock.
    pub fn newest(&self) -> Option<u64> {
        if self.count.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.live.lock().last_key_value().map(|(lsn, _)| *lsn)
    }

    /// Registers a snapshot at `lsn` until the registration is dropped. Called under the
    /// active table's read lock, `lsn` its `last_lsn`.
    pub fn register(self: &Arc<Snapshots>, lsn: u64) -> Registration {
        let mut live = self.live.lock();
        *live.entry(lsn).or_insert(0) += 1;
        self.count.fetch_add(1, Ordering::Release);
        Registration { snapshots: self.clone(), lsn }
    }
}

/// A live snapshot; dropped, its lsn no longer keeps versions.
#[derive(Debug)]
pub struct Registration {
    snapshots: Arc<Snapshots>,
    lsn: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut live = self.snapshots.live.lock();
        if let Some(count) = live.get_mut(&self.lsn) {
            *count -= 1;
            if *count == 0 {
                live.remove(&self.lsn);
            }
            self.snapshots.count.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Entries of the first window `ActiveWindows` copies; each next one doubles, up to
/// `MAX_WINDOW_ENTRIES`.
const FIRST_WINDOW_ENTRIES: usize = 8;
const MAX_WINDOW_ENTRIES: usize = 1024;

/// The active table's entries within a range as of one lsn (`None`: a delete), in scan order,
/// copied a window at a time under the table's read lock (8 entries doubling to 1,024): a scan
/// that reads it as a merge source never holds the lock across a device read, and a table
/// finalized meanwhile is read from its `Frozen` copy with no lock. The caller registered `lsn`
/// as a snapshot, so the versions it reads stay.
pub struct ActiveWindows {
    active: Arc<Active>,
    lsn: u64,
    range: KeyRange,
    direction: Direction,
    buffer: VecDeque<(Key, Option<Value>)>,
    next_entries: usize,
    done: bool,
}

impl ActiveWindows {
    pub fn new(active: Arc<Active>, lsn: u64, range: KeyRange, direction: Direction) -> ActiveWindows {
        let done = range.is_empty();
        ActiveWindows {
            active,
            lsn,
            range,
            direction,
            buffer: VecDeque::new(),
            next_entries: FIRST_WINDOW_ENTRIES,
            done,
        }
    }

    /// The next window past the last entry copied; the range's consumed side moves past it.
    fn copy(&mut self) {
        let n = self.next_entries;
        self.next_entries = (n * 2).min(MAX_WINDOW_ENTRIES);
        let bounds = (borrow_bound(&self.range.start), borrow_bound(&self.range.end));
        let (lsn, direction) = (self.lsn, self.direction);
        let copy = |entries: &VersionedMemTable| -> Vec<(Key, Option<Value>)> {
            let owned = |(k, v): (&[u8], Option<&[u8]>)| (k.to_vec(), v.map(<[u8]>::to_vec));
            match direction {
                Direction::Forward => entries.range_at(bounds, lsn).take(n).map(owned).collect(),
                Direction::Reverse => entries.range_at(bounds, lsn).rev().take(n).map(owned).collect(),
            }
        };
        let active = self.active.read();
        let copied = match active.frozen.clone() {
            Some(frozen) => {
                drop(active);
                copy(&frozen.entries)
            }
            None => copy(&active.entries),
        };
        self.done = copied.len() < n;
        if let Some((last, _)) = copied.last() {
            match self.direction {
                Direction::Forward => self.range.start = Bound::Excluded(last.clone()),
                Direction::Reverse => self.range.end = Bound::Excluded(last.clone()),
            }
        }
        self.buffer.extend(copied);
    }
}

impl Iterator for ActiveWindows {
    type Item = (Key, Option<Value>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.buffer.is_empty() && !self.done {
            self.copy();
        }
        self.buffer.pop_front()
    }
}

#[cfg(test)]
mod window_tests {
    use super::*;
    use strata_core::BatchOp;

    #[test]
    fn windows_see_the_table_as_of_their_lsn_both_ways_and_after_it_is_finalized() {
        let mut entries = VersionedMemTable::default();
        for i in 0..100u32 {
            let key = format!("k{i:03}").into_bytes();
            entries.apply(BatchOp::Put { key, value: b"old".to_vec() }, 1, None);
        }
        let mut tables = Tables::new(new_active(entries, 1));
        let snapshots = Arc::new(Snapshots::default());
        let _registration = snapshots.register(1);
        let range =
            KeyRange { start: Bound::Included(b"k010".to_vec()), end: Bound::Excluded(b"k090".to_vec()) };
        let forward = ActiveWindows::new(tables.active.clone(), 1, range.clone(), Direction::Forward);
        let reverse = ActiveWindows::new(tables.active.clone(), 1, range, Direction::Reverse);
        {
            let mut active = tables.active.write();
            let newest = snapshots.newest();
            active.entries.apply(BatchOp::Put { key: b"k050".to_vec(), value: b"new".to_vec() }, 2, newest);
            active.entries.apply(BatchOp::Delete { key: b"k051".to_vec() }, 2, newest);
        }
        let mut forward = forward.peekable();
        assert_eq!(forward.next().map(|(k, _)| k), Some(b"k010".to_vec()), "the first window copied now");
        assert!(tables.finalize_active(), "the rest is read from the frozen copy");
        let rest: Vec<(Key, Option<Value>)> = forward.collect();
        assert_eq!(rest.len(), 79);
        assert!(rest.iter().all(|(_, v)| v.as_deref() == Some(&b"old"[..])), "as of lsn 1");
        let keys: Vec<Key> = reverse.map(|(k, _)| k).collect();
        assert_eq!((keys.len(), keys[0].as_slice(), keys[79].as_slice()), (80, &b"k089"[..], &b"k010"[..]));
    }
}
