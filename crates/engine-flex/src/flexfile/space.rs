//! Space management of the data file (paper §4.1): fixed-size segments filled log-structured
//! through an in-memory write buffer, with per-segment live byte counts for GC.
//!
//! Invariant: a segment is written only while it is the open segment, and it becomes the open
//! segment only when it is `Free`: no extent of the durable state (tree file + durable log)
//! points into it. A segment whose last live byte goes away is `Pending` until the next log
//! commit makes a state without references to it durable.

use std::collections::BTreeSet;
use std::io;

use strata_core::{Error, Result};
use strata_io::StorageFile;
use strata_kit::io_cause;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SegState {
    Free,
    Open,
    Used,
    Pending,
}

/// The segment being filled. Its bytes before `flushed` are in the data file (written, maybe not
/// synced: the page cache serves them); `buf` holds the ones after, so the segment's fill level
/// is `flushed + buf.len()`. Only unwritten bytes stay in memory: a whole-segment buffer (4 MiB
/// by default) would take half of a small memory budget from the interval cache.
pub(crate) struct OpenSegment {
    pub id: u64,
    /// The bytes appended since the last flush.
    pub buf: Vec<u8>,
    /// Bytes of the segment already handed to the data file.
    pub flushed: usize,
    /// The I/O cause (`strata_kit::io_cause`) of the thread that appended each run of `buf`:
    /// (start in `buf`, cause), starts ascending. A flush writes each run under its own cause,
    /// so a commit's flush of bytes GC copied counts them as GC's.
    pub causes: Vec<(usize, usize)>,
}

impl OpenSegment {
    fn fill_bytes(&self) -> usize {
        self.flushed + self.buf.len()
    }
}

/// `alloc` writes the open segment's buffer out once it holds this much (or a quarter segment,
/// if less): the buffer's memory is bounded by it plus one extent, not by the segment size.
const WRITE_BUFFER_BYTES: usize = 256 << 10;

pub(crate) struct Space {
    pub segment_bytes: u64,
    pub max_segments: u64,
    /// Live bytes per segment; its length is the number of segments the data file has had.
    pub live_bytes: Vec<u64>,
    pub state: Vec<SegState>,
    pub total_live_bytes: u64,
    /// Segments in state `Used` or `Open`.
    used_count: u64,
    pub free: BTreeSet<u64>,
    pub pending: Vec<u64>,
    pub open: Option<OpenSegment>,
    /// The write buffer of the last closed segment, for the next one.
    spare_buf: Option<Vec<u8>>,
    /// Bytes written to the data file (user data and GC copies).
    pub data_bytes_written: u64,
}

/// Gives the bytes of each of `segments` (free: no durable state maps them) back to the file
/// system; they read as zeros until the segment is written again.
pub(crate) fn punch_segments(
    data: &dyn StorageFile,
    segments: impl IntoIterator<Item = u64>,
    segment_bytes: u64,
) -> Result<()> {
    for seg in segments {
        data.punch_hole(seg * segment_bytes, segment_bytes)?;
    }
    Ok(())
}

pub(crate) fn no_space(what: String) -> Error {
    Error::io(what, io::Error::from_raw_os_error(28))
}

impl Space {
    pub fn new(segment_bytes: u64, max_segments: u64) -> Space {
        Space {
            segment_bytes,
            max_segments,
            live_bytes: Vec::new(),
            state: Vec::new(),
            total_live_bytes: 0,
            used_count: 0,
            free: BTreeSet::new(),
            pending: Vec::new(),
            open: None,
            spare_buf: None,
            data_bytes_written: 0,
        }
    }

    pub fn segment_of(&self, addr: u64) -> u64 {
        addr / self.segment_bytes
    }

    /// Segments that can become the open segment now (free ones and never used ones).
    pub fn available_segments(&self) -> u64 {
        self.free.len() as u64 + self.max_segments.saturating_sub(self.live_bytes.len() as u64)
    }

    pub fn used_segments(&self) -> u64 {
        self.used_count
    }

