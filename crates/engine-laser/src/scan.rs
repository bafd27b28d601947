//! Range scans of a set of columns, point-in-time (paper §4.3's level- and column-merging
//! iterators). A scan takes a `View` when it starts — the tables and the version as of the
//! last applied write, its lsn registered so the active table keeps the versions it reads — and
//! merges, newest first: the active table (copied a window at a time), the finalized tables,
//! level 0's runs, and per deeper level one stitched source that joins the level's groups
//! holding the scan's columns by key (`Stitch`, the column-merging iterator). Each source gives
//! fragments over the scan's columns; the kit's merge resolves them per key (`CellsMerge`).

use std::iter::Peekable;
use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use self_cell::self_cell;
use strata_core::{borrow_bound, Direction, Error, Key, KeyRange, Result, Value};
use strata_kit::sorted_run::{table_source, Entry, EntryKind, MergeIter, MergeOutput, RunIter, SourceIter};
use strata_kit::tables::{ActiveWindows, TablesView};

use crate::cells::{entry_of_stored, Cells};
use crate::compact::restrict_source;
use crate::engine::Inner;
use crate::layout::{ColumnSet, Columns};
use crate::version::{Run, Version};

/// Records returned before the engine's state is checked again: a scan begun before a failed
/// write stops with the poison.
const CHECK_EVERY: usize = 256;

/// The store as of one write: the tables then (kit `TablesView`), and the version then.
pub(crate) struct View {
    tables: TablesView,
    version: Arc<Version>,
}

impl Inner {
    /// The store as of now: under the tables' read lock (the version then holds exactly the
    /// tables that left the list), the active table's last lsn registered (`Tables::view`).
    fn view(&self) -> Result<View> {
        let tables = self.tables.read();
        Ok(View { tables: tables.view(&self.snapshots), version: self.read_version()? })
    }
}

/// What a scan's merge borrows.
pub(crate) struct Owner {
    pub view: View,
    pub range: KeyRange,
    /// The scan's columns.
    pub set: ColumnSet,
    pub all: ColumnSet,
    pub columns: Columns,
}

impl Owner {
    /// A scan of `set` over `range` in the store as of now (`Inner::view`).
    pub(crate) fn of(inner: &Inner, range: KeyRange, set: ColumnSet) -> Result<Owner> {
        Ok(Owner { view: inner.view()?, range, set, all: inner.all.clone(), columns: inner.columns.clone() })
    }
}

self_cell!(
    struct Merged {
        owner: Owner,
        #[not_covariant]
        dependent: MergeIter,
    }
);

/// A source's entries: a MemTable's (copied out), or a run's (borrowable, `RunIter::head`).
pub(crate) enum Entries<'a> {
    Memory(SourceIter<'a>),
    Run(RunIter),
}

/// One source of a scan, as stored: its entries over its columns `set`, from `file` (for
/// errors), and the level below 0 it belongs to (`None`: a MemTable or a level-0 run, whole rows).
pub(crate) struct RawSource<'a> {
    pub entries: Entries<'a>,
    pub set: ColumnSet,
    pub file: String,
    pub level: Option<usize>,
}

/// Every source of the view over the scan's range that holds any of its columns, newest first:
/// the active table, the finalized tables, level 0's runs, then each deeper level's groups
/// that intersect the scan's columns and have a run.
pub(crate) fn raw_sources<'a>(o: &'a Owner, direction: Direction) -> Vec<RawSource<'a>> {
    let (lower, upper) = (borrow_bound(&o.range.start), borrow_bound(&o.range.end));
    fn stored(all: ColumnSet) -> impl Fn((Key, Option<Value>)) -> Result<(Key, Entry)> + Send {
        move |(key, value)| {
            entry_of_stored(&all, value.as_deref())
                .map(|entry| (key, entry))
                .map_err(|e| Error::corruption("laser memtable", 0, e))
        }
    }
    let memory = |entries: SourceIter<'a>| RawSource {
        entries: Entries::Memory(entries),
        set: o.all.clone(),
        file: "laser memtable".into(),
        level: None,
    };
    let mut out = Vec::new();
    let windows =
        ActiveWindows::new(o.view.tables.active.clone(), o.view.tables.lsn, o.range.clone(), direction);
    out.push(memory(Box::new(windows.map(stored(o.all.clone())))));
    for frozen in &o.view.tables.finalized {
        let entries = table_source(frozen.entries.range_at((lower, upper), o.view.tables.lsn), direction);
        let to_entry = stored(o.all.clone());
        let entries = entries.map(move |item| {
            let (key, entry) = item?;
            let value = (entry.kind != EntryKind::Delete).then_some(entry.value);
            to_entry((key, value))
        });
        out.push(memory(Box::new(entries)));
    }
    let (start, end) = (o.range.start.clone(), o.range.end.clone());
    let run_source = |run: &Run, set: &ColumnSet, level: Option<usize>| RawSource {
        entries: Entries::Run(run.reader.iter(start.clone(), end.clone(), direction)),
        set: set.clone(),
        file: run.file_name(),
        level,
    };
    for run in &o.view.version.level0 {
        out.push(run_source(run, &o.all, None));
    }
    for (level, groups) in o.view.version.levels.iter().enumerate() {
        for group in groups.iter().filter(|g| g.set.intersects(&o.set)) {
            if let Some(run) = &group.run {
                out.push(run_source(run, &group.set, Some(level + 1)));
            }
        }
    }
    out
}

