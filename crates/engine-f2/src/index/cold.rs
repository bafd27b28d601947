//! The two-level cold-log index (F2 §6): the entries (cold-log addresses of hash-chain heads)
//! live in hash chunks of 32 entries (256 B) stored as records of their own log, the chunk log;
//! only a table of chunk addresses (8 B per chunk) is in memory. With one entry per cold key this
//! is about 8 B / 32 = 0.25 B of memory per cold key.
//!
//! Finding an entry reads one chunk; changing one appends a new copy of its chunk. Updates run
//! under the engine's maintenance lock; within a compaction round several workers update the
//! index at once, each chunk by exactly one of them (its owner, see engine/compaction/frames.rs),
//! so a chunk's read-modify-write is never interleaved with another update of the same chunk;
//! the chunk log serialises the workers' appends itself. Lookups run concurrently and retry when
//! the chunk log was truncated under them.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use strata_core::{Error, Result};

use crate::log::io_cause::IoCause;
use crate::log::{scan_range, AppendLog, ScanEnd};
use crate::record;

pub const ENTRIES_PER_CHUNK: usize = 32;
pub const CHUNK_BYTES: usize = ENTRIES_PER_CHUNK * 8;

pub struct ColdIndex {
    pub log: AppendLog,
    chunk_addresses: Box<[AtomicU64]>,
    /// Chunks whose table address is not 0 (an address is never reset to 0).
    chunks_in_use: AtomicU64,
}

/// An entry: bits 0..48 the cold-log address of its chain's newest record (0 = empty), bits
/// 48..63 the tag of the key that claimed it, bit 63 "shared": keys of other tags whose home is
/// this slot overflowed into the chain because the chunk was full.
const ADDRESS_MASK: u64 = (1 << 48) - 1;
const TAG_SHIFT: u32 = 48;
const TAG_MASK: u64 = 0x7fff;
const SHARED_BIT: u64 = 1 << 63;

/// Which chunk a key hash uses, its home slot in it, and its 15-bit tag (independent hash bits:
/// low bits pick the chunk, bits 40.. the home slot, bits 49.. the tag).
pub fn position(hash: u64, chunk_count: u64) -> (u64, usize, u64) {
    let chunk = hash & (chunk_count - 1);
    let home = ((hash >> 40) as usize) % ENTRIES_PER_CHUNK;
    (chunk, home, (hash >> 49) & TAG_MASK)
}

fn entry_address(entry: u64) -> u64 {
    entry & ADDRESS_MASK
}

fn entry_tag(entry: u64) -> u64 {
    (entry >> TAG_SHIFT) & TAG_MASK
}

/// The chains a key's cold records can be on, newest first: the live chain claimed by its tag,
/// then its home slot's chain if that is shared. 0 = none. `live_floor`: addresses below it are
/// truncated (their entries are dead and may be reused).
fn candidates(entries: &[u64; ENTRIES_PER_CHUNK], home: usize, tag: u64, live_floor: u64) -> [u64; 2] {
    let live = |e: u64| entry_address(e) >= live_floor.max(1);
    let tagged = entries.iter().position(|&e| live(e) && entry_tag(e) == tag);
    let home_entry = entries.get(home).copied().unwrap_or_default();
    let home_is_shared = live(home_entry) && home_entry & SHARED_BIT != 0 && tagged != Some(home);
    let shared = if home_is_shared { entry_address(home_entry) } else { 0 };
    [tagged.and_then(|i| entries.get(i)).map_or(0, |&e| entry_address(e)), shared]
}

/// Where a new record of a key goes: the slot whose chain it joins and that chain's live head
/// (the new record's previous address). In order: the live entry of its tag; its home slot if
/// shared; a dead (empty or truncated) slot, claimed for the tag (home first); else the home
/// slot, which becomes shared.
fn choose_slot(entries: &[u64; ENTRIES_PER_CHUNK], home: usize, tag: u64, live_floor: u64) -> (usize, u64) {
    let live = |e: u64| entry_address(e) >= live_floor.max(1);
    let home_entry = entries.get(home).copied().unwrap_or_default();
    if let Some(i) = entries.iter().position(|&e| live(e) && entry_tag(e) == tag) {
        return (i, entries.get(i).map_or(0, |&e| entry_address(e)));
    }
    if live(home_entry) && home_entry & SHARED_BIT != 0 {
        return (home, entry_address(home_entry));
    }
    if !live(home_entry) {
        return (home, 0);
    }
    if let Some(i) = entries.iter().position(|&e| !live(e)) {
        return (i, 0);
    }
    (home, entry_address(home_entry))
}

