//! `NaiveTableFile`: the rewrite baseline of the `TableFile` interface. The logical file is a
//! `Vec<u8>` in memory (insert and collapse move every byte after the offset) and `sync` rewrites
//! the whole file atomically (docs/format/flexdb.md, "Naive table file"). Every insert is its own
//! extent, so `read_extent` behaves like FlexFile's for FlexDB's recovery sampling.
//!
//! Crash contract: after a crash the file holds the state of the last `sync` that returned, which
//! is a prefix of the operations.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use std::sync::Arc;

use parking_lot::RwLock;
use strata_core::{Error, Result};
use strata_io::{read_all, write_file_atomic, OpenOptions, Storage};

use crate::flexfile::TableFile;
use strata_core::le_bytes;

/// The file's name in the storage directory.
pub const FILE_NAME: &str = "flexdb-naive.table";
const MAGIC: &[u8; 8] = b"STRNAIVE";
const HEADER_BYTES: usize = 32;

#[derive(Default)]
struct State {
    data: Vec<u8>,
    /// Start offsets of the extents, strictly increasing, first 0 (empty when `data` is empty).
    extent_starts: Vec<u64>,
}

/// See the module documentation.
pub struct NaiveTableFile {
    storage: Arc<dyn Storage>,
    state: RwLock<State>,
}

impl NaiveTableFile {
    /// Loads `flexdb-naive.table` (verifying both checksums), or starts empty if it is absent.
    pub fn open(storage: Arc<dyn Storage>) -> Result<NaiveTableFile> {
        let tmp = format!("{FILE_NAME}.tmp");
        if storage.exists(&tmp)? {
            storage.remove(&tmp)?;
        }
        let state = if storage.exists(FILE_NAME)? {
            let bytes = read_all(storage.open(FILE_NAME, OpenOptions::existing())?.as_ref())?;
            decode(&bytes).map_err(|(offset, what)| Error::corruption(FILE_NAME, offset, what))?
        } else {
            State::default()
        };
        Ok(NaiveTableFile { storage, state: RwLock::new(state) })
    }

    fn check_offset(offset: u64, len: u64) -> Result<usize> {
        if offset > len {
            return Err(Error::invalid(format!("offset {offset} is past the end of the table file ({len})")));
        }
        usize::try_from(offset).map_err(|_| Error::invalid("offset too large"))
    }
}

