//! The table: the sorted table file (a `TableFile`), its sparse index and the interval cache
//! (§5.1, §5.3, §5.4). The engine keeps a `Table` under a `RwLock`: readers (`get`, `scan_interval`,
//! `verify`) take the read lock, the committer takes the write lock for one bounded step of
//! `apply` calls at a time.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use parking_lot::Mutex;
use strata_core::{Error, Key, Result, Value};

use super::cache::{owned_by, owner_key, IntervalCache, IntervalData, SpareBuffers};
use super::record::{self, HeaderParse};
use super::sparse_index::{self, Cursor, SparseIndex, NO_SLOT};
use crate::flexfile::{LogMark, TableFile};

#[path = "table_apply.rs"]
mod apply;
#[path = "table_oversized.rs"]
mod oversized;
#[path = "table_scan.rs"]
mod scan;
pub use apply::Entry;
pub use scan::Resume;

/// Interval bounds and cache size.
#[derive(Clone, Copy, Debug)]
pub struct TableConfig {
    /// An interval larger than this (and holding at least two records) is split.
    pub max_interval_bytes: u64,
    /// An interval with more records than this is split.
    pub max_interval_records: u32,
    /// Recovery samples the table file every this many bytes (§5.4).
    pub rebuild_interval_bytes: u64,
    pub cache_bytes: u64,
    /// A scan's cache miss also reads the intervals after it in scan order, up to this many bytes
    /// in all, with the same table-file read (0: no read-ahead).
    pub scan_readahead_bytes: u64,
    /// An interval estimated to span more table-file extents than this after a change is
    /// rewritten as one extent instead (`FlexOptions::rewrite_above_extents`).
    pub rewrite_above_extents: u32,
}

/// Bytes requested from `read_extent` per recovery sample: enough for the header and a short key.
const SAMPLE_READ_BYTES: usize = 512;

/// Upper bound of `max_interval_bytes`, of `rebuild_interval_bytes`, and of the new records one
/// `apply_in_interval` merges into an interval, so that an interval stays far below the index's
/// `MAX_INTERVAL_BYTES` (4 GiB): a split interval is at most the first, a sampled one about
/// the second, and a change adds at most the third to either.
pub(super) const MAX_CONFIGURED_INTERVAL_BYTES: u64 = 1 << 30;
/// A rebuild whose samples find no record key to start an interval for this many bytes reports
/// corruption: with samples at most `MAX_CONFIGURED_INTERVAL_BYTES` apart, that is two or more
/// failed samples in a row (FlexDB only inserts and removes whole records, so every extent but
/// the continuation of a long record starts with one).
const MAX_SAMPLED_INTERVAL_BYTES: u64 = 2 << 30;

/// The interval cache's counters and use (`Table::cache_stats`).
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub used_bytes: u64,
    /// Of `used_bytes`, allocated by cached intervals but not used.
    pub slack_bytes: u64,
    pub intervals: u64,
}

pub struct Table {
    file: Arc<dyn TableFile>,
    file_name: String,
    index: SparseIndex,
    cache: Mutex<IntervalCache>,
    config: TableConfig,
    /// Changes with every `apply`: a scan's `Resume` cursor is valid while it stays the same.
    version: u64,
    pub rebuild_bytes_read: u64,
    pub interval_loads: AtomicU64,
    /// Index keys of intervals found over the limits when read (see table_oversized.rs).
    oversized: oversized::Pending,
    pub intervals_split_on_access: u64,
}

fn corrupt(file: &str, offset: u64, what: impl Into<String>) -> Error {
    Error::corruption(file, offset, what)
}

impl Table {
    /// Opens the table over `file`, rebuilding the sparse index by sampling (§5.4).
    /// `max_interval_bytes` and `rebuild_interval_bytes` are clamped to 1 GiB (see
    /// `MAX_CONFIGURED_INTERVAL_BYTES`).
    pub fn open(file: Arc<dyn TableFile>, file_name: String, mut config: TableConfig) -> Result<Table> {
        config.max_interval_bytes = config.max_interval_bytes.clamp(1, MAX_CONFIGURED_INTERVAL_BYTES);
        config.rebuild_interval_bytes = config.rebuild_interval_bytes.clamp(1, MAX_CONFIGURED_INTERVAL_BYTES);
        let mut table = Table {
            file,
            file_name,
            index: SparseIndex::default(),
            cache: Mutex::new(IntervalCache::new(config.cache_bytes)),
            config,
            version: 0,
            rebuild_bytes_read: 0,
            interval_loads: AtomicU64::new(0),
            oversized: oversized::Pending::default(),
            intervals_split_on_access: 0,
        };
        table.rebuild()?;
        Ok(table)
    }

