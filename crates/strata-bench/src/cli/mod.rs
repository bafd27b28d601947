//! The `strata bench` command line. `strata-cli` forwards everything after `bench` here.
//!
//! Exit status: 0 when every engine ran (or is listed as unsupported by this build), 1 when an
//! engine failed or a result could not be written, 2 for bad arguments (one-line error).

mod parse;

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::config::BenchConfig;
use crate::engines;
use crate::runner;
use crate::workload::keys::{self, Preset, MAX_NATURAL_STRING_KEY_BYTES};
use crate::workload::zipfian::DEFAULT_THETA;
use crate::workload::{ClusteredInserts, DistributionKind, KeyFormat, KeySpec, OpMix, ValueSpec, Workload};

#[derive(Parser, Debug)]
#[command(
    name = "strata bench",
    about = "YCSB-style benchmark: load records, run workloads against several engines on one identical trace, \
             and report throughput, latency, I/O, disk use, memory and amplification.",
    args_conflicts_with_subcommands = true,
    disable_version_flag = true
)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: Option<BenchCommand>,
    /// Engines to compare, in order; ratios are against the first. See --list-engines. A Strata
    /// engine takes knobs as NAME:OPTION=VALUE[:OPTION=VALUE..] (flex:max_interval_records=64),
    /// so one engine can run under two settings side by side.
    #[arg(long, default_value = "memory", value_name = "A,B,..")]
    engines: String,
    /// Workloads to run after one load per engine: load, a..f, read50-insert50, update100, rmw100,
    /// insert100, scan100, mix. Default: a (or mix when --mix is given).
    #[arg(long, value_name = "W,W,..")]
    workload: Option<String>,
    /// A custom operation mix, e.g. read=70,update=20,scan=10 (ops: read, update, insert, scan, rmw).
    #[arg(long, value_name = "OP=WEIGHT,..")]
    mix: Option<String>,
    /// Records loaded before the workloads (1000000, 500k, 2M).
    #[arg(long, default_value = "100000", value_name = "N")]
    records: String,
    /// Operations per workload over all threads (default 100000).
    #[arg(long, value_name = "N", conflicts_with = "duration")]
    ops: Option<String>,
    /// Run each workload for this many seconds instead of a fixed op count.
    #[arg(long, value_name = "SECS")]
    duration: Option<String>,
    /// Also record throughput per interval of this many seconds (e.g. 1 or 0.5), for every
    /// phase including the load: shown as a sparkline with min/median/max, kept in --json, and
    /// drawn by `strata bench plot` as throughput over time.
    #[arg(long, value_name = "SECS")]
    timeline: Option<String>,
    /// Also measure reopen after a crash: in a child process, load the records into a separate
    /// directory, SIGKILL it (no close, no flush), then time the open in another child and read
    /// back a sample of the loaded keys.
    #[arg(long)]
    reopen_after_kill: bool,
    /// Worker threads.
    #[arg(long, default_value_t = 1, value_name = "N")]
    threads: u32,
    /// Request distribution for every workload (default: the workload's own; D uses latest).
    /// zipfian: YCSB's scrambled zipfian (10^10 items folded onto the keys); zipfian-plain: a
    /// zipfian over exactly the loaded records, ranks permuted over the key space (the F2
    /// paper's); scattered: ycsbr's ScatteredZipfianChooser (TreeLine's).
    #[arg(long, value_name = "zipfian|zipfian-plain|scattered|uniform|latest|hotspot")]
    distribution: Option<String>,
    /// Run every engine N times, alternating (A B A B ..., each round on a fresh load), and report
    /// each throughput and ratio as the median with min–max; --json keeps every round.
    #[arg(long, default_value_t = 1, value_name = "N")]
    repeat: u32,
    /// Zipfian constant θ for zipfian, zipfian-plain, scattered and latest, 0 < θ < 1.
    #[arg(long, default_value_t = DEFAULT_THETA, value_name = "THETA")]
    zipf_theta: f64,
    /// Hotspot distribution: fraction of operations on fraction of keys.
    #[arg(long, default_value = "0.8,0.2", value_name = "OPS,KEYS")]
    hotspot: String,
    /// Key format: 8-byte big-endian integers, or YCSB's user<digits> strings.
    #[arg(long, value_name = "int|string")]
    key_format: Option<String>,
    /// Key size in bytes (int: ≥ 8, zero-padded; string: ≥ 23, zero-padded digits).
    #[arg(long, value_name = "N")]
    key_bytes: Option<usize>,
    /// Value size: N, or MIN..MAX for sizes uniform over that inclusive range.
    #[arg(long, value_name = "N|MIN..MAX")]
    value_bytes: Option<String>,
    /// Record shape: default (8 B int keys + 120 B values), ycsb, 64b, 1kb, udb, zippydb, sys.
    #[arg(long, value_name = "NAME")]
    preset: Option<String>,
    /// Memory each engine may use (256MiB, 1GiB). Default: a quarter of the loaded data.
    #[arg(long, value_name = "SIZE")]
    memory_budget: Option<String>,
    /// Open data files with O_DIRECT where the engine supports it.
    #[arg(long)]
    direct_io: bool,
    /// Make every write durable (fsync) before it returns.
    #[arg(long)]
    sync_writes: bool,
    /// seq: keys ascend with insertion (YCSB insertorder=ordered); random: hashed key numbers.
    #[arg(long, default_value = "random", value_name = "seq|random")]
    load_order: String,
    /// spread: new keys map from their key numbers like loaded ones (YCSB); clustered: they land
    /// after one in every 1,000 loaded records (clustered:N: one in every N), always the same
    /// ones (hot insert areas, as in TreeLine's §5.5 forecasting experiment).
    #[arg(long, default_value = "spread", value_name = "spread|clustered[:N]")]
    insert_keys: String,
    /// puts: every thread inserts its records; bulk: the records sorted by key through each
    /// engine's bulk path (Strata's `Db::bulk_load`; RocksDB: batches of 1,024 in key order, then
    /// a full compaction, as TreeLine's authors loaded it), on one thread.
    #[arg(long, default_value = "puts", value_name = "puts|bulk")]
    load_mode: String,
    /// Start each measured workload from a copy of the store as the load and the aging workloads
    /// (`age`, which must come first) left it, closed and reopened, as TreeLine's §5 ran every
    /// experiment from a copy of one aged checkpoint. Default: the workloads run one after
    /// another on one open store, each inheriting what the last left (dirty caches, compaction
    /// debt).
    #[arg(long)]
    from_checkpoint: bool,
    /// Trace seed: the same seed gives the same operations.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Scans read uniform 1..=N records (YCSB maxscanlength).
    #[arg(long, default_value_t = 100, value_name = "N")]
    max_scan_length: u32,
    /// Parent directory for the data (default: the system temp dir); a fresh subdirectory is used
    /// and removed afterwards.
    #[arg(long, value_name = "PATH")]
    dir: Option<PathBuf>,
    /// Also write every result, the machine and the configuration as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// No progress bar or status lines (the table is still printed).
    #[arg(long)]
    quiet: bool,
    /// Keep the OS page cache between load and run (by default it is dropped when running as root).
    #[arg(long)]
    no_drop_caches: bool,
    /// List every engine name and whether this build can run it.
    #[arg(long)]
    list_engines: bool,
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Draw throughput and latency bar charts (SVG and PNG) from --json result files.
    Plot {
        /// Result files written by `strata bench --json`.
        #[arg(required = true, value_name = "FILE.json")]
        files: Vec<PathBuf>,
        /// Output directory (default: the directory of the first file).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

/// Runs `strata bench` with `args` (everything after `bench`).
pub fn main_with_args(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = std::iter::once(OsString::from("strata bench")).chain(args).collect();
    let command_line: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let parsed = match BenchArgs::try_parse_from(&args) {
        Ok(p) => p,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            return usage_error(&first_line_of_clap_error(&e));
        }
    };
    match parsed.command {
        Some(BenchCommand::Plot { files, out }) => {
            let out = out.unwrap_or_else(|| {
                files
                    .first()
                    .and_then(|f| f.parent())
                    .filter(|p| !p.as_os_str().is_empty())
                    .map_or_else(|| PathBuf::from("."), PathBuf::from)
            });
            match crate::plot::plot(&files, &out) {
                Ok(written) => {
                    for path in written {
                        println!("wrote {}", path.display());
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => failure(&e),
            }
        }
        None if parsed.list_engines => {
            for line in engines::engine_listing() {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        None => {
            let json = parsed.json.clone();
            let config = match build_config(parsed, command_line) {
                Ok(c) => c,
                Err(e) => return usage_error(&e),
            };
            run(&config, json)
        }
    }
}

fn run(config: &BenchConfig, json: Option<PathBuf>) -> ExitCode {
    let report = match runner::run(config) {
        Ok(r) => r,
        Err(e) => return failure(&e),
    };
    let table = crate::report::table::render(&report);
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(table.as_bytes()).and_then(|()| stdout.flush()) {
        return failure(&format!("writing to stdout: {e}"));
    }
    if let Some(path) = json {
        let text = match serde_json::to_string_pretty(&report) {
            Ok(t) => t,
            Err(e) => return failure(&format!("encoding the JSON report: {e}")),
        };
        if let Err(e) = std::fs::write(&path, text + "\n") {
            return failure(&format!("cannot write --json {}: {e}", path.display()));
        }
        if !config.quiet {
            eprintln!("wrote {}", path.display());
        }
    }
    if report.engines.iter().any(|e| e.status == "error") {
        let failed: Vec<&str> =
            report.engines.iter().filter(|e| e.status == "error").map(|e| e.name.as_str()).collect();
        return failure(&format!("engine(s) failed: {} (see the table)", failed.join(", ")));
    }
    ExitCode::SUCCESS
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("strata bench: error: {}", engines::one_line(message));
    ExitCode::from(2)
}

fn failure(message: &str) -> ExitCode {
    eprintln!("strata bench: error: {}", engines::one_line(message));
    ExitCode::from(1)
}

/// clap's message without usage lines or the `error:` prefix.
fn first_line_of_clap_error(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid arguments");
    line.trim().trim_start_matches("error:").trim().to_string()
}

/// Validates the arguments into a run configuration. Flags are checked in the order below, so
/// with several bad flags the error names the first.
fn build_config(a: BenchArgs, command_line: Vec<String>) -> Result<BenchConfig, String> {
    let engines = engine_names(&a.engines)?;
    let workloads = workload_list(&a)?;
    let length = run_length(&a)?;
    check_ranges(&a)?;
    let (hot_ops, hot_keys) = parse::hotspot(&a.hotspot)?;
    let distribution = a.distribution.as_deref().map(DistributionKind::parse).transpose()?;
    if a.max_scan_length == 0 {
        return Err("--max-scan-length must be at least 1".into());
    }
    let preset = keys::preset(a.preset.as_deref().unwrap_or("default"))?;
    let key_spec = key_spec(&a, &preset, length.records)?;
    let values = match &a.value_bytes {
        Some(v) => ValueSpec::parse(v)?,
        None => ValueSpec::fixed(preset.value_bytes),
    };
    let memory_budget_bytes = memory_budget_bytes(a.memory_budget.as_deref())?;
    check_json_directory(a.json.as_deref())?;
    let bulk_load = match a.load_mode.as_str() {
        "puts" => false,
        "bulk" => true,
        other => return Err(format!("unknown --load-mode {other:?}; expected puts or bulk")),
    };
    Ok(BenchConfig {
        engines,
        workloads,
        records: length.records,
        ops: length.ops,
        duration: length.duration,
        timeline_interval: length.timeline_interval,
        threads: a.threads,
        distribution,
        zipf_theta: a.zipf_theta,
        hotspot_keys_fraction: hot_keys,
        hotspot_ops_fraction: hot_ops,
        keys: key_spec,
        values,
        preset: a.preset,
        memory_budget_bytes,
        direct_io: a.direct_io,
        sync_writes: a.sync_writes,
        seed: a.seed,
        max_scan_length: a.max_scan_length,
        dir: a.dir,
        quiet: a.quiet,
        drop_caches: !a.no_drop_caches,
        reopen_after_kill: a.reopen_after_kill,
        bulk_load,
        from_checkpoint: a.from_checkpoint,
        custom_mix: a.mix,
        repeat: a.repeat,
        command_line,
    })
}

/// `--engines`: at least one name, each one this build knows.
fn engine_names(text: &str) -> Result<Vec<String>, String> {
    let engines = parse::list(text);
    if engines.is_empty() {
        return Err("--engines needs at least one engine name".into());
    }
    for name in &engines {
        engines::resolve(name)?;
    }
    Ok(engines)
}

/// `--workload` and `--mix`: the run phases in order (`load` is always first, so it adds none);
/// under `--from-checkpoint` the aging workloads must all come before the measured ones.
fn workload_list(a: &BenchArgs) -> Result<Vec<Workload>, String> {
    let custom_mix = a.mix.as_deref().map(OpMix::parse).transpose()?;
    let names = match (&a.workload, &custom_mix) {
        (Some(w), _) => parse::list(w),
        (None, Some(_)) => vec!["mix".to_string()],
        (None, None) => vec!["a".to_string()],
    };
    if names.is_empty() {
        return Err("--workload needs at least one workload name".into());
    }
    let mut workloads = Vec::new();
    for name in &names {
        match name.as_str() {
            "load" => {}
            "mix" => match custom_mix {
                Some(mix) => workloads.push(Workload::custom(mix)),
                None => return Err("workload 'mix' needs --mix, e.g. --mix read=70,update=30".into()),
            },
            other => workloads.push(Workload::named(other)?),
        }
    }
    if custom_mix.is_some() && !names.iter().any(|n| n == "mix") {
        return Err("--mix given but --workload does not include 'mix'".into());
    }
    let aging_prefix = workloads.iter().take_while(|w| w.aging).count();
    if a.from_checkpoint && workloads.iter().skip(aging_prefix).any(|w| w.aging) {
        return Err("--from-checkpoint: aging workloads (age) must come before every measured one".into());
    }
    Ok(workloads)
}

/// How much each phase runs: the records loaded, and the run phases' ops or duration.
struct RunLength {
    records: u64,
    ops: Option<u64>,
    duration: Option<Duration>,
    timeline_interval: Option<Duration>,
}

/// `--records`, `--duration`, `--timeline` and `--ops` (100,000 unless `--duration` is given).
fn run_length(a: &BenchArgs) -> Result<RunLength, String> {
    let records = parse::count("--records", &a.records)?;
    if records == 0 || records > 1 << 40 {
        return Err(format!("--records {records}: expected 1 to 2^40"));
    }
    let duration = a.duration.as_deref().map(|d| parse::seconds("--duration", d)).transpose()?;
    let timeline_interval = a.timeline.as_deref().map(|t| parse::seconds("--timeline", t)).transpose()?;
    if timeline_interval.is_some_and(|t| t < Duration::from_millis(10)) {
        return Err("--timeline: the interval must be at least 0.01 s".into());
    }
    let ops = match (&a.ops, duration) {
        (Some(o), _) => Some(parse::count("--ops", o)?),
        (None, None) => Some(100_000),
        (None, Some(_)) => None,
    };
    if ops == Some(0) {
        return Err("--ops must be at least 1".into());
    }
    Ok(RunLength { records, ops, duration, timeline_interval })
}

/// `--repeat`, `--threads` and `--zipf-theta` within the ranges a run can use.
fn check_ranges(a: &BenchArgs) -> Result<(), String> {
    if a.repeat == 0 || a.repeat > 100 {
        return Err(format!("--repeat {}: expected 1 to 100 rounds", a.repeat));
    }
    if a.threads == 0 || a.threads > 1024 {
        return Err(format!("--threads {}: expected 1 to 1024", a.threads));
    }
    if !(a.zipf_theta > 0.0 && a.zipf_theta < 1.0) {
        return Err(format!("--zipf-theta {}: YCSB's zipfian needs 0 < θ < 1", a.zipf_theta));
    }
    Ok(())
}

/// The keys: `--key-format` and `--key-bytes` over the preset's, `--load-order`, `--insert-keys`.
fn key_spec(a: &BenchArgs, preset: &Preset, records: u64) -> Result<KeySpec, String> {
    let format = match a.key_format.as_deref() {
        None => preset.format,
        Some("int") => KeyFormat::Int,
        Some("string") => KeyFormat::String,
        Some(other) => return Err(format!("unknown --key-format {other:?}; expected int or string")),
    };
    // The preset's key size where the chosen format can hold it: a string key needs at least
    // MAX_NATURAL_STRING_KEY_BYTES, an int key at least 8.
    let key_bytes = match (a.key_bytes, format) {
        (Some(n), _) => Some(n),
        (None, f) if f == preset.format => preset.key_bytes,
        (None, KeyFormat::String) => preset.key_bytes.filter(|&n| n >= MAX_NATURAL_STRING_KEY_BYTES),
        (None, KeyFormat::Int) => Some(preset.key_bytes.unwrap_or(8).max(8)),
    };
    let hashed = match a.load_order.as_str() {
        "random" => true,
        "seq" | "sequential" => false,
        other => return Err(format!("unknown --load-order {other:?}; expected seq or random")),
    };
    let clustered_inserts = clustered_inserts(&a.insert_keys, records)?;
    let key_spec = KeySpec { format, key_bytes, hashed, clustered_inserts };
    key_spec.validate()?;
    Ok(key_spec)
}

/// `--insert-keys spread|clustered|clustered:N`.
fn clustered_inserts(text: &str, records: u64) -> Result<Option<ClusteredInserts>, String> {
    match (text, text.strip_prefix("clustered:")) {
        ("spread", _) => Ok(None),
        ("clustered", _) => Ok(Some(ClusteredInserts::for_records(records))),
        (_, Some(n)) => match n.parse::<u64>() {
            Ok(n) if n >= 1 => Ok(Some(ClusteredInserts::with_spacing(records, n))),
            _ => Err(format!("--insert-keys clustered:{n}: N must be a whole number of records >= 1")),
        },
        (other, None) => {
            Err(format!("unknown --insert-keys {other:?}; expected spread, clustered or clustered:N"))
        }
    }
}

/// `--memory-budget`: `None` (or `auto`) derives it from the data size.
fn memory_budget_bytes(text: Option<&str>) -> Result<Option<u64>, String> {
    match text {
        None | Some("auto") => Ok(None),
        Some(text) => Ok(Some(parse::bytes("--memory-budget", text)?)),
    }
}

/// `--json`: the file's directory must exist before the run, not only when it ends.
fn check_json_directory(path: Option<&Path>) -> Result<(), String> {
    if let Some(path) = path {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(format!("--json {}: directory {} does not exist", path.display(), parent.display()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> Result<BenchConfig, String> {
        let all: Vec<&str> = std::iter::once("strata bench").chain(args.iter().copied()).collect();
        let parsed = BenchArgs::try_parse_from(all).map_err(|e| first_line_of_clap_error(&e))?;
        build_config(parsed, Vec::new())
    }

    #[test]
    fn defaults_are_a_quick_run() {
        let c = config(&[]).unwrap();
        assert_eq!(c.engines, vec!["memory"]);
        assert_eq!(c.workloads.len(), 1);
        assert_eq!(c.records, 100_000);
        assert_eq!(c.ops, Some(100_000));
        assert_eq!(c.values, ValueSpec::fixed(120));
        assert_eq!(
            c.keys,
            KeySpec { format: KeyFormat::Int, key_bytes: Some(8), hashed: true, clustered_inserts: None }
        );
        // Larger than memory by default: the budget is a quarter of the data.
        assert!(c.loaded_bytes_estimate() as f64 / c.effective_memory_budget_bytes() as f64 >= 3.0);
    }

    #[test]
    fn presets_mixes_and_workload_lists() {
        let c = config(&["--preset", "udb", "--workload", "load,a,c,mix", "--mix", "read=1,scan=1"]).unwrap();
        assert_eq!(c.keys.key_bytes, Some(27));
        assert_eq!(c.values, ValueSpec::fixed(127));
        assert_eq!(c.workloads.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(), vec!["a", "c", "mix"]);
        let c = config(&["--preset", "ycsb"]).unwrap();
        assert_eq!((c.keys.format, c.keys.key_bytes), (KeyFormat::String, None));
        let c = config(&["--key-format", "string", "--value-bytes", "10..20", "--duration", "2"]).unwrap();
        assert_eq!((c.keys.key_bytes, c.ops, c.values.max_bytes), (None, None, 20));
        assert!(config(&["--workload", "load"]).unwrap().workloads.is_empty());
    }

    #[test]
    fn from_checkpoint_needs_aging_first() {
        assert!(config(&["--workload", "age,a,c", "--from-checkpoint"]).unwrap().from_checkpoint);
        assert!(config(&["--workload", "a,c", "--from-checkpoint"]).is_ok());
        let late = config(&["--workload", "a,age,c", "--from-checkpoint"]).unwrap_err();
        assert!(late.contains("must come before"), "{late}");
        assert!(config(&["--workload", "a,age,c"]).is_ok());
    }

    #[test]
    fn clustered_inserts_take_a_spacing() {
        let hot = |args: &[&str]| config(args).map(|c| c.keys.clustered_inserts.map(|k| k.hot_regions));
        assert_eq!(hot(&["--records", "2000000"]).unwrap(), None);
        assert_eq!(hot(&["--records", "2000000", "--insert-keys", "clustered"]).unwrap(), Some(2_000));
        assert_eq!(hot(&["--records", "2000000", "--insert-keys", "clustered:10000"]).unwrap(), Some(200));
        for bad in ["clustered:0", "clustered:x", "clustered:", "spread:4", "hot"] {
            let err = hot(&["--insert-keys", bad]).unwrap_err();
            assert!(err.contains("--insert-keys") && !err.contains('\n'), "{bad}: {err}");
        }
    }

    #[test]
    fn distributions_and_repeats() {
        let c = config(&["--distribution", "zipfian-plain", "--repeat", "3"]).unwrap();
        assert_eq!(c.distribution, Some(DistributionKind::ZipfianPlain));
        assert_eq!(c.repeat, 3);
        let c = config(&["--distribution", "scattered", "--zipf-theta", "0.9"]).unwrap();
        assert_eq!(c.distribution, Some(DistributionKind::Scattered));
        assert_eq!(config(&[]).unwrap().repeat, 1);
    }

    #[test]
    fn bad_arguments_are_one_line_errors() {
        for bad in [
            &["--records", "0"][..],
            &["--records", "many"],
            &["--threads", "0"],
            &["--zipf-theta", "1.0"],
            &["--workload", "z"],
            &["--workload", "mix"],
            &["--mix", "read=70", "--workload", "a"],
            &["--engines", "nosuch"],
            &["--engines", ""],
            &["--distribution", "pareto"],
            &["--repeat", "0"],
            &["--repeat", "-1"],
            &["--repeat", "x"],
            &["--key-format", "string", "--key-bytes", "10"],
            &["--key-bytes", "4"],
            &["--memory-budget", "lots"],
            &["--value-bytes", "9..1"],
            &["--load-order", "sideways"],
            &["--ops", "5", "--duration", "1"],
            &["--json", "/nonexistent-dir/x.json"],
            &["--hotspot", "2,3"],
            &["--no-such-flag"],
        ] {
            let e = config(bad).unwrap_err();
            assert!(!e.is_empty() && !e.contains('\n'), "{bad:?}: {e:?}");
        }
    }
}
