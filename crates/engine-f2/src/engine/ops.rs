//! Point operations: lookups through the hot and cold hash chains, applying writes to the hot
//! log, batches and read-modify-write (F2 Algorithm 1).

use std::sync::atomic::Ordering::Relaxed;

use parking_lot::MutexGuard;
use strata_core::batch_codec::encode_batch;
use strata_core::{Durability, Result, Value, WriteBatch};

use super::memory_split::GetSource;
use super::{Counters, Inner};
use crate::hash::key_hash;
use crate::index::cold::ChunkBatch;
use crate::index::hot::{EntryRef, HotIndex};
use crate::log::{HybridLog, ReadCache, FIRST_ADDRESS, READ_CACHE_FLAG};
use crate::record::{self, OwnedRecord};

/// Applies one put (`Some`) or delete (`None`) to the hot log. Caller holds the key's write
/// latch and the write lock shared (or is recovery); writers of other keys run concurrently. A put of a same-sized value onto a record in the mutable region updates it in
/// place; anything else appends a record at the tail and swings the index entry to it (CAS,
/// retried if a reader cached a record at the chain head or compaction's truncation cleared the
/// entry meanwhile). A read-cache record at the chain head is invalidated and bypassed.
/// `hash` is `key_hash(key)` (callers have it already: it picked the key's latch stripe).
pub(crate) fn apply_op(
    hot: &HybridLog,
    index: &HotIndex,
    cache: Option<&ReadCache>,
    key: &[u8],
    hash: u64,
    value: Option<&[u8]>,
    counters: Option<&Counters>,
) -> Result<Applied> {
    debug_assert_eq!(hash, key_hash(key), "apply_op got the hash of another key");
    let (mut entry, mut hot_head) = resolved_entry(index, cache, hash);
    if let Some(v) = value {
        let read_only = hot.read_only();
        let mut address = hot_head;
        while address >= read_only && address >= FIRST_ADDRESS {
            // A probe, not a copy of the record: an update of a mutable record needs none.
            let Some((is_key, prev_address)) = hot.probe(address, key)? else { break };
            if is_key {
                if hot.update_in_place(address, v) {
                    if let Some(c) = counters {
                        c.in_place_updates.fetch_add(1, Relaxed);
                    }
                    return Ok(Applied::InPlace { address });
                }
                break;
            }
            address = chain_step(hot, address, prev_address)?;
        }
    }
    let live_prev = |a: u64| if a >= hot.begin() { a } else { 0 };
    // Overflow buckets the index grew beyond its share come out of the hot log's window, so the
    // engine as a whole stays within its memory budget.
    hot.set_lent_bytes(index.overrun_bytes());
    let address = hot.append(&mut record::encode(key, value, live_prev(hot_head)))?;
    if let Some(c) = counters {
        c.appends.fetch_add(1, Relaxed);
    }
    let previous_head = hot_head;
    let mut address = address;
    loop {
        if entry.cas_address(address).is_ok() {
            return Ok(Applied::Appended { previous_head });
        }
        (entry, hot_head) = resolved_entry(index, cache, hash);
        // Writers of one entry hold one latch stripe, so a rival CAS came from a reader's cache
        // insert or from compaction and the head is older than our record; if it ever is not,
        // re-linking would make the chain go forward, so a fresh copy is appended instead.
        if hot_head >= address || !hot.set_prev_address(address, live_prev(hot_head)) {
            // A page turn made the unpublished record read-only meanwhile (its page may be on
            // disk with the old previous address): publish a fresh copy instead. The first one
            // stays unreachable, and superseded for compaction and the open-time scan.
            address = hot.append(&mut record::encode(key, value, live_prev(hot_head)))?;
        }
    }
}

/// How [`apply_op`] applied a write: in place at `address`, or appended at the tail over a chain
/// whose hot-log head was `previous_head` (0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Applied {
    InPlace { address: u64 },
    Appended { previous_head: u64 },
}

/// The index entry for `hash` (created if missing) and the hot-log address its chain continues
/// at: a read-cache record at the head is invalidated and skipped.
fn resolved_entry<'a>(index: &'a HotIndex, cache: Option<&ReadCache>, hash: u64) -> (EntryRef<'a>, u64) {
    loop {
        let entry = index.find_or_create(hash);
        let address = entry.address();
        if address & READ_CACHE_FLAG == 0 {
            return (entry, address);
        }
        match cache.and_then(|c| c.read(address).map(|r| (c, r))) {
            Some((c, rec)) => {
                c.invalidate(address);
                return (entry, rec.prev_address);
            }
            // Evicted meanwhile: eviction swung the entry to the record's previous address.
            None if cache.is_some() => continue,
            None => return (entry, 0),
        }
    }
}

