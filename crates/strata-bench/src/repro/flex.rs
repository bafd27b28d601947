//! `strata repro flex`: the FlexFile paper's headline experiments, scaled to this machine.
//!
//! 1. Table 1 (§6.1): append N extents, look each up, insert M extents at the front, for FlexTree,
//!    a `BTreeMap` extent index (the paper's B+-tree) and a sorted `Vec` (its sorted array).
//! 2. Table 2's random insert (§6.2): a file grows by random 4 KiB inserts, through FlexFile and
//!    through the filesystem's own insert-range (`fallocate(FALLOC_FL_INSERT_RANGE)`) in the repro
//!    directory; a filesystem that refuses it (tmpfs, overlayfs) is reported as not measured.
//! 3. Fig 13: YCSB A–F with UDB record sizes vs RocksDB (an ordinary `strata bench` run).
//!
//! 1 and 2 run in this process through `engine_flex::experiments`, the functions engine-flex's
//! cargo benches call too; they run first, while nothing else of ours loads the machine.

use std::path::Path;
use std::time::{Duration, Instant};

use engine_flex::experiments::{
    self, FsInsertOutcome, IndexKind, IndexTimes, InsertLimits, InsertRun, Table1Sizes, BLOCK_BYTES,
};

use super::papers::{self, FLEXFILE_PAPER_FILE_BYTES, FLEXTREE_PAPER_APPENDS};
use super::render::print_rows;
use super::{header, render, ReproArgs, Run, Scale, QUICK};
use crate::metrics::machine::MachineInfo;
use crate::report::{fmt_bytes, fmt_count};
use crate::workload::{KeySpec, ValueSpec};

/// The full-scale YCSB run: 10M UDB records.
const FLEX_FULL: Scale = Scale { records: 10_000_000, ops: 1_000_000 };

/// Sizes of the two data-structure experiments.
struct StructureScale {
    table1: Table1Sizes,
    insert: InsertLimits,
}

/// About half a minute on the 2-core VM: a tenth of Table 1's appends and its 10^5 front-insert
/// column; the file to 128 MiB (ext4's insert-range costs O(file) per insert, so its time grows
/// with the square of the size: about 15 s here).
const QUICK_STRUCTURES: StructureScale = StructureScale {
    table1: Table1Sizes { appends: 10_000_000, front_inserts: 100_000, baseline_front_inserts: 10_000 },
    insert: InsertLimits { total_bytes: 128 << 20, deadline: Some(Duration::from_secs(30)) },
};

/// A few minutes: Table 1's 10^8 appends and 10^6 front inserts, the paper's 1 GiB file. ext4
/// would need about 7 minutes for 1 GiB here, so it stops at a deadline and says how far it got.
const FULL_STRUCTURES: StructureScale = StructureScale {
    table1: Table1Sizes { appends: 100_000_000, front_inserts: 1_000_000, baseline_front_inserts: 20_000 },
    insert: InsertLimits { total_bytes: 1 << 30, deadline: Some(Duration::from_secs(180)) },
};

/// Insert sequences are seeded so reruns draw the same offsets.
const INSERT_SEED: u64 = 42;

pub(super) fn repro(args: &ReproArgs) -> Result<(), String> {
    let scale = if args.quick { &QUICK_STRUCTURES } else { &FULL_STRUCTURES };
    let parent = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&parent).map_err(|e| format!("cannot create --dir {}: {e}", parent.display()))?;
    // Removed when dropped, whatever happens below.
    let dir = tempfile::Builder::new()
        .prefix("strata-repro-flex-")
        .tempdir_in(&parent)
        .map_err(|e| format!("cannot create a directory under {}: {e}", parent.display()))?;
    let machine = MachineInfo::collect(dir.path());
    table1(args, scale.table1, &machine)?;
    insert_range(args, scale.insert, dir.path(), &machine)?;
    drop(dir);
    ycsb(args)
}

fn progress(args: &ReproArgs, line: &str) {
    if !args.quiet {
        eprintln!("== {line}");
    }
}

