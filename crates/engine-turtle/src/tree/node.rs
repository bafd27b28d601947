//! An interior node: pivots (each child's lower key; the first is the node's own), children, and
//! the update buffer's levels (module documentation of `tree`, steps 1–3).
//!
//! Invariants: `pivots` ascend and `pivots.len() == children.len() ≥ 1`; every level's segments
//! have ascending, disjoint views inside `[pivots[0], upper)`; within a level a key has at most
//! one entry; a lower level's entry of a key is newer than a higher level's, and any buffered
//! entry is newer than the child's.

use std::ops::Bound;
use std::sync::Arc;

use strata_core::{bound_key, bounds_hold_nothing, Direction, Error, Key, Result};
use strata_kit::sorted_run::{eager, DeferredParts, Entry, LazyIter, MergeIter, MergeOutput, OpenPart};

use super::run::RunBuilder;
use super::segment::{max_lower, min_upper, Flushed, Segment};
use super::{entry_bytes, ApplyConfig, Leaf, Subtree, TreeConfig};
use crate::pages::ExtentGuard;

mod settle;

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct Node {
    pivots: Vec<Key>,
    children: Vec<Subtree>,
    /// Newest first.
    levels: Vec<Vec<Segment>>,
    /// The node's upper bound (exclusive); `None`: the key space's end.
    upper: Option<Key>,
    /// The page the last checkpoint wrote it to (every checkpoint writes every node anew).
    page: Option<Arc<ExtentGuard>>,
    /// Of the bytes its flushes into leaves carried, the share that replaced or deleted a
    /// leaf's record (halved by each flush's own share; 0 until its first flush into a leaf).
    replacing_share: f64,
}

impl Node {
    /// A node over `parts` (each child with its lower key), its buffer empty.
    pub fn above(parts: Vec<(Key, Subtree)>, config: &TreeConfig) -> Node {
        let (pivots, children) = parts.into_iter().unzip();
        let levels = vec![Vec::new(); config.max_levels()];
        Node { pivots, children, levels, upper: None, page: None, replacing_share: 0.0 }
    }

    /// A node as its page describes it.
    pub fn from_parts(
        pivots: Vec<Key>,
        children: Vec<Subtree>,
        levels: Vec<Vec<Segment>>,
        upper: Option<Key>,
        page: Arc<ExtentGuard>,
    ) -> Node {
        Node { pivots, children, levels, upper, page: Some(page), replacing_share: 0.0 }
    }

    pub fn pivots(&self) -> &[Key] {
        &self.pivots
    }

    pub fn levels(&self) -> &[Vec<Segment>] {
        &self.levels
    }

    pub fn upper(&self) -> Option<&[u8]> {
        self.upper.as_deref()
    }

    /// Children and buffer segments, for a checkpoint to write.
    pub fn parts_mut(&mut self) -> (&mut [Subtree], &mut [Vec<Segment>]) {
        (&mut self.children, &mut self.levels)
    }

    /// Records the page a checkpoint wrote the node to (the previous one is retired).
    pub fn set_page(&mut self, page: Arc<ExtentGuard>) {
        self.page = Some(page);
    }

    pub fn pivot_count(&self) -> usize {
        self.pivots.len()
    }

    pub fn set_upper(&mut self, upper: Option<Key>) {
        self.upper = upper;
    }

    pub fn children(&self) -> &[Subtree] {
        &self.children
    }

    pub fn child_height(&self) -> usize {
        self.children.first().map_or(0, Subtree::height)
    }

    /// Entries held in buffers' runs and leaves (shared runs counted per view).
    pub fn entry_count(&self) -> u64 {
        let buffered: u64 = self.levels.iter().flatten().map(|s| s.run().entry_count()).sum();
        buffered + self.children.iter().map(Subtree::entry_count).sum::<u64>()
    }

    /// The pivot whose range holds `key`.
    fn pivot_of(&self, key: &[u8]) -> usize {
        self.pivots.partition_point(|p| p.as_slice() <= key).saturating_sub(1)
    }

