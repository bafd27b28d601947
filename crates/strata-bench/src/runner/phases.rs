//! The phases of one open engine — the load and each run phase — measured the same way whether
//! they run on one store one after another or each on a checkpoint copy (`checkpoint_start`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use super::{ms, say};
use crate::adapter::KvAdapter;
use crate::config::BenchConfig;
use crate::driver::{run_bulk_load, run_phase, PhaseInputs, PhaseLimit, PhaseMeasurement, RunSource};
use crate::engines;
use crate::metrics::{self, DiskUsage, ProcIo, Rss};
use crate::report::{EngineIo, LatencySummary, PhaseResult};
use crate::workload::trace::{ops_for_thread, value_pool, LoadTrace, TraceParams};
use crate::workload::{ThreadTrace, Workload};

/// The run phases of an invocation, each with its phase number (1-based, the trace's seed).
pub(super) fn numbered_phases(config: &BenchConfig) -> Vec<(u32, &Workload)> {
    config.workloads.iter().enumerate().map(|(i, w)| (i as u32 + 1, w)).collect()
}

/// What phases hand on to the next: each thread's own inserts and the live user bytes.
#[derive(Clone, Debug)]
pub(super) struct Progress {
    own_inserts: Vec<u64>,
    live_user_bytes: u64,
}

impl Progress {
    pub fn after_load(config: &BenchConfig, results: &[PhaseResult]) -> Progress {
        Progress {
            own_inserts: vec![0; config.threads as usize],
            live_user_bytes: results.iter().map(|r| r.live_user_bytes).max().unwrap_or(0),
        }
    }
}

/// One open engine and what every phase of it shares.
pub(super) struct EngineRun<'a> {
    config: &'a BenchConfig,
    name: &'a str,
    dir: &'a Path,
    adapter: &'a dyn KvAdapter,
    trace: TraceParams,
    /// Per-thread value pools.
    pools: Vec<Vec<u8>>,
}

impl<'a> EngineRun<'a> {
    pub fn new(config: &'a BenchConfig, name: &'a str, dir: &'a Path, adapter: &'a dyn KvAdapter) -> Self {
        let trace = config.trace_params();
        let pools = (0..config.threads).map(|t| value_pool(&trace, t)).collect();
        EngineRun { config, name, dir, adapter, trace, pools }
    }

    fn inputs(&self, phase: &str) -> PhaseInputs<'_> {
        PhaseInputs {
            adapter: self.adapter,
            keys: self.config.keys,
            value_pools: &self.pools,
            record_bytes_estimate: self.config.record_bytes_estimate(),
            label: format!("{} {phase}", self.name),
            quiet: self.config.quiet,
        }
    }

    /// The load (puts from every thread, or one bulk load), then a flush.
    pub(super) fn load(&self) -> PhaseResult {
        let config = self.config;
        say(config, &format!("{}: loading {} records", self.name, config.records));
        let before = Sample::take(self.adapter);
        let load = if config.bulk_load {
            run_bulk_load(self.adapter, config.keys, &self.trace)
        } else {
            let loads = (0..config.threads).map(|t| LoadTrace::new(&self.trace, t)).collect();
            let limit = PhaseLimit {
                total_ops: Some(config.records),
                duration: None,
                timeline_interval: config.timeline_interval,
            };
            run_phase(&self.inputs("load"), loads, limit).0
        };
        let flush_started = Instant::now();
        let flushed = self.adapter.flush();
        let flush_ms = ms(flush_started.elapsed());
        let description = match config.bulk_load {
            true => "load phase: bulk-load every record in key order",
            false => "load phase: insert every record",
        };
        let mut result = phase_result(self, ("load", description), &load, &before, load.inserted_bytes);
        result.flush_ms = Some(flush_ms);
        if let (None, Err(e)) = (&result.error, flushed) {
            result.status = "error".into();
            result.error = Some(format!("flush failed: {}", engines::one_line(&format!("{e:#}"))));
        }
        result
    }

    /// `phases` in order, carrying each thread's insert count and the live bytes from phase to
    /// phase in `progress`; appends their results and returns whether one failed (an
    /// unsupported workload, such as a scan on an unordered engine, does not stop the next ones).
    pub(super) fn run_phases(
        &self,
        phases: &[(u32, &Workload)],
        progress: &mut Progress,
        results: &mut Vec<PhaseResult>,
    ) -> bool {
        for &(phase, workload) in phases {
            let result = self.workload(phase, workload, progress);
            let failed = result.status == "error";
            results.push(result);
            if failed {
                return true;
            }
        }
        false
    }

    /// Run phase `phase` (≥ 1): `workload` on every thread.
    fn workload(&self, phase: u32, workload: &Workload, progress: &mut Progress) -> PhaseResult {
        let Progress { own_inserts, live_user_bytes } = progress;
        let config = self.config;
        let distribution = config.distribution_for(workload);
        // Aging runs one update per record; every other phase runs what --ops/--duration say.
        let (phase_ops, phase_duration) = match workload.aging {
            true => (Some(config.records), None),
            false => (config.ops, config.duration),
        };
        let sources: Vec<RunSource> = (0..config.threads)
            .map(|t| {
                let ops = phase_ops.map(|n| ops_for_thread(n, config.threads, t));
                let inserted = own_inserts.get(t as usize).copied().unwrap_or(0);
                let hint = ops.filter(|_| phase_duration.is_none());
                RunSource {
                    trace: ThreadTrace::new(&self.trace, phase, t, workload, distribution, inserted, hint),
                    remaining: if phase_duration.is_some() { u64::MAX } else { ops.unwrap_or(0) },
                }
            })
            .collect();
        say(config, &format!("{}: workload {} ({})", self.name, workload.name, workload.mix.describe()));
        let before = Sample::take(self.adapter);
        let limit = PhaseLimit {
            total_ops: phase_ops.filter(|_| phase_duration.is_none()),
            duration: phase_duration,
            timeline_interval: config.timeline_interval,
        };
        let initial: Vec<u64> = sources.iter().map(|s| s.remaining).collect();
        let (m, sources) = run_phase(&self.inputs(&workload.name), sources, limit);
        for (count, s) in own_inserts.iter_mut().zip(&sources) {
            *count = s.trace.own_inserts();
        }
        *live_user_bytes += m.inserted_bytes;
        let description = format!(
            "{} — {} ({})",
            describe_workload(workload),
            distribution.describe(),
            workload.mix.describe()
        );
        let mut result = phase_result(self, (&workload.name, &description), &m, &before, *live_user_bytes);
        result.ops_by_thread = sources.iter().zip(&initial).map(|(s, i)| i - s.remaining).collect();
        result
    }
}

