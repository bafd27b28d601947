//! Copy-on-write persistence of a FlexTree (paper §4.2): a commit encodes only the nodes changed
//! since the previous commit, bottom-up, to pages the previous version does not use; loading
//! walks the tree from the root and checks every structural invariant (bad disk contents become
//! `Error::Corruption`, never a panic).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use strata_core::{Error, Result};

use super::node::{ChildRef, FlexTreeConfig, Node, NodeBody, NodeId, HOLE_ADDR, MAX_ENTRY_BYTES};
use super::page::{self, PageNode, HEADER_PAGES, PAGE_BYTES};
use super::tree::{FlexTree, MAX_LOGICAL_BYTES};

/// The page images of one tree version, children before parents.
#[derive(Debug)]
pub(crate) struct DirtyPages {
    /// Page of the root node; 0 for an empty tree.
    pub root_page: u64,
    /// `(page number, PAGE_BYTES bytes)` per node changed since the previous version.
    pub pages: Vec<(u64, Vec<u8>)>,
}

/// Deepest tree accepted on load (a 2^48-byte file needs far fewer levels).
const MAX_DEPTH: usize = 40;

impl FlexTree {
    /// Encodes every node changed since the last commit (children before parents) into the
    /// image of a page from `alloc_page`, and marks the node clean on that page: from here on the
    /// node belongs to `version`, so changing it again frees that page at the commit after this
    /// one (see `take_freed_pages`). The images must reach the tree file before a header names
    /// `version`. Returns the root page (0 for an empty tree) and the images.
    pub(crate) fn encode_dirty(
        &mut self,
        version: u64,
        alloc_page: &mut dyn FnMut() -> u64,
    ) -> Result<DirtyPages> {
        let mut dirty = DirtyPages { root_page: 0, pages: Vec::new() };
        if self.len != 0 {
            dirty.root_page = self.encode_rec(self.root, version, alloc_page, &mut dirty.pages)?;
        }
        Ok(dirty)
    }

    fn encode_rec(
        &mut self,
        id: NodeId,
        version: u64,
        alloc_page: &mut dyn FnMut() -> u64,
        pages: &mut Vec<(u64, Vec<u8>)>,
    ) -> Result<u64> {
        let node = self.nodes.get(id as usize).ok_or_else(|| Error::invalid("flextree: bad node id"))?;
        if let Some(page) = node.page {
            return Ok(page);
        }
        let bytes = match &node.body {
            NodeBody::Leaf(entries) => page::encode_leaf(entries, version),
            NodeBody::Internal { children, pivots } => {
                let (children, pivots) = (children.clone(), pivots.clone());
                let mut encoded = Vec::with_capacity(children.len());
                for (i, child) in children.iter().enumerate() {
                    let child_page = self.encode_rec(child.id, version, alloc_page, pages)?;
                    let pivot = if i == 0 { 0 } else { pivots.get(i - 1).copied().unwrap_or(0) };
                    encoded.push((child_page, child.shift, pivot));
                }
                page::encode_internal(&encoded, version)
            }
        };
        let page_no = alloc_page();
        pages.push((page_no, bytes));
        if let Some(node) = self.nodes.get_mut(id as usize) {
            node.page = Some(page_no);
        }
        Ok(page_no)
    }

    /// Pages of the last committed version that the tree stopped using since (changed or freed
    /// nodes). Take them when encoding the next version: they are free once its header is
    /// durable, not before (until then a crash recovers the version that uses them).
    pub(crate) fn take_freed_pages(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.freed_pages)
    }

    /// Loads the tree rooted at `root_page` (0 = empty). Returns the tree and, per page below
    /// `page_count`, whether the tree uses it.
    pub(crate) fn load(
        cfg: FlexTreeConfig,
        root_page: u64,
        page_count: u64,
        logical_len: u64,
        file: &str,
        read_page: &mut dyn FnMut(u64, &mut [u8]) -> Result<()>,
    ) -> Result<(FlexTree, Vec<bool>)> {
        let mut tree = FlexTree::new(cfg)?;
        let pages = usize::try_from(page_count)
            .ok()
            .filter(|&p| p as u64 >= HEADER_PAGES && p < (1 << 40))
            .ok_or_else(|| {
            Error::corruption(file, 0, format!("flextree header: bad page count {page_count}"))
        })?;
        let mut used = vec![false; pages];
        if root_page == 0 {
            if logical_len != 0 {
                return Err(Error::corruption(file, 0, "flextree header: empty tree with non-zero length"));
            }
            return Ok((tree, used));
        }
        tree.nodes.clear();
        let mut loader = Loader { tree: &mut tree, used: &mut used, file, read_page, leaf_depth: None };
        let (root, start, len) = loader.load_node(root_page, 0)?;
        tree.root = root;
        tree.root_shift = -start;
        tree.len = len as u64;
        if tree.len != logical_len {
            return Err(Error::corruption(
                file,
                0,
                format!("flextree holds {} bytes but the header says {logical_len}", tree.len),
            ));
        }
        Ok((tree, used))
    }
}

