//! The sparse KV index (§5.1): a B+-tree over intervals of the table file. Each leaf entry holds an
//! interval's index key (the smallest key in it; the first interval's is the empty key, so every
//! key has an interval) and a *partial* offset; each internal child pointer holds a *shift*. The
//! effective file offset of an interval is its partial offset plus the shifts on its search path,
//! so inserting or removing bytes in one interval shifts all later intervals in O(fanout · height):
//! the later entries of the same leaf and the later siblings on the path. Keys and pivots never
//! change when shifting.
//!
//! Searching a node compares the search key with the node's shared key prefix once and then
//! binary-searches a contiguous array of 8-byte key heads (`NodeHeads`); the heap-allocated keys are
//! only read when heads tie. Heads live next to the nodes in an `Arena` whose only mutable access
//! to a node's keys marks it dirty; every `&mut self` method ends with `refresh_dirty`.
//!
//! Invariants: every node is non-empty; a child's pivot equals the smallest index key in its
//! subtree; intervals are contiguous (offset of the next = offset + size) and the first starts at 0;
//! outside a `&mut self` method no node is dirty.

use std::cmp::Ordering;
use std::sync::atomic::AtomicU32;

use strata_core::Key;

use self::arena::Arena;

/// Children per node before it splits.
const MAX_FANOUT: usize = 64;
/// Entry overhead (node slot, key header, offsets) used for memory accounting.
const ENTRY_OVERHEAD_BYTES: u64 = 64;
/// `cache_slot` value of an interval that is not cached.
pub const NO_SLOT: u32 = u32::MAX;

/// One interval: a run of consecutive records in the table file.
#[derive(Debug)]
pub struct Interval {
    pub key: Key,
    partial_offset: i64,
    pub size_bytes: u64,
    /// Records in the interval; `None` until it is first loaded after a rebuild (§5.4).
    pub count: Option<u32>,
    /// Interval-cache slot holding the decoded records, or `NO_SLOT` (§5.3). Readers set it under
    /// the index's read lock; the slot itself records its owner key, so a stale value is harmless.
    pub cache_slot: AtomicU32,
    /// Upper estimate of the table-file extents the interval spans (each is one device read on a
    /// cache miss); `UNKNOWN_EXTENTS` after a rebuild. The table rewrites fragmented intervals.
    pub extents: u32,
}

/// `Interval::extents` when nothing is known (after a rebuild): treated as fragmented.
pub const UNKNOWN_EXTENTS: u32 = u32::MAX;

impl Interval {
    fn new(key: Key, offset: i64, size_bytes: u64, count: Option<u32>) -> Interval {
        Interval {
            key,
            partial_offset: offset,
            size_bytes,
            count,
            cache_slot: AtomicU32::new(NO_SLOT),
            extents: UNKNOWN_EXTENTS,
        }
    }
}

#[derive(Debug)]
struct Child {
    pivot: Key,
    node: usize,
    shift: i64,
}

#[derive(Debug)]
enum Node {
    Leaf(Vec<Interval>),
    Internal(Vec<Child>),
}

impl Node {
    fn len(&self) -> usize {
        match self {
            Node::Leaf(entries) => entries.len(),
            Node::Internal(children) => children.len(),
        }
    }

    /// The `i`-th search key: an index key in a leaf, a pivot in an internal node.
    fn key(&self, i: usize) -> &[u8] {
        match self {
            Node::Leaf(entries) => &entries[i].key,
            Node::Internal(children) => &children[i].pivot,
        }
    }
}

/// `x[..8]` as a big-endian u64, zero-padded on the right.
///
/// Order: for byte strings `a < b`, `head(a) <= head(b)`. Either `a` is a proper prefix of `b`:
/// then `a`'s padded 8 bytes are `b`'s first bytes followed by zeros, and 0 is the smallest byte,
/// so `head(a) <= head(b)`. Or they first differ at `j` with `a[j] < b[j]`: for `j < 8` the padded
/// arrays first differ at `j` the same way (`head(a) < head(b)`); for `j >= 8` the first 8 bytes
/// are equal and so are the heads. Contrapositive: `head(a) < head(b)` implies `a < b`.
fn head(x: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = x.len().min(8);
    bytes[..n].copy_from_slice(&x[..n]);
    u64::from_be_bytes(bytes)
}

fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Search acceleration for one node with sorted keys `k_0 <= .. <= k_{n-1}` (prefix truncation and
/// inline heads, as in LeanStore).
///
/// `skip_empty_first` is set when `k_0` is the empty key (the leftmost node of each level): it is
/// `<=` every search key, and leaving it out keeps the prefix of the root from collapsing to 0.
/// The other keys `k_s..` (`s` = 0 or 1) all start with the `prefix_len` bytes shared by `k_s` and
/// `k_{n-1}`: the strings with a given prefix are a contiguous range in lexicographic order, so
/// every key between the two starts with it too. `heads[i] = head(k_{s+i}[prefix_len..])`; since
/// removing a shared prefix keeps order, the heads are sorted (see `head`).
#[derive(Debug, Default, PartialEq, Eq)]
struct NodeHeads {
    skip_empty_first: bool,
    prefix_len: usize,
    heads: Vec<u64>,
}

impl NodeHeads {
    fn rebuild(&mut self, node: &Node) {
        let n = node.len();
        self.skip_empty_first = n > 0 && node.key(0).is_empty();
        let from = usize::from(self.skip_empty_first);
        self.prefix_len = if from < n { common_prefix_len(node.key(from), node.key(n - 1)) } else { 0 };
        self.heads.clear();
        self.heads.extend((from..n).map(|i| head(&node.key(i)[self.prefix_len..])));
    }

    fn heap_bytes(&self) -> u64 {
        self.heads.capacity() as u64 * 8
    }

    /// How many of `node`'s keys are `<= key`. `self` must be up to date for `node`.
    ///
    /// With `h = head(key[p..])` (`key` starts with the prefix `P`, `p = |P|`): keys whose head is
    /// `< h` are `< key` and keys whose head is `> h` are `> key` (contrapositive in `head`), so
    /// only the contiguous run with head `h` needs full comparisons.
    fn count_le(&self, node: &Node, key: &[u8]) -> usize {
        let from = usize::from(self.skip_empty_first);
        if self.heads.is_empty() {
            return from;
        }
        let p = self.prefix_len;
        // `key` shorter than `p` compares `Less` when it is a prefix of `P`: then it is smaller
        // than every key starting with `P`. `Equal` means `key` starts with `P`.
        match key[..p.min(key.len())].cmp(&node.key(from)[..p]) {
            Ordering::Less => return from,
            Ordering::Greater => return from + self.heads.len(),
            Ordering::Equal => {}
        }
        let rest = &key[p..];
        let h = head(rest);
        let mut hi = self.heads.partition_point(|&x| x <= h);
        if hi == 0 || self.heads[hi - 1] != h {
            return from + hi;
        }
        let mut lo = self.heads[..hi].partition_point(|&x| x < h);
        // Binary search of the tie run on the rest of the keys (they share `P`).
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if &node.key(from + mid)[p..] <= rest {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        from + lo
    }
}

mod arena {
    //! Fields are private to this module: outside it, a node can only be changed through
    //! `node_mut` (marks it dirty), `alloc`/`release` (mark it dirty), or the narrow accessors
    //! `shift_from` and `stats_mut`, whose bodies touch offsets/sizes/counts and never a key, so
    //! the heads stay valid without a refresh.

    use super::{Node, NodeHeads};

    #[derive(Debug, Default)]
    pub(super) struct Arena {
        nodes: Vec<Node>,
        /// `heads[id]` belongs to `nodes[id]`; up to date unless `dirty[id]`.
        heads: Vec<NodeHeads>,
        dirty: Vec<bool>,
        dirty_ids: Vec<usize>,
        free: Vec<usize>,
        heads_heap_bytes: u64,
    }

    /// The non-key fields of one interval.
    pub(super) struct StatsMut<'a> {
        pub size_bytes: &'a mut u64,
        pub count: &'a mut Option<u32>,
        pub extents: &'a mut u32,
    }

    impl Arena {
        pub(super) fn node(&self, id: usize) -> &Node {
            &self.nodes[id]
        }

        pub(super) fn heads(&self, id: usize) -> &NodeHeads {
            &self.heads[id]
        }

        /// Mutable access to a node; its heads are recomputed at the next `refresh_dirty`.
        pub(super) fn node_mut(&mut self, id: usize) -> &mut Node {
            self.mark_dirty(id);
            &mut self.nodes[id]
        }

        fn mark_dirty(&mut self, id: usize) {
            if !self.dirty[id] {
                self.dirty[id] = true;
                self.dirty_ids.push(id);
            }
        }

        pub(super) fn alloc(&mut self, node: Node) -> usize {
            let id = match self.free.pop() {
                Some(id) => {
                    self.nodes[id] = node;
                    id
                }
                None => {
                    self.nodes.push(node);
                    self.heads.push(NodeHeads::default());
                    self.dirty.push(false);
                    self.nodes.len() - 1
                }
            };
            self.mark_dirty(id);
            id
        }

        pub(super) fn release(&mut self, id: usize) {
            self.nodes[id] = Node::Leaf(Vec::new());
            self.heads_heap_bytes -= self.heads[id].heap_bytes();
            self.heads[id].heads = Vec::new();
            self.mark_dirty(id);
            self.free.push(id);
        }

        /// Adds `delta` to the offset (leaf) or shift (internal) of entries `from..` of `id`.
        pub(super) fn shift_from(&mut self, id: usize, from: usize, delta: i64) {
            match &mut self.nodes[id] {
                Node::Leaf(entries) => {
                    entries.iter_mut().skip(from).for_each(|e| e.partial_offset += delta);
                }
                Node::Internal(children) => {
                    children.iter_mut().skip(from).for_each(|c| c.shift += delta);
                }
            }
        }

        pub(super) fn stats_mut(&mut self, leaf: usize, pos: usize) -> StatsMut<'_> {
            let Node::Leaf(entries) = &mut self.nodes[leaf] else {
                unreachable!("node {leaf} is not a leaf")
            };
            let e = &mut entries[pos];
            StatsMut { size_bytes: &mut e.size_bytes, count: &mut e.count, extents: &mut e.extents }
        }

        /// Recomputes the heads of every dirty node.
        pub(super) fn refresh_dirty(&mut self) {
            while let Some(id) = self.dirty_ids.pop() {
                let heads = &mut self.heads[id];
                self.heads_heap_bytes -= heads.heap_bytes();
                heads.rebuild(&self.nodes[id]);
                self.heads_heap_bytes += heads.heap_bytes();
                self.dirty[id] = false;
            }
        }

        pub(super) fn is_clean(&self) -> bool {
            self.dirty_ids.is_empty()
        }

        /// Memory of the heads: the arrays plus their per-node bookkeeping.
        pub(super) fn heads_bytes(&self) -> u64 {
            let per_node = std::mem::size_of::<NodeHeads>() + std::mem::size_of::<bool>();
            self.heads_heap_bytes + (self.heads.len() * per_node) as u64
        }
    }
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

/// The sparse index. See the module documentation.
#[derive(Debug)]
pub struct SparseIndex {
    nodes: Arena,
    root: usize,
    intervals: usize,
    key_bytes: u64,
}

impl Default for SparseIndex {
    fn default() -> Self {
        SparseIndex::build(vec![(Vec::new(), 0)], 0)
    }
}

impl SparseIndex {
    /// Builds an index over intervals starting at the given `(index key, offset)` pairs (sorted by
    /// both; the first must be `("", 0)`), the last ending at `total_bytes`. Counts are unknown.
    pub fn build(starts: Vec<(Key, u64)>, total_bytes: u64) -> SparseIndex {
        let ends: Vec<u64> = starts.iter().skip(1).map(|(_, o)| *o).chain([total_bytes]).collect();
        let known_empty = total_bytes == 0;
        let mut index =
            SparseIndex { nodes: Arena::default(), root: 0, intervals: starts.len(), key_bytes: 0 };
        let per_node = MAX_FANOUT * 3 / 4;
        let mut entries: Vec<Interval> = Vec::with_capacity(starts.len());
        for ((key, offset), end) in starts.into_iter().zip(ends) {
            index.key_bytes += key.len() as u64;
            let count = known_empty.then_some(0);
            entries.push(Interval::new(key, offset as i64, end - offset, count));
        }
        let mut level: Vec<Child> = Vec::new();
        let mut rest = entries.into_iter().peekable();
        while rest.peek().is_some() {
            let chunk: Vec<Interval> = rest.by_ref().take(per_node).collect();
            let pivot = chunk.first().map(|e| e.key.clone()).unwrap_or_default();
            let node = index.nodes.alloc(Node::Leaf(chunk));
            level.push(Child { pivot, node, shift: 0 });
        }
        while level.len() > 1 {
            let mut upper = Vec::new();
            let mut rest = level.into_iter().peekable();
            while rest.peek().is_some() {
                let chunk: Vec<Child> = rest.by_ref().take(per_node).collect();
                let pivot = chunk.first().map(|c| c.pivot.clone()).unwrap_or_default();
                let node = index.nodes.alloc(Node::Internal(chunk));
                upper.push(Child { pivot, node, shift: 0 });
            }
            level = upper;
        }
        index.root = level.first().map_or(0, |c| c.node);
        index.nodes.refresh_dirty();
        index
    }

    fn leaf(&self, id: usize) -> &Vec<Interval> {
        match self.nodes.node(id) {
            Node::Leaf(e) => e,
            Node::Internal(_) => unreachable!("node {id} is not a leaf"),
        }
    }

    fn leaf_mut(&mut self, id: usize) -> &mut Vec<Interval> {
        match self.nodes.node_mut(id) {
            Node::Leaf(e) => e,
            Node::Internal(_) => unreachable!("node {id} is not a leaf"),
        }
    }

    fn children_mut(&mut self, id: usize) -> &mut Vec<Child> {
        match self.nodes.node_mut(id) {
            Node::Internal(c) => c,
            Node::Leaf(_) => unreachable!("node {id} is not internal"),
        }
    }

    pub fn interval_count(&self) -> usize {
        self.intervals
    }

    pub fn memory_bytes(&self) -> u64 {
        self.key_bytes + self.intervals as u64 * ENTRY_OVERHEAD_BYTES + self.nodes.heads_bytes()
    }

    /// The interval that would hold `key`: the last one whose index key is `<= key`.
    pub fn seek(&self, key: &[u8]) -> Cursor {
        self.descend(|keys_le| keys_le, key)
    }

    pub fn first(&self) -> Cursor {
        self.descend(|_| 1, &[])
    }

    pub fn last(&self) -> Cursor {
        self.descend(|_| usize::MAX, &[])
    }

    /// `pick(n)` gets the number of children/entries whose key is `<= key` and returns how many
    /// to step over (the chosen index is that minus one, clamped to the node).
    fn descend(&self, pick: impl Fn(usize) -> usize, key: &[u8]) -> Cursor {
        debug_assert!(self.nodes.is_clean(), "search with stale heads");
        let (mut node, mut base, mut path) = (self.root, 0i64, Vec::new());
        loop {
            let le = self.nodes.heads(node).count_le(self.nodes.node(node), key);
            match self.nodes.node(node) {
                Node::Internal(children) => {
                    let idx = pick(le).clamp(1, children.len()) - 1;
                    path.push((node, idx, base));
                    base += children[idx].shift;
                    node = children[idx].node;
                }
                Node::Leaf(entries) => {
                    let pos = pick(le).clamp(1, entries.len()) - 1;
                    return Cursor { path, leaf: node, pos, base };
                }
            }
        }
    }

    pub fn interval(&self, cur: &Cursor) -> &Interval {
        &self.leaf(cur.leaf)[cur.pos]
    }

    /// The effective file offset of the interval at `cur`.
    pub fn offset(&self, cur: &Cursor) -> u64 {
        (cur.base + self.interval(cur).partial_offset) as u64
    }

    pub fn is_first(&self, cur: &Cursor) -> bool {
        cur.pos == 0 && cur.path.iter().all(|&(_, idx, _)| idx == 0)
    }

    pub fn next(&self, cur: &Cursor) -> Option<Cursor> {
        if cur.pos + 1 < self.leaf(cur.leaf).len() {
            return Some(Cursor { pos: cur.pos + 1, ..cur.clone() });
        }
        let mut path = cur.path.clone();
        while let Some((node, idx, base)) = path.pop() {
            let Node::Internal(children) = self.nodes.node(node) else { return None };
            if idx + 1 < children.len() {
                path.push((node, idx + 1, base));
                return Some(self.descend_edge(
                    path,
                    base + children[idx + 1].shift,
                    children[idx + 1].node,
                    false,
                ));
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
            let Node::Internal(children) = self.nodes.node(node) else { return None };
            if idx > 0 {
                path.push((node, idx - 1, base));
                return Some(self.descend_edge(
                    path,
                    base + children[idx - 1].shift,
                    children[idx - 1].node,
                    true,
                ));
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
            match self.nodes.node(node) {
                Node::Internal(children) => {
                    let idx = if last { children.len() - 1 } else { 0 };
                    path.push((node, idx, base));
                    base += children[idx].shift;
                    node = children[idx].node;
                }
                Node::Leaf(entries) => {
                    let pos = if last { entries.len() - 1 } else { 0 };
                    return Cursor { path, leaf: node, pos, base };
                }
            }
        }
    }

    /// Moves every interval after `cur` by `delta` bytes. Keys do not change.
    fn shift_after(&mut self, cur: &Cursor, delta: i64) {
        if delta == 0 {
            return;
        }
        self.nodes.shift_from(cur.leaf, cur.pos + 1, delta);
        for &(node, idx, _) in &cur.path {
            self.nodes.shift_from(node, idx + 1, delta);
        }
    }

    /// Sets the size and record count of the interval at `cur` and shifts the later ones by the
    /// change in size (the table file grew or shrank inside this interval).
    pub fn resize(&mut self, cur: &Cursor, size_bytes: u64, count: Option<u32>, extents: u32) {
        let e = self.nodes.stats_mut(cur.leaf, cur.pos);
        let delta = size_bytes as i64 - *e.size_bytes as i64;
        *e.size_bytes = size_bytes;
        *e.count = count;
        *e.extents = extents;
        self.shift_after(cur, delta);
        self.nodes.refresh_dirty();
    }

    /// Splits the interval at `cur`: it keeps its first `left_bytes`/`left_count`; a new interval
    /// with index key `right_key` covers the rest. Offsets of other intervals do not change.
    pub fn split(
        &mut self,
        cur: &Cursor,
        left_bytes: u64,
        left_count: u32,
        right_key: Key,
        right_count: u32,
    ) {
        self.key_bytes += right_key.len() as u64;
        self.intervals += 1;
        let leaf = self.leaf_mut(cur.leaf);
        let e = &mut leaf[cur.pos];
        debug_assert!(right_key > e.key && left_bytes <= e.size_bytes);
        let right_size = e.size_bytes - left_bytes;
        e.size_bytes = left_bytes;
        e.count = Some(left_count);
        let right_offset = e.partial_offset + left_bytes as i64;
        let mut right = Interval::new(right_key, right_offset, right_size, Some(right_count));
        right.extents = e.extents;
        leaf.insert(cur.pos + 1, right);
        if leaf.len() > MAX_FANOUT {
            self.split_node(cur.leaf, &cur.path);
        }
        self.nodes.refresh_dirty();
    }

    /// Splits the overfull `node` (reached by `path`), then its ancestors as needed.
    fn split_node(&mut self, node: usize, path: &[(usize, usize, i64)]) {
        let (right, right_pivot) = match self.nodes.node_mut(node) {
            Node::Leaf(entries) => {
                let right = entries.split_off(entries.len() / 2);
                let pivot = right[0].key.clone();
                (Node::Leaf(right), pivot)
            }
            Node::Internal(children) => {
                let right = children.split_off(children.len() / 2);
                let pivot = right[0].pivot.clone();
                (Node::Internal(right), pivot)
            }
        };
        let right_id = self.nodes.alloc(right);
        match path.split_last() {
            None => {
                // The root split: a new root over both halves, with no shift of its own.
                let left_pivot = self.min_key(node);
                let root = self.nodes.alloc(Node::Internal(vec![
                    Child { pivot: left_pivot, node, shift: 0 },
                    Child { pivot: right_pivot, node: right_id, shift: 0 },
                ]));
                self.root = root;
            }
            Some((&(parent, idx, _), above)) => {
                let children = self.children_mut(parent);
                // Same shift as the left half's pointer: effective offsets stay the same.
                let shift = children[idx].shift;
                children.insert(idx + 1, Child { pivot: right_pivot, node: right_id, shift });
                if children.len() > MAX_FANOUT {
                    self.split_node(parent, above);
                }
            }
        }
    }

    fn min_key(&self, node: usize) -> Key {
        let node = self.nodes.node(node);
        if node.len() == 0 {
            Key::new()
        } else {
            node.key(0).to_vec()
        }
    }

    /// The interval at `cur` absorbs the next one (whose index entry goes away): used when an
    /// interval becomes empty or small. Returns the removed interval's cache slot, if any.
    pub fn absorb_next(&mut self, cur: &Cursor) -> Option<u32> {
        let next = self.next(cur)?;
        let removed = self.leaf_mut(next.leaf).remove(next.pos);
        let e = self.nodes.stats_mut(cur.leaf, cur.pos);
        *e.size_bytes += removed.size_bytes;
        *e.extents = e.extents.saturating_add(removed.extents);
        *e.count = match (*e.count, removed.count) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.intervals -= 1;
        self.key_bytes -= removed.key.len() as u64;
        self.after_removal(next.leaf, next.pos, &next.path);
        self.nodes.refresh_dirty();
        Some(removed.cache_slot.into_inner())
    }

    /// Restores the invariants after removing entry `pos` of `node`: drops emptied nodes, fixes
    /// pivots, and collapses a root with one child.
    fn after_removal(&mut self, node: usize, pos: usize, path: &[(usize, usize, i64)]) {
        let emptied = self.nodes.node(node).len() == 0;
        if let Some((&(parent, idx, _), above)) = path.split_last() {
            if emptied {
                self.nodes.release(node);
                self.children_mut(parent).remove(idx);
                self.after_removal(parent, idx, above);
            } else if pos == 0 {
                let pivot = self.min_key(node);
                self.children_mut(parent)[idx].pivot = pivot;
                if idx == 0 {
                    self.after_removal_pivot_only(parent, above);
                }
            }
        }
        self.collapse_root();
    }

    fn after_removal_pivot_only(&mut self, node: usize, path: &[(usize, usize, i64)]) {
        if let Some((&(parent, idx, _), above)) = path.split_last() {
            let pivot = self.min_key(node);
            self.children_mut(parent)[idx].pivot = pivot;
            if idx == 0 {
                self.after_removal_pivot_only(parent, above);
            }
        }
    }

    /// While the root is internal with one child, the child becomes the root; its pointer's shift
    /// is pushed down into it so effective offsets stay the same.
    fn collapse_root(&mut self) {
        loop {
            let Node::Internal(children) = self.nodes.node(self.root) else { return };
            if children.len() != 1 {
                return;
            }
            let (child, shift) = (children[0].node, children[0].shift);
            self.nodes.shift_from(child, 0, shift);
            let old = self.root;
            self.root = child;
            self.nodes.release(old);
        }
    }

    /// Every interval in order as (index key, offset, size, count): for tests and `verify`.
    pub fn intervals(&self) -> Vec<(Key, u64, u64, Option<u32>)> {
        let mut out = Vec::with_capacity(self.intervals);
        let mut cur = Some(self.first());
        while let Some(c) = cur {
            let e = self.interval(&c);
            out.push((e.key.clone(), self.offset(&c), e.size_bytes, e.count));
            cur = self.next(&c);
        }
        out
    }
}

#[cfg(test)]
#[path = "sparse_index_tests.rs"]
mod tests;