/// Every source of the view over the scan's range and columns, newest first, each restricted
/// to the scan's columns; a deeper level's groups joined into one (`Stitch`) unless one group
/// holds them all.
fn sources<'a>(o: &'a Owner, direction: Direction) -> Vec<SourceIter<'a>> {
    let mut out: Vec<SourceIter<'a>> = Vec::new();
    let mut level_parts: Vec<(SourceIter<'a>, ColumnSet)> = Vec::new();
    let mut raw = raw_sources(o, direction).into_iter().peekable();
    while let Some(source) = raw.next() {
        let entries: SourceIter<'a> = match source.entries {
            Entries::Memory(entries) => entries,
            Entries::Run(entries) => Box::new(entries),
        };
        let Some(level) = source.level else {
            out.push(restrict_source(entries, source.set.clone(), o.set.clone(), source.file));
            continue;
        };
        let part = source.set.intersection(&o.set, &o.columns);
        level_parts.push((restrict_source(entries, source.set, part.clone(), source.file), part));
        if raw.peek().is_some_and(|next| next.level == Some(level)) {
            continue;
        }
        if level_parts.len() == 1 && level_parts[0].1 == o.set {
            out.extend(level_parts.pop().map(|(part, _)| part));
        } else {
            out.push(Box::new(Stitch::new(std::mem::take(&mut level_parts), o.set.clone(), direction)));
        }
    }
    out
}

/// One level's groups joined by key (the column-merging iterator): for each key any of them
/// holds, one fragment over the scan's columns. Groups are disjoint, so no column comes twice.
pub(crate) struct Stitch<'a> {
    parts: Vec<(Peekable<SourceIter<'a>>, ColumnSet)>,
    /// Per part: where each of its columns' bytes go in a row of `set` (from, to).
    placement: Vec<Vec<(Range<usize>, Range<usize>)>>,
    /// The parts hold every column of `set` (a group without a run leaves some out).
    covers: bool,
    set: ColumnSet,
    direction: Direction,
}

