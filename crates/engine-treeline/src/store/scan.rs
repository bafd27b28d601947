//! Range scans (paper §4.1): one segment per chunk. Under the index's read lock (so the segment
//! cannot be reorganized meanwhile) a chunk takes the cached records of the segment's key range
//! first, then reads the segment's pages that overlap the scan (base and overflow pages, under
//! its latch), and merges: a cached record overrides the pages, a cached tombstone hides them.
//! Taking the cache first means a record written back between the two reads shows its newer
//! page version, never an older one. Each chunk is consistent; a long scan is not a snapshot.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use strata_core::{at_or_after, at_or_before, Direction, Key, KeyRange, Result, Value};

use super::Store;
use crate::index::{Index, SegmentEntry};

/// The iterator `Engine::range` returns.
pub struct RangeIter {
    store: Arc<Store>,
    range: KeyRange,
    direction: Direction,
    buffer: VecDeque<(Key, Value)>,
    /// Forward: keys not yet read are at or after this; reverse: at or before it.
    cursor: Bound<Key>,
    done: bool,
}

/// One chunk's segment: its key range and entry.
struct Chunk {
    lower: Key,
    upper: Option<Key>,
    entry: Option<SegmentEntry>,
}

impl RangeIter {
    pub fn new(store: Arc<Store>, range: KeyRange, direction: Direction) -> RangeIter {
        let cursor = match direction {
            Direction::Forward => range.start.clone(),
            Direction::Reverse => range.end.clone(),
        };
        let done = range.is_empty();
        RangeIter { store, range, direction, buffer: VecDeque::new(), cursor, done }
    }

    /// The segment the cursor is in (`entry: None`: no segment yet, the whole key space).
    fn chunk_at_cursor(&self, index: &Index) -> Option<Chunk> {
        let (probe, step_back) = match (&self.direction, &self.cursor) {
            (Direction::Forward, Bound::Included(k) | Bound::Excluded(k)) => (k.clone(), false),
            (Direction::Forward, Bound::Unbounded) => (Vec::new(), false),
            (Direction::Reverse, Bound::Included(k)) => (k.clone(), false),
            (Direction::Reverse, Bound::Excluded(k)) => (k.clone(), true),
            (Direction::Reverse, Bound::Unbounded) => {
                let (lower, entry) = index.iter().next_back()?;
                return Some(Chunk { lower: lower.clone(), upper: None, entry: Some(entry.clone()) });
            }
        };
        let (lower, _, _) = index.segment_of(&probe)?;
        let lower = match step_back && *lower == probe {
            true => index.before(lower)?.clone(),
            false => lower.clone(),
        };
        let (lower, entry, upper) = index.segment_of(&lower)?;
        Some(Chunk { lower: lower.clone(), upper: upper.cloned(), entry: Some(entry.clone()) })
    }

    /// Reads the next chunk into `buffer` and moves the cursor past it.
    fn fill(&mut self) -> Result<()> {
        self.store.check_usable()?;
        let store = self.store.clone();
        let index = store.index.read();
        let chunk = match self.chunk_at_cursor(&index) {
            Some(chunk) => chunk,
            None if index.is_empty() => Chunk { lower: Vec::new(), upper: None, entry: None },
            None => {
                self.done = true;
                return Ok(());
            }
        };
        let cached = store.cache.lock().cached_in(&chunk.lower, chunk.upper.as_deref());
        let mut merged = match &chunk.entry {
            Some(entry) => self.read_segment(&store, &chunk, entry)?,
            None => BTreeMap::new(),
        };
        drop(index);
        for (key, value) in cached {
            match value {
                Some(v) => merged.insert(key, v),
                None => merged.remove(&key),
            };
        }
        let cursor = self.cursor.clone();
        let wanted = |k: &Key| match self.direction {
            Direction::Forward => at_or_after(k, borrow(&cursor)),
            Direction::Reverse => at_or_before(k, borrow(&cursor)),
        } && self.range.contains(k);
        let records = merged.into_iter().filter(|(k, _)| wanted(k));
        match self.direction {
            Direction::Forward => self.buffer.extend(records),
            Direction::Reverse => self.buffer.extend(records.rev()),
        }
        self.advance_cursor(chunk);
        Ok(())
    }

    fn advance_cursor(&mut self, chunk: Chunk) {
        let next = match self.direction {
            Direction::Forward => chunk.upper.map(Bound::Included),
            Direction::Reverse => (!chunk.lower.is_empty()).then_some(Bound::Excluded(chunk.lower)),
        };
        match next {
            Some(bound) if self.still_in_range(&bound) => self.cursor = bound,
            _ => self.done = true,
        }
    }

    fn still_in_range(&self, bound: &Bound<Key>) -> bool {
        match (self.direction, bound) {
            (Direction::Forward, Bound::Included(k)) => self.range.admits_to_end(k),
            (Direction::Reverse, Bound::Excluded(k)) => {
                // Keys below `k` remain; any of them in range?
                match self.range.as_bounds().0 {
                    Bound::Included(s) | Bound::Excluded(s) => s < k.as_slice(),
                    Bound::Unbounded => true,
                }
            }
            _ => false,
        }
    }

    /// Every record on the segment's pages that may fall in the scan (the pages the model
    /// assigns to the scan's bounds, clamped to the segment, and those between), by key. Only
    /// keys inside the segment share its model's prefix, so bounds outside it are clamped first.
    fn read_segment(
        &self,
        store: &Store,
        chunk: &Chunk,
        entry: &SegmentEntry,
    ) -> Result<BTreeMap<Key, Value>> {
        let (start, end) = self.range.as_bounds();
        let last_page = usize::from(entry.pages) - 1;
        let first = match start {
            Bound::Included(k) | Bound::Excluded(k) if k >= chunk.lower.as_slice() => entry.page_index_for(k),
            _ => 0,
        };
        let inside = |k: &[u8]| chunk.upper.as_deref().is_none_or(|u| k < u);
        let last = match end {
            Bound::Included(k) | Bound::Excluded(k) if inside(k) => entry.page_index_for(k),
            _ => last_page,
        };
        let _latch = store.latch_read(entry.first_page);
        let mut records = BTreeMap::new();
        for i in first..=last.max(first) {
            let ids = std::iter::once(entry.base_page(i)).chain(entry.overflow_of(i));
            for id in ids {
                let page = store.data.read_page(id)?;
                records.extend(page.iter().map(|e| (e.key(), e.value.to_vec())));
            }
        }
        Ok(records)
    }
}

fn borrow(bound: &Bound<Key>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Iterator for RangeIter {
    type Item = Result<(Key, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(record) = self.buffer.pop_front() {
                return Some(Ok(record));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.fill() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}