/// A hot chain's head as a reader sees it: the entry value, a read-cache record at the head (if
/// any) and the hot-log address where the chain continues.
/// A record found and its address (hot-log address, or a flagged read-cache address).
pub(crate) type Found = Option<(u64, OwnedRecord)>;

pub(crate) struct ChainHead {
    pub entry_value: u64,
    pub cached: Option<(u64, OwnedRecord)>,
    pub hot_address: u64,
}

/// Stripes of the key write latches (`Inner::key_locks`).
pub(crate) const KEY_LOCK_STRIPES: usize = 1024;

/// The latch stripe of a key: derived from its hot-index entry, not from the key alone, because
/// keys sharing an entry share a hash chain and must not append to it concurrently (a writer
/// whose entry CAS failed re-links its record behind the rival's head, which would then be
/// newer than the record itself: a chain going forward).
fn key_stripe(index: &HotIndex, hash: u64) -> usize {
    let mixed = index.entry_id(hash).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    (mixed % KEY_LOCK_STRIPES as u64) as usize
}

/// The previous address of a chain record, checked to go strictly backwards.
fn next_in_chain(hot: &HybridLog, address: u64, rec: &OwnedRecord) -> Result<u64> {
    chain_step(hot, address, rec.prev_address)
}

/// `prev_address` of the record at `address`, checked to go back.
fn chain_step(hot: &HybridLog, address: u64, prev_address: u64) -> Result<u64> {
    if prev_address >= address {
        return Err(hot
            .file
            .corruption(address, format!("hash chain goes forward from {address} to {prev_address}")));
    }
    Ok(prev_address)
}

impl Inner {
    /// The chain head for `hash`, resolving a read-cache record at the head (retrying if it
    /// was evicted under us).
    pub fn chain_head(&self, hash: u64) -> Option<ChainHead> {
        loop {
            let entry = self.hot_index.find(hash)?;
            let address = entry.address();
            if address & READ_CACHE_FLAG == 0 {
                return Some(ChainHead { entry_value: entry.value, cached: None, hot_address: address });
            }
            let Some(cache) = &self.read_cache else {
                return Some(ChainHead { entry_value: entry.value, cached: None, hot_address: 0 });
            };
            if let Some(rec) = cache.read(address) {
                let hot_address = rec.prev_address;
                return Some(ChainHead {
                    entry_value: entry.value,
                    cached: Some((address, rec)),
                    hot_address,
                });
            }
        }
    }

    /// The newest record of `key` reachable from the hot index (a valid read-cache copy, or the
    /// hot log), its address, and the chain head seen.
    pub fn hot_lookup(&self, key: &[u8], hash: u64) -> Result<(Option<ChainHead>, Found)> {
        let Some(head) = self.chain_head(hash) else { return Ok((None, None)) };
        #[cfg(test)]
        test_hooks::after_chain_head();
        if let Some((address, rec)) = &head.cached {
            if !rec.invalid && rec.key == key {
                let found = Some((*address, rec.clone()));
                return Ok((Some(head), found));
            }
        }
        let found = self.hot_chain_find(key, head.hot_address, FIRST_ADDRESS)?;
        Ok((Some(head), found))
    }

    /// Walks a hot chain from `address` down to `floor` (inclusive) looking for `key`.
    fn hot_chain_find(&self, key: &[u8], mut address: u64, floor: u64) -> Result<Option<(u64, OwnedRecord)>> {
        while address >= floor.max(FIRST_ADDRESS) {
            let Some(rec) = self.hot.read(address)? else { return Ok(None) };
            if rec.key == key {
                return Ok(Some((address, rec)));
            }
            address = next_in_chain(&self.hot, address, &rec)?;
        }
        Ok(None)
    }

    /// True when the hot log holds a record of `key` at an address above `above` (ConditionalInsert's
    /// check; `above` = 0 checks the whole chain).
    pub fn hot_has_newer(&self, key: &[u8], hash: u64, above: u64) -> Result<bool> {
        let Some(head) = self.chain_head(hash) else { return Ok(false) };
        Ok(self.hot_chain_find(key, head.hot_address, above + 1)?.is_some())
    }

