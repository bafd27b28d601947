//! A leaf: the newest value of every key in its range, no tombstones (a delete that reaches a
//! leaf removes the key: nothing older lies beneath). A batch applied to a leaf merges into it;
//! a leaf grown past `leaf_bytes` splits into even parts of at most that size.

use strata_core::{Key, Value};
use strata_kit::sorted_run::{Entry, EntryKind};

use super::{entry_bytes, TreeConfig};

/// See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Leaf {
    entries: Vec<(Key, Value)>,
    bytes: u64,
}

impl Leaf {
    pub fn from_entries(entries: Vec<(Key, Value)>) -> Leaf {
        let bytes = entries.iter().map(|(k, v)| value_bytes(k, v)).sum();
        Leaf { entries, bytes }
    }

    pub fn entries(&self) -> &[(Key, Value)] {
        &self.entries
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn get(&self, key: &[u8]) -> Option<&Value> {
        let i = self.entries.binary_search_by(|(k, _)| k.as_slice().cmp(key)).ok()?;
        Some(&self.entries[i].1)
    }

    /// Applies `batch` (sorted, newer than the leaf) and returns the leaf, or its parts when it
    /// grew past `leaf_bytes` (`split_even`): each with its lower key (the first part's is the
    /// leaf's own, `lower`).
    pub fn apply(self, lower: Key, batch: Vec<(Key, Entry)>, config: &TreeConfig) -> Vec<(Key, Leaf)> {
        let mut merged: Vec<(Key, Value)> = Vec::with_capacity(self.entries.len() + batch.len());
        let mut old = self.entries.into_iter().peekable();
        for (key, entry) in batch {
            while let Some((k, v)) = old.next_if(|(k, _)| *k < key) {
                merged.push((k, v));
            }
            old.next_if(|(k, _)| *k == key);
            if entry.kind == EntryKind::Put {
                merged.push((key, entry.value));
            }
        }
        merged.extend(old);
        split_even(lower, merged, config.leaf_bytes)
    }

    /// Two neighbouring leaves as one (`self` the lower).
    pub fn join(mut self, upper: Leaf) -> Leaf {
        self.bytes += upper.bytes;
        self.entries.extend(upper.entries);
        self
    }
}

fn value_bytes(key: &[u8], value: &[u8]) -> u64 {
    entry_bytes(key, &Entry { kind: EntryKind::Put, value: Vec::new() }) + value.len() as u64
}

/// `entries` cut into `⌈bytes / limit⌉` parts of about equal size (one part when they fit, or
/// when there is a single entry; a part can pass `limit` by less than one entry); the first
/// part's lower key is `lower`, the others' their first key.
pub fn split_even(lower: Key, entries: Vec<(Key, Value)>, limit: u64) -> Vec<(Key, Leaf)> {
    let total: u64 = entries.iter().map(|(k, v)| value_bytes(k, v)).sum();
    let parts = total.div_ceil(limit.max(1)).max(1);
    if parts == 1 || entries.len() < 2 {
        return vec![(lower, Leaf { entries, bytes: total })];
    }
    let target = total.div_ceil(parts);
    let mut out = Vec::with_capacity(parts as usize);
    let mut current: Vec<(Key, Value)> = Vec::new();
    let mut current_bytes = 0u64;
    let mut part_lower = lower;
    for (key, value) in entries {
        let bytes = value_bytes(&key, &value);
        if !current.is_empty() && current_bytes + bytes > target && (out.len() as u64) < parts - 1 {
            let next_lower = key.clone();
            out.push((
                std::mem::replace(&mut part_lower, next_lower),
                Leaf { entries: std::mem::take(&mut current), bytes: current_bytes },
            ));
            current_bytes = 0;
        }
        current_bytes += bytes;
        current.push((key, value));
    }
    out.push((part_lower, Leaf { entries: current, bytes: current_bytes }));
    out
}
