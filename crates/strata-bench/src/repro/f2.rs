//! `strata repro f2`: the F2 paper's experiments in its shape (8 B keys + 100 B values,
//! zipfian-plain, budget 10% of the data, direct I/O), each an ordinary `strata bench` run:
//! - `fig10`: Fig 10's YCSB A/B/C/F against RocksDB and Table 2's I/O amplification;
//! - `fig13`: Fig 13's memory-budget sweep (2.5%–25% of the data), A and B;
//! - `fig12`: Fig 12's skew sweep, A and B at zipfian θ from 0.5 to 0.99, each run's measured
//!   share of operations on its top keys printed beside it (the paper's α is not YCSB's θ; it
//!   names its skews by that share: α = 100 sends 90% of accesses to 18% of records);
//! - `fig2`: Fig 2's death spiral side by side: f2 against its `single_log` mode (FASTER's one
//!   log, compaction copying live records to its own tail) on an RMW-heavy run (YCSB F) that
//!   compacts over and over, throughput over time as a sparkline, and as `timeline.{svg,png}`
//!   with `--json-dir`.

use std::time::Duration;

use super::papers::{self, F2};
use super::render::{self, median, ops, print_rows};
use super::{header, ReproArgs, Run, Scale, QUICK};
use crate::report::BenchReport;
use crate::workload::{DistributionKind, KeyFormat, KeySpec, ValueSpec};

/// The full-scale f2 run: 20M x (8 + 100) B.
pub(super) const F2_FULL: Scale = Scale { records: 20_000_000, ops: 2_000_000 };

/// The F2 paper's memory sweep, as fractions of the data (Fig 13: 750 MiB – 7.5 GiB of 30 GiB).
const BUDGET_SWEEP: [f64; 4] = [0.025, 0.05, 0.10, 0.25];

/// The skew sweep's zipfian θ (Fig 12 varies the paper's α from 3 to 1000; θ 0.99 is YCSB's
/// default and the top of what its generator takes).
const THETA_SWEEP: [f64; 5] = [0.5, 0.8, 0.9, 0.95, 0.99];

/// The parts `--only` may name.
pub(super) const PARTS: [&str; 4] = ["fig10", "fig13", "fig12", "fig2"];

/// Fig 2's single log must hold every live record: its disk budget as a multiple of the data's
/// records (115%: where docs/benchmarks.md's `rmw_timeline` runs showed the spiral's mechanism).
const SINGLE_LOG_BUDGET_PERCENT_OF_RECORDS: u64 = 115;
/// f2's on-disk record for an 8 B key and a 100 B value: a 24 B header, padded to 8 B.
const RECORD_ON_DISK_BYTES: u64 = (24 + 8 + 100u64).next_multiple_of(8);
/// Fig 2's run length per engine, and the timeline's interval.
const FIG2_SECONDS: (u64, u64) = (30, 180);
const FIG2_INTERVAL: Duration = Duration::from_secs(1);

pub(super) fn repro(args: &ReproArgs) -> Result<(), String> {
    let run = shape_run(args);
    if args.runs_part("fig10") {
        fig10(args, &run)?;
    }
    if args.runs_part("fig13") {
        fig13(args, &run)?;
    }
    if args.runs_part("fig12") {
        fig12(args, &run)?;
    }
    if args.runs_part("fig2") {
        fig2(args, &run)?;
    }
    Ok(())
}

fn shape_run(args: &ReproArgs) -> Run<'_> {
    Run {
        args,
        engines: vec!["f2".into(), args.rocksdb.clone()],
        workloads: &["a", "b", "c", "f"],
        scale: if args.quick { QUICK } else { F2_FULL },
        keys: KeySpec { format: KeyFormat::Int, key_bytes: Some(8), hashed: true, clustered_inserts: None },
        values: ValueSpec::fixed(100),
        distribution: Some(DistributionKind::ZipfianPlain),
        zipf_theta: crate::workload::zipfian::DEFAULT_THETA,
        budget_fraction: F2.budget_fraction,
        duration: None,
        timeline_interval: None,
        bulk_load: false,
        from_checkpoint: false,
    }
}

