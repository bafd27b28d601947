//! A histogram of inserts over key projections (the first 8 bytes after the key map's prefix,
//! big-endian).
//!
//! Partition `k` covers projections `bounds[k] .. bounds[k+1]` (the last one up to and including
//! `u64::MAX`); `bounds[0] == 0`, and bounds are strictly increasing, so the partitions cover the
//! whole key space without overlap. An estimate spreads a partition's count evenly over its
//! width, so the bounds decide what the histogram can tell apart.
//!
//! The paper (§4.6) puts equi-depth bounds at sample keys. Where inserts come in tight clusters
//! (a few hot spots, each far narrower than a page) such a bound falls inside a cluster and its
//! partition runs on to the next cluster, so its count is spread over all the cold key space in
//! between: in the bench's clustered shape the pages holding a hot spot were forecast a quarter
//! of their inserts and the cold pages beside them a share as large (`forecast/tests.rs`,
//! `clustered_inserts_are_forecast_on_their_pages_not_between_them`). So the bounds follow the
//! sample's shape instead: the sample is cut into groups at its breaks (gaps far wider than its
//! median gap), groups larger than the equi-depth size are split evenly, and each group becomes
//! a *dense* partition over its keys, padded by the group's mean key spacing on each side (where
//! the next keys are likely to land) but never past halfway to the next group, followed by a
//! *gap* partition up to the next group. For evenly spread keys there are no breaks and the
//! groups are equi-depth, so the estimate is about the paper's; for clustered keys each cluster
//! gets its own partitions and the gaps count what lands in them.

/// Counters per partition of the key space.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    bounds: Vec<u64>,
    counts: Vec<u64>,
}

/// One past the last projection, as the end of the last partition.
const END: u128 = 1 << 64;

impl Histogram {
    /// Bounds from `sample` (sorted here) for about `partitions` (>= 1) groups of sample keys:
    /// fewer than `2·partitions` dense partitions (`group_ranges`), each with at most one gap
    /// partition after it (where groups lie close, their padded spans meet and there is none).
    /// An empty sample gives one partition covering everything.
    pub fn from_sample(sample: &mut [u64], partitions: usize) -> Histogram {
        sample.sort_unstable();
        let mut bounds = vec![0u64];
        let groups = group_ranges(sample, partitions.max(1));
        let mut previous_last: Option<u64> = None;
        for (g, range) in groups.iter().enumerate() {
            let Some(keys) = sample.get(range.clone()) else { continue };
            let (Some(&first), Some(&last)) = (keys.first(), keys.last()) else { continue };
            let next_first = groups.get(g + 1).and_then(|r| sample.get(r.start)).copied();
            let (lower, upper_exclusive) = dense_span(first, last, keys.len(), previous_last, next_first);
            for bound in [Some(lower), upper_exclusive].into_iter().flatten() {
                if bounds.last().is_some_and(|&b| bound > b) {
                    bounds.push(bound);
                }
            }
            previous_last = Some(last);
        }
        let counts = vec![0; bounds.len()];
        Histogram { bounds, counts }
    }

    /// A histogram from stored parts: `None` unless the bounds start at 0 and strictly increase
    /// and there is one count per bound.
    pub fn from_parts(bounds: Vec<u64>, counts: Vec<u64>) -> Option<Histogram> {
        let ok = bounds.first() == Some(&0)
            && bounds.iter().zip(bounds.iter().skip(1)).all(|(a, b)| a < b)
            && bounds.len() == counts.len();
        ok.then_some(Histogram { bounds, counts })
    }

    /// Inserts counted per partition.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    pub fn partitions(&self) -> usize {
        self.bounds.len()
    }

    /// Lower bounds of the partitions.
    pub fn bounds(&self) -> &[u64] {
        &self.bounds
    }

    /// Counts one insert of a key with this projection (`O(log b)`).
    pub fn record(&mut self, projection: u64) {
        let k = self.partition_of(projection);
        if let Some(c) = self.counts.get_mut(k) {
            // Saturating: counts come from the forecast file too, which may be damaged.
            *c = c.saturating_add(1);
        }
    }

    /// Total inserts counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0u64, |sum, &c| sum.saturating_add(c))
    }

    fn partition_of(&self, projection: u64) -> usize {
        self.bounds.partition_point(|&b| b <= projection).saturating_sub(1)
    }

    fn end_of(&self, k: usize) -> u128 {
        self.bounds.get(k + 1).map_or(END, |&b| u128::from(b))
    }

    /// Estimated inserts into `lower .. upper_exclusive` (`None`: to the end of the key space):
    /// whole counts of covered partitions plus, for partially covered ones, the count scaled by
    /// the covered fraction of the partition's projection width (linear interpolation).
    pub fn estimate(&self, lower: u64, upper_exclusive: Option<u64>) -> f64 {
        let (lo, hi) = (u128::from(lower), upper_exclusive.map_or(END, u128::from));
        let mut sum = 0.0;
        let mut k = self.partition_of(lower);
        while let (Some(&start), Some(&count)) = (self.bounds.get(k), self.counts.get(k)) {
            let (start, end) = (u128::from(start), self.end_of(k));
            if start >= hi {
                break;
            }
            let covered = end.min(hi).saturating_sub(start.max(lo));
            if covered > 0 && count > 0 {
                sum += count as f64 * (covered as f64 / (end - start) as f64);
            }
            k += 1;
        }
        sum
    }
}