    pub fn index(&self) -> &SparseIndex {
        &self.index
    }

    pub fn file_len(&self) -> u64 {
        self.file.len()
    }

    pub fn sync(&self) -> Result<()> {
        self.file.sync()
    }

    /// How far the table file's log is durable (see `TableFile::synced_log`).
    pub fn synced_log(&self) -> Option<LogMark> {
        self.file.synced_log()
    }

    /// Memory the table keeps outside the interval cache: the sparse index and the table
    /// file's own structures (FlexTree, buffers).
    pub fn memory_bytes_outside_cache(&self) -> u64 {
        self.index.memory_bytes() + self.file_memory_bytes()
    }

    /// What the table file keeps in memory (FlexTree, buffers).
    pub fn file_memory_bytes(&self) -> u64 {
        self.file.memory_bytes()
    }

    /// The table file's background upkeep (see `TableFile::maintain`); the committer calls it
    /// under the table's read lock.
    pub fn maintain_file(&self) -> Result<()> {
        self.file.maintain()
    }

    /// The table file's own counters.
    pub fn file_counters(&self) -> Vec<(&'static str, u64)> {
        self.file.counters()
    }

    pub fn cache_capacity_bytes(&self) -> u64 {
        self.cache.lock().capacity_bytes()
    }

    /// Resizes the interval cache (evicting down to the new size).
    pub fn set_cache_capacity(&self, capacity_bytes: u64) {
        let evicted = self.cache.lock().set_capacity(capacity_bytes);
        drop(evicted); // outside the lock
    }

    pub fn cache_stats(&self) -> CacheStats {
        let c = self.cache.lock();
        CacheStats {
            hits: c.hits(),
            misses: c.misses(),
            used_bytes: c.used_bytes(),
            slack_bytes: c.slack_bytes(),
            intervals: c.len() as u64,
        }
    }

    fn rebuild(&mut self) -> Result<()> {
        let len = self.file.len();
        let step = self.config.rebuild_interval_bytes;
        let mut starts: Vec<(Key, u64)> = vec![(Vec::new(), 0)];
        let mut probe = step;
        while probe < len {
            let Some((start, bytes)) = self.file.read_extent(probe, SAMPLE_READ_BYTES)? else { break };
            self.rebuild_bytes_read += bytes.len() as u64;
            let last = starts.last().map_or(0, |(_, o)| *o);
            if let Some((key, at)) = self.sample_key(start, bytes, last)? {
                // Out-of-order keys mean damage; leave it to the interval's load to report.
                if starts.last().is_some_and(|(k, _)| *k < key) {
                    starts.push((key, at));
                }
            }
            probe = probe.max(start) + step;
        }
        let ends = starts.iter().skip(1).map(|(_, o)| *o).chain([len]);
        let gap = starts
            .iter()
            .zip(ends)
            .find(|((_, start), end)| end.saturating_sub(*start) > MAX_SAMPLED_INTERVAL_BYTES);
        let index = match gap {
            Some(((_, start), end)) => Err(sparse_index::BadInterval { offset: *start, end }),
            None => SparseIndex::build(&starts, len),
        };
        self.index = index.map_err(|bad| {
            let bytes = bad.end.saturating_sub(bad.offset);
            let what = format!("no record key found to start an interval in {bytes} bytes");
            corrupt(&self.file_name, bad.offset, what)
        })?;
        Ok(())
    }

