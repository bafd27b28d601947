//! Deterministic operation traces. Every worker thread draws its operations from its own RNG,
//! seeded from (seed, phase, thread), so one invocation replays the identical trace against every
//! engine, and no state is shared between threads while they run.
//!
//! Inserts are per thread: thread `t` of `T` gives its `j`-th insert (counted over all phases of
//! one engine run) key number `records + j*T + t`, and only chooses among the loaded records and its
//! own inserts. With one thread this is exactly YCSB's single-client behaviour; with more, each
//! thread's "latest" is its own latest insert instead of a timing-dependent global one.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::choosers::{Distribution, KeyChooser};
use super::{OpKind, OpMix, ValueSpec, Workload};

/// The phase number used for the load phase; run phases are numbered from 1.
pub const LOAD_PHASE: u32 = 0;

/// What every thread's trace is derived from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceParams {
    pub seed: u64,
    pub records: u64,
    pub threads: u32,
    pub values: ValueSpec,
    /// Scan lengths are uniform over 1..=max_scan_length (YCSB `maxscanlength`, default 100).
    pub max_scan_length: u32,
}

/// One operation. Keys are key numbers (see `KeySpec::write_key`); values are `value_len` bytes
/// starting at `value_offset` of the thread's value pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    pub kind: OpKind,
    pub keynum: u64,
    pub scan_len: u32,
    pub value_len: u32,
    pub value_offset: u32,
}

/// Bytes of slack in a value pool: values start at a random offset below this.
pub const VALUE_POOL_SLACK_BYTES: usize = 4096;

/// Incompressible value bytes for one thread; values are slices of it.
pub fn value_pool(params: &TraceParams, thread: u32) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(stream_seed(params.seed, u32::MAX, thread));
    let mut pool = vec![0u8; params.values.max_bytes + VALUE_POOL_SLACK_BYTES];
    rng.fill(pool.as_mut_slice());
    pool
}

