//! Point reads (paper §4.3): the MemTables newest first, level 0's runs newest first, then each
//! level's column groups that hold a column still unknown; a read stops once every column it
//! asked for is known (present or deleted). A key-value store's one column is known at the
//! first entry found.

use std::sync::atomic::Ordering::Relaxed;

use strata_core::{Error, Result, Value};
use strata_kit::logged_writes::{Current, ReadCurrent};
use strata_kit::sorted_run::{Entry, EntryKind};
use strata_kit::tables::Tables;
use strata_kit::versioned_memtable::NEWEST;

use crate::cells::{entry_of_stored, Cells};
use crate::engine::Inner;
use crate::layout::ColumnSet;
use crate::version::Version;

/// What a read knows so far of a key.
pub(crate) enum Known {
    /// A key-value store: the newest entry found, if any.
    Value(Option<Entry>),
    /// A table: the columns asked for.
    Cells(Cells),
}

impl Known {
    fn new(set: &ColumnSet) -> Known {
        if set.is_variable() {
            Known::Value(None)
        } else {
            Known::Cells(Cells::absent(set))
        }
    }

    fn is_complete(&self) -> bool {
        match self {
            Known::Value(found) => found.is_some(),
            Known::Cells(cells) => cells.is_complete(),
        }
    }

    /// Takes what `entry` (over `from`) says of the columns still unknown.
    fn take(&mut self, set: &ColumnSet, entry: Entry, from: &ColumnSet, file: &str) -> Result<()> {
        match self {
            Known::Value(found) => {
                if entry.kind == EntryKind::Merge {
                    return Err(Error::corruption(file, 0, "a partial row in a key-value store"));
                }
                found.get_or_insert(entry);
            }
            Known::Cells(cells) => {
                let older = Cells::of_entry(from, &entry).map_err(|e| Error::corruption(file, 0, e))?;
                cells.fill_from(set, &older, from);
            }
        }
        Ok(())
    }

    /// The value found: a key-value store's value, or a table's row of the set (`None`: no
    /// column present).
    pub fn into_value(self) -> Option<Value> {
        match self {
            Known::Value(found) => found.filter(|e| e.kind == EntryKind::Put).map(|e| e.value),
            Known::Cells(cells) => cells.any_present().then_some(cells.row),
        }
    }
}

impl Inner {
    /// The columns of `set` of `key`: the row of the set (a key-value store's value), `None`
    /// when no column of it is present.
    pub(crate) fn read(&self, key: &[u8], set: &ColumnSet) -> Result<Option<Value>> {
        let mut known = Known::new(set);
        self.read_tables(&self.tables.read(), key, set, &mut known)?;
        let mut level = 0;
        if !known.is_complete() {
            level = self.read_disk(&*self.read_version()?, key, set, &mut known)?;
        }
        self.profile.read(level, set);
        Ok(known.into_value())
    }

    /// The MemTables, newest first, into `known`.
    pub(crate) fn read_tables(
        &self,
        tables: &Tables,
        key: &[u8],
        set: &ColumnSet,
        known: &mut Known,
    ) -> Result<()> {
        let active = tables.active.read().entries.get_at(key, NEWEST).map(|v| v.cloned());
        let finalized =
            tables.finalized.iter().rev().map(|f| f.entries.get_at(key, NEWEST).map(|v| v.cloned()));
        for found in std::iter::once(active).chain(finalized) {
            if known.is_complete() {
                break;
            }
            if let Some(value) = found {
                let entry = entry_of_stored(&self.all, value.as_deref())
                    .map_err(|e| Error::corruption("laser memtable", 0, e))?;
                known.take(set, entry, &self.all, "laser memtable")?;
            }
        }
        Ok(())
    }

    /// Level 0's runs newest first, then every level's groups holding a column still unknown.
    /// Returns the deepest level it read (0: level 0 or none).
    pub(crate) fn read_disk(
        &self,
        version: &Version,
        key: &[u8],
        set: &ColumnSet,
        known: &mut Known,
    ) -> Result<usize> {
        for run in &version.level0 {
            if known.is_complete() {
                return Ok(0);
            }
            if let Some(entry) = run.reader.get(key)? {
                known.take(set, entry, &self.all, &run.file_name())?;
            }
        }
        let mut deepest = 0;
        for (i, groups) in version.levels.iter().enumerate() {
            for group in groups {
                let Some(run) = &group.run else { continue };
                if known.is_complete() {
                    return Ok(deepest);
                }
                if !still_needed(known, set, &group.set) {
                    continue;
                }
                deepest = i + 1;
                if let Some(entry) = run.reader.get(key)? {
                    known.take(set, entry, &group.set, &run.file_name())?;
                }
            }
        }
        Ok(deepest)
    }
}

/// Whether `group` holds a column of `set` that `known` does not know yet.
fn still_needed(known: &Known, set: &ColumnSet, group: &ColumnSet) -> bool {
    match known {
        Known::Value(found) => found.is_none(),
        Known::Cells(cells) => set
            .ids()
            .iter()
            .zip(&cells.states)
            .any(|(id, state)| *state == crate::cells::Cell::Absent && group.position(*id).is_some()),
    }
}

/// An rmw's read of `set`: the disk read ahead with no lock held (`prepare`), the MemTables at
/// `current`; a finalized table that reached level 0 in between makes the disk read stale.
pub(crate) struct LaserRead<'a> {
    pub inner: &'a Inner,
    pub key: &'a [u8],
    pub set: &'a ColumnSet,
    disk: Option<(u64, Option<Known>)>,
    /// The deepest level the disk read reached (the level an update is served at).
    pub level: usize,
}

impl<'a> LaserRead<'a> {
    pub fn new(inner: &'a Inner, key: &'a [u8], set: &'a ColumnSet) -> LaserRead<'a> {
        LaserRead { inner, key, set, disk: None, level: 0 }
    }
}

impl ReadCurrent for LaserRead<'_> {
    fn prepare(&mut self) -> Result<()> {
        let version_seen = self.inner.disk_version.load(Relaxed);
        let mut known = Known::new(self.set);
        self.level = self.inner.read_disk(&*self.inner.read_version()?, self.key, self.set, &mut known)?;
        self.disk = Some((version_seen, Some(known)));
        Ok(())
    }

    fn current(&mut self) -> Current {
        let tables = self.inner.tables.read();
        let mut known = Known::new(self.set);
        if self.inner.read_tables(&tables, self.key, self.set, &mut known).is_err() {
            return Current::Stale; // `prepare` reports the poison or damage on the next round
        }
        if !known.is_complete() {
            match &mut self.disk {
                Some((seen, disk)) if *seen == self.inner.disk_version.load(Relaxed) => {
                    let Some(disk) = disk.take() else { return Current::Stale };
                    fill_from_disk(&mut known, disk, self.set);
                }
                _ => return Current::Stale,
            }
        }
        Current::Value(known.into_value())
    }
}

/// `known` (from the MemTables) completed by what the disk read found.
fn fill_from_disk(known: &mut Known, disk: Known, set: &ColumnSet) {
    match (known, disk) {
        (Known::Value(found), Known::Value(older)) if found.is_none() => *found = older,
        (Known::Cells(cells), Known::Cells(older)) => cells.fill_from(set, &older, set),
        _ => {}
    }
}
