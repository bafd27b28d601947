//! Range scans, point-in-time: a scan takes a `View` when it starts (the tables and a copy of
//! the tree as of the last applied write, its lsn registered so the active table keeps the
//! versions it reads) and reads it in chunks (`strata_kit::chunked_range`). The view holds the
//! tables and the tree's runs until the scan is dropped. A chunk holds no lock while it reads
//! the device, and copies no more of the active table than the records it returns can reach:
//! 1. With no lock (the finalized tables' read locks, which no writer takes): the view's
//!    finalized tables and tree merged (deletes kept) until they give `reach` records (at
//!    first as many as the chunk wants): their span ends at the last key read.
//! 2. Under the view's active table's read lock: a copy of its entries as of the view's lsn
//!    within that span, at most `reach` (more are cut off: the span then ends at the last one
//!    copied).
//! 3. With no lock: the copy laid over step 1's entries within the span (`overlay`). Where
//!    deletes in the active table hid records and the span ended before the chunk was full, the
//!    chunk goes on past the span's end with twice the reach.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{borrow_bound, Direction, Key, KeyRange, Result, Value};
use strata_kit::chunked_range::{ChunkSizes, ChunkSource};
use strata_kit::sorted_run::{eager, table_source, Entry, EntryKind, LazyIter, MergeIter, MergeOutput};

use crate::engine::Inner;
use crate::tables::{Registration, Table};
use crate::tree::Tree;

/// Each chunk seeks every run on the path again (a block per level of every node, mostly cached
/// by then), and reads its entries plus the merge's look-ahead from the leaf, whatever the caller
/// takes of them. A first chunk of 32 with doubling refills (32, then 64) reads about 80 entries
/// for a YCSB E scan of 1–100 records against about 110 with a first chunk of 64 (whose 65- to
/// 100-record scans read 192): a leaf block fewer per scan. Measured: E 1.1–1.2× with 12% fewer
/// bytes read per scan (docs/benchmarks.md); 16 read a little less again for more re-seeks.
pub(crate) const CHUNK_SIZES: ChunkSizes = ChunkSizes { first_entries: 32, max_entries: 1024 };

/// The most records a part reaches for (a part after one whose records deletes hid reaches
/// twice as far as it, up to this).
const MAX_REACH: usize = 1 << 16;

/// Entries, and where their span ends short of the range's end.
type Spanned = (Vec<(Key, Entry)>, Option<Key>);

/// The store as of one write (`lsn`): the tables then, and the tree then.
pub(crate) struct View {
    lsn: u64,
    /// The table that was active: writes after `lsn` may still land in it (they are not seen).
    active: Arc<Table>,
    /// Newest first.
    finalized: Vec<Arc<Table>>,
    tree: Tree,
    _registration: Registration,
}

/// A scan: the engine (for its state and counters) and the view it reads.
pub(crate) struct Scan {
    pub inner: Arc<Inner>,
    pub view: View,
}

/// What one part read: its records, and where its span ended short of the range's end.
struct Part {
    records: Vec<(Key, Value)>,
    span_end: Option<Key>,
}

/// `range` narrowed to end (in `direction`) at `end`, inclusive, when there is one.
fn bounds_until<'a>(
    range: &'a KeyRange,
    end: Option<&'a Key>,
    direction: Direction,
) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
    let (lower, upper) = (borrow_bound(&range.start), borrow_bound(&range.end));
    match (end, direction) {
        (None, _) => (lower, upper),
        (Some(end), Direction::Forward) => (lower, Bound::Included(end.as_slice())),
        (Some(end), Direction::Reverse) => (Bound::Included(end.as_slice()), upper),
    }
}

/// Whether `key` lies within the span ending at `end` (inclusive) in `direction`.
fn within(key: &[u8], end: Option<&Key>, direction: Direction) -> bool {
    match (end, direction) {
        (None, _) => true,
        (Some(end), Direction::Forward) => key <= end.as_slice(),
        (Some(end), Direction::Reverse) => key >= end.as_slice(),
    }
}

/// Step 4: the records of `newer` over `older` (both sorted in `direction`, a key's entry in
/// `newer` hiding its entry in `older`, deletes hiding the key), at most `limit` of them.
fn overlay(
    newer: Vec<(Key, Entry)>,
    older: Vec<(Key, Entry)>,
    direction: Direction,
    limit: usize,
) -> Vec<(Key, Value)> {
    let mut records = Vec::with_capacity(limit.min(newer.len() + older.len()));
    let (mut newer, mut older) = (newer.into_iter().peekable(), older.into_iter().peekable());
    while records.len() < limit {
        let order = match (newer.peek(), older.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((n, _)), Some((o, _))) => match direction {
                Direction::Forward => n.cmp(o),
                Direction::Reverse => o.cmp(n),
            },
        };
        if order == Ordering::Equal {
            older.next(); // hidden by the newer entry
        }
        let next = if order == Ordering::Greater { older.next() } else { newer.next() };
        if let Some((key, entry)) = next {
            if entry.kind == EntryKind::Put {
                records.push((key, entry.value));
            }
        }
    }
    records
}