/// Below this many chunks a batch is read in the calling thread.
const MIN_PARALLEL_CHUNKS: usize = 32;

/// Chunks read ahead for one compaction step, kept current as the step places records (see
/// [`ColdIndex::read_batch`]). It holds only chunks its user owns for the round (nobody else
/// updates them), so its entries cannot go stale behind its back; chunk-log garbage collection,
/// which moves chunks without changing them, does not run during a round.
#[derive(Default)]
pub struct ChunkBatch {
    entries: HashMap<u64, [u64; ENTRIES_PER_CHUNK]>,
}

/// A chunk id and its entries.
type ChunkEntries = (u64, [u64; ENTRIES_PER_CHUNK]);

/// A chosen place for a new cold record (see [`ColdIndex::place_in`]); `prev_address` is the chain
/// head the record must link to.
pub struct Placement {
    chunk: u64,
    entries: [u64; ENTRIES_PER_CHUNK],
    slot: usize,
    tag: u64,
    pub prev_address: u64,
}

impl ColdIndex {
    /// An index of `chunk_count` (a power of two) chunks over `log`; call `rebuild` to load it.
    pub fn new(log: AppendLog, chunk_count: u64) -> ColdIndex {
        ColdIndex {
            log,
            chunk_addresses: (0..chunk_count).map(|_| AtomicU64::new(0)).collect(),
            chunks_in_use: AtomicU64::new(0),
        }
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
        self.chunks_in_use.load(SeqCst)
    }