    /// Walks a cold chain from `address` down to `floor` (inclusive).
    fn cold_chain_find(
        &self,
        key: &[u8],
        mut address: u64,
        floor: u64,
    ) -> Result<Option<(u64, OwnedRecord)>> {
        while address >= floor.max(FIRST_ADDRESS) {
            let Some(rec) = self.cold.read(address)? else { return Ok(None) };
            if rec.key == key {
                return Ok(Some((address, rec)));
            }
            if rec.prev_address >= address {
                return Err(self.cold.file.corruption(address, "cold hash chain goes forward"));
            }
            address = rec.prev_address;
        }
        Ok(None)
    }

    /// The newest cold-log record of `key`. Handles the false-absence anomaly (F2 §5.4): if the
    /// chain ended without a match and the cold log was truncated meanwhile, the record may have
    /// been copied to the tail under us, so the lookup runs again.
    pub fn cold_lookup(&self, key: &[u8], hash: u64) -> Result<Option<(u64, OwnedRecord)>> {
        self.counters.cold_lookups.fetch_add(1, Relaxed);
        loop {
            let truncations = self.cold.truncations();
            for head in self.cold_index.find(hash, self.cold.begin())? {
                if let Some(found) = self.cold_chain_find(key, head, FIRST_ADDRESS)? {
                    return Ok(Some(found));
                }
            }
            if self.cold.truncations() == truncations {
                return Ok(None);
            }
            self.counters.false_absence_retries.fetch_add(1, Relaxed);
        }
    }

