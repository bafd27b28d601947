//! A segment of a node's update buffer (paper §3.1.2): a sorted run of entries that never changes,
//! and per pivot how far that pivot's entries were flushed to its child. Flushing removes nothing
//! from the run: it raises the bound, so an entry of pivot `p` with key ≤ `flushed[p]` is gone
//! from this node (`Flushed::Whole`: all of them). Bounds are keyed by the pivot's lower key
//! (stable while other pivots come and go) and only rise. A segment whose every entry is flushed
//! leaves its level.
//!
//! A segment is a *view* of its run: `[view_lower, view_upper)`. A node split gives each half a
//! view of the same run (the run is shared, never copied); entries outside the view do not
//! exist for the node holding it, so a join can put both halves' views side by side in a level.

use std::collections::BTreeMap;
use std::ops::Bound;

use strata_core::{Direction, Key, Result};
use strata_kit::sorted_run::{Entry, SourceIter};

use super::run::Run;

/// How far a pivot's entries were flushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Flushed {
    /// Every entry with a key at or below this one.
    Through(Key),
    /// All of them (a flush found none left: a disk run's byte estimate is by whole blocks).
    Whole,
}

impl Flushed {
    fn covers(&self, key: &[u8]) -> bool {
        match self {
            Flushed::Through(bound) => key <= bound.as_slice(),
            Flushed::Whole => true,
        }
    }
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct Segment {
    run: Run,
    /// Pivot lower key → how far that pivot was flushed.
    flushed: BTreeMap<Key, Flushed>,
    /// The view: entries below `view_lower` or at or above `view_upper` are not this segment's.
    view_lower: Key,
    view_upper: Option<Key>,
}

/// The higher of two lower bounds.
pub(super) fn max_lower<'a>(a: Bound<&'a [u8]>, b: Bound<&'a [u8]>) -> Bound<&'a [u8]> {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x,
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.max(y)),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.max(y)),
        (Bound::Included(i), Bound::Excluded(e)) | (Bound::Excluded(e), Bound::Included(i)) => {
            if i > e {
                Bound::Included(i)
            } else {
                Bound::Excluded(e)
            }
        }
    }
}

/// The lower of two upper bounds.
pub(super) fn min_upper<'a>(a: Bound<&'a [u8]>, b: Bound<&'a [u8]>) -> Bound<&'a [u8]> {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x,
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.min(y)),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.min(y)),
        (Bound::Included(i), Bound::Excluded(e)) | (Bound::Excluded(e), Bound::Included(i)) => {
            if i < e {
                Bound::Included(i)
            } else {
                Bound::Excluded(e)
            }
        }
    }
}

impl Segment {
    /// A segment of `entries` (sorted, keys unique) in blocks of `block_bytes`, nothing flushed.
    pub fn new(entries: Vec<(Key, Entry)>, block_bytes: usize) -> Result<Segment> {
        Ok(Segment::of_run(Run::memory(entries, block_bytes)?))
    }

    /// A segment of all of `run`, nothing flushed.
    pub fn of_run(run: Run) -> Segment {
        Segment::from_parts(run, BTreeMap::new(), Key::new(), None)
    }

    /// A segment as a node page describes it.
    pub fn from_parts(
        run: Run,
        flushed: BTreeMap<Key, Flushed>,
        view_lower: Key,
        view_upper: Option<Key>,
    ) -> Segment {
        Segment { run, flushed, view_lower, view_upper }
    }

    pub fn run(&self) -> &Run {
        &self.run
    }

    pub fn flushed(&self) -> &BTreeMap<Key, Flushed> {
        &self.flushed
    }

    pub fn view_upper(&self) -> Option<&[u8]> {
        self.view_upper.as_deref()
    }

