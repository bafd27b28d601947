//! `strata repro laser`, part 3: a workload shift (LASER §7.3, Fig 10(b)) and whether
//! `layout=auto` follows it — the item 4: after the shift, within 15% of the layout the
//! design advisor picks for the new workload. Per round, three stores of the same shape run the
//! same workload (`crate::htap::shift`): `auto`, which writes its profiled windows as a trace;
//! then the advisor's layout for the trace's windows before the shift, fixed (the paper's
//! D-opt, which §7.3 leaves as it is), and its layout for the windows after the shift, fixed
//! from the start (the layout `auto` should reach).

use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use engine_laser::advisor::{advise, Trace};
use strata::{Db, EngineKind, Options};

use super::laser::progress;
use super::render::print_rows;
use super::ReproArgs;
use crate::htap::shift::{self, ShiftShape, Window};
use crate::htap::workload::ROW_BYTES;
use crate::htap::{self as htap, StrataTable};

/// The paper's largest horizontal shift: Q3's columns 28–30 to 14–16.
const Q3_BEFORE: Range<usize> = 27..30;
const Q3_AFTER: Range<usize> = 13..16;

fn shape(quick: bool) -> ShiftShape {
    // Inserts grow the table by about 40% over the run (the paper's 10,000/s into 400M rows
    // grow it by less than 1%): enough for compactions, not so much that growth hides the shift.
    let (loaded, rate, before, after, window) =
        if quick { (400_000, 2_000, 20, 60, 5) } else { (4_000_000, 12_000, 30, 105, 15) };
    ShiftShape {
        loaded,
        insert_rate_per_sec: rate,
        before: Duration::from_secs(before),
        after: Duration::from_secs(after),
        window: Duration::from_secs(window),
        q3_before: Q3_BEFORE,
        q3_after: Q3_AFTER,
    }
}

/// A system's windows, one list per round.
type Rounds = Vec<Vec<Window>>;

/// What a run ended with: its windows, and a note of the layout's moves.
struct LayoutRun {
    windows: Vec<Window>,
    note: String,
}

pub(super) fn shift(args: &ReproArgs, parent: &Path) -> Result<(), String> {
    let shape = shape(args.quick);
    let data_bytes = (shape.loaded + shape.inserts()) * (8 + ROW_BYTES as u64);
    let budget = data_bytes / 3;
    println!();
    println!(
        "workload shift (§7.3, Fig 10(b)): {} rows loaded, then the HTAP workload (inserts at {}/s, Q2a/Q2b from one \
         reader, Q3 back to back beside them) for {} s with Q3 over columns {}–{}, then {} s with Q3 over columns {}–{}; \
         memory budget {} (a third of the data); direct I/O; T = 2; {} round(s)",
        shape.loaded,
        shape.insert_rate_per_sec,
        shape.before.as_secs(),
        shape.q3_before.start + 1,
        shape.q3_before.end,
        shape.after.as_secs(),
        shape.q3_after.start + 1,
        shape.q3_after.end,
        crate::report::fmt_bytes(budget),
        args.repeat
    );
    let (mut auto, mut old, mut new) = (Rounds::new(), Rounds::new(), Rounds::new());
    let mut layouts = (String::new(), String::new());
    for round in 1..=args.repeat {
        let trace = parent.join(format!("strata-repro-laser-shift-{}.trace", std::process::id()));
        let _ = std::fs::remove_file(&trace);
        progress(args, &format!("shift: laser (auto), round {round}"));
        let mut shift_offset = 0u64;
        let trace_text = trace.display().to_string();
        let knobs = [("trace_file", trace_text.as_str())];
        let run = run_layout(parent, &knobs, budget, &shape, &mut || {
            shift_offset = std::fs::metadata(&trace).map_or(0, |m| m.len());
        })?;
        println!("  round {round}, auto: {}", run.note);
        auto.push(run.windows);
        layouts = advised_layouts(&trace, shift_offset)?;
        let _ = std::fs::remove_file(&trace);
        progress(
            args,
            &format!("shift: laser (the advisor's layout before the shift: {}), round {round}", layouts.0),
        );
        old.push(run_layout(parent, &[("layout", layouts.0.as_str())], budget, &shape, &mut || {})?.windows);
        progress(
            args,
            &format!("shift: laser (the advisor's layout after the shift: {}), round {round}", layouts.1),
        );
        new.push(run_layout(parent, &[("layout", layouts.1.as_str())], budget, &shape, &mut || {})?.windows);
    }
    print_windows(&shape, &[&auto, &old, &new]);
    println!("  before the shift: layout {}", layouts.0);
    println!("  after the shift:  layout {} (each the advisor's for the last round's trace)", layouts.1);
    print_verdict(&shape, &auto, &new);
    Ok(())
}

