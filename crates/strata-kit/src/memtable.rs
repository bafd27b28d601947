//! `MemTable`: an ordered in-memory map of keys to values with honest memory accounting: every
//! entry counts its share of the B-tree's nodes and what its key and value cost the allocator,
//! so an engine can hold it to a memory budget.
//!
//! Two ways to apply a delete, chosen per call by what the table is for:
//! - `apply` records a tombstone (`None`): a table in front of older data (flex's MemTables)
//!   must shadow the key there;
//! - `apply_without_tombstones` removes the entry: a table that holds the whole live data set
//!   (the `memory` engine) has nothing to shadow.
//!
//! Keys up to `INLINE_KEY_BYTES` are held inline in the nodes (`InlineKey`), so a descent
//! compares bytes in the node it reads instead of following a pointer per key.

use std::collections::BTreeMap;
use std::ops::Bound;

use strata_core::{at_or_after, at_or_before, bounds_hold_nothing, BatchOp, Key, Value};

use crate::inline_key::{self, heap_bytes, key_heap_bytes, InlineKey};

/// Estimated per-entry share of the map's nodes: a key slot (`InlineKey`) and a value slot in
/// B-tree nodes of 11 slots about 2/3 full, plus the node headers.
pub const ENTRY_OVERHEAD_BYTES: u64 =
    ((std::mem::size_of::<InlineKey>() + std::mem::size_of::<Option<Value>>()) * 3 / 2 + 8) as u64;

/// The memory one entry costs.
fn entry_bytes(key_len: usize, value: Option<&[u8]>) -> u64 {
    ENTRY_OVERHEAD_BYTES + key_heap_bytes(key_len) + value.map_or(0, |v| heap_bytes(v.len()))
}

/// Key and value bytes of one entry (a tombstone counts its key).
fn user_bytes(key_len: usize, value: Option<&[u8]>) -> u64 {
    (key_len + value.map_or(0, <[u8]>::len)) as u64
}

/// A range of keys: `(lower, upper)`.
pub type KeyBounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// Invariants: `memory_bytes` and `data_bytes` are the sums of `entry_bytes` and `user_bytes`
/// over `entries`.
#[derive(Debug, Default)]
pub struct MemTable {
    entries: BTreeMap<InlineKey, Option<Value>>,
    memory_bytes: u64,
    data_bytes: u64,
}

impl MemTable {
    /// Applies a put, or a delete as a tombstone (`get` then answers `Some(None)`).
    pub fn apply(&mut self, op: BatchOp) {
        match op {
            BatchOp::Put { key, value } => self.insert(key, Some(value)),
            BatchOp::Delete { key } => self.insert(key, None),
        }
    }

    /// Applies a put, or a delete by removing the key's entry: the table never holds tombstones.
    pub fn apply_without_tombstones(&mut self, op: BatchOp) {
        match op {
            BatchOp::Put { key, value } => self.insert(key, Some(value)),
            BatchOp::Delete { key } => self.remove(&key),
        }
    }

    fn insert(&mut self, key: Key, value: Option<Value>) {
        let key_len = key.len();
        self.memory_bytes += entry_bytes(key_len, value.as_deref());
        self.data_bytes += user_bytes(key_len, value.as_deref());
        if let Some(old) = self.entries.insert(inline_key::from_vec(key), value) {
            // Counted above as a new entry: the one it replaces goes.
            self.memory_bytes -= entry_bytes(key_len, old.as_deref());
            self.data_bytes -= user_bytes(key_len, old.as_deref());
        }
    }

    fn remove(&mut self, key: &[u8]) {
        if let Some(old) = self.entries.remove(key) {
            self.memory_bytes -= entry_bytes(key.len(), old.as_deref());
            self.data_bytes -= user_bytes(key.len(), old.as_deref());
        }
    }

    /// `None`: the table knows nothing of `key`; `Some(None)`: a tombstone (deleted here).
    pub fn get(&self, key: &[u8]) -> Option<Option<&Value>> {
        self.entries.get(key).map(Option::as_ref)
    }

