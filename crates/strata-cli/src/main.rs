//! `strata`: command-line access to a Strata database directory.
//! Scripts depend on these forms; see `strata --help`.

mod advise;
mod demo;
mod escape;
mod serve;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use strata::{
    Capabilities, Db, Direction, EngineKind, Error, KeyRange, MaintenanceTask, Options, VerifyReport,
};

#[derive(Parser)]
#[command(name = "strata", version, about = "Strata: five storage engine designs behind one key-value API.")]
#[command(long_about = "Strata: five storage engine designs behind one key-value API.\n\n\
Create a store once with `strata create <dir> --engine <kind>`; every other command reads the engine \
from the directory's manifest. Keys and values are taken literally from the arguments; output escapes \
non-printable bytes as \\xNN and backslash as \\\\.")]
struct Cli {
    /// An engine knob for this open, NAME=VALUE, repeatable (`--option max_interval_records=64`
    /// for flex); an unknown name is an error listing the engine's knobs. Knobs are not stored.
    #[arg(long = "option", value_name = "NAME=VALUE", global = true, value_parser = engine_option)]
    options: Vec<(String, String)>,
    #[command(subcommand)]
    command: Command,
}

fn maintenance_task(text: &str) -> Result<MaintenanceTask, String> {
    MaintenanceTask::from_name(text).ok_or_else(|| {
        let names: Vec<&str> = MaintenanceTask::ALL.iter().map(|t| t.name()).collect();
        format!("unknown task {text:?}; expected one of: {}", names.join(", "))
    })
}

fn engine_option(text: &str) -> Result<(String, String), String> {
    strata::parse_engine_option(text).ok_or_else(|| format!("expected NAME=VALUE, got {text:?}"))
}

#[derive(Subcommand)]
enum Command {
    /// Create a new, empty database in <dir> (the directory may exist but must be empty).
    Create {
        dir: PathBuf,
        /// Engine: memory, treeline, turtle, laser, flex or f2.
        #[arg(long)]
        engine: EngineKind,
    },
    /// Store <value> under <key> (durable when the command returns).
    Put { dir: PathBuf, key: String, value: String },
    /// Print the value stored under <key>; exit status 1 if the key is absent.
    Get { dir: PathBuf, key: String },
    /// Remove <key> (no error if it is absent).
    Delete { dir: PathBuf, key: String },
    /// Print records in key order, one `key<TAB>value` line each.
    Scan {
        dir: PathBuf,
        /// Only keys starting with this prefix.
        #[arg(long)]
        prefix: Option<String>,
        /// Start at this key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// Stop before this key (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// Largest key first.
        #[arg(long)]
        reverse: bool,
        /// Print at most N records.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Print the engine's statistics.
    Stats { dir: PathBuf },
    /// Read every persisted byte and check every checksum; exit status 0 only if all is well.
    Verify { dir: PathBuf },
    /// Run one of the engine's maintenance tasks now: commit, compact or checkpoint (`strata
    /// stats` lists the ones the engine has).
    Maintain {
        dir: PathBuf,
        #[arg(value_parser = maintenance_task)]
        task: MaintenanceTask,
    },
    /// Create a store, write, read, scan, restart and check it survived, printing each step.
    Demo {
        /// Where to put the demo store (default: a fresh temporary directory, removed afterwards).
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long, default_value = "memory")]
        engine: EngineKind,
        /// Number of records to write.
        #[arg(long, default_value_t = 100_000)]
        records: u64,
    },
    /// LASER's design advisor on a workload trace: the column groups per level that the cost
    /// model (paper §5–§6) finds cheapest, beside rows and columns.
    Advise {
        /// The trace: `columns C`, `levels L`, `insert N`, `read LEVEL COUNT COLUMNS`,
        /// `scan LEVEL COUNT ENTRIES COLUMNS`, `update LEVEL COUNT COLUMNS` lines.
        #[arg(long)]
        trace: PathBuf,
        /// Levels to lay out (default: the trace's `levels`).
        #[arg(long)]
        levels: Option<usize>,
    },
    /// Serve the store over the Redis protocol (RESP2/RESP3): redis-cli, redis-benchmark and any
    /// Redis client work against it (docs/server.md lists the commands).
    Serve(serve::ServeArgs),
    /// YCSB-style benchmark of engines on one identical trace; `strata bench --help` for options.
    #[command(disable_help_flag = true)]
    Bench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<std::ffi::OsString>,
    },
    /// Run a paper's headline experiments scaled to this machine, beside the paper's numbers:
    /// `strata repro flex|f2|treeline|turtle|laser [--quick]`; `strata repro --help` for options.
    #[command(disable_help_flag = true)]
    Repro {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<std::ffi::OsString>,
    },
}

