//! `VersionedMemTable`: a MemTable whose entries carry the log position (lsn) of the write that
//! made them, and keep a key's older versions while a snapshot may still read them, so a scan
//! can see the table as of one lsn while writers go on (point-in-time scans, as an LSM-tree's
//! MemTable with sequence numbers). Deletes are tombstones, as in `MemTable::apply`.
//!
//! Which versions stay: when a write replaces a key's newest version (lsn `L'`), that version
//! is kept only if the newest live snapshot's lsn is at least `L'` (it is what that snapshot
//! sees); every live snapshot is older than the new write, so no other snapshot can need it.
//! Older versions already kept stay until the table is dropped (a finalized table goes whole).
//! With no snapshot live a key holds one version, as in `MemTable`.
//!
//! Memory is counted as in `MemTable` (the node share of a slot, long keys, value buffers), plus
//! one heap node per kept older version.

use std::collections::BTreeMap;
use std::ops::Bound;

use strata_core::{bounds_hold_nothing, BatchOp, Value};

use crate::inline_key::{self, heap_bytes, key_heap_bytes, InlineKey};
use crate::memtable::KeyBounds;

/// The lsn that sees every version (a read of the newest).
pub const NEWEST: u64 = u64::MAX;

/// One version of a key: the write's lsn, its value (`None`: a delete), and the version it
/// replaced when a snapshot still needed that one (newest first).
#[derive(Debug)]
struct Version {
    lsn: u64,
    value: Option<Value>,
    older: Option<Box<Version>>,
}

impl Version {
    /// The newest version of the chain whose lsn is at most `lsn`.
    fn at(&self, lsn: u64) -> Option<&Version> {
        let mut version = Some(self);
        while let Some(v) = version {
            if v.lsn <= lsn {
                return Some(v);
            }
            version = v.older.as_deref();
        }
        None
    }
}

/// Estimated per-entry share of the map's nodes, as `memtable::ENTRY_OVERHEAD_BYTES` with the
/// versioned slot.
pub const ENTRY_OVERHEAD_BYTES: u64 =
    ((std::mem::size_of::<InlineKey>() + std::mem::size_of::<Version>()) * 3 / 2 + 8) as u64;

/// What a version costs besides its key: its value buffer, and its own heap node when it is
/// an older one.
fn version_bytes(value: Option<&[u8]>, older: bool) -> u64 {
    let node = if older { heap_bytes(std::mem::size_of::<Version>()) } else { 0 };
    node + value.map_or(0, |v| heap_bytes(v.len()))
}

/// Key and value bytes of one version (a delete counts its key).
fn user_bytes(key_len: usize, value: Option<&[u8]>) -> u64 {
    (key_len + value.map_or(0, <[u8]>::len)) as u64
}

/// Invariants: `memory_bytes` and `data_bytes` are the sums over every kept version (see the
/// module documentation); a chain's lsns strictly decrease.
#[derive(Debug, Default)]
pub struct VersionedMemTable {
    entries: BTreeMap<InlineKey, Version>,
    memory_bytes: u64,
    data_bytes: u64,
}

impl VersionedMemTable {
    /// Applies a put, or a delete as a tombstone, made by the write at `lsn` (no older than
    /// any applied before). `newest_snapshot`: the lsn of the newest snapshot still live, if
    /// any; the version this write replaces is kept when that snapshot sees it. Two operations
    /// of one batch on a key share its lsn: the later one replaces the earlier outright.
    pub fn apply(&mut self, op: BatchOp, lsn: u64, newest_snapshot: Option<u64>) {
        let (key, value) = match op {
            BatchOp::Put { key, value } => (key, Some(value)),
            BatchOp::Delete { key } => (key, None),
        };
        let key_len = key.len();
        self.data_bytes += user_bytes(key_len, value.as_deref());
        self.memory_bytes += version_bytes(value.as_deref(), false);
        let new = Version { lsn, value, older: None };
        let Some(old) = self.entries.get_mut(key.as_slice()) else {
            self.memory_bytes += ENTRY_OVERHEAD_BYTES + key_heap_bytes(key_len);
            self.entries.insert(inline_key::from_vec(key), new);
            return;
        };
        let mut replaced = std::mem::replace(old, new);
        let keep = newest_snapshot.is_some_and(|snapshot| snapshot >= replaced.lsn) && replaced.lsn < lsn;
        if keep {
            // The replaced version becomes an older one: it gains a heap node.
            self.memory_bytes += version_bytes(None, true);
            old.older = Some(Box::new(replaced));
        } else {
            old.older = if newest_snapshot.is_some() { replaced.older.take() } else { None };
            self.forget(key_len, &replaced);
        }
    }

    /// Takes `version` and its older chain out of the totals.
    fn forget(&mut self, key_len: usize, version: &Version) {
        let mut next = Some(version);
        let mut older = false;
        while let Some(v) = next {
            self.data_bytes -= user_bytes(key_len, v.value.as_deref());
            self.memory_bytes -= version_bytes(v.value.as_deref(), older);
            next = v.older.as_deref();
            older = true;
        }
    }

    /// `key` as of `lsn` (`NEWEST`: now). `None`: the table holds no version of it that old;
    /// `Some(None)`: deleted.
    pub fn get_at(&self, key: &[u8], lsn: u64) -> Option<Option<&Value>> {
        self.entries.get(key).and_then(|v| v.at(lsn)).map(|v| v.value.as_ref())
    }

    /// What the entries cost in memory (see the module documentation).
    pub fn memory_bytes(&self) -> u64 {
        self.memory_bytes
    }

    /// Key and value bytes of every kept version (a delete counts its key).
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The keys within `bounds` as of `lsn`, in key order (`None`: a delete); keys with no
    /// version that old are left out. No keys when the bounds hold none.
    pub fn range_at<'a>(
        &'a self,
        bounds: KeyBounds<'a>,
        lsn: u64,
    ) -> impl DoubleEndedIterator<Item = (&'a [u8], Option<&'a [u8]>)> + 'a {
        // `BTreeMap::range` panics on such bounds; nothing is below the empty key.
        let bounds = if bounds_hold_nothing(bounds.0, bounds.1) {
            (Bound::Unbounded, Bound::Excluded(&[][..]))
        } else {
            bounds
        };
        self.entries
            .range::<[u8], _>(bounds)
            .filter_map(move |(k, v)| v.at(lsn).map(|v| (k.as_slice(), v.value.as_deref())))
    }

    /// Every key's newest version in key order (what the table holds once no snapshot reads it).
    pub fn newest(&self) -> impl DoubleEndedIterator<Item = (&[u8], Option<&[u8]>)> + '_ {
        self.entries.iter().map(|(k, v)| (k.as_slice(), v.value.as_deref()))
    }
}

#[cfg(test)]
#[path = "versioned_memtable_tests.rs"]
mod tests;
