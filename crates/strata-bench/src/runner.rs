//! One invocation: for each engine, open it in a fresh directory, load, (drop the page cache), run
//! each workload on the shared trace, close, reopen, clean up — measuring around every phase.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::adapter::{KvAdapter, OpenParams};
use crate::driver::{
    run_bulk_load, run_phase, LatencySummary, PhaseInputs, PhaseLimit, PhaseMeasurement, RunSource,
};
use crate::engines::{self, EngineSource, OpenError};
use crate::kill_reopen::{self, KillReopen};
use crate::metrics::machine::{GitInfo, MachineInfo};
use crate::metrics::{self, DiskUsage, ProcIo, Rss};
use crate::report::{summary, BenchReport, EngineIo, EngineReport, PhaseResult, Setting, WorkloadConfig};
use crate::workload::skew::{PhaseReplay, Skew};
use crate::workload::trace::{ops_for_thread, value_pool, LoadTrace, TraceParams};
use crate::workload::{Distribution, DistributionKind, KeySpec, ThreadTrace, ValueSpec, Workload};

/// Everything a run needs, validated (see `cli`).
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub engines: Vec<String>,
    /// Run phases after the load, in order (empty: load only).
    pub workloads: Vec<Workload>,
    pub records: u64,
    /// Operations per run phase over all threads; `None` with `duration`.
    pub ops: Option<u64>,
    pub duration: Option<Duration>,
    /// `--timeline`: also record throughput per interval of this length.
    pub timeline_interval: Option<Duration>,
    pub threads: u32,
    pub distribution: Option<DistributionKind>,
    pub zipf_theta: f64,
    pub hotspot_keys_fraction: f64,
    pub hotspot_ops_fraction: f64,
    pub keys: KeySpec,
    pub values: ValueSpec,
    pub preset: Option<String>,
    /// `None`: a quarter of the loaded data (so the default run is larger than memory).
    pub memory_budget_bytes: Option<u64>,
    pub direct_io: bool,
    pub sync_writes: bool,
    pub seed: u64,
    pub max_scan_length: u32,
    /// Parent of the run's temporary directory (default: the system temp dir).
    pub dir: Option<PathBuf>,
    pub quiet: bool,
    pub drop_caches: bool,
    /// `--reopen-after-kill`: also time a reopen after a SIGKILL that follows the load.
    pub reopen_after_kill: bool,
    /// `--load-mode bulk`: the records sorted by key through each adapter's `bulk_load` (one
    /// thread) instead of puts from every thread.
    pub bulk_load: bool,
    pub custom_mix: Option<String>,
    /// `--repeat`: rounds of every engine (≥ 1).
    pub repeat: u32,
    pub command_line: Vec<String>,
}

impl BenchConfig {
    /// Estimated key + value bytes the load writes.
    pub fn loaded_bytes_estimate(&self) -> u64 {
        self.records.saturating_mul(self.record_bytes_estimate())
    }

    pub fn effective_memory_budget_bytes(&self) -> u64 {
        self.memory_budget_bytes.unwrap_or_else(|| (self.loaded_bytes_estimate() / 4).max(1 << 20))
    }

    pub(crate) fn trace_params(&self) -> TraceParams {
        TraceParams {
            seed: self.seed,
            records: self.records,
            threads: self.threads,
            values: self.values,
            max_scan_length: self.max_scan_length,
        }
    }

    fn distribution_for(&self, workload: &Workload) -> Distribution {
        match workload.fixed_distribution.or(self.distribution).unwrap_or(workload.default_distribution) {
            DistributionKind::Uniform => Distribution::Uniform,
            DistributionKind::Zipfian => Distribution::Zipfian { theta: self.zipf_theta },
            DistributionKind::ZipfianPlain => Distribution::ZipfianPlain { theta: self.zipf_theta },
            DistributionKind::Scattered => Distribution::Scattered { theta: self.zipf_theta },
            DistributionKind::Latest => Distribution::Latest { theta: self.zipf_theta },
            DistributionKind::Hotspot => Distribution::Hotspot {
                keys_fraction: self.hotspot_keys_fraction,
                ops_fraction: self.hotspot_ops_fraction,
            },
        }
    }

