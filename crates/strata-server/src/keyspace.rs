//! The Redis keyspace over one Strata store: how a key, its type, its expiry and a collection's
//! members are laid out as engine records (docs/format/server-records.md), and the durability
//! barrier its commands share. The key locks that make each command atomic are in key_locks.rs.
//!
//! Invariant: every command that writes holds the locks of all keys it touches from its first
//! read to its last write, and `FLUSHALL` holds all of them; so commands on the same key apply in
//! one order, as in Redis. Reads of one key need no lock (an engine `get` is atomic).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use strata::{Db, Durability, Result, WriteBatch};

use crate::key_locks::KeyLockTable;
pub use crate::key_locks::KeyLocks;

/// Record-key prefixes: one byte in front of every record the server writes.
pub const FORMAT_PREFIX: u8 = 0x00;
pub const KEY_PREFIX: u8 = 0x01;
pub const MEMBER_PREFIX: u8 = 0x02;
pub const EXPIRY_PREFIX: u8 = 0x03;
/// The record `[FORMAT_PREFIX] "strata-server"` holds this version as one byte.
pub const FORMAT_VERSION: u8 = 1;
pub const FORMAT_KEY: &[u8] = b"\x00strata-server";

/// Value kinds, the first byte of a key record.
pub const KIND_STRING: u8 = 1;
pub const KIND_HASH: u8 = 2;
pub const KIND_SET: u8 = 3;
pub const KIND_LIST: u8 = 4;
pub const KIND_ZSET: u8 = 5;
/// Kind byte + expiry (u64 LE milliseconds since the Unix epoch, 0 = none).
pub const HEADER_BYTES: usize = 9;
/// A collection's payload after the header: generation, length, list head (u64, u64, i64 LE).
pub const COLLECTION_PAYLOAD_BYTES: usize = 24;
/// Bytes a member key adds around the user key and member: prefix, key length, generation.
pub const MEMBER_KEY_OVERHEAD_BYTES: usize = 1 + 4 + 8;

/// The types whose members live in records of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectionKind {
    /// Member records: field → value.
    Hash,
    /// Member records: member → empty.
    Set,
    /// Member records: position (i64, order-preserving) → element; `head` is the first position.
    List,
    /// Two member records per member: `0x00 member` → score, `0x01 score member` → empty.
    SortedSet,
}

impl CollectionKind {
    pub fn name(self) -> &'static str {
        match self {
            CollectionKind::Hash => "hash",
            CollectionKind::Set => "set",
            CollectionKind::List => "list",
            CollectionKind::SortedSet => "zset",
        }
    }

    fn byte(self) -> u8 {
        match self {
            CollectionKind::Hash => KIND_HASH,
            CollectionKind::Set => KIND_SET,
            CollectionKind::List => KIND_LIST,
            CollectionKind::SortedSet => KIND_ZSET,
        }
    }
}

/// A hash, set or list: its members are records under `generation`; a new collection at the same
/// key gets a new generation, so members a crashed delete left behind are never seen again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collection {
    pub kind: CollectionKind,
    pub expire_at_ms: u64,
    pub generation: u64,
    pub len: u64,
    /// Lists only: the position of the first element (0 for the others).
    pub head: i64,
}

/// A key's record, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    String { expire_at_ms: u64, value: Vec<u8> },
    Collection(Collection),
}

impl Entry {
    pub fn expire_at_ms(&self) -> u64 {
        match self {
            Entry::String { expire_at_ms, .. } => *expire_at_ms,
            Entry::Collection(c) => c.expire_at_ms,
        }
    }

    pub fn with_expiry(self, expire_at_ms: u64) -> Entry {
        match self {
            Entry::String { value, .. } => Entry::String { expire_at_ms, value },
            Entry::Collection(c) => Entry::Collection(Collection { expire_at_ms, ..c }),
        }
    }

