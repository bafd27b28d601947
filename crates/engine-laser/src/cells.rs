//! Row fragments over a set of columns (docs/format/laser.md, "Entries"): what one entry of a
//! MemTable, a row run or a column-group run says about each of its columns.
//!
//! An entry over a set S is a kit run entry: `Put` (every column of S: their values
//! concatenated in S's order), `Delete` (every column deleted; empty) or `Merge` (a partial
//! row: a present mask and a deleted mask of ⌈|S|/8⌉ bytes each, bit j for S's j-th column,
//! then the present columns' values in S's order). Stored partial rows (updates of some
//! columns) have no deleted bit set; reads and scans use the deleted mask when they stitch a
//! level's groups, where one group's columns may be deleted and another's newer.
//!
//! Per column, the newest entry that has it (present or deleted) is its state. A row is found
//! when one of the columns read is present; columns deleted beside present ones read as zeros
//! (the newest states of a row's columns agree — a partial update needs the row, and a whole
//! row or a delete covers every column — but a level's groups, compacted at different times,
//! may hold a mix that newer levels shadow: merges keep such mixes as partial rows).
//!
//! The key-value store's single column has any width and only `Put` and `Delete` entries.

use strata_core::Result;
use strata_kit::sorted_run::{Entry, EntryKind, MergeOperator};

use crate::layout::ColumnSet;

/// One column's state in a fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    Absent,
    Present,
    Deleted,
}

/// A fragment over a column set, expanded: each column's state, and a whole row of the set
/// with the present columns' values (zeros elsewhere).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cells {
    pub states: Vec<Cell>,
    pub row: Vec<u8>,
}

fn mask_bytes(columns: usize) -> usize {
    columns.div_ceil(8)
}

fn bit(mask: &[u8], j: usize) -> bool {
    mask[j / 8] & (1 << (j % 8)) != 0
}

impl Cells {
    /// Nothing known of any column of `set`.
    pub fn absent(set: &ColumnSet) -> Cells {
        Cells { states: vec![Cell::Absent; set.len()], row: vec![0; set.row_bytes()] }
    }

    /// Decodes `entry` (over `set`); an entry that does not fit the set is an error string.
    pub fn of_entry(set: &ColumnSet, entry: &Entry) -> std::result::Result<Cells, String> {
        match entry.kind {
            EntryKind::Put if entry.value.len() == set.row_bytes() => {
                Ok(Cells { states: vec![Cell::Present; set.len()], row: entry.value.clone() })
            }
            EntryKind::Put => Err(format!(
                "a row of {} bytes where its columns take {}",
                entry.value.len(),
                set.row_bytes()
            )),
            EntryKind::Delete => {
                Ok(Cells { states: vec![Cell::Deleted; set.len()], row: vec![0; set.row_bytes()] })
            }
            EntryKind::Merge => Cells::of_partial(set, &entry.value),
        }
    }

    fn of_partial(set: &ColumnSet, bytes: &[u8]) -> std::result::Result<Cells, String> {
        let m = mask_bytes(set.len());
        if set.is_variable() || bytes.len() < 2 * m {
            return Err("a partial row too short for its masks (or in a key-value store)".into());
        }
        let (present, deleted, mut values) = (&bytes[..m], &bytes[m..2 * m], &bytes[2 * m..]);
        let mut cells = Cells::absent(set);
        for j in 0..set.len() {
            match (bit(present, j), bit(deleted, j)) {
                (true, true) => return Err(format!("column {} both present and deleted", set.ids()[j])),
                (true, false) => {
                    let range = set.range(j);
                    let value = values.get(..range.len()).ok_or("a partial row shorter than its columns")?;
                    cells.row[range.clone()].copy_from_slice(value);
                    values = &values[range.len()..];
                    cells.states[j] = Cell::Present;
                }
                (false, true) => cells.states[j] = Cell::Deleted,
                (false, false) => {}
            }
        }
        if !values.is_empty() {
            return Err("a partial row longer than its columns".into());
        }
        Ok(cells)
    }

    /// The partial-row encoding (module docs), whatever the states.
    pub fn encode_partial(&self, set: &ColumnSet) -> Vec<u8> {
        let m = mask_bytes(set.len());
        let mut out = vec![0u8; 2 * m];
        for (j, state) in self.states.iter().enumerate() {
            match state {
                Cell::Present => {
                    out[j / 8] |= 1 << (j % 8);
                    out.extend_from_slice(&self.row[set.range(j)]);
                }
                Cell::Deleted => out[m + j / 8] |= 1 << (j % 8),
                Cell::Absent => {}
            }
        }
        out
    }

