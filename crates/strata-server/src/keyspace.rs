//! The Redis keyspace over one Strata store: how a key, its type, its expiry and a hash's fields
//! are laid out as engine records (docs/format/server-records.md), and the key locks that make
//! each command atomic.
//!
//! Invariant: every command that writes holds the locks of all keys it touches from its first
//! read to its last write, and `FLUSHALL` holds all of them; so commands on the same key apply in
//! one order, as in Redis. Reads of one key need no lock (an engine `get` is atomic).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard};
use strata::{Db, Durability, Result, WriteBatch};

/// Record-key prefixes: one byte in front of every record the server writes.
pub const FORMAT_PREFIX: u8 = 0x00;
pub const KEY_PREFIX: u8 = 0x01;
pub const FIELD_PREFIX: u8 = 0x02;
pub const EXPIRY_PREFIX: u8 = 0x03;
/// The record `[FORMAT_PREFIX] "strata-server"` holds this version as one byte.
pub const FORMAT_VERSION: u8 = 1;
pub const FORMAT_KEY: &[u8] = b"\x00strata-server";

/// Value kinds, the first byte of a key record.
pub const KIND_STRING: u8 = 1;
pub const KIND_HASH: u8 = 2;
/// Kind byte + expiry (u64 LE milliseconds since the Unix epoch, 0 = none).
pub const HEADER_BYTES: usize = 9;
/// Bytes a hash field key adds around the user key and field: prefix, key length, generation.
pub const FIELD_KEY_OVERHEAD_BYTES: usize = 1 + 4 + 8;

const LOCK_STRIPES: usize = 4096;

/// A key's record, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    String {
        expire_at_ms: u64,
        value: Vec<u8>,
    },
    /// Fields live in their own records under `generation`; a new hash at the same key gets a new
    /// generation, so fields a crashed delete left behind are never seen again.
    Hash {
        expire_at_ms: u64,
        generation: u64,
        fields: u64,
    },
}

impl Entry {
    pub fn expire_at_ms(&self) -> u64 {
        match self {
            Entry::String { expire_at_ms, .. } | Entry::Hash { expire_at_ms, .. } => *expire_at_ms,
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Entry::String { .. } => "string",
            Entry::Hash { .. } => "hash",
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        match self {
            Entry::String { expire_at_ms, value } => {
                let mut out = header(KIND_STRING, *expire_at_ms, value.len());
                out.extend_from_slice(value);
                out
            }
            Entry::Hash { expire_at_ms, generation, fields } => {
                let mut out = header(KIND_HASH, *expire_at_ms, 16);
                out.extend_from_slice(&generation.to_le_bytes());
                out.extend_from_slice(&fields.to_le_bytes());
                out
            }
        }
    }

    /// `None` for bytes that are not a key record this version wrote.
    pub fn decode(bytes: &[u8]) -> Option<Entry> {
        let (&kind, rest) = bytes.split_first()?;
        let expire_at_ms = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
        let payload = &rest[8..];
        match kind {
            KIND_STRING => Some(Entry::String { expire_at_ms, value: payload.to_vec() }),
            KIND_HASH if payload.len() == 16 => Some(Entry::Hash {
                expire_at_ms,
                generation: u64::from_le_bytes(payload[..8].try_into().ok()?),
                fields: u64::from_le_bytes(payload[8..].try_into().ok()?),
            }),
            _ => None,
        }
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

/// The prefix every field record of one hash generation starts with.
pub fn field_prefix(key: &[u8], generation: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(FIELD_KEY_OVERHEAD_BYTES + key.len());
    out.push(FIELD_PREFIX);
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&generation.to_be_bytes());
    out
}

pub fn field_record(key: &[u8], generation: u64, field: &[u8]) -> Vec<u8> {
    let mut out = field_prefix(key, generation);
    out.extend_from_slice(field);
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

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The store and the locks around it.
pub struct Keyspace {
    db: Db,
    ordered: bool,
    durability: Durability,
    stripes: Box<[Mutex<()>]>,
    /// Commands hold it shared; `FLUSHALL` holds it alone.
    everything: RwLock<()>,
    next_generation: AtomicU64,
}

/// Locks held by one command.
pub struct KeyLocks<'a> {
    _stripes: Vec<MutexGuard<'a, ()>>,
    _shared: RwLockReadGuard<'a, ()>,
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
        let ordered = db.capabilities().ordered;
        // Generations only need to differ from those of hashes still in the store: microseconds
        // since the epoch at start, then counting, outruns any earlier run's counter.
        let start = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_micros() as u64);
        Ok(Keyspace {
            db,
            ordered,
            durability,
            stripes: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            everything: RwLock::new(()),
            next_generation: AtomicU64::new(start),
        })
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The engine keeps keys in order (`KEYS`, `SCAN`, hashes and the expiry sweep need it).
    pub fn ordered(&self) -> bool {
        self.ordered
    }

    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Locks `keys` (any order, repeats allowed) for one command.
    pub fn lock(&self, keys: &[&[u8]]) -> KeyLocks<'_> {
        let shared = self.everything.read();
        let mut stripes: Vec<usize> = keys.iter().map(|k| stripe_of(k)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        KeyLocks { _stripes: stripes.into_iter().map(|s| self.stripes[s].lock()).collect(), _shared: shared }
    }

    /// Holds every key: no other command runs until it is dropped.
    pub fn lock_all(&self) -> parking_lot::RwLockWriteGuard<'_, ()> {
        self.everything.write()
    }

