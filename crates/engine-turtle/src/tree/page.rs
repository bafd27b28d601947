//! The tree in `turtle-pages` (docs/format/turtle.md): a checkpoint writes every run that is
//! new since the last one (leaves, buffer segments) and every node as a node page, children
//! before parents; the root's reference goes into the checkpoint record. Open reads the node
//! pages from the root down and opens every run (its index and filter), sharing one reader per
//! run among the segments that view it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use strata_core::{Error, Key, Result};
use strata_kit::small_file::{CrcLayout, SmallFileFormat};

use super::run::{DiskRun, Run};
use super::segment::{Flushed, Segment};
use super::{Leaf, Node, Subtree, Tree, TreeConfig};
use crate::pages::{aligned, Extent, ExtentGuard, Pages, PAGES_FILE};

const NODE_VERSION: u32 = 1;

/// `magic | version | crc32c of the payload | payload`.
fn node_format() -> SmallFileFormat {
    SmallFileFormat {
        magic: b"STRTNOD1",
        versions: NODE_VERSION..=NODE_VERSION,
        crc: CrcLayout::AfterVersionOverPayload,
        payload_bytes: None,
    }
}

/// What a reference points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildKind {
    Leaf = 0,
    Node = 1,
}

/// A reference to a checkpointed subtree: a leaf's run (`len` its aligned length, `leaf_bytes`
/// its records' `entry_bytes`) or a node page (`len` its exact length; the extent is aligned).
/// `checksum` says which one: a run's `RunReader::identity`, a node page's CRC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChildRef {
    pub kind: ChildKind,
    pub offset: u64,
    pub len: u64,
    pub leaf_bytes: u64,
    pub checksum: u32,
}

impl ChildRef {
    pub fn extent(&self) -> Extent {
        Extent { offset: self.offset, len: aligned(self.len) }
    }
}

/// A checkpoint written into `pages` but not yet part of the tree (`Tree::install_checkpoint`):
/// the root's reference, and each node's new page in post-order (children, then the node).
pub struct WrittenCheckpoint {
    pub root: ChildRef,
    node_pages: Vec<Arc<ExtentGuard>>,
}

impl Tree {
    /// Checkpoint phase 1, with `&self` (readers go on): every run that is new since the last
    /// checkpoint and every node page written into `pages` (not synced). The tree must not
    /// change before `install_checkpoint`.
    pub fn write_checkpoint(&self, pages: &Arc<Pages>) -> Result<WrittenCheckpoint> {
        let mut node_pages = Vec::new();
        let root = write_subtree(&self.root, pages, &mut node_pages)?;
        Ok(WrittenCheckpoint { root, node_pages })
    }

    /// Checkpoint phase 2, no I/O: every run becomes its written copy (its memory is freed) and
    /// every node holds its new page (the old one is retired). Returns the root's reference.
    pub fn install_checkpoint(&mut self, written: WrittenCheckpoint) -> ChildRef {
        install_subtree(&mut self.root, &mut written.node_pages.into_iter());
        written.root
    }

    /// Both phases at once.
    pub fn checkpoint(&mut self, pages: &Arc<Pages>) -> Result<ChildRef> {
        let written = self.write_checkpoint(pages)?;
        Ok(self.install_checkpoint(written))
    }

    /// The tree whose root `root` refers to, with every extent it uses (for the free map).
    pub fn open(pages: &Arc<Pages>, root: ChildRef, config: TreeConfig) -> Result<(Tree, Vec<Extent>)> {
        let file_len = pages.file().len()?;
        let mut opened =
            Opened { pages: pages.clone(), file_len, runs: HashMap::new(), node_pages: Vec::new() };
        let root = opened.subtree(root, 0)?;
        let mut used = opened.node_pages;
        used.extend(opened.runs.values().map(|r| r.extent()));
        Ok((Tree::from_root(root, config), used))
    }
}

fn write_subtree(
    subtree: &Subtree,
    pages: &Arc<Pages>,
    node_pages: &mut Vec<Arc<ExtentGuard>>,
) -> Result<ChildRef> {
    let written = |run: &Run| match run.persist(pages)? {
        Run::Disk(disk) => Ok((disk.extent(), disk.identity())),
        Run::Memory(_) => Err(Error::Poisoned("a written run is still in memory".into())),
    };
    match subtree {
        Subtree::Leaf(leaf) => {
            let (extent, checksum) = written(leaf.run())?;
            Ok(ChildRef {
                kind: ChildKind::Leaf,
                offset: extent.offset,
                len: extent.len,
                leaf_bytes: leaf.bytes(),
                checksum,
            })
        }
        Subtree::Node(node) => {
            let refs = node
                .children()
                .iter()
                .map(|c| write_subtree(c, pages, node_pages))
                .collect::<Result<Vec<_>>>()?;
            let segments =
                node.levels().iter().flatten().map(|s| written(s.run())).collect::<Result<Vec<_>>>()?;
            let bytes = node_format().encode(NODE_VERSION, &encode_node(node, &refs, &segments));
            let (len, checksum) = (bytes.len() as u64, page_checksum(&bytes));
            let extent = pages.write(&bytes)?;
            node_pages.push(Arc::new(ExtentGuard::new(extent, pages.clone())));
            Ok(ChildRef { kind: ChildKind::Node, offset: extent.offset, len, leaf_bytes: 0, checksum })
        }
    }
}

