//! `strata repro treeline`: the TreeLine paper's headline experiments (§5), scaled to this machine.
//!
//! 1. Fig 5 / Fig 7 and Table 4: YCSB A, B, C, F and E on a store loaded with uniformly spread
//!    8-byte keys and then aged with one uniform update per record (§5.1's checkpoints), requests
//!    from ycsbr's scattered zipfian θ 0.99 (E also uniform), 64 B and 1024 B records, memory a
//!    third of the data, direct I/O, 4 KiB pages as the paper's; ratios against RocksDB beside the targets
//!    (`papers::treeline_targets`), and device bytes per operation.
//! 2. Fig 8's factor analysis (1024 B): the full system, then page grouping off, then page grouping
//!    and the record cache off (a 4 KiB record cache, its minimum), relative to the full system.
//! 3. §5.5: insert forecasting on 50% reads / 50% inserts at 64 B, on and off, with new keys
//!    clustered in fixed hot gaps (`--insert-keys clustered`; the paper's taxi pickups): throughput,
//!    reorganizations, overflow pages and bytes written.

use std::time::Duration;

use super::papers::{self, TREELINE};
use super::render::print_rows;
use super::{header, render, ReproArgs, Run, Scale};
use crate::report::summary::Spread;
use crate::report::{fmt_bytes, fmt_count, BenchReport, PhaseResult};
use crate::workload::{ClusteredInserts, DistributionKind, KeyFormat, KeySpec, ValueSpec};

/// One record shape of the paper: 8-byte keys and `value_bytes` values.
struct RecordShape {
    record_bytes: u64,
    value_bytes: usize,
    /// Records loaded by the full run and by `--quick`.
    full_records: u64,
    quick_records: u64,
}

/// The paper's two configurations scaled down: a tenth of its 20M-record synthetic dataset at 64 B
/// and a tenth of 5M records at 1024 B, so that a full run takes about half an hour on the 2-core
/// machine.
const SMALL: RecordShape =
    RecordShape { record_bytes: 64, value_bytes: 56, full_records: 2_000_000, quick_records: 400_000 };
const LARGE: RecordShape =
    RecordShape { record_bytes: 1024, value_bytes: 1016, full_records: 500_000, quick_records: 100_000 };

/// Seconds per workload: full and `--quick`.
const FULL_SECONDS: u64 = 20;
const QUICK_SECONDS: u64 = 5;

const POINT_WORKLOADS: [&str; 4] = ["a", "b", "c", "f"];

/// TreeLine as the paper configures it: 4 KiB pages, "to match the page size of the underlying
/// SSD" (§4.1). Strata's default chooses the page size from the records instead (16 KiB for
/// 1024 B records: faster loads and scans, point reads that read 4× the bytes per miss).
const TREELINE_ENGINE: &str = "treeline:page_size_bytes=4KiB";

/// Full treeline first: every factor row is relative to it.
const FACTOR_ENGINES: [&str; 3] = [
    TREELINE_ENGINE,
    "treeline:page_size_bytes=4KiB:page_grouping=false",
    "treeline:page_size_bytes=4KiB:page_grouping=false:record_cache_bytes=4KiB",
];
const FORECAST_ENGINES: [&str; 2] = [TREELINE_ENGINE, "treeline:page_size_bytes=4KiB:forecasting=false"];

pub(super) fn repro(args: &ReproArgs) -> Result<(), String> {
    for shape in [&SMALL, &LARGE] {
        let run = shape_run(args, shape, vec![TREELINE_ENGINE.into(), args.rocksdb.clone()]);
        let workloads = ["age", "a", "b", "c", "f", "e", "e@uniform"];
        let run = Run { workloads: &workloads, ..run };
        let report = run.execute(&format!("treeline-fig5-{}b", shape.record_bytes))?;
        println!(
            "\n=== TreeLine Fig 5/7 and Table 4 ({} B records): aged store, YCSB A/B/C/F and E, scattered \
             zipfian θ 0.99 (E also uniform), direct I/O ===",
            shape.record_bytes
        );
        header(&TREELINE, run.scale, TREELINE.budget_fraction, args, &report);
        render::throughput_table(
            &report,
            TREELINE_ENGINE,
            &args.rocksdb,
            papers::treeline_fig5(shape.record_bytes),
        );
        targets(&report, &args.rocksdb, shape.record_bytes);
        bytes_per_op_table(&report, &[TREELINE_ENGINE, &args.rocksdb]);
    }
    factor_analysis(args)?;
    forecasting(args)
}

