//! The FlexTree: an in-memory B+-tree extent index whose offsets are partial offsets plus the
//! shift values on the search path (paper §3), so insert-range and collapse-range cost O(log N).

use strata_core::{Error, Result};

use super::node::{
    ChildRef, Extent, FlexTreeConfig, LeafEntry, Node, NodeBody, NodeId, HOLE_ADDR, MAX_ENTRY_BYTES,
    MAX_INTERNAL_CAPACITY, MAX_LEAF_CAPACITY,
};

/// Largest logical size of a FlexTree (the logical log stores 48-bit offsets).
pub const MAX_LOGICAL_BYTES: u64 = (1 << 48) - 1;

/// An extent index over a logical byte address space `0..len()`.
#[derive(Clone, Debug)]
pub struct FlexTree {
    /// Arena; freed slots hold an empty leaf and are listed in `free_ids`.
    pub(crate) nodes: Vec<Node>,
    pub(crate) free_ids: Vec<NodeId>,
    pub(crate) root: NodeId,
    /// Shift of the (virtual) pointer to the root.
    pub(crate) root_shift: i64,
    pub(crate) len: u64,
    pub(crate) cfg: FlexTreeConfig,
    /// Pages of the last committed version whose nodes changed or were freed since.
    pub(crate) freed_pages: Vec<u64>,
    pub(crate) rebase_count: u64,
}

impl FlexTree {
    pub fn new(cfg: FlexTreeConfig) -> Result<FlexTree> {
        check_config(&cfg)?;
        Ok(FlexTree {
            nodes: vec![Node::leaf(Vec::new())],
            free_ids: Vec::new(),
            root: 0,
            root_shift: 0,
            len: 0,
            cfg,
            freed_pages: Vec::new(),
            rebase_count: 0,
        })
    }

    /// Logical size in bytes (extents and holes).
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn config(&self) -> &FlexTreeConfig {
        &self.cfg
    }

    /// How many times a leaf's partial offsets were rebased (§3.3).
    pub fn rebase_count(&self) -> u64 {
        self.rebase_count
    }

    /// Nodes in the tree.
    pub fn node_count(&self) -> usize {
        self.nodes.len() - self.free_ids.len()
    }

    pub fn memory_bytes(&self) -> u64 {
        let per_node = std::mem::size_of::<Node>() as u64;
        let mut bytes = self.nodes.len() as u64 * per_node;
        for node in &self.nodes {
            bytes += match &node.body {
                NodeBody::Leaf(entries) => (entries.capacity() * std::mem::size_of::<LeafEntry>()) as u64,
                NodeBody::Internal { children, pivots } => {
                    (children.capacity() * std::mem::size_of::<ChildRef>() + pivots.capacity() * 8) as u64
                }
            };
        }
        bytes
    }

    /// Appends an extent (or a hole, `addr == HOLE_ADDR`) at the end.
    pub fn append(&mut self, len: u64, addr: u64) -> Result<()> {
        self.insert(self.len, len, addr)
    }

    /// insert-range: maps `offset .. offset + len` to `addr ..` (or a hole) and shifts everything
    /// at or after `offset` up by `len`. An extent containing `offset` is split.
    pub fn insert(&mut self, offset: u64, len: u64, addr: u64) -> Result<()> {
        if offset > self.len {
            return Err(Error::invalid(format!("flextree insert at {offset} past the end {}", self.len)));
        }
        if self.len.checked_add(len).is_none_or(|end| end > MAX_LOGICAL_BYTES) {
            return Err(Error::invalid(format!(
                "flextree insert of {len} bytes exceeds the 2^48 size limit"
            )));
        }
        if addr != HOLE_ADDR && addr.checked_add(len).is_none_or(|end| end == HOLE_ADDR) {
            return Err(Error::invalid(format!("flextree insert at bad physical address {addr}")));
        }
        let mut done = 0;
        while done < len {
            let piece = (len - done).min(MAX_ENTRY_BYTES);
            let piece_addr = super::leaf::addr_plus(addr, done);
            self.insert_piece(offset + done, piece as u32, piece_addr);
            done += piece;
        }
        Ok(())
    }