    /// The key of the first record that starts an extent at or before `start` and after
    /// `floor` (where the interval before starts: an interval never starts where another does,
    /// or the one before would be left empty and every key below the sample unread). An extent
    /// normally starts with a record (FlexDB only inserts and removes whole records), but a
    /// record longer than what the file merges into one extent continues into the next; then
    /// this steps back one extent at a time, at most one record length.
    fn sample_key(&mut self, mut start: u64, mut bytes: Vec<u8>, floor: u64) -> Result<Option<(Key, u64)>> {
        let lowest = start.saturating_sub(record::MAX_RECORD_BYTES as u64).max(floor);
        loop {
            if start <= floor {
                return Ok(None);
            }
            if let Some(key) = self.decode_key_at(start, bytes)? {
                return Ok(Some((key, start)));
            }
            if start <= lowest {
                return Ok(None);
            }
            let Some((prev, b)) = self.file.read_extent(start - 1, SAMPLE_READ_BYTES)? else {
                return Ok(None);
            };
            self.rebuild_bytes_read += b.len() as u64;
            (start, bytes) = (prev, b);
        }
    }

    /// The key of a checksum-verified record at `start`, or `None` if none starts there.
    fn decode_key_at(&mut self, start: u64, mut bytes: Vec<u8>) -> Result<Option<Key>> {
        let header = match record::parse_header(&bytes) {
            Ok(HeaderParse::Complete(h)) => h,
            _ => return Ok(None),
        };
        if bytes.len() < header.record_len() {
            bytes.resize(header.record_len(), 0);
            let n = self.file.read(start, &mut bytes)?;
            self.rebuild_bytes_read += n as u64;
            bytes.truncate(n);
        }
        Ok(record::decode(&bytes).ok().map(|(key, _, _)| key))
    }

    /// The interval's records: from the cache, or read, verified and cached.
    fn load(&self, cur: &Cursor) -> Result<Arc<IntervalData>> {
        self.load_with(cur, true)
    }

    /// `load`, caching what it reads only if `cache_it` (the committer does not fill the cache
    /// with the intervals it rewrites).
    fn load_with(&self, cur: &Cursor, cache_it: bool) -> Result<Arc<IntervalData>> {
        let e = self.index.interval(cur);
        let slot = e.cache_slot().load(Relaxed);
        let spare = {
            let mut cache = self.cache.lock();
            if slot == NO_SLOT {
                cache.count_miss();
            } else if let Some(d) = cache.get(slot, owned_by(e.key())) {
                return Ok(d.clone());
            }
            if cache_it {
                cache.take_spare(e.size_bytes() as usize)
            } else {
                SpareBuffers::default() // the committer's reads are not cached: nothing comes back
            }
        };
        self.interval_loads.fetch_add(1, Relaxed);
        let data = self.read_interval(cur, spare)?;
        if !cache_it {
            return Ok(data);
        }
        Ok(self.cache_loaded(cur, slot, data))
    }

    /// Reads the interval at `cur` from the table file (never the cache) into `spare`'s buffers
    /// and checks it.
    fn read_interval(&self, cur: &Cursor, spare: SpareBuffers) -> Result<Arc<IntervalData>> {
        let offset = self.index.offset(cur);
        let size = self.index.interval(cur).size_bytes();
        let size = usize::try_from(size).map_err(|_| Error::invalid("interval too large"))?;
        let (mut buf, spans) = spare;
        buf.clear();
        buf.reserve_exact(size); // `resize` alone would double a short buffer's capacity
        buf.resize(size, 0);
        let n = self.file.read(offset, &mut buf)?;
        if n != size {
            return Err(corrupt(&self.file_name, offset + n as u64, "table file ends inside an interval"));
        }
        self.check_interval(cur, offset, IntervalData::decode_reusing(buf, spans))
    }

    /// Checks the decoded interval at `cur` (read from `offset`) against
    /// the index, including the routing invariant: its keys are in `[s_i, s_{i+1})` (its index key
    /// and the next one's). Splits rely on that (a separator must be below `s_{i+1}`).
    fn check_interval(
        &self,
        cur: &Cursor,
        offset: u64,
        decoded: std::result::Result<IntervalData, (usize, String)>,
    ) -> Result<Arc<IntervalData>> {
        let e = self.index.interval(cur);
        let data = decoded.map_err(|(pos, w)| corrupt(&self.file_name, offset + pos as u64, w))?;
        if !data.is_empty() && e.key().cmp_slice(data.key(0)).is_gt() {
            return Err(corrupt(&self.file_name, offset, "interval holds a key below its index key"));
        }
        let last = data.len().checked_sub(1).map(|i| data.key(i));
        if let (Some(last), Some(upper)) = (last, self.index.next_key(cur)) {
            if upper.cmp_slice(last).is_le() {
                return Err(corrupt(&self.file_name, offset, "interval holds a key of the next interval"));
            }
        }
        if data.is_empty() && !self.index.is_first(cur) {
            return Err(corrupt(&self.file_name, offset, "empty interval"));
        }
        if e.count().is_some_and(|c| c as usize != data.len()) {
            return Err(corrupt(
                &self.file_name,
                offset,
                "interval holds a different number of records than indexed",
            ));
        }
        Ok(Arc::new(data))
    }

