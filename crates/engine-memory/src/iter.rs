//! Range scans: the map is read in chunks, each under a short read lock, so a long scan never
//! blocks writers for long. Keys come out strictly ordered; each chunk is a consistent view, the scan
//! as a whole is not a point-in-time snapshot.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{Direction, Key, KeyRange, Result, Value};

use crate::Inner;

/// The first chunk is small (most scans read few entries: YCSB E reads 1–100); each refill doubles
/// it up to the maximum, so long scans still take the lock rarely.
const FIRST_CHUNK_ENTRIES: usize = 16;
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

    fn refill(&mut self) {
        let chunk_entries = self.next_chunk_entries;
        self.next_chunk_entries = (chunk_entries * 2).min(MAX_CHUNK_ENTRIES);
        let map = self.inner.map.read();
        // No tombstones in the map: every entry has a value.
        let owned = |(k, v): (&[u8], Option<&[u8]>)| (k.to_vec(), v.unwrap_or_default().to_vec());
        let range = map.range(self.remaining.as_bounds());
        let chunk: Vec<(Key, Value)> = match self.direction {
            Direction::Forward => range.take(chunk_entries).map(owned).collect(),
            Direction::Reverse => range.rev().take(chunk_entries).map(owned).collect(),
        };
        drop(map);
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
    }
}

impl Iterator for ChunkedRange {
    type Item = Result<(Key, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buffer.is_empty() && !self.exhausted {
            // A scan begun before a failed write must not show it either.
            if let Err(e) = self.inner.writes.check_usable() {
                self.exhausted = true;
                return Some(Err(e));
            }
            self.refill();
        }
        self.buffer.pop_front().map(Ok)
    }
}