    pub fn new_generation(&self) -> u64 {
        self.next_generation.fetch_add(1, Ordering::Relaxed)
    }

    /// The live entry of `key`: `None` if absent or expired at `now_ms`.
    pub fn entry(&self, key: &[u8], now_ms: u64) -> Result<Option<Entry>> {
        let Some(bytes) = self.db.get(key_record(key))? else { return Ok(None) };
        let entry = decode_or_corrupt(key, &bytes)?;
        Ok(Some(entry).filter(|e| !is_expired(e.expire_at_ms(), now_ms)))
    }

    /// The entry of `key` even if expired (what a write must clean up).
    pub fn raw_entry(&self, key: &[u8]) -> Result<Option<Entry>> {
        match self.db.get(key_record(key))? {
            Some(bytes) => Ok(Some(decode_or_corrupt(key, &bytes)?)),
            None => Ok(None),
        }
    }

    pub fn commit(&self, batch: WriteBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.db.write(batch, self.durability)
    }
}

impl Keyspace {
    /// Writes `new` as `key`'s entry (`None` deletes it) in place of `old`, the entry the caller
    /// read under the key's lock (expired or not): one batch for the key record and its expiry
    /// index entries. A replaced hash's fields go afterwards in batches of their own: they are
    /// invisible from the moment the batch lands, since no entry names their generation.
    pub fn replace(&self, key: &[u8], old: Option<&Entry>, new: Option<&Entry>) -> Result<()> {
        let mut batch = WriteBatch::new();
        let stale = self.stage(&mut batch, key, old, new);
        self.commit(batch)?;
        self.drop_stale(key, stale)
    }

    /// Adds `replace`'s writes to `batch` (so several keys change atomically) and returns the
    /// generation whose fields the caller drops with `drop_stale` once the batch has landed.
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
        match (old, new) {
            (Some(Entry::Hash { generation: g, .. }), Some(Entry::Hash { generation: h, .. })) if g == h => {
                None
            }
            (Some(Entry::Hash { generation, .. }), _) => Some(*generation),
            _ => None,
        }
    }

    pub fn drop_stale(&self, key: &[u8], stale: Option<u64>) -> Result<()> {
        match stale {
            Some(generation) => self.drop_fields(key, generation),
            None => Ok(()),
        }
    }

    /// Deletes every field record of one hash generation, a bounded batch at a time.
    pub fn drop_fields(&self, key: &[u8], generation: u64) -> Result<()> {
        const FIELDS_PER_BATCH: usize = 512;
        let prefix = field_prefix(key, generation);
        loop {
            let mut batch = WriteBatch::new();
            for item in self.db.prefix(&prefix)?.take(FIELDS_PER_BATCH) {
                batch.delete(item?.0);
            }
            let done = batch.len() < FIELDS_PER_BATCH;
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

fn decode_or_corrupt(key: &[u8], bytes: &[u8]) -> Result<Entry> {
    Entry::decode(bytes).ok_or_else(|| {
        strata::Error::invalid(format!(
            "the record of key {:?} is not a server record (written by another program?)",
            String::from_utf8_lossy(key)
        ))
    })
}

fn stripe_of(key: &[u8]) -> usize {
    (xxhash_rust::xxh3::xxh3_64(key) as usize) % LOCK_STRIPES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_keep_their_documented_offsets() {
        let s = Entry::String { expire_at_ms: 0x0102, value: b"v".to_vec() };
        let bytes = s.encode();
        assert_eq!(bytes, [1, 2, 1, 0, 0, 0, 0, 0, 0, b'v']);
        assert_eq!(Entry::decode(&bytes), Some(s));
        let h = Entry::Hash { expire_at_ms: 0, generation: 7, fields: 3 };
        let bytes = h.encode();
        assert_eq!(bytes.len(), HEADER_BYTES + 16);
        assert_eq!(bytes[0], KIND_HASH);
        assert_eq!(bytes[HEADER_BYTES], 7, "generation at offset 9");
        assert_eq!(bytes[HEADER_BYTES + 8], 3, "field count at offset 17");
        assert_eq!(Entry::decode(&bytes), Some(h));
        assert_eq!(Entry::decode(&[9, 0, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(Entry::decode(&[1, 0]), None);
    }

    #[test]
    fn record_keys_sort_by_prefix_then_key() {
        assert_eq!(key_record(b"ab"), b"\x01ab");
        let f = field_record(b"h", 2, b"f");
        assert_eq!(f, [2, 0, 0, 0, 1, b'h', 0, 0, 0, 0, 0, 0, 0, 2, b'f']);
        // Big-endian times: the index is in expiry order.
        assert!(expiry_record(255, b"z") < expiry_record(256, b"a"));
        // A key's fields never interleave with a longer key's sharing its prefix.
        assert!(field_record(b"h", 2, b"\xff") < field_record(b"hh", 0, b""));
    }
}
