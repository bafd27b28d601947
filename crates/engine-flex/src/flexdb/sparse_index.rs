//! The sparse KV index (§5.1): a B+-tree over intervals of the table file. Each leaf entry holds an
//! interval's index key and a *partial* offset; each internal child pointer holds a *shift*. The
//! effective file offset of an interval is its partial offset plus the shifts on its search path,
//! so inserting or removing bytes in one interval shifts all later intervals in O(fanout · height):
//! the later entries of the same leaf and the later siblings on the path. Keys and pivots never
//! change when shifting.
//!
//! Routing invariant: with `s_i` the index key of interval `i` (in file order), interval `i` holds
//! exactly the records whose keys are in `[s_i, s_{i+1})`; `s_0` is the empty key (every key has an
//! interval) and the last interval is unbounded above. An index key need not be a record key: a
//! split gives the right part `shortest_separator(last key on the left, first key on the right)`
//! (any `s` with `left < s <= right` routes every lookup and insert the same), recovery's samples
//! (§5.4) use record keys. So nothing may assume that an interval's first record has its index
//! key: checks use `s_i <= first record` and `last record < s_{i+1}`, and the interval cache names
//! an interval by its index key only because that is unique while the interval exists.
//!
//! Memory (`memory_bytes` counts what is allocated, with malloc's rounding): a leaf keeps its keys
//! in one `NodeKeys` (shared prefix once, suffixes back to back, 8-byte heads; see node_keys.rs) and
//! its entries in one array of 24-byte `LeafEntry`s; sizes are u32 (`MAX_INTERVAL_BYTES`) and a
//! count is a u32 with a sentinel. Node arrays grow by a quarter, not by doubling.
//!
//! Tree invariants: every node is non-empty; a child's pivot equals the smallest index key in its
//! subtree; intervals are contiguous (offset of the next = offset + size) and the first starts at 0.

use std::sync::atomic::AtomicU32;

use strata_core::Key;

#[path = "node_keys.rs"]
mod node_keys;

pub use self::node_keys::IndexKey;
use self::node_keys::{allocation_bytes, reserve, NodeKeys};

/// Children per node before it splits.
const MAX_FANOUT: usize = 64;
/// `cache_slot` value of an interval that is not cached.
pub const NO_SLOT: u32 = u32::MAX;
/// The largest interval the index can describe: sizes are stored as u32.
pub const MAX_INTERVAL_BYTES: u64 = u32::MAX as u64;
/// `LeafEntry::count` of an interval whose record count is unknown (after a rebuild). A real count
/// is far below: a record takes at least 6 bytes and an interval at most `MAX_INTERVAL_BYTES`.
const UNKNOWN_COUNT: u32 = u32::MAX;
/// `Interval::extents` when nothing is known (after a rebuild): treated as fragmented.
const UNKNOWN_EXTENTS: u32 = u32::MAX;

/// One interval's index entry, without its key (that is in the leaf's `NodeKeys`).
#[derive(Debug)]
struct LeafEntry {
    partial_offset: i64,
    size_bytes: u32,
    /// Records in the interval, or `UNKNOWN_COUNT` until it is first loaded after a rebuild.
    count: u32,
    /// Interval-cache slot holding the decoded records, or `NO_SLOT` (§5.3). Readers set it under
    /// the index's read lock; the slot itself records its owner key, so a stale value is harmless.
    cache_slot: AtomicU32,
    /// Upper estimate of the table-file extents the interval spans (each is one device read on a
    /// cache miss), or `UNKNOWN_EXTENTS`. The table rewrites fragmented intervals.
    extents: u32,
}

const _: () = assert!(size_of::<LeafEntry>() == 24, "the memory estimate in the module doc");

impl LeafEntry {
    fn new(partial_offset: i64, size_bytes: u32, count: Option<u32>) -> LeafEntry {
        LeafEntry {
            partial_offset,
            size_bytes,
            count: count.unwrap_or(UNKNOWN_COUNT),
            cache_slot: AtomicU32::new(NO_SLOT),
            extents: UNKNOWN_EXTENTS,
        }
    }
}

