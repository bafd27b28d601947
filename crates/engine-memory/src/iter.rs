//! Range scans: the map read in chunks (`strata_kit::chunked_range`), each under a short read
//! lock, so a long scan never blocks writers for long.

use std::sync::atomic::Ordering::Relaxed;

use strata_core::{Direction, Key, KeyRange, Result, Value};
use strata_kit::chunked_range::{ChunkSizes, ChunkSource};

use crate::Inner;

/// The first chunk is small (most scans read few entries: YCSB E reads 1–100); each refill doubles
/// it up to the maximum, so long scans still take the lock rarely.
pub(crate) const CHUNK_SIZES: ChunkSizes = ChunkSizes { first_entries: 16, max_entries: 1024 };

impl ChunkSource for Inner {
    fn check_readable(&self) -> Result<()> {
        self.writes.check_usable()
    }

    fn read_chunk(&self, range: &KeyRange, direction: Direction, limit: usize) -> Result<Vec<(Key, Value)>> {
        let map = self.map.read();
        // No tombstones in the map: every entry has a value.
        let owned = |(k, v): (&[u8], Option<&[u8]>)| (k.to_vec(), v.unwrap_or_default().to_vec());
        let entries = map.range(range.as_bounds());
        let chunk: Vec<(Key, Value)> = match direction {
            Direction::Forward => entries.take(limit).map(owned).collect(),
            Direction::Reverse => entries.rev().take(limit).map(owned).collect(),
        };
        drop(map);
        let bytes: usize = chunk.iter().map(|(k, v)| k.len() + v.len()).sum();
        self.counters.user_bytes_read.fetch_add(bytes as u64, Relaxed);
        Ok(chunk)
    }
}