    pub(crate) fn record_bytes_estimate(&self) -> u64 {
        (self.keys.typical_key_bytes() as f64 + self.values.mean_bytes()).round() as u64
    }
}

/// Status lines on stderr (the table goes to stdout).
fn say(config: &BenchConfig, text: &str) {
    if !config.quiet {
        eprintln!("{text}");
    }
}

/// Runs every engine. Errors only for problems with the run itself (e.g. the data directory);
/// engine failures are recorded in the report.
pub fn run(config: &BenchConfig) -> Result<BenchReport, String> {
    let parent = match &config.dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("cannot create --dir {}: {e}", d.display()))?;
            d.clone()
        }
        None => std::env::temp_dir(),
    };
    let base = tempfile::Builder::new()
        .prefix("strata-bench-")
        .tempdir_in(&parent)
        .map_err(|e| format!("cannot create a data directory under {}: {e}", parent.display()))?;
    let machine = MachineInfo::collect(base.path());
    if machine.data_dir.fs_type.as_deref() == Some("tmpfs") {
        say(config, "note: the data directory is on tmpfs: no device I/O will happen; use --dir on a disk");
    }
    let started_unix_secs =
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let budget = config.effective_memory_budget_bytes();
    let data_ratio = config.loaded_bytes_estimate() as f64 / budget as f64;
    if data_ratio < 3.0 && config.memory_budget_bytes.is_some() {
        say(
            config,
            &format!(
                "note: the data is only {data_ratio:.1}x the memory budget: not a larger-than-memory run"
            ),
        );
    }

    let mut report = BenchReport {
        tool: "strata bench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        started_unix_secs,
        command_line: config.command_line.clone(),
        machine,
        git: GitInfo::collect(),
        workload: workload_config(config, budget, data_ratio),
        peak_rss_note: String::new(),
        repeats: config.repeat,
        engines: Vec::new(),
        results: Vec::new(),
        skew: Vec::new(),
        summary: Vec::new(),
    };
    // Before any engine runs here: the measurement forks (see kill_reopen.rs).
    let kill_reopens =
        if config.reopen_after_kill { kill_reopen_all(config, base.path(), budget) } else { Vec::new() };
    let mut peak_reset_everywhere = true;
    for (round, index) in summary::schedule(config.engines.len(), config.repeat) {
        let name = &config.engines[index];
        if config.repeat > 1 {
            say(config, &format!("round {round} of {}: {name}", config.repeat));
        }
        let dir = base.path().join(format!("{index}-{}", dir_name(name)));
        let (mut engine, mut results, reset) = run_engine(config, name, &dir, budget);
        engine.repeat = round;
        for r in &mut results {
            r.repeat = round;
        }
        let kill_reopen = kill_reopens.iter().find(|(n, _)| n == name).filter(|_| round == 1);
        if let Some((_, measured)) = kill_reopen {
            match measured {
                Ok(k) => {
                    engine.kill_reopen_ms = Some(k.reopen_ms);
                    engine.kill_reopen_sampled_reads_ms = Some(k.sampled_reads_ms);
                    engine.kill_reopen_note = Some(k.note());
                }
                Err(e) => engine.kill_reopen_note = Some(format!("failed: {e}")),
            }
        }
        // An engine named twice (to see run-to-run noise) is reported as `name#2`, `name#3`, ...
        let earlier = config.engines[..index].iter().filter(|n| *n == name).count();
        if earlier > 0 {
            engine.name = format!("{name}#{}", earlier + 1);
            for r in &mut results {
                r.engine.clone_from(&engine.name);
            }
        }
        peak_reset_everywhere &= reset;
        let _ = std::fs::remove_dir_all(&dir);
        return_freed_memory();
        report.engines.push(engine);
        report.results.extend(results);
    }
    report.peak_rss_note = if peak_reset_everywhere {
        "peak RSS: process-wide VmHWM, reset (clear_refs) before each engine opened; it includes the harness \
         (trace state, histograms, value pools) — baseline_rss_bytes in the JSON is that share"
            .into()
    } else {
        "peak RSS: process-wide VmHWM; the kernel refused to reset it, so each engine's peak also includes the \
         engines before it in this invocation"
            .into()
    };
    set_ratios(&mut report);
    report.summary = summary::summarise(&report.results);
    report.skew = measure_skew(config, &report.results);
    Ok(report)
}