    /// True when the cold log holds a record of `key` above `above`; the chunk comes from `batch`
    /// when it holds it. Compaction workers only (the caller owns the chunk's updates this round).
    pub fn cold_has_newer_in(&self, batch: &ChunkBatch, key: &[u8], hash: u64, above: u64) -> Result<bool> {
        for head in self.cold_index.find_in(batch, hash, self.cold.begin())? {
            if self.cold_chain_find(key, head, above + 1)?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Newest record of `key`: read cache, hot log, then cold log. Disk-resident values found
    /// are offered to the read cache.
    ///
    /// False absence across the hot→cold move: compaction drops a hot record that a newer record
    /// of its key supersedes (it is not copied to the cold log) and then truncates. A lookup that
    /// read the chain head before the newer record was published walks into the truncated
    /// address, and the cold log then holds an older version of the key or none. So a lookup
    /// that missed in the hot log starts over if the hot log was truncated since it began (the
    /// truncation counter moves before `begin`, so a walk that met the new `begin` sees it).
    pub fn lookup(&self, key: &[u8]) -> Result<Option<OwnedRecord>> {
        let hash = key_hash(key);
        loop {
            let truncations = self.hot.truncations();
            // Records below the head were immutable before the lookup began, so a copy of one
            // cannot miss an in-place update made after it was read.
            let immutable_below = self.hot.head();
            let (head, found) = self.hot_lookup(key, hash)?;
            #[cfg(test)]
            test_hooks::after_hot_lookup();
            if let Some((address, rec)) = found {
                if address & READ_CACHE_FLAG != 0 {
                    self.note_get_for_split(hash, GetSource::ReadCache(address));
                    self.counters.read_cache_hits.fetch_add(1, Relaxed);
                    if let (Some(cache), Some(head)) = (&self.read_cache, &head) {
                        if cache.is_old(address) {
                            self.second_chance(cache, hash, head.entry_value, address, &rec);
                        }
                    }
                } else {
                    self.note_get_for_split(hash, GetSource::HotLog { address, head: immutable_below });
                    self.counters.hot_hits.fetch_add(1, Relaxed);
                    if address < immutable_below {
                        let seen = head.as_ref().map(|h| h.entry_value);
                        self.cache_insert(hash, seen, &rec, truncations);
                    }
                }
                return Ok(Some(rec));
            }
            let cold = self.cold_lookup(key, hash)?;
            if self.hot.truncations() != truncations {
                self.counters.hot_truncation_retries.fetch_add(1, Relaxed);
                continue;
            }
            return match cold {
                Some((_, rec)) => {
                    self.note_get_for_split(hash, GetSource::ColdLog);
                    self.counters.cold_hits.fetch_add(1, Relaxed);
                    self.cache_insert(hash, head.as_ref().map(|h| h.entry_value), &rec, truncations);
                    Ok(Some(rec))
                }
                None => {
                    self.counters.misses.fetch_add(1, Relaxed);
                    Ok(None)
                }
            };
        }
    }

    /// Puts a copy of a disk-resident record at the head of its hot chain, provided the chain is
    /// exactly as the lookup saw it (`seen_entry`; `None` = no entry) and the hot log was not
    /// truncated since: then no newer record of the key can exist, so the copy is the newest.
    fn cache_insert(&self, hash: u64, seen_entry: Option<u64>, rec: &OwnedRecord, truncations: u64) {
        let Some(cache) = &self.read_cache else { return };
        let Some(value) = rec.value_opt() else { return };
        if seen_entry.is_some_and(|v| v & READ_CACHE_FLAG != 0) {
            return; // at most one cached record per chain
        }
        let entry = match seen_entry {
            Some(seen) => match self.hot_index.find(hash) {
                Some(e) if e.value == seen => e,
                _ => return,
            },
            None => {
                let e = self.hot_index.find_or_create(hash);
                if e.address() != 0 {
                    return;
                }
                e
            }
        };
        // The truncation check runs inside `publish`, under the cache's append lock, which hot-log
        // truncation also takes: otherwise a reader paused between check and CAS could publish a
        // stale copy after the key's newer records were compacted away and the entry was cleared
        // and re-created with the very value it saw (an ABA on a fresh entry: tag, address 0).
        let bytes = record::encode(&rec.key, Some(value), entry.address());
        let mut publish =
            |address| self.hot.truncations() == truncations && entry.cas_address(address).is_ok();
        let inserted =
            cache.insert(&bytes, &mut publish, &mut |address, view| self.unlink_cached(address, view));
        if inserted {
            self.counters.read_cache_inserts.fetch_add(1, Relaxed);
        }
    }

    /// Second chance: a hit in the older half of the read cache copies the record to its tail.
    fn second_chance(&self, cache: &ReadCache, hash: u64, seen_entry: u64, address: u64, rec: &OwnedRecord) {
        let Some(entry) = self.hot_index.find(hash).filter(|e| e.value == seen_entry) else { return };
        let bytes = record::encode(&rec.key, rec.value_opt(), rec.prev_address);
        let moved = cache.insert(&bytes, &mut |new| entry.cas_address(new).is_ok(), &mut |a, view| {
            self.unlink_cached(a, view)
        });
        if moved {
            cache.invalidate(address);
            self.counters.read_cache_second_chances.fetch_add(1, Relaxed);
        }
    }

    /// Before a read-cache page is dropped: swing an entry that points at one of its records
    /// back to the record's previous (hot-log) address.
    pub(super) fn unlink_cached(&self, address: u64, view: record::RecordView<'_>) {
        let hash = key_hash(view.key);
        self.split.remember_evicted(hash, view.stored_len() as u64);
        if let Some(entry) = self.hot_index.find(hash) {
            if entry.address() == address {
                let _ = entry.cas_address(view.prev_address);
            }
        }
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        self.ensure_usable()?;
        let rec = {
            let _gate = self.batch_gate.read();
            self.lookup(key)?
        };
        // The lookup's copy is the caller's: no second one.
        let value = rec.filter(|r| r.value_opt().is_some()).map(|r| r.value);
        if let Some(v) = &value {
            self.counters.user_bytes_read.fetch_add((key.len() + v.len()) as u64, Relaxed);
        }
        Ok(value)
    }

    /// The write latches of the keys with hashes `hashes`: one stripe per hot-index entry
    /// (`key_stripe`), taken in ascending stripe order so two batches never wait for each other
    /// in a cycle.
    fn lock_hashes(&self, hashes: impl Iterator<Item = u64>) -> Vec<MutexGuard<'_, ()>> {
        let mut stripes: Vec<usize> = hashes.map(|h| key_stripe(&self.hot_index, h)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        // `key_stripe` is below `KEY_LOCK_STRIPES`, the length of `key_locks`.
        stripes.into_iter().map(|i| self.key_locks[i].lock()).collect()
    }

    /// The write latch of the one key with hash `hash`.
    fn lock_hash(&self, hash: u64) -> MutexGuard<'_, ()> {
        self.key_locks[key_stripe(&self.hot_index, hash)].lock()
    }

    /// Logs `batch` to the WAL, commits it, and only then applies it (so a reader never sees a
    /// write that may still fail). Caller holds the latches of its keys
    /// (`key_latches`: `lock_hashes` or `lock_hash` guards) and passes `hashes[i] =
    /// key_hash(key of op i)`; the latches are held from the append through the commit to the
    /// end of the apply, so per key the apply order is the WAL order (a later write of a key
    /// waits for an earlier one's fsync) while writes of other keys share the group commit.
    /// The write lock is held shared over the same span (the checkpoint cut takes it
    /// exclusively: every logged write is then applied or failed). A multi-operation batch takes
    /// the batch gate only around its apply, so readers never wait for a commit.
    fn log_and_apply<Latches>(
        &self,
        key_latches: Latches,
        batch: &WriteBatch,
        hashes: &[u64],
        durability: Durability,
    ) -> Result<()> {
        debug_assert_eq!(hashes.len(), batch.len(), "one hash per operation");
        let payload = encode_batch(batch);
        let no_cut = self.write_lock.read();
        self.ensure_usable()?;
        let lsn = self.wal.append(&payload).map_err(|e| self.poisoned(e))?;
        self.counters.user_bytes_written.fetch_add(batch.payload_bytes() as u64, Relaxed);
        self.wal.commit(lsn, durability).map_err(|e| self.poisoned(e))?;
        {
            let _gate = (batch.len() > 1).then(|| self.batch_gate.write());
            // Another write's failure poisoned the engine: it changes nothing more in memory.
            self.ensure_usable()?;
            for (i, op) in batch.ops().iter().enumerate() {
                // A missing hash (a caller bug) is recomputed rather than skipping the operation.
                let hash = hashes.get(i).copied().unwrap_or_else(|| key_hash(op.key()));
                let applied = apply_op(
                    &self.hot,
                    &self.hot_index,
                    self.read_cache.as_ref(),
                    op.key(),
                    hash,
                    op.value(),
                    Some(&self.counters),
                )
                .map_err(|e| self.poisoned(e))?;
                self.note_write_for_split(applied);
            }
        }
        drop(no_cut);
        drop(key_latches);
        self.wal_bytes_since_checkpoint.fetch_add(payload.len() as u64, Relaxed);
        self.maybe_maintain()
    }

    /// Writes run in parallel for different keys: the latches of a batch's keys serialise it
    /// with every other write of those keys from WAL append to apply, so per key the WAL order
    /// is the apply order and replay reproduces the live state.
    pub fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.ensure_usable()?;
        // A put or delete is a batch of one: one latch, no vectors to allocate.
        if let [op] = batch.ops() {
            let hash = key_hash(op.key());
            let latch = self.lock_hash(hash);
            return self.log_and_apply(latch, &batch, &[hash], durability);
        }
        let hashes: Vec<u64> = batch.ops().iter().map(|op| key_hash(op.key())).collect();
        let latches = self.lock_hashes(hashes.iter().copied());
        self.log_and_apply(latches, &batch, &hashes, durability)
    }