fn table1(args: &ReproArgs, sizes: Table1Sizes, machine: &MachineInfo) -> Result<(), String> {
    progress(args, &format!("FlexTree Table 1: {} appends per index", fmt_count(sizes.appends)));
    let started = Instant::now();
    let rows = experiments::run_table1(sizes).map_err(|e| format!("FlexTree Table 1: {e}"))?;
    let secs = started.elapsed().as_secs_f64();
    // A wrong answer is a bug, not a measurement.
    for row in &rows {
        if row.lookups_correct != row.appends || row.front_lookups_correct != row.front_inserts_measured {
            return Err(format!("FlexTree Table 1: {} returned wrong addresses: {row:?}", row.kind.name()));
        }
    }
    let paper_fronts = if sizes.front_inserts <= 316_228 { 100_000 } else { 1_000_000 };
    println!("\n=== FlexTree Table 1: extent index append, lookup, insert-at-front (§6.1), in memory ===");
    println!("  paper's machine: {}", papers::FLEX_STRUCTURES_MACHINE);
    println!("  this machine:    {}", machine.one_line());
    println!(
        "  scale factor {:.4}: {} appends and lookups of the paper's {}; {} front inserts against the \
         paper's {} column (scale {:.2}); the O(N)-per-insert baselines run {} front inserts and their \
         total is extrapolated as time x (n / measured)^2",
        sizes.appends as f64 / FLEXTREE_PAPER_APPENDS as f64,
        fmt_power(sizes.appends),
        fmt_power(FLEXTREE_PAPER_APPENDS),
        fmt_power(sizes.front_inserts),
        fmt_power(paper_fronts),
        sizes.front_inserts as f64 / paper_fronts as f64,
        fmt_count(sizes.baseline_front_inserts.min(sizes.front_inserts)),
    );
    table1_rows(&rows, sizes, paper_fronts);
    front_speedups(&rows, paper_fronts);
    println!("  every lookup found its extent; Table 1 took {secs:.0} s");
    Ok(())
}

/// `10^7` for a power of ten, else `12,345`: the paper's column names.
fn fmt_power(n: u64) -> String {
    let digits = n.to_string();
    let power = n >= 1000 && digits.starts_with('1') && digits[1..].bytes().all(|b| b == b'0');
    if power {
        format!("10^{}", digits.len() - 1)
    } else {
        fmt_count(n)
    }
}

/// `secs` with the time per operation, e.g. `1.07 s (107 ns/op)`.
fn secs_per_op(secs: f64, ops: u64) -> String {
    format!("{secs:.3} s ({:.0} ns/op)", secs * 1e9 / ops.max(1) as f64)
}

fn paper_row(kind: IndexKind) -> &'static papers::ExtentIndexPaperRow {
    let i = IndexKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
    &papers::FLEXTREE_TABLE1[i.min(papers::FLEXTREE_TABLE1.len() - 1)]
}

fn paper_front_secs(kind: IndexKind, paper_fronts: u64) -> f64 {
    let row = paper_row(kind);
    if paper_fronts == 100_000 {
        row.insert_1e5_secs
    } else {
        row.insert_1e6_secs
    }
}

fn table1_rows(rows: &[IndexTimes], sizes: Table1Sizes, paper_fronts: u64) {
    let paper_appends = FLEXTREE_PAPER_APPENDS;
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let paper = paper_row(r.kind);
            let front = if r.front_extrapolated {
                format!(
                    "{:.1} s (extrapolated from {})",
                    r.front_total_secs,
                    fmt_count(r.front_inserts_measured)
                )
            } else {
                format!("{:.4} s", r.front_total_secs)
            };
            vec![
                if r.kind.name() == paper.index {
                    paper.index.to_string()
                } else {
                    format!("{} ({})", r.kind.name(), paper.index)
                },
                secs_per_op(r.append_secs, r.appends),
                secs_per_op(paper.append_1e8_secs, paper_appends),
                secs_per_op(r.lookup_secs, r.appends),
                secs_per_op(paper.lookup_1e8_secs, paper_appends),
                front,
                format!("{} s", paper_front_secs(r.kind, paper_fronts)),
            ]
        })
        .collect();
    let n = fmt_power(sizes.appends);
    let fronts = fmt_power(sizes.front_inserts);
    let paper_n = fmt_power(paper_appends);
    print_rows(
        &[
            "index",
            &format!("append {n}"),
            &format!("paper append {paper_n}"),
            &format!("lookup {n}"),
            &format!("paper lookup {paper_n}"),
            &format!("insert-at-front {fronts}"),
            &format!("paper insert {}", fmt_power(paper_fronts)),
        ],
        &table,
    );
}

