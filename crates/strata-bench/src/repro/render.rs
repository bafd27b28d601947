//! `strata repro`'s tables: our medians beside the paper's numbers.

use crate::report::summary::Spread;
use crate::report::{fmt_count, BenchReport};

/// Median over the rounds of `pick` on (engine, workload)'s ok results.
pub(super) fn median(
    report: &BenchReport,
    engine: &str,
    workload: &str,
    pick: impl Fn(&crate::report::PhaseResult) -> Option<f64>,
) -> Option<Spread> {
    let values: Vec<f64> = report
        .results
        .iter()
        .filter(|r| r.engine == engine && r.workload == workload && r.status == "ok")
        .filter_map(pick)
        .collect();
    Spread::of(&values)
}

/// The first engine's throughput over `other`'s on `workload`: per round (the inverse of
/// `other`'s `vs_first`), then the median with its spread.
pub(super) fn ratio_to(report: &BenchReport, other: &str, workload: &str) -> Option<Spread> {
    median(report, other, workload, |r| r.throughput_vs_first.filter(|x| *x > 0.0).map(|x| 1.0 / x))
}

/// A median count (`-` when there is none).
pub(super) fn ops(spread: Option<Spread>) -> String {
    spread.map_or_else(|| "-".into(), |s| fmt_count(s.median.round() as u64))
}

pub(super) fn print_rows(header: &[&str], rows: &[Vec<String>]) {
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain(std::iter::once(header[c].chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        println!("  {}", parts.join("  ").trim_end());
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

/// Per workload: ours (engine, rocksdb, ratio with its spread) and the paper's statement.
pub fn throughput_table(report: &BenchReport, engine: &str, rocksdb: &str, paper: fn(&str) -> &'static str) {
    let mut rows = Vec::new();
    for skew in &report.skew {
        println!(
            "  {}: {} ({}, measured: {} ops over {} keys, {} touched)",
            skew.workload,
            skew.describe(),
            skew.distribution,
            fmt_count(skew.ops),
            fmt_count(skew.keys),
            fmt_count(skew.keys_touched)
        );
    }
    for w in report.workload.workloads.iter().filter(|w| *w != "load") {
        let ours = median(report, engine, w, |r| Some(r.throughput_ops_per_sec));
        let theirs = median(report, rocksdb, w, |r| Some(r.throughput_ops_per_sec));
        // Ratio per round, then the median (the first engine is ours, so invert vs_first).
        let ratio = ratio_to(report, rocksdb, w);
        rows.push(vec![
            w.to_uppercase(),
            ops(ours),
            ops(theirs),
            ratio.map_or_else(|| "-".into(), |s| s.describe_ratio()),
            paper(w).to_string(),
        ]);
    }
    let ratio_header = format!("{engine} / {rocksdb}");
    print_rows(
        &["workload", &format!("{engine} ops/s"), &format!("{rocksdb} ops/s"), &ratio_header, "paper"],
        &rows,
    );
}

/// Read and write amplification (device bytes / user bytes) beside the paper's.
pub fn amplification_table(
    report: &BenchReport,
    engines: &[&str],
    workloads: &[&str],
    paper: fn(&str, &str) -> Option<(f64, f64)>,
) {
    println!("  I/O amplification (device bytes / user bytes, /proc/self/io), paper's Table 2 beside:");
    let mut rows = Vec::new();
    for w in workloads {
        for engine in engines {
            let read = median(report, engine, w, |r| r.read_amplification);
            let write = median(report, engine, w, |r| r.write_amplification);
            let amp = |s: Option<Spread>| s.map_or_else(|| "-".into(), |s| format!("{:.2}", s.median));
            let paper_key = if engine.starts_with("rocksdb") { "rocksdb" } else { engine };
            let (paper_read, paper_write) = paper(paper_key, w)
                .map_or_else(|| ("-".into(), "-".into()), |(r, wr)| (format!("{r:.2}"), format!("{wr:.2}")));
            rows.push(vec![
                w.to_uppercase(),
                engine.to_string(),
                amp(read),
                amp(write),
                paper_read,
                paper_write,
            ]);
        }
    }
    print_rows(&["workload", "engine", "read amp", "write amp", "paper read amp", "paper write amp"], &rows);
}

/// F2 Fig 13: throughput per budget and workload, and ours relative to our own at 10%.
pub fn budget_sweep_table(
    sweep: &[(f64, BenchReport)],
    engine: &str,
    rocksdb: &str,
    paper: fn(&str, f64) -> &'static str,
) {
    let at_ten = |w: &str| {
        sweep
            .iter()
            .find(|(f, _)| (*f - 0.10).abs() < 1e-9)
            .and_then(|(_, r)| median(r, engine, w, |x| Some(x.throughput_ops_per_sec)))
    };
    let mut rows = Vec::new();
    for w in ["a", "b"] {
        for (fraction, report) in sweep {
            let ours = median(report, engine, w, |r| Some(r.throughput_ops_per_sec));
            let theirs = median(report, rocksdb, w, |r| Some(r.throughput_ops_per_sec));
            let ratio = ratio_to(report, rocksdb, w);
            let vs_ten = match (ours, at_ten(w)) {
                (Some(o), Some(t)) if t.median > 0.0 => format!("{:.0}%", o.median / t.median * 100.0),
                _ => "-".into(),
            };
            rows.push(vec![
                w.to_uppercase(),
                format!("{:.1}%", fraction * 100.0),
                crate::report::fmt_bytes(report.workload.memory_budget_bytes),
                ops(ours),
                ops(theirs),
                ratio.map_or_else(|| "-".into(), |s| s.describe_ratio()),
                vs_ten,
                paper(w, *fraction).to_string(),
            ]);
        }
    }
    let ratio_header = format!("{engine} / {rocksdb}");
    print_rows(
        &[
            "workload",
            "budget",
            "bytes",
            &format!("{engine} ops/s"),
            &format!("{rocksdb} ops/s"),
            &ratio_header,
            &format!("{engine} vs its 10%"),
            "paper",
        ],
        &rows,
    );
}