fn fig10(args: &ReproArgs, run: &Run<'_>) -> Result<(), String> {
    let main = run.execute("f2-fig10")?;
    println!("\n=== F2 Fig 10 and Table 2: YCSB A/B/C/F, zipfian-plain θ 0.99, direct I/O ===");
    header(&F2, run.scale, F2.budget_fraction, args, &main);
    render::throughput_table(&main, "f2", &args.rocksdb, papers::f2_fig10);
    render::amplification_table(&main, &["f2", &args.rocksdb], &["a", "b"], papers::f2_table2);
    Ok(())
}

fn fig13(args: &ReproArgs, run: &Run<'_>) -> Result<(), String> {
    println!("\n=== F2 Fig 13: memory budget 2.5%–25% of the data, YCSB A and B ===");
    let mut sweep = Vec::new();
    for fraction in BUDGET_SWEEP {
        let at = Run { workloads: &["a", "b"], budget_fraction: fraction, ..run.clone_shape() };
        let report = at.execute(&format!("f2-fig13-{:.1}pct", fraction * 100.0))?;
        sweep.push((fraction, report));
    }
    // The header names the paper's default budget (10%); the table gives each run's.
    if let Some((fraction, at_ten)) = sweep.iter().find(|(f, _)| (*f - 0.10).abs() < 1e-9) {
        header(&F2, run.scale, *fraction, args, at_ten);
    }
    render::budget_sweep_table(&sweep, "f2", &args.rocksdb, papers::f2_fig13);
    Ok(())
}

fn fig12(args: &ReproArgs, run: &Run<'_>) -> Result<(), String> {
    println!("\n=== F2 Fig 12: skew sweep, YCSB A and B, zipfian-plain θ {THETA_SWEEP:?} ===");
    let mut sweep = Vec::new();
    for theta in THETA_SWEEP {
        let at = Run { workloads: &["a", "b"], zipf_theta: theta, ..run.clone_shape() };
        sweep.push((theta, at.execute(&format!("f2-fig12-theta-{theta:.2}"))?));
    }
    if let Some((_, first)) = sweep.first() {
        header(&F2, run.scale, F2.budget_fraction, args, first);
    }
    println!("  paper: {}", papers::F2_FIG12);
    let mut rows = Vec::new();
    for w in ["a", "b"] {
        for (theta, report) in &sweep {
            let ours = median(report, "f2", w, |r| Some(r.throughput_ops_per_sec));
            let theirs = median(report, &args.rocksdb, w, |r| Some(r.throughput_ops_per_sec));
            let ratio = render::ratio_to(report, &args.rocksdb, w);
            let skew =
                report.skew.iter().find(|s| s.workload == w).map_or_else(|| "-".into(), |s| s.describe());
            rows.push(vec![
                w.to_uppercase(),
                format!("{theta:.2}"),
                skew,
                ops(ours),
                ops(theirs),
                ratio.map_or_else(|| "-".into(), |s| s.describe_ratio()),
            ]);
        }
    }
    let ratio_header = format!("f2 / {}", args.rocksdb);
    let rocksdb_ops = format!("{} ops/s", args.rocksdb);
    print_rows(&["workload", "θ", "measured skew", "f2 ops/s", &rocksdb_ops, &ratio_header], &rows);
    Ok(())
}

/// The single-log engine spec of Fig 2: FASTER's one log with a disk budget that holds every
/// live record with a little room.
fn single_log_spec(records: u64) -> String {
    let budget = records * RECORD_ON_DISK_BYTES * SINGLE_LOG_BUDGET_PERCENT_OF_RECORDS / 100;
    format!("f2:single_log=true:hot_log_disk_budget_bytes={budget}")
}

