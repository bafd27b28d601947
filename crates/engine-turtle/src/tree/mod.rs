//! The TurtleTree (paper §3), in memory: a B^ε+-tree whose interior nodes hold pivots and an
//! update buffer of level-tiered sorted runs (`Segment`s), over leaves that hold each key's
//! newest value. Updates arrive as sorted batches (`Tree::apply_batch`), never one key at a time.
//!
//! 1. A batch enters the root. At a leaf it merges in (deletes remove keys), and a leaf grown past
//!    `leaf_bytes` splits into even parts. At a node it enters the buffer like a binary counter:
//!    level 0 if empty, else merged with levels 0..k−1 into the first empty level k (or into the
//!    last level when all are full); lower levels are newer.
//! 2. Then the pivot with the most buffered bytes is flushed when it holds a leaf's worth: its
//!    entries are merged over the levels (newest wins), the first `leaf_bytes` of them go to its
//!    child as a batch (step 1, recursively), and each segment's bound for that pivot rises to
//!    the batch's last key (the runs are not rewritten). Flushes repeat while the node buffers more
//!    than `leaf_bytes · (pivots − 1)`.
//! 3. A child that split adds pivots; an underfull child (a leaf under a quarter of `leaf_bytes`,
//!    a node under a quarter of `max_pivots`) joins a neighbour. A node over `max_pivots` splits
//!    in half, both halves viewing the same runs. A root that splits gains a level; a root left
//!    with one child hands its buffer down and gives way to it.
//!
//! Reads (`get`, `range`) look in the buffers newest level first, skipping flushed entries, then
//! in the child; a scan merges every level and the children's scans (`strata_kit::sorted_run`).

mod leaf;
mod node;
mod page;
mod run;
mod segment;

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;

use strata_core::{Direction, Key, Result, Value};
use strata_kit::sorted_run::{Entry, EntryKind};

use crate::pages::Pages;

pub use leaf::Leaf;
pub use node::{Node, SPACE_PENDING_FRACTION};
pub use page::{ChildKind, ChildRef};
pub use run::Run;
pub use segment::{Flushed, Segment};

/// Bytes an entry counts for buffering and leaf sizes: key, value and a fixed per-entry share.
pub fn entry_bytes(key: &[u8], entry: &Entry) -> u64 {
    (key.len() + entry.value.len()) as u64 + ENTRY_OVERHEAD_BYTES
}

/// The per-entry share of `entry_bytes` (the run format's lengths and kind, about).
pub const ENTRY_OVERHEAD_BYTES: u64 = 8;

/// The tree's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeConfig {
    /// A leaf's size limit, and the size of a flushed batch (the paper's L).
    pub leaf_bytes: u64,
    /// Pivots per node before it splits (the paper's ρ; at most 64: a segment's pivot set is a
    /// 64-bit set on disk).
    pub max_pivots: usize,
}

impl Default for TreeConfig {
    fn default() -> TreeConfig {
        TreeConfig { leaf_bytes: 1 << 20, max_pivots: 64 }
    }
}

impl TreeConfig {
    /// A checkpointed run's block size and alignment: 4 KiB (a device page), smaller for small
    /// leaves (tests), so the block index's byte estimates stay fine next to `leaf_bytes`; a
    /// power of two.
    pub fn run_block_bytes(&self) -> usize {
        ((self.leaf_bytes / 64).clamp(256, 4096) as usize).next_power_of_two().min(4096)
    }

    /// Buffer levels per node: ⌈log2 ρ⌉ (at least 1).
    pub fn max_levels(&self) -> usize {
        (self.max_pivots.max(2).next_power_of_two().trailing_zeros() as usize).max(1)
    }
}

/// Where a level merge writes the segments it cuts once its output passes `after_bytes` (so a
/// merge of a node's whole buffer never holds it all in memory). Written, not synced, and
/// referenced only by the tree in memory until a checkpoint, as a spill's runs.
#[derive(Clone, Debug)]
pub struct SpillTo {
    pub pages: Arc<Pages>,
    pub after_bytes: u64,
}

/// The apply path's settings: the tree's shape (`Deref`), and where large merges spill.
#[derive(Clone, Debug)]
pub struct ApplyConfig {
    pub tree: TreeConfig,
    pub spill: Option<SpillTo>,
}

