//! Optimal streaming piecewise-linear regression with maximum error ±ε (O'Rourke 1981; Xie et
//! al. 2014, "maximum error-bounded piecewise linear approximation"), the algorithm the PGM index
//! implements as `OptimalPiecewiseLinearModel` and TreeLine uses in reorganization Phase II.
//!
//! Points `(x, y)` arrive with strictly increasing `x`. Each point asks for a line within `ε` of
//! it, i.e. a line passing below its *upper* point `(x, y + ε)` and above its *lower* point
//! `(x, y − ε)`. The feasible lines form a convex region; it is tracked by
//! * the lower convex chain of the upper points and the upper convex chain of the lower points
//!   (only hull vertices can constrain a line), and
//! * the two extreme feasible lines: the minimum-slope line through `rect[0]` (an upper point) and
//!   `rect[2]` (a lower point), and the maximum-slope line through `rect[1]` (a lower point) and
//!   `rect[3]` (an upper point).
//!
//! A new point is coverable exactly when its upper point is not below the minimum-slope line and
//! its lower point is not above the maximum-slope line; otherwise [`Plr::add_point`] returns
//! `false` and leaves the state as it was, so [`Plr::finish`] still describes the points accepted.
//! Feeding points greedily and starting a new `Plr` at each rejected point yields the fewest
//! segments (each segment is maximal, and feasibility is inherited by sub-ranges).
//!
//! **Exactness.** All geometry is exact integer arithmetic in `i128`: `x` is taken relative to the
//! segment's first `x` (< 2^64), `y` is scaled by [`SCALE`] and bounded by [`MAX_Y`], so every
//! product is below 2^106. The fit uses the error bound `ε − 1/SCALE` (scaled: `ε·SCALE − 1`),
//! which leaves `1/SCALE` of slack for rounding when the model is evaluated in `f64`
//! (that rounding is below 2^-15 for `y <= MAX_Y`), so `|model(x_i) − y_i| <= ε` holds for every
//! accepted point *as evaluated in floating point*. The only sets this loses are those needing
//! error in `(ε − 1/256, ε]`; the optimality test uses the same bound.
//!
//! **Equal `x`.** TreeLine feeds key projections, which repeat when keys agree on their first 8
//! bytes after the prefix. A repeated or smaller `x` is refused (`false`) — it is not a new point.
//! Callers collapse a run of equal projections into one [`Plr::add_range`] call with the run's
//! `y` range (indexes `y_lo..=y_hi`), which asks for a prediction within `ε` of every index of the
//! run; the segment planner does this.

use strata_core::{Error, Result};

/// Scale applied to `y` (and `ε`) so the fit can reserve `1/SCALE` of the error for rounding.
pub const SCALE: i128 = 256;
/// Largest `y` accepted (a segment never holds anywhere near 2^32 records).
pub const MAX_Y: u64 = 1 << 32;

/// A fitted line, relative to the segment's first `x`:
/// `predict(x) = intercept + slope · (x − origin)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearModel {
    pub slope: f64,
    pub intercept: f64,
    /// The first `x` fed; the model's `x` axis starts here.
    pub origin: u64,
}