    /// This segment narrowed to `[lower, upper)` (within its current view), with the bounds of
    /// pivots starting at or past its end dropped.
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
        // A pivot that starts below the view may still reach into it (a level's segments are
        // cut inside pivots): only pivots starting at or past the view's end are dropped. A
        // bound kept for a pivot of another node never applies: that pivot's range ends before
        // the view starts.
        let upper = out.view_upper.clone();
        out.flushed.retain(|k, _| upper.as_ref().is_none_or(|u| k < u));
        out
    }

    /// The view's lower key (in a level, views ascend and do not overlap).
    pub fn view_lower(&self) -> &[u8] {
        &self.view_lower
    }

    /// Whether `key` lies in the view.
    pub fn in_view(&self, key: &[u8]) -> bool {
        key >= self.view_lower.as_slice() && self.view_upper.as_deref().is_none_or(|u| key < u)
    }

    /// The bounds narrowed to the view.
    pub fn within_view<'a>(
        &'a self,
        lower: Bound<&'a [u8]>,
        upper: Bound<&'a [u8]>,
    ) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
        let view_upper = self.view_upper.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        (max_lower(lower, Bound::Included(&self.view_lower)), min_upper(upper, view_upper))
    }

    /// Bytes of the entries in `[lower, upper)` (`upper` `None`: no end) not yet flushed to the
    /// pivot whose lower key is `pivot` (zero only when there are none).
    pub fn unflushed_bytes(&self, pivot: &[u8], lower: &[u8], upper: Option<&[u8]>) -> u64 {
        let start = match self.flushed.get(pivot) {
            Some(Flushed::Whole) => return 0,
            Some(Flushed::Through(bound)) if bound.as_slice() >= lower => Bound::Excluded(bound.as_slice()),
            _ => Bound::Included(lower),
        };
        let (start, end) = self.within_view(start, upper.map_or(Bound::Unbounded, Bound::Excluded));
        self.run.bytes_between(start, end)
    }

    /// Bytes of the run within the view (`bytes_between`), flushed entries included: what the
    /// segment keeps on disk or in memory.
    pub fn view_bytes(&self) -> u64 {
        let upper = self.view_upper.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        self.run.bytes_between(Bound::Included(&self.view_lower), upper)
    }

    /// Records that everything of pivot `pivot` up to `key` has been flushed.
    pub fn mark_flushed(&mut self, pivot: &[u8], key: &[u8]) {
        let bound = self.flushed.entry(pivot.to_vec()).or_insert_with(|| Flushed::Through(Key::new()));
        if let Flushed::Through(b) = bound {
            if b.as_slice() < key {
                *b = key.to_vec();
            }
        }
    }

    /// Records that nothing of pivot `pivot` is left here.
    pub fn mark_whole(&mut self, pivot: &[u8]) {
        self.flushed.insert(pivot.to_vec(), Flushed::Whole);
    }

    /// A pivot whose lower key is `pivot` split at `at`: the part from `at` on is flushed as far
    /// as the old pivot was.
    pub fn split_pivot(&mut self, pivot: &[u8], at: &[u8]) {
        let inherited = match self.flushed.get(pivot) {
            Some(Flushed::Whole) => Flushed::Whole,
            Some(Flushed::Through(b)) if b.as_slice() >= at => Flushed::Through(b.clone()),
            _ => return,
        };
        self.flushed.insert(at.to_vec(), inherited);
    }

    /// Whether any bound is recorded for pivot `pivot`.
    pub fn has_bound(&self, pivot: &[u8]) -> bool {
        self.flushed.contains_key(pivot)
    }

    /// Whether `key`, held by the pivot whose lower key is `pivot`, is flushed.
    pub fn is_flushed(&self, pivot: &[u8], key: &[u8]) -> bool {
        self.flushed.get(pivot).is_some_and(|f| f.covers(key))
    }

    /// This segment without the entries flushed to the pivots whose lower keys are in `pivots`
    /// (each with its upper key), and without their bounds: a copy, for a join of pivots (two
    /// bounds cannot become one), in blocks of `block_bytes`.
    pub fn without_flushed(&self, pivots: &[(Key, Option<Key>)], block_bytes: usize) -> Result<Segment> {
        let flushed = |key: &[u8]| {
            pivots.iter().any(|(lower, upper)| {
                key >= lower.as_slice()
                    && upper.as_deref().is_none_or(|u| key < u)
                    && self.is_flushed(lower, key)
            })
        };
        let mut kept = Vec::new();
        for item in self.iter(Bound::Unbounded, Bound::Unbounded, Direction::Forward) {
            let (key, entry) = item?;
            if !flushed(&key) {
                kept.push((key, entry));
            }
        }
        let mut segment = Segment::new(kept, block_bytes)?;
        segment.flushed = self.flushed.clone();
        segment.view_lower = self.view_lower.clone();
        segment.view_upper = self.view_upper.clone();
        for (lower, _) in pivots {
            segment.flushed.remove(lower);
        }
        Ok(segment)
    }

    /// The entry of `key` unless flushed to the pivot (lower key `pivot`) that holds it.
    pub fn get(&self, pivot: &[u8], key: &[u8]) -> Result<Option<Entry>> {
        if !self.in_view(key) || self.is_flushed(pivot, key) {
            return Ok(None);
        }
        self.run.get(key)
    }

    /// The view's entries within the bounds (flushed ones included: the node knows each key's
    /// pivot), in `direction`.
    pub fn iter<'a>(
        &'a self,
        lower: Bound<&'a [u8]>,
        upper: Bound<&'a [u8]>,
        direction: Direction,
    ) -> SourceIter<'a> {
        let (lower, upper) = self.within_view(lower, upper);
        self.run.iter(lower, upper, direction)
    }

    /// The segment's run becomes its written copy, if a checkpoint wrote it.
    pub fn install_written(&mut self) {
        self.run = self.run.written();
    }
}