    /// Caches `data`, just read for the interval at `cur` whose slot was `slot` before the read,
    /// unless another reader cached it meanwhile; returns the cached copy.
    fn cache_loaded(&self, cur: &Cursor, slot: u32, data: Arc<IntervalData>) -> Arc<IntervalData> {
        let e = self.index.interval(cur);
        let (new_slot, evicted) = {
            let mut cache = self.cache.lock();
            let now = e.cache_slot().load(Relaxed);
            if now != NO_SLOT && now != slot {
                if let Some(d) = cache.get(now, owned_by(e.key())) {
                    return d.clone(); // another reader cached it meanwhile
                }
            }
            let (new_slot, evicted) = cache.insert(owner_key(e.key()), data.clone());
            e.cache_slot().store(new_slot.unwrap_or(NO_SLOT), Relaxed);
            (new_slot, evicted)
        };
        drop(evicted); // outside the lock
        if new_slot.is_some() {
            self.note_if_oversized(cur, &data); // a split needs the records cached
        }
        data
    }

    /// The records of every interval `entries` (sorted) fall in, in order, each interval once
    /// (from the cache, or read without caching). The committer calls it under the read lock and
    /// passes the result to `apply_sorted` under the write lock, so that readers keep going while
    /// it waits for the disk.
    pub fn prefetch(&self, entries: &[Entry<'_>]) -> Result<Vec<Arc<IntervalData>>> {
        let mut out = Vec::new();
        let mut rest = entries;
        while let Some(&(first, _)) = rest.first() {
            let cur = self.index.seek(first);
            out.push(self.load_with(&cur, false)?);
            rest = match self.index.next_key(&cur) {
                Some(upper) => rest.get(apply::entries_below(rest, upper)..).unwrap_or_default(),
                None => &[],
            };
        }
        Ok(out)
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        let cur = self.index.seek(key);
        let data = self.load(&cur)?;
        Ok(data.find(key).ok().map(|i| data.value(i).to_vec()))
    }

    /// Makes the table hold `value` for `key` (`None`: no record). Idempotent. Caller holds the
    /// write lock. On error the table file and index may disagree: the engine poisons itself.
    #[cfg(test)]
    pub fn apply(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        self.apply_sorted(&[(key, value)], &[])
    }

    /// Write-through to the cache, then split an oversized interval or merge away an empty one.
    fn after_change(&mut self, cur: Cursor, records: IntervalData) {
        let e = self.index.interval(&cur);
        let (owner, slot) = (e.key().to_vec(), e.cache_slot().load(Relaxed));
        let too_big = self.over_limits(&records);
        let cache = self.cache.get_mut();
        if records.is_empty() && self.index.interval_count() > 1 {
            cache.invalidate(slot);
            let survivor = if self.index.is_first(&cur) { Some(cur) } else { self.index.prev(&cur) };
            if let Some(s) = survivor {
                let survivor_slot = self.index.interval(&s).cache_slot().load(Relaxed);
                if let Some(removed) = self.index.absorb_next(&s) {
                    cache.invalidate(removed);
                }
                if self.index.is_first(&s) {
                    cache.invalidate(survivor_slot);
                }
            }
        } else if too_big {
            // A cached interval stays cached as its pieces (no re-read of what was in memory).
            let was_cached = cache.contains(slot, owned_by(e.key()));
            cache.invalidate(slot);
            let cuts = self.split(&owner, &records);
            if was_cached {
                let mut evicted = Vec::new();
                self.cache_pieces(&records, &cuts, &mut evicted);
                drop(evicted); // the committer's step: like `update`'s evictions, under the lock
            }
        } else if slot != NO_SLOT {
            // The committer's step: the old interval and evictions are dropped under the lock.
            drop(cache.update(slot, |o| o.as_slice() == owner.as_slice(), Arc::new(records)));
        }
    }

    /// Splits the interval with index key `owner` (holding `records`) into the fewest pieces of
    /// about equal size within the limits, cutting from the right so the left part keeps its key
    /// and cursor. A right part's index key is the shortest separator between the records on both
    /// sides of its cut. Equal pieces, not pieces of half the limit plus a remainder: halving
    /// would make 33 records 16 + 16 + 1, and a table loaded by large commits would average 13
    /// records per interval of 32 (each scan visiting and missing more intervals).
    /// Returns where the pieces start (record indexes after the first piece's 0), ascending.
    fn split(&mut self, owner: &[u8], records: &IntervalData) -> Vec<usize> {
        let (max_records, max_bytes) =
            (self.config.max_interval_records as usize, self.config.max_interval_bytes);
        let total_bytes = records.bytes().len() as u64;
        let by_records = records.len().div_ceil(max_records.max(1));
        let by_bytes = usize::try_from(total_bytes.div_ceil(max_bytes)).unwrap_or(usize::MAX);
        let pieces = by_records.max(by_bytes).max(2);
        let (piece_records, piece_bytes) =
            (records.len().div_ceil(pieces), total_bytes.div_ceil(pieces as u64));
        let mut cuts = Vec::new(); // record index where a new interval starts
        let (mut n, mut bytes) = (0usize, 0u64);
        for i in 0..records.len() {
            let len = records.record_len(i) as u64;
            // Equal by the limit that sets the number of pieces; the other one only as a limit.
            let full = if by_bytes > by_records { bytes >= piece_bytes } else { n >= piece_records };
            if n > 0 && (full || n >= max_records || bytes + len > max_bytes) {
                cuts.push(i);
                n = 0;
                bytes = 0;
            }
            n += 1;
            bytes += len;
        }
        // Records of unequal size can leave a short last piece: it joins the one before if both fit.
        if !cuts.is_empty() {
            let before = cuts.len().checked_sub(2).and_then(|i| cuts.get(i)).copied().unwrap_or(0);
            let joined_bytes = (records.bytes().len() - records.record_start(before)) as u64;
            if records.len() - before <= max_records && joined_bytes <= max_bytes {
                cuts.pop();
            }
        }
        let mut end = records.len();
        for &cut in cuts.iter().rev() {
            let cur = self.index.seek(owner);
            let right_key = sparse_index::shortest_separator(records.key(cut - 1), records.key(cut));
            // The interval's size fits the index's u32, so do positions inside it.
            let (left_bytes, left_count) = (records.record_start(cut) as u32, cut as u32);
            self.index.split(&cur, left_bytes, left_count, right_key, (end - cut) as u32);
            end = cut;
        }
        cuts
    }

    /// Reads every interval and checks every record: (records, bytes).
    pub fn verify(&self) -> Result<(u64, u64)> {
        let (mut records, mut bytes) = (0u64, 0u64);
        let mut last_key: Option<Key> = None;
        let mut cur = Some(self.index.first());
        while let Some(c) = cur {
            let offset = self.index.offset(&c);
            let data = self.read_interval(&c, SpareBuffers::default())?;
            if let (Some(prev), false) = (&last_key, data.is_empty()) {
                if prev.as_slice() >= data.key(0) {
                    return Err(corrupt(&self.file_name, offset, "keys out of order across intervals"));
                }
            }
            if !data.is_empty() {
                last_key = Some(data.key(data.len() - 1).to_vec());
            }
            records += data.len() as u64;
            bytes += data.bytes().len() as u64;
            cur = self.index.next(&c);
        }
        if bytes != self.file.len() {
            return Err(corrupt(&self.file_name, bytes, "the index does not cover the whole table file"));
        }
        Ok((records, bytes))
    }
}

#[cfg(test)]
mod tests {
    use std::ops::Bound;