/// One interval as the index describes it: valid until the index is next modified.
#[derive(Clone, Copy, Debug)]
pub struct Interval<'a> {
    key: IndexKey<'a>,
    entry: &'a LeafEntry,
}

impl<'a> Interval<'a> {
    /// The interval's index key `s_i` (see the routing invariant).
    pub fn key(&self) -> IndexKey<'a> {
        self.key
    }

    pub fn size_bytes(&self) -> u64 {
        u64::from(self.entry.size_bytes)
    }

    /// Records in the interval; `None` until it is first loaded after a rebuild (§5.4).
    pub fn count(&self) -> Option<u32> {
        (self.entry.count != UNKNOWN_COUNT).then_some(self.entry.count)
    }

    pub fn cache_slot(&self) -> &'a AtomicU32 {
        &self.entry.cache_slot
    }

    pub fn extents(&self) -> u32 {
        self.entry.extents
    }
}

/// The shortest byte string `s` with `left < s <= right` (for `left < right`): `right` cut just
/// after the first byte where it differs from `left`. No shorter `s` exists: one of at most the
/// common prefix's length is either a prefix of `left` (so `<= left`) or differs from both at the
/// same byte (so below `left` or above `right`).
pub fn shortest_separator<'a>(left: &[u8], right: &'a [u8]) -> &'a [u8] {
    debug_assert!(left < right);
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    right.get(..common + 1).unwrap_or(right)
}

#[derive(Clone, Copy, Debug)]
struct ChildRef {
    shift: i64,
    node: usize,
}

#[derive(Debug)]
enum Node {
    Leaf {
        keys: NodeKeys,
        entries: Vec<LeafEntry>,
    },
    /// `keys` are the pivots: key `i` is the smallest index key under `children[i]`.
    Internal {
        keys: NodeKeys,
        children: Vec<ChildRef>,
    },
}

impl Node {
    fn keys(&self) -> &NodeKeys {
        match self {
            Node::Leaf { keys, .. } | Node::Internal { keys, .. } => keys,
        }
    }

    fn len(&self) -> usize {
        self.keys().len()
    }

    fn heap_bytes(&self) -> u64 {
        let (keys, entries_bytes) = match self {
            Node::Leaf { keys, entries } => (keys, entries.capacity() * size_of::<LeafEntry>()),
            Node::Internal { keys, children } => (keys, children.capacity() * size_of::<ChildRef>()),
        };
        keys.heap_bytes() + allocation_bytes(entries_bytes)
    }

    fn free() -> Node {
        Node::Leaf { keys: NodeKeys::default(), entries: Vec::new() }
    }
}

/// Splits `v` at `at`, leaving the left part a quarter of room to grow.
fn split_vec<T>(v: &mut Vec<T>, at: usize) -> Vec<T> {
    let right = v.split_off(at);
    v.shrink_to(v.len() + v.len() / 4);
    right
}

/// Where an interval is: valid until the index is next modified.
#[derive(Clone, Debug)]
pub struct Cursor {
    /// (internal node, child index, sum of shifts above that node) from the root down.
    path: Vec<(usize, usize, i64)>,
    leaf: usize,
    pos: usize,
    /// Sum of the shifts on the whole path.
    base: i64,
}

/// An interval `build` cannot describe: larger than `MAX_INTERVAL_BYTES`, or ending before it
/// starts (offsets out of order).
#[derive(Debug, PartialEq, Eq)]
pub struct BadInterval {
    pub offset: u64,
    pub end: u64,
}

/// The sparse index. See the module documentation.
#[derive(Debug)]
pub struct SparseIndex {
    /// Nodes by id; released ones are empty leaves listed in `free`.
    nodes: Vec<Node>,
    free: Vec<usize>,
    root: usize,
    intervals: usize,
}

impl Default for SparseIndex {
    /// One empty interval.
    fn default() -> Self {
        let keys = NodeKeys::from_keys(&[IndexKey::from_slice(&[])]);
        let leaf = Node::Leaf { keys, entries: vec![LeafEntry::new(0, 0, Some(0))] };
        SparseIndex { nodes: vec![leaf], free: Vec::new(), root: 0, intervals: 1 }
    }
}

