//! The MemTable: the newest writes, ordered, with tombstones (`None`) for deletes. The engine keeps
//! one active MemTable and at most one immutable one being committed (§5.2).

use std::collections::BTreeMap;
use std::ops::Bound;

use strata_core::{BatchOp, Key, Value};

/// Estimated per-entry overhead of the map, for the size that triggers a commit.
const ENTRY_OVERHEAD_BYTES: u64 = 64;

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
        let added = key.len() as u64 + value.as_ref().map_or(0, |v| v.len() as u64) + ENTRY_OVERHEAD_BYTES;
        let key_len = key.len() as u64;
        match self.entries.insert(key, value) {
            Some(old) => {
                self.bytes =
                    self.bytes + added - key_len - old.map_or(0, |v| v.len() as u64) - ENTRY_OVERHEAD_BYTES
            }
            None => self.bytes += added,
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