/// `range` past `key` in `direction` (what is left after a part that ended at `key`).
fn past(range: &KeyRange, key: Key, direction: Direction) -> KeyRange {
    match direction {
        Direction::Forward => KeyRange { start: Bound::Excluded(key), end: range.end.clone() },
        Direction::Reverse => KeyRange { start: range.start.clone(), end: Bound::Excluded(key) },
    }
}

impl Inner {
    /// The store as of now: under the tables' read lock (the tree then holds exactly the
    /// tables that left the list), the active table's last lsn registered under its read lock
    /// (see `tables`).
    pub(crate) fn view(&self) -> Result<View> {
        let tables = self.tables.read();
        let (lsn, registration) = {
            let active = tables.active.read();
            (active.last_lsn, self.snapshots.register(active.last_lsn))
        };
        Ok(View {
            lsn,
            active: tables.active.clone(),
            finalized: tables.finalized.iter().rev().cloned().collect(),
            tree: self.read_tree()?,
            _registration: registration,
        })
    }
}

impl View {
    /// Step 1: entries (deletes kept) until `records` puts or the range's end, and the span's
    /// end (`None`: the range's end).
    fn read_older(&self, range: &KeyRange, direction: Direction, records: usize) -> Result<Spanned> {
        let (lower, upper) = (borrow_bound(&range.start), borrow_bound(&range.end));
        let finalized: Vec<_> = self.finalized.iter().map(|t| t.read()).collect();
        let mut sources: Vec<LazyIter<'_>> = Vec::with_capacity(finalized.len() + 1);
        for table in &finalized {
            sources.push(eager(table_source(table.entries.range_at((lower, upper), self.lsn), direction)));
        }
        sources.push(self.tree.range(lower, upper, direction));
        let mut entries = Vec::new();
        let mut puts = 0;
        for item in MergeIter::lazy(sources, direction, MergeOutput::Above) {
            let (key, entry) = item?;
            puts += usize::from(entry.kind == EntryKind::Put);
            entries.push((key, entry));
            if puts == records {
                let end = entries.last().map(|(k, _)| k.clone());
                return Ok((entries, end));
            }
        }
        Ok((entries, None))
    }

    /// Steps 1–3 for at most `records` records, reading `reach` records of the older layers
    /// and at most `reach` entries of the active table.
    fn read_part(
        &self,
        range: &KeyRange,
        direction: Direction,
        records: usize,
        reach: usize,
    ) -> Result<Part> {
        let (older_entries, older_end) = self.read_older(range, direction, reach)?;
        let bounds = bounds_until(range, older_end.as_ref(), direction);
        let mut active: Vec<(Key, Entry)> = {
            let table = self.active.read();
            let entries = table_source(table.entries.range_at(bounds, self.lsn), direction);
            entries.take(reach + 1).collect::<Result<_>>()?
        };
        let span_end = if active.len() > reach {
            active.truncate(reach);
            active.last().map(|(k, _)| k.clone())
        } else {
            older_end
        };
        let older_entries: Vec<(Key, Entry)> =
            older_entries.into_iter().take_while(|(k, _)| within(k, span_end.as_ref(), direction)).collect();
        let records = overlay(active, older_entries, direction, records);
        Ok(Part { records, span_end })
    }
}

impl ChunkSource for Scan {
    fn check_readable(&self) -> Result<()> {
        self.inner.writes.check_usable()
    }

    /// Reads parts until `limit` records or the range's end: a part whose span ended before it
    /// was full (deletes in the active table hid records) is followed by one past its end that
    /// reaches twice as far.
    fn read_chunk(&self, range: &KeyRange, direction: Direction, limit: usize) -> Result<Vec<(Key, Value)>> {
        let mut chunk: Vec<(Key, Value)> = Vec::with_capacity(limit);
        let mut rest = range.clone();
        let mut reach = limit;
        loop {
            let want = limit - chunk.len();
            let part = self.view.read_part(&rest, direction, want, reach)?;
            reach = reach.saturating_mul(2).min(MAX_REACH);
            let short = part.records.len() < want;
            chunk.extend(part.records);
            match part.span_end {
                Some(end) if short => rest = past(&rest, end, direction),
                _ => break,
            }
            if rest.is_empty() {
                break;
            }
        }
        let bytes: usize = chunk.iter().map(|(k, v)| k.len() + v.len()).sum();
        self.inner.counters.user_bytes_read.fetch_add(bytes as u64, Relaxed);
        Ok(chunk)
    }
}
