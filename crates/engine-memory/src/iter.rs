//! Range scans: the map is read in chunks, each under a short read lock, so a long scan never
//! blocks writers for long. Keys come out strictly ordered; each chunk is a consistent view, the scan
//! as a whole is not a point-in-time snapshot.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{Direction, Error, Key, KeyRange, Result, Value};

use crate::Inner;

const CHUNK_ENTRIES: usize = 256;

pub(crate) struct ChunkedRange {
    inner: Arc<Inner>,
    /// What is left to scan: the consumed side is moved past the last key returned.
    remaining: KeyRange,
    direction: Direction,
    buffer: VecDeque<(Key, Value)>,
    exhausted: bool,
}

impl ChunkedRange {
    pub(crate) fn new(inner: Arc<Inner>, range: KeyRange, direction: Direction) -> Self {
        let exhausted = range.is_empty();
        ChunkedRange { inner, remaining: range, direction, buffer: VecDeque::new(), exhausted }
    }

    fn refill(&mut self) {
        let map = self.inner.map.read();
        let range = map.entries.range::<[u8], _>(self.remaining.as_bounds());
        let chunk: Vec<(Key, Value)> = match self.direction {
            Direction::Forward => range.take(CHUNK_ENTRIES).map(|(k, v)| (k.clone(), v.clone())).collect(),
            Direction::Reverse => {
                range.rev().take(CHUNK_ENTRIES).map(|(k, v)| (k.clone(), v.clone())).collect()
            }
        };
        drop(map);
        if chunk.len() < CHUNK_ENTRIES {
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
    }
}

impl Iterator for ChunkedRange {
    type Item = Result<(Key, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buffer.is_empty() && !self.exhausted {
            if self.inner.closed.load(Relaxed) {
                self.exhausted = true;
                return Some(Err(Error::Closed));
            }
            self.refill();
        }
        self.buffer.pop_front().map(Ok)
    }
}
