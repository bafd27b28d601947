//! One engine's part of an invocation: open it, load, run each workload on the shared trace,
//! close, time a reopen — measuring around every phase.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use super::{checkpoint_start, ms, say, settings};
use crate::adapter::{KvAdapter, OpenParams};
use crate::config::BenchConfig;
use crate::driver::{run_bulk_load, run_phase, PhaseInputs, PhaseLimit, PhaseMeasurement, RunSource};
use crate::engines::{self, EngineSource, OpenError};
use crate::metrics::{self, DiskUsage, ProcIo, Rss};
use crate::report::{EngineIo, EngineReport, LatencySummary, PhaseResult};
use crate::workload::trace::{ops_for_thread, value_pool, LoadTrace, TraceParams};
use crate::workload::{ThreadTrace, Workload};

/// Runs `name` in `dir`; returns its report, its phases' results, and whether its peak RSS was
/// reset before it opened.
pub(super) fn run_engine(
    config: &BenchConfig,
    name: &str,
    dir: &Path,
    budget: u64,
) -> (EngineReport, Vec<PhaseResult>, bool) {
    let reset = Rss::reset_peak();
    let mut engine = new_report(name);
    let Some((adapter, source, params)) = open(config, name, dir, budget, &mut engine) else {
        return (engine, Vec::new(), reset);
    };
    let load = EngineRun::new(config, name, dir, adapter.as_ref()).load();
    let mut failed = load.error.is_some();
    let mut results = vec![load];
    note_page_cache(config, &mut engine, failed);
    let reopen = Reopen { name, source, params: &params };
    let adapter = match failed {
        true => Some(adapter),
        false => match run_workloads(config, dir, adapter, &reopen, &mut results) {
            Ok((open, phase_failed)) => {
                failed = phase_failed;
                Some(open)
            }
            Err(message) => {
                (engine.status, engine.message, failed) = ("error".into(), Some(message), true);
                None
            }
        },
    };
    if let Some(adapter) = adapter {
        close_and_reopen(adapter, source, &params, name, &mut engine);
    }
    if failed && engine.status == "ok" {
        engine.status = "error".into();
        engine.message = results.iter().find_map(|r| r.error.clone());
    }
    (engine, results, reset)
}

/// The run phases, on the open store or each from the checkpoint copy (`--from-checkpoint`);
/// returns the adapter still open and whether a phase failed (`Err`: the store could not be
/// closed, copied or reopened between phases).
fn run_workloads(
    config: &BenchConfig,
    dir: &Path,
    adapter: Box<dyn KvAdapter>,
    reopen: &Reopen<'_>,
    results: &mut Vec<PhaseResult>,
) -> Result<(Box<dyn KvAdapter>, bool), String> {
    if config.from_checkpoint {
        return checkpoint_start::run_workloads(config, dir, adapter, reopen, results);
    }
    let phases = numbered_phases(config);
    let mut progress = Progress::after_load(config, results);
    let failed = EngineRun::new(config, reopen.name, dir, adapter.as_ref()).run_phases(
        &phases,
        &mut progress,
        results,
    );
    Ok((adapter, failed))
}

fn new_report(name: &str) -> EngineReport {
    EngineReport {
        name: name.to_string(),
        repeat: 1,
        status: "ok".into(),
        message: None,
        kind: String::new(),
        config: Vec::new(),
        open_ms: None,
        close_ms: None,
        reopen_ms: None,
        reopen_note: None,
        kill_reopen_ms: None,
        kill_reopen_sampled_reads_ms: None,
        kill_reopen_note: None,
        page_cache_dropped: false,
        page_cache_note: "not dropped".into(),
        baseline_rss_bytes: Rss::sample().map(|r| r.current_bytes),
    }
}

/// Resolves and opens the engine in `dir`, recording how in `engine`; `None` (with the status
/// and message set) when it cannot run.
fn open(
    config: &BenchConfig,
    name: &str,
    dir: &Path,
    budget: u64,
    engine: &mut EngineReport,
) -> Option<(Box<dyn KvAdapter>, EngineSource, OpenParams)> {
    let mut refuse = |status: &str, message: String| {
        engine.status = status.into();
        engine.message = Some(message);
        None
    };
    let source = match engines::resolve(name) {
        Ok(s) => s,
        Err(e) => return refuse("error", e),
    };
    let params = OpenParams {
        dir: dir.to_path_buf(),
        memory_budget_bytes: budget,
        direct_io: config.direct_io,
        sync_writes: config.sync_writes,
        threads: config.threads as usize,
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        return refuse("error", format!("cannot create {}: {e}", dir.display()));
    }
    let opened = Instant::now();
    let adapter = match engines::open(name, source, &params) {
        Ok(a) => a,
        Err(OpenError::Unsupported(msg)) => {
            say(config, &format!("{name}: unsupported: {msg}"));
            return refuse("unsupported", msg);
        }
        Err(OpenError::Failed(msg)) => {
            say(config, &format!("{name}: could not open: {msg}"));
            return refuse("error", msg);
        }
    };
    engine.kind = match source {
        EngineSource::Strata(_) => "strata".into(),
        EngineSource::Baseline => "baseline".into(),
        EngineSource::Peer => "peer".into(),
    };
    engine.open_ms = Some(ms(opened.elapsed()));
    engine.config = settings(adapter.config_description());
    Some((adapter, source, params))
}

/// Drops the page cache after the load when asked and there are phases to run.
fn note_page_cache(config: &BenchConfig, engine: &mut EngineReport, load_failed: bool) {
    if !config.drop_caches {
        engine.page_cache_note = "not dropped (--no-drop-caches)".into();
        return;
    }
    if load_failed || config.workloads.is_empty() {
        return;
    }
    match metrics::drop_page_cache() {
        Ok(()) => {
            engine.page_cache_dropped = true;
            engine.page_cache_note =
                "dropped after the load (sync; echo 1 > /proc/sys/vm/drop_caches)".into();
        }
        Err(e) => engine.page_cache_note = format!("not dropped: {e}"),
    }
}

/// Closes the engine, then times a reopen of the same directory (persistent engines).
fn close_and_reopen(
    adapter: Box<dyn KvAdapter>,
    source: EngineSource,
    params: &OpenParams,
    name: &str,
    engine: &mut EngineReport,
) {
    let closing = Instant::now();
    let closed = adapter.close();
    engine.close_ms = Some(ms(closing.elapsed()));
    if let Err(e) = closed {
        engine.status = "error".into();
        engine.message = Some(format!("close failed: {}", engines::one_line(&format!("{e:#}"))));
    } else if source.is_persistent() {
        let reopening = Instant::now();
        match engines::open(name, source, params) {
            Ok(again) => {
                engine.reopen_ms = Some(ms(reopening.elapsed()));
                let _ = again.close();
            }
            Err(OpenError::Unsupported(m) | OpenError::Failed(m)) => {
                engine.reopen_note = Some(format!("reopen failed: {m}"));
            }
        }
    } else {
        engine.reopen_note = Some("not persistent".into());
    }
}

/// How to open the engine again (`--from-checkpoint` reopens it for every measured workload).
pub(super) struct Reopen<'a> {
    pub name: &'a str,
    pub source: EngineSource,
    pub params: &'a OpenParams,
}

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
    fn load(&self) -> PhaseResult {
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