    /// The entry these cells make: `Put` when every column is present, `Delete` when every one
    /// is deleted, `Merge` otherwise; `None` when nothing is known.
    pub fn into_entry(self, set: &ColumnSet) -> Option<Entry> {
        if self.states.iter().all(|s| *s == Cell::Present) {
            return Some(Entry::put(self.row));
        }
        if self.states.iter().all(|s| *s == Cell::Deleted) {
            return Some(Entry::delete());
        }
        if self.states.iter().all(|s| *s == Cell::Absent) {
            return None;
        }
        Some(Entry::merge(self.encode_partial(set)))
    }

    /// Whether every column's state is known.
    pub fn is_complete(&self) -> bool {
        !self.states.contains(&Cell::Absent)
    }

    pub fn any_present(&self) -> bool {
        self.states.contains(&Cell::Present)
    }

    /// Takes, for each column of `self` (over `set`) still absent, its state in `older` (over
    /// `older_set`, which may hold other columns too).
    pub fn fill_from(&mut self, set: &ColumnSet, older: &Cells, older_set: &ColumnSet) {
        for j in 0..set.len() {
            if self.states[j] != Cell::Absent {
                continue;
            }
            let Some(k) = older_set.position(set.ids()[j]) else { continue };
            self.states[j] = older.states[k];
            if older.states[k] == Cell::Present {
                self.row[set.range(j)].copy_from_slice(&older.row[older_set.range(k)]);
            }
        }
    }

    /// Columns still absent become deleted (nothing older holds them).
    pub fn absent_as_deleted(&mut self) {
        for s in &mut self.states {
            if *s == Cell::Absent {
                *s = Cell::Deleted;
            }
        }
    }
}

/// `entry` (over `from`) restricted to the columns of `to` (a subset of `from`, or sharing
/// some of its columns); `None` when it says nothing about them. Whole rows and deletes are
/// sliced without expanding.
pub fn restrict(
    entry: &Entry,
    from: &ColumnSet,
    to: &ColumnSet,
) -> std::result::Result<Option<Entry>, String> {
    if from == to {
        return Ok(Some(entry.clone()));
    }
    match entry.kind {
        EntryKind::Delete => Ok(Some(Entry::delete())),
        EntryKind::Put if entry.value.len() == from.row_bytes() && to.is_subset_of(from) => {
            let mut row = Vec::with_capacity(to.row_bytes());
            for &id in to.ids() {
                let j = from.position(id).unwrap_or_default();
                row.extend_from_slice(&entry.value[from.range(j)]);
            }
            Ok(Some(Entry::put(row)))
        }
        _ => {
            let cells = Cells::of_entry(from, entry)?;
            let mut out = Cells::absent(to);
            out.fill_from(to, &cells, from);
            Ok(out.into_entry(to))
        }
    }
}

/// Resolves partial rows over one column set for the kit's merge: the newer fragment's known
/// columns win. Applied to an older whole row (or nothing: its missing columns are then
/// deleted), a fragment gives a whole row when every column is present, a delete when none
/// is, and otherwise still a partial row that keeps which columns are deleted — never a whole
/// row whose deleted columns read as zeros, which a later restriction to those columns would
/// turn into a row of zeros.
pub struct CellsMerge {
    pub set: ColumnSet,
}

impl CellsMerge {
    fn cells(&self, entry: &Entry) -> Result<Cells> {
        Cells::of_entry(&self.set, entry).map_err(|e| strata_core::Error::corruption("laser merge", 0, e))
    }
}

impl MergeOperator for CellsMerge {
    fn combine(&self, _key: &[u8], older: &[u8], newer: &[u8]) -> Result<Vec<u8>> {
        let older = self.cells(&Entry::merge(older.to_vec()))?;
        let mut newer = self.cells(&Entry::merge(newer.to_vec()))?;
        newer.fill_from(&self.set, &older, &self.set);
        Ok(newer.encode_partial(&self.set))
    }

    fn apply(&self, _key: &[u8], base: Option<&[u8]>, operand: &[u8]) -> Result<Entry> {
        let mut cells = self.cells(&Entry::merge(operand.to_vec()))?;
        if let Some(row) = base {
            cells.fill_from(&self.set, &self.cells(&Entry::put(row.to_vec()))?, &self.set);
        }
        cells.absent_as_deleted();
        Ok(cells.into_entry(&self.set).unwrap_or_else(Entry::delete))
    }
}

/// A MemTable value of a table store (docs/format/laser.md, "MemTable and WAL values"): a tag
/// byte, 0 for a whole row or 1 for a partial row, then the entry's value over every column.
pub const WHOLE_ROW_TAG: u8 = 0;
pub const PARTIAL_ROW_TAG: u8 = 1;

/// What a MemTable value (`None`: a delete) is as an entry over every column: a key-value
/// store's value as it is, a table's by its tag.
pub fn entry_of_stored(all: &ColumnSet, value: Option<&[u8]>) -> std::result::Result<Entry, String> {
    let Some(value) = value else { return Ok(Entry::delete()) };
    if all.is_variable() {
        return Ok(Entry::put(value.to_vec()));
    }
    match value.split_first() {
        Some((&WHOLE_ROW_TAG, row)) => Ok(Entry::put(row.to_vec())),
        Some((&PARTIAL_ROW_TAG, partial)) => Ok(Entry::merge(partial.to_vec())),
        _ => Err("a stored value with no known tag".into()),
    }
}

