//! The two-level cold-log index (F2 §6): the entries (cold-log addresses of hash-chain heads)
//! live in hash chunks of 32 entries (256 B) stored as records of their own log, the chunk log;
//! only a table of chunk addresses (8 B per chunk) is in memory. With one entry per cold key this
//! is about 8 B / 32 = 0.25 B of memory per cold key.
//!
//! Finding an entry reads one chunk; changing one appends a new copy of its chunk. One updater at
//! a time (the engine's maintenance lock); lookups run concurrently and retry when the chunk log
//! was truncated under them.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use strata_core::{Error, Result};

use crate::log::AppendLog;
use crate::record;

pub const ENTRIES_PER_CHUNK: usize = 32;
pub const CHUNK_BYTES: usize = ENTRIES_PER_CHUNK * 8;

pub struct ColdIndex {
    pub log: AppendLog,
    chunk_addresses: Box<[AtomicU64]>,
}

/// Which chunk and which slot of it a key hash uses.
pub fn position(hash: u64, chunk_count: u64) -> (u64, usize) {
    let chunk = hash & (chunk_count - 1);
    let slot = ((hash >> 40) as usize) % ENTRIES_PER_CHUNK;
    (chunk, slot)
}

impl ColdIndex {
    /// An index of `chunk_count` (a power of two) chunks over `log`; call `rebuild` to load it.
    pub fn new(log: AppendLog, chunk_count: u64) -> ColdIndex {
        ColdIndex { log, chunk_addresses: (0..chunk_count).map(|_| AtomicU64::new(0)).collect() }
    }

    pub fn chunk_count(&self) -> u64 {
        self.chunk_addresses.len() as u64
    }

    /// In-memory bytes: the chunk table plus the chunk log's tail page.
    pub fn memory_bytes(&self) -> u64 {
        self.chunk_count() * 8 + self.log.memory_bytes()
    }

    /// Chunks that have ever been written.
    pub fn chunks_in_use(&self) -> u64 {
        self.chunk_addresses.iter().filter(|a| a.load(SeqCst) != 0).count() as u64
    }

    fn slot(&self, chunk: u64) -> Result<&AtomicU64> {
        self.chunk_addresses
            .get(chunk as usize)
            .ok_or_else(|| Error::corruption("f2-chunk", 0, format!("chunk id {chunk} out of range")))
    }

    /// Loads the chunk table from the chunk log's `[begin, tail)` (newest copy of each chunk wins).
    pub fn rebuild(&self) -> Result<u64> {
        let (begin, tail) = (self.log.begin(), self.log.tail());
        self.log.scan(begin, tail, &mut |address, view| {
            let id = chunk_id_of(view.key).ok_or_else(|| {
                Error::corruption(self.log.file.file_of(address), address, "chunk record with a bad id")
            })?;
            if view.value.len() != CHUNK_BYTES {
                return Err(Error::corruption(
                    self.log.file.file_of(address),
                    address,
                    "chunk of the wrong size",
                ));
            }
            self.slot(u64::from(id))?.store(address, SeqCst);
            Ok(())
        })
    }

    /// The chunk's entries (all zero if the chunk was never written).
    fn read_chunk(&self, chunk: u64) -> Result<[u64; ENTRIES_PER_CHUNK]> {
        loop {
            let address = self.slot(chunk)?.load(SeqCst);
            if address == 0 {
                return Ok([0; ENTRIES_PER_CHUNK]);
            }
            let Some(rec) = self.log.read(address)? else {
                // Moved by chunk-log garbage collection meanwhile: the table has the new address.
                continue;
            };
            let corrupt =
                |what: &str| Error::corruption(self.log.file.file_of(address), address, what.to_string());
            if chunk_id_of(&rec.key) != Some(chunk as u32) || rec.value.len() != CHUNK_BYTES {
                return Err(corrupt("chunk record does not hold the expected chunk"));
            }
            let mut entries = [0u64; ENTRIES_PER_CHUNK];
            for (e, bytes) in entries.iter_mut().zip(rec.value.chunks_exact(8)) {
                *e = u64::from_le_bytes(bytes.try_into().map_err(|_| corrupt("short chunk entry"))?);
            }
            return Ok(entries);
        }
    }