    /// The generation of its member records, for a collection.
    pub fn generation(&self) -> Option<u64> {
        match self {
            Entry::String { .. } => None,
            Entry::Collection(c) => Some(c.generation),
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Entry::String { .. } => "string",
            Entry::Collection(c) => c.kind.name(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        match self {
            Entry::String { expire_at_ms, value } => {
                let mut out = header(KIND_STRING, *expire_at_ms, value.len());
                out.extend_from_slice(value);
                out
            }
            Entry::Collection(c) => {
                let mut out = header(c.kind.byte(), c.expire_at_ms, COLLECTION_PAYLOAD_BYTES);
                out.extend_from_slice(&c.generation.to_le_bytes());
                out.extend_from_slice(&c.len.to_le_bytes());
                out.extend_from_slice(&c.head.to_le_bytes());
                out
            }
        }
    }

    /// `decode` of a record the caller owns: a string keeps the record's buffer (no copy).
    pub fn decode_owned(mut bytes: Vec<u8>) -> Option<Entry> {
        if bytes.first() == Some(&KIND_STRING) && bytes.len() >= HEADER_BYTES {
            let expire_at_ms = u64::from_le_bytes(bytes[1..HEADER_BYTES].try_into().ok()?);
            bytes.drain(..HEADER_BYTES);
            return Some(Entry::String { expire_at_ms, value: bytes });
        }
        Entry::decode(&bytes)
    }

    /// `None` for bytes that are not a key record this version wrote.
    pub fn decode(bytes: &[u8]) -> Option<Entry> {
        let (&kind, rest) = bytes.split_first()?;
        let expire_at_ms = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
        let payload = &rest[8..];
        let kind = match kind {
            KIND_STRING => return Some(Entry::String { expire_at_ms, value: payload.to_vec() }),
            KIND_HASH => CollectionKind::Hash,
            KIND_SET => CollectionKind::Set,
            KIND_LIST => CollectionKind::List,
            KIND_ZSET => CollectionKind::SortedSet,
            _ => return None,
        };
        if payload.len() != COLLECTION_PAYLOAD_BYTES {
            return None;
        }
        let word = |i: usize| -> [u8; 8] { payload[i * 8..i * 8 + 8].try_into().expect("8 bytes") };
        Some(Entry::Collection(Collection {
            kind,
            expire_at_ms,
            generation: u64::from_le_bytes(word(0)),
            len: u64::from_le_bytes(word(1)),
            head: i64::from_le_bytes(word(2)),
        }))
    }
}

fn header(kind: u8, expire_at_ms: u64, payload_bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + payload_bytes);
    out.push(kind);
    out.extend_from_slice(&expire_at_ms.to_le_bytes());
    out
}

pub fn key_record(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + key.len());
    out.push(KEY_PREFIX);
    out.extend_from_slice(key);
    out
}

/// The prefix every member record of one collection generation starts with.
pub fn member_prefix(key: &[u8], generation: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(MEMBER_KEY_OVERHEAD_BYTES + key.len());
    out.push(MEMBER_PREFIX);
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&generation.to_be_bytes());
    out
}

pub fn member_record(key: &[u8], generation: u64, member: &[u8]) -> Vec<u8> {
    let mut out = member_prefix(key, generation);
    out.extend_from_slice(member);
    out
}

