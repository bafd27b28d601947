//! Scans that hand out column vectors (`ColumnarTable::scan_batches`): the same point-in-time
//! view and sources as a row scan (scan.rs), merged without building rows. Each source is a
//! cursor that lends its head entry (a run's straight from its decoded block); per key the
//! newest source that knows a column decides it, and the scan's columns go from the entry's
//! bytes into the batch's vectors. A level's groups are separate sources here (disjoint, so
//! no key's column is decided twice at one level), which stitches them with no row built.
//!
//! Resolution matches the row scan's (cells.rs): a put decides its columns present, a delete
//! decides them deleted, a partial row the columns of its masks; a key shows when one of the
//! scan's columns is present, the deleted or unknown ones reading as zeros.

use std::cmp::Ordering;
use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use self_cell::self_cell;
use strata_core::{ColumnBatch, Direction, Error, Key, KeyRange, Result};
use strata_kit::sorted_run::{Entry, EntryKind, RunIter, SourceIter};

use crate::cells::{Cell, Cells};
use crate::engine::Inner;
use crate::layout::ColumnSet;
use crate::scan::{raw_sources, Entries, Owner};

/// A source's entries, lending the head.
enum Cursor<'a> {
    Memory { entries: SourceIter<'a>, head: Option<(Key, Entry)> },
    Run(RunIter),
}

impl Cursor<'_> {
    /// Stands on the next entry: `true` when there is one (`head` lends it).
    #[inline]
    fn settle(&mut self) -> Result<bool> {
        match self {
            Cursor::Run(run) => run.settle(),
            Cursor::Memory { head: Some(_), .. } => Ok(true),
            Cursor::Memory { entries, head } => match entries.next() {
                Some(Ok(item)) => {
                    *head = Some(item);
                    Ok(true)
                }
                Some(Err(e)) => Err(e),
                None => Ok(false),
            },
        }
    }

    #[inline]
    fn head(&self) -> (&[u8], EntryKind, &[u8]) {
        match self {
            Cursor::Run(run) => run.head(),
            Cursor::Memory { head: Some((key, entry)), .. } => (key, entry.kind, &entry.value),
            Cursor::Memory { head: None, .. } => unreachable!("head of an unsettled cursor"),
        }
    }

    #[inline]
    fn advance(&mut self) {
        match self {
            Cursor::Run(run) => run.advance(),
            Cursor::Memory { head, .. } => *head = None,
        }
    }
}

/// One source of the merge, standing on its head.
struct Source<'a> {
    cursor: Cursor<'a>,
    /// The source's columns.
    set: ColumnSet,
    /// Per scan column it holds: the column's position in the scan's set, its position in
    /// the source's set, and its bytes in a whole row of the source's set.
    place: Vec<(usize, usize, Range<usize>)>,
    /// It holds every column of the scan.
    covers: bool,
    file: String,
    /// The head key's first 8 bytes, big-endian, zero-padded: ordered as the keys are
    /// (a key shorter than another it prefixes pads lower), so most comparisons take one.
    prefix: u64,
}

fn prefix_of(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = key.len().min(8);
    bytes[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(bytes)
}

impl Source<'_> {
    fn key(&self) -> &[u8] {
        self.cursor.head().0
    }

    /// Whether this head comes before `other`'s in the scan's direction (`Equal`: same key).
    fn order(&self, other: &Source<'_>, direction: Direction) -> Ordering {
        let order = self.prefix.cmp(&other.prefix).then_with(|| self.key().cmp(other.key()));
        match direction {
            Direction::Forward => order,
            Direction::Reverse => order.reverse(),
        }
    }
}

/// The merge: live sources newest first, and per key the scan's columns' states.
pub(crate) struct VectorMerge<'a> {
    sources: Vec<Source<'a>>,
    direction: Direction,
    /// The scan's columns.
    set: ColumnSet,
    /// Sources standing on the current key, newest first.
    at: Vec<usize>,
    /// The source whose head comes first among the others (`None`: no other has one).
    runner_up: Option<usize>,
    states: Vec<Cell>,
    row: Vec<u8>,
    started: bool,
}