    fn set_state(&mut self, seg: usize, new: SegState) {
        let counts = |s: SegState| u64::from(matches!(s, SegState::Used | SegState::Open));
        if let Some(state) = self.state.get_mut(seg) {
            self.used_count = self.used_count + counts(new) - counts(*state);
            *state = new;
        }
    }

    /// Bytes still free in the open segment.
    pub fn open_room_bytes(&self) -> u64 {
        self.open.as_ref().map_or(0, |o| self.segment_bytes - o.fill_bytes() as u64)
    }

    fn write_buffer_bytes(&self) -> usize {
        WRITE_BUFFER_BYTES.min(self.segment_bytes as usize / 4)
    }

    /// Memory of the open segment's write buffer (and of the spare one).
    pub fn buffer_memory_bytes(&self) -> u64 {
        let open = self.open.as_ref().map_or(0, |o| o.buf.capacity());
        (open + self.spare_buf.as_ref().map_or(0, Vec::capacity)) as u64
    }

    /// `addr .. addr + len` cut at segment boundaries: (address, length) per segment. Extents
    /// lie in one segment (the tree never merges across one), but a store written before that
    /// rule may hold some that span two.
    fn per_segment(&self, addr: u64, len: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let end = addr.saturating_add(len);
        let mut at = addr;
        std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let segment_end = (self.segment_of(at) + 1).saturating_mul(self.segment_bytes);
            let piece = (at, segment_end.min(end) - at);
            at += piece.1;
            Some(piece)
        })
    }

    pub fn add_live(&mut self, addr: u64, len: u64) {
        if self.segment_of(addr) == self.segment_of(addr + len.max(1) - 1) {
            return self.add_live_in_segment(addr, len);
        }
        let pieces: Vec<(u64, u64)> = self.per_segment(addr, len).collect();
        for (at, n) in pieces {
            self.add_live_in_segment(at, n);
        }
    }

    pub fn remove_live(&mut self, addr: u64, len: u64) {
        if self.segment_of(addr) == self.segment_of(addr + len.max(1) - 1) {
            return self.remove_live_in_segment(addr, len);
        }
        let pieces: Vec<(u64, u64)> = self.per_segment(addr, len).collect();
        for (at, n) in pieces {
            self.remove_live_in_segment(at, n);
        }
    }

    fn add_live_in_segment(&mut self, addr: u64, len: u64) {
        let seg = self.segment_of(addr) as usize;
        if let Some(live) = self.live_bytes.get_mut(seg) {
            *live += len;
            self.total_live_bytes += len;
        }
    }

    fn remove_live_in_segment(&mut self, addr: u64, len: u64) {
        let seg = self.segment_of(addr) as usize;
        let Some(live) = self.live_bytes.get_mut(seg) else { return };
        debug_assert!(*live >= len, "segment {seg} live bytes underflow");
        *live = live.saturating_sub(len);
        self.total_live_bytes = self.total_live_bytes.saturating_sub(len);
        if *live == 0 && self.state.get(seg) == Some(&SegState::Used) {
            self.set_state(seg, SegState::Pending);
            self.pending.push(seg as u64);
        }
    }

    /// Reserves `len` bytes (at most a segment) in the open segment, rolling to a new segment
    /// when they do not fit; returns their address. The caller appends the bytes next.
    pub fn alloc(&mut self, len: u64, data: &dyn StorageFile) -> Result<u64> {
        if self.open_room_bytes() < len {
            self.close_open(data)?;
        } else if self.open.as_ref().is_some_and(|o| o.buf.len() >= self.write_buffer_bytes()) {
            self.flush_open(data)?;
        }
        if self.open.is_none() {
            let id = match self.free.pop_first() {
                Some(id) => id,
                None if (self.live_bytes.len() as u64) < self.max_segments => {
                    self.live_bytes.push(0);
                    self.state.push(SegState::Free);
                    self.live_bytes.len() as u64 - 1
                }
                None => return Err(no_space("flexfile: the data file has no free segment left".into())),
            };
            self.set_state(id as usize, SegState::Open);
            // The buffer of the segment closed before, if any, is reused.
            let mut buf = self.spare_buf.take().unwrap_or_default();
            buf.clear();
            self.open = Some(OpenSegment { id, buf, flushed: 0, causes: Vec::new() });
        }
        let open = self.open.as_ref().ok_or_else(|| no_space("flexfile: no open segment".into()))?;
        Ok(open.id * self.segment_bytes + open.fill_bytes() as u64)
    }

    /// Appends the bytes of the last `alloc` to the open segment's write buffer.
    pub fn append(&mut self, bytes: &[u8]) {
        if let Some(open) = self.open.as_mut() {
            let cause = io_cause::current();
            if open.causes.last().is_none_or(|&(_, c)| c != cause) {
                open.causes.push((open.buf.len(), cause));
            }
            open.buf.extend_from_slice(bytes);
        }
    }

    /// Hands the open segment's unwritten bytes to the data file (not synced).
    pub fn flush_open(&mut self, data: &dyn StorageFile) -> Result<()> {
        let Some(open) = self.open.as_mut() else { return Ok(()) };
        let segment_addr = open.id * self.segment_bytes;
        let mut written = 0;
        while written < open.buf.len() {
            // The run holding `written`, up to the next run's start.
            let run = open.causes.partition_point(|&(start, _)| start <= written).saturating_sub(1);
            let cause = open.causes.get(run).map_or(0, |&(_, c)| c);
            let end = open.causes.get(run + 1).map_or(open.buf.len(), |&(start, _)| start);
            let _cause = io_cause::enter(cause);
            let bytes = open.buf.get(written..end).unwrap_or_default();
            data.write_at(segment_addr + (open.flushed + written) as u64, bytes)?;
            self.data_bytes_written += (end - written) as u64;
            written = end;
        }
        open.flushed += written;
        open.buf.clear();
        // The last run's cause goes on for later appends.
        let keep_from = open.causes.len().saturating_sub(1);
        open.causes.drain(..keep_from);
        if let Some(last) = open.causes.last_mut() {
            last.0 = 0;
        }
        Ok(())
    }

    fn close_open(&mut self, data: &dyn StorageFile) -> Result<()> {
        self.flush_open(data)?;
        if let Some(open) = self.open.take() {
            let seg = open.id as usize;
            self.spare_buf = Some(open.buf);
            if self.live_bytes[seg] == 0 {
                self.set_state(seg, SegState::Pending);
                self.pending.push(open.id);
            } else {
                self.set_state(seg, SegState::Used);
            }
        }
        Ok(())
    }

    /// Reads `buf.len()` bytes at `addr` (the open segment from its buffer).
    pub fn read(&self, addr: u64, buf: &mut [u8], data: &dyn StorageFile) -> Result<()> {
        let mut done = 0usize;
        for (at, n) in self.per_segment(addr, buf.len() as u64) {
            let Some(dst) = buf.get_mut(done..done + n as usize) else { break };
            self.read_in_segment(at, dst, data)?;
            done += n as usize;
        }
        Ok(())
    }

    fn read_in_segment(&self, addr: u64, buf: &mut [u8], data: &dyn StorageFile) -> Result<()> {
        if let Some(open) = &self.open {
            let segment_start = open.id * self.segment_bytes;
            let flushed_end = segment_start + open.flushed as u64;
            if self.segment_of(addr) == open.id && addr + buf.len() as u64 > flushed_end {
                // The part before `flushed` is in the file, the rest in the buffer.
                let in_file = flushed_end.saturating_sub(addr) as usize;
                let (from_file, from_buf) = buf.split_at_mut(in_file.min(buf.len()));
                if !from_file.is_empty() {
                    data.read_at(addr, from_file)?;
                }
                let at = (addr + in_file as u64 - flushed_end) as usize;
                let wanted = from_buf.len();
                let src = open.buf.get(at..at + wanted).ok_or_else(|| {
                    Error::invalid(format!(
                        "flexfile: read of {wanted} bytes at {addr} past the write buffer"
                    ))
                })?;
                from_buf.copy_from_slice(src);
                return Ok(());
            }
        }
        data.read_at(addr, buf)
    }

    /// After a log commit: segments pending before it are free for reuse.
    pub fn release(&mut self, segments: Vec<u64>) {
        for seg in segments {
            if self.state.get(seg as usize) == Some(&SegState::Pending) {
                self.set_state(seg as usize, SegState::Free);
                self.free.insert(seg);
            }
        }
    }

    /// Up to `count` used segments with the fewest live bytes and some garbage, fewest first.
    pub fn gc_victims(&self, count: usize) -> Vec<u64> {
        let mut candidates: Vec<(u64, u64)> = self
            .state
            .iter()
            .enumerate()
            .filter(|(seg, s)| **s == SegState::Used && self.live_bytes[*seg] < self.segment_bytes)
            .map(|(seg, _)| (self.live_bytes[seg], seg as u64))
            .collect();
        candidates.sort_unstable();
        candidates.into_iter().take(count).map(|(_, seg)| seg).collect()
    }

    /// Rebuilds the accounting after recovery from `(addr, len)` of every live extent.
    pub fn rebuild(&mut self, data_len_bytes: u64, extents: &[(u64, u64)], file: &str) -> Result<()> {
        let mut segments = data_len_bytes.div_ceil(self.segment_bytes);
        for &(addr, len) in extents {
            let seg = self.segment_of(addr);
            let in_segment = addr % self.segment_bytes + len <= self.segment_bytes;
            if !in_segment || addr + len > data_len_bytes {
                return Err(Error::corruption(
                    file,
                    0,
                    format!("extent at physical {addr} (+{len}) crosses a segment or the end of the data file ({data_len_bytes} bytes)"),
                ));
            }
            segments = segments.max(seg + 1);
        }
        self.max_segments = self.max_segments.max(segments);
        self.live_bytes = vec![0; segments as usize];
        self.state = vec![SegState::Free; segments as usize];
        for &(addr, len) in extents {
            self.add_live(addr, len);
        }
        for seg in 0..segments as usize {
            if self.live_bytes[seg] > 0 {
                self.set_state(seg, SegState::Used);
            } else {
                self.free.insert(seg as u64);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use strata_io::{MemStorage, OpenOptions, Storage};

    use super::*;

    /// Appends of random pieces through three segments: the write buffer stays within a
    /// quarter segment plus a piece, and any range of what was appended reads back (from the
    /// file, the buffer, or both at once), flushes interleaved at random.
    #[test]
    fn the_open_segment_keeps_only_unwritten_bytes_and_reads_across_the_flush_point() {
        let storage = MemStorage::new();
        let data = storage.open("d", OpenOptions::create()).unwrap();
        let segment_bytes = 64 << 10;
        let mut space = Space::new(segment_bytes, 8);
        let mut rng = SmallRng::seed_from_u64(3);
        let mut model: Vec<(u64, Vec<u8>)> = Vec::new(); // (address, bytes) of each piece
        while model.last().is_none_or(|(addr, _)| *addr < 3 * segment_bytes) {
            let mut piece = vec![0u8; rng.gen_range(1..4096)];
            rng.fill(&mut piece[..]);
            let addr = space.alloc(piece.len() as u64, &*data).unwrap();
            space.append(&piece);
            assert!(
                space.buffer_memory_bytes() <= 2 * (segment_bytes / 4 + 4096),
                "buffer grew past its bound"
            );
            model.push((addr, piece));
            if rng.gen_range(0..8) == 0 {
                space.flush_open(&*data).unwrap();
            }
            // A range of the last few pieces that lie in the open segment: contiguous bytes.
            let open_id = space.segment_of(addr);
            let first = model.iter().rposition(|(a, _)| space.segment_of(*a) != open_id).map_or(0, |i| i + 1);
            let from = rng.gen_range(first..model.len());
            let (start, _) = model[from];
            let want: Vec<u8> = model[from..].iter().flat_map(|(_, b)| b.iter().copied()).collect();
            let mut got = vec![0u8; want.len()];
            space.read(start, &mut got, &*data).unwrap();
            assert_eq!(got, want, "read of {} bytes at {start}", want.len());
        }
    }
}