/// The experiment shape for `shape` at the requested scale.
fn shape_run<'a>(args: &'a ReproArgs, shape: &RecordShape, engines: Vec<String>) -> Run<'a> {
    let records = if args.quick { shape.quick_records } else { shape.full_records };
    let seconds = if args.quick { QUICK_SECONDS } else { FULL_SECONDS };
    Run {
        args,
        engines,
        workloads: &[],
        scale: Scale { records, ops: records },
        keys: KeySpec { format: KeyFormat::Int, key_bytes: Some(8), hashed: true, clustered_inserts: None },
        values: ValueSpec::fixed(shape.value_bytes),
        distribution: Some(DistributionKind::Scattered),
        zipf_theta: crate::workload::zipfian::DEFAULT_THETA,
        budget_fraction: TREELINE.budget_fraction,
        duration: Some(Duration::from_secs(seconds)),
        timeline_interval: None,
        bulk_load: true,
        from_checkpoint: true,
    }
}

/// Ok results of (engine, workload), by round.
fn results<'r>(report: &'r BenchReport, engine: &str, workload: &str) -> Vec<&'r PhaseResult> {
    report
        .results
        .iter()
        .filter(|r| r.engine == engine && r.workload == workload && r.status == "ok")
        .collect()
}

/// `engine`'s throughput over the first engine's, per round (the first engine's own rows have 1).
fn ratio_vs_first(report: &BenchReport, engine: &str, workload: &str) -> Vec<(u32, f64)> {
    results(report, engine, workload)
        .into_iter()
        .filter_map(|r| r.throughput_vs_first.map(|x| (r.repeat, x)))
        .collect()
}

/// The geometric mean over A, B, C, F of treeline / RocksDB per round, its median, and E uniform,
/// beside the targets.
fn targets(report: &BenchReport, rocksdb: &str, record_bytes: u64) {
    let (point_target, scan_target) = papers::treeline_targets(record_bytes);
    let rounds: Vec<u32> = ratio_vs_first(report, rocksdb, "a").into_iter().map(|(r, _)| r).collect();
    let geo_means: Vec<f64> = rounds
        .iter()
        .filter_map(|round| {
            let logs: Vec<f64> = POINT_WORKLOADS
                .iter()
                .filter_map(|w| ratio_vs_first(report, rocksdb, w).into_iter().find(|(r, _)| r == round))
                .filter(|(_, x)| *x > 0.0)
                .map(|(_, x)| (1.0 / x).ln())
                .collect();
            (logs.len() == POINT_WORKLOADS.len())
                .then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
        })
        .collect();
    let scan: Vec<f64> = ratio_vs_first(report, rocksdb, "e@uniform")
        .into_iter()
        .filter(|(_, x)| *x > 0.0)
        .map(|(_, x)| 1.0 / x)
        .collect();
    let verdict = |spread: Option<Spread>, target: f64| match spread {
        Some(s) => format!(
            "{} (target >= {target:.1}x: {})",
            s.describe_ratio(),
            if s.median >= target { "met" } else { "NOT met" }
        ),
        None => "-".into(),
    };
    println!(
        "  treeline / {rocksdb}, geometric mean over A, B, C, F: {}",
        verdict(Spread::of(&geo_means), point_target)
    );
    println!("  treeline / {rocksdb}, E uniform: {}", verdict(Spread::of(&scan), scan_target));
}

/// Table 4's shape: device bytes read and written per operation (medians over the rounds).
fn bytes_per_op_table(report: &BenchReport, engines: &[&str]) {
    let paper: Vec<String> = papers::TREELINE_TABLE4_A_64B
        .iter()
        .map(|(system, read, written)| format!("{system} {read} / {written}"))
        .collect();
    println!(
        "  device bytes per operation (/proc/self/io); paper Table 4, A at 64 B, GiB read / written: {}",
        paper.join(", ")
    );
    let mut rows = Vec::new();
    for w in report.workload.workloads.iter().filter(|w| *w != "load") {
        for engine in engines {
            let rs = results(report, engine, w);
            let median = |pick: fn(&PhaseResult) -> Option<f64>| {
                let values: Vec<f64> = rs.iter().filter_map(|r| pick(r)).collect();
                Spread::of(&values).map_or_else(|| "-".into(), |s| fmt_bytes(s.median.round() as u64))
            };
            rows.push(vec![
                w.to_uppercase(),
                engine.to_string(),
                median(|r| r.device_read_bytes_per_op),
                median(|r| r.device_write_bytes_per_op),
            ]);
        }
    }
    print_rows(&["workload", "engine", "read / op", "written / op"], &rows);
}

