//! `ChunkedRange`: an engine's range scan read in chunks, each under the engine's own short
//! locks (`ChunkSource::read_chunk`), resuming after the last key returned. A long scan never
//! holds a lock for long; keys come out strictly ordered; each chunk is a consistent view, the
//! scan as a whole is not a point-in-time snapshot. Used by `memory`.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use strata_core::{Direction, Key, KeyRange, Result, Value};

/// What an engine supplies to `ChunkedRange`.
pub trait ChunkSource: Send + Sync {
    /// `Ok` while the engine may be read (not closed, not poisoned): checked before every chunk,
    /// so a scan begun before a failed write does not show it either.
    fn check_readable(&self) -> Result<()>;

    /// Up to `limit` records within `range`, in `direction`, in key order.
    fn read_chunk(&self, range: &KeyRange, direction: Direction, limit: usize) -> Result<Vec<(Key, Value)>>;
}

/// Chunk sizes: the first, and the most a chunk grows to (each refill doubles it).
#[derive(Clone, Copy, Debug)]
pub struct ChunkSizes {
    pub first_entries: usize,
    pub max_entries: usize,
}

/// See the module documentation.
pub struct ChunkedRange<S: ChunkSource> {
    source: Arc<S>,
    /// What is left to scan: the consumed side is moved past the last key returned.
    remaining: KeyRange,
    direction: Direction,
    buffer: VecDeque<(Key, Value)>,
    next_chunk_entries: usize,
    max_chunk_entries: usize,
    exhausted: bool,
}

impl<S: ChunkSource> ChunkedRange<S> {
    pub fn new(source: Arc<S>, range: KeyRange, direction: Direction, sizes: ChunkSizes) -> Self {
        let exhausted = range.is_empty();
        ChunkedRange {
            source,
            remaining: range,
            direction,
            buffer: VecDeque::new(),
            next_chunk_entries: sizes.first_entries.max(1),
            max_chunk_entries: sizes.max_entries.max(1),
            exhausted,
        }
    }

    fn refill(&mut self) -> Result<()> {
        let limit = self.next_chunk_entries;
        self.next_chunk_entries = (limit * 2).min(self.max_chunk_entries);
        let chunk = self.source.read_chunk(&self.remaining, self.direction, limit)?;
        if chunk.len() < limit {
            self.exhausted = true;
        }
        if let Some((last, _)) = chunk.last() {
            match self.direction {
                Direction::Forward => self.remaining.start = Bound::Excluded(last.clone()),
                Direction::Reverse => self.remaining.end = Bound::Excluded(last.clone()),
            }
        }
        self.buffer.extend(chunk);
        Ok(())
    }
}

impl<S: ChunkSource> Iterator for ChunkedRange<S> {
    type Item = Result<(Key, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buffer.is_empty() && !self.exhausted {
            if let Err(e) = self.source.check_readable().and_then(|()| self.refill()) {
                self.exhausted = true;
                return Some(Err(e));
            }
        }
        self.buffer.pop_front().map(Ok)
    }
}
