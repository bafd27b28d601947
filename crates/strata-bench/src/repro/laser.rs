//! `strata repro laser`: the LASER paper's HTAP workload (§7.2, Table 3, Fig 8), scaled to
//! this machine (`crate::htap`): one table of 30 four-byte columns loaded to about three times
//! the memory budget, a writer at 10,000 inserts/s with an update per hundred inserts, two
//! readers running Q2a and Q2b, then Q3 and Q4 over the final table, every analytical answer
//! checked against the driver's model. Systems: laser (T = 2, the paper's) choosing its own
//! layout (`auto`, the default), laser with the paper's D-opt (the design advisor's layout for
//! the workload trace the `auto` run recorded, from the start), laser held to rows and to columns (the paper's cg_size 30 and
//! 1), flex and turtle through the row-encoded fallback, and PostgreSQL 15 and DuckDB in a build
//! with the `postgres` and `duckdb` features. Then the cost model against measured I/O
//! (`laser_model`).

use strata::{Db, EngineKind, Options};

use super::render::print_rows;
use super::ReproArgs;
use crate::htap::workload::{Model, ROW_BYTES};
use crate::htap::{self, HtapResult, HtapShape, StrataTable};
use crate::metrics::machine::MachineInfo;

/// The paper: 400M rows loaded, 20M inserted at 10,000/s, 500k Q2a and Q2b, 12 Q3 and Q4.
const PAPER_ROWS: u64 = 400_000_000;
const PAPER_Q2: u64 = 500_000;

const FULL: HtapShape = HtapShape {
    loaded: 4_000_000,
    inserts: 200_000,
    insert_rate_per_sec: 10_000,
    q2a: 100_000,
    q2b: 100_000,
    analytic: 12,
    readers: 2,
};
const QUICK: HtapShape = HtapShape {
    loaded: 400_000,
    inserts: 40_000,
    insert_rate_per_sec: 10_000,
    q2a: 20_000,
    q2b: 20_000,
    analytic: 12,
    readers: 2,
};

/// A system: its name in the table, the engine, and its knobs (the schema is added to laser's).
type System = (&'static str, EngineKind, &'static [(&'static str, &'static str)]);

const SYSTEMS: [System; 5] = [
    ("laser (auto)", EngineKind::Laser, &[]),
    ("laser (rows)", EngineKind::Laser, &[("layout", "row")]),
    ("laser (columns)", EngineKind::Laser, &[("layout", "column")]),
    ("flex (row-encoded)", EngineKind::Flex, &[]),
    ("turtle (row-encoded)", EngineKind::Turtle, &[]),
];

/// Every system's rounds: its name, each round's result, and the last round's note.
type Runs = Vec<(&'static str, Vec<HtapResult>, String)>;

pub(super) fn repro(args: &ReproArgs) -> Result<(), String> {
    let parent = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&parent).map_err(|e| format!("cannot create --dir {}: {e}", parent.display()))?;
    if args.runs_part("htap") {
        htap_table(args, &parent)?;
    }
    if args.runs_part("model") {
        super::laser_model::validate(args, &parent)?;
    }
    if args.runs_part("shift") {
        super::laser_shift::shift(args, &parent)?;
    }
    Ok(())
}

/// Part 1: the HTAP workload on every system, the table of Fig 8.
fn htap_table(args: &ReproArgs, parent: &std::path::Path) -> Result<(), String> {
    let shape = if args.quick { QUICK } else { FULL };
    let data_bytes = (shape.loaded + shape.inserts) * (8 + ROW_BYTES as u64);
    let budget = data_bytes / 3;
    print_setting(args, parent, &shape, budget);
    progress(args, "building the model of the final table");
    let model = Model::build(shape.loaded, shape.loaded + shape.inserts);
    let mut runs: Runs = Vec::new();
    for round in 0..args.repeat {
        run_round(args, parent, round, budget, &shape, &model, &mut runs);
    }
    if runs.iter().all(|(_, results, _)| results.is_empty()) {
        return Err("every system failed (above)".into());
    }
    print_table(&runs, &shape);
    Ok(())
}