/// FlexTree's front-insert advantage over each baseline, ours and the paper's.
fn front_speedups(rows: &[IndexTimes], paper_fronts: u64) {
    let Some(flex) = rows.iter().find(|r| r.kind == IndexKind::FlexTree) else { return };
    let paper_flex = paper_front_secs(IndexKind::FlexTree, paper_fronts);
    for r in rows.iter().filter(|r| r.kind != IndexKind::FlexTree) {
        println!(
            "  insert-at-front: FlexTree {:.0}x faster than {} (paper at {}: {:.0}x faster than {})",
            r.front_total_secs / flex.front_total_secs.max(1e-9),
            r.kind.name(),
            fmt_power(paper_fronts),
            paper_front_secs(r.kind, paper_fronts) / paper_flex,
            paper_row(r.kind).index,
        );
    }
}

fn insert_range(
    args: &ReproArgs,
    limits: InsertLimits,
    dir: &Path,
    machine: &MachineInfo,
) -> Result<(), String> {
    let fs = machine.data_dir.fs_type.clone().unwrap_or_else(|| experiments::filesystem_name(dir));
    progress(args, &format!("FlexFile random insert: growing a file to {}", fmt_bytes(limits.total_bytes)));
    let started = Instant::now();
    let flex = experiments::flexfile_random_insert(dir, limits, INSERT_SEED)
        .map_err(|e| format!("FlexFile random insert: {e}"))?;
    check_insert_run("FlexFile", &flex)?;
    progress(args, &format!("{fs} insert-range: growing a file to {}", fmt_bytes(limits.total_bytes)));
    let outcome = experiments::fs_random_insert(dir, limits, INSERT_SEED)
        .map_err(|e| format!("{fs} insert-range: {e}"))?;
    if let FsInsertOutcome::Measured(run) = &outcome {
        check_insert_run(&format!("{fs} insert-range"), run)?;
    }
    let secs = started.elapsed().as_secs_f64();
    println!("\n=== FlexFile Table 2: random 4 KiB inserts into a file growing to 1 GB (§6.2) ===");
    println!("  paper's machine: {}", papers::FLEX_STRUCTURES_MACHINE);
    println!("  this machine:    {}", machine.one_line());
    println!(
        "  scale factor {:.4}: the file grows to {} ({} inserts) of the paper's {}; in {} ({fs}), \
         buffered writes, one fsync at the end; write amplification here is bytes this process sent \
         to the block layer (/proc/self/io) / bytes inserted, not the SSD's S.M.A.R.T. counters",
        limits.total_bytes as f64 / FLEXFILE_PAPER_FILE_BYTES as f64,
        fmt_bytes(limits.total_bytes),
        fmt_count(limits.target_inserts()),
        fmt_bytes(FLEXFILE_PAPER_FILE_BYTES),
        dir.display(),
    );
    insert_rows(&flex, &outcome, &fs);
    println!("  the insert-range experiments took {secs:.0} s");
    Ok(())
}

/// The run's file must hold exactly what it inserted.
fn check_insert_run(what: &str, run: &InsertRun) -> Result<(), String> {
    if run.file_bytes != run.inserts * BLOCK_BYTES {
        return Err(format!(
            "{what}: {} inserts left a file of {} bytes: {run:?}",
            run.inserts, run.file_bytes
        ));
    }
    Ok(())
}

fn paper_insert(system: &str) -> (String, String) {
    papers::FLEXFILE_TABLE2_INSERT
        .iter()
        .find(|(name, _, _)| name.eq_ignore_ascii_case(system))
        .map_or_else(|| ("-".into(), "-".into()), |(_, kops, wa)| (format!("{kops}"), format!("{wa:.2}")))
}

fn insert_row(name: &str, paper_system: &str, run: &InsertRun) -> Vec<String> {
    let user = run.user_bytes().max(1) as f64;
    let mut wa = format!("{:.2}", run.process_write_bytes as f64 / user);
    if let Some(storage) = run.storage_bytes_written {
        wa += &format!(" (storage layer {:.2})", storage as f64 / user);
    }
    let (paper_kops, paper_wa) = paper_insert(paper_system);
    vec![
        name.to_string(),
        fmt_count(run.inserts),
        format!("{:.1}", run.secs),
        format!("{:.2}", run.ops_per_sec() / 1000.0),
        format!("{:.2}", run.tail_ops_per_sec / 1000.0),
        wa,
        paper_kops,
        paper_wa,
    ]
}