    use strata_core::KeyRange;
    use strata_io::MemStorage;

    use super::*;
    use crate::flexdb::NaiveTableFile;

    fn config() -> TableConfig {
        TableConfig {
            rewrite_above_extents: 2,
            max_interval_bytes: 256,
            max_interval_records: 4,
            rebuild_interval_bytes: 64,
            cache_bytes: 4096,
            scan_readahead_bytes: 512,
        }
    }

    fn key(i: u32) -> Key {
        format!("k{i:04}").into_bytes()
    }

    /// Every key of `table` in `range`, window by window, in scan order.
    fn scan_all(table: &Table, reverse: bool) -> Vec<Key> {
        let (mut all, mut range) = (Vec::new(), KeyRange::all());
        loop {
            let w = table.scan_interval(&range, reverse, None).unwrap();
            let keys: Vec<Key> = (w.lo..w.hi).map(|i| w.data.key(i).to_vec()).collect();
            let Some(bound) = (if reverse { keys.first() } else { keys.last() }).cloned() else { return all };
            match reverse {
                false => all.extend(keys),
                true => all.extend(keys.into_iter().rev()),
            }
            if !w.more {
                return all;
            }
            match reverse {
                false => range.start = Bound::Excluded(bound),
                true => range.end = Bound::Excluded(bound),
            }
        }
    }