/// One fresh store with `knobs` (laser, T = 2, schema 30x4, direct I/O), loaded, then the
/// shifting workload; the note names the layout's changes, the levels regrouped in place, the
/// bytes compactions wrote and the layout at the end.
fn run_layout(
    parent: &Path,
    knobs: &[(&str, &str)],
    budget: u64,
    shape: &ShiftShape,
    at_shift: &mut dyn FnMut(),
) -> Result<LayoutRun, String> {
    let dir = tempfile::Builder::new()
        .prefix("strata-repro-laser-shift-")
        .tempdir_in(parent)
        .map_err(|e| format!("cannot create a directory under {}: {e}", parent.display()))?;
    let mut options = Options::new(EngineKind::Laser)
        .memory_budget_bytes(budget)
        .direct_io(true)
        .engine_option("schema", "30x4")
        .engine_option("size_ratio", "2");
    for (name, value) in knobs {
        options = options.engine_option(*name, *value);
    }
    let fail = |e: &dyn std::fmt::Display| format!("laser ({knobs:?}): {e}");
    let db = Db::open(dir.path(), options).map_err(|e| fail(&e))?;
    let table = StrataTable::new(&db).map_err(|e| fail(&e))?;
    htap::load(&table, shape.loaded).map_err(|e| fail(&e))?;
    let windows = shift::run(&table, shape, at_shift).map_err(|e| fail(&e))?;
    let stats = db.stats().map_err(|e| fail(&e))?;
    let counter = |name: &str| stats.counter(name).unwrap_or(0);
    let groups: Vec<String> =
        (1..=counter("levels")).map(|l| counter(&format!("level{l}_groups")).to_string()).collect();
    let note = format!(
        "groups per level {}; {} layout changes, {} levels regrouped in place, {} written by flushes and compactions",
        groups.join(","),
        counter("layout_changes"),
        counter("levels_regrouped"),
        crate::report::fmt_bytes(counter("run_bytes_written"))
    );
    drop(table);
    db.close().map_err(|e| fail(&e))?;
    Ok(LayoutRun { windows, note })
}

/// The advisor's layouts for the trace's windows written before byte `shift_offset` and for
/// those written after it (each window begins with its `columns` line).
fn advised_layouts(path: &Path, shift_offset: u64) -> Result<(String, String), String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading the trace {}: {e}", path.display()))?;
    let (mut before, mut after) = (String::new(), String::new());
    let mut offset = 0u64;
    let mut in_before = true;
    for line in text.split_inclusive('\n') {
        if line.starts_with("columns ") {
            in_before = offset < shift_offset;
        }
        if in_before { &mut before } else { &mut after }.push_str(line);
        offset += line.len() as u64;
    }
    let layout = |text: &str, which: &str| -> Result<String, String> {
        let trace = Trace::parse(text).map_err(|e| format!("the trace {which} the shift: {e}"))?;
        Ok(advise(&trace.params, &trace.workload, trace.levels).layout.to_text())
    };
    Ok((layout(&before, "before")?, layout(&after, "after")?))
}

