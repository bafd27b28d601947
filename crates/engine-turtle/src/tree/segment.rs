//! A segment of a node's update buffer (paper §3.1.2): a sorted run of entries that never changes,
//! and per pivot the last key flushed to that pivot's child. Flushing removes nothing from the
//! run: it raises the bound, so an entry of pivot `p` with key ≤ `flushed[p]` is gone from this
//! node. Bounds are keyed by the pivot's lower key (stable while other pivots come and go) and
//! only rise. A segment whose every entry is flushed leaves its level.
//!
//! A segment is a *view* of its run: `[view_lower, view_upper)`. A node split gives each half a
//! view of the same run (the run is shared, never copied); entries outside the view do not
//! exist for the node holding it, so a join can put both halves' views side by side in a level.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use strata_core::Key;
use strata_kit::sorted_run::Entry;

use super::entry_bytes;

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct Segment {
    entries: Arc<Vec<(Key, Entry)>>,
    /// `prefix_bytes[i]`: bytes of entries `0..i` (one more element than `entries`).
    prefix_bytes: Arc<Vec<u64>>,
    /// Pivot lower key → last flushed key of that pivot.
    flushed: BTreeMap<Key, Key>,
    /// The view: entries below `view_lower` or at or above `view_upper` are not this segment's.
    view_lower: Key,
    view_upper: Option<Key>,
}

impl Segment {
    /// A segment of `entries` (sorted, keys unique), nothing flushed.
    pub fn new(entries: Vec<(Key, Entry)>) -> Segment {
        let mut prefix_bytes = Vec::with_capacity(entries.len() + 1);
        let mut total = 0u64;
        prefix_bytes.push(0);
        for (key, entry) in &entries {
            total += entry_bytes(key, entry);
            prefix_bytes.push(total);
        }
        Segment {
            entries: Arc::new(entries),
            prefix_bytes: Arc::new(prefix_bytes),
            flushed: BTreeMap::new(),
            view_lower: Key::new(),
            view_upper: None,
        }
    }

    /// This segment narrowed to `[lower, upper)` (within its current view), with the bounds of
    /// pivots outside it dropped.
    pub fn narrowed(&self, lower: &[u8], upper: Option<&[u8]>) -> Segment {
        let mut out = self.clone();
        if lower > out.view_lower.as_slice() {
            out.view_lower = lower.to_vec();
        }
        if let Some(u) = upper {
            if out.view_upper.as_deref().is_none_or(|v| u < v) {
                out.view_upper = Some(u.to_vec());
            }
        }
        let (l, u) = (out.view_lower.clone(), out.view_upper.clone());
        out.flushed.retain(|k, _| k.as_slice() >= l.as_slice() && u.as_ref().is_none_or(|u| k < u));
        out
    }

    /// The index range of the entries inside the view.
    fn view(&self) -> std::ops::Range<usize> {
        let start = self.lower_bound(&self.view_lower);
        let end = self.view_upper.as_deref().map_or(self.entries.len(), |u| self.lower_bound(u));
        start..end.max(start)
    }

    /// The view's lower key (in a level, views ascend and do not overlap).
    pub fn view_lower(&self) -> &[u8] {
        &self.view_lower
    }

    /// Whether `key` lies in the view.
    pub fn in_view(&self, key: &[u8]) -> bool {
        key >= self.view_lower.as_slice() && self.view_upper.as_deref().is_none_or(|u| key < u)
    }

    pub fn entries(&self) -> &[(Key, Entry)] {
        &self.entries
    }

    /// Index of the first entry at or above `key`.
    fn lower_bound(&self, key: &[u8]) -> usize {
        self.entries.partition_point(|(k, _)| k.as_slice() < key)
    }

    /// The entries with keys in `[lower, upper)` (`upper` `None`: no end) not yet flushed to the
    /// pivot whose lower key is `pivot`: their index range.
    pub fn unflushed_in(&self, pivot: &[u8], lower: &[u8], upper: Option<&[u8]>) -> std::ops::Range<usize> {
        let start = match self.flushed.get(pivot) {
            Some(bound) if bound.as_slice() >= lower => self.entries.partition_point(|(k, _)| k <= bound),
            _ => self.lower_bound(lower),
        };
        let end = upper.map_or(self.entries.len(), |u| self.lower_bound(u));
        let view = self.view();
        let (start, end) = (start.max(view.start), end.min(view.end));
        start..end.max(start)
    }

    /// Bytes of `range` (an index range of `unflushed_in`).
    pub fn bytes_of(&self, range: &std::ops::Range<usize>) -> u64 {
        self.prefix_bytes[range.end] - self.prefix_bytes[range.start]
    }

    /// Records that everything of pivot `pivot` up to `key` has been flushed.
    pub fn mark_flushed(&mut self, pivot: &[u8], key: &[u8]) {
        let bound = self.flushed.entry(pivot.to_vec()).or_default();
        if bound.as_slice() < key {
            *bound = key.to_vec();
        }
    }

    /// A pivot whose lower key is `pivot` split at `at`: the part from `at` on is flushed as far
    /// as the old pivot was.
    pub fn split_pivot(&mut self, pivot: &[u8], at: &[u8]) {
        if let Some(bound) = self.flushed.get(pivot).filter(|b| b.as_slice() >= at).cloned() {
            self.flushed.insert(at.to_vec(), bound);
        }
    }

    /// Whether any bound is recorded for pivot `pivot`.
    pub fn has_bound(&self, pivot: &[u8]) -> bool {
        self.flushed.contains_key(pivot)
    }

    /// This segment without the entries flushed to the pivots whose lower keys are in `pivots`
    /// (each with its upper key), and without their bounds: a copy, for a join of pivots (two
    /// bounds cannot become one).
    pub fn without_flushed(&self, pivots: &[(Key, Option<Key>)]) -> Segment {
        let flushed_range = |i: usize| {
            let (key, _) = &self.entries[i];
            pivots.iter().any(|(lower, upper)| {
                key >= lower
                    && upper.as_ref().is_none_or(|u| key < u)
                    && self.flushed.get(lower).is_some_and(|b| key <= b)
            })
        };
        let kept: Vec<(Key, Entry)> =
            self.view().filter(|&i| !flushed_range(i)).map(|i| self.entries[i].clone()).collect();
        let mut segment = Segment::new(kept);
        segment.flushed = self.flushed.clone();
        segment.view_lower = self.view_lower.clone();
        segment.view_upper = self.view_upper.clone();
        for (lower, _) in pivots {
            segment.flushed.remove(lower);
        }
        segment
    }

    /// The entry of `key` unless flushed to the pivot (lower key `pivot`) that holds it.
    pub fn get(&self, pivot: &[u8], key: &[u8]) -> Option<&Entry> {
        let i = self.lower_bound(key);
        let (k, entry) = self.entries.get(i)?;
        if k.as_slice() != key
            || !self.in_view(key)
            || self.flushed.get(pivot).is_some_and(|b| key <= b.as_slice())
        {
            return None;
        }
        Some(entry)
    }

    /// Index range of the entries within `(lower, upper)` bounds.
    pub fn range_of(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> std::ops::Range<usize> {
        let std::ops::Range { start, end } = super::index_range(&self.entries, lower, upper);
        let view = self.view();
        let (start, end) = (start.max(view.start), end.min(view.end));
        start..end.max(start)
    }

    /// Whether entry `i`, in the pivot with lower key `pivot`, is flushed.
    pub fn is_flushed(&self, pivot: &[u8], i: usize) -> bool {
        self.flushed.get(pivot).is_some_and(|b| self.entries[i].0 <= *b)
    }
}
