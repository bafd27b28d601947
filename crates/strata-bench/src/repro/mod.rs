//! `strata repro <paper>`: one command per paper that runs its headline experiments in the
//! paper's shape, scaled to this machine (the scale factor is printed), and prints our numbers
//! beside the paper's, with both machines named. Each experiment is an ordinary `strata bench`
//! run (same runner, same report), so `--json-dir` keeps every measurement.
//!
//! - `flex`: FlexTree Table 1 (append, lookup, insert-at-front) and Table 2's random 4 KiB insert
//!   through FlexFile and through the filesystem's insert-range, in process (the functions
//!   engine-flex's cargo benches call); then YCSB A–F vs RocksDB in Fig 13's shape (UDB record
//!   sizes, Fig 13b's memory-to-data ratio).
//! - `f2`: Fig 10's YCSB A/B/C/F and Table 2's I/O amplification (zipfian-plain θ 0.99, 8 B keys +
//!   100 B values, budget 10% of the data), Fig 13's memory-budget sweep (2.5%–25%, A and B),
//!   Fig 12's skew sweep and Fig 2's death spiral against FASTER's single log (`f2.rs`).
//! - `treeline`: Fig 5/7's YCSB A/B/C/F and E (scattered zipfian θ 0.99, E also uniform) on an aged
//!   store at 64 B and 1024 B records, budget a third of the data, with Table 4's device bytes per
//!   operation; Fig 8's factor analysis; §5.5's insert forecasting on 50% reads / 50% inserts.
//! - `turtle`: Fig 8's YCSB load, A, B, C, E, F against RocksDB at a third of the data and with
//!   the data fitting (zipfian-plain θ 0.99, 8 B keys + 120 B values, χ auto), Fig 10's tail
//!   latencies, Fig 9's throughput and Fig 3c's write amplification against χ, and Fig 9e's
//!   write amplification at a quarter of the records.

mod f2;
mod flex;
mod laser;
mod laser_model;
mod laser_shift;
mod papers;
mod render;
mod treeline;
mod turtle;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

use crate::config::BenchConfig;
use crate::report::BenchReport;
use crate::runner;
use crate::workload::{DistributionKind, KeySpec, ValueSpec, Workload};
use papers::PaperShape;

#[derive(Parser, Debug)]
#[command(
    name = "strata repro",
    about = "Run a paper's headline experiments in its shape, scaled to this machine, and print our \
             numbers beside the paper's.",
    disable_version_flag = true
)]
struct ReproArgs {
    /// Which paper: flex (FlexFile/FlexDB), f2, treeline, turtle (TurtleKV) or laser.
    #[arg(value_name = "PAPER")]
    paper: String,
    /// A few minutes: 400k records and 200k operations per workload instead of the full scale (flex:
    /// also 10^7 appends for Table 1 and a 64 MiB file for the insert-range experiment).
    #[arg(long)]
    quick: bool,
    /// Rounds of every engine (`strata bench --repeat`); medians are reported.
    #[arg(long, default_value_t = 1, value_name = "N")]
    repeat: u32,
    /// Worker threads (the papers used 16; this machine has 2 cores).
    #[arg(long, default_value_t = 2, value_name = "N")]
    threads: u32,
    /// The RocksDB variant to compare with (rocksdb, rocksdb-weak, rocksdb-point).
    #[arg(long, default_value = "rocksdb", value_name = "ENGINE")]
    rocksdb: String,
    /// Parent directory for the data (default: the system temp dir).
    #[arg(long, value_name = "PATH")]
    dir: Option<PathBuf>,
    /// Also write each experiment's full report as JSON into this directory.
    #[arg(long, value_name = "DIR")]
    json_dir: Option<PathBuf>,
    /// No progress lines (the tables are still printed).
    #[arg(long)]
    quiet: bool,
    /// Only these parts of the paper's experiments, comma-separated (laser: htap, model, shift;
    /// f2: fig10, fig13, fig12, fig2).
    #[arg(long, value_name = "PARTS", value_delimiter = ',')]
    only: Vec<String>,
}

impl ReproArgs {
    /// Whether part `part` runs (`--only` names it, or no `--only` was given).
    fn runs_part(&self, part: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|p| p == part)
    }
}

/// Records and operations per workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Scale {
    records: u64,
    ops: u64,
}

const QUICK: Scale = Scale { records: 400_000, ops: 200_000 };