    /// The pivots whose ranges meet the bounds.
    fn pivots_within(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> std::ops::RangeInclusive<usize> {
        let first = match lower {
            Bound::Included(k) | Bound::Excluded(k) => self.pivot_of(k),
            Bound::Unbounded => 0,
        };
        let last = match upper {
            Bound::Included(k) | Bound::Excluded(k) => self.pivot_of(k),
            Bound::Unbounded => self.pivots.len() - 1,
        };
        first..=last.max(first)
    }

    /// Pivot `i`'s range.
    fn pivot_range(&self, i: usize) -> (&[u8], Option<&[u8]>) {
        (&self.pivots[i], self.pivots.get(i + 1).map(Vec::as_slice).or(self.upper.as_deref()))
    }

    /// A level's entries within the bounds that are not flushed, in `direction`: one part per
    /// segment and pivot, each opened only once the merge reaches the first key it may hold.
    fn level_source<'a>(
        &'a self,
        level: &'a [Segment],
        lower: Bound<&'a [u8]>,
        upper: Bound<&'a [u8]>,
        direction: Direction,
    ) -> LazyIter<'a> {
        let level = &level[segments_within(level, lower, upper)];
        let parts = move |segment: &'a Segment| self.segment_parts(segment, lower, upper, direction);
        match direction {
            Direction::Forward => DeferredParts::boxed(level.iter().flat_map(parts)),
            Direction::Reverse => DeferredParts::boxed(level.iter().rev().flat_map(parts)),
        }
    }

    /// A segment's entries within the bounds that are not flushed: per pivot, from just past its
    /// flushed key (a scan never walks over flushed entries), announced by its first key.
    fn segment_parts<'a>(
        &'a self,
        segment: &'a Segment,
        lower: Bound<&'a [u8]>,
        upper: Bound<&'a [u8]>,
        direction: Direction,
    ) -> impl Iterator<Item = (Option<Key>, OpenPart<'a>)> + Send + 'a {
        // Bounds that miss the view leave every part empty (each is checked below).
        let (lower, upper) = segment.within_view(lower, upper);
        let pivots = self.pivots_within(lower, upper);
        let part = move |i: usize| -> Option<(Option<Key>, OpenPart<'a>)> {
            let (pivot_lower, pivot_upper) = self.pivot_range(i);
            let mut start = max_lower(lower, Bound::Included(pivot_lower));
            match segment.flushed().get(pivot_lower) {
                Some(Flushed::Whole) => return None,
                Some(Flushed::Through(bound)) => start = max_lower(start, Bound::Excluded(bound.as_slice())),
                None => {}
            }
            let end = min_upper(upper, pivot_upper.map_or(Bound::Unbounded, Bound::Excluded));
            if bounds_hold_nothing(start, end) {
                return None;
            }
            let first = match direction {
                Direction::Forward => bound_key(start),
                Direction::Reverse => bound_key(end),
            };
            let open: OpenPart<'a> = Box::new(move || eager(segment.iter(start, end, direction)));
            Some((first.map(<[u8]>::to_vec), open))
        };
        let order: Box<dyn Iterator<Item = usize> + Send> = match direction {
            Direction::Forward => Box::new(pivots),
            Direction::Reverse => Box::new(pivots.rev()),
        };
        order.filter_map(part)
    }

    /// The children's ranges within the bounds, in `direction`, each opened only once the merge
    /// reaches its pivot.
    fn children_source<'a>(
        &'a self,
        lower: Bound<&'a [u8]>,
        upper: Bound<&'a [u8]>,
        direction: Direction,
    ) -> LazyIter<'a> {
        let part = move |i: usize| -> (Option<Key>, OpenPart<'a>) {
            let (pivot_lower, pivot_upper) = self.pivot_range(i);
            let first = match direction {
                Direction::Forward => Some(pivot_lower),
                Direction::Reverse => pivot_upper,
            };
            let open: OpenPart<'a> = Box::new(move || self.children[i].range(lower, upper, direction));
            (first.map(<[u8]>::to_vec), open)
        };
        let pivots = self.pivots_within(lower, upper);
        match direction {
            Direction::Forward => DeferredParts::boxed(pivots.map(part)),
            Direction::Reverse => DeferredParts::boxed(pivots.rev().map(part)),
        }
    }

    /// The buffer's entries within the bounds, newest per key, tombstones kept, in key order,
    /// up to about `limit_bytes` (at least one entry when there is any; the one that would pass
    /// the limit is left): a flush reads only the leaf's worth it takes, not the whole pivot.
    fn merged_buffer(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        limit_bytes: u64,
    ) -> Result<Vec<(Key, Entry)>> {
        let sources =
            self.levels.iter().map(|l| self.level_source(l, lower, upper, Direction::Forward)).collect();
        let mut merged = Vec::new();
        let mut taken_bytes = 0u64;
        for item in MergeIter::lazy(sources, Direction::Forward, MergeOutput::Above) {
            let (key, entry) = item?;
            let bytes = entry_bytes(&key, &entry);
            if !merged.is_empty() && taken_bytes + bytes > limit_bytes {
                break;
            }
            taken_bytes += bytes;
            merged.push((key, entry));
        }
        Ok(merged)
    }

    /// Step 1 at a node: the batch enters the buffer as a binary counter. A merge of four
    /// batches' worth or more (into level 2 and up) runs as two halves split at the middle
    /// pivot, the lower one on a second thread (the paper's §4.2 splits a merge over cores):
    /// each half's segments cover its own key range, side by side.
    pub fn insert(&mut self, mut batch: Vec<(Key, Entry)>, config: &ApplyConfig) -> Result<()> {
        if self.levels.len() < config.max_levels() {
            self.levels.resize(config.max_levels(), Vec::new());
        }
        let target = self.levels.iter().position(Vec::is_empty).unwrap_or(self.levels.len() - 1);
        let (lower, upper) = (self.pivots[0].clone(), self.upper.clone());
        let segments = if target >= PARALLEL_MERGE_MIN_LEVEL && self.pivots.len() >= 2 {
            let mid = self.pivots[self.pivots.len() / 2].clone();
            let upper_batch = batch.split_off(batch.partition_point(|(k, _)| k < &mid));
            let config = &config.halved();
            let (lower_half, upper_half) = std::thread::scope(|scope| {
                let this = &*self;
                let lower_half =
                    scope.spawn(|| this.merged_segments(batch, target, &lower, Some(&mid), config));
                let upper_half = this.merged_segments(upper_batch, target, &mid, upper.as_ref(), config);
                (lower_half.join(), upper_half)
            });
            let mut segments =
                lower_half.unwrap_or_else(|_| Err(Error::Poisoned("a panic in a level merge".into())))?;
            segments.extend(upper_half?);
            segments
        } else {
            self.merged_segments(batch, target, &lower, upper.as_ref(), config)?
        };
        for level in &mut self.levels[..=target] {
            level.clear();
        }
        self.levels[target] = segments;
        Ok(())
    }

    /// `batch` (its keys within `[lower, upper)`) merged with the levels up to `target` there,
    /// as segments of about a leaf whose views cover `[lower, upper)`.
    fn merged_segments(
        &self,
        batch: Vec<(Key, Entry)>,
        target: usize,
        lower: &Key,
        upper: Option<&Key>,
        config: &ApplyConfig,
    ) -> Result<Vec<Segment>> {
        let mut sources: Vec<LazyIter<'_>> = vec![eager(Box::new(batch.into_iter().map(Ok)))];
        for level in &self.levels[..=target] {
            sources.push(self.level_source(
                level,
                Bound::Included(lower),
                as_bound(upper.map(Vec::as_slice)),
                Direction::Forward,
            ));
        }
        let merged = MergeIter::lazy(sources, Direction::Forward, MergeOutput::Above);
        cut_into_segments(merged, lower.clone(), upper.cloned(), config)
    }

    /// Unflushed bytes buffered for pivot `i`.
    fn pending_bytes(&self, i: usize) -> u64 {
        let (lower, upper) = self.pivot_range(i);
        let pivot = &self.pivots[i];
        self.levels.iter().flatten().map(|s| s.unflushed_bytes(pivot, lower, upper)).sum()
    }

    /// The most a node may buffer: `leaf_bytes · (pivots − 1)` (the paper's bound; one leaf's
    /// worth for a one-pivot node, which only a root giving way or a join's half has).
    fn buffer_bound(&self, config: &TreeConfig) -> u64 {
        config.leaf_bytes * (self.pivots.len() as u64 - 1).max(1)
    }

    /// Unflushed bytes buffered for all pivots.
    pub fn pending_total(&self) -> u64 {
        self.buffer_summary().2
    }

    /// The fullest pivot, its pending bytes, and the bytes buffered for all pivots (one pass).
    fn buffer_summary(&self) -> (usize, u64, u64) {
        let mut summary = (0, 0, 0);
        for i in 0..self.pivots.len() {
            let pending = self.pending_bytes(i);
            summary.2 += pending;
            if pending > summary.1 {
                (summary.0, summary.1) = (i, pending);
            }
        }
        summary
    }

    /// Step 2: one flush of the fullest pivot when it holds a leaf's worth, then more while the
    /// node buffers more than `leaf_bytes · (pivots − 1)`, and, above leaves, while it buffers
    /// more than `SPACE_PENDING_FRACTION` of its leaves' bytes.
    pub fn flush_while_due(&mut self, config: &ApplyConfig) -> Result<()> {
        let (i, pending, _) = self.buffer_summary();
        if pending >= config.leaf_bytes {
            self.flush(i, config)?;
        }
        // The space bound's flushes can join children, lowering the buffer bound: it comes last.
        self.restore_space_bound(config)?;
        self.restore_buffer_bound(config)
    }

    /// Above leaves, flushes the fullest pivot while the buffered entries that replace a leaf's
    /// record (estimated: the buffer's bytes times `replacing_share`) pass
    /// `SPACE_PENDING_FRACTION` of its leaves' bytes: a leaf's record that a buffered version
    /// replaces is the space the store takes beyond its data. The paper's bound alone lets a
    /// node over `ρ` small leaves buffer more than they hold (measured: after an update run ten
    /// times the data, 34 MB buffered over 41 MB of leaves). A flush then rewrites a leaf for a
    /// fraction of a leaf's worth: write amplification for space, paid only where the buffer
    /// replaces records (a load of new keys buffers data, not space, and pays nothing).
    fn restore_space_bound(&mut self, config: &ApplyConfig) -> Result<()> {
        if self.child_height() != 1 {
            return Ok(());
        }
        // A flush splits or joins leaves, never changes the height below.
        for _ in 0..self.pivots.len() * 2 {
            let leaves = self.leaf_bytes_below();
            let (i, pending, buffered) = self.buffer_summary();
            let replacing = buffered as f64 * self.replacing_share;
            if pending == 0 || replacing <= leaves as f64 * SPACE_PENDING_FRACTION {
                return Ok(());
            }
            self.flush(i, config)?;
        }
        Ok(())
    }

    /// Flushes the fullest pivot while the node buffers more than `leaf_bytes · (pivots − 1)`
    /// (after an insert, or a split that left a half with fewer pivots than its buffer needs).
    fn restore_buffer_bound(&mut self, config: &ApplyConfig) -> Result<()> {
        loop {
            let (i, pending, buffered) = self.buffer_summary();
            let limit = self.buffer_bound(config);
            if buffered <= limit || pending == 0 {
                return Ok(());
            }
            self.flush(i, config)?;
        }
    }

    /// Flushes up to a leaf's worth of pivot `i`'s entries into its child.
    fn flush(&mut self, i: usize, config: &ApplyConfig) -> Result<()> {
        let (lower, upper) = {
            let (l, u) = self.pivot_range(i);
            (l.to_vec(), u.map(<[u8]>::to_vec))
        };
        let batch =
            self.merged_buffer(Bound::Included(&lower), as_bound(upper.as_deref()), config.leaf_bytes)?;
        let Some(last) = batch.last().map(|(k, _)| k.clone()) else {
            // Nothing left: a disk run's estimate counted whole blocks.
            for segment in self.levels.iter_mut().flatten() {
                if segment.unflushed_bytes(&lower, &lower, upper.as_deref()) > 0 {
                    segment.mark_whole(&lower);
                }
            }
            self.drop_spent_segments();
            return Ok(());
        };
        // Only segments with something of this pivot left get a bound (a bound is what makes a
        // join of pivots copy a segment).
        for segment in self.levels.iter_mut().flatten() {
            if segment.unflushed_bytes(&lower, &lower, upper.as_deref()) > 0 {
                segment.mark_flushed(&lower, &last);
            }
        }
        self.drop_spent_segments();
        let child = std::mem::replace(&mut self.children[i], Subtree::Leaf(Leaf::empty()?));
        let parts = match child {
            Subtree::Leaf(leaf) => {
                let batch_bytes: u64 = batch.iter().map(|(k, e)| entry_bytes(k, e)).sum();
                let (parts, replaced) = leaf.apply_counting(lower, batch, config)?;
                let share = replaced as f64 / batch_bytes.max(1) as f64;
                self.replacing_share = (self.replacing_share + share) / 2.0;
                parts.into_iter().map(|(k, l)| (k, Subtree::Leaf(l))).collect()
            }
            node => node.apply(lower, upper, batch, config)?,
        };
        self.splice_child(i, parts, config)
    }

    /// Puts `parts` (child `i` after an apply) in its place, then joins it with a neighbour when
    /// it came back as one underfull subtree.
    fn splice_child(&mut self, i: usize, parts: Vec<(Key, Subtree)>, config: &ApplyConfig) -> Result<()> {
        let single = parts.len() == 1;
        let old_lower = self.pivots[i].clone();
        let mut parts = parts.into_iter();
        if let Some((_, first)) = parts.next() {
            self.children[i] = first;
        }
        for (offset, (lower, subtree)) in parts.enumerate() {
            for segment in self.levels.iter_mut().flatten() {
                segment.split_pivot(&old_lower, &lower);
            }
            self.pivots.insert(i + 1 + offset, lower);
            self.children.insert(i + 1 + offset, subtree);
        }
        if single && self.pivots.len() > 1 && self.children[i].is_underfull(config) {
            let left = if i + 1 < self.pivots.len() { i } else { i - 1 };
            self.join_children(left, config)?;
        }
        Ok(())
    }

    /// Joins children `j` and `j + 1` into one (re-split when the join is too large). Buffered
    /// segments with a flush bound for either pivot are copied without their flushed entries:
    /// two bounds cannot become one.
    fn join_children(&mut self, j: usize, config: &ApplyConfig) -> Result<()> {
        let ranges: Vec<(Key, Option<Key>)> = [j, j + 1]
            .iter()
            .map(|&p| {
                let (l, u) = self.pivot_range(p);
                (l.to_vec(), u.map(<[u8]>::to_vec))
            })
            .collect();
        for segment in self.levels.iter_mut().flatten() {
            if ranges.iter().any(|(l, _)| segment.has_bound(l)) {
                *segment = segment.without_flushed(&ranges, config.run_block_bytes())?;
            }
        }
        let upper_child = self.children.remove(j + 1);
        let upper_lower = self.pivots.remove(j + 1);
        let lower_child = std::mem::replace(&mut self.children[j], Subtree::Leaf(Leaf::empty()?));
        let lower = self.pivots[j].clone();
        let upper = self.pivot_range(j).1.map(<[u8]>::to_vec);
        let parts = match (lower_child, upper_child) {
            (Subtree::Leaf(a), Subtree::Leaf(b)) => {
                super::leaf::split_even(lower, a.joined_entries(b)?, config)?
                    .into_iter()
                    .map(|(k, l)| (k, Subtree::Leaf(l)))
                    .collect()
            }
            (Subtree::Node(a), Subtree::Node(b)) => {
                let mut node = Arc::unwrap_or_clone(a).join(Arc::unwrap_or_clone(b));
                // An underfull node may buffer up to one leaf's worth (a one-pivot node's bound
                // is not 0), so the sum of two can exceed the joined node's bound.
                node.set_upper(upper);
                node.restore_buffer_bound(config)?;
                node.split_if_needed(config)?
            }
            // Children of one node are all at one height.
            (a, b) => {
                self.children.insert(j + 1, b);
                self.pivots.insert(j + 1, upper_lower);
                self.children[j] = a;
                return Ok(());
            }
        };
        let mut parts = parts.into_iter();
        if let Some((_, first)) = parts.next() {
            self.children[j] = first;
        }
        for (offset, (k, subtree)) in parts.enumerate() {
            self.pivots.insert(j + 1 + offset, k);
            self.children.insert(j + 1 + offset, subtree);
        }
        Ok(())
    }

    /// `self` followed by `upper` (its right neighbour) as one node: pivots and children
    /// concatenated, each level's segments side by side (their views are disjoint).
    pub fn join(mut self, upper: Node) -> Node {
        self.page = None;
        self.pivots.extend(upper.pivots);
        self.children.extend(upper.children);
        let levels = self.levels.len().max(upper.levels.len());
        self.levels.resize(levels, Vec::new());
        for (i, level) in upper.levels.into_iter().enumerate() {
            self.levels[i].extend(level);
        }
        self.upper = upper.upper;
        self.drop_spent_segments();
        self
    }

    /// Segments with nothing left unflushed in the node leave their level.
    fn drop_spent_segments(&mut self) {
        let ranges = self.pivot_ranges();
        for level in &mut self.levels {
            level.retain(|s| ranges.iter().any(|(l, u)| s.unflushed_bytes(l, l, u.as_deref()) > 0));
        }
    }

    /// A node over `max_pivots` splits in half (repeatedly); returns it or its parts.
    pub fn split_if_needed(self, config: &ApplyConfig) -> Result<Vec<(Key, Subtree)>> {
        if self.pivots.len() <= config.max_pivots {
            return Ok(vec![(self.pivots[0].clone(), Subtree::Node(Arc::new(self)))]);
        }
        let (mut left, mut right) = self.split_half();
        left.restore_buffer_bound(config)?;
        right.restore_buffer_bound(config)?;
        let mut parts = left.split_if_needed(config)?;
        parts.extend(right.split_if_needed(config)?);
        Ok(parts)
    }

    /// The node's two halves; each level's segments are narrowed to each half's range (the runs
    /// are shared).
    fn split_half(mut self) -> (Node, Node) {
        let mid = self.pivots.len() / 2;
        let right_pivots = self.pivots.split_off(mid);
        let right_children = self.children.split_off(mid);
        let at = right_pivots[0].clone();
        let narrow = |levels: &[Vec<Segment>], lower: &[u8], upper: Option<&[u8]>| -> Vec<Vec<Segment>> {
            levels.iter().map(|l| l.iter().map(|s| s.narrowed(lower, upper)).collect()).collect()
        };
        let right_levels = narrow(&self.levels, &at, self.upper.as_deref());
        let left_levels = narrow(&self.levels, &self.pivots[0], Some(&at));
        let mut right = Node {
            pivots: right_pivots,
            children: right_children,
            levels: right_levels,
            upper: self.upper.take(),
            page: None,
            replacing_share: self.replacing_share,
        };
        let mut left = Node {
            pivots: self.pivots,
            children: self.children,
            levels: left_levels,
            upper: Some(at),
            page: None,
            replacing_share: self.replacing_share,
        };
        left.drop_spent_segments();
        right.drop_spent_segments();
        (left, right)
    }

    /// Each pivot's lower and upper key.
    fn pivot_ranges(&self) -> Vec<(Key, Option<Key>)> {
        (0..self.pivots.len())
            .map(|i| {
                let (l, u) = self.pivot_range(i);
                (l.to_vec(), u.map(<[u8]>::to_vec))
            })
            .collect()
    }

    /// Bytes of the leaves under it.
    pub fn leaf_bytes_below(&self) -> u64 {
        self.children.iter().map(Subtree::leaf_bytes_below).sum()
    }

    /// Flushes everything buffered into the only child and returns the child (a root giving way).
    pub fn drain_into_only_child(&mut self, config: &ApplyConfig) -> Result<Subtree> {
        let batch = self.merged_buffer(Bound::Unbounded, Bound::Unbounded, u64::MAX)?;
        self.levels.iter_mut().for_each(Vec::clear);
        let child = std::mem::replace(&mut self.children[0], Subtree::Leaf(Leaf::empty()?));
        let mut parts = child.apply(self.pivots[0].clone(), self.upper.clone(), batch, config)?;
        if parts.len() == 1 {
            return Ok(parts.remove(0).1);
        }
        Ok(Subtree::Node(Arc::new(Node::above(parts, config))))
    }

    /// The newest entry of `key` here or below.
    pub fn get(&self, key: &[u8]) -> Result<Option<Entry>> {
        let i = self.pivot_of(key);
        for level in &self.levels {
            let Some(at) = level.partition_point(|s| s.view_lower() <= key).checked_sub(1) else { continue };
            if let Some(entry) = level[at].get(&self.pivots[i], key)? {
                return Ok(Some(entry));
            }
        }
        self.children[i].get(key)
    }

    /// Live entries within the bounds: the levels and the children's ranges merged.
    pub fn range<'a>(
        &'a self,
        lower: Bound<&'a [u8]>,
        upper: Bound<&'a [u8]>,
        direction: Direction,
    ) -> LazyIter<'a> {
        let mut sources: Vec<LazyIter<'a>> =
            self.levels.iter().map(|l| self.level_source(l, lower, upper, direction)).collect();
        sources.push(self.children_source(lower, upper, direction));
        MergeIter::lazy(sources, direction, MergeOutput::Visible).into_lazy()
    }
}