impl SparseIndex {
    /// Builds an index over intervals starting at the given `(index key, offset)` pairs (sorted by
    /// both; the first must be `("", 0)`), the last ending at `total_bytes`. Counts are unknown.
    pub fn build(starts: &[(Key, u64)], total_bytes: u64) -> Result<SparseIndex, BadInterval> {
        debug_assert!(starts.first().is_some_and(|(k, o)| k.is_empty() && *o == 0));
        let ends = starts.iter().skip(1).map(|(_, o)| *o).chain([total_bytes]);
        let count = (total_bytes == 0).then_some(0);
        let mut entries = Vec::with_capacity(starts.len());
        for ((_, offset), end) in starts.iter().zip(ends) {
            let size = end.checked_sub(*offset).and_then(|s| u32::try_from(s).ok());
            let size = size.ok_or(BadInterval { offset: *offset, end })?;
            entries.push(LeafEntry::new(*offset as i64, size, count));
        }
        let mut index = SparseIndex { nodes: Vec::new(), free: Vec::new(), root: 0, intervals: starts.len() };
        // Leaves three quarters full: room for splits before the first node split.
        let per_node = MAX_FANOUT * 3 / 4;
        let mut level: Vec<(Key, ChildRef)> = Vec::new();
        let mut rest = entries.into_iter();
        for chunk in starts.chunks(per_node) {
            let keys: Vec<IndexKey<'_>> = chunk.iter().map(|(k, _)| IndexKey::from_slice(k)).collect();
            let entries: Vec<LeafEntry> = rest.by_ref().take(chunk.len()).collect();
            let pivot = chunk.first().map(|(k, _)| k.clone()).unwrap_or_default();
            let node = index.alloc(Node::Leaf { keys: NodeKeys::from_keys(&keys), entries });
            level.push((pivot, ChildRef { shift: 0, node }));
        }
        while level.len() > 1 {
            let mut upper = Vec::new();
            for chunk in level.chunks(per_node) {
                let keys: Vec<IndexKey<'_>> = chunk.iter().map(|(k, _)| IndexKey::from_slice(k)).collect();
                let children = chunk.iter().map(|(_, c)| *c).collect();
                let pivot = chunk.first().map(|(k, _)| k.clone()).unwrap_or_default();
                let node = index.alloc(Node::Internal { keys: NodeKeys::from_keys(&keys), children });
                upper.push((pivot, ChildRef { shift: 0, node }));
            }
            level = upper;
        }
        index.root = level.first().map_or(0, |(_, c)| c.node);
        if index.nodes.is_empty() {
            return Ok(SparseIndex::default());
        }
        Ok(index)
    }

    fn alloc(&mut self, node: Node) -> usize {
        match self.free.pop() {
            Some(id) => {
                self.nodes[id] = node;
                id
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        }
    }

    fn release(&mut self, id: usize) {
        self.nodes[id] = Node::free();
        self.free.push(id);
    }

    fn leaf_mut(&mut self, id: usize) -> (&mut NodeKeys, &mut Vec<LeafEntry>) {
        match &mut self.nodes[id] {
            Node::Leaf { keys, entries } => (keys, entries),
            Node::Internal { .. } => unreachable!("node {id} is not a leaf"),
        }
    }

    fn internal_mut(&mut self, id: usize) -> (&mut NodeKeys, &mut Vec<ChildRef>) {
        match &mut self.nodes[id] {
            Node::Internal { keys, children } => (keys, children),
            Node::Leaf { .. } => unreachable!("node {id} is not internal"),
        }
    }

    fn entry_mut(&mut self, cur: &Cursor) -> &mut LeafEntry {
        &mut self.leaf_mut(cur.leaf).1[cur.pos]
    }

    pub fn interval_count(&self) -> usize {
        self.intervals
    }

    /// Heap memory of the index as the allocator counts it: the node table, the free list, and
    /// every node's key and entry arrays (capacities, not lengths).
    pub fn memory_bytes(&self) -> u64 {
        allocation_bytes(self.nodes.capacity() * size_of::<Node>())
            + allocation_bytes(self.free.capacity() * size_of::<usize>())
            + self.nodes.iter().map(Node::heap_bytes).sum::<u64>()
    }

    /// The interval that would hold `key`: the last one whose index key is `<= key`.
    pub fn seek(&self, key: &[u8]) -> Cursor {
        self.descend(|keys| keys.count_le(key))
    }

    pub fn first(&self) -> Cursor {
        self.descend(|_| 1)
    }

    pub fn last(&self) -> Cursor {
        self.descend(|_| usize::MAX)
    }

    /// `pick(keys)` returns how many children/entries of a node to step over (the chosen index is
    /// that minus one, clamped to the node).
    fn descend(&self, pick: impl Fn(&NodeKeys) -> usize) -> Cursor {
        let (mut node, mut base, mut path) = (self.root, 0i64, Vec::new());
        loop {
            match &self.nodes[node] {
                Node::Internal { keys, children } => {
                    let idx = pick(keys).clamp(1, children.len()) - 1;
                    path.push((node, idx, base));
                    base += children[idx].shift;
                    node = children[idx].node;
                }
                Node::Leaf { keys, entries } => {
                    let pos = pick(keys).clamp(1, entries.len()) - 1;
                    return Cursor { path, leaf: node, pos, base };
                }
            }
        }
    }

    pub fn interval(&self, cur: &Cursor) -> Interval<'_> {
        match &self.nodes[cur.leaf] {
            Node::Leaf { keys, entries } => Interval { key: keys.key(cur.pos), entry: &entries[cur.pos] },
            Node::Internal { .. } => unreachable!("cursor on internal node {}", cur.leaf),
        }
    }