impl<'a> VectorMerge<'a> {
    fn new(owner: &'a Owner, direction: Direction) -> VectorMerge<'a> {
        let set = owner.set.clone();
        let sources = raw_sources(owner, direction)
            .into_iter()
            .map(|raw| {
                let place: Vec<(usize, usize, Range<usize>)> = (0..set.len())
                    .filter_map(|j| raw.set.position(set.ids()[j]).map(|k| (j, k, raw.set.range(k))))
                    .collect();
                let cursor = match raw.entries {
                    Entries::Memory(entries) => Cursor::Memory { entries, head: None },
                    Entries::Run(run) => Cursor::Run(run),
                };
                let covers = place.len() == set.len();
                Source { cursor, set: raw.set, place, covers, file: raw.file, prefix: 0 }
            })
            .collect();
        let (states, row) = (vec![Cell::Absent; set.len()], vec![0; set.row_bytes()]);
        VectorMerge { sources, direction, set, at: Vec::new(), runner_up: None, states, row, started: false }
    }

    /// Settles source `i` on its next entry, dropping it at its end.
    fn settle(&mut self, i: usize) -> Result<bool> {
        if self.sources[i].cursor.settle()? {
            let prefix = prefix_of(self.sources[i].key());
            self.sources[i].prefix = prefix;
            return Ok(true);
        }
        self.sources.remove(i);
        Ok(false)
    }

    /// Moves the sources standing on the last key past it, then finds the next key's sources
    /// (`at`); `false` when every source has ended. When the sources that stood there stand
    /// together again before the runner-up's head (`first_again`), they are first with a
    /// comparison each (a merge takes stretches from one source, or from one level's groups);
    /// otherwise every head is compared.
    fn step(&mut self) -> Result<bool> {
        let count = self.sources.len();
        if !self.started {
            self.started = true;
            for i in (0..count).rev() {
                self.settle(i)?;
            }
        } else {
            for n in (0..self.at.len()).rev() {
                let i = self.at[n];
                self.sources[i].cursor.advance();
                self.settle(i)?;
            }
            if self.sources.len() == count && self.first_again() {
                return Ok(true);
            }
        }
        self.compare_all();
        Ok(!self.at.is_empty())
    }

    /// Whether the sources that stood on the last key (none having ended) stand together on
    /// the next one, before the runner-up's head: then they come first again (a level's column
    /// groups usually hold the same keys), after one comparison each.
    fn first_again(&self) -> bool {
        let direction = self.direction;
        let Some((&first, rest)) = self.at.split_first() else { return false };
        let head = &self.sources[first];
        rest.iter().all(|&i| self.sources[i].order(head, direction).is_eq())
            && self.runner_up.is_none_or(|r| head.order(&self.sources[r], direction).is_lt())
    }

    /// `at`: the sources whose head comes first; `runner_up`: the first of the others.
    fn compare_all(&mut self) {
        let direction = self.direction;
        self.at.clear();
        self.runner_up = None;
        for i in 0..self.sources.len() {
            match self.at.first().map(|&f| self.sources[i].order(&self.sources[f], direction)) {
                None | Some(Ordering::Less) => {
                    self.at.clear();
                    self.at.push(i);
                }
                Some(Ordering::Equal) => self.at.push(i),
                Some(Ordering::Greater) => {}
            }
        }
        for i in 0..self.sources.len() {
            if self.at.contains(&i) {
                continue;
            }
            if self.runner_up.is_none_or(|r| self.sources[i].order(&self.sources[r], direction).is_lt()) {
                self.runner_up = Some(i);
            }
        }
    }

    /// Appends the current key's row to `batch` when one of the scan's columns is present.
    fn emit(&mut self, batch: &mut ColumnBatch) -> Result<()> {
        let newest = &self.sources[self.at[0]];
        let (key, kind, value) = newest.cursor.head();
        if newest.covers {
            match kind {
                EntryKind::Put if value.len() == newest.set.row_bytes() => {
                    batch.push_key(key);
                    for (j, _, range) in &newest.place {
                        push_value(batch.vector_mut(*j), &value[range.clone()]);
                    }
                    return Ok(());
                }
                EntryKind::Delete => return Ok(()),
                _ => {}
            }
        }
        self.resolve()?;
        if self.states.contains(&Cell::Present) {
            let key = self.sources[self.at[0]].key();
            batch.push_key(key);
            for j in 0..self.set.len() {
                batch.push_value(j, &self.row[self.set.range(j)]);
            }
        }
        Ok(())
    }

    /// Decides each scan column from the newest source at the key that knows it; `row` holds
    /// the present ones' values, zeros elsewhere.
    fn resolve(&mut self) -> Result<()> {
        self.states.fill(Cell::Absent);
        self.row.fill(0);
        let mut unknown = self.set.len();
        for &i in &self.at {
            let source = &self.sources[i];
            let (_, kind, value) = source.cursor.head();
            let corrupt = |e: String| Error::corruption(source.file.as_str(), 0, e);
            let cells = match kind {
                EntryKind::Put if value.len() == source.set.row_bytes() => None,
                EntryKind::Delete => None,
                _ => Some(
                    Cells::of_entry(&source.set, &Entry { kind, value: value.to_vec() }).map_err(corrupt)?,
                ),
            };
            for (j, k, range) in &source.place {
                if self.states[*j] != Cell::Absent {
                    continue;
                }
                let state = match (&cells, kind) {
                    (Some(cells), _) => cells.states[*k],
                    (None, EntryKind::Delete) => Cell::Deleted,
                    (None, _) => Cell::Present,
                };
                if state == Cell::Present {
                    let from = cells.as_ref().map_or(value, |c| c.row.as_slice());
                    self.row[self.set.range(*j)].copy_from_slice(&from[range.clone()]);
                }
                if state != Cell::Absent {
                    self.states[*j] = state;
                    unknown -= 1;
                }
            }
            if unknown == 0 {
                break;
            }
        }
        Ok(())
    }
}

/// Appends one column value: the common widths as fixed-size copies, not a `memcpy` call each.
#[inline]
fn push_value(vector: &mut Vec<u8>, value: &[u8]) {
    match value.len() {
        4 => vector.extend_from_slice(&<[u8; 4]>::try_from(value).unwrap_or_default()),
        8 => vector.extend_from_slice(&<[u8; 8]>::try_from(value).unwrap_or_default()),
        _ => vector.extend_from_slice(value),
    }
}

self_cell!(
    struct Merge {
        owner: Owner,
        #[not_covariant]
        dependent: VectorMerge,
    }
);

/// A batch scan (module documentation): batches of at most `rows` rows.
pub(crate) struct LaserBatches {
    inner: Arc<Inner>,
    merge: Merge,
    /// An empty batch of the scan's vectors (one per column of the set; the projection maps
    /// onto them): each batch is one like it, with room for `rows` rows.
    template: ColumnBatch,
    rows: usize,
    returned: u64,
    bytes_returned: u64,
    done: bool,
}

impl LaserBatches {
    pub(crate) fn new(
        inner: Arc<Inner>,
        range: KeyRange,
        direction: Direction,
        set: ColumnSet,
        template: ColumnBatch,
        rows: usize,
    ) -> Result<LaserBatches> {
        let done = range.is_empty();
        let owner = Owner::of(&inner, range, set)?;
        let merge = Merge::new(owner, |o| VectorMerge::new(o, direction));
        Ok(LaserBatches { inner, merge, template, rows: rows.max(1), returned: 0, bytes_returned: 0, done })
    }

    fn fill(&mut self) -> Result<ColumnBatch> {
        self.inner.writes.check_usable()?;
        let mut batch = self.template.empty_like(self.rows);
        let rows = self.rows;
        let ended = self.merge.with_dependent_mut(|_, merge| -> Result<bool> {
            while batch.len() < rows {
                if !merge.step()? {
                    return Ok(true);
                }
                merge.emit(&mut batch)?;
            }
            Ok(false)
        })?;
        self.done = ended;
        Ok(batch)
    }
}

impl Iterator for LaserBatches {
    type Item = Result<ColumnBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.fill() {
            Ok(batch) if batch.is_empty() => None,
            Ok(batch) => {
                self.returned += batch.len() as u64;
                let bytes = batch.key_bytes() + batch.len() * self.merge.borrow_owner().set.row_bytes();
                self.bytes_returned += bytes as u64;
                Some(Ok(batch))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl Drop for LaserBatches {
    fn drop(&mut self) {
        self.inner.counters.user_bytes_read.fetch_add(self.bytes_returned, Relaxed);
        self.inner.profile.scan(&self.merge.borrow_owner().set, self.returned);
    }
}