/// Replays the traces of the first engine that ran the most phases (in round 1) for the op counts
/// its threads ran, and measures each phase's skew (see `workload::skew`).
fn measure_skew(config: &BenchConfig, results: &[PhaseResult]) -> Vec<Skew> {
    let ran = |engine: &str| {
        config
            .workloads
            .iter()
            .map_while(|w| {
                results
                    .iter()
                    .find(|r| r.repeat == 1 && r.engine == engine && r.workload == w.name && r.status == "ok")
            })
            .collect::<Vec<_>>()
    };
    let Some(phases) = config.engines.iter().map(|e| ran(e)).max_by_key(|p| p.len()) else {
        return Vec::new();
    };
    let replays: Vec<PhaseReplay<'_>> = phases
        .iter()
        .zip(&config.workloads)
        .enumerate()
        .map(|(i, (result, workload))| PhaseReplay {
            phase: i as u32 + 1,
            workload,
            distribution: config.distribution_for(workload),
            ops_by_thread: &result.ops_by_thread,
            ops_hint: config.ops.filter(|_| config.duration.is_none()),
        })
        .collect();
    crate::workload::skew::measure(&config.trace_params(), &replays)
}

/// `--reopen-after-kill` for every distinct persistent engine, in order.
fn kill_reopen_all(
    config: &BenchConfig,
    base: &Path,
    budget: u64,
) -> Vec<(String, Result<KillReopen, String>)> {
    let mut measured: Vec<(String, Result<KillReopen, String>)> = Vec::new();
    for (index, name) in config.engines.iter().enumerate() {
        let Ok(source) = engines::resolve(name) else { continue };
        if !source.is_persistent() || measured.iter().any(|(n, _)| n == name) {
            continue;
        }
        say(config, &format!("{name}: loading {} records in a child process to kill it", config.records));
        let params = OpenParams {
            dir: base.join(format!("{index}-{}-kill", dir_name(name))),
            memory_budget_bytes: budget,
            direct_io: config.direct_io,
            sync_writes: config.sync_writes,
            threads: config.threads as usize,
        };
        let result = kill_reopen::measure(config, name, source, &params);
        kill_reopen::clean_up(&params.dir);
        measured.push((name.clone(), result));
    }
    measured
}

/// Hands memory freed by the engine just closed back to the OS, so the next engine's RSS baseline
/// and peak are not inflated by its predecessor's leftovers in the allocator.
fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap memory; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn workload_config(config: &BenchConfig, budget: u64, data_ratio: f64) -> WorkloadConfig {
    let mut workloads = vec!["load".to_string()];
    workloads.extend(config.workloads.iter().map(|w| w.name.clone()));
    WorkloadConfig {
        workloads,
        records: config.records,
        ops_per_workload: if config.duration.is_some() { None } else { config.ops },
        duration_secs: config.duration.map(|d| d.as_secs_f64()),
        threads: config.threads,
        distribution: config.distribution.map(|d| d.name().to_string()),
        zipf_theta: config.zipf_theta,
        hotspot_keys_fraction: config.hotspot_keys_fraction,
        hotspot_ops_fraction: config.hotspot_ops_fraction,
        key_format: format!("{:?}", config.keys.format).to_lowercase(),
        key_bytes: config.keys.key_bytes,
        value_bytes_min: config.values.min_bytes,
        value_bytes_max: config.values.max_bytes,
        preset: config.preset.clone(),
        load_order: match (config.bulk_load, config.keys.hashed) {
            (true, _) => "bulk (sorted, each engine's bulk path)".into(),
            (false, true) => "random".into(),
            (false, false) => "seq".into(),
        },
        insert_keys: match config.keys.clustered_inserts {
            Some(c) => {
                format!("clustered: after {} of the loaded records, the same ones throughout", c.hot_regions)
            }
            None => "spread".into(),
        },
        max_scan_length: config.max_scan_length,
        seed: config.seed,
        memory_budget_bytes: budget,
        memory_budget_auto: config.memory_budget_bytes.is_none(),
        data_to_budget_ratio: data_ratio,
        direct_io: config.direct_io,
        sync_writes: config.sync_writes,
        custom_mix: config.custom_mix.clone(),
    }
}

