//! Range scans: merge the active MemTable, the immutable one and the table file, in chunks. Each
//! chunk reads the MemTables under one short read lock and the table under one short read lock;
//! keys come out strictly ordered, the scan as a whole is not a point-in-time snapshot.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use strata_core::{Direction, Key, KeyRange, Result, Value};

use crate::engine::Inner;

const CHUNK_ENTRIES: usize = 128;

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
        let (active, frozen) = {
            let mem = self.inner.mem.read();
            let active = mem.active.chunk(&self.remaining, self.reverse, CHUNK_ENTRIES);
            let frozen = mem
                .imm
                .as_ref()
                .map(|m| m.chunk(&self.remaining, self.reverse, CHUNK_ENTRIES))
                .unwrap_or_default();
            (active, frozen)
        };
        let (table, table_cut) =
            self.inner.table.read().scan_chunk(&self.remaining, self.reverse, CHUNK_ENTRIES)?;
        // Each source is complete up to its last key unless it was cut short; the merge is valid
        // up to the earliest such cut.
        let mut bound: Option<Key> = None;
        let cuts = [
            (active.len() >= CHUNK_ENTRIES).then(|| active.last().map(|(k, _)| k.clone())),
            (frozen.len() >= CHUNK_ENTRIES).then(|| frozen.last().map(|(k, _)| k.clone())),
            table_cut.then(|| table.last().map(|(k, _)| k.clone())),
        ];
        for k in cuts.into_iter().flatten().flatten() {
            if bound.as_ref().is_none_or(|b| self.before(&k, b)) {
                bound = Some(k);
            }
        }
        // Priority: active over frozen over table.
        let mut merged: std::collections::BTreeMap<Key, Option<Value>> = std::collections::BTreeMap::new();
        for (k, v) in table {
            merged.insert(k, Some(v));
        }
        for (k, v) in frozen.into_iter().chain(active) {
            merged.insert(k, v);
        }
        let within = |k: &Key| bound.as_ref().is_none_or(|b| !self.before(b, k));
        let live: Vec<(Key, Value)> = if self.reverse {
            merged
                .into_iter()
                .rev()
                .filter(|(k, _)| within(k))
                .filter_map(|(k, v)| v.map(|v| (k, v)))
                .collect()
        } else {
            merged.into_iter().filter(|(k, _)| within(k)).filter_map(|(k, v)| v.map(|v| (k, v))).collect()
        };
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
