//! Range scans: the tables and the tree merged (`strata_kit::sorted_run::MergeIter`), read in
//! chunks, each under one read lock of the tables and of the tree, so a long scan never holds
//! the worker back for long. Keys come out strictly ordered; each chunk is a consistent view,
//! the scan as a whole is not a point-in-time snapshot.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{borrow_bound, Direction, Key, KeyRange, Result, Value};
use strata_kit::sorted_run::{memtable_source, Entry, MergeIter, MergeOutput, SourceIter};

use crate::engine::Inner;

/// Each refill seeks every run on the path again (a block per level of every node), so the
/// first chunk holds what most scans read (YCSB E reads 1–100); each refill doubles it up to
/// the maximum.
const FIRST_CHUNK_ENTRIES: usize = 64;
const MAX_CHUNK_ENTRIES: usize = 1024;

pub(crate) struct ChunkedRange {
    inner: Arc<Inner>,
    /// What is left to scan: the consumed side is moved past the last key returned.
    remaining: KeyRange,
    direction: Direction,
    buffer: VecDeque<(Key, Value)>,
    next_chunk_entries: usize,
    exhausted: bool,
}

impl ChunkedRange {
    pub(crate) fn new(inner: Arc<Inner>, range: KeyRange, direction: Direction) -> Self {
        let exhausted = range.is_empty();
        ChunkedRange {
            inner,
            remaining: range,
            direction,
            buffer: VecDeque::new(),
            next_chunk_entries: FIRST_CHUNK_ENTRIES,
            exhausted,
        }
    }

    fn refill(&mut self) -> Result<()> {
        let chunk_entries = self.next_chunk_entries;
        self.next_chunk_entries = (chunk_entries * 2).min(MAX_CHUNK_ENTRIES);
        let (lower, upper) = (borrow_bound(&self.remaining.start), borrow_bound(&self.remaining.end));
        let chunk: Vec<(Key, Value)> = {
            let tables = self.inner.tables.read();
            let tree = self.inner.tree.read();
            // Newest first: the active table, the finalized ones newest first, the tree.
            let mut sources: Vec<SourceIter<'_>> =
                vec![memtable_source(&tables.active, (lower, upper), self.direction)];
            for frozen in tables.finalized.iter().rev() {
                sources.push(memtable_source(&frozen.table, (lower, upper), self.direction));
            }
            let tree_records =
                tree.range(lower, upper, self.direction).map(|r| r.map(|(k, v)| (k, Entry::put(v))));
            sources.push(Box::new(tree_records));
            MergeIter::new(sources, self.direction, MergeOutput::Visible)
                .take(chunk_entries)
                .map(|r| r.map(|(k, e)| (k, e.value)))
                .collect::<Result<_>>()?
        };
        if chunk.len() < chunk_entries {
            self.exhausted = true;
        }
        if let Some((last, _)) = chunk.last() {
            match self.direction {
                Direction::Forward => self.remaining.start = Bound::Excluded(last.clone()),
                Direction::Reverse => self.remaining.end = Bound::Excluded(last.clone()),
            }
        }
        let bytes: usize = chunk.iter().map(|(k, v)| k.len() + v.len()).sum();
        self.inner.counters.user_bytes_read.fetch_add(bytes as u64, Relaxed);
        self.buffer.extend(chunk);
        Ok(())
    }
}

impl Iterator for ChunkedRange {
    type Item = Result<(Key, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buffer.is_empty() && !self.exhausted {
            // A scan begun before a failed write must not show it either.
            if let Err(e) = self.inner.writes.check_usable().and_then(|()| self.refill()) {
                self.exhausted = true;
                return Some(Err(e));
            }
        }
        self.buffer.pop_front().map(Ok)
    }
}
