//! Runs one phase (the load, or one workload) of one engine: N worker threads, each with its own
//! deterministic op source, value pool and histograms. Nothing is shared between workers on the
//! hot path except relaxed atomics (a stop flag, and a per-thread progress counter on its own cache
//! line that only its worker writes).

mod bulk;
pub mod latency;
mod progress;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Barrier;
use std::time::{Duration, Instant};

pub use bulk::run_bulk_load;
pub use latency::LatencySet;
use progress::Progress;

use crate::adapter::KvAdapter;
use crate::workload::trace::LoadTrace;
use crate::workload::{KeySpec, Op, OpKind, ThreadTrace};

/// Where a worker's operations come from.
pub trait OpSource: Send {
    fn next_op(&mut self) -> Option<Op>;
}

impl OpSource for LoadTrace {
    fn next_op(&mut self) -> Option<Op> {
        self.next()
    }
}

/// A run-phase trace, limited to a number of operations (`u64::MAX` under `--duration`).
pub struct RunSource {
    pub trace: ThreadTrace,
    pub remaining: u64,
}

impl OpSource for RunSource {
    fn next_op(&mut self) -> Option<Op> {
        self.remaining = self.remaining.checked_sub(1)?;
        Some(self.trace.next_op())
    }
}

/// How a phase ends.
#[derive(Clone, Copy, Debug, Default)]
pub struct PhaseLimit {
    /// Total operations over all threads, when known (for the progress bar).
    pub total_ops: Option<u64>,
    /// Stop after this long (`--duration`).
    pub duration: Option<Duration>,
    /// Record the throughput of every interval this long (`--timeline`).
    pub timeline_interval: Option<Duration>,
}

/// Shared, read-only inputs of every worker.
#[derive(Clone)]
pub struct PhaseInputs<'a> {
    pub adapter: &'a dyn KvAdapter,
    pub keys: KeySpec,
    /// Per-thread value pools (see `trace::value_pool`).
    pub value_pools: &'a [Vec<u8>],
    /// Bytes credited per scanned record (the adapter reports counts, not bytes).
    pub record_bytes_estimate: u64,
    pub label: String,
    pub quiet: bool,
}

/// What one phase measured (all threads merged).
#[derive(Clone, Default)]
pub struct PhaseMeasurement {
    pub ops: u64,
    /// From the first worker starting to the last one finishing.
    pub elapsed: Duration,
    pub latency: LatencySet,
    /// Reads (and read-modify-writes) that found no record.
    pub not_found: u64,
    pub scanned_records: u64,
    /// Key + value bytes passed to put-like operations.
    pub user_bytes_written: u64,
    /// Key + value bytes returned by reads; scans are credited `record_bytes_estimate` per record.
    pub user_bytes_read: u64,
    /// Key + value bytes of records that did not exist before (load and inserts).
    pub inserted_bytes: u64,
    /// The first error an engine returned; the phase stops there.
    pub error: Option<String>,
    /// That error was `strata::Error::Unsupported` (e.g. a scan on an unordered engine): the
    /// engine cannot run this workload, which is not a failure of the engine.
    pub unsupported: bool,
    /// With `PhaseLimit::timeline_interval`: operations/s of each interval in order (the last one
    /// may be shorter; its rate is over its own length).
    pub timeline_ops_per_sec: Vec<f64>,
    pub timeline_interval: Option<Duration>,
}

impl PhaseMeasurement {
    pub fn throughput_ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn absorb(&mut self, w: WorkerResult) {
        self.ops += w.ops;
        self.latency.merge(&w.latency);
        self.not_found += w.not_found;
        self.scanned_records += w.scanned_records;
        self.user_bytes_written += w.user_bytes_written;
        self.user_bytes_read += w.user_bytes_read;
        self.inserted_bytes += w.inserted_bytes;
        if self.error.is_none() {
            self.error = w.error;
            self.unsupported = w.unsupported;
        }
    }
}