fn print_setting(args: &ReproArgs, parent: &std::path::Path, shape: &HtapShape, budget: u64) {
    let machine = MachineInfo::collect(parent);
    println!("paper: LASER, Real-Time LSM-Trees for HTAP Workloads (EDBT 2021), §7.2 Table 3 / Fig 8");
    println!("  paper's machine: 12 CPUs at 1.2 GHz, 16 GB RAM, a 4 TB rotating disk; LASER on RocksDB 5.14");
    println!("  this machine:    {}", machine.one_line());
    println!(
        "  scale factor {:.4}: {} rows loaded + {} inserted at {}/s (an update per {} inserts); {} Q2a, {} Q2b, \
         {} Q3, {} Q4; 2 readers; memory budget {} (a third of the data); direct I/O; {} round(s)",
        shape.loaded as f64 / PAPER_ROWS as f64,
        shape.loaded,
        shape.inserts,
        shape.insert_rate_per_sec,
        htap::workload::INSERTS_PER_UPDATE,
        shape.q2a,
        shape.q2b,
        shape.analytic,
        shape.analytic,
        crate::report::fmt_bytes(budget),
        args.repeat
    );
}

/// Adds a round of `name` to `runs`: its result and note (the note replacing the last), or the
/// error it failed with, which becomes its note (as the paper reports MonetDB's time limit: the
/// other systems' rows still print).
fn record(runs: &mut Runs, name: &'static str, outcome: Result<(HtapResult, String), String>) {
    let slot = match runs.iter().position(|r| r.0 == name) {
        Some(i) => &mut runs[i],
        None => {
            runs.push((name, Vec::new(), String::new()));
            runs.last_mut().expect("just pushed")
        }
    };
    match outcome {
        Ok((result, note)) => {
            slot.1.push(result);
            slot.2 = note;
        }
        Err(e) => {
            eprintln!("strata repro: {name} failed: {e}");
            slot.2 = format!("FAILED: {e}");
        }
    }
}

/// One round of every system, each on a fresh store.
fn run_round(
    args: &ReproArgs,
    parent: &std::path::Path,
    round: u32,
    budget: u64,
    shape: &HtapShape,
    model: &Model,
    runs: &mut Runs,
) {
    let trace = parent.join(format!("strata-repro-laser-{}.trace", std::process::id()));
    let trace_text = trace.display().to_string();
    for (name, kind, knobs) in SYSTEMS {
        progress(args, &format!("{name}, round {}", round + 1));
        // `auto` also writes its profiled workload as a trace: the paper's D-opt is the
        // advisor's layout for that trace (§7.2), run next from the start.
        let auto = name == "laser (auto)";
        if auto {
            // The trace appends: one a failed round left behind must not join this round's.
            let _ = std::fs::remove_file(&trace);
        }
        let traced: Vec<(&str, &str)> =
            if auto { vec![("trace_file", trace_text.as_str())] } else { Vec::new() };
        let knobs: Vec<(&str, &str)> = knobs.iter().copied().chain(traced).collect();
        let outcome = run_system(args, parent, kind, &knobs, budget, shape, model);
        let traced = outcome.is_ok();
        record(runs, name, outcome);
        if auto && traced {
            let outcome = advised_layout(&trace).and_then(|layout| {
                progress(args, &format!("laser (D-opt: {layout}), round {}", round + 1));
                let knobs = [("layout", layout.as_str())];
                let (result, note) = run_system(args, parent, kind, &knobs, budget, shape, model)?;
                Ok((result, format!("{note}; layout {layout}")))
            });
            record(runs, "laser (D-opt)", outcome);
        }
    }
    #[cfg(feature = "postgres")]
    {
        progress(args, &format!("PostgreSQL 15, round {}", round + 1));
        let outcome = run_postgres(args, parent, budget, shape, model);
        let note = "shared_buffers = the budget, OS page cache".to_string();
        record(runs, "PostgreSQL 15", outcome.map(|result| (result, note)));
    }
    #[cfg(feature = "duckdb")]
    {
        progress(args, &format!("DuckDB, round {}", round + 1));
        let outcome = run_duckdb(args, parent, budget, shape, model);
        let limit = crate::htap::duckdb::memory_limit_bytes(budget, shape.loaded + shape.inserts);
        let note = format!(
            "memory_limit {} (its key index lives in memory), OS page cache",
            crate::report::fmt_bytes(limit)
        );
        record(runs, "DuckDB 1.5", outcome.map(|result| (result, note)));
    }
}