/// The median over rounds of `pick` in window `w` (`None` when no round has an operation there).
fn median(rounds: &Rounds, w: usize, pick: &dyn Fn(&Window) -> f64) -> Option<f64> {
    median_of(rounds.iter().filter_map(|r| r.get(w)).map(pick).filter(|v| *v > 0.0).collect())
}

fn median_of(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// What `auto` changed in window `w`: medians over rounds of its layout changes, levels
/// regrouped in place and MiB written by flushes and compactions.
fn auto_moves(rounds: &Rounds, w: usize) -> String {
    let of = |pick: &dyn Fn(&Window) -> f64| {
        median_of(rounds.iter().filter_map(|r| r.get(w)).map(pick).collect()).unwrap_or(0.0)
    };
    let changes = of(&|w| w.layout_changes as f64);
    let regroups = of(&|w| w.levels_regrouped as f64);
    let written = of(&|w| w.run_bytes_written as f64 / f64::from(1u32 << 20));
    format!("{changes:.0} / {regroups:.0} / {written:.0}")
}

/// A window's mean Q3 latency (0 when it ran none, which `median` leaves out).
fn q3_ms(w: &Window) -> f64 {
    w.q3.mean_us() / 1000.0
}

fn q2_us(w: &Window) -> f64 {
    w.q2.mean_us()
}

fn print_windows(shape: &ShiftShape, systems: &[&Rounds; 3]) {
    let header = [
        "window (s)",
        "Q3 ms: auto",
        "layout before",
        "layout after",
        "Q2 µs: auto",
        "layout before",
        "layout after",
        "auto: changes / regroups / MiB written",
    ];
    let windows = systems.iter().flat_map(|s| s.iter().map(Vec::len)).max().unwrap_or(0);
    let cell = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    let rows: Vec<Vec<String>> = (0..windows)
        .map(|w| {
            let from = w as u64 * shape.window.as_secs();
            let mark = if w == shape.windows_before() { " (shift)" } else { "" };
            let mut row = vec![format!("{from}–{}{mark}", from + shape.window.as_secs())];
            row.extend(systems.iter().map(|s| cell(median(s, w, &q3_ms), 1)));
            row.extend(systems.iter().map(|s| cell(median(s, w, &q2_us), 1)));
            row.push(auto_moves(systems[0], w));
            row
        })
        .collect();
    print_rows(&header, &rows);
}

/// `auto` against the layout for the new workload over the last half of the run after the
/// shift (means of the windows' medians).
fn print_verdict(shape: &ShiftShape, auto: &Rounds, new: &Rounds) {
    let windows = auto.iter().map(Vec::len).max().unwrap_or(0);
    let after = windows.saturating_sub(shape.windows_before());
    let settled = (windows - after / 2)..windows;
    let mean = |rounds: &Rounds, pick: &dyn Fn(&Window) -> f64| {
        let values: Vec<f64> = settled.clone().filter_map(|w| median(rounds, w, pick)).collect();
        values.iter().sum::<f64>() / values.len().max(1) as f64
    };
    let (q3_auto, q3_new) = (mean(auto, &q3_ms), mean(new, &q3_ms));
    let (q2_auto, q2_new) = (mean(auto, &q2_us), mean(new, &q2_us));
    let verdict = |a: f64, b: f64| if a <= b * 1.15 { "within 15%" } else { "NOT within 15%" };
    println!(
        "  the last half after the shift ({} s on): auto Q3 {q3_auto:.1} ms vs {q3_new:.1} ({:.2}×, {}); Q2 {q2_auto:.1} µs \
         vs {q2_new:.1} ({:.2}×, {})",
        settled.start as u64 * shape.window.as_secs(),
        q3_auto / q3_new.max(1e-9),
        verdict(q3_auto, q3_new),
        q2_auto / q2_new.max(1e-9),
        verdict(q2_auto, q2_new),
    );
}