impl ApplyConfig {
    /// The settings for each of a merge's two halves: half the spill's room each.
    pub fn halved(&self) -> ApplyConfig {
        let spill =
            self.spill.as_ref().map(|s| SpillTo { pages: s.pages.clone(), after_bytes: s.after_bytes / 2 });
        ApplyConfig { tree: self.tree, spill }
    }
}

impl std::ops::Deref for ApplyConfig {
    type Target = TreeConfig;

    fn deref(&self) -> &TreeConfig {
        &self.tree
    }
}

/// A subtree: a leaf or an interior node.
#[derive(Clone, Debug)]
pub enum Subtree {
    Leaf(Leaf),
    /// Shared with the tree readers see while the worker applies a batch to its copy
    /// (`Arc::unwrap_or_clone` copies only the nodes a batch changes).
    Node(Arc<Node>),
}

impl Subtree {
    /// Applies a sorted batch to the subtree holding `[lower, upper)`; returns it, or the parts it
    /// split into, each with its lower key.
    pub fn apply(
        self,
        lower: Key,
        upper: Option<Key>,
        batch: Vec<(Key, Entry)>,
        config: &ApplyConfig,
    ) -> Result<Vec<(Key, Subtree)>> {
        if batch.is_empty() {
            return Ok(vec![(lower, self)]);
        }
        match self {
            Subtree::Leaf(leaf) => Ok(leaf
                .apply(lower, batch, config)?
                .into_iter()
                .map(|(k, l)| (k, Subtree::Leaf(l)))
                .collect()),
            Subtree::Node(node) => {
                let mut node = Arc::unwrap_or_clone(node);
                node.set_upper(upper);
                node.insert(batch, config)?;
                node.flush_while_due(config)?;
                node.split_if_needed(config)
            }
        }
    }

    /// Whether a node in it buffers more than `fraction` of the leaf bytes below that node.
    pub fn needs_settling(&self, fraction: f64) -> bool {
        match self {
            Subtree::Leaf(_) => false,
            Subtree::Node(node) => node.needs_settling(fraction),
        }
    }

    /// Bytes of the leaves under it (`entry_bytes`).
    pub fn leaf_bytes_below(&self) -> u64 {
        match self {
            Subtree::Leaf(leaf) => leaf.bytes(),
            Subtree::Node(node) => node.leaf_bytes_below(),
        }
    }

    /// Whether it is small enough to join a neighbour.
    pub fn is_underfull(&self, config: &TreeConfig) -> bool {
        match self {
            Subtree::Leaf(leaf) => leaf.bytes() < config.leaf_bytes / 4,
            Subtree::Node(node) => node.pivot_count() < (config.max_pivots / 4).max(2),
        }
    }

    /// The newest entry of `key` (a delete as a `Delete` entry), or `None`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Entry>> {
        match self {
            Subtree::Leaf(leaf) => Ok(leaf.get(key)?.map(Entry::put)),
            Subtree::Node(node) => node.get(key),
        }
    }

    /// Its live entries within the bounds, in `direction`.
    pub fn range<'a>(
        &'a self,
        lower: Bound<&'a [u8]>,
        upper: Bound<&'a [u8]>,
        direction: Direction,
    ) -> strata_kit::sorted_run::LazyIter<'a> {
        match self {
            Subtree::Leaf(leaf) => strata_kit::sorted_run::eager(leaf.range(lower, upper, direction)),
            Subtree::Node(node) => node.range(lower, upper, direction),
        }
    }

    /// Entries held: leaf entries plus buffered ones (each version, and each view of a shared
    /// run, counted).
    pub fn entry_count(&self) -> u64 {
        match self {
            Subtree::Leaf(leaf) => leaf.run().entry_count(),
            Subtree::Node(node) => node.entry_count(),
        }
    }

    /// Leaves under it.
    pub fn leaf_count(&self) -> usize {
        match self {
            Subtree::Leaf(_) => 1,
            Subtree::Node(node) => node.children().iter().map(Subtree::leaf_count).sum(),
        }
    }

    /// Levels from here down to the leaves (a leaf is 1).
    pub fn height(&self) -> usize {
        match self {
            Subtree::Leaf(_) => 1,
            Subtree::Node(node) => 1 + node.child_height(),
        }
    }
}