/// Runs `strata repro` with `args` (everything after `repro`).
pub fn main_with_args(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = std::iter::once(OsString::from("strata repro")).chain(args).collect();
    let parsed = match ReproArgs::try_parse_from(&args) {
        Ok(p) => p,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            // clap's message up to its usage lines, as one line.
            let text = e.render().to_string();
            let message: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            return error(2, message.join(" ").trim_start_matches("error:").trim());
        }
    };
    if let Err(e) = validate(&parsed) {
        return error(2, &e);
    }
    let started = Instant::now();
    let result = match parsed.paper.as_str() {
        "f2" => f2::repro(&parsed),
        "flex" => flex::repro(&parsed),
        "treeline" => treeline::repro(&parsed),
        "turtle" => turtle::repro(&parsed),
        "laser" => laser::repro(&parsed),
        _ => unreachable!("validated"),
    };
    match result {
        Ok(()) => {
            println!("\ntotal time {:.0} s", started.elapsed().as_secs_f64());
            ExitCode::SUCCESS
        }
        Err(e) => error(1, &e),
    }
}

fn error(code: u8, message: &str) -> ExitCode {
    eprintln!("strata repro: error: {}", crate::engines::one_line(message));
    ExitCode::from(code)
}

fn validate(a: &ReproArgs) -> Result<(), String> {
    if !["f2", "flex", "treeline", "turtle", "laser"].contains(&a.paper.as_str()) {
        return Err(format!("unknown paper {:?}; expected flex, f2, treeline, turtle or laser", a.paper));
    }
    let parts: &[&str] = match a.paper.as_str() {
        "laser" => &["htap", "model", "shift"],
        "f2" => &f2::PARTS,
        _ => &[],
    };
    if let Some(unknown) = a.only.iter().find(|p| !parts.contains(&p.as_str())) {
        return Err(format!("--only {unknown:?}: {}'s parts are {:?}", a.paper, parts));
    }
    if a.repeat == 0 || a.repeat > 100 {
        return Err(format!("--repeat {}: expected 1 to 100 rounds", a.repeat));
    }
    if a.threads == 0 || a.threads > 1024 {
        return Err(format!("--threads {}: expected 1 to 1024", a.threads));
    }
    if !a.rocksdb.starts_with("rocksdb") {
        return Err(format!("--rocksdb {:?}: expected rocksdb, rocksdb-weak or rocksdb-point", a.rocksdb));
    }
    // laser's HTAP systems are Strata's (PostgreSQL and DuckDB are not run yet): no RocksDB.
    if a.paper != "laser" {
        crate::engines::resolve(&a.rocksdb)?;
    }
    if let Some(dir) = &a.json_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("--json-dir {}: {e}", dir.display()))?;
    }
    Ok(())
}

/// One experiment's run.
struct Run<'a> {
    args: &'a ReproArgs,
    engines: Vec<String>,
    workloads: &'a [&'a str],
    scale: Scale,
    keys: KeySpec,
    values: ValueSpec,
    distribution: Option<DistributionKind>,
    /// The zipfian distributions' θ.
    zipf_theta: f64,
    budget_fraction: f64,
    /// Run each workload this long instead of `scale.ops` operations.
    duration: Option<std::time::Duration>,
    /// Record throughput per interval of this length (`strata bench --timeline`).
    timeline_interval: Option<std::time::Duration>,
    /// Load with each engine's bulk path (`--load-mode bulk`), as the paper loaded.
    bulk_load: bool,
    /// Start each measured workload from a copy of the aged store (`--from-checkpoint`).
    from_checkpoint: bool,
}

impl Run<'_> {
    fn budget_bytes(&self) -> u64 {
        let record = self.keys.typical_key_bytes() as f64 + self.values.mean_bytes();
        ((self.scale.records as f64 * record * self.budget_fraction) as u64).max(1 << 20)
    }

    fn config(&self) -> Result<BenchConfig, String> {
        let workloads =
            self.workloads.iter().map(|w| Workload::named(w)).collect::<Result<Vec<_>, String>>()?;
        Ok(BenchConfig {
            engines: self.engines.clone(),
            workloads,
            records: self.scale.records,
            ops: if self.duration.is_some() { None } else { Some(self.scale.ops) },
            duration: self.duration,
            timeline_interval: self.timeline_interval,
            threads: self.args.threads,
            distribution: self.distribution,
            zipf_theta: self.zipf_theta,
            hotspot_keys_fraction: 0.2,
            hotspot_ops_fraction: 0.8,
            keys: self.keys,
            values: self.values,
            preset: None,
            memory_budget_bytes: Some(self.budget_bytes()),
            direct_io: true,
            sync_writes: false,
            seed: 42,
            max_scan_length: 100,
            dir: self.args.dir.clone(),
            quiet: self.args.quiet,
            drop_caches: true,
            reopen_after_kill: false,
            bulk_load: self.bulk_load,
            from_checkpoint: self.from_checkpoint,
            custom_mix: None,
            repeat: self.args.repeat,
            command_line: std::env::args().collect(),
        })
    }

    /// Runs it; writes `<name>.json` into `--json-dir` when given.
    fn execute(&self, name: &str) -> Result<BenchReport, String> {
        if !self.args.quiet {
            eprintln!("== {name}: {} records, budget {}", self.scale.records, self.budget_bytes());
        }
        let report = runner::run(&self.config()?)?;
        if let Some(dir) = &self.args.json_dir {
            let path = dir.join(format!("{name}.json"));
            let text = serde_json::to_string_pretty(&report).map_err(|e| format!("encoding JSON: {e}"))?;
            std::fs::write(&path, text + "\n").map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
        Ok(report)
    }
}

