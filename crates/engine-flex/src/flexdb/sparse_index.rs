//! The sparse KV index (§5.1): a B+-tree over intervals of the table file. Each leaf entry holds an
//! interval's index key (the smallest key in it; the first interval's is the empty key, so every
//! key has an interval) and a *partial* offset; each internal child pointer holds a *shift*. The
//! effective file offset of an interval is its partial offset plus the shifts on its search path,
//! so inserting or removing bytes in one interval shifts all later intervals in O(fanout · height):
//! the later entries of the same leaf and the later siblings on the path. Keys and pivots never
//! change when shifting.
//!
//! Invariants: every node is non-empty; a child's pivot equals the smallest index key in its
//! subtree; intervals are contiguous (offset of the next = offset + size) and the first starts at 0.

use std::sync::atomic::AtomicU32;

use strata_core::Key;

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
    nodes: Vec<Node>,
    free_nodes: Vec<usize>,
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
        let mut index = SparseIndex {
            nodes: Vec::new(),
            free_nodes: Vec::new(),
            root: 0,
            intervals: starts.len(),
            key_bytes: 0,
        };
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
            let node = index.alloc(Node::Leaf(chunk));
            level.push(Child { pivot, node, shift: 0 });
        }
        while level.len() > 1 {
            let mut upper = Vec::new();
            let mut rest = level.into_iter().peekable();
            while rest.peek().is_some() {
                let chunk: Vec<Child> = rest.by_ref().take(per_node).collect();
                let pivot = chunk.first().map(|c| c.pivot.clone()).unwrap_or_default();
                let node = index.alloc(Node::Internal(chunk));
                upper.push(Child { pivot, node, shift: 0 });
            }
            level = upper;
        }
        index.root = level.first().map_or(0, |c| c.node);
        index
    }

    fn alloc(&mut self, node: Node) -> usize {
        match self.free_nodes.pop() {
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
        self.nodes[id] = Node::Leaf(Vec::new());
        self.free_nodes.push(id);
    }

    fn leaf(&self, id: usize) -> &Vec<Interval> {
        match &self.nodes[id] {
            Node::Leaf(e) => e,
            Node::Internal(_) => unreachable!("node {id} is not a leaf"),
        }
    }

    fn leaf_mut(&mut self, id: usize) -> &mut Vec<Interval> {
        match &mut self.nodes[id] {
            Node::Leaf(e) => e,
            Node::Internal(_) => unreachable!("node {id} is not a leaf"),
        }
    }

    fn children_mut(&mut self, id: usize) -> &mut Vec<Child> {
        match &mut self.nodes[id] {
            Node::Internal(c) => c,
            Node::Leaf(_) => unreachable!("node {id} is not internal"),
        }
    }

    pub fn interval_count(&self) -> usize {
        self.intervals
    }

    pub fn memory_bytes(&self) -> u64 {
        self.key_bytes + self.intervals as u64 * ENTRY_OVERHEAD_BYTES
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
        let (mut node, mut base, mut path) = (self.root, 0i64, Vec::new());
        loop {
            match &self.nodes[node] {
                Node::Internal(children) => {
                    let le = children.partition_point(|c| c.pivot.as_slice() <= key);
                    let idx = pick(le).clamp(1, children.len()) - 1;
                    path.push((node, idx, base));
                    base += children[idx].shift;
                    node = children[idx].node;
                }
                Node::Leaf(entries) => {
                    let le = entries.partition_point(|e| e.key.as_slice() <= key);
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
            let Node::Internal(children) = &self.nodes[node] else { return None };
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
            let Node::Internal(children) = &self.nodes[node] else { return None };
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
            match &self.nodes[node] {
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

    /// Moves every interval after `cur` by `delta` bytes.
    fn shift_after(&mut self, cur: &Cursor, delta: i64) {
        if delta == 0 {
            return;
        }
        for e in self.leaf_mut(cur.leaf).iter_mut().skip(cur.pos + 1) {
            e.partial_offset += delta;
        }
        for &(node, idx, _) in &cur.path {
            for c in self.children_mut(node).iter_mut().skip(idx + 1) {
                c.shift += delta;
            }
        }
    }

    /// Sets the size and record count of the interval at `cur` and shifts the later ones by the
    /// change in size (the table file grew or shrank inside this interval).
    pub fn resize(&mut self, cur: &Cursor, size_bytes: u64, count: Option<u32>, extents: u32) {
        let e = &mut self.leaf_mut(cur.leaf)[cur.pos];
        let delta = size_bytes as i64 - e.size_bytes as i64;
        e.size_bytes = size_bytes;
        e.count = count;
        e.extents = extents;
        self.shift_after(cur, delta);
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
    }

    /// Splits the overfull `node` (reached by `path`), then its ancestors as needed.
    fn split_node(&mut self, node: usize, path: &[(usize, usize, i64)]) {
        let (right, right_pivot) = match &mut self.nodes[node] {
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
        let right_id = self.alloc(right);
        match path.split_last() {
            None => {
                // The root split: a new root over both halves, with no shift of its own.
                let left_pivot = self.min_key(node);
                let root = self.alloc(Node::Internal(vec![
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
        match &self.nodes[node] {
            Node::Leaf(entries) => entries.first().map(|e| e.key.clone()).unwrap_or_default(),
            Node::Internal(children) => children.first().map(|c| c.pivot.clone()).unwrap_or_default(),
        }
    }

    /// The interval at `cur` absorbs the next one (whose index entry goes away): used when an
    /// interval becomes empty or small. Returns the removed interval's cache slot, if any.
    pub fn absorb_next(&mut self, cur: &Cursor) -> Option<u32> {
        let next = self.next(cur)?;
        let removed = self.leaf_mut(next.leaf).remove(next.pos);
        let e = &mut self.leaf_mut(cur.leaf)[cur.pos];
        e.size_bytes += removed.size_bytes;
        e.extents = e.extents.saturating_add(removed.extents);
        e.count = match (e.count, removed.count) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.intervals -= 1;
        self.key_bytes -= removed.key.len() as u64;
        self.after_removal(next.leaf, next.pos, &next.path);
        Some(removed.cache_slot.into_inner())
    }

    /// Restores the invariants after removing entry `pos` of `node`: drops emptied nodes, fixes
    /// pivots, and collapses a root with one child.
    fn after_removal(&mut self, node: usize, pos: usize, path: &[(usize, usize, i64)]) {
        let emptied = match &self.nodes[node] {
            Node::Leaf(e) => e.is_empty(),
            Node::Internal(c) => c.is_empty(),
        };
        if let Some((&(parent, idx, _), above)) = path.split_last() {
            if emptied {
                self.release(node);
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
            let Node::Internal(children) = &self.nodes[self.root] else { return };
            if children.len() != 1 {
                return;
            }
            let (child, shift) = (children[0].node, children[0].shift);
            match &mut self.nodes[child] {
                Node::Leaf(entries) => entries.iter_mut().for_each(|e| e.partial_offset += shift),
                Node::Internal(cs) => cs.iter_mut().for_each(|c| c.shift += shift),
            }
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
            out.push((e.key.clone(), self.offset(&c), e.size_bytes, e.count));
            cur = self.next(&c);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// Brute-force model: (key, size, count) in order; offsets are prefix sums.
    fn check(index: &SparseIndex, model: &[(Key, u64, u32)]) {
        let got = index.intervals();
        assert_eq!(got.len(), model.len());
        assert_eq!(index.interval_count(), model.len());
        let mut offset = 0;
        for ((k, o, s, _), (mk, ms, _)) in got.iter().zip(model) {
            assert_eq!((k, *o, *s), (mk, offset, *ms));
            offset += ms;
        }
        for (i, (mk, _, _)) in model.iter().enumerate() {
            let c = index.seek(mk);
            assert_eq!(&index.interval(&c).key, mk);
            let mut probe = mk.clone();
            probe.push(0);
            assert_eq!(&index.seek(&probe).key_of(index), mk, "probe after interval {i}");
            assert_eq!(
                index.prev(&c).map(|p| index.interval(&p).key.clone()),
                i.checked_sub(1).map(|j| model[j].0.clone())
            );
        }
    }

    impl Cursor {
        fn key_of(&self, index: &SparseIndex) -> Key {
            index.interval(self).key.clone()
        }
    }

    #[test]
    fn random_resize_split_absorb_against_a_list() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut index = SparseIndex::default();
        let mut model: Vec<(Key, u64, u32)> = vec![(Vec::new(), 0, 0)];
        for step in 0..6000 {
            let i = rng.gen_range(0..model.len());
            let key = model[i].0.clone();
            let cur = index.seek(&key);
            match rng.gen_range(0..10) {
                0..=3 => {
                    let size = rng.gen_range(0..500);
                    index.resize(&cur, size, Some(3), 1);
                    model[i].1 = size;
                }
                4..=7 => {
                    let upper = model.get(i + 1).map_or(vec![0xff; 4], |m| m.0.clone());
                    let mut right: Key = key.clone();
                    right.push(rng.gen_range(1..=255));
                    if right >= upper || model[i].1 == 0 {
                        continue;
                    }
                    let left = rng.gen_range(0..model[i].1);
                    index.split(&cur, left, 1, right.clone(), 1);
                    let rest = model[i].1 - left;
                    model[i].1 = left;
                    model.insert(i + 1, (right, rest, 1));
                }
                _ => {
                    if index.absorb_next(&cur).is_some() {
                        let (_, s, _) = model.remove(i + 1);
                        model[i].1 += s;
                    }
                }
            }
            if step % 97 == 0 {
                check(&index, &model);
            }
        }
        check(&index, &model);
        while model.len() > 1 {
            let cur = index.first();
            index.absorb_next(&cur).unwrap();
            let (_, s, _) = model.remove(1);
            model[0].1 += s;
        }
        check(&index, &model);
    }

    #[test]
    fn build_matches_the_given_starts() {
        let starts: Vec<(Key, u64)> = (0..5000u32)
            .map(|i| (if i == 0 { vec![] } else { i.to_be_bytes().to_vec() }, u64::from(i) * 10))
            .collect();
        let index = SparseIndex::build(starts.clone(), 50_005);
        let got = index.intervals();
        assert_eq!(got.len(), 5000);
        assert_eq!(got[4999], (4999u32.to_be_bytes().to_vec(), 49_990, 15, None));
        let c = index.seek(&1234u32.to_be_bytes());
        assert_eq!(index.offset(&c), 12_340);
        assert!(index.is_first(&index.seek(b"")));
    }
}
