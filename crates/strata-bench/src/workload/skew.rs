//! The measured skew of a trace: which share of the operations the most-accessed 1%, 10% and
//! 18% of the keys got. Every report prints it, so a reader sees how skewed a run was without
//! trusting a distribution's name (YCSB's scrambled zipfian at 20M keys gives its top 18% ~71%;
//! the plain zipfian the F2 paper describes gives them ~89%).
//!
//! Traces are deterministic, so the skew is measured by replaying each thread's trace for as many
//! operations as that thread ran, without an engine. Every operation counts once for the key it
//! targets (a scan for its start key, an insert for its new key); the key population is the
//! loaded records plus the inserts made up to the end of the phase.

use serde::Serialize;

use super::choosers::Distribution;
use super::trace::{ThreadTrace, TraceParams};
use super::Workload;

/// The key fractions every report gives a share for.
pub const TOP_KEY_FRACTIONS: [f64; 3] = [0.01, 0.10, 0.18];

/// The skew of one run phase's trace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skew {
    pub workload: String,
    pub distribution: String,
    /// Operations replayed (all threads).
    pub ops: u64,
    /// Keys that existed by the end of the phase (loaded + inserted).
    pub keys: u64,
    /// Keys that at least one operation touched.
    pub keys_touched: u64,
    /// `(fraction of keys, fraction of operations)` for each of [`TOP_KEY_FRACTIONS`].
    pub top_shares: Vec<(f64, f64)>,
}

impl Skew {
    /// `top 1% / 10% / 18% of keys got 40.1% / 71.2% / 80.3% of operations`.
    pub fn describe(&self) -> String {
        let keys: Vec<String> = self.top_shares.iter().map(|(k, _)| percent(*k)).collect();
        let ops: Vec<String> = self.top_shares.iter().map(|(_, o)| format!("{:.1}%", o * 100.0)).collect();
        format!("top {} of keys got {} of operations", keys.join(" / "), ops.join(" / "))
    }
}

fn percent(fraction: f64) -> String {
    format!("{}%", (fraction * 100.0 * 10.0).round() / 10.0)
}

/// One phase to replay: the workload, its distribution and each thread's op count.
pub struct PhaseReplay<'a> {
    pub phase: u32,
    pub workload: &'a Workload,
    pub distribution: Distribution,
    pub ops_by_thread: &'a [u64],
    /// Each thread's op count hint as the run passed it (`None` for `--duration` runs).
    pub ops_hint: Option<u64>,
}

/// Replays `phases` in order (earlier phases' inserts carry over) and measures each one's skew.
pub fn measure(params: &TraceParams, phases: &[PhaseReplay<'_>]) -> Vec<Skew> {
    let threads = params.threads as usize;
    let mut own_inserts = vec![0u64; threads];
    let mut skews = Vec::new();
    for replay in phases {
        let mut counts: Vec<u32> = vec![0; params.records as usize];
        let mut ops = 0u64;
        for (t, &thread_ops) in replay.ops_by_thread.iter().enumerate().take(threads) {
            let hint = replay.ops_hint.map(|_| thread_ops);
            let mut trace = ThreadTrace::new(
                params,
                replay.phase,
                t as u32,
                replay.workload,
                replay.distribution,
                own_inserts[t],
                hint,
            );
            for _ in 0..thread_ops {
                let keynum = trace.next_op().keynum as usize;
                if keynum >= counts.len() {
                    counts.resize(keynum + 1, 0);
                }
                counts[keynum] = counts[keynum].saturating_add(1);
            }
            ops += thread_ops;
            own_inserts[t] = trace.own_inserts();
        }
        let keys = params.records + own_inserts.iter().sum::<u64>();
        let top_shares = top_shares(&counts, keys, ops);
        skews.push(Skew {
            workload: replay.workload.name.clone(),
            distribution: replay.distribution.name().to_string(),
            ops,
            keys,
            keys_touched: counts.iter().filter(|&&c| c > 0).count() as u64,
            top_shares,
        });
    }
    skews
}

/// For each of [`TOP_KEY_FRACTIONS`]: the share of `ops` the most-accessed `fraction × keys` keys
/// got. Walks a histogram of access counts from the highest down (no sort of the keys).
pub fn top_shares(counts: &[u32], keys: u64, ops: u64) -> Vec<(f64, f64)> {
    let mut by_count: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    for &c in counts.iter().filter(|&&c| c > 0) {
        *by_count.entry(c).or_default() += 1;
    }
    TOP_KEY_FRACTIONS
        .iter()
        .map(|&fraction| {
            let mut budget = ((keys as f64 * fraction).round() as u64).max(1);
            let mut hits = 0u64;
            for (&count, &how_many) in by_count.iter().rev() {
                let take = how_many.min(budget);
                hits += take * u64::from(count);
                budget -= take;
                if budget == 0 {
                    break;
                }
            }
            (fraction, if ops == 0 { 0.0 } else { hits as f64 / ops as f64 })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::zipfian::zeta;
    use crate::workload::ValueSpec;

    #[test]
    fn top_shares_take_the_most_accessed_keys_first() {
        // 100 keys: key 0 has 50 hits, keys 1..=9 have 5 each, five more have 1 each.
        let mut counts = vec![0u32; 100];
        counts[0] = 50;
        for c in &mut counts[1..10] {
            *c = 5;
        }
        for c in &mut counts[10..15] {
            *c = 1;
        }
        let ops = 50 + 45 + 5;
        let shares = top_shares(&counts, 100, ops);
        assert_eq!(shares[0], (0.01, 0.5));
        assert_eq!(shares[1], (0.10, 0.95));
        assert_eq!(shares[2], (0.18, 1.0));
        assert_eq!(top_shares(&[], 10, 0)[0].1, 0.0);
    }

    /// 1M operations over 10k records (100 per key, so the sampling noise that decides which keys
    /// look hottest stays small): the replay's top-18% share is the analytic one.
    #[test]
    fn replayed_plain_zipfian_trace_has_the_analytic_skew_and_ycsb_is_flatter() {
        let params = TraceParams {
            seed: 1,
            records: 10_000,
            threads: 2,
            values: ValueSpec::fixed(10),
            max_scan_length: 100,
        };
        let c = Workload::named("c").unwrap();
        let measure_with = |distribution| {
            let replay = PhaseReplay {
                phase: 1,
                workload: &c,
                distribution,
                ops_by_thread: &[500_000, 500_000],
                ops_hint: Some(500_000),
            };
            measure(&params, &[replay]).remove(0)
        };
        let plain = measure_with(Distribution::ZipfianPlain { theta: 0.99 });
        assert_eq!((plain.ops, plain.keys), (1_000_000, 10_000));
        let analytic = zeta(1_800, 0.99) / zeta(10_000, 0.99);
        assert!((plain.top_shares[2].1 - analytic).abs() < 0.015, "{plain:?} vs {analytic}");
        let ycsb = measure_with(Distribution::Zipfian { theta: 0.99 });
        assert!(ycsb.top_shares[2].1 + 0.05 < plain.top_shares[2].1, "{ycsb:?}");
        assert!(plain.describe().starts_with("top 1% / 10% / 18% of keys got "), "{}", plain.describe());
    }
}