    /// Read-modify-write per F2 Algorithm 1: under the key's latch, a record in the hot log is
    /// updated directly. Otherwise the cold log is read without any latch, the new value
    /// computed, and the latch retaken for a ConditionalInsert: it succeeds only if no record
    /// of the key entered the hot log since the first look and the hot log was not truncated;
    /// else the whole operation retries.
    pub fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        let hash = key_hash(key);
        let single = |new: &Option<Value>| WriteBatch::single(key, new.as_deref());
        loop {
            self.ensure_usable()?;
            let latch = self.lock_hash(hash);
            if let (_, Some((_, rec))) = self.hot_lookup(key, hash)? {
                let new = f(rec.value_opt());
                self.log_and_apply(latch, &single(&new), &[hash], durability)?;
                return Ok(new);
            }
            // Any later write of the key reserves its record at or above this tail: it takes
            // the latch held here first.
            let start_tail = self.hot.tail();
            let truncations = self.hot.truncations();
            drop(latch);
            let cold = self.cold_lookup(key, hash)?;
            self.counters.rmw_cold_reads.fetch_add(1, Relaxed);
            let new = f(cold.as_ref().and_then(|(_, r)| r.value_opt()));
            let latch = self.lock_hash(hash);
            let intervened = self.hot.truncations() != truncations
                || self.hot_has_newer(key, hash, start_tail.saturating_sub(1))?;
            if intervened {
                drop(latch);
                self.counters.rmw_retries.fetch_add(1, Relaxed);
                continue;
            }
            self.log_and_apply(latch, &single(&new), &[hash], durability)?;
            return Ok(new);
        }
    }

    /// Single-log mode (`F2Options::single_log`, FASTER's design): ConditionalInsert of the
    /// record of `key` at `address` into the hot log's own tail. Under the key's latch the
    /// liveness check is repeated, since a writer may have published a newer record since the
    /// caller's check; that repeat costs no reads in the usual case (the chain head is
    /// `address` itself). A tombstone is dropped when the cold log is empty: every older record
    /// of its key is below `address`, so in the part being truncated. Returns whether the
    /// record was copied.
    pub(super) fn copy_to_hot_tail(
        &self,
        key: &[u8],
        value: Option<&[u8]>,
        hash: u64,
        address: u64,
    ) -> Result<bool> {
        if value.is_none() && self.cold.size_bytes() == 0 {
            return Ok(false);
        }
        let _latch = self.lock_hash(hash);
        if self.hot_has_newer(key, hash, address)? {
            return Ok(false);
        }
        {
            // Shared: `stable_hot_tail` must not see the copy half written.
            let _no_cut = self.write_lock.read();
            apply_op(&self.hot, &self.hot_index, self.read_cache.as_ref(), key, hash, value, None)?;
        }
        let bytes = record::stored_len(key.len(), value.map_or(0, <[u8]>::len));
        self.counters.compaction_bytes_written.fetch_add(bytes as u64, Relaxed);
        Ok(true)
    }

    /// The checkpoint's cut: the WAL position and the hot-log tail, taken together so every
    /// write logged at or before that position is applied below that tail; the hot log is sealed
    /// at the tail (nothing below it changes in place any more). Refused once the engine is
    /// poisoned: a write that failed half-applied poisons it before it releases the write lock,
    /// and a cut after it would make the half-applied batch durable.
    pub fn seal_for_checkpoint(&self) -> Result<(u64, u64)> {
        let _no_writer = self.write_lock.write();
        self.state.check_not_poisoned()?;
        Ok((self.wal.last_lsn(), self.hot.seal_to_tail()))
    }

    /// A hot-log tail below which every record is completely written (no writer holds the
    /// write lock shared, so every reserved record is copied in).
    pub fn stable_hot_tail(&self) -> u64 {
        let _no_writer = self.write_lock.write();
        self.hot.tail()
    }
}

