//! The MemTable: the newest writes, ordered, with tombstones (`None`) for deletes. The engine keeps
//! one active MemTable and at most one immutable one being committed (§5.2).

use std::collections::BTreeMap;
use std::ops::Bound;

use strata_core::{BatchOp, Key, Value};

/// Estimated per-entry share of the map's nodes: a 24 B key and a 24 B value slot in B-tree
/// nodes of 11 slots about 2/3 full, plus the node headers.
const ENTRY_OVERHEAD_BYTES: u64 = 80;

/// What a heap buffer of `len` bytes costs the allocator (glibc: an 8 B header, 16 B granules,
/// 32 B minimum); an empty `Vec` allocates nothing. Counting this keeps the MemTable's share of
/// the memory budget honest for small records.
fn heap_bytes(len: usize) -> u64 {
    if len == 0 {
        0
    } else {
        ((len as u64 + 8).next_multiple_of(16)).max(32)
    }
}

/// The memory one entry costs.
fn entry_bytes(key: &[u8], value: Option<&[u8]>) -> u64 {
    ENTRY_OVERHEAD_BYTES + heap_bytes(key.len()) + value.map_or(0, |v| heap_bytes(v.len()))
}

#[derive(Debug, Default)]
pub struct MemTable {
    entries: BTreeMap<Key, Option<Value>>,
    bytes: u64,
}

impl MemTable {
    pub fn apply(&mut self, op: BatchOp) {
        let (key, value) = match op {
            BatchOp::Put { key, value } => (key, Some(value)),
            BatchOp::Delete { key } => (key, None),
        };
        self.bytes += entry_bytes(&key, value.as_deref());
        let old_bytes = entry_bytes(&key, None);
        if let Some(old) = self.entries.insert(key, value) {
            // The key and the entry slot were already counted; the old value goes.
            self.bytes -= old_bytes + old.map_or(0, |v| heap_bytes(v.len()));
        }
    }

    /// `Some(None)` is a tombstone: the key was deleted here.
    pub fn get(&self, key: &[u8]) -> Option<Option<&Value>> {
        self.entries.get(key).map(Option::as_ref)
    }

    pub fn memory_bytes(&self) -> u64 {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Option<Value>)> {
        self.entries.iter()
    }

    /// Up to `limit` entries between `lower` and `upper` (tombstones included), in scan order,
    /// appended to `out`.
    pub fn window_into(
        &self,
        bounds: (Bound<&[u8]>, Bound<&[u8]>),
        reverse: bool,
        limit: usize,
        out: &mut Vec<(Key, Option<Value>)>,
    ) {
        let r = self.entries.range::<[u8], _>(bounds);
        let clone = |(k, v): (&Key, &Option<Value>)| (k.clone(), v.clone());
        if reverse {
            out.extend(r.rev().take(limit).map(clone));
        } else {
            out.extend(r.take(limit).map(clone));
        }
    }
}
