//! The human-readable report printed on stdout.

use std::fmt::Write as _;

use super::summary::Spread;
use super::{
    fmt_bytes, fmt_count, fmt_ratio, fmt_us, BenchReport, LatencySummary, PhaseResult, WorkloadConfig,
};

/// Left-aligned first column, right-aligned others.
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&str]) -> Table {
        Table { header: header.iter().map(|s| s.to_string()).collect(), rows: Vec::new() }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn render(&self, out: &mut String) {
        let columns = self.header.len();
        let width = |c: usize| {
            self.rows
                .iter()
                .chain(std::iter::once(&self.header))
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..columns).map(width).collect();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (c, w) in widths.iter().enumerate() {
                let cell = row.get(c).map_or("", String::as_str);
                if c < 2 {
                    let _ = write!(line, "{cell:<w$}  ");
                } else {
                    let _ = write!(line, "{cell:>w$}  ");
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
}

pub fn render(report: &BenchReport) -> String {
    let mut out = String::new();
    render_header(report, &mut out);
    render_engines(report, &mut out);
    for workload in &workload_order(&report.results) {
        render_workload(report, workload, &mut out);
    }
    render_latency_by_op(report, &mut out);
    render_io_and_space(report, &mut out);
    render_device_bytes_by_cause(report, &mut out);
    render_notices(report, &mut out);
    render_summary(report, &mut out);
    render_timelines(report, &mut out);
    render_open_close_reopen(report, &mut out);
    let _ = writeln!(out, "\n{}", report.peak_rss_note);
    out
}

/// What ran where: version and machine, commit, trace shape, memory budget, I/O modes, rounds.
fn render_header(report: &BenchReport, out: &mut String) {
    let w = &report.workload;
    let _ = writeln!(out, "strata bench {} — {}", report.version, report.machine.one_line());
    let ops = match (w.ops_per_workload, w.duration_secs) {
        (_, Some(d)) => format!("{d} s per workload"),
        (Some(n), None) => format!("{} ops per workload", fmt_count(n)),
        _ => String::new(),
    };
    let _ = writeln!(out, "{}; seed {}; {} thread(s); {ops}", git_description(report), w.seed, w.threads);
    let _ = writeln!(
        out,
        "{} records of {}, load order {}; memory budget {}{} ({:.1}x data/budget{})",
        fmt_count(w.records),
        record_shape(w),
        w.load_order,
        fmt_bytes(w.memory_budget_bytes),
        if w.memory_budget_auto { " (auto: data/4)" } else { "" },
        w.data_to_budget_ratio,
        if w.data_to_budget_ratio < 3.0 { ": NOT larger than memory" } else { "" },
    );
    if w.insert_keys != "spread" {
        let _ = writeln!(out, "inserted keys {}", w.insert_keys);
    }
    if w.from_checkpoint {
        let _ =
            writeln!(out, "each measured workload from a copy of the store closed after the load and aging");
    }
    let _ = writeln!(out, "direct I/O {}; sync writes {}", on_off(w.direct_io), on_off(w.sync_writes));
    if report.repeats > 1 {
        let _ = writeln!(
            out,
            "--repeat {}: every engine ran {} times, alternating (A B A B ..., each round on a fresh load); \
             ratios are taken within a round",
            report.repeats, report.repeats
        );
    }
}

/// `git 0123456789ab (with local changes)`: the first 12 digits of the commit the binary was
/// built from.
fn git_description(report: &BenchReport) -> String {
    match (&report.git.commit, report.git.dirty) {
        (Some(c), Some(true)) => format!("git {} (with local changes)", c.get(..12).unwrap_or(c)),
        (Some(c), _) => format!("git {}", c.get(..12).unwrap_or(c)),
        _ => "git commit unknown".into(),
    }
}

/// `8 B int keys + 120 B values`.
fn record_shape(w: &WorkloadConfig) -> String {
    let keys = match w.key_bytes {
        Some(n) => format!("{n} B {} keys", w.key_format),
        None => format!("{} keys", w.key_format),
    };
    let values = if w.value_bytes_min == w.value_bytes_max {
        format!("{} B values", w.value_bytes_min)
    } else {
        format!("{}..={} B values", w.value_bytes_min, w.value_bytes_max)
    };
    format!("{keys} + {values}")
}

/// Each engine of the first round: its status, settings, page-cache note and RSS before open.
fn render_engines(report: &BenchReport, out: &mut String) {
    let _ = writeln!(out, "\nengines:");
    for e in report.engines.iter().filter(|e| e.repeat == 1) {
        let settings: Vec<String> = e.config.iter().map(|s| format!("{}={}", s.name, s.value)).collect();
        let status = match &e.message {
            Some(m) => format!("{}: {m}", e.status),
            None => e.status.clone(),
        };
        let _ = writeln!(out, "  {:<10} {status}", e.name);
        if !settings.is_empty() {
            let _ = writeln!(out, "  {:<10} {}", "", settings.join("; "));
        }
        if e.status == "ok" {
            let rss = e.baseline_rss_bytes.map_or_else(|| "unknown".into(), fmt_bytes);
            let _ = writeln!(out, "  {:<10} page cache: {}; RSS before open: {rss}", "", e.page_cache_note);
        }
    }
}

/// One workload: its description, the trace's measured skew, and a row per engine and round
/// (throughput, ratio, latency percentiles, device I/O, disk, peak RSS), then the errors.
fn render_workload(report: &BenchReport, workload: &str, out: &mut String) {
    let rows: Vec<&PhaseResult> = report.results.iter().filter(|r| r.workload == workload).collect();
    let Some(first) = rows.first() else { return };
    let _ = writeln!(out, "\n{workload}: {}", first.description);
    if let Some(skew) = report.skew.iter().find(|s| s.workload == workload) {
        let _ = writeln!(
            out,
            "skew ({}, measured on the trace): {} ({} ops over {} keys, {} touched)",
            skew.distribution,
            skew.describe(),
            fmt_count(skew.ops),
            fmt_count(skew.keys),
            fmt_count(skew.keys_touched)
        );
    }
    let first_engine = report.engines.first().map(|e| e.name.as_str()).unwrap_or("first");
    let vs = format!("vs {first_engine}");
    let mut t = Table::new(&[
        "engine",
        if report.repeats > 1 { "round" } else { "status" },
        "ops/s",
        &vs,
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "dev read",
        "dev write",
        "disk",
        "peak RSS",
    ]);
    for r in &rows {
        t.row(vec![
            r.engine.clone(),
            if report.repeats > 1 { format!("{} {}", r.repeat, r.status) } else { r.status.clone() },
            fmt_count(r.throughput_ops_per_sec.round() as u64),
            r.throughput_vs_first.map_or_else(|| "-".into(), |x| format!("{x:.2}x")),
            latency_cell(&r.latency_us, r.latency_us.p50),
            latency_cell(&r.latency_us, r.latency_us.p99),
            latency_cell(&r.latency_us, r.latency_us.p99_9),
            latency_cell(&r.latency_us, r.latency_us.max),
            r.read_bytes.map_or_else(|| "-".into(), fmt_bytes),
            r.write_bytes.map_or_else(|| "-".into(), fmt_bytes),
            fmt_bytes(r.disk_bytes),
            r.peak_rss_bytes.map_or_else(|| "-".into(), fmt_bytes),
        ]);
    }
    t.render(out);
    for r in rows.iter().filter(|r| r.error.is_some()) {
        let _ = writeln!(out, "  {} {}: {}", r.engine, r.status, r.error.as_deref().unwrap_or_default());
    }
}

/// Per phase and operation type: count, mean and percentiles.
fn render_latency_by_op(report: &BenchReport, out: &mut String) {
    let _ = writeln!(out, "\nlatency by operation (µs):");
    let mut t = Table::new(&["engine", "workload", "op", "count", "mean", "p50", "p99", "p99.9", "max"]);
    for r in &report.results {
        for (op, s) in &r.latency_us_by_op {
            t.row(vec![
                round_label(report, r),
                r.workload.clone(),
                op.clone(),
                fmt_count(s.count),
                fmt_us(s.mean),
                fmt_us(s.p50),
                fmt_us(s.p99),
                fmt_us(s.p99_9),
                fmt_us(s.max),
            ]);
        }
    }
    t.render(out);
}

/// Per phase: user and device bytes, amplification, disk use and misses.
fn render_io_and_space(report: &BenchReport, out: &mut String) {
    let _ = writeln!(
        out,
        "\nI/O and space (amplification = device bytes / user bytes; space = allocated / live data):"
    );
    let mut t = Table::new(&[
        "engine",
        "workload",
        "user write",
        "user read",
        "write amp",
        "read amp",
        "engine write",
        "disk alloc",
        "disk apparent",
        "space amp",
        "dev read/op",
        "dev write/op",
        "not found",
    ]);
    for r in &report.results {
        let per_op = |b: Option<f64>| b.map_or_else(|| "-".into(), |b| fmt_bytes(b.round() as u64));
        t.row(vec![
            round_label(report, r),
            r.workload.clone(),
            fmt_bytes(r.user_bytes_written),
            fmt_bytes(r.user_bytes_read),
            fmt_ratio(r.write_amplification),
            fmt_ratio(r.read_amplification),
            r.engine_io.as_ref().map_or_else(|| "-".into(), |io| fmt_bytes(io.bytes_written)),
            fmt_bytes(r.disk_bytes),
            fmt_bytes(r.disk_apparent_bytes),
            fmt_ratio(r.space_amplification),
            per_op(r.device_read_bytes_per_op),
            per_op(r.device_write_bytes_per_op),
            fmt_count(r.not_found),
        ]);
    }
    t.render(out);
}

/// Per phase of engines that count them: I/O bytes per operation by file and cause.
fn render_device_bytes_by_cause(report: &BenchReport, out: &mut String) {
    let rows: Vec<&PhaseResult> = report
        .results
        .iter()
        .filter(|r| r.engine_io.as_ref().is_some_and(|io| !io.device_bytes_by_cause.is_empty()))
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nI/O bytes per operation by file and cause (engines that count them): what the engine asked of its \
         storage, which the device moves rounded to its direct-I/O alignment"
    );
    let mut t = Table::new(&[
        "engine",
        "workload",
        "file and cause",
        "read/op",
        "write/op",
        "share of read",
        "share of write",
    ]);
    for r in rows {
        let Some(io) = &r.engine_io else { continue };
        let ops = r.ops.max(1) as f64;
        let total_read: u64 = io.device_bytes_by_cause.iter().map(|(_, read, _)| read).sum();
        let total_written: u64 = io.device_bytes_by_cause.iter().map(|(_, _, written)| written).sum();
        let share = |part: u64, total: u64| {
            if total == 0 {
                "-".to_string()
            } else {
                format!("{:.0}%", 100.0 * part as f64 / total as f64)
            }
        };
        for (place, read, written) in &io.device_bytes_by_cause {
            t.row(vec![
                round_label(report, r),
                r.workload.clone(),
                place.clone(),
                fmt_bytes((*read as f64 / ops).round() as u64),
                fmt_bytes((*written as f64 / ops).round() as u64),
                share(*read, total_read),
                share(*written, total_written),
            ]);
        }
    }
    t.render(out);
}

/// Each distinct notice an engine gave at the end of a phase, with the phases that ended with it.
fn render_notices(report: &BenchReport, out: &mut String) {
    let mut notices: Vec<(&str, Vec<String>)> = Vec::new();
    for r in &report.results {
        for notice in r.engine_io.iter().flat_map(|io| &io.notices_at_end) {
            let phase = format!("{} {}", round_label(report, r), r.workload);
            match notices.iter_mut().find(|(n, _)| *n == notice.as_str()) {
                Some((_, phases)) => phases.push(phase),
                None => notices.push((notice, vec![phase])),
            }
        }
    }
    if notices.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nnotices from the engines (Stats::notices at the end of a phase):");
    for (notice, phases) in notices {
        let _ = writeln!(out, "  {notice}\n    after: {}", phases.join(", "));
    }
}

/// Open, close and reopen times of every engine that ran, and the reopen after a kill.
fn render_open_close_reopen(report: &BenchReport, out: &mut String) {
    let _ = writeln!(out, "\nopen / close / reopen:");
    for e in report.engines.iter().filter(|e| e.status != "unsupported") {
        let name = if report.repeats > 1 { format!("{} #{}", e.name, e.repeat) } else { e.name.clone() };
        let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.1} ms"));
        let note = e.reopen_note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<10} open {}, close {}, reopen {}{note}",
            name,
            ms(e.open_ms),
            ms(e.close_ms),
            ms(e.reopen_ms)
        );
        if e.kill_reopen_ms.is_some() || e.kill_reopen_note.is_some() {
            let note = e.kill_reopen_note.as_deref().unwrap_or_default();
            let _ = writeln!(out, "  {:<10} reopen after kill {} ({note})", "", ms(e.kill_reopen_ms));
        }
    }
}