fn print_table(runs: &Runs, shape: &HtapShape) {
    // Q2s in the paper's proportion to the rows (the run issues more, for steady latencies).
    let paper_q2 = (PAPER_Q2 as f64 * shape.loaded as f64 / PAPER_ROWS as f64).max(1.0);
    let rows: Vec<Vec<String>> =
        runs.iter().map(|(name, results, note)| row(name, results, note, paper_q2)).collect();
    if !cfg!(feature = "postgres") {
        println!(
            "  (PostgreSQL not in this build: `cargo build --release -p strata-cli --features postgres`)"
        );
    }
    if !cfg!(feature = "duckdb") {
        println!("  (DuckDB not in this build: `eval \"$(bash scripts/duckdb-lib.sh)\"`, then build with --features duckdb)");
    }
    let header = [
        "system",
        "load rows/s",
        "Q2a µs",
        "Q2b µs",
        "Q3 ms",
        "Q4 ms",
        "queries s (min–max)",
        "paper's mix s",
        "insert µs",
        "update µs",
        "answers",
        "layout",
    ];
    print_rows(&header, &rows);
    println!(
        "  queries s: the paper's total (Q2a + Q2b + Q3 + Q4 times); Q2 run beside the writer, Q3 and Q4 after it on the final \
         table. paper's mix s: the same total with the Q2s in the paper's proportion to the rows ({paper_q2:.0} Q2a and {paper_q2:.0} \
         Q2b at their mean latency; the run issues more for steady means). answers: Q3 and Q4 against the driver's model of the \
         final table."
    );
}

/// The design advisor's layout for the workload trace at `path` (written by a laser run with
/// `trace_file`), which is then removed.
fn advised_layout(path: &std::path::Path) -> Result<String, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading the trace {}: {e}", path.display()))?;
    let _ = std::fs::remove_file(path);
    let trace = engine_laser::advisor::Trace::parse(&text).map_err(|e| format!("the trace: {e}"))?;
    let advice = engine_laser::advisor::advise(&trace.params, &trace.workload, trace.levels);
    Ok(advice.layout.to_text())
}

pub(super) fn progress(args: &ReproArgs, line: &str) {
    if !args.quiet {
        eprintln!("== {line}");
    }
}

/// One system on a fresh store: load, workload, checks; and what layout laser ended with.
fn run_system(
    args: &ReproArgs,
    parent: &std::path::Path,
    kind: EngineKind,
    knobs: &[(&str, &str)],
    budget: u64,
    shape: &HtapShape,
    model: &Model,
) -> Result<(HtapResult, String), String> {
    let dir = run_dir(parent, "strata-repro-laser-")?;
    let mut options = Options::new(kind).memory_budget_bytes(budget).direct_io(true);
    if kind == EngineKind::Laser {
        // The paper's T = 2 (§7.2: deeper trees, so more levels can hold different layouts).
        options = options.engine_option("schema", "30x4").engine_option("size_ratio", "2");
    }
    for (name, value) in knobs {
        options = options.engine_option(*name, *value);
    }
    let db = Db::open(dir.path(), options).map_err(|e| format!("{kind}: {e}"))?;
    let store = StrataTable::new(&db).map_err(|e| format!("{kind}: {e}"))?;
    let result = load_and_run(args, kind.name(), &store, shape, model)?;
    let stats = db.stats().map_err(|e| format!("{kind}: stats: {e}"))?;
    let counter = |name: &str| stats.counter(name).unwrap_or(0);
    let note = if kind == EngineKind::Laser {
        let levels = counter("levels");
        let groups: Vec<String> =
            (1..=levels).map(|l| counter(&format!("level{l}_groups")).to_string()).collect();
        format!("groups per level {} ({} changes)", groups.join(","), counter("layout_changes"))
    } else {
        "-".into()
    };
    drop(store);
    db.close().map_err(|e| format!("{kind}: close: {e}"))?;
    Ok((result, note))
}

