//! The human-readable report printed on stdout.

use std::fmt::Write as _;

use super::{fmt_bytes, fmt_count, fmt_ratio, fmt_us, BenchReport, PhaseResult};

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
    let w = &report.workload;
    let _ = writeln!(out, "strata bench {} — {}", report.version, report.machine.one_line());
    let git = match (&report.git.commit, report.git.dirty) {
        (Some(c), Some(true)) => format!("git {} (with local changes)", c.get(..12).unwrap_or(c)),
        (Some(c), _) => format!("git {}", c.get(..12).unwrap_or(c)),
        _ => "git commit unknown".into(),
    };
    let ops = match (w.ops_per_workload, w.duration_secs) {
        (_, Some(d)) => format!("{d} s per workload"),
        (Some(n), None) => format!("{} ops per workload", fmt_count(n)),
        _ => String::new(),
    };
    let keys = match w.key_bytes {
        Some(n) => format!("{n} B {} keys", w.key_format),
        None => format!("{} keys", w.key_format),
    };
    let values = if w.value_bytes_min == w.value_bytes_max {
        format!("{} B values", w.value_bytes_min)
    } else {
        format!("{}..={} B values", w.value_bytes_min, w.value_bytes_max)
    };
    let _ = writeln!(out, "{git}; seed {}; {} thread(s); {ops}", w.seed, w.threads);
    let _ = writeln!(
        out,
        "{} records of {keys} + {values}, load order {}; memory budget {}{} ({:.1}x data/budget{})",
        fmt_count(w.records),
        w.load_order,
        fmt_bytes(w.memory_budget_bytes),
        if w.memory_budget_auto { " (auto: data/4)" } else { "" },
        w.data_to_budget_ratio,
        if w.data_to_budget_ratio < 3.0 { ": NOT larger than memory" } else { "" },
    );
    let _ = writeln!(out, "direct I/O {}; sync writes {}", on_off(w.direct_io), on_off(w.sync_writes));

    let _ = writeln!(out, "\nengines:");
    for e in &report.engines {
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

    let workloads = workload_order(&report.results);
    for workload in &workloads {
        let rows: Vec<&PhaseResult> = report.results.iter().filter(|r| &r.workload == workload).collect();
        let Some(first) = rows.first() else { continue };
        let _ = writeln!(out, "\n{workload}: {}", first.description);
        let first_engine = report.engines.first().map(|e| e.name.as_str()).unwrap_or("first");
        let vs = format!("vs {first_engine}");
        let mut t = Table::new(&[
            "engine",
            "status",
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
                r.status.clone(),
                fmt_count(r.throughput_ops_per_sec.round() as u64),
                r.throughput_vs_first.map_or_else(|| "-".into(), |x| format!("{x:.2}x")),
                fmt_us(r.latency_us.p50),
                fmt_us(r.latency_us.p99),
                fmt_us(r.latency_us.p99_9),
                fmt_us(r.latency_us.max),
                r.read_bytes.map_or_else(|| "-".into(), fmt_bytes),
                r.write_bytes.map_or_else(|| "-".into(), fmt_bytes),
                fmt_bytes(r.disk_bytes),
                r.peak_rss_bytes.map_or_else(|| "-".into(), fmt_bytes),
            ]);
        }
        t.render(&mut out);
        for r in rows.iter().filter(|r| r.error.is_some()) {
            let _ = writeln!(out, "  {} {}: {}", r.engine, r.status, r.error.as_deref().unwrap_or_default());
        }
    }

    let _ = writeln!(out, "\nlatency by operation (µs):");
    let mut t = Table::new(&["engine", "workload", "op", "count", "mean", "p50", "p99", "p99.9", "max"]);
    for r in &report.results {
        for (op, s) in &r.latency_us_by_op {
            t.row(vec![
                r.engine.clone(),
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
    t.render(&mut out);

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
        "not found",
    ]);
    for r in &report.results {
        t.row(vec![
            r.engine.clone(),
            r.workload.clone(),
            fmt_bytes(r.user_bytes_written),
            fmt_bytes(r.user_bytes_read),
            fmt_ratio(r.write_amplification),
            fmt_ratio(r.read_amplification),
            r.engine_io.map_or_else(|| "-".into(), |io| fmt_bytes(io.bytes_written)),
            fmt_bytes(r.disk_bytes),
            fmt_bytes(r.disk_apparent_bytes),
            fmt_ratio(r.space_amplification),
            fmt_count(r.not_found),
        ]);
    }
    t.render(&mut out);

    let _ = writeln!(out, "\nopen / close / reopen:");
    for e in report.engines.iter().filter(|e| e.status != "unsupported") {
        let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.1} ms"));
        let note = e.reopen_note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<10} open {}, close {}, reopen {}{note}",
            e.name,
            ms(e.open_ms),
            ms(e.close_ms),
            ms(e.reopen_ms)
        );
    }
    let _ = writeln!(out, "\n{}", report.peak_rss_note);
    out
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