/// An engine's name in the I/O table, with its round under `--repeat`.
fn round_label(report: &BenchReport, r: &PhaseResult) -> String {
    if report.repeats > 1 {
        format!("{} #{}", r.engine, r.repeat)
    } else {
        r.engine.clone()
    }
}

/// `--repeat`: per workload and engine, the median with min–max over the rounds.
fn render_summary(report: &BenchReport, out: &mut String) {
    if report.repeats <= 1 || report.summary.is_empty() {
        return;
    }
    let first_engine = report.engines.first().map(|e| e.name.as_str()).unwrap_or("first");
    let _ = writeln!(
        out,
        "\nover {} rounds: median (min–max); ratios are per round, then summarised:",
        report.repeats
    );
    let vs = format!("vs {first_engine}");
    let mut t = Table::new(&[
        "engine",
        "workload",
        "rounds",
        "ops/s median",
        "ops/s min–max",
        &vs,
        "dev read/op",
        "dev write/op",
    ]);
    let bytes = |s: Option<Spread>| s.map_or_else(|| "-".into(), |s| fmt_bytes(s.median.round() as u64));
    for row in &report.summary {
        let tp = row.throughput_ops_per_sec;
        t.row(vec![
            row.engine.clone(),
            row.workload.clone(),
            row.rounds.to_string(),
            fmt_count(tp.median.round() as u64),
            format!("{}–{}", fmt_count(tp.min.round() as u64), fmt_count(tp.max.round() as u64)),
            row.throughput_vs_first.map_or_else(|| "-".into(), |s| s.describe_ratio()),
            bytes(row.device_read_bytes_per_op),
            bytes(row.device_write_bytes_per_op),
        ]);
    }
    t.render(out);
}