#[cfg(test)]
impl Node {
    /// The module invariants and the buffered-bytes bound, here and below (tests).
    pub fn check(&self, config: &TreeConfig) -> Result<(), String> {
        if self.pivots.is_empty() || self.pivots.len() != self.children.len() {
            return Err(format!("{} pivots, {} children", self.pivots.len(), self.children.len()));
        }
        if self.pivots.windows(2).any(|w| w[0] >= w[1]) || self.pivots.len() > config.max_pivots {
            return Err(format!("pivots out of order or too many: {}", self.pivots.len()));
        }
        for level in &self.levels {
            if level.windows(2).any(|w| w[0].view_lower() >= w[1].view_lower()) {
                let views: Vec<_> = level
                    .iter()
                    .map(|s| (s.view_lower().to_vec(), s.view_upper().map(<[u8]>::to_vec)))
                    .collect();
                return Err(format!("a level's views out of order: {views:?}"));
            }
        }
        let (_, _, buffered) = self.buffer_summary();
        // A checkpointed segment's estimate counts whole blocks: up to one more at each end of
        // each pivot's range.
        let slack: u64 = self
            .levels
            .iter()
            .flatten()
            .map(|s| 2 * s.run().estimate_slack_bytes() * self.pivots.len() as u64)
            .sum();
        let limit = self.buffer_bound(config) + slack;
        if buffered > limit {
            let kinds: Vec<Vec<bool>> = self
                .levels
                .iter()
                .map(|l| l.iter().map(|s| matches!(s.run(), super::Run::Disk(_))).collect())
                .collect();
            return Err(format!(
                "{buffered} bytes buffered over the bound {limit} ({} pivots, disk segments {kinds:?})",
                self.pivots.len()
            ));
        }
        for child in &self.children {
            if let Subtree::Node(node) = child {
                node.check(config)?;
            }
        }
        Ok(())
    }
}