    /// collapse-range: removes `offset .. offset + len`; everything after moves down by `len`.
    /// Extents overlapping either end are split.
    pub fn collapse(&mut self, offset: u64, len: u64) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(Error::invalid(format!(
                "flextree collapse of {len} bytes at {offset} past the end {}",
                self.len
            )));
        }
        let mut remaining = len as i64;
        while remaining > 0 {
            let rel = offset as i64 - self.root_shift;
            let removed = self.collapse_rec(self.root, rel, remaining);
            if removed <= 0 {
                return Err(Error::invalid("flextree collapse made no progress (broken invariant)"));
            }
            remaining -= removed;
            self.len -= removed as u64;
            self.shrink_root();
        }
        Ok(())
    }

    /// Replaces the mapping of `offset .. offset + len` by `addr ..` without shifting anything
    /// (garbage collection, defragmentation, overwrite in place).
    pub fn remap(&mut self, offset: u64, len: u64, addr: u64) -> Result<()> {
        self.collapse(offset, len)?;
        self.insert(offset, len, addr)
    }

    /// The whole extent containing `offset`, if `offset < len()`.
    pub fn find(&self, offset: u64) -> Option<Extent> {
        if offset >= self.len {
            return None;
        }
        let (leaf, base) = self.find_leaf(offset as i64);
        let entries = self.leaf_entries(leaf);
        let rel = offset as i64 - base;
        let idx = entries.partition_point(|e| e.end() <= rel);
        entries.get(idx).map(|e| Extent {
            offset: (base + i64::from(e.partial_offset)) as u64,
            len: u64::from(e.len),
            addr: e.addr,
        })
    }

    /// The mappings of `offset .. offset + len` (clipped to the file), in order, each clipped to
    /// the range: the paper's range query (§3.2.2).
    pub fn query(&self, offset: u64, len: u64, out: &mut Vec<Extent>) {
        let end = offset.saturating_add(len).min(self.len) as i64;
        let mut pos = offset as i64;
        while pos < end {
            let (leaf, base) = self.find_leaf(pos);
            let entries = self.leaf_entries(leaf);
            let idx = entries.partition_point(|e| base + e.end() <= pos);
            let before = pos;
            for entry in entries.iter().skip(idx) {
                let start = base + i64::from(entry.partial_offset);
                let stop = (start + i64::from(entry.len)).min(end);
                let from = start.max(pos);
                out.push(Extent {
                    offset: from as u64,
                    len: (stop - from) as u64,
                    addr: super::leaf::addr_plus(entry.addr, (from - start) as u64),
                });
                pos = stop;
                if pos >= end {
                    break;
                }
            }
            if pos == before {
                break;
            }
        }
    }

    /// Calls `f` for every extent (and hole) in logical order.
    pub fn for_each(&self, mut f: impl FnMut(Extent)) {
        let mut stack = vec![(self.root, self.root_shift)];
        while let Some((id, base)) = stack.pop() {
            match &self.nodes[id as usize].body {
                NodeBody::Leaf(entries) => {
                    for e in entries {
                        f(Extent {
                            offset: (base + i64::from(e.partial_offset)) as u64,
                            len: u64::from(e.len),
                            addr: e.addr,
                        });
                    }
                }
                NodeBody::Internal { children, .. } => {
                    for child in children.iter().rev() {
                        stack.push((child.id, base + child.shift));
                    }
                }
            }
        }
    }

    /// Every extent, in order (tests, verification).
    pub fn extents(&self) -> Vec<Extent> {
        let mut out = Vec::new();
        self.for_each(|e| out.push(e));
        out
    }

    pub(crate) fn leaf_entries(&self, id: NodeId) -> &[LeafEntry] {
        match &self.nodes[id as usize].body {
            NodeBody::Leaf(entries) => entries,
            NodeBody::Internal { .. } => &[],
        }
    }

    /// The leaf whose range holds `offset` and the sum of the shifts on its path.
    pub(crate) fn find_leaf(&self, offset: i64) -> (NodeId, i64) {
        let (mut id, mut base) = (self.root, self.root_shift);
        loop {
            match &self.nodes[id as usize].body {
                NodeBody::Leaf(_) => return (id, base),
                NodeBody::Internal { children, pivots } => {
                    let rel = offset - base;
                    let i = pivots.partition_point(|&p| p <= rel);
                    let child = children[i];
                    base += child.shift;
                    id = child.id;
                }
            }
        }
    }

    /// Checks every structural invariant; the first violation as text. For tests and `verify`.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        let (start, len, _) = self.check_node(self.root, 0)?;
        let start = start + self.root_shift;
        if len > 0 && start != 0 {
            return Err(format!("tree starts at {start}, not 0"));
        }
        if len as u64 != self.len {
            return Err(format!("tree holds {len} bytes but len() is {}", self.len));
        }
        Ok(())
    }

    /// (start relative to the node's base, bytes, depth) of a subtree.
    fn check_node(&self, id: NodeId, depth: usize) -> std::result::Result<(i64, i64, usize), String> {
        if depth > 64 {
            return Err("tree deeper than 64".into());
        }
        let node = &self.nodes[id as usize];
        match &node.body {
            NodeBody::Leaf(entries) => {
                let Some(first) = entries.first() else {
                    return if id == self.root { Ok((0, 0, 1)) } else { Err(format!("empty leaf {id}")) };
                };
                let mut at = i64::from(first.partial_offset);
                for e in entries {
                    if i64::from(e.partial_offset) != at || e.len == 0 || u64::from(e.len) > MAX_ENTRY_BYTES {
                        return Err(format!("leaf {id} entry {e:?} not contiguous at {at}"));
                    }
                    at = e.end();
                }
                Ok((i64::from(first.partial_offset), at - i64::from(first.partial_offset), 1))
            }
            NodeBody::Internal { children, pivots } => {
                // Below the root an internal node keeps two children, so an underfull child
                // always has a sibling to merge with.
                let min_children = if id == self.root { 1 } else { 2 };
                if children.len() < min_children || pivots.len() + 1 != children.len() {
                    return Err(format!(
                        "internal node {id} has {} children, {} pivots",
                        children.len(),
                        pivots.len()
                    ));
                }
                let mut node_start = 0;
                let mut at = 0;
                let mut leaf_depth = None;
                for (i, child) in children.iter().enumerate() {
                    let (s, l, d) = self.check_node(child.id, depth + 1)?;
                    if leaf_depth.is_some_and(|ld| ld != d) {
                        return Err(format!("node {id}: children at different depths"));
                    }
                    leaf_depth = Some(d);
                    let s = s + child.shift;
                    if i == 0 {
                        node_start = s;
                        at = s;
                    } else if pivots[i - 1] != at || (l > 0 && s != at) {
                        return Err(format!(
                            "node {id} child {i}: pivot {} start {s} expected {at}",
                            pivots[i - 1]
                        ));
                    }
                    if l == 0 {
                        return Err(format!("node {id} child {i} is empty"));
                    }
                    at += l;
                }
                Ok((node_start, at - node_start, leaf_depth.unwrap_or(0) + 1))
            }
        }
    }
}

pub(crate) fn check_config(cfg: &FlexTreeConfig) -> Result<()> {
    if !(4..=MAX_LEAF_CAPACITY).contains(&cfg.leaf_capacity)
        || !(4..=MAX_INTERNAL_CAPACITY).contains(&cfg.internal_capacity)
    {
        return Err(Error::invalid(format!(
            "flextree capacities {}/{} out of range (leaf 4..={MAX_LEAF_CAPACITY}, internal 4..={MAX_INTERNAL_CAPACITY})",
            cfg.leaf_capacity, cfg.internal_capacity
        )));
    }
    Ok(())
}
