//! The MemTable: the newest writes, ordered, with tombstones (`None`) for deletes. The engine keeps
//! one active MemTable and at most one immutable one being committed (§5.2).

use std::collections::BTreeMap;
use std::ops::Bound;

use strata_core::{at_or_after, at_or_before, BatchOp, Key, Value};

use super::{InlineKey as MemKey, INLINE_KEY_BYTES};

/// Estimated per-entry share of the map's nodes: a key slot (`MemKey`, 48 B with smallvec 1.x)
/// and a value slot in B-tree nodes of 11 slots about 2/3 full, plus the node headers.
const ENTRY_OVERHEAD_BYTES: u64 =
    ((std::mem::size_of::<MemKey>() + std::mem::size_of::<Option<Value>>()) * 3 / 2 + 8) as u64;

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

/// What a key costs besides its slot: a heap buffer when it is too long to be inline.
fn key_heap_bytes(key: &[u8]) -> u64 {
    if key.len() > INLINE_KEY_BYTES {
        heap_bytes(key.len())
    } else {
        0
    }
}

/// The memory one entry costs.
fn entry_bytes(key: &[u8], value: Option<&[u8]>) -> u64 {
    ENTRY_OVERHEAD_BYTES + key_heap_bytes(key) + value.map_or(0, |v| heap_bytes(v.len()))
}

#[derive(Debug, Default)]
pub struct MemTable {
    entries: BTreeMap<MemKey, Option<Value>>,
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
        if let Some(old) = self.entries.insert(MemKey::from_vec(key), value) {
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

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Option<Value>)> {
        self.entries.iter().map(|(k, v)| (k.as_slice(), v))
    }

    /// Up to `limit` entries between `lower` and `upper` (tombstones included), in scan order,
    /// appended to `out`. Returns what follows the window in scan order, so a scan can skip
    /// later windows that end before it while the MemTable is unchanged.
    pub fn window_into(
        &self,
        bounds: (Bound<&[u8]>, Bound<&[u8]>),
        reverse: bool,
        limit: usize,
        out: &mut Vec<(Key, Option<Value>)>,
    ) -> Ahead {
        // One B-tree descent, not two: `range(lower..upper)` searches for both edges, and most
        // windows of a scan find no MemTable entry at all (the table holds nearly every key).
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
    mut entries: impl Iterator<Item = (&'a MemKey, &'a Option<Value>)>,
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

    #[test]
    fn windows_hold_the_entries_within_both_bounds_in_scan_order_up_to_the_limit() {
        let mut mem = MemTable::default();
        for k in [b"a", b"c", b"e", b"g"] {
            mem.apply(BatchOp::Put { key: k.to_vec(), value: k.to_vec() });
        }
        mem.apply(BatchOp::Delete { key: b"d".to_vec() });
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
}