fn fig2(args: &ReproArgs, run: &Run<'_>) -> Result<(), String> {
    let seconds = if args.quick { FIG2_SECONDS.0 } else { FIG2_SECONDS.1 };
    let single = single_log_spec(run.scale.records);
    let at = Run {
        engines: vec!["f2".into(), single.clone()],
        workloads: &["f"],
        duration: Some(Duration::from_secs(seconds)),
        timeline_interval: Some(FIG2_INTERVAL),
        ..run.clone_shape()
    };
    let report = at.execute("f2-fig2")?;
    println!(
        "\n=== F2 Fig 2: the death spiral, f2 vs FASTER's single log (`{single}`), YCSB F \
         (50% reads, 50% RMW), {seconds} s each ==="
    );
    header(&F2, run.scale, F2.budget_fraction, args, &report);
    println!("  paper: {}", papers::F2_FIG2);
    timeline_rows(&report, &["f2", &single]);
    if let Some(dir) = &args.json_dir {
        let out = dir.join("f2-fig2");
        match crate::plot::plot(&[dir.join("f2-fig2.json")], &out) {
            Ok(written) => written.iter().for_each(|p| println!("  wrote {}", p.display())),
            Err(e) => println!("  no timeline plot: {e}"),
        }
    }
    Ok(())
}

/// Per engine, its first round: a sparkline of its throughput per interval (one scale for all),
/// min / median / max, the median of the last third against the first third (a spiral decays),
/// and the intervals under a quarter of the median (stalls: writers waiting for compaction).
fn timeline_rows(report: &BenchReport, engines: &[&str]) {
    let phases: Vec<&crate::report::PhaseResult> = engines
        .iter()
        .filter_map(|e| {
            report.results.iter().find(|r| r.engine == *e && r.workload == "f" && r.status == "ok")
        })
        .collect();
    let top = phases.iter().flat_map(|p| p.timeline_ops_per_sec.iter().copied()).fold(0.0, f64::max);
    let mut rows = Vec::new();
    for phase in phases {
        let timeline = phase.timeline_ops_per_sec.as_slice();
        let spread = crate::report::summary::Spread::of(timeline);
        let third = timeline.len() / 3;
        let first = crate::report::summary::Spread::of(timeline.get(..third).unwrap_or_default());
        let last =
            crate::report::summary::Spread::of(timeline.get(timeline.len() - third..).unwrap_or_default());
        let decay = match (first, last) {
            (Some(f), Some(l)) if f.median > 0.0 => format!("{:.2}", l.median / f.median),
            _ => "-".into(),
        };
        let range = spread
            .map_or_else(|| "-".into(), |s| format!("{} / {} / {}", fmt(s.min), fmt(s.median), fmt(s.max)));
        let stalled = spread.map_or(0, |s| timeline.iter().filter(|&&v| v < s.median / 4.0).count());
        let written = phase.device_write_bytes_per_op.map_or_else(|| "-".into(), |b| format!("{b:.0} B"));
        rows.push(vec![
            phase.engine.clone(),
            range,
            decay,
            stalled.to_string(),
            written,
            sparkline(timeline, top),
        ]);
    }
    println!("  the first round's timeline (one interval per {} s):", FIG2_INTERVAL.as_secs());
    let header = [
        "engine",
        "ops/s min / median / max",
        "last ÷ first third",
        "under ¼ median",
        "dev write/op",
        "per interval",
    ];
    print_rows(&header, &rows);
}

fn fmt(ops_per_sec: f64) -> String {
    crate::report::fmt_count(ops_per_sec.round() as u64)
}

/// One block character per value, scaled to `top`.
fn sparkline(values: &[f64], top: f64) -> String {
    const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    values
        .iter()
        .map(|v| {
            let level = if top > 0.0 { (v / top * 8.0).ceil() as usize } else { 0 };
            BLOCKS[level.clamp(1, 8) - 1]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparklines_scale_to_the_top_value() {
        assert_eq!(sparkline(&[0.0, 50.0, 100.0], 100.0), "▁▄█");
        assert_eq!(sparkline(&[], 1.0), "");
    }

    #[test]
    fn the_single_log_holds_every_record_with_room() {
        // 400k records x 136 B x 1.15.
        assert_eq!(single_log_spec(400_000), "f2:single_log=true:hot_log_disk_budget_bytes=62560000");
        crate::engines::split_spec(&single_log_spec(400_000)).unwrap();
    }
}