/// The first level whose merges (about `2^level` batches) run in two halves.
const PARALLEL_MERGE_MIN_LEVEL: usize = 2;

/// The most a node above leaves buffers, as a fraction of its leaves' bytes
/// (`restore_space_bound`): the store then takes about `1 + SPACE_PENDING_FRACTION` times its
/// data in the tree, within the 1.5 with the WAL beside it.
pub const SPACE_PENDING_FRACTION: f64 = 0.3;

/// A level's merged entries as segments of about `leaf_bytes` each, their views side by side
/// from `lower` to `upper`: a run on disk is then at most about a leaf, so the extents a level
/// frees fit the next ones, and a segment whose entries are all flushed leaves on its own.
/// Entries stream from the merge into segment-sized runs (encoded as they come), and once the
/// segments kept in memory pass `config.spill`'s bytes the next ones are written as they are
/// cut: a merge of a node's whole buffer (up to `leaf_bytes · (pivots − 1)`) holds about that
/// much, not all of it.
fn cut_into_segments(
    entries: impl Iterator<Item = Result<(Key, Entry)>>,
    lower: Key,
    upper: Option<Key>,
    config: &ApplyConfig,
) -> Result<Vec<Segment>> {
    let block_bytes = config.run_block_bytes();
    let new_builder = || RunBuilder::new(block_bytes);
    let mut segments = Vec::new();
    let mut chunk = new_builder()?;
    let mut chunk_lower = lower;
    let mut kept_bytes = 0u64;
    let mut segment_of = |chunk: RunBuilder| -> Result<Segment> {
        let run = chunk.finish()?;
        match &config.spill {
            Some(spill) if kept_bytes >= spill.after_bytes => Ok(Segment::of_run(run.persist(&spill.pages)?)),
            _ => {
                kept_bytes += run.memory_bytes();
                Ok(Segment::of_run(run))
            }
        }
    };
    for item in entries {
        let (key, entry) = item?;
        if chunk.entry_bytes() >= config.leaf_bytes {
            let full = std::mem::replace(&mut chunk, new_builder()?);
            segments.push(segment_of(full)?.narrowed(&chunk_lower, Some(&key)));
            chunk_lower = key.clone();
        }
        chunk.add(&key, &entry)?;
    }
    segments.push(segment_of(chunk)?.narrowed(&chunk_lower, upper.as_deref()));
    Ok(segments)
}