/// Reads `run` through unless `seen` has it (the halves of a split view one run); adds its
/// entries to `entries`.
fn verify_run(run: &Run, seen: &mut HashSet<usize>, entries: &mut u64) -> Result<()> {
    if seen.insert(run.id()) {
        *entries += run
            .iter(Bound::Unbounded, Bound::Unbounded, Direction::Forward)
            .try_fold(0u64, |n, r| r.map(|_| n + 1))?;
    }
    Ok(())
}

fn verify_subtree(subtree: &Subtree, seen: &mut HashSet<usize>, entries: &mut u64) -> Result<()> {
    match subtree {
        Subtree::Leaf(leaf) => verify_run(leaf.run(), seen, entries),
        Subtree::Node(node) => {
            for segment in node.levels().iter().flatten() {
                verify_run(segment.run(), seen, entries)?;
            }
            node.children().iter().try_for_each(|c| verify_subtree(c, seen, entries))
        }
    }
}

/// Adds the memory of `subtree`'s runs to `memory` (a run shared by two views counted for each).
fn add_memory(subtree: &Subtree, memory: &mut TreeMemory) {
    let mut add = |run: &Run| {
        let bytes = run.memory_bytes();
        memory.total_bytes += bytes;
        if run.is_memory() {
            memory.new_run_bytes += bytes;
        }
    };
    match subtree {
        Subtree::Leaf(leaf) => add(leaf.run()),
        Subtree::Node(node) => {
            node.levels().iter().flatten().for_each(|s| add(s.run()));
            node.children().iter().for_each(|c| add_memory(c, memory));
        }
    }
}

/// The memory a tree holds (`Tree::memory`, one walk).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeMemory {
    /// New runs' bytes and checkpointed runs' indexes and filters.
    pub total_bytes: u64,
    /// Of which new runs (not yet written).
    pub new_run_bytes: u64,
}

/// The tree's bytes by kind (`entry_bytes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeBytes {
    /// In leaves: each live key once.
    pub leaves: u64,
    /// In the buffers' runs, each run once, its flushed entries included.
    pub buffer_runs: u64,
    /// Of those, the entries not yet flushed (each view of a shared run counted).
    pub buffer_pending: u64,
}

fn add_bytes(subtree: &Subtree, seen: &mut HashSet<usize>, bytes: &mut TreeBytes) {
    match subtree {
        Subtree::Leaf(leaf) => bytes.leaves += leaf.run().total_bytes(),
        Subtree::Node(node) => {
            for segment in node.levels().iter().flatten() {
                if seen.insert(segment.run().id()) {
                    bytes.buffer_runs += segment.run().total_bytes();
                }
            }
            bytes.buffer_pending += node.pending_total();
            node.children().iter().for_each(|c| add_bytes(c, seen, bytes));
        }
    }
}

/// The whole tree.
#[derive(Clone, Debug)]
pub struct Tree {
    root: Subtree,
    config: TreeConfig,
}

impl Tree {
    pub fn new(config: TreeConfig) -> Result<Tree> {
        Ok(Tree { root: Subtree::Leaf(Leaf::empty()?), config })
    }

    /// A tree over `root` (read from a checkpoint).
    pub fn from_root(root: Subtree, config: TreeConfig) -> Tree {
        Tree { root, config }
    }

    pub fn config(&self) -> &TreeConfig {
        &self.config
    }

    /// Applies `batch`: keys strictly ascending, puts and deletes (no merge operands); every
    /// new run stays in memory.
    pub fn apply_batch(&mut self, batch: Vec<(Key, Entry)>) -> Result<()> {
        self.apply_batch_spilling(batch, None)
    }

    /// `apply_batch`, a level merge writing its segments to `spill` once past its bytes.
    pub fn apply_batch_spilling(&mut self, batch: Vec<(Key, Entry)>, spill: Option<SpillTo>) -> Result<()> {
        if batch.windows(2).any(|w| w[0].0 >= w[1].0) || batch.iter().any(|(_, e)| e.kind == EntryKind::Merge)
        {
            return Err(strata_core::Error::invalid(
                "turtle tree: a batch needs ascending keys, puts and deletes only",
            ));
        }
        let config = ApplyConfig { tree: self.config, spill };
        let root = std::mem::replace(&mut self.root, Subtree::Leaf(Leaf::empty()?));
        let parts = root.apply(Key::new(), None, batch, &config)?;
        self.set_root(parts, &config)
    }