/// SplitMix64 over the three inputs: independent streams per (seed, phase, thread).
pub fn stream_seed(seed: u64, phase: u32, thread: u32) -> u64 {
    let mut x = seed ^ (u64::from(phase) << 32 | u64::from(thread)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The key number of thread `thread`'s `j`-th insert.
pub fn insert_keynum(params: &TraceParams, thread: u32, j: u64) -> u64 {
    params.records + j * u64::from(params.threads) + u64::from(thread)
}

/// Operations a thread runs when `total` are split over `threads` (the first threads take the
/// remainder).
pub fn ops_for_thread(total: u64, threads: u32, thread: u32) -> u64 {
    let t = u64::from(threads.max(1));
    total / t + u64::from(u64::from(thread) < total % t)
}

/// The load phase of one thread: key numbers `thread, thread + T, ...` below `records`.
pub struct LoadTrace {
    rng: SmallRng,
    values: ValueSpec,
    next_keynum: u64,
    stride: u64,
    records: u64,
}

impl LoadTrace {
    pub fn new(params: &TraceParams, thread: u32) -> Self {
        LoadTrace {
            rng: SmallRng::seed_from_u64(stream_seed(params.seed, LOAD_PHASE, thread)),
            values: params.values,
            next_keynum: u64::from(thread),
            stride: u64::from(params.threads.max(1)),
            records: params.records,
        }
    }

    /// Records this thread will load.
    pub fn len(params: &TraceParams, thread: u32) -> u64 {
        ops_for_thread(params.records, params.threads, thread)
    }
}

impl Iterator for LoadTrace {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        if self.next_keynum >= self.records {
            return None;
        }
        let keynum = self.next_keynum;
        self.next_keynum += self.stride;
        let (value_len, value_offset) = draw_value(&mut self.rng, self.values);
        Some(Op { kind: OpKind::Insert, keynum, scan_len: 0, value_len, value_offset })
    }
}

pub(crate) fn draw_value(rng: &mut SmallRng, values: ValueSpec) -> (u32, u32) {
    let len =
        if values.is_fixed() { values.min_bytes } else { rng.gen_range(values.min_bytes..=values.max_bytes) };
    (len as u32, rng.gen_range(0..VALUE_POOL_SLACK_BYTES as u32))
}

/// A run phase of one thread.
pub struct ThreadTrace {
    rng: SmallRng,
    params: TraceParams,
    thread: u32,
    mix: OpMix,
    chooser: KeyChooser,
    /// Inserts this thread has made in this engine run, including earlier phases.
    own_inserts: u64,
}

impl ThreadTrace {
    /// `phase` ≥ 1 numbers the run phase; `own_inserts` carries over from earlier phases;
    /// `ops_hint` (the thread's op count, when known) sizes the zipfian range as YCSB does.
    pub fn new(
        params: &TraceParams,
        phase: u32,
        thread: u32,
        workload: &Workload,
        distribution: Distribution,
        own_inserts: u64,
        ops_hint: Option<u64>,
    ) -> Self {
        let insert_share = workload.mix.proportion(OpKind::Insert);
        // YCSB: expectednewkeys = operationcount * insertproportion * 2.0 (fudge factor).
        let expected_inserts = (ops_hint.unwrap_or(params.records) as f64 * insert_share * 2.0) as u64;
        let known = params.records + own_inserts;
        ThreadTrace {
            rng: SmallRng::seed_from_u64(stream_seed(params.seed, phase, thread)),
            params: *params,
            thread,
            mix: workload.mix,
            chooser: KeyChooser::new(distribution, params.records, own_inserts + expected_inserts, known),
            own_inserts,
        }
    }

    pub fn own_inserts(&self) -> u64 {
        self.own_inserts
    }

    /// Logical index → key number: loaded records keep theirs; index `records + j` is this
    /// thread's `j`-th insert.
    fn keynum_of(&self, index: u64) -> u64 {
        match index.checked_sub(self.params.records) {
            None => index,
            Some(j) => insert_keynum(&self.params, self.thread, j),
        }
    }

    pub fn next_op(&mut self) -> Op {
        let kind = self.mix.pick(self.rng.gen());
        let known = self.params.records + self.own_inserts;
        let keynum = match kind {
            OpKind::Insert => {
                let k = insert_keynum(&self.params, self.thread, self.own_inserts);
                self.own_inserts += 1;
                k
            }
            _ => {
                let index = self.chooser.next(&mut self.rng, known);
                self.keynum_of(index)
            }
        };
        let scan_len = match kind {
            OpKind::Scan => self.rng.gen_range(1..=self.params.max_scan_length),
            _ => 0,
        };
        let (value_len, value_offset) = match kind {
            OpKind::Update | OpKind::Insert | OpKind::ReadModifyWrite => {
                draw_value(&mut self.rng, self.params.values)
            }
            OpKind::Read | OpKind::Scan => (0, 0),
        };
        Op { kind, keynum, scan_len, value_len, value_offset }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::zipfian::DEFAULT_THETA;

    fn params(seed: u64) -> TraceParams {
        TraceParams { seed, records: 10_000, threads: 2, values: ValueSpec::fixed(100), max_scan_length: 100 }
    }

    fn trace(seed: u64, workload: &str, thread: u32, n: usize) -> Vec<Op> {
        let w = Workload::named(workload).unwrap();
        let mut t = ThreadTrace::new(
            &params(seed),
            1,
            thread,
            &w,
            Distribution::Zipfian { theta: DEFAULT_THETA },
            0,
            None,
        );
        (0..n).map(|_| t.next_op()).collect()
    }

    #[test]
    fn same_seed_same_trace_different_seed_different_trace() {
        for w in ["a", "d", "e", "f"] {
            assert_eq!(trace(42, w, 0, 5000), trace(42, w, 0, 5000), "workload {w}");
            assert_ne!(trace(42, w, 0, 5000), trace(43, w, 0, 5000), "workload {w}");
            assert_ne!(trace(42, w, 0, 5000), trace(42, w, 1, 5000), "threads must differ");
        }
        let load = |seed| {
            LoadTrace::new(
                &TraceParams { values: ValueSpec { min_bytes: 10, max_bytes: 90 }, ..params(seed) },
                1,
            )
            .collect::<Vec<_>>()
        };
        assert_eq!(load(1), load(1));
        assert_ne!(load(1), load(2));
        assert_eq!(load(1).len() as u64, LoadTrace::len(&params(1), 1));
    }

    /// Over 200k operations every YCSB workload hits its proportions within 1 percentage point.
    #[test]
    fn ycsb_mixes_hit_their_percentages() {
        for (name, _) in crate::workload::NAMED_WORKLOADS {
            let w = Workload::named(name).unwrap();
            let ops = trace(7, name, 0, 200_000);
            for kind in OpKind::ALL {
                let f = ops.iter().filter(|o| o.kind == kind).count() as f64 / ops.len() as f64;
                let want = w.mix.proportion(kind);
                assert!((f - want).abs() < 0.01, "workload {name}: {} {f} vs {want}", kind.name());
            }
        }
    }

    #[test]
    fn scan_lengths_are_uniform_1_to_100() {
        let ops = trace(3, "scan100", 0, 200_000);
        let lens: Vec<u32> = ops.iter().map(|o| o.scan_len).collect();
        assert_eq!(*lens.iter().min().unwrap(), 1);
        assert_eq!(*lens.iter().max().unwrap(), 100);
        let mean = lens.iter().map(|&l| f64::from(l)).sum::<f64>() / lens.len() as f64;
        assert!((mean - 50.5).abs() < 0.3, "mean scan length {mean}");
    }

    #[test]
    fn inserts_are_unique_across_threads_and_reads_only_touch_existing_keys() {
        let p = params(5);
        let w = Workload::named("d").unwrap();
        let mut seen = std::collections::HashSet::new();
        for thread in 0..p.threads {
            let mut t = ThreadTrace::new(&p, 1, thread, &w, Distribution::Latest { theta: 0.99 }, 0, None);
            let mut mine = std::collections::HashSet::new();
            for _ in 0..20_000 {
                let op = t.next_op();
                if op.kind == OpKind::Insert {
                    assert!(op.keynum >= p.records);
                    assert!(seen.insert(op.keynum), "duplicate insert {}", op.keynum);
                    mine.insert(op.keynum);
                } else {
                    assert!(
                        op.keynum < p.records || mine.contains(&op.keynum),
                        "read of a key not yet inserted"
                    );
                }
            }
        }
    }

    #[test]
    fn ops_split_evenly() {
        assert_eq!((0..3).map(|t| ops_for_thread(10, 3, t)).collect::<Vec<_>>(), vec![4, 3, 3]);
        assert_eq!(ops_for_thread(10, 1, 0), 10);
    }
}
