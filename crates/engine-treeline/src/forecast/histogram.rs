//! An equi-depth histogram over key projections (the first 8 bytes of a key, big-endian).
//!
//! Partition `k` covers projections `bounds[k] .. bounds[k+1]` (the last one up to and including
//! `u64::MAX`); `bounds[0] == 0`, and bounds are strictly increasing, so the partitions cover the
//! whole key space without overlap. Bounds come from a sorted sample (equi-depth: about as many
//! sampled keys in each partition); duplicate sample values collapse, so heavy keys may leave
//! fewer partitions than asked for.

/// Counters per partition of the key space.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    bounds: Vec<u64>,
    counts: Vec<u64>,
}

/// One past the last projection, as the end of the last partition.
const END: u128 = 1 << 64;

impl Histogram {
    /// `partitions` (>= 1) equi-depth partitions from `sample` (sorted here); an empty sample
    /// gives one partition covering everything.
    pub fn from_sample(sample: &mut [u64], partitions: usize) -> Histogram {
        sample.sort_unstable();
        let mut bounds = vec![0u64];
        let n = sample.len();
        for k in 1..partitions.max(1) {
            if let Some(&b) = sample.get(k * n / partitions) {
                if bounds.last().is_some_and(|&last| b > last) {
                    bounds.push(b);
                }
            }
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
            *c += 1;
        }
    }

    /// Total inserts counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
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
