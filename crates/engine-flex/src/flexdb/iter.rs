//! Range scans: merge the active MemTable, the immutable one and the table file, in chunks. Each
//! chunk reads the MemTables under one short read lock and the table under one short read lock;
//! keys come out strictly ordered, the scan as a whole is not a point-in-time snapshot.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use strata_core::{Direction, Key, KeyRange, Result, Value};

use crate::engine::Inner;

/// Entries per MemTable in one chunk. Small: entries past the chunk's merge bound are dropped
/// and read again by the next chunk.
const MEM_CHUNK_ENTRIES: usize = 16;
/// Table records per chunk: `scan_chunk` finishes the interval in which this is reached, so each
/// chunk loads one interval and a short scan loads only the intervals it returns records from.
const TABLE_CHUNK_RECORDS: usize = 1;

pub(crate) struct MergedRange {
    inner: Arc<Inner>,
    remaining: KeyRange,
    reverse: bool,
    buffer: VecDeque<(Key, Value)>,
    exhausted: bool,
}

impl MergedRange {
    pub(crate) fn new(inner: Arc<Inner>, range: KeyRange, direction: Direction) -> Self {
        let exhausted = range.is_empty();
        MergedRange {
            inner,
            remaining: range,
            reverse: direction == Direction::Reverse,
            buffer: VecDeque::new(),
            exhausted,
        }
    }

    /// `a` comes before `b` in scan order.
    fn before(&self, a: &[u8], b: &[u8]) -> bool {
        if self.reverse {
            a > b
        } else {
            a < b
        }
    }

    fn refill(&mut self) -> Result<()> {
        let chunk = MEM_CHUNK_ENTRIES;
        let (active, frozen) = {
            let mem = self.inner.mem.read();
            let active = mem.active.chunk(&self.remaining, self.reverse, chunk);
            let frozen =
                mem.imm.as_ref().map(|m| m.chunk(&self.remaining, self.reverse, chunk)).unwrap_or_default();
            (active, frozen)
        };
        let (table, table_cut) =
            self.inner.table.read().scan_chunk(&self.remaining, self.reverse, TABLE_CHUNK_RECORDS)?;
        // Each source is complete up to its last key unless it was cut short; the merge is valid
        // up to the earliest such cut.
        let mut bound: Option<Key> = None;
        let cuts = [
            (active.len() >= chunk).then(|| active.last().map(|(k, _)| k.clone())),
            (frozen.len() >= chunk).then(|| frozen.last().map(|(k, _)| k.clone())),
            table_cut.then(|| table.last().map(|(k, _)| k.clone())),
        ];
        for k in cuts.into_iter().flatten().flatten() {
            if bound.as_ref().is_none_or(|b| self.before(&k, b)) {
                bound = Some(k);
            }
        }
        // Priority: active over frozen over table. Each source is sorted in scan order.
        let table = table.into_iter().map(|(k, v)| (k, Some(v))).collect();
        let merged = merge_newest_first(self.reverse, [active, frozen, table]);
        let within = |k: &Key| bound.as_ref().is_none_or(|b| !self.before(b, k));
        let live: Vec<(Key, Value)> = merged
            .into_iter()
            .take_while(|(k, _)| within(k))
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        match bound {
            None => self.exhausted = true,
            Some(b) => {
                if self.reverse {
                    self.remaining.end = Bound::Excluded(b);
                } else {
                    self.remaining.start = Bound::Excluded(b);
                }
                if self.remaining.is_empty() {
                    self.exhausted = true;
                }
            }
        }
        let bytes: usize = live.iter().map(|(k, v)| k.len() + v.len()).sum();
        self.inner.note_read(bytes as u64);
        self.buffer.extend(live);
        Ok(())
    }
}

impl Iterator for MergedRange {
    type Item = Result<(Key, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.buffer.is_empty() && !self.exhausted {
            if let Err(e) = self.inner.check_usable().and_then(|()| self.refill()) {
                self.exhausted = true;
                return Some(Err(e));
            }
        }
        self.buffer.pop_front().map(Ok)
    }
}

/// Merges sources sorted in scan order (`reverse`: descending) into one; for a key in several
/// sources the entry of the earliest source wins.
fn merge_newest_first(reverse: bool, sources: [Vec<(Key, Option<Value>)>; 3]) -> Vec<(Key, Option<Value>)> {
    let mut out = Vec::with_capacity(sources.iter().map(Vec::len).sum());
    let mut queues = sources.map(VecDeque::from);
    loop {
        // The source whose head comes first in scan order; ties go to the earlier source.
        let mut best: Option<(usize, &Key)> = None;
        for (i, q) in queues.iter().enumerate() {
            let Some((k, _)) = q.front() else { continue };
            if best.is_none_or(|(_, bk)| if reverse { k > bk } else { k < bk }) {
                best = Some((i, k));
            }
        }
        let Some((b, _)) = best else { return out };
        let Some(entry) = queues.get_mut(b).and_then(VecDeque::pop_front) else { return out };
        for q in queues.iter_mut() {
            if q.front().is_some_and(|(k, _)| *k == entry.0) {
                q.pop_front();
            }
        }
        out.push(entry);
    }
}