fn describe_workload(w: &Workload) -> String {
    let base = w.name.split('@').next().unwrap_or(&w.name);
    crate::workload::NAMED_WORKLOADS.iter().find(|(n, _)| *n == base).map_or_else(
        || "custom mix (--mix)".to_string(),
        |(_, d)| d.split(':').next().unwrap_or(d).to_string(),
    )
}

/// Counters sampled before a phase.
struct Sample {
    io: Option<ProcIo>,
    stats: Option<strata::Stats>,
}

impl Sample {
    fn take(adapter: &dyn KvAdapter) -> Sample {
        Sample { io: ProcIo::sample(), stats: adapter.engine_stats() }
    }
}

/// The measurement of one phase, with what the process, the engine and the directory say changed
/// since `before`.
fn phase_result(
    run: &EngineRun<'_>,
    phase: (&str, &str),
    m: &PhaseMeasurement,
    before: &Sample,
    live_user_bytes: u64,
) -> PhaseResult {
    let (workload, description) = phase;
    let (engine, adapter, dir) = (run.name, run.adapter, run.dir);
    let io = match (ProcIo::sample(), before.io) {
        (Some(after), Some(before)) => Some(after.delta_since(&before)),
        _ => None,
    };
    let engine_io = match (adapter.engine_stats(), &before.stats) {
        (Some(after), Some(before)) => Some(EngineIo::delta(before, &after)),
        _ => None,
    };
    let disk = DiskUsage::of(dir);
    let latency_us_by_op: BTreeMap<String, LatencySummary> = m
        .latency
        .kinds()
        .filter_map(|k| Some((k.name().to_string(), LatencySummary::of(m.latency.get(k)?))))
        .collect();
    let mut result = PhaseResult {
        engine: engine.to_string(),
        workload: workload.to_string(),
        repeat: 1,
        description: description.to_string(),
        status: match (&m.error, m.unsupported) {
            (None, _) => "ok".into(),
            (Some(_), true) => "unsupported".into(),
            (Some(_), false) => "error".into(),
        },
        error: m.error.clone(),
        ops: m.ops,
        elapsed_secs: m.elapsed.as_secs_f64(),
        throughput_ops_per_sec: m.throughput_ops_per_sec(),
        throughput_vs_first: None,
        ops_by_thread: Vec::new(),
        device_read_bytes_per_op: io.and_then(|i| per_op(i.read_bytes, m.ops)),
        device_write_bytes_per_op: io.and_then(|i| per_op(i.write_bytes, m.ops)),
        latency_us: m.latency.overall().map(|h| LatencySummary::of(&h)).unwrap_or_default(),
        latency_us_by_op,
        not_found: m.not_found,
        scanned_records: m.scanned_records,
        read_bytes: io.map(|i| i.read_bytes),
        write_bytes: io.map(|i| i.write_bytes),
        rchar_bytes: io.map(|i| i.rchar),
        wchar_bytes: io.map(|i| i.wchar),
        engine_io,
        user_bytes_written: m.user_bytes_written,
        user_bytes_read: m.user_bytes_read,
        live_user_bytes,
        disk_bytes: 0,
        disk_apparent_bytes: 0,
        disk_files: 0,
        peak_rss_bytes: Rss::sample().map(|r| r.peak_bytes),
        write_amplification: io.and_then(|i| metrics::ratio(i.write_bytes, m.user_bytes_written)),
        read_amplification: io.and_then(|i| metrics::ratio(i.read_bytes, m.user_bytes_read)),
        space_amplification: metrics::ratio(disk.allocated_bytes, live_user_bytes),
        flush_ms: None,
        timeline_interval_secs: m.timeline_interval.map(|d| d.as_secs_f64()),
        timeline_ops_per_sec: m.timeline_ops_per_sec.clone(),
    };
    result.set_disk(disk);
    result
}

fn per_op(bytes: u64, ops: u64) -> Option<f64> {
    (ops > 0).then(|| bytes as f64 / ops as f64)
}