fn encode(state: &State) -> Vec<u8> {
    let mut body = Vec::with_capacity(state.extent_starts.len() * 8 + state.data.len());
    for start in &state.extent_starts {
        body.extend_from_slice(&start.to_le_bytes());
    }
    body.extend_from_slice(&state.data);
    let mut out = Vec::with_capacity(HEADER_BYTES + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(state.data.len() as u64).to_le_bytes());
    out.extend_from_slice(&(state.extent_starts.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    let header_crc = crc32c::crc32c(&out);
    out.extend_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// 0 past the end: callers check lengths first; a zero only fails their checksum/sanity checks.
fn u64_at(bytes: &[u8], at: usize) -> u64 {
    le_bytes::u64_at(bytes, at).unwrap_or(0)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    le_bytes::u32_at(bytes, at).unwrap_or(0)
}

fn decode(bytes: &[u8]) -> std::result::Result<State, (u64, String)> {
    let header =
        bytes.get(..HEADER_BYTES).ok_or((0, format!("file of {} bytes is too short", bytes.len())))?;
    if header.get(..8) != Some(MAGIC.as_slice()) {
        return Err((0, "bad magic".into()));
    }
    if crc32c::crc32c(header.get(..28).unwrap_or_default()) != u32_at(header, 28) {
        return Err((28, "header checksum mismatch".into()));
    }
    let body = bytes.get(HEADER_BYTES..).unwrap_or_default();
    if crc32c::crc32c(body) != u32_at(header, 24) {
        return Err((24, "body checksum mismatch".into()));
    }
    let data_len = u64_at(header, 8);
    let extent_count = u64_at(header, 16);
    let extents_bytes =
        extent_count.checked_mul(8).filter(|n| n.checked_add(data_len) == Some(body.len() as u64));
    let Some(extents_bytes) = extents_bytes else {
        return Err((8, "lengths in the header do not match the file size".into()));
    };
    let extents_bytes = extents_bytes as usize;
    let extent_starts: Vec<u64> = (0..extent_count as usize).map(|i| u64_at(body, i * 8)).collect();
    let sorted = extent_starts.windows(2).all(|w| w.first() < w.get(1));
    let bounded = extent_starts.last().is_none_or(|&last| last < data_len.max(1));
    if !sorted
        || !bounded
        || extent_starts.first().is_some_and(|&f| f != 0)
        || (data_len > 0) == extent_starts.is_empty()
    {
        return Err((HEADER_BYTES as u64, "extent list is not sorted within the data".into()));
    }
    Ok(State { data: body.get(extents_bytes..).unwrap_or_default().to_vec(), extent_starts })
}

impl State {
    /// Makes `offset` an extent boundary (no-op at 0 or the end).
    fn split_at(&mut self, offset: u64) {
        if offset == 0 || offset >= self.data.len() as u64 {
            return;
        }
        if let Err(pos) = self.extent_starts.binary_search(&offset) {
            self.extent_starts.insert(pos, offset);
        }
    }

    fn insert(&mut self, at: usize, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let offset = at as u64;
        self.split_at(offset);
        let delta = data.len() as u64;
        let first_after = self.extent_starts.partition_point(|&s| s < offset);
        for start in self.extent_starts.iter_mut().skip(first_after) {
            *start += delta;
        }
        self.extent_starts.insert(first_after, offset);
        self.data.splice(at..at, data.iter().copied());
    }

    fn collapse(&mut self, at: usize, len: usize) {
        let (start, end) = (at as u64, (at + len) as u64);
        self.split_at(start);
        self.split_at(end);
        self.extent_starts.retain(|&s| s < start || s >= end);
        for s in self.extent_starts.iter_mut().filter(|s| **s >= end) {
            *s -= len as u64;
        }
        self.data.drain(at..at + len);
        if self.data.is_empty() {
            self.extent_starts.clear();
        }
    }
}

impl TableFile for NaiveTableFile {
    fn len(&self) -> u64 {
        self.state.read().data.len() as u64
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let state = self.state.read();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(state.data.len());
        let end = start.saturating_add(buf.len()).min(state.data.len());
        let src = state.data.get(start..end).unwrap_or_default();
        buf.get_mut(..src.len()).unwrap_or_default().copy_from_slice(src);
        Ok(src.len())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        let mut state = self.state.write();
        let at = Self::check_offset(offset, state.data.len() as u64)?;
        let overlap = data.len().min(state.data.len() - at);
        let (head, tail) = data.split_at(overlap);
        state.data.get_mut(at..at + overlap).unwrap_or_default().copy_from_slice(head);
        let end = state.data.len();
        state.insert(end, tail);
        Ok(())
    }

    fn insert(&self, offset: u64, data: &[u8]) -> Result<()> {
        let mut state = self.state.write();
        let at = Self::check_offset(offset, state.data.len() as u64)?;
        state.insert(at, data);
        Ok(())
    }

    fn collapse(&self, offset: u64, len: u64) -> Result<()> {
        let mut state = self.state.write();
        let total = state.data.len() as u64;
        if offset.checked_add(len).is_none_or(|end| end > total) {
            return Err(Error::invalid(format!(
                "collapse of {len} bytes at {offset} is past the end ({total})"
            )));
        }
        state.collapse(offset as usize, len as usize);
        Ok(())
    }

    fn update(&self, offset: u64, old_len: u64, data: &[u8]) -> Result<()> {
        let mut state = self.state.write();
        let total = state.data.len() as u64;
        if offset.checked_add(old_len).is_none_or(|end| end > total) {
            return Err(Error::invalid(format!(
                "update of {old_len} bytes at {offset} is past the end ({total})"
            )));
        }
        state.collapse(offset as usize, old_len as usize);
        state.insert(offset as usize, data);
        Ok(())
    }

    fn read_extent(&self, offset: u64, max_len: usize) -> Result<Option<(u64, Vec<u8>)>> {
        let state = self.state.read();
        if offset >= state.data.len() as u64 {
            return Ok(None);
        }
        let idx = state.extent_starts.partition_point(|&s| s <= offset).saturating_sub(1);
        let start = state.extent_starts.get(idx).copied().unwrap_or(0);
        let end = state.extent_starts.get(idx + 1).copied().unwrap_or(state.data.len() as u64);
        let len = ((end - start) as usize).min(max_len);
        let bytes = state.data.get(start as usize..start as usize + len).unwrap_or_default().to_vec();
        Ok(Some((start, bytes)))
    }

    fn sync(&self) -> Result<()> {
        // Encode under the read lock (a memory copy), write outside it so readers keep going.
        let bytes = encode(&self.state.read());
        write_file_atomic(self.storage.as_ref(), FILE_NAME, &bytes)
    }

    /// The whole file is in memory.
    fn memory_bytes(&self) -> u64 {
        let state = self.state.read();
        (state.data.capacity() + state.extent_starts.capacity() * 8) as u64
    }
}

#[cfg(test)]
mod tests {
    use strata_io::MemStorage;

    use super::*;

    fn open(storage: &MemStorage) -> NaiveTableFile {
        NaiveTableFile::open(Arc::new(storage.clone())).unwrap()
    }

    fn contents(f: &NaiveTableFile) -> Vec<u8> {
        let mut buf = vec![0; f.len() as usize];
        assert_eq!(f.read(0, &mut buf).unwrap(), buf.len());
        buf
    }

    #[test]
    fn insert_collapse_update_and_extents() {
        let storage = MemStorage::new();
        let f = open(&storage);
        f.insert(0, b"cccc").unwrap();
        f.insert(0, b"aa").unwrap();
        f.insert(2, b"bbb").unwrap();
        assert_eq!(contents(&f), b"aabbbcccc");
        assert_eq!(f.read_extent(3, 10).unwrap(), Some((2, b"bbb".to_vec())));
        assert_eq!(f.read_extent(8, 2).unwrap(), Some((5, b"cc".to_vec())));
        f.collapse(2, 3).unwrap();
        assert_eq!(contents(&f), b"aacccc");
        assert_eq!(f.read_extent(2, 10).unwrap(), Some((2, b"cccc".to_vec())));
        f.update(0, 2, b"xyz").unwrap();
        assert_eq!(contents(&f), b"xyzcccc");
        assert_eq!(f.read_extent(1, 10).unwrap(), Some((0, b"xyz".to_vec())));
        assert_eq!(f.read_extent(7, 10).unwrap(), None);
        assert!(f.collapse(5, 3).is_err());
        assert!(f.insert(99, b"x").is_err());
    }

    #[test]
    fn only_synced_state_survives_and_damage_is_reported() {
        let storage = MemStorage::new();
        let f = open(&storage);
        f.insert(0, b"hello").unwrap();
        f.sync().unwrap();
        f.insert(5, b" world").unwrap();
        drop(f);
        let f = open(&storage);
        assert_eq!(contents(&f), b"hello");
        assert_eq!(f.read_extent(0, 9).unwrap(), Some((0, b"hello".to_vec())));
        let file = storage.open(FILE_NAME, OpenOptions::existing()).unwrap();
        let len = file.len().unwrap();
        for at in 0..len {
            let mut byte = [0u8];
            file.read_at(at, &mut byte).unwrap();
            file.write_at(at, &[byte[0] ^ 4]).unwrap();
            assert!(matches!(NaiveTableFile::open(Arc::new(storage.clone())), Err(Error::Corruption { .. })));
            file.write_at(at, &byte).unwrap();
        }
    }
}
