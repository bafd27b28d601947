//! The MemTables: the active one, written under its own lock, and up to `MAX_FINALIZED` finalized
//! ones on their way into the tree; and the live snapshots, whose lsns decide which older
//! versions the active table keeps (`VersionedMemTable`).
//!
//! Lock order: `Inner::tables`, then a table's own lock. A writer holds the tables' read lock
//! and the active table's write lock; finalizing a table takes the tables' write lock, so no
//! write lands in a table once it is finalized. A snapshot registers its lsn under the active
//! table's read lock, so every write either sees the registration or comes after the snapshot.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use strata_core::Value;
use strata_kit::versioned_memtable::{VersionedMemTable, NEWEST};

/// A MemTable and the last WAL record applied to it (for a new, empty active table: the last
/// one applied to the table before it, so it is always the store's newest lsn).
#[derive(Debug)]
pub(crate) struct TableState {
    pub entries: VersionedMemTable,
    pub last_lsn: u64,
}

/// A MemTable shared by the tables' list and the snapshots that read it; only the active one
/// is ever written.
#[derive(Debug)]
pub(crate) struct Table(RwLock<TableState>);

impl Table {
    pub fn new(entries: VersionedMemTable, last_lsn: u64) -> Arc<Table> {
        Arc::new(Table(RwLock::new(TableState { entries, last_lsn })))
    }

    pub fn read(&self) -> RwLockReadGuard<'_, TableState> {
        self.0.read()
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, TableState> {
        self.0.write()
    }
}

/// The active table and the finalized ones, oldest first.
pub(crate) struct Tables {
    pub active: Arc<Table>,
    pub finalized: VecDeque<Arc<Table>>,
}

impl Tables {
    pub fn new(active: Arc<Table>) -> Tables {
        Tables { active, finalized: VecDeque::new() }
    }

    /// Moves a non-empty active table to the finalized list; a new empty one takes its place.
    pub fn finalize_active(&mut self) -> bool {
        let last_lsn = {
            let active = self.active.read();
            if active.entries.is_empty() {
                return false;
            }
            active.last_lsn
        };
        let table = std::mem::replace(&mut self.active, Table::new(VersionedMemTable::default(), last_lsn));
        self.finalized.push_back(table);
        true
    }

    /// The oldest finalized table leaves (the tree holds it durably).
    pub fn remove_oldest_finalized(&mut self) {
        self.finalized.pop_front();
    }

    pub fn memory_bytes(&self) -> u64 {
        self.newest_first().map(|t| t.read().entries.memory_bytes()).sum()
    }

    /// The active table, then the finalized ones newest first.
    pub fn newest_first(&self) -> impl Iterator<Item = &Arc<Table>> {
        std::iter::once(&self.active).chain(self.finalized.iter().rev())
    }

    /// `key` in the tables, newest first: `Some(None)` a delete, `None` not there (look in the
    /// tree).
    pub fn get(&self, key: &[u8]) -> Option<Option<Value>> {
        self.newest_first().find_map(|table| table.read().entries.get_at(key, NEWEST).map(|v| v.cloned()))
    }
}

/// The lsns of the live snapshots, each with how many snapshots share it.
#[derive(Debug, Default)]
pub(crate) struct Snapshots {
    live: Mutex<BTreeMap<u64, usize>>,
}

impl Snapshots {
    /// The newest live snapshot's lsn. Called under the active table's write lock.
    pub fn newest(&self) -> Option<u64> {
        self.live.lock().last_key_value().map(|(lsn, _)| *lsn)
    }

    /// Registers a snapshot at `lsn` until the registration is dropped. Called under the
    /// active table's read lock, `lsn` its `last_lsn`.
    pub fn register(self: &Arc<Snapshots>, lsn: u64) -> Registration {
        *self.live.lock().entry(lsn).or_insert(0) += 1;
        Registration { snapshots: self.clone(), lsn }
    }
}

/// A live snapshot; dropped, its lsn no longer keeps versions.
#[derive(Debug)]
pub(crate) struct Registration {
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
        }
    }
}