impl<'a> Stitch<'a> {
    /// `parts` (each a source over its columns, disjoint, within `set`), joined into fragments
    /// over `set`.
    pub fn new(parts: Vec<(SourceIter<'a>, ColumnSet)>, set: ColumnSet, direction: Direction) -> Stitch<'a> {
        let placement = parts
            .iter()
            .map(|(_, part)| {
                (0..part.len())
                    .map(|j| (part.range(j), set.range(set.position(part.ids()[j]).unwrap_or_default())))
                    .collect()
            })
            .collect();
        let covers = parts.iter().map(|(_, part)| part.len()).sum::<usize>() == set.len();
        Stitch {
            parts: parts.into_iter().map(|(p, s)| (p.peekable(), s)).collect(),
            placement,
            covers,
            set,
            direction,
        }
    }

    /// The part whose head comes first in the scan's direction (an error first of all).
    fn first_part(&mut self) -> Option<usize> {
        let direction = self.direction;
        let mut best: Option<(usize, Key)> = None;
        for (i, (part, _)) in self.parts.iter_mut().enumerate() {
            match part.peek() {
                None => {}
                Some(Err(_)) => return Some(i),
                Some(Ok((key, _))) => {
                    let earlier = best.as_ref().is_none_or(|(_, b)| match direction {
                        Direction::Forward => key < b,
                        Direction::Reverse => key > b,
                    });
                    if earlier {
                        best = Some((i, key.clone()));
                    }
                }
            }
        }
        best.map(|(i, _)| i)
    }
}

impl Iterator for Stitch<'_> {
    type Item = Result<(Key, Entry)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let first = self.first_part()?;
            let (key, entry) = match self.parts[first].0.next()? {
                Ok(item) => item,
                Err(e) => return Some(Err(e)),
            };
            let mut found = vec![(first, entry)];
            for i in 0..self.parts.len() {
                if i != first {
                    if let Some(Ok((_, entry))) =
                        self.parts[i].0.next_if(|h| matches!(h, Ok((k, _)) if *k == key))
                    {
                        found.push((i, entry));
                    }
                }
            }
            // Every column of the set in whole rows of its groups: place them, no cells.
            if self.covers
                && found.len() == self.parts.len()
                && found.iter().all(|(_, e)| e.kind == EntryKind::Put)
            {
                let mut row = vec![0u8; self.set.row_bytes()];
                for (i, entry) in &found {
                    for (from, to) in &self.placement[*i] {
                        row[to.clone()].copy_from_slice(&entry.value[from.clone()]);
                    }
                }
                return Some(Ok((key, Entry::put(row))));
            }
            let mut cells = Cells::absent(&self.set);
            for (i, entry) in &found {
                let part_set = &self.parts[*i].1;
                match Cells::of_entry(part_set, entry) {
                    Ok(part) => cells.fill_from(&self.set, &part, part_set),
                    Err(e) => return Some(Err(Error::corruption("laser level", 0, e))),
                }
            }
            if let Some(entry) = cells.into_entry(&self.set) {
                return Some(Ok((key, entry)));
            }
        }
    }
}

/// See the module documentation: `(key, the row of the scan's columns)` in scan order.
pub(crate) struct LaserScan {
    inner: Arc<Inner>,
    merged: Merged,
    set: ColumnSet,
    returned: usize,
    bytes_returned: u64,
    done: bool,
}

impl LaserScan {
    pub(crate) fn new(
        inner: Arc<Inner>,
        range: KeyRange,
        direction: Direction,
        set: ColumnSet,
    ) -> Result<LaserScan> {
        let done = range.is_empty();
        let owner = Owner::of(&inner, range, set.clone())?;
        let variable = inner.all.is_variable();
        let merged = Merged::new(owner, |o| {
            let merge = MergeIter::new(sources(o, direction), direction, MergeOutput::Visible);
            match variable {
                true => merge,
                false => merge.with_operator(Arc::new(crate::cells::CellsMerge { set: o.set.clone() })),
            }
        });
        Ok(LaserScan { inner, merged, set, returned: 0, bytes_returned: 0, done })
    }
}

impl Iterator for LaserScan {
    type Item = Result<(Key, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            if self.returned % CHECK_EVERY == CHECK_EVERY - 1 {
                if let Err(e) = self.inner.writes.check_usable() {
                    self.done = true;
                    return Some(Err(e));
                }
            }
            let next = self.merged.with_dependent_mut(|_, merge| merge.next());
            let (key, row) =
                match next.map(|item| item.and_then(|(key, entry)| Ok((key, visible(&self.set, entry)?)))) {
                    Some(Ok((key, Some(row)))) => (key, row),
                    Some(Ok((_, None))) => continue,
                    Some(Err(e)) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                    None => {
                        self.done = true;
                        return None;
                    }
                };
            self.returned += 1;
            self.bytes_returned += (key.len() + row.len()) as u64;
            return Some(Ok((key, row)));
        }
        None
    }
}

/// The row a resolved entry shows: a put's value; a partial row (columns deleted beside present
/// ones, cells.rs) its present columns with zeros for the rest, or nothing when none is present.
fn visible(set: &ColumnSet, entry: Entry) -> Result<Option<Value>> {
    if entry.kind != EntryKind::Merge {
        return Ok(Some(entry.value));
    }
    let cells = Cells::of_entry(set, &entry).map_err(|e| Error::corruption("laser scan", 0, e))?;
    Ok(cells.any_present().then_some(cells.row))
}

impl Drop for LaserScan {
    fn drop(&mut self) {
        self.inner.counters.user_bytes_read.fetch_add(self.bytes_returned, Relaxed);
        self.inner.profile.scan(&self.set, self.returned as u64);
    }
}