fn install_subtree(subtree: &mut Subtree, node_pages: &mut impl Iterator<Item = Arc<ExtentGuard>>) {
    match subtree {
        Subtree::Leaf(leaf) => leaf.install_written(),
        Subtree::Node(node) => {
            let node = Arc::make_mut(node);
            let (children, levels) = node.parts_mut();
            children.iter_mut().for_each(|c| install_subtree(c, node_pages));
            levels.iter_mut().flatten().for_each(Segment::install_written);
            if let Some(page) = node_pages.next() {
                node.set_page(page);
            }
        }
    }
}

fn put_key(out: &mut Vec<u8>, key: &[u8]) {
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
}

fn put_optional_key(out: &mut Vec<u8>, key: Option<&[u8]>) {
    out.push(u8::from(key.is_some()));
    if let Some(key) = key {
        put_key(out, key);
    }
}

fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// A node page's CRC (offset 12 of its small-file encoding).
fn page_checksum(bytes: &[u8]) -> u32 {
    bytes.get(12..16).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
}

/// The node page's payload (docs/format/turtle.md, "Node page"); `segments` are the extents and
/// identities of its levels' runs, in order.
fn encode_node(node: &Node, refs: &[ChildRef], segments: &[(Extent, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    put_optional_key(&mut out, node.upper());
    out.extend_from_slice(&(node.pivots().len() as u32).to_le_bytes());
    for (pivot, child) in node.pivots().iter().zip(refs) {
        put_key(&mut out, pivot);
        out.push(child.kind as u8);
        put_u64(&mut out, child.offset);
        put_u64(&mut out, child.len);
        put_u64(&mut out, child.leaf_bytes);
        out.extend_from_slice(&child.checksum.to_le_bytes());
    }
    out.push(node.levels().len() as u8);
    let mut extents = segments.iter();
    for level in node.levels() {
        out.extend_from_slice(&(level.len() as u32).to_le_bytes());
        for segment in level {
            let (extent, identity) = extents.next().copied().unwrap_or((Extent { offset: 0, len: 0 }, 0));
            put_u64(&mut out, extent.offset);
            put_u64(&mut out, extent.len);
            put_u64(&mut out, segment.run().total_bytes());
            out.extend_from_slice(&identity.to_le_bytes());
            put_key(&mut out, segment.view_lower());
            put_optional_key(&mut out, segment.view_upper());
            out.extend_from_slice(&(segment.flushed().len() as u32).to_le_bytes());
            for (pivot, flushed) in segment.flushed() {
                put_key(&mut out, pivot);
                match flushed {
                    Flushed::Through(key) => {
                        out.push(0);
                        put_key(&mut out, key);
                    }
                    Flushed::Whole => out.push(1),
                }
            }
        }
    }
    out
}

/// Reads a node page's payload; every failure is corruption at the field's file offset.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    /// File offset of `bytes[0]`.
    base: u64,
}

impl Cursor<'_> {
    fn corrupt(&self, what: &str) -> Error {
        Error::corruption(PAGES_FILE, self.base + self.at as u64, format!("node page: {what}"))
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&[u8]> {
        let slice = self.bytes.get(self.at..self.at.saturating_add(n)).ok_or_else(|| self.corrupt(what))?;
        self.at += n;
        Ok(slice)
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap_or_default()))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().unwrap_or_default()))
    }

    fn key(&mut self, what: &str) -> Result<Key> {
        let len = self.u32(what)? as usize;
        Ok(self.take(len, what)?.to_vec())
    }

    fn optional_key(&mut self, what: &str) -> Result<Option<Key>> {
        match self.u8(what)? {
            0 => Ok(None),
            1 => Ok(Some(self.key(what)?)),
            _ => Err(self.corrupt(what)),
        }
    }
}

/// State of an open: one reader per run, and the node pages seen.
struct Opened {
    pages: Arc<Pages>,
    /// The pages file's length: a referenced extent past it is damage (a cut file).
    file_len: u64,
    runs: HashMap<u64, Arc<DiskRun>>,
    node_pages: Vec<Extent>,
}

/// A tree deeper than this is damage (a page pointing at its ancestor would recurse forever).
const MAX_HEIGHT: usize = 64;

impl Opened {
    fn check_inside(&self, extent: Extent) -> Result<()> {
        if extent.offset.checked_add(extent.len).is_none_or(|end| end > self.file_len) {
            return Err(Error::corruption(
                PAGES_FILE,
                self.file_len,
                format!(
                    "the file ends inside the extent {}+{} the checkpoint refers to",
                    extent.offset, extent.len
                ),
            ));
        }
        Ok(())
    }