struct Loader<'a> {
    tree: &'a mut FlexTree,
    used: &'a mut Vec<bool>,
    file: &'a str,
    read_page: &'a mut dyn FnMut(u64, &mut [u8]) -> Result<()>,
    leaf_depth: Option<usize>,
}

impl Loader<'_> {
    /// Loads a subtree; returns its node id, its start relative to its base, and its bytes.
    fn load_node(&mut self, page_no: u64, depth: usize) -> Result<(NodeId, i64, i64)> {
        let offset = page_no.saturating_mul(PAGE_BYTES as u64);
        let file = self.file;
        let bad = |what: String| Error::corruption(file, offset, format!("flextree page {page_no}: {what}"));
        if depth > MAX_DEPTH {
            return Err(bad("tree too deep".into()));
        }
        match self.used.get_mut(page_no as usize) {
            Some(slot) if page_no >= HEADER_PAGES && !*slot => *slot = true,
            _ => return Err(bad("page out of range or reached twice".into())),
        }
        let mut bytes = vec![0u8; PAGE_BYTES];
        (self.read_page)(page_no, &mut bytes)?;
        let (body, start, len) = match page::decode_node(&bytes, page_no, self.file)? {
            PageNode::Leaf(entries) => {
                if self.leaf_depth.get_or_insert(depth) != &depth {
                    return Err(bad("leaves at different depths".into()));
                }
                let start = entries.first().map_or(0, |e| i64::from(e.partial_offset));
                let mut at = start;
                for e in &entries {
                    let contiguous = i64::from(e.partial_offset) == at;
                    let addr_ok = e.addr == HOLE_ADDR
                        || e.addr.checked_add(u64::from(e.len)).is_some_and(|x| x < HOLE_ADDR);
                    if !contiguous || e.len == 0 || u64::from(e.len) > MAX_ENTRY_BYTES || !addr_ok {
                        return Err(bad(format!("bad leaf entry {e:?}")));
                    }
                    at = e.end();
                }
                if at > i64::from(u32::MAX) {
                    return Err(bad("leaf partial offsets exceed 32 bits".into()));
                }
                (NodeBody::Leaf(entries), start, at - start)
            }
            PageNode::Internal(encoded) => {
                let mut children = Vec::with_capacity(encoded.len());
                let mut pivots = Vec::with_capacity(encoded.len());
                let (mut start, mut at) = (0i64, 0i64);
                for (i, (child_page, shift, pivot)) in encoded.into_iter().enumerate() {
                    if shift.unsigned_abs() > MAX_LOGICAL_BYTES * 2
                        || pivot.unsigned_abs() > MAX_LOGICAL_BYTES * 2
                    {
                        return Err(bad("shift or pivot out of range".into()));
                    }
                    let (id, child_start, child_len) = self.load_node(child_page, depth + 1)?;
                    let child_start = child_start + shift;
                    if i == 0 {
                        start = child_start;
                        at = child_start;
                    } else {
                        if pivot != at || child_start != at {
                            return Err(bad(format!(
                                "child {i} starts at {child_start}, pivot {pivot}, expected {at}"
                            )));
                        }
                        pivots.push(pivot);
                    }
                    if child_len == 0
                        || at.checked_add(child_len).is_none_or(|e| e > 2 * MAX_LOGICAL_BYTES as i64)
                    {
                        return Err(bad(format!("child {i} has bad length {child_len}")));
                    }
                    at += child_len;
                    children.push(ChildRef { id, shift });
                }
                (NodeBody::Internal { children, pivots }, start, at - start)
            }
        };
        if len as u64 > MAX_LOGICAL_BYTES {
            return Err(bad("subtree larger than 2^48 bytes".into()));
        }
        self.tree.nodes.push(Node { body, page: Some(page_no) });
        Ok(((self.tree.nodes.len() - 1) as NodeId, start, len))
    }
}