/// The segments of a level (views ascending, not overlapping) whose views meet the bounds: a
/// scan opens no run of a segment it cannot read from.
fn segments_within(level: &[Segment], lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> std::ops::Range<usize> {
    let first = match lower {
        Bound::Included(k) | Bound::Excluded(k) => {
            level.partition_point(|s| s.view_upper().is_some_and(|u| u <= k))
        }
        Bound::Unbounded => 0,
    };
    let end = match upper {
        Bound::Included(k) => level.partition_point(|s| s.view_lower() <= k),
        Bound::Excluded(k) => level.partition_point(|s| s.view_lower() < k),
        Bound::Unbounded => level.len(),
    };
    first..end.max(first)
}

fn as_bound(upper: Option<&[u8]>) -> Bound<&[u8]> {
    upper.map_or(Bound::Unbounded, Bound::Excluded)
}

#[cfg(test)]
mod scan_tests {
    use super::*;

    #[test]
    fn a_scan_reaches_only_the_segments_its_bounds_meet() {
        let whole = Segment::of_run(super::super::Run::empty().unwrap());
        let level =
            [whole.narrowed(b"a", Some(b"c")), whole.narrowed(b"c", Some(b"e")), whole.narrowed(b"e", None)];
        let within = |lower, upper| segments_within(&level, lower, upper);
        use Bound::{Excluded, Included, Unbounded};
        assert_eq!(within(Unbounded, Unbounded), 0..3);
        assert_eq!(within(Included(b"d"), Unbounded), 1..3);
        assert_eq!(within(Included(b"c"), Unbounded), 1..3, "a view's upper key is not in it");
        assert_eq!(within(Excluded(b"b"), Excluded(b"c")), 0..1);
        assert_eq!(within(Excluded(b"b"), Included(b"c")), 0..2);
        assert_eq!(within(Included(b"z"), Unbounded), 2..3);
        assert_eq!(within(Included(b"d"), Excluded(b"a")), 1..1, "an inverted range meets none");
    }
}
