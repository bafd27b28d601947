//! One engine's part of an invocation: open it, load, run each workload on the shared trace,
//! close, time a reopen — measuring around every phase (the phases themselves: `phases`).

use std::path::Path;
use std::time::Instant;

use super::checkpoint_start::{self, Reopen};
use super::phases::{numbered_phases, EngineRun, Progress};
use super::{ms, say, settings};
use crate::adapter::{KvAdapter, OpenParams};
use crate::config::BenchConfig;
use crate::engines::{self, EngineSource, OpenError};
use crate::metrics::{self, Rss};
use crate::report::{EngineReport, PhaseResult};

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