    /// The run at `extent`, checked to be the one the reference names (`identity`).
    fn run(&mut self, extent: Extent, entry_bytes: u64, identity: u32) -> Result<Run> {
        let run = match self.runs.get(&extent.offset) {
            Some(run) => run.clone(),
            None => {
                self.check_inside(extent)?;
                let run = DiskRun::open(&self.pages, extent, entry_bytes)?;
                self.runs.insert(extent.offset, run.clone());
                run
            }
        };
        if run.identity() != identity || run.extent() != extent {
            return Err(Error::corruption(
                PAGES_FILE,
                extent.offset,
                "the run here is not the one its node page refers to",
            ));
        }
        Ok(Run::Disk(run))
    }

    fn subtree(&mut self, child: ChildRef, depth: usize) -> Result<Subtree> {
        if depth > MAX_HEIGHT {
            return Err(Error::corruption(PAGES_FILE, child.offset, "node pages nest deeper than any tree"));
        }
        match child.kind {
            ChildKind::Leaf => Ok(Subtree::Leaf(Leaf::from_run(
                self.run(child.extent(), child.leaf_bytes, child.checksum)?,
                child.leaf_bytes,
            ))),
            ChildKind::Node => Ok(Subtree::Node(Arc::new(self.node(child, depth)?))),
        }
    }

    fn node(&mut self, child: ChildRef, depth: usize) -> Result<Node> {
        let extent = child.extent();
        self.check_inside(extent)?;
        let mut bytes = vec![0u8; extent.len as usize];
        self.pages.file().read_at(extent.offset, &mut bytes)?;
        bytes.truncate(child.len as usize);
        let decoded = node_format().decode(PAGES_FILE, &bytes).map_err(|e| at_offset(e, extent.offset))?;
        if page_checksum(&bytes) != child.checksum {
            return Err(Error::corruption(
                PAGES_FILE,
                extent.offset,
                "the node page here is not the one its parent refers to",
            ));
        }
        let mut cursor =
            Cursor { bytes: decoded.payload, at: 0, base: extent.offset + decoded.payload_offset };
        let upper = cursor.optional_key("upper key")?;
        let pivot_count = cursor.u32("pivot count")? as usize;
        if pivot_count == 0 || pivot_count > 1 << 16 {
            return Err(cursor.corrupt("pivot count out of range"));
        }
        let (mut pivots, mut children) = (Vec::new(), Vec::new());
        for _ in 0..pivot_count {
            let pivot = cursor.key("pivot")?;
            if pivots.last().is_some_and(|last: &Key| *last >= pivot) {
                return Err(cursor.corrupt("pivots out of order"));
            }
            let kind = match cursor.u8("child kind")? {
                0 => ChildKind::Leaf,
                1 => ChildKind::Node,
                _ => return Err(cursor.corrupt("child kind")),
            };
            let (offset, len, leaf_bytes) =
                (cursor.u64("child offset")?, cursor.u64("child length")?, cursor.u64("leaf bytes")?);
            let checksum = cursor.u32("child checksum")?;
            pivots.push(pivot);
            children.push(ChildRef { kind, offset, len, leaf_bytes, checksum });
        }
        let levels = self.levels(&mut cursor)?;
        let children =
            children.into_iter().map(|c| self.subtree(c, depth + 1)).collect::<Result<Vec<_>>>()?;
        self.node_pages.push(extent);
        let guard = Arc::new(ExtentGuard::new(extent, self.pages.clone()));
        Ok(Node::from_parts(pivots, children, levels, upper, guard))
    }

    fn levels(&mut self, cursor: &mut Cursor<'_>) -> Result<Vec<Vec<Segment>>> {
        let level_count = cursor.u8("level count")?;
        let mut levels = Vec::with_capacity(level_count as usize);
        for _ in 0..level_count {
            let segment_count = cursor.u32("segment count")?;
            let mut level = Vec::new();
            for _ in 0..segment_count {
                let extent =
                    Extent { offset: cursor.u64("segment offset")?, len: cursor.u64("segment length")? };
                let entry_bytes = cursor.u64("segment entry bytes")?;
                let identity = cursor.u32("segment run identity")?;
                let view_lower = cursor.key("view lower key")?;
                let view_upper = cursor.optional_key("view upper key")?;
                let mut flushed = BTreeMap::new();
                for _ in 0..cursor.u32("flushed count")? {
                    let pivot = cursor.key("flushed pivot")?;
                    let bound = match cursor.u8("flushed kind")? {
                        0 => Flushed::Through(cursor.key("flushed key")?),
                        1 => Flushed::Whole,
                        _ => return Err(cursor.corrupt("flushed kind")),
                    };
                    flushed.insert(pivot, bound);
                }
                level.push(Segment::from_parts(
                    self.run(extent, entry_bytes, identity)?,
                    flushed,
                    view_lower,
                    view_upper,
                ));
            }
            levels.push(level);
        }
        Ok(levels)
    }
}

/// A small-file error of a node page, its offset moved from the page's start to the file's.
fn at_offset(error: Error, page_offset: u64) -> Error {
    match error {
        Error::Corruption { file, offset, what } => {
            Error::Corruption { file, offset: offset + page_offset, what }
        }
        other => other,
    }
}

#[cfg(test)]
#[path = "page_tests.rs"]
mod tests;
