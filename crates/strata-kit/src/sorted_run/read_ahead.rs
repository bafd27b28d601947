//! Read-ahead for a run iterator that reads far. A merge walks its runs through, one block
//! after the other, and with direct I/O each block read is a device round trip the merge waits
//! for. Once an iterator has read `MISSES_BEFORE_READ_AHEAD` consecutive blocks of its range
//! from the file (each the neighbour of the one before, in its direction, none in the cache), it
//! reads the next blocks of its range in one I/O, `FIRST_WINDOW_BYTES` and doubling up to
//! `MAX_WINDOW_BYTES` (RocksDB's iterators read ahead the same way). A short scan never gets
//! there, and a window never passes the last block the range may need.
//!
//! Blocks read ahead are kept as read and checked when the iterator reaches them (a damaged
//! block it never reaches is no error, as before), then decoded but not cached (`FillCache::No`:
//! what a long iteration streams, a merge above all, is not what point reads come back to); the
//! iterator holds at most one window of raw bytes.

use std::collections::VecDeque;
use std::sync::Arc;

use strata_core::{Direction, Result};

use super::block::DecodedBlock;
use super::reader::{FillCache, RunReader};

/// Consecutive neighbouring blocks read from the file before the iterator reads ahead: a
/// YCSB E scan (up to 100 records) reads a few blocks per source, and at 2 such scans read a
/// tenth more bytes for no gain; a merge reads hundreds.
pub const MISSES_BEFORE_READ_AHEAD: u32 = 4;
/// The first window's size: a few of the 4 KiB blocks engines write (a block is cut once it
/// holds its target size, so two with their trailers pass 8 KiB).
pub const FIRST_WINDOW_BYTES: usize = 16 << 10;
/// The largest window: with a few dozen runs in a merge, a few MiB of raw blocks at most.
pub const MAX_WINDOW_BYTES: usize = 128 << 10;

/// One iterator's read-ahead state.
#[derive(Debug)]
pub(super) struct ReadAhead {
    /// Blocks read and not reached yet, in the direction's order: index and raw bytes.
    ahead: VecDeque<(usize, Vec<u8>)>,
    /// Neighbouring blocks read from the file in a row (a block from the cache ends the row).
    misses_in_a_row: u32,
    window_bytes: usize,
}

impl Default for ReadAhead {
    fn default() -> ReadAhead {
        ReadAhead { ahead: VecDeque::new(), misses_in_a_row: 0, window_bytes: FIRST_WINDOW_BYTES }
    }
}

impl ReadAhead {
    /// Block `i` of `run`, the iterator having loaded `previous` last, walking in `direction`,
    /// its range needing no block past `last_needed` (in that direction).
    pub fn load(
        &mut self,
        run: &RunReader,
        previous: Option<usize>,
        i: usize,
        direction: Direction,
        last_needed: usize,
    ) -> Result<Arc<DecodedBlock>> {
        let follows = previous.is_some_and(|b| next(b, direction) == Some(i));
        while let Some((j, raw)) = self.ahead.pop_front() {
            if j == i {
                // A block cached since (another reader's) is not decoded and cached twice.
                return run.cached_block(i).map_or_else(|| run.block_from_raw(i, raw, FillCache::No), Ok);
            }
        }
        if let Some(block) = run.cached_block(i) {
            self.misses_in_a_row = 0;
            return Ok(block);
        }
        self.misses_in_a_row = if follows { self.misses_in_a_row + 1 } else { 1 };
        if self.misses_in_a_row <= MISSES_BEFORE_READ_AHEAD {
            return run.read_block(i);
        }
        let (first, end) = window(run, i, direction, last_needed, self.window_bytes);
        self.window_bytes = (self.window_bytes * 2).min(MAX_WINDOW_BYTES);
        // A window that fails to read may fail for a block the iteration never reaches: block
        // `i` alone decides whether this load fails.
        let Ok(raws) = run.read_raw_blocks(first, end) else { return run.read_block(i) };
        let mut read: VecDeque<(usize, Vec<u8>)> = (first..end).zip(raws).collect();
        if direction == Direction::Reverse {
            read = read.into_iter().rev().collect();
        }
        self.ahead = read;
        match self.ahead.pop_front() {
            Some((j, raw)) if j == i => run.block_from_raw(i, raw, FillCache::No),
            _ => run.read_block(i), // not reached: the window starts at `i`
        }
    }
}

/// The block after `b` in `direction`.
fn next(b: usize, direction: Direction) -> Option<usize> {
    match direction {
        Direction::Forward => b.checked_add(1),
        Direction::Reverse => b.checked_sub(1),
    }
}

/// The blocks `first..end` a window from `i` reads: `i` and its neighbours in `direction` up to
/// `last_needed`, as many as fit `window_bytes` (at least `i`).
fn window(
    run: &RunReader,
    i: usize,
    direction: Direction,
    last_needed: usize,
    window_bytes: usize,
) -> (usize, usize) {
    let mut bytes = run.block_bytes(i);
    let (mut first, mut end) = (i, i + 1);
    loop {
        let candidate = match direction {
            Direction::Forward if end <= last_needed => end,
            Direction::Reverse if first > last_needed => first - 1,
            _ => break,
        };
        let candidate_bytes = run.block_bytes(candidate);
        if bytes + candidate_bytes > window_bytes {
            break;
        }
        bytes += candidate_bytes;
        match direction {
            Direction::Forward => end += 1,
            Direction::Reverse => first -= 1,
        }
    }
    (first, end)
}