    /// Points `chunk`'s table entry at `address`, counting chunks written for the first time.
    fn set_address(&self, chunk: u64, address: u64) -> Result<()> {
        if self.slot(chunk)?.swap(address, SeqCst) == 0 && address != 0 {
            self.chunks_in_use.fetch_add(1, SeqCst);
        }
        Ok(())
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
            let id = chunk_id_of(view.key)
                .ok_or_else(|| self.log.file.corruption(address, "chunk record with a bad id"))?;
            if view.value.len() != CHUNK_BYTES {
                return Err(self.log.file.corruption(address, "chunk of the wrong size"));
            }
            self.set_address(u64::from(id), address)
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
            if chunk_id_of(&rec.key) != Some(chunk as u32) {
                return Err(self
                    .log
                    .file
                    .corruption(address, "chunk record does not hold the expected chunk"));
            }
            return self.decode_entries(address, &rec.value);
        }
    }

    /// The entries of the chunk record at `address` whose value is `value`.
    fn decode_entries(&self, address: u64, value: &[u8]) -> Result<[u64; ENTRIES_PER_CHUNK]> {
        let corrupt = |what: &str| self.log.file.corruption(address, what.to_string());
        if value.len() != CHUNK_BYTES {
            return Err(corrupt("chunk of the wrong size"));
        }
        let mut entries = [0u64; ENTRIES_PER_CHUNK];
        for (e, bytes) in entries.iter_mut().zip(value.chunks_exact(8)) {
            *e = u64::from_le_bytes(bytes.try_into().map_err(|_| corrupt("short chunk entry"))?);
        }
        Ok(entries)
    }

    /// Reads the chunks of `hashes` (each once) with up to `readers` reads in flight, so a
    /// compaction step that places thousands of records pays for their chunk reads in parallel
    /// instead of one device read after another. The caller must own the chunks' updates.
    pub fn read_batch(&self, hashes: impl Iterator<Item = u64>, readers: usize) -> Result<ChunkBatch> {
        let chunk_count = self.chunk_count();
        let mut chunks: Vec<u64> = hashes.map(|h| position(h, chunk_count).0).collect();
        chunks.sort_unstable();
        chunks.dedup();
        let cause = IoCause::current();
        let read_part = |part: &[u64]| -> Result<Vec<ChunkEntries>> {
            let _cause = cause.enter();
            part.iter().map(|&c| Ok((c, self.read_chunk(c)?))).collect()
        };
        let read = strata_kit::parallel::map_parts(
            &chunks,
            readers,
            MIN_PARALLEL_CHUNKS,
            "a chunk reader",
            read_part,
        )?;
        Ok(ChunkBatch { entries: read.into_iter().collect() })
    }

    /// Chooses the chain a new record of `hash` joins, with the chunk taken from `batch` when it
    /// holds it (else read; an empty batch always reads); append the record (previous address =
    /// `prev_address`) and pass its address to [`ColdIndex::commit_in`]. The caller must be the
    /// chunk's only updater until that commit.
    pub fn place_in(&self, batch: &ChunkBatch, hash: u64, live_floor: u64) -> Result<Placement> {
        let (chunk, home, tag) = position(hash, self.chunk_count());
        let entries = self.chunk_in(batch, chunk)?;
        let (slot, prev_address) = choose_slot(&entries, home, tag, live_floor);
        Ok(Placement { chunk, entries, slot, tag, prev_address })
    }

    /// [`ColdIndex::find`] with the chunk taken from `batch` when it holds it. The caller must own
    /// the chunk's updates (else the batch may be stale).
    pub fn find_in(&self, batch: &ChunkBatch, hash: u64, live_floor: u64) -> Result<[u64; 2]> {
        let (chunk, home, tag) = position(hash, self.chunk_count());
        Ok(candidates(&self.chunk_in(batch, chunk)?, home, tag, live_floor))
    }

    fn chunk_in(&self, batch: &ChunkBatch, chunk: u64) -> Result<[u64; ENTRIES_PER_CHUNK]> {
        match batch.entries.get(&chunk) {
            Some(entries) => Ok(*entries),
            None => self.read_chunk(chunk),
        }
    }

    /// Points the placed slot at `cold_address` by appending a new copy of its chunk, and keeps
    /// `batch`'s copy of the chunk current.
    pub fn commit_in(&self, batch: &mut ChunkBatch, placement: Placement, cold_address: u64) -> Result<()> {
        let chunk = placement.chunk;
        let entries = self.commit_entries(placement, cold_address)?;
        self.write_chunk(chunk, &entries)?;
        batch.entries.insert(chunk, entries);
        Ok(())
    }

    /// The cold-log chains that may hold `hash`'s records, newest first (0 = none). Addresses
    /// below `live_floor` (the cold log's begin) are truncated.
    pub fn find(&self, hash: u64, live_floor: u64) -> Result<[u64; 2]> {
        self.find_in(&ChunkBatch::default(), hash, live_floor)
    }

    /// The placed chunk's entries with the placed slot pointing at `cold_address`.
    fn commit_entries(&self, placement: Placement, cold_address: u64) -> Result<[u64; ENTRIES_PER_CHUNK]> {
        let Placement { mut entries, slot, tag, prev_address, .. } = placement;
        if cold_address > ADDRESS_MASK {
            return Err(Error::invalid("f2 cold log address space exhausted (2^48 bytes)"));
        }
        if let Some(e) = entries.get_mut(slot) {
            let (owner_tag, shared) = if prev_address == 0 {
                (tag, 0)
            } else {
                let shared = if entry_tag(*e) == tag { *e & SHARED_BIT } else { SHARED_BIT };
                (entry_tag(*e), shared)
            };
            *e = cold_address | (owner_tag << TAG_SHIFT) | shared;
        }
        Ok(entries)
    }

    fn write_chunk(&self, chunk: u64, entries: &[u64; ENTRIES_PER_CHUNK]) -> Result<()> {
        let mut value = Vec::with_capacity(CHUNK_BYTES);
        for e in entries {
            value.extend_from_slice(&e.to_le_bytes());
        }
        let mut bytes = record::encode(&(chunk as u32).to_le_bytes(), Some(&value), 0);
        let address = self.log.append(&mut bytes)?;
        self.set_address(chunk, address)
    }

    /// Bytes the chunk log would need if it held only the newest copy of each chunk.
    pub fn live_bytes(&self) -> u64 {
        self.chunks_in_use() * record::stored_len(4, CHUNK_BYTES) as u64
    }

    /// Garbage-collects the chunk log when it is more than twice its live size (plus slack):
    /// reads the log below a cut point in page order and copies every chunk whose newest copy is
    /// there to the tail, then truncates. Only when no compaction round runs (under the
    /// maintenance lock, so no table entry moves meanwhile). Sequential page reads: the lower
    /// half holds about the live bytes, where reading each live chunk alone cost a device
    /// read (a block, not 288 B) per chunk. Returns the number of chunks copied.
    pub fn collect_garbage(&self, slack_bytes: u64) -> Result<u64> {
        let _cause = IoCause::ChunkGc.enter();
        let size = self.log.size_bytes();
        if size <= 2 * self.live_bytes() + slack_bytes {
            return Ok(0);
        }
        let page = self.log.page_size();
        let begin = self.log.begin();
        let cut = begin + size / 2;
        let cut = (cut - cut % page).max(begin);
        let mut copied = 0;
        let mut read_page = |p| self.log.read_page(p).map(Cow::Owned);
        scan_range(
            &self.log.file,
            page,
            begin,
            cut,
            ScanEnd::PageCut,
            &mut read_page,
            &mut |address, view| {
                let id = chunk_id_of(view.key)
                    .ok_or_else(|| self.log.file.corruption(address, "chunk record with a bad id"))?;
                if self.slot(u64::from(id))?.load(SeqCst) == address {
                    self.write_chunk(u64::from(id), &self.decode_entries(address, view.value)?)?;
                    copied += 1;
                }
                Ok(())
            },
        )?;
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
        let file = SegmentedFile::new(storage.clone(), "f2-chunk-", 16 << 10);
        AppendLog::open(file, 4096, begin, tail).unwrap()
    }

    /// Walks the candidate chains of `hash` in a model cold log (`log[address - 1]` = (hash,
    /// prev)) and returns the newest address holding `hash`.
    fn lookup(index: &ColdIndex, log: &[(u64, u64)], hash: u64, floor: u64) -> Option<u64> {
        for mut address in index.find(hash, floor).unwrap() {
            while address >= floor && address != 0 {
                let (h, prev) = log[address as usize - 1];
                if h == hash {
                    return Some(address);
                }
                assert!(prev < address);
                address = prev;
            }
        }
        None
    }

    /// A batch large enough to be read by several threads holds exactly what reading each chunk
    /// alone returns (written chunks, never-written ones as all zero).
    #[test]
    fn a_parallel_batch_reads_what_single_reads_return() {
        let storage = Arc::new(MemStorage::new());
        let index = ColdIndex::new(chunk_log(&storage, FIRST_ADDRESS, FIRST_ADDRESS), 256);
        let hashes: Vec<u64> = (0..200u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let mut batch = ChunkBatch::default();
        for (n, &h) in hashes.iter().enumerate().step_by(3) {
            let placement = index.place_in(&batch, h, FIRST_ADDRESS).unwrap();
            index.commit_in(&mut batch, placement, FIRST_ADDRESS + n as u64).unwrap();
        }
        let read = index.read_batch(hashes.iter().copied(), 8).unwrap();
        assert!(read.entries.len() >= MIN_PARALLEL_CHUNKS, "{} chunks", read.entries.len());
        for &h in &hashes {
            let chunk = position(h, index.chunk_count()).0;
            assert_eq!(read.entries.get(&chunk), Some(&index.read_chunk(chunk).unwrap()));
        }
        assert!(read.entries.values().any(|e| e.iter().any(|&x| x != 0)));
    }

    /// Garbage collection reads the log below its cut page by page (one read per page), not one
    /// read per live chunk there, and keeps every chunk's newest entries.
    #[test]
    fn garbage_collection_reads_pages_not_chunks() {
        let storage = Arc::new(MemStorage::new());
        let index = ColdIndex::new(chunk_log(&storage, FIRST_ADDRESS, FIRST_ADDRESS), 256);
        let entries = |chunk: u64, round: u64| [chunk << 8 | round; ENTRIES_PER_CHUNK];
        // Every chunk once, then the even ones three more times: the odd chunks' only copies are
        // in the oldest pages.
        for round in 0..4 {
            for chunk in (0..256).filter(|c| round == 0 || c % 2 == 0) {
                index.write_chunk(chunk, &entries(chunk, round)).unwrap();
            }
        }
        let gc_reads = || {
            let counters = crate::log::io_cause::counters(&index.log.file.io, "chunk_log");
            counters.iter().find(|(n, _)| n == "io.chunk_log.chunk_gc.reads").map_or(0, |(_, v)| *v)
        };
        let pages_below_cut = index.log.size_bytes() / 2 / 4096 + 1;
        let copied = index.collect_garbage(0).unwrap();
        assert!(copied >= 128, "the odd chunks are below the cut: {copied}");
        assert!(gc_reads() <= pages_below_cut, "{} reads for {pages_below_cut} pages", gc_reads());
        for chunk in 0..256 {
            let newest = if chunk % 2 == 0 { 3 } else { 0 };
            assert_eq!(index.read_chunk(chunk).unwrap(), entries(chunk, newest));
        }
    }

    /// Tagged entries with overflow into shared home chains and reuse of truncated entries:
    /// every key's newest record stays reachable through chunk-log garbage collection, cold-log
    /// truncation (live records re-inserted first, as compaction does) and a rebuild.
    #[test]
    fn updates_overflow_truncation_gc_and_rebuild_agree_with_a_model() {
        let storage = Arc::new(MemStorage::new());
        let index = ColdIndex::new(chunk_log(&storage, FIRST_ADDRESS, FIRST_ADDRESS), 8);
        let mut log: Vec<(u64, u64)> = Vec::new();
        let mut newest = std::collections::HashMap::new();
        let mut floor = 1;
        let mut h = 0x9e37_79b9_7f4a_7c15u64;
        // 400 keys over 8 chunks of 32 slots: chunks overflow; few tag bits: tags collide.
        let keys: Vec<u64> = (0..400u64)
            .map(|i| {
                h = h.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (i % 8) | (h & (0x1f << 40)) | ((h >> 20) % 200) << 49
            })
            .collect();
        let insert =
            |index: &ColdIndex, batch: &mut ChunkBatch, log: &mut Vec<(u64, u64)>, hash: u64, floor: u64| {
                let placement = index.place_in(batch, hash, floor).unwrap();
                log.push((hash, placement.prev_address));
                let address = log.len() as u64;
                index.commit_in(batch, placement, address).unwrap();
                address
            };
        for round in 0..6u64 {
            // A batch read up front and kept current by the inserts (chunk GC in between moves
            // chunks without changing them); the re-inserts below read each chunk instead.
            let mut batch = index.read_batch(keys.iter().copied(), 8).unwrap();
            for (i, &hash) in keys.iter().enumerate() {
                if !(i as u64 + round).is_multiple_of(3) {
                    let address = insert(&index, &mut batch, &mut log, hash, floor);
                    newest.insert(hash, address);
                }
                index.collect_garbage(2 * 4096).unwrap();
            }
            // Truncate the oldest half of the model log after re-inserting its live records.
            let new_floor = floor + (log.len() as u64 + 1 - floor) / 2;
            for (&hash, address) in newest.iter_mut() {
                if *address < new_floor {
                    *address = insert(&index, &mut ChunkBatch::default(), &mut log, hash, floor);
                }
            }
            floor = new_floor;
            for (&hash, &address) in &newest {
                assert_eq!(lookup(&index, &log, hash, floor), Some(address), "round {round}");
            }
        }
        for _ in 0..8 {
            index.collect_garbage(2 * 4096).unwrap(); // each pass halves the log at most
        }
        assert!(
            index.log.size_bytes() <= 2 * index.live_bytes() + 3 * 4096,
            "{} {}",
            index.log.size_bytes(),
            index.live_bytes()
        );
        index.log.flush().unwrap();
        let (begin, tail) = (index.log.begin(), index.log.tail());
        let rebuilt = ColdIndex::new(chunk_log(&storage, begin, tail), 8);
        rebuilt.rebuild().unwrap();
        for (&hash, &address) in &newest {
            assert_eq!(lookup(&rebuilt, &log, hash, floor), Some(address));
        }
    }
}
