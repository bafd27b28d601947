//! The model stored in a segment's head page and the segment-building rule of TreeLine's
//! reorganization (paper §4.5, Phases II and III).

use crate::key_projection::project;

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
