//! The model stored in a segment's head page and the segment-building rule of TreeLine's
//! reorganization (paper §4.5, Phases II and III).

use super::plr::Plr;
use crate::key_projection::project;
use crate::page::layout::MAX_SEGMENT_PAGES;

/// Maps a key to one of the `pages` base pages of a multi-page segment.
///
/// `page = clamp(floor(intercept + slope · (project(key, prefix_len) − base)), 0, pages − 1)`
/// in binary64 with a saturating subtraction, exactly as docs/format/treeline.md states. The
/// evaluation is monotone in the projection (IEEE rounding is monotone and `slope >= 0`), which is
/// what lets page fences be derived from the model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SegmentModel {
    /// Bytes skipped before projecting a key (the common prefix of the reorganized range).
    pub prefix_len: u16,
    /// Projection the model is relative to (the segment's first record's projection).
    pub base: u64,
    /// Pages per projection unit; finite and >= 0.
    pub slope: f64,
    /// Page position of `base`; finite.
    pub intercept: f64,
    /// The segment's page count, one of 2, 4, 8, 16.
    pub pages: u8,
}

impl SegmentModel {
    /// True when the fields are ones a page may store: finite numbers, a non-negative slope and a
    /// multi-page count.
    pub fn is_well_formed(&self) -> bool {
        self.slope.is_finite()
            && self.slope >= 0.0
            && self.intercept.is_finite()
            && matches!(self.pages, 2 | 4 | 8 | 16)
    }

    /// The page (0..pages) for a key whose projection (after `prefix_len` bytes) is `projection`.
    pub fn page_for(&self, projection: u64) -> usize {
        let dx = projection.saturating_sub(self.base) as f64;
        let position = (self.intercept + self.slope * dx).floor();
        let last = usize::from(self.pages.max(1)) - 1;
        if position.is_nan() || position < 0.0 {
            0
        } else {
            // `as` saturates, so huge positions clamp to the last page too.
            (position as usize).min(last)
        }
    }

    /// The page for a full key.
    pub fn page_for_key(&self, key: &[u8]) -> usize {
        self.page_for(project(key, usize::from(self.prefix_len)))
    }
}

/// Parameters of [`plan_segments`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanConfig {
    /// Target records per page (the paper's *goal*), >= 1.
    pub goal: usize,
    /// Model error bound in records (the paper's *epsilon*), >= 1.
    pub epsilon: u32,
    /// Hard capacity: no page may be assigned more records than this (>= goal).
    pub max_records_per_page: usize,
    /// Bytes skipped before projecting keys: the common prefix of the reorganized key range.
    pub prefix_len: u16,
    /// Largest segment in pages (1 = page grouping off: every segment is one page); at most 16.
    pub max_segment_pages: usize,
}

/// One planned segment: records `first_index .. first_index + record_count` of the input on
/// `page_count` pages, placed by `model` (`None` for a one-page segment).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SegmentPlan {
    pub first_index: usize,
    pub record_count: usize,
    pub page_count: usize,
    pub model: Option<SegmentModel>,
}

impl SegmentPlan {
    /// For each page `k` (0..page_count), the smallest projection the model sends to page `k` or
    /// beyond (`k = 0`: the model base). Strictly increasing for every plan `plan_segments` makes.
    pub fn page_boundaries(&self) -> Vec<u64> {
        let Some(model) = self.model else { return Vec::new() };
        let mut out = vec![model.base];
        for k in 1..self.page_count {
            out.push(first_projection_on_or_after(&model, k).unwrap_or(u64::MAX));
        }
        out
    }

    /// Lower fences of the segment's pages: `segment_lower` for page 0, then the key that
    /// [`crate::key_projection::fence_for_projection`] makes of each boundary, so fences and model
    /// agree on every key. `prefix` is the `prefix_len` bytes every key of the range starts with.
    pub fn page_lower_fences(&self, prefix: &[u8], segment_lower: &[u8]) -> Vec<Vec<u8>> {
        let mut fences = vec![segment_lower.to_vec()];
        for b in self.page_boundaries().into_iter().skip(1) {
            fences.push(crate::key_projection::fence_for_projection(prefix, b));
        }
        fences
    }
}