/// A gap between sample keys this many times the median gap is a break between groups.
const BREAK_GAP_TO_MEDIAN: u64 = 16;

/// The sorted sample cut into groups of keys: first at its breaks (gaps at least
/// `BREAK_GAP_TO_MEDIAN` times the median gap; the widest `partitions - 1` of them), then every
/// group of more than the equi-depth size `n / partitions` split into even parts (cutting only
/// between distinct keys, so equal keys stay in one group). Evenly spread keys have no breaks
/// and get equi-depth groups; keys in clusters get a group (or more) per cluster.
fn group_ranges(sorted: &[u64], partitions: usize) -> Vec<std::ops::Range<usize>> {
    if sorted.is_empty() {
        return Vec::new();
    }
    let cuts = break_cuts(sorted, partitions);
    let max_group = sorted.len().div_ceil(partitions).max(1);
    let mut groups = Vec::new();
    let mut start = 0;
    for end in cuts.into_iter().chain([sorted.len()]) {
        split_evenly(sorted, start..end, max_group, &mut groups);
        start = end;
    }
    groups
}

/// Where the sorted sample breaks (ascending positions): its widest gaps of at least
/// `BREAK_GAP_TO_MEDIAN` times the median gap, at most `partitions - 1` of them. The gaps
/// (16 bytes per sample key, the largest temporary of an epoch's end) are freed on return,
/// before the groups are built.
fn break_cuts(sorted: &[u64], partitions: usize) -> Vec<usize> {
    let mut gaps: Vec<(u64, usize)> = sorted
        .iter()
        .zip(sorted.iter().skip(1))
        .enumerate()
        .filter(|(_, (a, b))| b > a)
        .map(|(i, (a, b))| (b - a, i + 1))
        .collect();
    let middle = gaps.len() / 2;
    let median = if gaps.is_empty() { 0 } else { gaps.select_nth_unstable_by_key(middle, |g| g.0).1 .0 };
    gaps.retain(|&(width, _)| width / BREAK_GAP_TO_MEDIAN >= median.max(1));
    let breaks = (partitions - 1).min(gaps.len());
    if breaks < gaps.len() {
        gaps.select_nth_unstable_by(breaks, |a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    }
    let mut cuts: Vec<usize> = gaps.iter().take(breaks).map(|&(_, at)| at).collect();
    cuts.sort_unstable();
    cuts
}

/// Pushes `range` as groups of at most about `max_group` keys, cut only between distinct keys.
fn split_evenly(
    sorted: &[u64],
    range: std::ops::Range<usize>,
    max_group: usize,
    out: &mut Vec<std::ops::Range<usize>>,
) {
    let parts = range.len().div_ceil(max_group).max(1);
    let mut start = range.start;
    for p in 1..parts {
        let mut cut = range.start + p * range.len() / parts;
        while cut < range.end && cut > start && sorted.get(cut) == sorted.get(cut - 1) {
            cut += 1;
        }
        if cut > start && cut < range.end {
            out.push(start..cut);
            start = cut;
        }
    }
    out.push(start..range.end);
}

/// A group's dense partition: `first ..= last` padded by the group's mean key spacing on each
/// side, but not past halfway to the neighbouring groups. The upper end is `None` when it would
/// be the end of the key space.
fn dense_span(
    first: u64,
    last: u64,
    keys: usize,
    previous_last: Option<u64>,
    next_first: Option<u64>,
) -> (u64, Option<u64>) {
    let spacing = if keys > 1 { (last - first) / (keys as u64 - 1) } else { 0 };
    let floor = previous_last.map_or(0, |p| p + (first - p) / 2 + 1);
    let lower = first.saturating_sub(spacing).max(floor).min(first);
    let ceiling =
        next_first.map_or(u128::from(u64::MAX) + 1, |n| u128::from(last) + u128::from(n - last) / 2 + 1);
    let upper = (u128::from(last) + u128::from(spacing) + 1).min(ceiling).max(u128::from(last) + 1);
    (lower, u64::try_from(upper).ok())
}
