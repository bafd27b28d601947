//! Range scans: the tables and the tree merged (`strata_kit::sorted_run::MergeIter`), read in
//! chunks (`strata_kit::chunked_range`). A chunk holds no lock while it reads the device, and
//! copies no more of the active table than the records it returns can reach:
//! 1. Under the tables' read lock: the finalized tables (shared, immutable), a copy of the tree
//!    (`Inner::read_tree`) and the tables' generation.
//! 2. With no lock: the finalized tables and the tree merged (deletes kept) until they give
//!    `reach` records (at first as many as the chunk wants): their span ends at the last key read.
//! 3. Under the tables' read lock again: unless the generation moved (a table was finalized or
//!    left: start again), a copy of the active table's entries within that span, at most
//!    `reach` (more are cut off: the span then ends at the last one copied).
//! 4. With no lock: the copy laid over step 2's entries within the span (`overlay`). Where
//!    deletes in the active table hid records and the span ended before the chunk was full, the
//!    chunk goes on past the span's end with twice the reach.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{borrow_bound, Direction, Key, KeyRange, Result, Value};
use strata_kit::chunked_range::{ChunkSizes, ChunkSource};
use strata_kit::sorted_run::{eager, memtable_source, Entry, EntryKind, LazyIter, MergeIter, MergeOutput};

use crate::engine::{Frozen, Inner};
use crate::tree::Tree;

/// Each chunk seeks every run on the path again (a block per level of every node, mostly cached
/// by then), and reads its entries plus the merge's look-ahead from the leaf, whatever the caller
/// takes of them. A first chunk of 32 with doubling refills (32, then 64) reads about 80 entries
/// for a YCSB E scan of 1–100 records against about 110 with a first chunk of 64 (whose 65- to
/// 100-record scans read 192): a leaf block fewer per scan. Measured: E 1.1–1.2× with 12% fewer
/// bytes read per scan (docs/benchmarks.md); 16 read a little less again for more re-seeks.
pub(crate) const CHUNK_SIZES: ChunkSizes = ChunkSizes { first_entries: 32, max_entries: 1024 };

/// Times a part starts again because a table moved between steps 1 and 3 before it keeps the
/// tables' read lock from step 1 to step 3 (so a part always ends).
const ATTEMPTS_WITHOUT_THE_LOCK: usize = 4;

/// The most records a part reaches for (a part after one whose records deletes hid reaches
/// twice as far as it, up to this).
const MAX_REACH: usize = 1 << 16;

/// Entries, and where their span ends short of the range's end.
type Spanned = (Vec<(Key, Entry)>, Option<Key>);

/// Step 1's layers: everything older than the active table.
struct Older {
    /// Newest first.
    finalized: Vec<Arc<Frozen>>,
    tree: Tree,
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

impl Older {
    /// Step 2: entries (deletes kept) until `records` puts or the range's end, and the span's
    /// end (`None`: the range's end).
    fn read(&self, range: &KeyRange, direction: Direction, records: usize) -> Result<Spanned> {
        let (lower, upper) = (borrow_bound(&range.start), borrow_bound(&range.end));
        let mut sources: Vec<LazyIter<'_>> = Vec::with_capacity(self.finalized.len() + 1);
        for frozen in &self.finalized {
            sources.push(eager(memtable_source(&frozen.table, (lower, upper), direction)));
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
}

impl Inner {
    /// Steps 1–4 for at most `records` records, reading `reach` records of the older layers
    /// and at most `reach` entries of the active table.
    fn read_part(
        &self,
        range: &KeyRange,
        direction: Direction,
        records: usize,
        reach: usize,
    ) -> Result<Part> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let tables = self.tables.read();
            let older = Older {
                finalized: tables.finalized.iter().rev().cloned().collect(),
                tree: self.read_tree()?,
            };
            let generation = tables.generation;
            let held = (attempt > ATTEMPTS_WITHOUT_THE_LOCK).then_some(tables);
            let (older_entries, older_end) = older.read(range, direction, reach)?;
            let tables = held.unwrap_or_else(|| self.tables.read());
            if tables.generation != generation {
                continue;
            }
            let bounds = bounds_until(range, older_end.as_ref(), direction);
            let mut active: Vec<(Key, Entry)> =
                memtable_source(&tables.active, bounds, direction).take(reach + 1).collect::<Result<_>>()?;
            drop(tables);
            let span_end = if active.len() > reach {
                active.truncate(reach);
                active.last().map(|(k, _)| k.clone())
            } else {
                older_end
            };
            let older_entries: Vec<(Key, Entry)> = older_entries
                .into_iter()
                .take_while(|(k, _)| within(k, span_end.as_ref(), direction))
                .collect();
            let records = overlay(active, older_entries, direction, records);
            return Ok(Part { records, span_end });
        }
    }
}

impl ChunkSource for Inner {
    fn check_readable(&self) -> Result<()> {
        self.writes.check_usable()
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
            let part = self.read_part(&rest, direction, want, reach)?;
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
        self.counters.user_bytes_read.fetch_add(bytes as u64, Relaxed);
        Ok(chunk)
    }
}
