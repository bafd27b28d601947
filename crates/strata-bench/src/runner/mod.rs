//! One invocation: for each engine, open it in a fresh directory, load, (drop the page cache), run
//! each workload on the shared trace, close, reopen, clean up — measuring around every phase.

mod checkpoint_start;
mod engine_run;
mod phases;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::adapter::OpenParams;
use crate::config::BenchConfig;
use crate::engines;
use crate::kill_reopen::{self, KillReopen};
use crate::metrics::machine::{GitInfo, MachineInfo};
use crate::report::{summary, BenchReport, EngineReport, PhaseResult, Setting, WorkloadConfig};
use crate::workload::skew::{PhaseReplay, Skew};

/// Status lines on stderr (the table goes to stdout).
fn say(config: &BenchConfig, text: &str) {
    if !config.quiet {
        eprintln!("{text}");
    }
}

/// Runs every engine. Errors only for problems with the run itself (e.g. the data directory);
/// engine failures are recorded in the report.
pub fn run(config: &BenchConfig) -> Result<BenchReport, String> {
    let base = data_dir(config)?;
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
        let entry = Entry { round, index, base: base.path(), budget, kill_reopens: &kill_reopens };
        let (engine, results, reset) = entry.run(config);
        peak_reset_everywhere &= reset;
        report.engines.push(engine);
        report.results.extend(results);
    }
    report.peak_rss_note = peak_rss_note(peak_reset_everywhere).into();
    set_ratios(&mut report);
    report.summary = summary::summarise(&report.results);
    report.skew = measure_skew(config, &report.results);
    Ok(report)
}

/// A fresh directory for the run's stores under `--dir` (default: the system temp dir), removed
/// when dropped.
fn data_dir(config: &BenchConfig) -> Result<tempfile::TempDir, String> {
    let parent = match &config.dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("cannot create --dir {}: {e}", d.display()))?;
            d.clone()
        }
        None => std::env::temp_dir(),
    };
    tempfile::Builder::new()
        .prefix("strata-bench-")
        .tempdir_in(&parent)
        .map_err(|e| format!("cannot create a data directory under {}: {e}", parent.display()))
}

/// What `--reopen-after-kill` measured, per distinct persistent engine name.
type KillReopens = Vec<(String, Result<KillReopen, String>)>;

/// One engine entry (`--engines` position `index`) in one `--repeat` round.
struct Entry<'a> {
    round: u32,
    index: usize,
    /// The run's data directory; the entry's store is a subdirectory, removed after it ran.
    base: &'a Path,
    budget: u64,
    kill_reopens: &'a KillReopens,
}

impl Entry<'_> {
    /// Runs the engine; returns its report, its phases' results, and whether its peak RSS was
    /// reset before it opened.
    fn run(&self, config: &BenchConfig) -> (EngineReport, Vec<PhaseResult>, bool) {
        let (round, index) = (self.round, self.index);
        let name = &config.engines[index];
        if config.repeat > 1 {
            say(config, &format!("round {round} of {}: {name}", config.repeat));
        }
        let dir = self.base.join(format!("{index}-{}", dir_name(name)));
        let (mut engine, mut results, reset) = engine_run::run_engine(config, name, &dir, self.budget);
        engine.repeat = round;
        for r in &mut results {
            r.repeat = round;
        }
        // The kill-and-reopen runs once per engine name, before round 1, and is reported with it.
        let kill_reopen = self.kill_reopens.iter().find(|(n, _)| n == name).filter(|_| round == 1);
        if let Some((_, measured)) = kill_reopen {
            note_kill_reopen(&mut engine, measured);
        }
        // An engine named twice (to see run-to-run noise) is reported as `name#2`, `name#3`, ...
        let earlier = config.engines[..index].iter().filter(|n| *n == name).count();
        if earlier > 0 {
            engine.name = format!("{name}#{}", earlier + 1);
            for r in &mut results {
                r.engine.clone_from(&engine.name);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        return_freed_memory();
        (engine, results, reset)
    }
}

fn note_kill_reopen(engine: &mut EngineReport, measured: &Result<KillReopen, String>) {
    match measured {
        Ok(k) => {
            engine.kill_reopen_ms = Some(k.reopen_ms);
            engine.kill_reopen_sampled_reads_ms = Some(k.sampled_reads_ms);
            engine.kill_reopen_note = Some(k.note());
        }
        Err(e) => engine.kill_reopen_note = Some(format!("failed: {e}")),
    }
}

/// How to read `peak_rss_bytes`: whether the kernel let every engine start from a reset peak.
fn peak_rss_note(peak_reset_everywhere: bool) -> &'static str {
    if peak_reset_everywhere {
        "peak RSS: process-wide VmHWM, reset (clear_refs) before each engine opened; it includes the harness \
         (trace state, histograms, value pools) — baseline_rss_bytes in the JSON is that share"
    } else {
        "peak RSS: process-wide VmHWM; the kernel refused to reset it, so each engine's peak also includes the \
         engines before it in this invocation"
    }
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
fn kill_reopen_all(config: &BenchConfig, base: &Path, budget: u64) -> KillReopens {
    let mut measured: KillReopens = Vec::new();
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
        from_checkpoint: config.from_checkpoint,
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