/// The MemTable value of a table's whole row.
pub fn stored_row(row: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(row.len() + 1);
    out.push(WHOLE_ROW_TAG);
    out.extend_from_slice(row);
    out
}

/// The MemTable value of a partial row (`cells` over every column).
pub fn stored_partial(all: &ColumnSet, cells: &Cells) -> Vec<u8> {
    let mut out = vec![PARTIAL_ROW_TAG];
    out.extend(cells.encode_partial(all));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Columns;

    fn columns() -> Columns {
        Columns::Fixed(vec![2, 1, 3])
    }

    #[test]
    fn a_partial_row_round_trips_and_restricts() {
        let all = columns().all();
        let mut cells = Cells::absent(&all);
        cells.states[2] = Cell::Present;
        cells.row[3..6].copy_from_slice(b"xyz");
        let entry = cells.clone().into_entry(&all).unwrap();
        assert_eq!(entry.kind, EntryKind::Merge);
        assert_eq!(entry.value, [0b100, 0, b'x', b'y', b'z'], "present mask, deleted mask, values");
        assert_eq!(Cells::of_entry(&all, &entry).unwrap(), cells);
        let right = ColumnSet::new(vec![1, 2], &columns());
        let restricted = restrict(&entry, &all, &right).unwrap().unwrap();
        assert_eq!((restricted.kind, restricted.value), (EntryKind::Merge, vec![0b10, 0, b'x', b'y', b'z']));
        let left = ColumnSet::new(vec![0], &columns());
        assert_eq!(restrict(&entry, &all, &left).unwrap(), None, "says nothing of column 0");
        let row = Entry::put(b"aabccc".to_vec());
        assert_eq!(restrict(&row, &all, &right).unwrap(), Some(Entry::put(b"bccc".to_vec())));
    }

    /// Found by the table model test once layouts changed while it ran: a partial row applied
    /// over nothing became a whole row with zeros for its deleted columns, and a later
    /// compaction that kept only those columns wrote a row of zeros for a deleted key.
    #[test]
    fn a_row_whose_columns_are_partly_deleted_never_becomes_a_row_of_zeros() {
        let all = columns().all();
        let op = CellsMerge { set: all.clone() };
        let mut partial = Cells::absent(&all);
        partial.states[1] = Cell::Present;
        partial.row[all.range(1)].copy_from_slice(b"b");
        let applied = op.apply(b"k", None, &partial.encode_partial(&all)).unwrap();
        let left = ColumnSet::new(vec![0], &columns());
        let restricted = restrict(&applied, &all, &left).unwrap().unwrap();
        assert_eq!(restricted, Entry::delete(), "column 0 was never written: deleted, not zero");
    }

    #[test]
    fn damaged_fragments_are_errors_not_panics() {
        let all = columns().all();
        for bad in [
            vec![],
            vec![1],
            vec![1, 0],
            vec![1, 1, b'a', b'b'],
            vec![1, 0, b'a', b'b', b'c'],
            vec![4, 0, b'x'],
        ] {
            assert!(Cells::of_entry(&all, &Entry::merge(bad.clone())).is_err(), "{bad:?}");
        }
        assert!(Cells::of_entry(&all, &Entry::put(vec![0; 5])).is_err());
        assert!(entry_of_stored(&all, Some(&[7, 1])).is_err());
    }

    #[test]
    fn newer_columns_win_and_a_fragment_with_nothing_present_is_no_row() {
        let all = columns().all();
        let op = CellsMerge { set: all.clone() };
        let partial = |j: usize, v: &[u8]| {
            let mut c = Cells::absent(&all);
            c.states[j] = Cell::Present;
            c.row[all.range(j)].copy_from_slice(v);
            c.encode_partial(&all)
        };
        let combined = op.combine(b"k", &partial(0, b"aa"), &partial(2, b"zzz")).unwrap();
        assert_eq!(op.apply(b"k", Some(b"AABCCC"), &combined).unwrap(), Entry::put(b"aaBzzz".to_vec()));
        let mut deleted = Cells::absent(&all);
        deleted.states = vec![Cell::Deleted; 3];
        assert_eq!(op.apply(b"k", Some(b"AABCCC"), &deleted.encode_partial(&all)).unwrap(), Entry::delete());
        let over_nothing = op.apply(b"k", None, &partial(1, b"b")).unwrap();
        assert_eq!(over_nothing.kind, EntryKind::Merge, "a partial row over nothing stays partial");
        let cells = Cells::of_entry(&all, &over_nothing).unwrap();
        assert_eq!(cells.states, [Cell::Deleted, Cell::Present, Cell::Deleted]);
    }
}