fn settings(pairs: Vec<(String, String)>) -> Vec<Setting> {
    pairs.into_iter().map(|(name, value)| Setting { name, value }).collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Returns the engine's report, its phase results, and whether the RSS peak could be reset.
fn run_engine(
    config: &BenchConfig,
    name: &str,
    dir: &Path,
    budget: u64,
) -> (EngineReport, Vec<PhaseResult>, bool) {
    let reset = Rss::reset_peak();
    let mut engine = EngineReport {
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
    };
    let source = match engines::resolve(name) {
        Ok(s) => s,
        Err(e) => {
            engine.status = "error".into();
            engine.message = Some(e);
            return (engine, Vec::new(), reset);
        }
    };
    engine.kind = match source {
        EngineSource::Strata(_) => "strata".into(),
        EngineSource::Baseline => "baseline".into(),
        EngineSource::Peer => "peer".into(),
    };
    let params = OpenParams {
        dir: dir.to_path_buf(),
        memory_budget_bytes: budget,
        direct_io: config.direct_io,
        sync_writes: config.sync_writes,
        threads: config.threads as usize,
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        engine.status = "error".into();
        engine.message = Some(format!("cannot create {}: {e}", dir.display()));
        return (engine, Vec::new(), reset);
    }
    let opened = Instant::now();
    let adapter = match engines::open(name, source, &params) {
        Ok(a) => a,
        Err(OpenError::Unsupported(msg)) => {
            say(config, &format!("{name}: unsupported: {msg}"));
            engine.status = "unsupported".into();
            engine.message = Some(msg);
            return (engine, Vec::new(), reset);
        }
        Err(OpenError::Failed(msg)) => {
            say(config, &format!("{name}: could not open: {msg}"));
            engine.status = "error".into();
            engine.message = Some(msg);
            return (engine, Vec::new(), reset);
        }
    };
    engine.open_ms = Some(ms(opened.elapsed()));
    engine.config = settings(adapter.config_description());

    let mut results = Vec::new();
    let trace = config.trace_params();
    let pools: Vec<Vec<u8>> = (0..config.threads).map(|t| value_pool(&trace, t)).collect();
    let inputs = PhaseInputs {
        adapter: adapter.as_ref(),
        keys: config.keys,
        value_pools: &pools,
        record_bytes_estimate: config.record_bytes_estimate(),
        label: format!("{name} load"),
        quiet: config.quiet,
    };

    // Load.
    say(config, &format!("{name}: loading {} records", config.records));
    let before = Sample::take(adapter.as_ref());
    let load = if config.bulk_load {
        run_bulk_load(adapter.as_ref(), config.keys, &trace)
    } else {
        let loads = (0..config.threads).map(|t| LoadTrace::new(&trace, t)).collect();
        let limit = PhaseLimit {
            total_ops: Some(config.records),
            duration: None,
            timeline_interval: config.timeline_interval,
        };
        run_phase(&inputs, loads, limit).0
    };
    let flush_started = Instant::now();
    let flushed = adapter.flush();
    let flush_ms = ms(flush_started.elapsed());
    let mut live_user_bytes = load.inserted_bytes;
    let mut result = phase_result(
        name,
        "load",
        if config.bulk_load {
            "load phase: bulk-load every record in key order"
        } else {
            "load phase: insert every record"
        },
        &load,
        &before,
        adapter.as_ref(),
        dir,
        live_user_bytes,
    );
    result.flush_ms = Some(flush_ms);
    if let (None, Err(e)) = (&result.error, flushed) {
        result.status = "error".into();
        result.error = Some(format!("flush failed: {}", engines::one_line(&format!("{e:#}"))));
    }
    let mut failed = result.error.is_some();
    results.push(result);

    if !failed && !config.workloads.is_empty() && config.drop_caches {
        match metrics::drop_page_cache() {
            Ok(()) => {
                engine.page_cache_dropped = true;
                engine.page_cache_note =
                    "dropped after the load (sync; echo 1 > /proc/sys/vm/drop_caches)".into();
            }
            Err(e) => engine.page_cache_note = format!("not dropped: {e}"),
        }
    } else if !config.drop_caches {
        engine.page_cache_note = "not dropped (--no-drop-caches)".into();
    }

    // Run phases, carrying each thread's insert count from phase to phase.
    let mut own_inserts = vec![0u64; config.threads as usize];
    for (i, workload) in config.workloads.iter().enumerate() {
        if failed {
            break;
        }
        let phase = i as u32 + 1;
        let distribution = config.distribution_for(workload);
        // Aging runs one update per record; every other phase runs what --ops/--duration say.
        let (phase_ops, phase_duration) = match workload.aging {
            true => (Some(config.records), None),
            false => (config.ops, config.duration),
        };
        let sources: Vec<RunSource> = (0..config.threads)
            .map(|t| {
                let ops = phase_ops.map(|n| ops_for_thread(n, config.threads, t));
                RunSource {
                    trace: ThreadTrace::new(
                        &trace,
                        phase,
                        t,
                        workload,
                        distribution,
                        own_inserts[t as usize],
                        ops.filter(|_| phase_duration.is_none()),
                    ),
                    remaining: if phase_duration.is_some() { u64::MAX } else { ops.unwrap_or(0) },
                }
            })
            .collect();
        say(config, &format!("{name}: workload {} ({})", workload.name, workload.mix.describe()));
        let inputs = PhaseInputs { label: format!("{name} {}", workload.name), ..inputs.clone() };
        let before = Sample::take(adapter.as_ref());
        let limit = PhaseLimit {
            total_ops: phase_ops.filter(|_| phase_duration.is_none()),
            duration: phase_duration,
            timeline_interval: config.timeline_interval,
        };
        let initial: Vec<u64> = sources.iter().map(|s| s.remaining).collect();
        let (m, sources) = run_phase(&inputs, sources, limit);
        for (t, s) in sources.iter().enumerate() {
            own_inserts[t] = s.trace.own_inserts();
        }
        let ops_by_thread: Vec<u64> = sources.iter().zip(&initial).map(|(s, i)| i - s.remaining).collect();
        live_user_bytes += m.inserted_bytes;
        let description = format!(
            "{} — {} ({})",
            describe_workload(workload),
            distribution.describe(),
            workload.mix.describe()
        );
        let mut result = phase_result(
            name,
            &workload.name,
            &description,
            &m,
            &before,
            adapter.as_ref(),
            dir,
            live_user_bytes,
        );
        result.ops_by_thread = ops_by_thread;
        // An unsupported workload (a scan on an unordered engine) does not stop the next ones.
        failed = result.status == "error";
        results.push(result);
    }

    // Close, then time a reopen of the same directory.
    let closing = Instant::now();
    let closed = adapter.close();
    engine.close_ms = Some(ms(closing.elapsed()));
    if let Err(e) = closed {
        engine.status = "error".into();
        engine.message = Some(format!("close failed: {}", engines::one_line(&format!("{e:#}"))));
    } else if source.is_persistent() {
        let reopening = Instant::now();
        match engines::open(name, source, &params) {
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
    if failed && engine.status == "ok" {
        engine.status = "error".into();
        engine.message = results.iter().find_map(|r| r.error.clone());
    }
    (engine, results, reset)
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

#[expect(
    clippy::too_many_arguments,
    reason = "two call sites (load, workloads); a struct would only rename the arguments"
)]
fn phase_result(
    engine: &str,
    workload: &str,
    description: &str,
    m: &PhaseMeasurement,
    before: &Sample,
    adapter: &dyn KvAdapter,
    dir: &Path,
    live_user_bytes: u64,
) -> PhaseResult {
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

/// Throughput of each engine divided by the first engine's on the same workload in the same round.
fn set_ratios(report: &mut BenchReport) {
    let Some(first) = report.engines.first().map(|e| e.name.clone()) else { return };
    let mut base: BTreeMap<(u32, String), f64> = BTreeMap::new();
    for r in report.results.iter().filter(|r| r.engine == first && r.status == "ok") {
        base.entry((r.repeat, r.workload.clone())).or_insert(r.throughput_ops_per_sec);
    }
    for r in &mut report.results {
        if r.status == "ok" {
            r.throughput_vs_first = base
                .get(&(r.repeat, r.workload.clone()))
                .filter(|b| **b > 0.0)
                .map(|b| r.throughput_ops_per_sec / b);
        }
    }
}

/// An engine entry as a directory name: options (`flex:max_interval_records=64`) become `_`s.
fn dir_name(engine: &str) -> String {
    engine.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}