/// Fig 8 at 1024 B: each configuration's throughput relative to the full system.
fn factor_analysis(args: &ReproArgs) -> Result<(), String> {
    let engines = FACTOR_ENGINES.iter().map(|e| e.to_string()).collect();
    let workloads = ["age", "a", "b", "c", "f", "e"];
    let run = Run { workloads: &workloads, ..shape_run(args, &LARGE, engines) };
    let report = run.execute("treeline-fig8")?;
    println!(
        "\n=== TreeLine Fig 8: factor analysis (1024 B, scattered zipfian), relative to the full system ==="
    );
    header(&TREELINE, run.scale, TREELINE.budget_fraction, args, &report);
    for (factor, finding) in papers::TREELINE_FIG8 {
        println!("  paper, {factor}: {finding}");
    }
    let mut rows = Vec::new();
    for w in workloads.iter().filter(|w| **w != "age") {
        let mut row = vec![w.to_uppercase()];
        for engine in FACTOR_ENGINES {
            let ops: Vec<f64> =
                results(&report, engine, w).iter().map(|r| r.throughput_ops_per_sec).collect();
            let ratio: Vec<f64> = ratio_vs_first(&report, engine, w).into_iter().map(|(_, x)| x).collect();
            let reads: Vec<f64> =
                results(&report, engine, w).iter().filter_map(|r| r.device_read_bytes_per_op).collect();
            row.push(match (Spread::of(&ops), Spread::of(&ratio), Spread::of(&reads)) {
                (Some(o), Some(x), Some(rd)) => format!(
                    "{} ops/s, {}, {} read/op",
                    fmt_count(o.median.round() as u64),
                    x.describe_ratio(),
                    fmt_bytes(rd.median.round() as u64)
                ),
                _ => "-".into(),
            });
        }
        rows.push(row);
    }
    print_rows(&["workload", "full", "page grouping off", "page grouping and record cache off"], &rows);
    Ok(())
}

/// §5.5 at 64 B: 50% reads / 50% inserts with forecasting on and off. As many operations as
/// records, not a fixed time: half a record per loaded record is inserted, about 500 inserts per
/// hot gap, so each gap is reorganized several times (forecasting can only save the
/// reorganizations after a gap's first, and only once an epoch has ended; a 20 s run gave each
/// gap about one).
fn forecasting(args: &ReproArgs) -> Result<(), String> {
    let engines = FORECAST_ENGINES.iter().map(|e| e.to_string()).collect();
    let workloads = ["read50-insert50"];
    let shape = shape_run(args, &SMALL, engines);
    let clustered = Some(ClusteredInserts::for_records(shape.scale.records));
    let run = Run {
        workloads: &workloads,
        keys: KeySpec { clustered_inserts: clustered, ..shape.keys },
        duration: None,
        ..shape
    };
    let report = run.execute("treeline-forecasting")?;
    println!(
        "\n=== TreeLine §5.5: insert forecasting, 50% reads / 50% inserts, as many operations as records (64 B, \
         scattered zipfian reads; new keys clustered after 1 in 1,000 loaded records, the same ones throughout) ==="
    );
    header(&TREELINE, run.scale, TREELINE.budget_fraction, args, &report);
    println!("  paper: {}", papers::TREELINE_FIG8[2].1);
    let mut rows = Vec::new();
    for engine in FORECAST_ENGINES {
        let phase = results(&report, engine, "read50-insert50");
        let ops: Vec<f64> = phase.iter().map(|r| r.throughput_ops_per_sec).collect();
        let writes: Vec<f64> = phase.iter().filter_map(|r| r.device_write_bytes_per_op).collect();
        let delta = |name: &str| -> Vec<f64> {
            phase.iter().filter_map(|r| counter_delta(&report, r, name)).map(|n| n as f64).collect()
        };
        let median = |v: &[f64]| Spread::of(v).map(|s| s.median);
        let count = |v: &[f64]| median(v).map_or_else(|| "-".into(), |m| fmt_count(m.round() as u64));
        rows.push(vec![
            engine.to_string(),
            count(&ops),
            count(&delta("reorganizations")),
            count(&delta("overflow_pages_created")),
            median(&writes).map_or_else(|| "-".into(), |m| fmt_bytes(m.round() as u64)),
        ]);
    }
    let columns = ["engine", "ops/s", "reorganizations", "overflow pages created", "device written / op"];
    print_rows(&columns, &rows);
    Ok(())
}

/// How much the engine counter `name` grew during `phase` (over the phase before it in the
/// same round; the load for the first workload).
fn counter_delta(report: &BenchReport, phase: &PhaseResult, name: &str) -> Option<u64> {
    let same_round: Vec<&PhaseResult> =
        report.results.iter().filter(|r| r.engine == phase.engine && r.repeat == phase.repeat).collect();
    let at = same_round.iter().position(|r| r.workload == phase.workload)?;
    let counter = |r: &PhaseResult| r.engine_io.as_ref()?.counters_at_end.get(name).copied();
    let before = match at {
        0 => 0,
        _ => counter(same_round.get(at - 1)?)?,
    };
    Some(counter(phase)?.saturating_sub(before))
}