    /// The cold-log address of the hash chain for `hash` (0 = empty).
    pub fn find(&self, hash: u64) -> Result<u64> {
        let (chunk, slot) = position(hash, self.chunk_count());
        Ok(self.read_chunk(chunk)?.get(slot).copied().unwrap_or_default())
    }

    /// Sets the entry for `hash` by appending a new copy of its chunk. Single updater only.
    pub fn update(&self, hash: u64, cold_address: u64) -> Result<()> {
        let (chunk, slot) = position(hash, self.chunk_count());
        let mut entries = self.read_chunk(chunk)?;
        if let Some(e) = entries.get_mut(slot) {
            *e = cold_address;
        }
        self.write_chunk(chunk, &entries)
    }

    fn write_chunk(&self, chunk: u64, entries: &[u64; ENTRIES_PER_CHUNK]) -> Result<()> {
        let mut value = Vec::with_capacity(CHUNK_BYTES);
        for e in entries {
            value.extend_from_slice(&e.to_le_bytes());
        }
        let bytes = record::encode(&(chunk as u32).to_le_bytes(), Some(&value), 0);
        let address = self.log.append(&bytes)?;
        self.slot(chunk)?.store(address, SeqCst);
        Ok(())
    }

    /// Bytes the chunk log would need if it held only the newest copy of each chunk.
    pub fn live_bytes(&self) -> u64 {
        self.chunks_in_use() * record::stored_len(4, CHUNK_BYTES) as u64
    }

    /// Garbage-collects the chunk log when it is more than twice its live size (plus slack):
    /// copies every chunk stored below a cut point to the tail, then truncates. Single updater
    /// only. Returns the number of chunks copied.
    pub fn collect_garbage(&self, slack_bytes: u64) -> Result<u64> {
        let size = self.log.size_bytes();
        if size <= 2 * self.live_bytes() + slack_bytes {
            return Ok(0);
        }
        let page = self.log.page_size();
        let cut = self.log.begin() + size / 2;
        let cut = (cut - cut % page).max(self.log.begin());
        let mut copied = 0;
        for chunk in 0..self.chunk_count() {
            let address = self.slot(chunk)?.load(SeqCst);
            if address != 0 && address < cut {
                let entries = self.read_chunk(chunk)?;
                self.write_chunk(chunk, &entries)?;
                copied += 1;
            }
        }
        self.log.truncate(cut);
        Ok(copied)
    }
}

fn chunk_id_of(key: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(key.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use strata_io::MemStorage;

    use super::*;
    use crate::log::{SegmentedFile, FIRST_ADDRESS};

    fn chunk_log(storage: &Arc<MemStorage>, begin: u64, tail: u64) -> AppendLog {
        let file = SegmentedFile::new(storage.clone(), "f2-chunk-", 16 << 10, false);
        AppendLog::open(file, 4096, begin, tail).unwrap()
    }

    /// Entries survive chunk-log garbage collection and a rebuild from the log, and the chunk
    /// log stays near its live size.
    #[test]
    fn updates_gc_and_rebuild_agree_with_a_model() {
        let storage = Arc::new(MemStorage::new());
        let index = ColdIndex::new(chunk_log(&storage, FIRST_ADDRESS, FIRST_ADDRESS), 8);
        let mut model = std::collections::HashMap::new();
        let mut h = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..2000u64 {
            h = h.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let hash = (h % 64) | (h & (0x1f << 40));
            index.update(hash, FIRST_ADDRESS + i).unwrap();
            model.insert(position(hash, 8), FIRST_ADDRESS + i);
            index.collect_garbage(2 * 4096).unwrap();
        }
        assert!(index.log.size_bytes() <= 2 * index.live_bytes() + 3 * 4096);
        for (&(chunk, slot), &address) in &model {
            let hash = chunk | ((slot as u64) << 40);
            assert_eq!(index.find(hash).unwrap(), address);
        }
        index.log.flush().unwrap();
        let (begin, tail) = (index.log.begin(), index.log.tail());
        let rebuilt = ColdIndex::new(chunk_log(&storage, begin, tail), 8);
        rebuilt.rebuild().unwrap();
        for (&(chunk, slot), &address) in &model {
            let hash = chunk | ((slot as u64) << 40);
            assert_eq!(rebuilt.find(hash).unwrap(), address);
        }
    }
}