    /// The effective file offset of the interval at `cur`.
    pub fn offset(&self, cur: &Cursor) -> u64 {
        (cur.base + self.interval(cur).entry.partial_offset) as u64
    }

    /// The index key of the interval after `cur` (`s_{i+1}`, the exclusive upper end of its
    /// keys), without building a cursor: the next entry of the leaf, or else the pivot of the
    /// next subtree at the lowest ancestor that has one (a pivot is its subtree's smallest key).
    pub fn next_key(&self, cur: &Cursor) -> Option<IndexKey<'_>> {
        let keys = self.nodes[cur.leaf].keys();
        if cur.pos + 1 < keys.len() {
            return Some(keys.key(cur.pos + 1));
        }
        cur.path.iter().rev().find_map(|&(node, idx, _)| {
            let keys = self.nodes[node].keys();
            (idx + 1 < keys.len()).then(|| keys.key(idx + 1))
        })
    }

    pub fn is_first(&self, cur: &Cursor) -> bool {
        cur.pos == 0 && cur.path.iter().all(|&(_, idx, _)| idx == 0)
    }

    pub fn next(&self, cur: &Cursor) -> Option<Cursor> {
        if cur.pos + 1 < self.nodes[cur.leaf].len() {
            return Some(Cursor { pos: cur.pos + 1, ..cur.clone() });
        }
        let mut path = cur.path.clone();
        while let Some((node, idx, base)) = path.pop() {
            let Node::Internal { children, .. } = &self.nodes[node] else { return None };
            if let Some(c) = children.get(idx + 1) {
                path.push((node, idx + 1, base));
                return Some(self.descend_edge(path, base + c.shift, c.node, false));
            }
        }
        None
    }

    pub fn prev(&self, cur: &Cursor) -> Option<Cursor> {
        if cur.pos > 0 {
            return Some(Cursor { pos: cur.pos - 1, ..cur.clone() });
        }
        let mut path = cur.path.clone();
        while let Some((node, idx, base)) = path.pop() {
            let Node::Internal { children, .. } = &self.nodes[node] else { return None };
            if idx > 0 {
                let c = children[idx - 1];
                path.push((node, idx - 1, base));
                return Some(self.descend_edge(path, base + c.shift, c.node, true));
            }
        }
        None
    }

    fn descend_edge(
        &self,
        mut path: Vec<(usize, usize, i64)>,
        mut base: i64,
        mut node: usize,
        last: bool,
    ) -> Cursor {
        loop {
            match &self.nodes[node] {
                Node::Internal { children, .. } => {
                    let idx = if last { children.len() - 1 } else { 0 };
                    path.push((node, idx, base));
                    base += children[idx].shift;
                    node = children[idx].node;
                }
                Node::Leaf { entries, .. } => {
                    let pos = if last { entries.len() - 1 } else { 0 };
                    return Cursor { path, leaf: node, pos, base };
                }
            }
        }
    }

    /// Adds `delta` to the offset (leaf) or shift (internal) of entries `from..` of `id`.
    fn shift_from(&mut self, id: usize, from: usize, delta: i64) {
        match &mut self.nodes[id] {
            Node::Leaf { entries, .. } => {
                entries.iter_mut().skip(from).for_each(|e| e.partial_offset += delta);
            }
            Node::Internal { children, .. } => {
                children.iter_mut().skip(from).for_each(|c| c.shift += delta);
            }
        }
    }

    /// Moves every interval after `cur` by `delta` bytes. Keys do not change.
    fn shift_after(&mut self, cur: &Cursor, delta: i64) {
        if delta == 0 {
            return;
        }
        self.shift_from(cur.leaf, cur.pos + 1, delta);
        for &(node, idx, _) in &cur.path {
            self.shift_from(node, idx + 1, delta);
        }
    }

    /// Sets the size and record count of the interval at `cur` and shifts the later ones by the
    /// change in size (the table file grew or shrank inside this interval).
    pub fn resize(&mut self, cur: &Cursor, size_bytes: u32, count: Option<u32>, extents: u32) {
        let e = self.entry_mut(cur);
        let delta = i64::from(size_bytes) - i64::from(e.size_bytes);
        e.size_bytes = size_bytes;
        e.count = count.unwrap_or(UNKNOWN_COUNT);
        e.extents = extents;
        self.shift_after(cur, delta);
    }

    /// Splits the interval at `cur`: it keeps its first `left_bytes`/`left_count`; a new interval
    /// with index key `right_key` covers the rest. `right_key` must be above the interval's index
    /// key and below the next one's, and route as the routing invariant says: above every record
    /// left of the cut, at most the first one right of it. Offsets of other intervals do not
    /// change.
    pub fn split(
        &mut self,
        cur: &Cursor,
        left_bytes: u32,
        left_count: u32,
        right_key: &[u8],
        right_count: u32,
    ) {
        debug_assert!(self.interval(cur).key().cmp_slice(right_key).is_lt());
        debug_assert!(self.next(cur).is_none_or(|n| self.interval(&n).key().cmp_slice(right_key).is_gt()));
        self.intervals += 1;
        let (keys, entries) = self.leaf_mut(cur.leaf);
        let e = &mut entries[cur.pos];
        debug_assert!(left_bytes <= e.size_bytes);
        let mut right = LeafEntry::new(
            e.partial_offset + i64::from(left_bytes),
            e.size_bytes - left_bytes,
            Some(right_count),
        );
        right.extents = e.extents;
        e.size_bytes = left_bytes;
        e.count = left_count;
        keys.insert(cur.pos + 1, right_key);
        reserve(entries, 1);
        entries.insert(cur.pos + 1, right);
        if entries.len() > MAX_FANOUT {
            self.split_node(cur.leaf, &cur.path);
        }
    }

    /// Splits the overfull `node` (reached by `path`), then its ancestors as needed.
    fn split_node(&mut self, node: usize, path: &[(usize, usize, i64)]) {
        let (right, right_pivot) = match &mut self.nodes[node] {
            Node::Leaf { keys, entries } => {
                let at = entries.len() / 2;
                let (keys, entries) = (keys.split_off(at), split_vec(entries, at));
                let pivot = keys.key(0).to_vec();
                (Node::Leaf { keys, entries }, pivot)
            }
            Node::Internal { keys, children } => {
                let at = children.len() / 2;
                let (keys, children) = (keys.split_off(at), split_vec(children, at));
                let pivot = keys.key(0).to_vec();
                (Node::Internal { keys, children }, pivot)
            }
        };
        let right_id = self.alloc(right);
        match path.split_last() {
            None => {
                // The root split: a new root over both halves, with no shift of its own.
                let left_pivot = self.nodes[node].keys().key(0).to_vec();
                let keys = NodeKeys::from_keys(&[
                    IndexKey::from_slice(&left_pivot),
                    IndexKey::from_slice(&right_pivot),
                ]);
                let children = vec![ChildRef { shift: 0, node }, ChildRef { shift: 0, node: right_id }];
                self.root = self.alloc(Node::Internal { keys, children });
            }
            Some((&(parent, idx, _), above)) => {
                let (keys, children) = self.internal_mut(parent);
                // Same shift as the left half's pointer: effective offsets stay the same.
                let shift = children[idx].shift;
                keys.insert(idx + 1, &right_pivot);
                reserve(children, 1);
                children.insert(idx + 1, ChildRef { shift, node: right_id });
                if children.len() > MAX_FANOUT {
                    self.split_node(parent, above);
                }
            }
        }
    }

    /// The interval at `cur` absorbs the next one (whose index entry goes away): used when an
    /// interval becomes empty. Returns the removed interval's cache slot; `None` (and no change)
    /// when there is no next interval or both together would exceed `MAX_INTERVAL_BYTES`.
    pub fn absorb_next(&mut self, cur: &Cursor) -> Option<u32> {
        let next = self.next(cur)?;
        let removed_size = self.interval(&next).entry.size_bytes;
        let size = self.interval(cur).entry.size_bytes.checked_add(removed_size)?;
        let (keys, entries) = self.leaf_mut(next.leaf);
        keys.remove(next.pos);
        let removed = entries.remove(next.pos);
        let e = self.entry_mut(cur);
        e.size_bytes = size;
        e.extents = e.extents.saturating_add(removed.extents);
        e.count = match (e.count, removed.count) {
            (UNKNOWN_COUNT, _) | (_, UNKNOWN_COUNT) => UNKNOWN_COUNT,
            (a, b) => a.saturating_add(b),
        };
        self.intervals -= 1;
        self.after_removal(next.leaf, next.pos, &next.path);
        Some(removed.cache_slot.into_inner())
    }

    /// Restores the invariants after removing entry `pos` of `node`: drops emptied nodes, fixes
    /// pivots, and collapses a root with one child.
    fn after_removal(&mut self, node: usize, pos: usize, path: &[(usize, usize, i64)]) {
        let emptied = self.nodes[node].len() == 0;
        if let Some((&(parent, idx, _), above)) = path.split_last() {
            if emptied {
                self.release(node);
                let (keys, children) = self.internal_mut(parent);
                keys.remove(idx);
                children.remove(idx);
                self.after_removal(parent, idx, above);
            } else if pos == 0 {
                self.fix_pivot(node, path);
            }
        }
        self.collapse_root();
    }

    /// The smallest key of `node` changed: its pivot (and the ancestors' pivots it was the
    /// smallest of) becomes the new one.
    fn fix_pivot(&mut self, node: usize, path: &[(usize, usize, i64)]) {
        if let Some((&(parent, idx, _), above)) = path.split_last() {
            let pivot = self.nodes[node].keys().key(0).to_vec();
            self.internal_mut(parent).0.replace(idx, &pivot);
            if idx == 0 {
                self.fix_pivot(parent, above);
            }
        }
    }

    /// While the root is internal with one child, the child becomes the root; its pointer's shift
    /// is pushed down into it so effective offsets stay the same.
    fn collapse_root(&mut self) {
        loop {
            let Node::Internal { children, .. } = &self.nodes[self.root] else { return };
            let [only] = children.as_slice() else { return };
            let (child, shift) = (only.node, only.shift);
            self.shift_from(child, 0, shift);
            let old = self.root;
            self.root = child;
            self.release(old);
        }
    }

    /// Every interval in order as (index key, offset, size, count): for tests and `verify`.
    pub fn intervals(&self) -> Vec<(Key, u64, u64, Option<u32>)> {
        let mut out = Vec::with_capacity(self.intervals);
        let mut cur = Some(self.first());
        while let Some(c) = cur {
            let e = self.interval(&c);
            out.push((e.key().to_vec(), self.offset(&c), e.size_bytes(), e.count()));
            cur = self.next(&c);
        }
        out
    }
}

#[cfg(test)]
#[path = "sparse_index_tests.rs"]
mod tests;