/// An entry of the expiry index: ordered by time, so the sweeper reads only what is due. It is
/// a hint: the key record's own expiry decides, and a stale entry is dropped when met.
pub fn expiry_record(expire_at_ms: u64, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + key.len());
    out.push(EXPIRY_PREFIX);
    out.extend_from_slice(&expire_at_ms.to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// Milliseconds since the Unix epoch: the time a pipeline started when called inside
/// `with_clock_snapshot` (Redis, too, takes one time per command call rather than reading the
/// clock at every expiry check), else the clock's.
pub fn now_ms() -> u64 {
    match CLOCK_SNAPSHOT_MS.with(std::cell::Cell::get) {
        0 => clock_ms(),
        snapshot => snapshot,
    }
}

fn clock_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

thread_local! {
    /// Inside `with_clock_snapshot`: its time; 0 outside.
    static CLOCK_SNAPSHOT_MS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Runs `f` (one read's worth of a client's requests) with `now_ms` fixed at the time it began.
pub fn with_clock_snapshot<T>(f: impl FnOnce() -> T) -> T {
    let outer = CLOCK_SNAPSHOT_MS.with(|c| c.replace(clock_ms()));
    // Restored even if `f` panics.
    struct Restore(u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            CLOCK_SNAPSHOT_MS.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(outer);
    f()
}

/// The store and the locks around it.
pub struct Keyspace {
    db: Db,
    ordered: bool,
    /// The engine recovers a prefix of its write history, so one durable write covers every
    /// write before it (`with_deferred_durability`).
    prefix_consistent: bool,
    durability: Durability,
    locks: KeyLockTable,
    next_generation: AtomicU64,
    /// Deferred sections that wrote, counted as they end (`defer_durability`).
    deferred_sections: AtomicU64,
    /// Every section numbered up to this one is covered by a successful barrier.
    covered_sections: AtomicU64,
}

thread_local! {
    /// Inside `with_deferred_durability`: `Some(wrote)`, and writes are made without durability.
    static DEFERRED: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

impl Keyspace {
    /// Takes over `db`, checking (or, on a new store, writing) the server's record format.
    pub fn new(db: Db, durability: Durability) -> Result<Keyspace> {
        match db.get(FORMAT_KEY)? {
            Some(v) if v.as_slice() != [FORMAT_VERSION] => {
                return Err(strata::Error::Incompatible(format!(
                    "{} holds server records of format {v:?}; this build reads format {FORMAT_VERSION}",
                    db.location()
                )))
            }
            Some(_) => {}
            None => db.put_with(FORMAT_KEY, [FORMAT_VERSION], Durability::Sync)?,
        }
        let capabilities = db.capabilities();
        let (ordered, prefix_consistent) = (capabilities.ordered, capabilities.prefix_consistent_recovery);
        // Generations only need to differ from those of collections still in the store: microseconds
        // since the epoch at start, then counting, outruns any earlier run's counter.
        let start = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_micros() as u64);
        Ok(Keyspace {
            db,
            ordered,
            prefix_consistent,
            durability,
            locks: KeyLockTable::default(),
            next_generation: AtomicU64::new(start),
            deferred_sections: AtomicU64::new(0),
            covered_sections: AtomicU64::new(0),
        })
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The engine keeps keys in order (`KEYS`, `SCAN`, collections and the expiry sweep need it).
    pub fn ordered(&self) -> bool {
        self.ordered
    }

    /// The longest string value the engine can hold (its value limit less the record header).
    pub fn max_string_bytes(&self) -> usize {
        self.db.limits().max_value_bytes.saturating_sub(HEADER_BYTES)
    }

    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Locks `keys` (any order, repeats allowed) for one command (key_locks.rs).
    pub fn lock(&self, keys: &[&[u8]]) -> KeyLocks<'_> {
        self.locks.lock(keys)
    }

    /// Runs one pipeline's commands with their key locks lingering until it ends (key_locks.rs).
    pub fn linger_locks<T>(&self, f: impl FnOnce() -> T) -> T {
        self.locks.linger(f)
    }

    /// Runs `f` holding every key: no other client's command runs meanwhile (FLUSHALL, EXEC).
    pub fn with_everything_locked<T>(&self, f: impl FnOnce() -> T) -> T {
        self.locks.with_everything_locked(f)
    }

    pub fn new_generation(&self) -> u64 {
        self.next_generation.fetch_add(1, Ordering::Relaxed)
    }

    /// The live entry of `key`: `None` if absent or expired at `now_ms`.
    pub fn entry(&self, key: &[u8], now_ms: u64) -> Result<Option<Entry>> {
        let Some(bytes) = self.db.get(key_record(key))? else { return Ok(None) };
        let entry = decode_or_corrupt(key, bytes)?;
        Ok(Some(entry).filter(|e| !is_expired(e.expire_at_ms(), now_ms)))
    }

    /// The entry of `key` even if expired (what a write must clean up).
    pub fn raw_entry(&self, key: &[u8]) -> Result<Option<Entry>> {
        match self.db.get(key_record(key))? {
            Some(bytes) => Ok(Some(decode_or_corrupt(key, bytes)?)),
            None => Ok(None),
        }
    }

    /// `Err(Unsupported)` naming `what` unless the engine keeps keys in order.
    pub fn require_ordered(&self, what: &str) -> Result<()> {
        if self.ordered {
            return Ok(());
        }
        Err(strata::Error::unsupported(format!(
            "{what} needs an ordered engine; '{}' is hash-indexed and keeps no key order",
            self.db.kind()
        )))
    }

    /// Calls `visit` with each live key at or after `start` (exclusive of `start` itself when
    /// `after`), in key order, until it returns false. Ordered engines only.
    pub fn each_live_key(
        &self,
        start: &[u8],
        after: bool,
        now: u64,
        mut visit: impl FnMut(&[u8], &Entry) -> bool,
    ) -> Result<()> {
        let from = key_record(start);
        for item in self.db.range(from.clone()..vec![KEY_PREFIX + 1])? {
            let (record, bytes) = item?;
            if after && record == from {
                continue;
            }
            let Some(entry) = Entry::decode(&bytes) else { continue };
            if !is_expired(entry.expire_at_ms(), now) && !visit(&record[1..], &entry) {
                break;
            }
        }
        Ok(())
    }

    pub fn commit(&self, batch: WriteBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.db.write(batch, self.write_durability())
    }

    /// The durability to write with now: the server's, or none inside a deferred section (which
    /// then owes its barrier).
    pub fn write_durability(&self) -> Durability {
        DEFERRED.with(|deferred| match deferred.get() {
            Some(_) => {
                deferred.set(Some(true));
                Durability::None
            }
            None => self.durability,
        })
    }

    /// Runs `f` (one read's worth of a client's pipeline) with the durability of its writes
    /// deferred to one barrier at the end: a durable write (or, for `Sync`, a flush) after them,
    /// which on an engine that recovers a prefix of its write history makes every earlier write
    /// as durable as itself. The caller sends `f`'s replies only if the barrier succeeded. On other
    /// engines, or without durability, each write keeps its own.
    pub fn with_deferred_durability<T>(&self, f: impl FnOnce() -> T) -> (T, Result<()>) {
        let (out, pending) = self.defer_durability(f);
        let barrier = pending.map_or(Ok(()), |p| self.complete_barrier(p));
        (out, barrier)
    }

    /// `with_deferred_durability` whose barrier the caller completes (`complete_barrier`),
    /// possibly after other clients' pipelines ran: one barrier then covers all of them. `None`:
    /// no barrier is owed.
    pub fn defer_durability<T>(&self, f: impl FnOnce() -> T) -> (T, Option<PendingBarrier>) {
        let nested = DEFERRED.with(|d| d.get().is_some());
        if !self.prefix_consistent || self.durability == Durability::None || nested {
            return (f(), None);
        }
        DEFERRED.with(|d| d.set(Some(false)));
        // Reset even if `f` panics, so the thread's later writes are durable again.
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                DEFERRED.with(|d| d.set(None));
            }
        }
        let reset = Reset;
        let out = f();
        let wrote = DEFERRED.with(|d| d.get()) == Some(true);
        drop(reset);
        // Numbered after its writes landed: a barrier that reads the count later follows them.
        let pending =
            wrote.then(|| PendingBarrier(self.deferred_sections.fetch_add(1, Ordering::SeqCst) + 1));
        (out, pending)
    }

    /// A barrier begun after `pending`'s writes has succeeded: nothing more is owed.
    pub fn is_covered(&self, pending: PendingBarrier) -> bool {
        self.covered_sections.load(Ordering::SeqCst) >= pending.0
    }

    /// Makes `pending`'s writes as durable as the server's durability, unless a barrier begun
    /// after them already did; the barrier then covers every section numbered so far.
    pub fn complete_barrier(&self, pending: PendingBarrier) -> Result<()> {
        if self.is_covered(pending) {
            return Ok(());
        }
        let through = self.deferred_sections.load(Ordering::SeqCst);
        match self.durability {
            Durability::Sync => self.db.flush()?,
            durability => self.db.put_with(FORMAT_KEY, [FORMAT_VERSION], durability)?,
        }
        self.covered_sections.fetch_max(through, Ordering::SeqCst);
        Ok(())
    }
}

/// A deferred section's writes, still owed their durability barrier (its number in the order
/// sections ended).
#[derive(Clone, Copy, Debug)]
pub struct PendingBarrier(u64);

impl Keyspace {
    /// Writes `new` as `key`'s entry (`None` deletes it) in place of `old`, the entry the caller
    /// read under the key's lock (expired or not): one batch for the key record and its expiry
    /// index entries. A replaced collection's members go afterwards in batches of their own: they are
    /// invisible from the moment the batch lands, since no entry names their generation.
    pub fn replace(&self, key: &[u8], old: Option<&Entry>, new: Option<&Entry>) -> Result<()> {
        let mut batch = WriteBatch::new();
        let stale = self.stage(&mut batch, key, old, new);
        self.commit(batch)?;
        self.drop_stale(key, stale)
    }

    /// Adds `replace`'s writes to `batch` (so several keys change atomically) and returns the
    /// generation whose members the caller drops with `drop_stale` once the batch has landed.
    pub fn stage(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        old: Option<&Entry>,
        new: Option<&Entry>,
    ) -> Option<u64> {
        let new_expiry = new.map_or(0, Entry::expire_at_ms);
        match new {
            Some(entry) => batch.put(key_record(key), entry.encode()),
            None => batch.delete(key_record(key)),
        };
        if self.ordered {
            if new_expiry != 0 {
                batch.put(expiry_record(new_expiry, key), Vec::new());
            }
            let old_expiry = old.map_or(0, Entry::expire_at_ms);
            if old_expiry != 0 && old_expiry != new_expiry {
                batch.delete(expiry_record(old_expiry, key));
            }
        }
        let old_generation = old.and_then(Entry::generation);
        old_generation.filter(|g| new.and_then(Entry::generation) != Some(*g))
    }

    pub fn drop_stale(&self, key: &[u8], stale: Option<u64>) -> Result<()> {
        match stale {
            Some(generation) => self.drop_members(key, generation),
            None => Ok(()),
        }
    }

    /// Deletes every member record of one collection generation, a bounded batch at a time.
    pub fn drop_members(&self, key: &[u8], generation: u64) -> Result<()> {
        const MEMBERS_PER_BATCH: usize = 512;
        let prefix = member_prefix(key, generation);
        loop {
            let mut batch = WriteBatch::new();
            for item in self.db.prefix(&prefix)?.take(MEMBERS_PER_BATCH) {
                batch.delete(item?.0);
            }
            let done = batch.len() < MEMBERS_PER_BATCH;
            self.commit(batch)?;
            if done {
                return Ok(());
            }
        }
    }
}

pub fn is_expired(expire_at_ms: u64, now_ms: u64) -> bool {
    expire_at_ms != 0 && expire_at_ms <= now_ms
}

fn decode_or_corrupt(key: &[u8], bytes: Vec<u8>) -> Result<Entry> {
    Entry::decode_owned(bytes).ok_or_else(|| {
        strata::Error::invalid(format!(
            "the record of key {:?} is not a server record (written by another program?)",
            String::from_utf8_lossy(key)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_keep_their_documented_offsets() {
        let s = Entry::String { expire_at_ms: 0x0102, value: b"v".to_vec() };
        let bytes = s.encode();
        assert_eq!(bytes, [1, 2, 1, 0, 0, 0, 0, 0, 0, b'v']);
        assert_eq!(Entry::decode(&bytes), Some(s.clone()));
        assert_eq!(Entry::decode_owned(bytes), Some(s));
        let list =
            Collection { kind: CollectionKind::List, expire_at_ms: 0, generation: 7, len: 3, head: -2 };
        let bytes = Entry::Collection(list).encode();
        assert_eq!(bytes.len(), HEADER_BYTES + COLLECTION_PAYLOAD_BYTES);
        assert_eq!(bytes[0], KIND_LIST);
        assert_eq!(bytes[HEADER_BYTES], 7, "generation at offset 9");
        assert_eq!(bytes[HEADER_BYTES + 8], 3, "length at offset 17");
        assert_eq!(bytes[HEADER_BYTES + 16], 0xfe, "head at offset 25");
        assert_eq!(Entry::decode(&bytes), Some(Entry::Collection(list)));
        assert_eq!(Entry::decode(&[9, 0, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(Entry::decode(&[1, 0]), None);
        assert_eq!(Entry::decode_owned(vec![1, 0]), None);
    }

    #[test]
    fn record_keys_sort_by_prefix_then_key() {
        assert_eq!(key_record(b"ab"), b"\x01ab");
        let f = member_record(b"h", 2, b"f");
        assert_eq!(f, [2, 0, 0, 0, 1, b'h', 0, 0, 0, 0, 0, 0, 0, 2, b'f']);
        // Big-endian times: the index is in expiry order.
        assert!(expiry_record(255, b"z") < expiry_record(256, b"a"));
        // A key's members never interleave with a longer key's sharing its prefix.
        assert!(member_record(b"h", 2, b"\xff") < member_record(b"hh", 0, b""));
    }
}