/// Test-only pause points inside the read path, so a test can run a writer and compaction at
/// an exact point of a lookup (on the reader's own thread).
#[cfg(test)]
pub(crate) mod test_hooks {
    use std::cell::RefCell;

    type Hook = Box<dyn FnOnce()>;

    thread_local! {
        static AFTER_CHAIN_HEAD: RefCell<Option<Hook>> = const { RefCell::new(None) };
        static AFTER_HOT_LOOKUP: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    /// Runs `f` once, on this thread, right after the next hot lookup read its chain head.
    pub fn set_after_chain_head(f: impl FnOnce() + 'static) {
        AFTER_CHAIN_HEAD.with(|h| *h.borrow_mut() = Some(Box::new(f)));
    }

    pub(super) fn after_chain_head() {
        if let Some(f) = AFTER_CHAIN_HEAD.with(|h| h.borrow_mut().take()) {
            f();
        }
    }

    /// Runs `f` once, on this thread, right after the next lookup's hot part returned.
    pub fn set_after_hot_lookup(f: impl FnOnce() + 'static) {
        AFTER_HOT_LOOKUP.with(|h| *h.borrow_mut() = Some(Box::new(f)));
    }

    pub(super) fn after_hot_lookup() {
        if let Some(f) = AFTER_HOT_LOOKUP.with(|h| h.borrow_mut().take()) {
            f();
        }
    }
}

#[cfg(test)]
mod stripe_tests {
    use super::*;

    /// Keys sharing a hot-index entry (same home bucket and tag) share a latch stripe. Were they
    /// written concurrently, the one whose entry CAS lost would re-link its record behind the
    /// rival's newer head — a chain going forward, read back as corruption. Striping by
    /// `hash % 1024` alone would split such keys.
    #[test]
    fn keys_sharing_a_hot_index_entry_share_a_latch_stripe() {
        let index = HotIndex::with_budget_bytes(32, 1 << 20);
        let mut by_entry: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
        let mut shared_with_different_hash_stripes = 0;
        for i in 0..200_000u64 {
            let hash = key_hash(format!("key-{i}").as_bytes());
            if let Some(other) = by_entry.insert(index.entry_id(hash), hash) {
                assert_eq!(key_stripe(&index, hash), key_stripe(&index, other), "key-{i}");
                if hash % KEY_LOCK_STRIPES as u64 != other % KEY_LOCK_STRIPES as u64 {
                    shared_with_different_hash_stripes += 1;
                }
            }
        }
        assert!(shared_with_different_hash_stripes > 0, "no pair that striping by hash alone would split");
    }
}
