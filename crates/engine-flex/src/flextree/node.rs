//! FlexTree nodes (paper §3.1, §3.3): leaves hold extents with 32-bit partial offsets; internal
//! nodes hold child pointers with 64-bit shift values and 64-bit pivots.

/// The physical address that marks a hole (an unmapped range; reads as zeros).
pub const HOLE_ADDR: u64 = u64::MAX;

/// Longest single leaf entry. Longer holes are stored as several entries. With at most
/// [`MAX_LEAF_CAPACITY`] + 1 entries a leaf spans less than 2^31 bytes, so rebasing its partial
/// offsets to start at 0 always fits them in 32 bits.
pub const MAX_ENTRY_BYTES: u64 = 1 << 24;

/// Largest leaf fan-out (bounded by the 32-bit partial offsets, see [`MAX_ENTRY_BYTES`]).
pub const MAX_LEAF_CAPACITY: usize = 127;
/// Largest internal fan-out (bounded by the 4 KiB page, see docs/format/flexfile.md).
pub const MAX_INTERNAL_CAPACITY: usize = 168;

pub(crate) type NodeId = u32;

/// One extent in a leaf. Effective offset = `partial_offset` + the shifts on the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LeafEntry {
    pub partial_offset: u32,
    pub len: u32,
    pub addr: u64,
}

impl LeafEntry {
    pub fn end(&self) -> i64 {
        i64::from(self.partial_offset) + i64::from(self.len)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChildRef {
    pub id: NodeId,
    /// Added to every offset in the child's subtree.
    pub shift: i64,
}

#[derive(Clone, Debug)]
pub(crate) enum NodeBody {
    /// Extents in logical order; contiguous (each starts where the previous ends), `len > 0`.
    Leaf(Vec<LeafEntry>),
    /// `pivots[i]` is the start of child `i + 1` relative to this node's base (sum of the shifts
    /// above); it equals the end of child `i`. `pivots.len() == children.len() - 1`.
    Internal { children: Vec<ChildRef>, pivots: Vec<i64> },
}

#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub body: NodeBody,
    /// Page of this node in the last committed tree version; `None` once changed since (dirty).
    pub page: Option<u64>,
}

impl Node {
    pub fn leaf(entries: Vec<LeafEntry>) -> Node {
        Node { body: NodeBody::Leaf(entries), page: None }
    }

    pub fn count(&self) -> usize {
        match &self.body {
            NodeBody::Leaf(entries) => entries.len(),
            NodeBody::Internal { children, .. } => children.len(),
        }
    }

    pub fn is_leaf(&self) -> bool {
        matches!(self.body, NodeBody::Leaf(_))
    }
}

/// A mapping returned by queries: `len` bytes at logical `offset` live at physical `addr`
/// (`HOLE_ADDR` for a hole).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub offset: u64,
    pub len: u64,
    pub addr: u64,
}

impl Extent {
    pub fn is_hole(&self) -> bool {
        self.addr == HOLE_ADDR
    }
}

/// Tuning of a [`crate::flextree::FlexTree`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlexTreeConfig {
    /// Maximum entries per leaf (4..=127); a leaf holding more is split.
    pub leaf_capacity: usize,
    /// Maximum children per internal node (4..=168).
    pub internal_capacity: usize,
    /// An inserted extent is merged into the extent before it when both are logically and
    /// physically contiguous and the result is at most this long (0 disables merging).
    pub max_merge_bytes: u32,
    /// Extents never merge across a multiple of this physical address (FlexFile: its segment
    /// size, so every extent lies in one segment); 0: no boundary.
    pub merge_boundary_bytes: u64,
    /// A leaf whose partial offsets would pass this value is rebased (§3.3). `u32::MAX` in
    /// production; tests lower it so rebasing happens often.
    pub rebase_threshold: u32,
}

impl Default for FlexTreeConfig {
    fn default() -> Self {
        FlexTreeConfig {
            leaf_capacity: 120,
            internal_capacity: 120,
            max_merge_bytes: 128 << 10,
            merge_boundary_bytes: 0,
            rebase_threshold: u32::MAX,
        }
    }
}
