//! Reads one segment file through a bounded window, so recovery holds at most
//! [`RECOVERY_READ_WINDOW_BYTES`] or one record of a segment in memory (whichever is larger),
//! however long the segment file is (preallocated and recycled segments are long and mostly
//! zeros or stale bytes past their records).

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use std::ops::Range;

use strata_core::{Error, Result};
use strata_io::StorageFile;

use crate::format::{decode_record_in, record_bytes_needed, record_field, RecordSlot, RECORD_HEADER_BYTES};

/// Bytes recovery reads from a segment at a time. The window grows past this only to hold one
/// record that is larger (what its header claims, up to the end of the file).
pub const RECOVERY_READ_WINDOW_BYTES: usize = 1 << 20;

/// A segment file and the window of its bytes read so far.
pub(crate) struct SegmentReader<'f> {
    file: &'f dyn StorageFile,
    file_len: usize,
    /// Bytes read ahead on a refill (at least 1).
    window_bytes: usize,
    /// File offset of `window[0]`.
    window_offset: usize,
    window: Vec<u8>,
}

impl<'f> SegmentReader<'f> {
    /// Reads nothing yet; `window_bytes` is the read-ahead size ([`RECOVERY_READ_WINDOW_BYTES`]
    /// outside tests).
    pub fn new(file: &'f dyn StorageFile, window_bytes: usize) -> Result<SegmentReader<'f>> {
        let file_len = usize::try_from(file.len()?)
            .map_err(|_| Error::invalid(format!("{} is too large to address in memory", file.name())))?;
        Ok(SegmentReader {
            file,
            file_len,
            window_bytes: window_bytes.max(1),
            window_offset: 0,
            window: Vec::new(),
        })
    }

    pub fn file_len(&self) -> usize {
        self.file_len
    }

    /// The file's bytes from `offset` on: at least `len` of them, or all up to the end of the file
    /// (none when `offset` is at or past the end). A refill keeps what the window already holds
    /// from `offset` on and reads the rest, `window_bytes` ahead or as far as `len` needs.
    fn bytes_from(&mut self, offset: usize, len: usize) -> Result<&[u8]> {
        if offset >= self.file_len {
            return Ok(&[]);
        }
        let wanted_end = offset.saturating_add(len).min(self.file_len);
        let window_end = self.window_offset + self.window.len();
        if offset < self.window_offset || wanted_end > window_end {
            let kept_bytes = if (self.window_offset..window_end).contains(&offset) {
                self.window.copy_within(offset - self.window_offset.., 0);
                window_end - offset
            } else {
                0
            };
            let read_end = wanted_end.max(offset.saturating_add(self.window_bytes).min(self.file_len));
            self.window.truncate(kept_bytes);
            self.window.resize(read_end - offset, 0);
            self.window_offset = offset;
            let unread = self.window.get_mut(kept_bytes..).unwrap_or_default();
            self.file.read_at((offset + kept_bytes) as u64, unread)?;
        }
        Ok(self.window.get(offset - self.window_offset..).unwrap_or_default())
    }

    /// Decodes the record at `offset` (see [`decode_record_in`]), reading only what it needs.
    /// Payload ranges are file offsets; [`SegmentReader::loaded`] returns their bytes until the
    /// next call that reads.
    pub fn decode_record(&mut self, offset: usize) -> Result<RecordSlot> {
        let file_len = self.file_len;
        let bytes_left = file_len.saturating_sub(offset);
        let header = self.bytes_from(offset, RECORD_HEADER_BYTES)?;
        let needed_bytes = record_bytes_needed(header, bytes_left);
        let rest = self.bytes_from(offset, needed_bytes)?;
        Ok(decode_record_in(rest, file_len, offset))
    }

    /// The bytes at file offsets `range`, when the window holds them (empty otherwise).
    pub fn loaded(&self, range: Range<usize>) -> &[u8] {
        let start = range.start.wrapping_sub(self.window_offset);
        let end = range.end.wrapping_sub(self.window_offset);
        self.window.get(start..end).unwrap_or_default()
    }

    /// The lsn field of a record header at `offset`, when the file holds a whole header there.
    pub fn lsn_field_at(&mut self, offset: usize) -> Result<Option<u64>> {
        let header = self.bytes_from(offset, RECORD_HEADER_BYTES)?;
        let (field_offset, field_bytes) = record_field::LSN;
        Ok(header
            .get(..RECORD_HEADER_BYTES)
            .and_then(|h| h.get(field_offset..field_offset + field_bytes))
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes))
    }

    /// Calls `visit(at, chunk)` for the file's bytes from `offset` to its end, a window at a time
    /// (`at` is the chunk's file offset), while `visit` returns true.
    fn for_each_chunk(&mut self, offset: usize, mut visit: impl FnMut(usize, &[u8]) -> bool) -> Result<()> {
        let mut at = offset;
        while at < self.file_len {
            let window_bytes = self.window_bytes;
            let chunk = self.bytes_from(at, window_bytes)?;
            if chunk.is_empty() || !visit(at, chunk) {
                break;
            }
            at += chunk.len();
        }
        Ok(())
    }

    /// Whether every byte from `offset` to the end of the file is zero (true when there is none).
    /// Stops reading at the first non-zero byte.
    pub fn is_zero_from(&mut self, offset: usize) -> Result<bool> {
        let mut zero = true;
        self.for_each_chunk(offset, |_, chunk| {
            zero = chunk.iter().all(|&b| b == 0);
            zero
        })?;
        Ok(zero)
    }

    /// Bytes from `offset` up to the last non-zero byte of the file (trailing zeros are
    /// preallocated space); 0 when there are none.
    pub fn nonzero_prefix_bytes(&mut self, offset: usize) -> Result<u64> {
        let mut nonzero_end = offset;
        self.for_each_chunk(offset, |at, chunk| {
            if let Some(last) = chunk.iter().rposition(|&b| b != 0) {
                nonzero_end = at + last + 1;
            }
            true
        })?;
        Ok((nonzero_end - offset) as u64)
    }
}

#[cfg(test)]
#[path = "segment_reader_tests.rs"]
mod tests;
