//! The recursive shifting operations and the node split/merge that keep effective offsets
//! (paper §3.2.1, §3.2.3, Figures 4, 5, 7, 8).

use super::leaf;
use super::node::{ChildRef, LeafEntry, Node, NodeBody, NodeId};
use super::tree::FlexTree;

/// Where an over-full node is split. Both keep at least one entry on each side (a node splits
/// only when it holds more than its capacity, which is at least 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SplitAt {
    /// In the middle: both halves have room for inserts anywhere.
    Half,
    /// Before the last entry (leaf) or the last two children (internal node): the node stays
    /// (nearly) full — for appends, which never come back to the left node.
    Last,
}

impl FlexTree {
    /// Marks a node changed since the last commit; its old page is freed by the next commit.
    pub(crate) fn touch(&mut self, id: NodeId) {
        if let Some(page) = self.nodes[id as usize].page.take() {
            self.freed_pages.push(page);
        }
    }

    fn alloc_node(&mut self, node: Node) -> NodeId {
        match self.free_ids.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as NodeId
            }
        }
    }

    fn free_node(&mut self, id: NodeId) -> Node {
        self.touch(id);
        self.free_ids.push(id);
        std::mem::replace(&mut self.nodes[id as usize], Node::leaf(Vec::new()))
    }

    fn capacity_of(&self, id: NodeId) -> usize {
        if self.nodes[id as usize].is_leaf() {
            self.cfg.leaf_capacity
        } else {
            self.cfg.internal_capacity
        }
    }

    fn internal(&mut self, id: NodeId) -> (&mut Vec<ChildRef>, &mut Vec<i64>) {
        match &mut self.nodes[id as usize].body {
            NodeBody::Internal { children, pivots } => (children, pivots),
            NodeBody::Leaf(_) => unreachable!("node {id} is a leaf"),
        }
    }

    pub(crate) fn insert_piece(&mut self, offset: u64, len: u32, addr: u64) {
        // An append fills nodes completely before splitting (the right node starts with the
        // last entry only), so append-only trees end up full instead of half full.
        let split = if offset == self.len { SplitAt::Last } else { SplitAt::Half };
        let rel = offset as i64 - self.root_shift;
        let delta = self.insert_rec(self.root, rel, len, addr, split);
        self.root_shift += delta;
        self.len += u64::from(len);
        if self.nodes[self.root as usize].count() > self.capacity_of(self.root) {
            let old = ChildRef { id: self.root, shift: self.root_shift };
            let body = NodeBody::Internal { children: vec![old], pivots: Vec::new() };
            self.root = self.alloc_node(Node { body, page: None });
            self.root_shift = 0;
            self.split_child(self.root, 0, split);
        }
    }

    /// Inserts at `rel` (relative to the node's base); returns the change to the node's shift.
    fn insert_rec(&mut self, id: NodeId, rel: i64, len: u32, addr: u64, split: SplitAt) -> i64 {
        self.touch(id);
        let cfg = self.cfg;
        if let NodeBody::Leaf(entries) = &mut self.nodes[id as usize].body {
            let change = leaf::insert(entries, rel, len, addr, &cfg);
            self.rebase_count += u64::from(change.rebased);
            return change.base_delta;
        }
        let (children, pivots) = self.internal(id);
        // At a pivot the child starting there takes the insert (at its front).
        let i = pivots.partition_point(|&p| p <= rel);
        let child = children[i];
        let delta = self.insert_rec(child.id, rel - child.shift, len, addr, split);
        let (children, pivots) = self.internal(id);
        children[i].shift += delta;
        let len = i64::from(len);
        for c in children.iter_mut().skip(i + 1) {
            c.shift += len;
        }
        for p in pivots.iter_mut().skip(i) {
            *p += len;
        }
        if self.nodes[child.id as usize].count() > self.capacity_of(child.id) {
            self.split_child(id, i, split);
        }
        0
    }

    /// Removes up to `len` bytes at `rel`, within one leaf; returns the bytes removed.
    pub(crate) fn collapse_rec(&mut self, id: NodeId, rel: i64, len: i64) -> i64 {
        self.touch(id);
        if let NodeBody::Leaf(entries) = &mut self.nodes[id as usize].body {
            return leaf::collapse(entries, rel, len);
        }
        let (children, pivots) = self.internal(id);
        let i = pivots.partition_point(|&p| p <= rel);
        let child = children[i];
        let removed = self.collapse_rec(child.id, rel - child.shift, len);
        let (children, pivots) = self.internal(id);
        for c in children.iter_mut().skip(i + 1) {
            c.shift -= removed;
        }
        for p in pivots.iter_mut().skip(i) {
            *p -= removed;
        }
        self.fix_underflow(id, i);
        removed
    }

    /// Splits child `i` of `parent` in two (see [`SplitAt`]); the new right node keeps every
    /// effective offset (its pointer inherits the shift, Figure 5).
    pub(crate) fn split_child(&mut self, parent: NodeId, i: usize, split: SplitAt) {
        let child = self.internal(parent).0[i];
        self.touch(child.id);
        // `keep_right`: entries an append split leaves in the new right node — one in a leaf, two
        // in an internal node (below the root an internal node keeps two children, so an
        // underfull child always has a sibling to merge with).
        let at = |n: usize, keep_right: usize| match split {
            SplitAt::Half => n / 2,
            SplitAt::Last => n - keep_right,
        };
        let (right, pivot, right_shift) = match &mut self.nodes[child.id as usize].body {
            NodeBody::Leaf(entries) => {
                // The right half keeps its partial offsets and inherits the shift; it is rebased
                // lazily when its offsets outgrow 32 bits (§3.3).
                let right = entries.split_off(at(entries.len(), 1));
                let right_start = i64::from(right[0].partial_offset);
                (NodeBody::Leaf(right), child.shift + right_start, child.shift)
            }
            NodeBody::Internal { children, pivots } => {
                let mid = at(children.len(), 2);
                let right_children = children.split_off(mid);
                let right_pivots = pivots.split_off(mid);
                let separator = pivots.pop().unwrap_or(0);
                let body = NodeBody::Internal { children: right_children, pivots: right_pivots };
                (body, child.shift + separator, child.shift)
            }
        };
        let new_id = self.alloc_node(Node { body: right, page: None });
        let (children, pivots) = self.internal(parent);
        children.insert(i + 1, ChildRef { id: new_id, shift: right_shift });
        pivots.insert(i, pivot);
    }

    /// Merges an underfull child `i` with a sibling (Figure 8); splits the result again if it
    /// is over capacity (which redistributes the entries).
    fn fix_underflow(&mut self, parent: NodeId, i: usize) {
        let n = self.internal(parent).0.len();
        let child = self.internal(parent).0[i].id;
        let count = self.nodes[child as usize].count();
        let min_fill = if self.nodes[child as usize].is_leaf() {
            (self.cfg.leaf_capacity / 4).max(1)
        } else {
            (self.cfg.internal_capacity / 4).max(2)
        };
        if n < 2 || count >= min_fill {
            return;
        }
        let left = if i + 1 < n { i } else { i - 1 };
        self.merge_children(parent, left);
        let merged = self.internal(parent).0[left].id;
        if self.nodes[merged as usize].count() > self.capacity_of(merged) {
            self.split_child(parent, left, SplitAt::Half);
        }
    }

    /// Moves child `j + 1` of `parent` into child `j`, adjusting partial offsets (leaves) or
    /// shifts and pivots (internal nodes) by the difference of the two pointers' shifts.
    fn merge_children(&mut self, parent: NodeId, j: usize) {
        let (children, pivots) = self.internal(parent);
        let (left, right, separator) = (children[j], children[j + 1], pivots[j]);
        self.touch(left.id);
        let right_node = self.free_node(right.id);
        let mut new_left_shift = left.shift;
        match (&mut self.nodes[left.id as usize].body, right_node.body) {
            (NodeBody::Leaf(entries), NodeBody::Leaf(right_entries)) => {
                let starts: Vec<(i64, LeafEntry)> = entries
                    .iter()
                    .map(|e| (left.shift + i64::from(e.partial_offset), *e))
                    .chain(right_entries.iter().map(|e| (right.shift + i64::from(e.partial_offset), *e)))
                    .collect();
                if let Some((base, _)) = starts.first() {
                    new_left_shift = *base;
                }
                *entries = starts
                    .into_iter()
                    .map(|(start, e)| LeafEntry { partial_offset: (start - new_left_shift) as u32, ..e })
                    .collect();
            }
            (
                NodeBody::Internal { children, pivots },
                NodeBody::Internal { children: right_children, pivots: right_pivots },
            ) => {
                let adjust = right.shift - left.shift;
                pivots.push(separator - left.shift);
                pivots.extend(right_pivots.iter().map(|p| p + adjust));
                children
                    .extend(right_children.iter().map(|c| ChildRef { id: c.id, shift: c.shift + adjust }));
            }
            _ => unreachable!("siblings at different levels"),
        }
        let (children, pivots) = self.internal(parent);
        children[j].shift = new_left_shift;
        children.remove(j + 1);
        pivots.remove(j);
    }

    /// Replaces an internal root with a single child by that child.
    pub(crate) fn shrink_root(&mut self) {
        loop {
            let root = self.root;
            let child = match &self.nodes[root as usize].body {
                NodeBody::Internal { children, .. } if children.len() == 1 => children[0],
                _ => return,
            };
            self.free_node(root);
            self.root = child.id;
            self.root_shift += child.shift;
        }
    }
}
