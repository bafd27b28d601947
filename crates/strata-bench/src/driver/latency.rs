//! Per-operation-type latency histograms (HdrHistogram, nanoseconds, 3 significant digits).

use hdrhistogram::Histogram;

use crate::workload::OpKind;

/// Longest latency recorded exactly; longer ones saturate at this value.
const MAX_TRACKED_NS: u64 = 3_600_000_000_000;

/// One histogram per operation kind that occurred.
#[derive(Clone, Default)]
pub struct LatencySet {
    by_kind: [Option<Histogram<u64>>; 5],
}

impl LatencySet {
    pub fn record(&mut self, kind: OpKind, nanos: u64) {
        let slot = &mut self.by_kind[kind.index()];
        let hist = slot.get_or_insert_with(new_histogram);
        hist.saturating_record(nanos.max(1));
    }

    /// Adds every sample of `other` (merging per-thread sets).
    pub fn merge(&mut self, other: &LatencySet) {
        for kind in OpKind::ALL {
            if let Some(theirs) = &other.by_kind[kind.index()] {
                let mine = self.by_kind[kind.index()].get_or_insert_with(new_histogram);
                // Same bounds on both sides, so adding cannot fail; were it to, samples are dropped
                // rather than the run aborted.
                let _ = mine.add(theirs);
            }
        }
    }

    pub fn get(&self, kind: OpKind) -> Option<&Histogram<u64>> {
        self.by_kind[kind.index()].as_ref()
    }

    /// All operation kinds together.
    pub fn overall(&self) -> Option<Histogram<u64>> {
        let mut all: Option<Histogram<u64>> = None;
        for hist in self.by_kind.iter().flatten() {
            let merged = all.get_or_insert_with(new_histogram);
            let _ = merged.add(hist);
        }
        all
    }

    pub fn kinds(&self) -> impl Iterator<Item = OpKind> + '_ {
        OpKind::ALL.into_iter().filter(|k| self.by_kind[k.index()].is_some())
    }
}

fn new_histogram() -> Histogram<u64> {
    // The bounds are valid constants, so construction cannot fail.
    Histogram::new_with_bounds(1, MAX_TRACKED_NS, 3).expect("constant histogram bounds are valid")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::LatencySummary;

    #[test]
    fn merge_and_percentiles() {
        let mut a = LatencySet::default();
        let mut b = LatencySet::default();
        for i in 1..=1000u64 {
            a.record(OpKind::Read, i * 1000);
            b.record(OpKind::Update, 5_000_000);
        }
        a.merge(&b);
        let read = LatencySummary::of(a.get(OpKind::Read).unwrap());
        assert_eq!(read.count, 1000);
        assert!((read.p50 - 500.0).abs() < 1.0, "{read:?}");
        assert!((read.p99 - 990.0).abs() < 1.0, "{read:?}");
        assert!((read.max - 1000.0).abs() < 1.0, "{read:?}");
        let all = LatencySummary::of(&a.overall().unwrap());
        assert_eq!(all.count, 2000);
        assert!((all.max - 5000.0).abs() < 5.0);
        assert_eq!(a.kinds().collect::<Vec<_>>(), vec![OpKind::Read, OpKind::Update]);
    }
}