impl LinearModel {
    /// The prediction at `x` (`x` below the origin counts as the origin).
    pub fn predict(&self, x: u64) -> f64 {
        self.intercept + self.slope * x.saturating_sub(self.origin) as f64
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Point {
    /// `x − origin`.
    x: i128,
    /// Scaled `y ± ε`.
    y: i128,
}

/// `(b − a)` as a direction; compared by slope. Callers only compare directions with `dx > 0`.
#[derive(Clone, Copy, Debug)]
struct Dir {
    dx: i128,
    dy: i128,
}

fn dir(a: Point, b: Point) -> Dir {
    Dir { dx: b.x - a.x, dy: b.y - a.y }
}

/// slope(a) < slope(b), for directions with positive `dx`.
fn flatter(a: Dir, b: Dir) -> bool {
    a.dy * b.dx < b.dy * a.dx
}

/// Cross product of `a − o` and `b − o`: > 0 when `o, a, b` turn counter-clockwise.
fn cross(o: Point, a: Point, b: Point) -> i128 {
    let (oa, ob) = (dir(o, a), dir(o, b));
    oa.dx * ob.dy - oa.dy * ob.dx
}

/// Streaming builder of one segment of the optimal piecewise-linear approximation.
#[derive(Clone, Debug)]
pub struct Plr {
    /// Scaled error bound `ε·SCALE − 1`.
    eps: i128,
    origin: u64,
    last_x: u64,
    points: usize,
    /// Lower convex chain of the upper points; `upper[upper_start..]` is still relevant.
    upper: Vec<Point>,
    upper_start: usize,
    /// Upper convex chain of the lower points.
    lower: Vec<Point>,
    lower_start: usize,
    rect: [Point; 4],
}

impl Plr {
    /// A builder with error bound `epsilon` (>= 1; see the module doc for the `1/SCALE` slack).
    pub fn new(epsilon: u32) -> Result<Plr> {
        if epsilon == 0 {
            return Err(Error::invalid("treeline PLR epsilon must be at least 1"));
        }
        Ok(Plr {
            eps: i128::from(epsilon) * SCALE - 1,
            origin: 0,
            last_x: 0,
            points: 0,
            upper: Vec::new(),
            upper_start: 0,
            lower: Vec::new(),
            lower_start: 0,
            rect: [Point::default(); 4],
        })
    }

    /// Number of points accepted.
    pub fn len(&self) -> usize {
        self.points
    }

    pub fn is_empty(&self) -> bool {
        self.points == 0
    }

    /// Forgets all points, keeping ε.
    pub fn reset(&mut self) {
        self.points = 0;
        self.upper.clear();
        self.lower.clear();
        self.upper_start = 0;
        self.lower_start = 0;
    }

    /// Adds `(x, y)`; `false` when no line within ε covers it together with the points so far
    /// (or `x` does not increase, or `y > MAX_Y`). A refused point changes nothing.
    pub fn add_point(&mut self, x: u64, y: u64) -> bool {
        self.add_range(x, y, y)
    }

    /// Adds a point at `x` that must be predicted within ε of every `y` in `y_lo..=y_hi` (a run
    /// of records sharing one key projection). Refused like [`Plr::add_point`], and also when
    /// `y_hi − y_lo` exceeds what `2ε` can span.
    pub fn add_range(&mut self, x: u64, y_lo: u64, y_hi: u64) -> bool {
        if y_lo > y_hi || y_hi > MAX_Y || (self.points > 0 && x <= self.last_x) {
            return false;
        }
        let origin = if self.points == 0 { x } else { self.origin };
        let px = i128::from(x - origin);
        let up = Point { x: px, y: i128::from(y_lo) * SCALE + self.eps };
        let lo = Point { x: px, y: i128::from(y_hi) * SCALE - self.eps };
        if up.y < lo.y {
            return false;
        }
        match self.points {
            0 => {
                self.origin = x;
                self.rect = [up, lo, up, lo];
                self.upper.push(up);
                self.lower.push(lo);
            }
            1 => {
                self.rect[2] = lo;
                self.rect[3] = up;
                self.upper.push(up);
                self.lower.push(lo);
            }
            _ => {
                if !self.covers(up, lo) {
                    return false;
                }
                self.tighten(up, lo);
            }
        }
        self.last_x = x;
        self.points += 1;
        true
    }

    /// Whether a new point (upper `up`, lower `lo`) keeps the feasible region non-empty.
    fn covers(&self, up: Point, lo: Point) -> bool {
        let [r0, r1, r2, r3] = self.rect;
        let min_line = dir(r0, r2);
        let max_line = dir(r1, r3);
        // `up` below the minimum-slope line, or `lo` above the maximum-slope line: no line fits.
        let up_below = flatter(dir(r2, up), min_line);
        let lo_above = flatter(max_line, dir(r3, lo));
        !(up_below || lo_above)
    }

    /// Narrows the extreme lines and extends the hull chains with a covered point.
    fn tighten(&mut self, up: Point, lo: Point) {
        let [_, r1, _, _] = self.rect;
        if flatter(dir(r1, up), dir(r1, self.rect[3])) {
            // `up` lowers the maximum slope: the new maximum-slope line touches `up` and the
            // lower-chain vertex minimizing slope(vertex → up) (unimodal along the convex chain).
            let i = extreme_index(&self.lower, self.lower_start, |a, b| !flatter(dir(a, up), dir(b, up)));
            self.rect[1] = self.lower.get(i).copied().unwrap_or(r1);
            self.rect[3] = up;
            self.lower_start = i;
            push_convex(&mut self.upper, self.upper_start, up, |c| c <= 0);
        }
        let [r0, _, _, _] = self.rect;
        if flatter(dir(r0, self.rect[2]), dir(r0, lo)) {
            // `lo` raises the minimum slope: symmetric, on the upper chain. The chain's last
            // vertex may be `up` at the same x; it cannot constrain a line through `lo`, so the
            // search stops before it.
            let end = self.upper.len() - usize::from(self.upper.last().is_some_and(|p| p.x == lo.x));
            let chain = self.upper.get(..end).unwrap_or(&[]);
            let i = extreme_index(chain, self.upper_start, |a, b| !flatter(dir(b, lo), dir(a, lo)));
            self.rect[0] = chain.get(i).copied().unwrap_or(r0);
            self.rect[2] = lo;
            self.upper_start = i;
            push_convex(&mut self.lower, self.lower_start, lo, |c| c >= 0);
        }
    }

    /// The model of the points accepted so far; `None` before the first point.
    ///
    /// The line is the average of the two extreme feasible lines (feasible, since the region is
    /// convex). If that average has a negative slope while slope 0 is feasible (always the case
    /// for non-decreasing `y`), the horizontal line through the middle of the region is used
    /// instead, so models of sorted records are monotone.
    pub fn finish(&self) -> Option<LinearModel> {
        let s = SCALE as f64;
        let [r0, r1, r2, r3] = self.rect;
        match self.points {
            0 => None,
            1 => Some(LinearModel {
                slope: 0.0,
                intercept: (r0.y + r1.y) as f64 / 2.0 / s,
                origin: self.origin,
            }),
            _ => {
                let (min_line, max_line) = (dir(r0, r2), dir(r1, r3));
                let sum_negative = min_line.dy * max_line.dx + max_line.dy * min_line.dx < 0;
                if sum_negative && max_line.dy >= 0 {
                    return Some(LinearModel {
                        slope: 0.0,
                        intercept: self.flat_intercept() / s,
                        origin: self.origin,
                    });
                }
                let (s1, b1) = line_at_origin(r0, min_line);
                let (s2, b2) = line_at_origin(r1, max_line);
                Some(LinearModel {
                    slope: (s1 + s2) / 2.0 / s,
                    intercept: (b1 + b2) / 2.0 / s,
                    origin: self.origin,
                })
            }
        }
    }

    /// Midpoint of the feasible intercepts of the horizontal line: between the highest lower
    /// point and the lowest upper point (both are hull vertices).
    fn flat_intercept(&self) -> f64 {
        let top_of_lower = self.lower.iter().map(|p| p.y).max().unwrap_or(0);
        let bottom_of_upper = self.upper.iter().map(|p| p.y).min().unwrap_or(0);
        (top_of_lower + bottom_of_upper) as f64 / 2.0
    }
}

/// Slope and value at x = 0 (scaled units) of the line through `p` with direction `d` (`dx > 0`).
/// The value is computed exactly as the rational `(p.y·dx − d.dy·p.x) / dx` before rounding.
fn line_at_origin(p: Point, d: Dir) -> (f64, f64) {
    let dx = d.dx as f64;
    (d.dy as f64 / dx, (p.y * d.dx - d.dy * p.x) as f64 / dx)
}

/// Walks `chain[start..]` while `better(current_best, next)` holds (ties advance, as in PGM) and returns the last index:
/// along a convex chain the slopes to an outside point are unimodal, so the first non-improvement
/// ends the search (as in O'Rourke's algorithm).
fn extreme_index(chain: &[Point], start: usize, better: impl Fn(Point, Point) -> bool) -> usize {
    let mut best = start;
    let mut i = start + 1;
    while let (Some(&b), Some(&n)) = (chain.get(best), chain.get(i)) {
        if !better(b, n) {
            break;
        }
        best = i;
        i += 1;
    }
    best
}

/// Appends `p` to a convex chain, first removing trailing vertices (not before `start`) that
/// `p` makes non-convex: while `pop(cross(chain[end−2], chain[end−1], p))`.
fn push_convex(chain: &mut Vec<Point>, start: usize, p: Point, pop: impl Fn(i128) -> bool) {
    while chain.len() >= start + 2 {
        let n = chain.len();
        match (chain.get(n - 2), chain.get(n - 1)) {
            (Some(&a), Some(&b)) if pop(cross(a, b, p)) => {
                chain.pop();
            }
            _ => break,
        }
    }
    chain.push(p);
}

#[cfg(test)]
#[path = "plr_tests.rs"]
mod tests;