    /// One step toward leaves that hold (nearly) everything, so reads meet few buffered runs:
    /// the highest node whose buffer holds more than `fraction` of the leaf bytes below it
    /// flushes its fullest pivot into its child (a batch of up to a leaf), or, within it,
    /// rewrites a segment its flushes left mostly flushed (node/settle.rs). Whether anything
    /// moved (false: every node is within the fraction and keeps no such segment).
    pub fn settle_step(&mut self, fraction: f64, spill: Option<SpillTo>) -> Result<bool> {
        let config = ApplyConfig { tree: self.config, spill };
        if !self.root.needs_settling(fraction) {
            return Ok(false);
        }
        let Subtree::Node(root) = std::mem::replace(&mut self.root, Subtree::Leaf(Leaf::empty()?)) else {
            unreachable!("only a node buffers");
        };
        let mut root = Arc::unwrap_or_clone(root);
        root.set_upper(None);
        root.settle_step(fraction, &config)?;
        let parts = root.split_if_needed(&config)?;
        self.set_root(parts, &config)?;
        Ok(true)
    }

    /// The root made of `parts` (one subtree, or a new node above several), collapsed.
    fn set_root(&mut self, parts: Vec<(Key, Subtree)>, config: &ApplyConfig) -> Result<()> {
        self.root = if parts.len() == 1 {
            match parts.into_iter().next() {
                Some((_, subtree)) => subtree,
                None => Subtree::Leaf(Leaf::empty()?),
            }
        } else {
            Subtree::Node(Arc::new(Node::above(parts, &self.config)))
        };
        self.collapse_root(config)
    }

    /// A root node with one child hands its buffer down and gives way to the child.
    fn collapse_root(&mut self, config: &ApplyConfig) -> Result<()> {
        while let Subtree::Node(node) = &mut self.root {
            if node.pivot_count() > 1 {
                return Ok(());
            }
            let child = Arc::make_mut(node).drain_into_only_child(config)?;
            self.root = child;
        }
        Ok(())
    }

    /// `key`'s value, `None` when absent or deleted.
    pub fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        Ok(self.root.get(key)?.filter(|e| e.kind == EntryKind::Put).map(|e| e.value))
    }

    /// Live records within the bounds, in `direction`, as puts (a merge source).
    pub fn range<'a>(
        &'a self,
        lower: Bound<&'a [u8]>,
        upper: Bound<&'a [u8]>,
        direction: Direction,
    ) -> strata_kit::sorted_run::LazyIter<'a> {
        self.root.range(lower, upper, direction)
    }

    pub fn height(&self) -> usize {
        self.root.height()
    }

    /// Reads every run of the tree through once (each block's checksum and order checked);
    /// returns the entries read.
    pub fn verify(&self) -> Result<u64> {
        let mut entries = 0;
        verify_subtree(&self.root, &mut HashSet::new(), &mut entries)?;
        Ok(entries)
    }

    /// Memory held: new runs' bytes, and checkpointed runs' indexes and filters (a run shared
    /// by two views counted for each), and the new runs' share of it: one walk.
    pub fn memory(&self) -> TreeMemory {
        let mut memory = TreeMemory::default();
        add_memory(&self.root, &mut memory);
        memory
    }

    /// Its bytes by kind (a walk of every node).
    pub fn bytes(&self) -> TreeBytes {
        let mut bytes = TreeBytes::default();
        add_bytes(&self.root, &mut HashSet::new(), &mut bytes);
        bytes
    }

    pub fn leaf_count(&self) -> usize {
        self.root.leaf_count()
    }

    /// Every node's invariants and buffered-bytes bound (tests).
    #[cfg(test)]
    pub fn check(&self) -> std::result::Result<(), String> {
        match &self.root {
            Subtree::Node(node) => node.check(&self.config),
            Subtree::Leaf(_) => Ok(()),
        }
    }

    /// Entries held in leaves and buffers (each buffered version counted).
    pub fn entry_count(&self) -> u64 {
        self.root.entry_count()
    }
}