enum Outcome {
    Done,
    NotFound(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench { args } => return strata_bench::cli::main_with_args(args),
        Command::Repro { args } => return strata_bench::repro::main_with_args(args),
        _ => {}
    }
    match run(cli.command, &cli.options) {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::NotFound(what)) => {
            eprintln!("strata: {what}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("strata: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(command: Command, knobs: &[(String, String)]) -> Result<Outcome, Error> {
    if let Some(name) = strata::repeated_option_name(knobs) {
        return Err(Error::invalid(format!("--option {name} is given twice")));
    }
    let with_knobs = |options: Options| knobs.iter().fold(options, |o, (n, v)| o.engine_option(n, v));
    let open_existing = |dir: &PathBuf| Db::open(dir, with_knobs(Options::existing()));
    let mut out = std::io::stdout().lock();
    let io_err = |e: std::io::Error| Error::io("writing to stdout", e);
    match command {
        Command::Create { dir, engine } => {
            let db = Db::open(&dir, with_knobs(Options::new(engine).error_if_exists(true)))?;
            db.close()?;
            writeln!(out, "created a '{engine}' database in {}", dir.display()).map_err(io_err)?;
        }
        Command::Put { dir, key, value } => {
            let db = open_existing(&dir)?;
            db.put_with(key, value, strata::Durability::Sync)?;
            db.close()?;
        }
        Command::Get { dir, key } => {
            let db = open_existing(&dir)?;
            match db.get(&key)? {
                Some(v) => writeln!(out, "{}", escape::bytes(&v)).map_err(io_err)?,
                None => {
                    return Ok(Outcome::NotFound(format!("key {} not found", escape::bytes(key.as_bytes()))))
                }
            }
            db.close()?;
        }
        Command::Delete { dir, key } => {
            let db = open_existing(&dir)?;
            db.delete_with(key, strata::Durability::Sync)?;
            db.close()?;
        }
        Command::Scan { dir, prefix, from, to, reverse, limit } => {
            let db = open_existing(&dir)?;
            let direction = if reverse { Direction::Reverse } else { Direction::Forward };
            print_scan(&db, scan_range(prefix, from, to), direction, limit, &mut out)?;
            db.close()?;
        }
        Command::Stats { dir } => {
            let db = open_existing(&dir)?;
            for (k, v) in stats_lines(&db)? {
                writeln!(out, "{k}\t{v}").map_err(io_err)?;
            }
            db.close()?;
        }
        Command::Verify { dir } => {
            let db = open_existing(&dir)?;
            let summary = verify_summary(&db.verify()?);
            writeln!(out, "{summary}").map_err(io_err)?;
            db.close()?;
        }
        Command::Maintain { dir, task } => {
            let db = open_existing(&dir)?;
            db.maintain(task)?;
            db.close()?;
            writeln!(out, "{} done", task.name()).map_err(io_err)?;
        }
        Command::Demo { dir, engine, records } => demo::run(dir, engine, records, &mut out)?,
        Command::Advise { trace, levels } => advise::run(&trace, levels, &mut out)?,
        Command::Serve(args) => serve::run(args, knobs)?,
        // Dispatched in `main` before `run`.
        Command::Bench { .. } | Command::Repro { .. } => {}
    }
    Ok(Outcome::Done)
}

/// `strata scan`: one `key<TAB>value` line per record, escaped, at most `limit` of them.
fn print_scan(
    db: &Db,
    range: KeyRange,
    direction: Direction,
    limit: Option<usize>,
    out: &mut impl Write,
) -> Result<(), Error> {
    for item in db.scan(range, direction)?.take(limit.unwrap_or(usize::MAX)) {
        let (k, v) = item?;
        writeln!(out, "{}\t{}", escape::bytes(&k), escape::bytes(&v))
            .map_err(|e| Error::io("writing to stdout", e))?;
    }
    Ok(())
}

/// `strata verify`'s line when every checksum matched.
fn verify_summary(r: &VerifyReport) -> String {
    format!(
        "ok: {} files, {} bytes, {} records checked; every checksum matched",
        r.files_checked, r.bytes_checked, r.records_checked
    )
}

/// `strata stats`: the engine's figures, then its capabilities, then its own counters.
fn stats_lines(db: &Db) -> Result<Vec<(String, String)>, Error> {
    let s = db.stats()?;
    let mut lines = vec![
        ("engine".to_string(), s.engine.clone()),
        ("live_keys".into(), s.live_keys.map_or("unknown".into(), |n| n.to_string())),
        ("memory_bytes".into(), s.memory_bytes.to_string()),
        ("disk_bytes".into(), s.disk_bytes.to_string()),
        ("io.bytes_read".into(), s.io.bytes_read.to_string()),
        ("io.bytes_written".into(), s.io.bytes_written.to_string()),
        ("io.sync_ops".into(), s.io.sync_ops.to_string()),
    ];
    lines.extend(capability_lines(&db.capabilities()));
    lines.extend(s.engine_counters.iter().map(|(k, v)| (k.clone(), v.to_string())));
    lines.extend(s.notices.iter().map(|n| ("notice".to_string(), n.clone())));
    Ok(lines)
}

/// `stats` lines for what the engine supports.
fn capability_lines(caps: &Capabilities) -> Vec<(String, String)> {
    let list = |items: Vec<&str>| if items.is_empty() { "none".to_string() } else { items.join(",") };
    vec![
        ("capabilities.ordered".into(), caps.ordered.to_string()),
        ("capabilities.point_in_time_scans".into(), caps.point_in_time_scans.to_string()),
        ("capabilities.prefix_consistent_recovery".into(), caps.prefix_consistent_recovery.to_string()),
        ("capabilities.columnar".into(), caps.columnar.to_string()),
        ("capabilities.runtime_options".into(), list(caps.runtime_options.to_vec())),
        ("capabilities.maintenance".into(), list(caps.maintenance.iter().map(|t| t.name()).collect())),
    ]
}

/// `--prefix` narrows to the prefix; `--from`/`--to` narrow further.
fn scan_range(prefix: Option<String>, from: Option<String>, to: Option<String>) -> KeyRange {
    use std::ops::Bound;
    let mut range = match prefix {
        Some(p) => KeyRange::prefix(p.as_bytes()),
        None => KeyRange::all(),
    };
    if let Some(from) = from {
        let tighter = match &range.start {
            Bound::Included(s) | Bound::Excluded(s) => from.as_bytes() > s.as_slice(),
            Bound::Unbounded => true,
        };
        if tighter {
            range.start = Bound::Included(from.into_bytes());
        }
    }
    if let Some(to) = to {
        let tighter = match &range.end {
            Bound::Included(e) | Bound::Excluded(e) => to.as_bytes() <= e.as_slice(),
            Bound::Unbounded => true,
        };
        if tighter {
            range.end = Bound::Excluded(to.into_bytes());
        }
    }
    range
}
