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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_core::Value;
use crate::versioned_memtable::{VersionedMemTable, NEWEST};

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