fn insert_rows(flex: &InsertRun, outcome: &FsInsertOutcome, fs: &str) {
    let mut rows = vec![insert_row("FlexFile", "FlexFile", flex)];
    if let FsInsertOutcome::Measured(run) = outcome {
        rows.push(insert_row(&format!("{fs} insert-range"), fs, run));
    }
    print_rows(
        &["file", "inserts", "seconds", "K inserts/s", "last 10% K/s", "write amp", "paper K/s", "paper WA"],
        &rows,
    );
    match outcome {
        FsInsertOutcome::Measured(run) => fs_summary(flex, run, fs),
        FsInsertOutcome::Refused { error } => println!(
            "  {fs} insert-range: not measured: the filesystem refused {error}; rerun with --dir on ext4 or XFS"
        ),
    }
}

fn fs_summary(flex: &InsertRun, run: &InsertRun, fs: &str) {
    if run.stopped_at_deadline {
        println!(
            "  {fs} insert-range stopped at its time limit after {} of {} inserts ({}); its rate falls as \
             the file grows, so the whole file's average would be lower still",
            fmt_count(run.inserts),
            fmt_count(run.target_inserts),
            fmt_bytes(run.user_bytes()),
        );
    }
    let (paper_flex, paper_fs) = (paper_insert("FlexFile").0, paper_insert(fs).0);
    let paper_ratio = match (paper_flex.parse::<f64>(), paper_fs.parse::<f64>()) {
        (Ok(f), Ok(e)) if e > 0.0 => format!("{:.0}x", f / e),
        _ => "-".into(),
    };
    println!(
        "  FlexFile / {fs} insert-range: {:.0}x overall, {:.0}x over the last 10% (paper at 1 GB: {paper_ratio})",
        flex.ops_per_sec() / run.ops_per_sec().max(1e-9),
        flex.tail_ops_per_sec / run.tail_ops_per_sec.max(1e-9),
    );
}

fn ycsb(args: &ReproArgs) -> Result<(), String> {
    let scale = if args.quick { QUICK } else { FLEX_FULL };
    let shape = &papers::FLEX;
    let udb = crate::workload::keys::preset("udb")?;
    let run = Run {
        args,
        engines: vec!["flex".into(), args.rocksdb.clone()],
        workloads: &["a", "b", "c", "d", "e", "f"],
        scale,
        keys: KeySpec { format: udb.format, key_bytes: udb.key_bytes, hashed: true, clustered_inserts: None },
        values: ValueSpec::fixed(udb.value_bytes),
        distribution: None,
        zipf_theta: crate::workload::zipfian::DEFAULT_THETA,
        budget_fraction: shape.budget_fraction,
        duration: None,
        timeline_interval: None,
        bulk_load: false,
        from_checkpoint: false,
    };
    let report = run.execute("flex-fig13")?;
    println!("\n=== FlexDB Fig 13: YCSB A–F with UDB record sizes (27 B keys, 127 B values), direct I/O ===");
    header(shape, scale, shape.budget_fraction, args, &report);
    render::throughput_table(&report, "flex", &args.rocksdb, papers::flex_fig13);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_rows_follow_the_index_kinds() {
        let names: Vec<&str> = IndexKind::ALL.iter().map(|k| paper_row(*k).index).collect();
        assert_eq!(names, ["FlexTree", "B+-Tree", "Sorted Array"]);
        assert_eq!(paper_front_secs(IndexKind::BTreeMap, 100_000), 7.49);
        assert_eq!(paper_front_secs(IndexKind::SortedVec, 1_000_000), 907.0);
        assert_eq!(paper_insert("ext4"), ("0.87".to_string(), "1.28".to_string()));
        assert_eq!(paper_insert("tmpfs").0, "-");
    }

    #[test]
    fn powers_of_ten_print_as_the_papers_columns() {
        assert_eq!(fmt_power(100_000_000), "10^8");
        assert_eq!(fmt_power(100_000), "10^5");
        assert_eq!(fmt_power(20_000), "20,000");
        assert_eq!(fmt_power(100), "100");
    }

    #[test]
    fn a_file_shorter_than_its_inserts_is_an_error() {
        let run = InsertRun {
            target_inserts: 4,
            inserts: 4,
            secs: 1.0,
            file_bytes: 3 * BLOCK_BYTES,
            storage_bytes_written: None,
            process_write_bytes: 0,
            tail_ops_per_sec: 4.0,
            stopped_at_deadline: false,
        };
        assert!(check_insert_run("x", &run).is_err());
        assert!(check_insert_run("x", &InsertRun { file_bytes: 4 * BLOCK_BYTES, ..run }).is_ok());
    }
}