/// `--timeline`: per phase, a sparkline of throughput per interval (scaled to the fastest interval
/// of any engine in that workload, so engines compare by eye) and its min / median / max.
fn render_timelines(report: &BenchReport, out: &mut String) {
    let with_timeline = |r: &&PhaseResult| !r.timeline_ops_per_sec.is_empty();
    let Some(interval) = report.results.iter().find(with_timeline).and_then(|r| r.timeline_interval_secs)
    else {
        return;
    };
    let _ = writeln!(
        out,
        "\nthroughput over time (ops/s per {interval} s interval; each bar scaled to the workload's best interval):"
    );
    let mut t =
        Table::new(&["engine", "workload", "intervals", "min", "median", "max", "min/median", "timeline"]);
    for workload in workload_order(&report.results) {
        let rows: Vec<&PhaseResult> =
            report.results.iter().filter(|r| r.workload == workload).filter(with_timeline).collect();
        let best = rows.iter().flat_map(|r| r.timeline_ops_per_sec.iter().copied()).fold(0.0, f64::max);
        for r in rows {
            let series = &r.timeline_ops_per_sec;
            let (min, median, max) = min_median_max(series);
            t.row(vec![
                r.engine.clone(),
                r.workload.clone(),
                series.len().to_string(),
                fmt_count(min.round() as u64),
                fmt_count(median.round() as u64),
                fmt_count(max.round() as u64),
                if median > 0.0 { format!("{:.2}", min / median) } else { "-".into() },
                sparkline(series, best, SPARKLINE_WIDTH),
            ]);
        }
    }
    t.render(out);
}