fn header(shape: &PaperShape, scale: Scale, budget_fraction: f64, args: &ReproArgs, report: &BenchReport) {
    println!("paper: {}", shape.paper);
    println!("  paper's machine: {}", shape.machine);
    println!("  this machine:    {}", report.machine.one_line());
    println!(
        "  scale factor {:.4}: {} of the paper's {} records; memory budget {:.1}% of the data ({}); \
         {} thread(s); {} per workload; {} round(s)",
        scale.records as f64 / shape.records as f64,
        crate::report::fmt_count(scale.records),
        crate::report::fmt_count(shape.records),
        budget_fraction * 100.0,
        crate::report::fmt_bytes(report.workload.memory_budget_bytes),
        args.threads,
        match report.workload.duration_secs {
            Some(secs) => format!("{secs:.0} s"),
            None => format!("{} ops", crate::report::fmt_count(scale.ops)),
        },
        args.repeat,
    );
}

impl<'a> Run<'a> {
    /// The same experiment shape (for variations with `..`).
    fn clone_shape(&self) -> Run<'a> {
        Run {
            args: self.args,
            engines: self.engines.clone(),
            workloads: self.workloads,
            scale: self.scale,
            keys: self.keys,
            values: self.values,
            distribution: self.distribution,
            zipf_theta: self.zipf_theta,
            budget_fraction: self.budget_fraction,
            duration: self.duration,
            timeline_interval: self.timeline_interval,
            bulk_load: self.bulk_load,
            from_checkpoint: self.from_checkpoint,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::KeyFormat;

    fn parse(list: &[&str]) -> Result<ReproArgs, String> {
        let all: Vec<&str> = std::iter::once("strata repro").chain(list.iter().copied()).collect();
        ReproArgs::try_parse_from(all).map_err(|e| e.to_string())
    }

    fn args(list: &[&str]) -> Result<ReproArgs, String> {
        let parsed = parse(list)?;
        validate(&parsed).map(|()| parsed)
    }

    #[test]
    fn papers_and_bad_arguments() {
        // Valid only where the RocksDB peer is compiled in (otherwise a one-line error says how).
        assert_eq!(args(&["f2", "--quick"]).is_ok(), cfg!(feature = "rocksdb"));
        assert_eq!(args(&["flex", "--rocksdb", "rocksdb-weak"]).is_ok(), cfg!(feature = "rocksdb"));
        assert_eq!(args(&["treeline", "--quick"]).is_ok(), cfg!(feature = "rocksdb"));
        assert_eq!(args(&["turtle", "--quick"]).is_ok(), cfg!(feature = "rocksdb"));
        assert!(args(&["laser", "--quick"]).is_ok());
        for bad in [&["rocks"][..], &["f2", "--repeat", "0"], &["f2", "--rocksdb", "lmdb"], &[]] {
            assert!(args(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn budgets_follow_the_papers_fraction_of_the_data() {
        let a = parse(&["f2", "--quick"]).unwrap();
        let run = Run {
            args: &a,
            engines: vec!["f2".into()],
            workloads: &["a"],
            scale: f2::F2_FULL,
            keys: KeySpec {
                format: KeyFormat::Int,
                key_bytes: Some(8),
                hashed: true,
                clustered_inserts: None,
            },
            values: ValueSpec::fixed(100),
            distribution: Some(DistributionKind::ZipfianPlain),
            zipf_theta: crate::workload::zipfian::DEFAULT_THETA,
            budget_fraction: papers::F2.budget_fraction,
            duration: None,
            timeline_interval: None,
            bulk_load: false,
            from_checkpoint: false,
        };
        // 20M x 108 B x 10% = 216 MB, the full-scale f2 run's budget.
        assert_eq!(run.budget_bytes(), 216_000_000);
        let config = run.config().unwrap();
        assert!(config.direct_io && config.distribution == Some(DistributionKind::ZipfianPlain));
    }
}