#[derive(Default)]
struct WorkerResult {
    ops: u64,
    latency: LatencySet,
    not_found: u64,
    scanned_records: u64,
    user_bytes_written: u64,
    user_bytes_read: u64,
    inserted_bytes: u64,
    error: Option<String>,
    unsupported: bool,
    started: Option<Instant>,
    finished: Option<Instant>,
}

/// A counter alone on its cache line, written by one worker only.
#[repr(align(128))]
#[derive(Default)]
struct PaddedCounter(AtomicU64);

/// Runs `sources` (one per thread) to completion, or until `limit.duration` passes, or until an
/// engine error. Returns the merged measurement and the sources (their traces carry state, like
/// insert counts, into the next phase).
pub fn run_phase<S: OpSource>(
    inputs: &PhaseInputs<'_>,
    sources: Vec<S>,
    limit: PhaseLimit,
) -> (PhaseMeasurement, Vec<S>) {
    let threads = sources.len();
    let stop = AtomicBool::new(false);
    let counters: Vec<PaddedCounter> = (0..threads).map(|_| PaddedCounter::default()).collect();
    let finished = AtomicU64::new(0);
    let barrier = Barrier::new(threads + 1);
    let progress = Progress::new(&inputs.label, limit.total_ops, limit.duration, inputs.quiet);

    let (results, timeline_ops_per_sec): (Vec<(WorkerResult, S)>, Vec<f64>) = std::thread::scope(|scope| {
        let handles: Vec<_> = sources
            .into_iter()
            .enumerate()
            .map(|(t, mut source)| {
                let (stop, counter, finished, barrier) = (&stop, &counters[t].0, &finished, &barrier);
                let pool: &[u8] = inputs.value_pools.get(t).map_or(&[], Vec::as_slice);
                scope.spawn(move || {
                    barrier.wait();
                    let result = worker(inputs, pool, &mut source, stop, counter);
                    finished.fetch_add(1, Relaxed);
                    (result, source)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let mut timeline = limit.timeline_interval.map(Timeline::new);
        while finished.load(Relaxed) < threads as u64 {
            std::thread::sleep(Duration::from_millis(timeline.as_ref().map_or(20, Timeline::poll_ms)));
            let elapsed = start.elapsed();
            if limit.duration.is_some_and(|d| elapsed >= d) {
                stop.store(true, Relaxed);
            }
            let done: u64 = counters.iter().map(|c| c.0.load(Relaxed)).sum();
            if let Some(t) = &mut timeline {
                t.observe(done, elapsed);
            }
            progress.update(done, elapsed);
        }
        if let Some(t) = &mut timeline {
            t.finish(counters.iter().map(|c| c.0.load(Relaxed)).sum(), start.elapsed());
        }
        progress.finish();
        let results = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect();
        (results, timeline.map(|t| t.ops_per_sec).unwrap_or_default())
    });

    let mut measurement = PhaseMeasurement {
        timeline_ops_per_sec,
        timeline_interval: limit.timeline_interval,
        ..PhaseMeasurement::default()
    };
    let first_start = results.iter().filter_map(|(r, _)| r.started).min();
    let last_finish = results.iter().filter_map(|(r, _)| r.finished).max();
    if let (Some(s), Some(f)) = (first_start, last_finish) {
        measurement.elapsed = f.saturating_duration_since(s);
    }
    let mut sources = Vec::with_capacity(results.len());
    for (result, source) in results {
        measurement.absorb(result);
        sources.push(source);
    }
    (measurement, sources)
}

/// Per-interval throughput, sampled by the coordinating thread from the workers' progress
/// counters (published every [`PROGRESS_EVERY_OPS`] operations, so an interval is exact to within
/// that many operations per thread).
struct Timeline {
    interval: Duration,
    /// End of the interval being filled, since the phase started.
    next_boundary: Duration,
    ops_at_last_boundary: u64,
    ops_per_sec: Vec<f64>,
}

impl Timeline {
    fn new(interval: Duration) -> Timeline {
        Timeline { interval, next_boundary: interval, ops_at_last_boundary: 0, ops_per_sec: Vec::new() }
    }

    /// Sleep between samples: short against the interval, so boundaries are hit closely.
    fn poll_ms(&self) -> u64 {
        (self.interval.as_millis() as u64 / 20).clamp(1, 20)
    }

    /// `done` operations had completed at `elapsed`; closes every interval that ended by then (a
    /// stalled sampler credits the operations to the interval in which it woke up).
    fn observe(&mut self, done: u64, elapsed: Duration) {
        while elapsed >= self.next_boundary {
            let ops = done.saturating_sub(self.ops_at_last_boundary);
            self.ops_per_sec.push(ops as f64 / self.interval.as_secs_f64());
            self.ops_at_last_boundary = done;
            self.next_boundary += self.interval;
        }
    }

    /// The phase ended at `elapsed`: the partial last interval counts if it is at least a tenth
    /// of an interval long (shorter ones are dominated by the workers' start/stop skew).
    fn finish(&mut self, done: u64, elapsed: Duration) {
        self.observe(done, elapsed);
        let started = self.next_boundary.saturating_sub(self.interval);
        let partial = elapsed.saturating_sub(started);
        if partial >= self.interval / 10 {
            let ops = done.saturating_sub(self.ops_at_last_boundary);
            self.ops_per_sec.push(ops as f64 / partial.as_secs_f64());
        }
    }
}

/// Publish progress every this many operations (a power of two: tested with a mask).
const PROGRESS_EVERY_OPS: u64 = 64;

fn worker<S: OpSource>(
    inputs: &PhaseInputs<'_>,
    pool: &[u8],
    source: &mut S,
    stop: &AtomicBool,
    progress: &AtomicU64,
) -> WorkerResult {
    let adapter = inputs.adapter;
    let mut r = WorkerResult { started: Some(Instant::now()), ..WorkerResult::default() };
    let mut key = Vec::with_capacity(64);
    let mut scan_start = Vec::with_capacity(64);
    while !stop.load(Relaxed) {
        let Some(op) = source.next_op() else { break };
        inputs.keys.write_key(op.keynum, &mut key);
        let start = op.value_offset as usize;
        let value = pool.get(start..start + op.value_len as usize).unwrap_or(&[]);
        if op.kind == OpKind::Scan {
            scan_start.clone_from(&key);
        }
        let began = Instant::now();
        let outcome = match op.kind {
            OpKind::Read => adapter.get(&key).map(Outcome::Read),
            OpKind::Update | OpKind::Insert => adapter.put(&key, value).map(|()| Outcome::Wrote),
            OpKind::ReadModifyWrite => adapter.read_modify_write(&key, value).map(|()| Outcome::Wrote),
            OpKind::Scan => adapter.scan(&scan_start, op.scan_len as usize).map(Outcome::Scanned),
        };
        let nanos = began.elapsed().as_nanos() as u64;
        match outcome {
            Ok(outcome) => {
                r.latency.record(op.kind, nanos);
                r.ops += 1;
                let record_bytes = (key.len() + value.len()) as u64;
                match outcome {
                    Outcome::Read(Some(len)) => r.user_bytes_read += (key.len() + len) as u64,
                    Outcome::Read(None) => r.not_found += 1,
                    Outcome::Wrote => {
                        r.user_bytes_written += record_bytes;
                        if op.kind == OpKind::Insert {
                            r.inserted_bytes += record_bytes;
                        }
                        if op.kind == OpKind::ReadModifyWrite {
                            r.user_bytes_read += inputs.record_bytes_estimate;
                        }
                    }
                    Outcome::Scanned(n) => {
                        r.scanned_records += n as u64;
                        r.user_bytes_read += n as u64 * inputs.record_bytes_estimate;
                    }
                }
            }
            Err(e) => {
                r.unsupported =
                    matches!(e.downcast_ref::<strata::Error>(), Some(strata::Error::Unsupported(_)));
                r.error = Some(format!(
                    "{} failed: {}",
                    op.kind.name(),
                    crate::engines::one_line(&format!("{e:#}"))
                ));
                stop.store(true, Relaxed);
                break;
            }
        }
        if r.ops & (PROGRESS_EVERY_OPS - 1) == 0 {
            progress.store(r.ops, Relaxed);
        }
    }
    progress.store(r.ops, Relaxed);
    r.finished = Some(Instant::now());
    r
}

enum Outcome {
    Read(Option<usize>),
    Wrote,
    Scanned(usize),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::BTreeMapBaseline;
    use crate::workload::trace::{value_pool, TraceParams};
    use crate::workload::{Distribution, KeyFormat, ValueSpec, Workload};

    #[test]
    fn load_then_read_finds_every_key() {
        let params = TraceParams {
            seed: 1,
            records: 5000,
            threads: 3,
            values: ValueSpec::fixed(16),
            max_scan_length: 10,
        };
        let adapter = BTreeMapBaseline::default();
        let pools: Vec<Vec<u8>> = (0..3).map(|t| value_pool(&params, t)).collect();
        let inputs = PhaseInputs {
            adapter: &adapter,
            keys: KeySpec { format: KeyFormat::Int, key_bytes: None, hashed: true, clustered_inserts: None },
            value_pools: &pools,
            record_bytes_estimate: 24,
            label: "load".into(),
            quiet: true,
        };
        let loads = (0..3).map(|t| LoadTrace::new(&params, t)).collect();
        let (load, _) =
            run_phase(&inputs, loads, PhaseLimit { total_ops: Some(5000), ..PhaseLimit::default() });
        assert_eq!(load.ops, 5000);
        assert_eq!(load.inserted_bytes, 5000 * 24);
        assert!(load.error.is_none());

        let w = Workload::named("c").unwrap();
        let runs = (0..3)
            .map(|t| RunSource {
                trace: ThreadTrace::new(&params, 1, t, &w, Distribution::Uniform, 0, None),
                remaining: 2000,
            })
            .collect();
        let (run, _) =
            run_phase(&inputs, runs, PhaseLimit { total_ops: Some(6000), ..PhaseLimit::default() });
        assert_eq!(run.ops, 6000);
        assert_eq!(run.not_found, 0, "every read targets a loaded key");
        assert_eq!(run.user_bytes_read, 6000 * 24);
        assert_eq!(run.latency.get(OpKind::Read).unwrap().len(), 6000);
    }

    /// An engine without ordered scans: its `Unsupported` error marks the phase unsupported.
    struct Unordered(BTreeMapBaseline);

    impl KvAdapter for Unordered {
        fn name(&self) -> &str {
            "unordered"
        }
        fn config_description(&self) -> Vec<(String, String)> {
            Vec::new()
        }
        fn get(&self, key: &[u8]) -> anyhow::Result<Option<usize>> {
            self.0.get(key)
        }
        fn put(&self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
            self.0.put(key, value)
        }
        fn delete(&self, key: &[u8]) -> anyhow::Result<()> {
            self.0.delete(key)
        }
        fn scan(&self, _start: &[u8], _count: usize) -> anyhow::Result<usize> {
            Err(strata::Error::unsupported("no key order").into())
        }
        fn flush(&self) -> anyhow::Result<()> {
            Ok(())
        }
        fn close(self: Box<Self>) -> anyhow::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn unsupported_operations_are_told_apart_from_failures() {
        let params = TraceParams {
            seed: 1,
            records: 100,
            threads: 1,
            values: ValueSpec::fixed(8),
            max_scan_length: 10,
        };
        let adapter = Unordered(BTreeMapBaseline::default());
        let pools = vec![value_pool(&params, 0)];
        let inputs = PhaseInputs {
            adapter: &adapter,
            keys: KeySpec { format: KeyFormat::Int, key_bytes: None, hashed: true, clustered_inserts: None },
            value_pools: &pools,
            record_bytes_estimate: 16,
            label: "e".into(),
            quiet: true,
        };
        let w = Workload::named("scan100").unwrap();
        let runs = vec![RunSource {
            trace: ThreadTrace::new(&params, 1, 0, &w, Distribution::Uniform, 0, None),
            remaining: 100,
        }];
        let (run, _) = run_phase(&inputs, runs, PhaseLimit { total_ops: Some(100), ..PhaseLimit::default() });
        assert!(run.unsupported);
        assert!(run.error.as_deref().unwrap().contains("no key order"));
        assert_eq!(run.ops, 0);
    }

    /// Workload A on the `null` baseline, 2 threads, open-ended (stopped by `limit.duration`).
    fn null_run(limit: PhaseLimit) -> PhaseMeasurement {
        let params = TraceParams {
            seed: 1,
            records: 100,
            threads: 2,
            values: ValueSpec::fixed(8),
            max_scan_length: 10,
        };
        let adapter = crate::baseline::NullBaseline;
        let pools: Vec<Vec<u8>> = (0..2).map(|t| value_pool(&params, t)).collect();
        let inputs = PhaseInputs {
            adapter: &adapter,
            keys: KeySpec { format: KeyFormat::Int, key_bytes: None, hashed: true, clustered_inserts: None },
            value_pools: &pools,
            record_bytes_estimate: 16,
            label: "a".into(),
            quiet: true,
        };
        let w = Workload::named("a").unwrap();
        let runs = (0..2)
            .map(|t| RunSource {
                trace: ThreadTrace::new(&params, 1, t, &w, Distribution::Uniform, 0, None),
                remaining: u64::MAX,
            })
            .collect();
        run_phase(&inputs, runs, limit).0
    }

    #[test]
    fn timeline_covers_the_phase_interval_by_interval() {
        let run = null_run(PhaseLimit {
            duration: Some(Duration::from_millis(400)),
            timeline_interval: Some(Duration::from_millis(50)),
            ..PhaseLimit::default()
        });
        let intervals = &run.timeline_ops_per_sec;
        assert!((7..=10).contains(&intervals.len()), "{} intervals", intervals.len());
        // Most intervals saw operations (on a loaded machine a thread can stall for a whole
        // 50 ms interval: CI once saw one interval of nine empty).
        let busy = intervals.iter().filter(|r| **r > 0.0).count();
        assert!(busy * 2 >= intervals.len(), "{intervals:?}");
        // The intervals partition the phase: their operations add up to the total (up to the
        // progress counters' publishing granularity per thread and interval).
        let counted: f64 = intervals.iter().map(|r| r * 0.05).sum();
        let slack = (PROGRESS_EVERY_OPS * 2 * intervals.len() as u64) as f64;
        assert!(
            (counted - run.ops as f64).abs() <= slack + run.ops as f64 * 0.05,
            "{counted} vs {}",
            run.ops
        );
    }

    #[test]
    fn timeline_credits_a_stalled_sampler_to_one_interval() {
        let mut t = Timeline::new(Duration::from_millis(100));
        t.observe(50, Duration::from_millis(60));
        t.observe(1000, Duration::from_millis(350));
        t.finish(1000, Duration::from_millis(352));
        assert_eq!(t.ops_per_sec, vec![10_000.0, 0.0, 0.0, 0.0]);
        let mut t = Timeline::new(Duration::from_millis(100));
        t.finish(300, Duration::from_millis(150));
        assert_eq!(t.ops_per_sec.len(), 2);
        assert_eq!(t.ops_per_sec[0], 3000.0);
    }

    #[test]
    fn duration_limit_stops_the_phase() {
        let started = Instant::now();
        let run =
            null_run(PhaseLimit { duration: Some(Duration::from_millis(200)), ..PhaseLimit::default() });
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(run.ops > 0);
        assert!(run.elapsed >= Duration::from_millis(150), "{:?}", run.elapsed);
    }
}