    /// A miss reads into the buffers of an evicted interval: intervals of very different sizes
    /// read in turn through a cache with room for a few must each come back exactly.
    #[test]
    fn misses_read_exact_records_into_reused_buffers_of_other_sizes() {
        use rand::{Rng, SeedableRng};
        let file: Arc<dyn TableFile> = Arc::new(NaiveTableFile::open(Arc::new(MemStorage::new())).unwrap());
        let mut table = Table::open(file, "t".into(), TableConfig { cache_bytes: 1200, ..config() }).unwrap();
        let mut model = std::collections::BTreeMap::new();
        for i in 0..200u32 {
            let value = vec![i as u8; (i as usize * 37) % 120];
            table.apply(&key(i), Some(&value)).unwrap();
            model.insert(key(i), value);
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..2000 {
            let k = key(rng.gen_range(0..200));
            assert_eq!(table.get(&k).unwrap().as_ref(), model.get(&k));
        }
        let stats = table.cache_stats();
        assert!(stats.misses > 1000, "the cache must be too small to hold the table");
        assert!(stats.slack_bytes > 0, "reused buffers larger than their intervals were expected");
    }

    /// UDB-like keys: 19 zero bytes and a scrambled 8-byte number.
    fn udb_key(i: u64) -> Key {
        [&[0u8; 19][..], &i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()].concat()
    }

    /// Splits give intervals separators (short, mostly not record keys) as index keys; a reopen
    /// rebuilds the index from sampled record keys (§5.4), and the rebuilt index serves gets,
    /// scans both ways, `verify` and further commits (splitting with separators again), twice.
    #[test]
    fn reopen_rebuilds_a_working_index_after_separator_splits() {
        let file: Arc<dyn TableFile> = Arc::new(NaiveTableFile::open(Arc::new(MemStorage::new())).unwrap());
        let mut table = Table::open(file.clone(), "t".into(), config()).unwrap();
        let mut model = std::collections::BTreeMap::new();
        for i in 0..300 {
            table.apply(&udb_key(i), Some(&[i as u8; 20])).unwrap();
            model.insert(udb_key(i), vec![i as u8; 20]);
        }
        let index_keys: Vec<Key> = table.index().intervals().into_iter().map(|(k, ..)| k).collect();
        let separators = index_keys.iter().filter(|k| !model.contains_key(*k)).count();
        assert!(separators * 2 > index_keys.len(), "{separators} of {}", index_keys.len());
        assert!(index_keys.iter().all(|k| k.len() < 24), "{index_keys:?}");
        drop(table);
        for round in 0..2u64 {
            let mut table = Table::open(file.clone(), "t".into(), config()).unwrap();
            let intervals = table.index().intervals();
            assert!(intervals.len() > 10, "{} intervals", intervals.len());
            assert!(
                intervals.iter().skip(1).all(|(k, ..)| model.contains_key(k)),
                "sampled keys are records"
            );
            for (k, v) in &model {
                assert_eq!(table.get(k).unwrap().as_ref(), Some(v));
            }
            assert_eq!(table.get(&udb_key(10_000)).unwrap(), None);
            let keys: Vec<Key> = model.keys().cloned().collect();
            assert_eq!(scan_all(&table, false), keys);
            assert_eq!(scan_all(&table, true), keys.iter().rev().cloned().collect::<Vec<_>>());
            assert_eq!(table.verify().unwrap().0, model.len() as u64);
            for i in (300 + round * 100)..(400 + round * 100) {
                table.apply(&udb_key(i), Some(b"new")).unwrap();
                model.insert(udb_key(i), b"new".to_vec());
            }
            for i in (round..300).step_by(7) {
                table.apply(&udb_key(i), None).unwrap();
                model.remove(&udb_key(i));
            }
            for (k, v) in &model {
                assert_eq!(table.get(k).unwrap().as_ref(), Some(v));
            }
            assert_eq!(table.verify().unwrap().0, model.len() as u64);
        }
    }

    /// Record counts of the intervals after one commit of `n` new records into an empty table.
    fn pieces_after_one_commit(n: u32, max_records: u32, value_bytes: impl Fn(u32) -> usize) -> Vec<u32> {
        pieces_within(n, max_records, 1 << 20, value_bytes)
    }

    fn pieces_within(
        n: u32,
        max_records: u32,
        max_bytes: u64,
        value_bytes: impl Fn(u32) -> usize,
    ) -> Vec<u32> {
        let file: Arc<dyn TableFile> = Arc::new(NaiveTableFile::open(Arc::new(MemStorage::new())).unwrap());
        let config =
            TableConfig { max_interval_records: max_records, max_interval_bytes: max_bytes, ..config() };
        let mut table = Table::open(file, "t".into(), config).unwrap();
        let values: Vec<Vec<u8>> = (0..n).map(|i| vec![7; value_bytes(i)]).collect();
        let keys: Vec<Key> = (0..n).map(key).collect();
        let entries: Vec<Entry<'_>> =
            keys.iter().zip(&values).map(|(k, v)| (k.as_slice(), Some(&v[..]))).collect();
        table.apply_sorted(&entries, &[]).unwrap();
        assert_eq!(table.verify().unwrap().0, u64::from(n));
        table.index.intervals().iter().filter_map(|i| i.3).collect()
    }

    #[test]
    fn a_split_makes_the_fewest_equal_pieces_not_half_the_limit_plus_a_remainder() {
        // The old split cut pieces of max/2 = 16 records: 33 → 16 + 16 + 1, 42 → 16 + 16 + 10.
        assert_eq!(pieces_after_one_commit(33, 32, |_| 10), [17, 16]);
        assert_eq!(pieces_after_one_commit(42, 32, |_| 10), [21, 21]);
        assert_eq!(pieces_after_one_commit(64, 32, |_| 10), [32, 32]);
        assert_eq!(pieces_after_one_commit(65, 32, |_| 10), [22, 22, 21]);
        // Unequal records, split by count: the large ones do not make a piece of their own.
        assert_eq!(pieces_after_one_commit(40, 32, |i| if i < 10 { 400 } else { 10 }), [20, 20]);
        // Two records of 451 bytes, 31 of 11, at most 1000 bytes: the byte limit cuts the first
        // piece at 10 records, then pieces of 17 would leave 6 alone; they join the 17 (23 fit).
        assert_eq!(pieces_within(33, 32, 1000, |i| if i < 2 { 439 } else { 0 }), [10, 23]);
    }

    #[test]
    fn apply_is_idempotent_and_keeps_the_file_sorted() {
        let file: Arc<dyn TableFile> = Arc::new(NaiveTableFile::open(Arc::new(MemStorage::new())).unwrap());
        let mut table = Table::open(file.clone(), "t".into(), config()).unwrap();
        for _ in 0..2 {
            for i in (0..200).rev() {
                let value = if i % 3 == 0 { Vec::new() } else { vec![i as u8; (i % 17) as usize] };
                table.apply(&key(i), Some(&value)).unwrap();
            }
        }
        for i in (0..200).step_by(2) {
            table.apply(&key(i), None).unwrap();
            table.apply(&key(i), None).unwrap();
        }
        let (records, bytes) = table.verify().unwrap();
        assert_eq!((records, bytes), (100, file.len()));
        let reopened = Table::open(file, "t".into(), config()).unwrap();
        assert!(reopened.index().interval_count() > 1);
        for i in 0..200 {
            let want =
                (i % 2 == 1).then(|| if i % 3 == 0 { Vec::new() } else { vec![i as u8; (i % 17) as usize] });
            assert_eq!(reopened.get(&key(i)).unwrap(), want, "key {i}");
        }
        let (mut all, mut range) = (Vec::new(), KeyRange::all());
        loop {
            let w = reopened.scan_interval(&range, true, None).unwrap();
            all.extend((w.lo..w.hi).rev().map(|i| w.data.key(i).to_vec()));
            if !w.more {
                break;
            }
            range.end = Bound::Excluded(w.data.key(w.lo).to_vec());
        }
        assert_eq!(all.len(), 100);
        assert!(all.windows(2).all(|w| w[0] > w[1]));
    }

    /// Every single-bit flip in the table file is reported as corruption or leaves the data
    /// readable as written: never a wrong value, never a key reading nothing.
    #[test]
    fn damaged_records_are_corruption_never_data() {
        let file: Arc<dyn TableFile> = Arc::new(NaiveTableFile::open(Arc::new(MemStorage::new())).unwrap());
        let mut table = Table::open(file.clone(), "t".into(), config()).unwrap();
        for i in 0..40 {
            table.apply(&key(i), Some(format!("value{i}").as_bytes())).unwrap();
        }
        let mut errors = 0;
        for at in 0..file.len() {
            let mut byte = [0u8];
            file.read(at, &mut byte).unwrap();
            file.write(at, &[byte[0] ^ 0x10]).unwrap();
            match Table::open(file.clone(), "t".into(), config()) {
                Err(e) => {
                    assert!(e.is_corruption(), "{e}");
                    errors += 1;
                }
                Ok(t) => {
                    let mut failed = t.verify().is_err();
                    for i in 0..40 {
                        match t.get(&key(i)) {
                            Ok(v) => assert!(
                                v == Some(format!("value{i}").into_bytes()),
                                "flip at byte {at}: key {i} read {v:?}"
                            ),
                            Err(e) => {
                                assert!(e.is_corruption(), "{e}");
                                failed = true;
                            }
                        }
                    }
                    assert!(failed, "flip at byte {at} went unnoticed");
                    errors += 1;
                }
            }
            file.write(at, &byte).unwrap();
        }
        assert_eq!(errors, file.len());
    }

    /// Regression (fuzzing, `flex_table_data`: 255 bytes inserted into `flexdb-table.data`): the
    /// records between the file's start and the first sample were unreadable, so sampling stepped
    /// back to offset 0 and found a checksum-valid record there (a copy of a later one). It
    /// became a second interval at offset 0, the first interval (every key below it) was left
    /// empty, and a get of the first key read nothing instead of the damage.
    #[test]
    fn a_sample_stepping_back_to_the_previous_interval_s_start_is_no_interval() {
        let file: Arc<dyn TableFile> = Arc::new(NaiveTableFile::open(Arc::new(MemStorage::new())).unwrap());
        let mut table = Table::open(file.clone(), "t".into(), config()).unwrap();
        for i in 0..40 {
            table.apply(&key(i), Some(&[7u8; 20])).unwrap();
        }
        drop(table);
        let record_len = 4 + 1 + 1 + key(0).len() + 20;
        let extent_start = |o: u64| file.read_extent(o, 1).unwrap().unwrap().0;
        let second_extent = (0..file.len()).map(extent_start).find(|&s| s > 0).unwrap();
        // The first sample's extent unreadable (its first record's checksum field), and a copy of
        // a later record at offset 0, where sampling steps back to.
        file.write(second_extent, &[0xff; 4]).unwrap();
        let mut later = vec![0u8; record_len];
        file.read(30 * record_len as u64, &mut later).unwrap();
        file.write(0, &later).unwrap();
        let table = Table::open(file.clone(), "t".into(), config()).unwrap();
        let got = table.get(&key(0));
        assert!(matches!(&got, Err(e) if e.is_corruption()), "{got:?}");
    }
}