/// Characters of the widest sparkline; longer series are averaged into this many buckets.
const SPARKLINE_WIDTH: usize = 60;

fn min_median_max(series: &[f64]) -> (f64, f64, f64) {
    let mut sorted = series.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |i: usize| sorted.get(i).copied().unwrap_or(0.0);
    (at(0), at(sorted.len() / 2), at(sorted.len().saturating_sub(1)))
}

/// One block character per bucket, height relative to `top`; a zero interval is a space, so a
/// stall shows as a gap.
fn sparkline(series: &[f64], top: f64, width: usize) -> String {
    const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let buckets = series.len().min(width).max(1);
    (0..buckets)
        .map(|b| {
            let (from, to) = (b * series.len() / buckets, ((b + 1) * series.len() / buckets).max(b + 1));
            let part = series.get(from..to.min(series.len())).unwrap_or(&[]);
            let mean = part.iter().sum::<f64>() / part.len().max(1) as f64;
            if mean <= 0.0 || top <= 0.0 {
                ' '
            } else {
                let level = ((mean / top) * BLOCKS.len() as f64).ceil() as usize;
                BLOCKS[level.clamp(1, BLOCKS.len()) - 1]
            }
        })
        .collect()
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// Workloads in the order they first appear.
pub fn workload_order(results: &[PhaseResult]) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for r in results {
        if !order.contains(&r.workload) {
            order.push(r.workload.clone());
        }
    }
    order
}

/// A latency percentile, or `-` when the phase timed no single operation (a bulk load is one call).
fn latency_cell(summary: &LatencySummary, micros: f64) -> String {
    if summary.count == 0 {
        "-".into()
    } else {
        fmt_us(micros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparkline_scales_to_the_top_and_shows_stalls_as_gaps() {
        assert_eq!(sparkline(&[100.0, 50.0, 0.0, 12.5], 100.0, 60), "█▄ ▁");
        // Longer series are averaged into `width` buckets.
        let long: Vec<f64> = (0..120).map(|i| if i < 60 { 100.0 } else { 0.0 }).collect();
        assert_eq!(sparkline(&long, 100.0, 4), "██  ");
        assert_eq!(sparkline(&[], 0.0, 4), " ");
    }

    #[test]
    fn min_median_max_of_a_series() {
        assert_eq!(min_median_max(&[3.0, 1.0, 2.0]), (1.0, 2.0, 3.0));
        assert_eq!(min_median_max(&[]), (0.0, 0.0, 0.0));
    }
}