    /// What the entries cost in memory: node share, keys too long to be inline, value buffers.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_bytes
    }

    /// Key and value bytes of the entries (a tombstone counts its key).
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// Entries, tombstones included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry in key order (`None`: a tombstone).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], Option<&[u8]>)> + '_ {
        self.entries.iter().map(|(k, v)| (k.as_slice(), v.as_deref()))
    }

    /// The entries within `bounds` in key order (`None`: a tombstone); none when the bounds
    /// hold no key (a lower bound above the upper one is not an error).
    pub fn range<'a>(
        &'a self,
        bounds: KeyBounds<'a>,
    ) -> impl DoubleEndedIterator<Item = (&'a [u8], Option<&'a [u8]>)> + 'a {
        // `BTreeMap::range` panics on such bounds; nothing is below the empty key.
        let bounds = if bounds_hold_nothing(bounds.0, bounds.1) {
            (Bound::Unbounded, Bound::Excluded(&[][..]))
        } else {
            bounds
        };
        self.entries.range::<[u8], _>(bounds).map(|(k, v)| (k.as_slice(), v.as_deref()))
    }

    /// Up to `limit` entries between `lower` and `upper` (tombstones included), in scan order,
    /// appended to `out`. Returns what follows the window in scan order, so a scan can skip
    /// later windows that end before it while the table is unchanged.
    pub fn window_into(
        &self,
        bounds: KeyBounds<'_>,
        reverse: bool,
        limit: usize,
        out: &mut Vec<(Key, Option<Value>)>,
    ) -> Ahead {
        // One B-tree descent, not two: `range(lower..upper)` searches for both edges, and most
        // windows of a scan find no entry at all (flex: the table file holds nearly every key).
        let (lower, upper) = bounds;
        if reverse {
            let r = self.entries.range::<[u8], _>((Bound::Unbounded, upper)).rev();
            fill(r, |k| at_or_after(k, lower), limit, out)
        } else {
            let r = self.entries.range::<[u8], _>((lower, Bound::Unbounded));
            fill(r, |k| at_or_before(k, upper), limit, out)
        }
    }
}

/// What follows a MemTable window in scan order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ahead {
    /// The first entry past the window's far bound.
    Key(Key),
    /// No entry past the window's far bound.
    Nothing,
    /// The window stopped at its entry limit: what follows is not known.
    Unknown,
}