/// A system's row: medians over its rounds (the queries' total also with its min–max), and
/// whether every round's answers were right.
fn row(name: &str, results: &[HtapResult], note: &str, paper_q2: f64) -> Vec<String> {
    if results.is_empty() {
        let mut cells = vec![name.to_string()];
        cells.extend(std::iter::repeat_n("-".to_string(), 9));
        cells.extend(["FAILED".to_string(), note.to_string()]);
        return cells;
    }
    let median = |pick: &dyn Fn(&HtapResult) -> f64| {
        let mut values: Vec<f64> = results.iter().map(pick).collect();
        values.sort_by(f64::total_cmp);
        (values[values.len() / 2], values[0], values[values.len() - 1])
    };
    let fmt = |pick: &dyn Fn(&HtapResult) -> f64, digits: usize| format!("{:.*}", digits, median(pick).0);
    let (total, low, high) = median(&|r| r.query_total().as_secs_f64());
    let wrong: Vec<String> = results.iter().flat_map(|r| r.wrong_answers.clone()).collect();
    vec![
        name.to_string(),
        fmt(&|r| r.loaded_rows as f64 / r.load.as_secs_f64().max(1e-9), 0),
        fmt(&|r| r.q2a.mean_us(), 1),
        fmt(&|r| r.q2b.mean_us(), 1),
        fmt(&|r| r.q3.mean_us() / 1000.0, 1),
        fmt(&|r| r.q4.mean_us() / 1000.0, 1),
        if results.len() > 1 { format!("{total:.2} ({low:.2}–{high:.2})") } else { format!("{total:.2}") },
        fmt(&|r| r.paper_mix_total(paper_q2).as_secs_f64(), 2),
        fmt(&|r| r.inserts.mean_us(), 1),
        fmt(&|r| r.updates.mean_us(), 1),
        if wrong.is_empty() { "ok".into() } else { format!("WRONG: {}", wrong.join("; ")) },
        note.to_string(),
    ]
}

/// A directory for one system's run under `parent`, removed when dropped.
fn run_dir(parent: &std::path::Path, prefix: &str) -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(parent)
        .map_err(|e| format!("cannot create a directory under {}: {e}", parent.display()))
}

/// The load and the workload on `store` (named `system` in errors).
fn load_and_run(
    args: &ReproArgs,
    system: &str,
    store: &dyn htap::HtapStore,
    shape: &HtapShape,
    model: &Model,
) -> Result<HtapResult, String> {
    let load = htap::load(store, shape.loaded).map_err(|e| format!("{system}: load: {e}"))?;
    progress(args, &format!("loaded in {:.1} s", load.as_secs_f64()));
    let mut result = htap::run(store, shape, model).map_err(|e| format!("{system}: {e}"))?;
    result.load = load;
    result.loaded_rows = shape.loaded;
    Ok(result)
}

/// PostgreSQL 15 in a private cluster (scripts/postgres.sh), `shared_buffers` the budget.
#[cfg(feature = "postgres")]
fn run_postgres(
    args: &ReproArgs,
    parent: &std::path::Path,
    budget: u64,
    shape: &HtapShape,
    model: &Model,
) -> Result<HtapResult, String> {
    let dir = run_dir(parent, "strata-repro-pg-")?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres.sh");
    let port = 54_300 + std::process::id() % 600;
    let buffers = format!("{}kB", (budget / 1024).max(128));
    let started = std::process::Command::new("bash")
        .args([script, "start", &dir.path().display().to_string(), &port.to_string(), &buffers])
        .output()
        .map_err(|e| format!("starting PostgreSQL: {e}"))?;
    if !started.status.success() {
        return Err(format!("starting PostgreSQL: {}", String::from_utf8_lossy(&started.stderr).trim()));
    }
    let conninfo = String::from_utf8_lossy(&started.stdout).trim().to_string();
    let outcome = crate::htap::postgres::Postgres::connect(&conninfo)
        .map_err(|e| format!("PostgreSQL: {e}"))
        .and_then(|store| load_and_run(args, "PostgreSQL", &store, shape, model));
    let _ =
        std::process::Command::new("bash").args([script, "stop", &dir.path().display().to_string()]).output();
    outcome
}

/// DuckDB, file-backed, `memory_limit` the budget (at least what its key index needs).
#[cfg(feature = "duckdb")]
fn run_duckdb(
    args: &ReproArgs,
    parent: &std::path::Path,
    budget: u64,
    shape: &HtapShape,
    model: &Model,
) -> Result<HtapResult, String> {
    let dir = run_dir(parent, "strata-repro-duckdb-")?;
    let limit = crate::htap::duckdb::memory_limit_bytes(budget, shape.loaded + shape.inserts);
    let store = crate::htap::duckdb::DuckDb::create(&dir.path().join("htap.duckdb"), limit)
        .map_err(|e| format!("DuckDB: {e}"))?;
    load_and_run(args, "DuckDB", &store, shape, model)
}