/// Smallest projection `x >= base` with `page_for(x) >= page`, by binary search (page_for is
/// monotone in `x`); `None` if even `u64::MAX` maps below `page`. The search is bracketed
/// around the model's inverse (`base + (page − intercept) / slope`), which float rounding puts
/// within a few units of the answer, by doubling steps from it: a few `page_for` calls instead
/// of 64 per page (it was an eighth of a 1 KiB bulk load's CPU).
fn first_projection_on_or_after(model: &SegmentModel, page: usize) -> Option<u64> {
    if model.page_for(u64::MAX) < page {
        return None;
    }
    let reaches = |x: u64| model.page_for(x) >= page;
    // Invariant: `reaches(hi)`, and no x in `base .. lo` reaches.
    let (mut lo, mut hi) = bracket(model, page, &reaches);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if reaches(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

/// `(lo, hi)` with `reaches(hi)` and no `x` in `base .. lo` reaching: from the inverse guess,
/// steps of 1, 2, 4, .. down (while the guess reaches) or up (while it does not).
fn bracket(model: &SegmentModel, page: usize, reaches: &dyn Fn(u64) -> bool) -> (u64, u64) {
    let guess = inverse_guess(model, page);
    let mut step = 1u64;
    if reaches(guess) {
        let mut hi = guess;
        loop {
            let below = hi.saturating_sub(step).max(model.base);
            if below == hi || !reaches(below) {
                return (if below == hi { hi } else { below + 1 }, hi);
            }
            hi = below;
            step = step.saturating_mul(2);
        }
    }
    let mut lo = guess;
    loop {
        let above = lo.saturating_add(step);
        if reaches(above) {
            return (lo + 1, above);
        }
        lo = above;
        step = step.saturating_mul(2);
    }
}

/// `base + (page − intercept) / slope`, clamped to `base ..= u64::MAX` (the base itself when the
/// slope is 0 or the numbers are not finite).
fn inverse_guess(model: &SegmentModel, page: usize) -> u64 {
    let offset = (page as f64 - model.intercept) / model.slope;
    if !offset.is_finite() || offset <= 0.0 {
        return model.base;
    }
    // `as` saturates at u64::MAX.
    model.base.saturating_add(offset as u64)
}

/// TreeLine's reorganization Phases II/III as a pure function over the sorted key projections
/// (after `config.prefix_len` bytes) of the reorganization set.
///
/// Repeatedly: if the rest fits one page (`<= goal` records) it becomes a one-page segment.
/// Otherwise records are fed to the PLR with `y` = index in the segment (a run of equal
/// projections as one `add_range`) until the error bound ε would be broken or `16·goal` records
/// are taken; the page count is rounded down to 2, 4, 8 or 16 with `goal` records per page and
/// the leftovers go to the next iteration. The segment's model is re-fitted to exactly its
/// records and rescaled to pages. A candidate is accepted only if, evaluated with the stored
/// model, **no page gets more than `max_records_per_page` records**, the first record is on page
/// 0, the last on the last page, and every page has a non-empty projection range (so its fences
/// are strictly increasing). Otherwise the page count is halved, down to a one-page segment of
/// `goal` records, which always fits. Equal projections never straddle pages inside a segment
/// (a segment ends at a run boundary), though they may straddle segments, which are found by
/// full keys.
pub fn plan_segments(keys: &[u64], config: PlanConfig) -> strata_core::Result<Vec<SegmentPlan>> {
    if config.goal == 0 || config.epsilon == 0 || config.max_records_per_page < config.goal {
        return Err(strata_core::Error::invalid(format!("treeline segment plan: bad parameters {config:?}")));
    }
    if keys.windows(2).any(|w| matches!(w, [a, b] if a > b)) {
        return Err(strata_core::Error::invalid("treeline segment plan: keys are not sorted"));
    }
    let mut plans = Vec::new();
    let mut first = 0;
    while first < keys.len() {
        let rest = keys.get(first..).unwrap_or(&[]);
        let one_page = SegmentPlan {
            first_index: 0,
            record_count: rest.len().min(config.goal),
            page_count: 1,
            model: None,
        };
        let plan = plan_one(rest, config).unwrap_or(one_page);
        plans.push(SegmentPlan { first_index: first, ..plan });
        first += plan.record_count;
    }
    Ok(plans)
}

/// The multi-page segment starting at `keys[0]`, or `None` for a one-page segment.
fn plan_one(keys: &[u64], config: PlanConfig) -> Option<SegmentPlan> {
    if keys.len() <= config.goal || config.max_segment_pages < 2 {
        return None;
    }
    let accepted = records_within_epsilon(keys, config)?;
    let mut pages = config.max_segment_pages.min(MAX_SEGMENT_PAGES);
    while pages >= 2 {
        if pages * config.goal <= accepted {
            if let Some(plan) = try_pages(keys, config, pages) {
                return Some(plan);
            }
        }
        pages /= 2;
    }
    None
}

/// How many leading records (whole runs of equal projections) one model covers within ε,
/// stopping at `16·goal`.
fn records_within_epsilon(keys: &[u64], config: PlanConfig) -> Option<usize> {
    let mut plr = Plr::new(config.epsilon).ok()?;
    let mut taken = 0;
    for (x, run) in runs(keys) {
        let end = taken + run;
        if end > config.max_segment_pages.min(MAX_SEGMENT_PAGES) * config.goal
            || !plr.add_range(x, taken as u64, end as u64 - 1)
        {
            break;
        }
        taken = end;
    }
    Some(taken)
}

/// Runs of equal values: `(value, length)`.
fn runs(keys: &[u64]) -> impl Iterator<Item = (u64, usize)> + '_ {
    keys.chunk_by(|a, b| a == b).filter_map(|run| Some((*run.first()?, run.len())))
}

/// A `pages`-page segment of (up to) `pages·goal` records ending at a run boundary, if its model
/// passes every check listed on [`plan_segments`].
fn try_pages(keys: &[u64], config: PlanConfig, pages: usize) -> Option<SegmentPlan> {
    let mut count = pages * config.goal;
    while count > 0 && count < keys.len() && keys.get(count) == keys.get(count - 1) {
        count -= 1;
    }
    let records = keys.get(..count)?;
    if count <= (pages / 2) * config.goal {
        return None;
    }
    let mut plr = Plr::new(config.epsilon).ok()?;
    let mut y = 0u64;
    for (x, run) in runs(records) {
        if !plr.add_range(x, y, y + run as u64 - 1) {
            return None;
        }
        y += run as u64;
    }
    let line = plr.finish()?;
    let goal = config.goal as f64;
    let model = SegmentModel {
        prefix_len: config.prefix_len,
        base: line.origin,
        slope: line.slope / goal,
        intercept: line.intercept / goal,
        pages: pages as u8,
    };
    let plan = SegmentPlan { first_index: 0, record_count: count, page_count: pages, model: Some(model) };
    model_places_records(&plan, records, config.max_records_per_page).then_some(plan)
}

/// The acceptance checks of a multi-page plan (see [`plan_segments`]).
fn model_places_records(plan: &SegmentPlan, records: &[u64], capacity: usize) -> bool {
    let Some(model) = plan.model else { return false };
    if !model.is_well_formed() {
        return false;
    }
    let mut per_page = [0usize; MAX_SEGMENT_PAGES];
    for &x in records {
        match per_page.get_mut(model.page_for(x)) {
            Some(n) => *n += 1,
            None => return false,
        }
    }
    let boundaries = plan.page_boundaries();
    let first_on_page_0 = records.first().is_some_and(|&x| model.page_for(x) == 0);
    let last_on_last_page = records.last().is_some_and(|&x| model.page_for(x) == plan.page_count - 1);
    first_on_page_0
        && last_on_last_page
        && per_page.iter().all(|&n| n <= capacity)
        && boundaries.windows(2).all(|w| matches!(w, [a, b] if a < b))
}

#[cfg(test)]
#[path = "segment_model_tests.rs"]
mod tests;