fn fill<'a>(
    mut entries: impl Iterator<Item = (&'a InlineKey, &'a Option<Value>)>,
    within: impl Fn(&[u8]) -> bool,
    limit: usize,
    out: &mut Vec<(Key, Option<Value>)>,
) -> Ahead {
    for _ in 0..limit {
        match entries.next() {
            None => return Ahead::Nothing,
            Some((k, v)) if within(k) => out.push((k.to_vec(), v.clone())),
            Some((k, _)) => return Ahead::Key(k.to_vec()),
        }
    }
    Ahead::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &[u8], v: &[u8]) -> BatchOp {
        BatchOp::Put { key: k.to_vec(), value: v.to_vec() }
    }

    fn delete(k: &[u8]) -> BatchOp {
        BatchOp::Delete { key: k.to_vec() }
    }

    #[test]
    fn windows_hold_the_entries_within_both_bounds_in_scan_order_up_to_the_limit() {
        let mut mem = MemTable::default();
        for k in [b"a", b"c", b"e", b"g"] {
            mem.apply(put(k, k));
        }
        mem.apply(delete(b"d"));
        let window = |lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool, limit: usize| {
            let mut out = Vec::new();
            mem.window_into((lower, upper), reverse, limit, &mut out);
            out.into_iter().map(|(k, v)| (k[0] as char, v.is_some())).collect::<Vec<_>>()
        };
        let ahead = |lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool, limit: usize| {
            mem.window_into((lower, upper), reverse, limit, &mut Vec::new())
        };
        let (inc, exc) = (Bound::Included::<&[u8]>, Bound::Excluded::<&[u8]>);
        assert_eq!(window(inc(b"b"), inc(b"e"), false, 10), [('c', true), ('d', false), ('e', true)]);
        assert_eq!(window(exc(b"c"), exc(b"g"), false, 10), [('d', false), ('e', true)]);
        assert_eq!(window(inc(b"c"), inc(b"g"), true, 2), [('g', true), ('e', true)]);
        assert_eq!(window(exc(b"a"), exc(b"e"), true, 10), [('d', false), ('c', true)]);
        assert_eq!(window(Bound::Unbounded, inc(b"b"), false, 10), [('a', true)]);
        assert_eq!(window(inc(b"f"), Bound::Unbounded, true, 10), [('g', true)]);
        assert!(window(exc(b"e"), exc(b"g"), false, 10).is_empty());
        assert!(window(inc(b"h"), Bound::Unbounded, false, 10).is_empty());
        // What follows: the first entry past the far bound (a tombstone counts), none, or unknown
        // when the limit cut the window.
        assert_eq!(ahead(inc(b"b"), inc(b"c"), false, 10), Ahead::Key(b"d".to_vec()));
        assert_eq!(ahead(inc(b"b"), exc(b"e"), false, 10), Ahead::Key(b"e".to_vec()));
        assert_eq!(ahead(exc(b"e"), exc(b"g"), true, 10), Ahead::Key(b"e".to_vec()));
        assert_eq!(ahead(inc(b"b"), inc(b"g"), false, 10), Ahead::Nothing);
        assert_eq!(ahead(Bound::Unbounded, inc(b"b"), true, 10), Ahead::Nothing);
        assert_eq!(ahead(inc(b"b"), inc(b"g"), false, 2), Ahead::Unknown);
        assert_eq!(ahead(inc(b"b"), inc(b"c"), false, 1), Ahead::Unknown);
    }

    /// Both totals must equal a walk of the entries after every kind of change.
    #[test]
    fn accounting_follows_puts_overwrites_tombstones_and_removals() {
        let walk = |m: &MemTable| -> (u64, u64) {
            let memory = m.iter().map(|(k, v)| entry_bytes(k.len(), v)).sum();
            let data = m.iter().map(|(k, v)| user_bytes(k.len(), v)).sum();
            (memory, data)
        };
        let long = [7u8; 100];
        let mut mem = MemTable::default();
        let ops = [
            put(b"a", b"1"),
            put(&long, &[1; 500]),
            put(b"a", &[2; 300]),
            delete(b"a"),
            put(&long, b""),
            delete(b"never"),
        ];
        for op in ops {
            mem.apply(op);
            assert_eq!((mem.memory_bytes(), mem.data_bytes()), walk(&mem));
        }
        assert_eq!(mem.get(b"a"), Some(None), "a tombstone");
        assert_eq!(mem.len(), 3);
        // A long key costs a heap buffer besides its slot; a short one does not.
        assert!(entry_bytes(long.len(), None) > entry_bytes(1, None));
        let mut live = MemTable::default();
        for op in [put(b"a", b"1"), put(&long, &[1; 500]), delete(b"a"), delete(b"never")] {
            live.apply_without_tombstones(op);
            assert_eq!((live.memory_bytes(), live.data_bytes()), walk(&live));
        }
        assert_eq!((live.get(b"a"), live.len()), (None, 1), "removed, no tombstone");
        live.apply_without_tombstones(delete(&long));
        assert_eq!((live.memory_bytes(), live.data_bytes(), live.len()), (0, 0, 0));
    }

    #[test]
    fn ranges_hold_the_entries_within_their_bounds_and_empty_bounds_hold_none() {
        let mut mem = MemTable::default();
        for k in [b"a", b"c", b"e"] {
            mem.apply(put(k, k));
        }
        mem.apply(delete(b"d"));
        let keys = |lower: Bound<&[u8]>, upper: Bound<&[u8]>| {
            mem.range((lower, upper)).map(|(k, v)| (k[0] as char, v.is_some())).collect::<Vec<_>>()
        };
        let (inc, exc) = (Bound::Included::<&[u8]>, Bound::Excluded::<&[u8]>);
        assert_eq!(keys(inc(b"b"), inc(b"d")), [('c', true), ('d', false)]);
        assert_eq!(keys(exc(b"a"), Bound::Unbounded), [('c', true), ('d', false), ('e', true)]);
        assert_eq!(mem.range((Bound::Unbounded, exc(b"c"))).rev().count(), 1);
        for (lower, upper) in [(inc(b"e"), inc(b"a")), (exc(b"c"), exc(b"c")), (inc(b"c"), exc(b"c"))] {
            assert!(keys(lower, upper).is_empty());
        }
        assert_eq!(keys(inc(b"c"), inc(b"c")), [('c', true)]);
    }
}
