//! A workload shift (LASER §7.3, Fig 10(b)'s horizontal shift), for the issue's "a layout that
//! keeps choosing itself": the HTAP workload with Q3 running beside the writer and a Q2 reader,
//! then, `before` into the run, Q3's projection moved (the paper's shift by 14 takes columns
//! 28–30 to 14–16). Each operation's latency goes to the time window it started in, so a run
//! shows how a layout fares before the shift, right after it, and once `layout=auto` has
//! followed. The store is loaded by the caller (`super::load`).

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::workload::{self, INSERTS_PER_UPDATE, Q3_FRACTION};
use super::{HtapStore, StrataTable, Timing};

/// The run's size and its shift.
#[derive(Clone, Debug)]
pub struct ShiftShape {
    /// Rows loaded before the run (`super::load`).
    pub loaded: u64,
    pub insert_rate_per_sec: u64,
    /// How long the workload runs before the shift, and after it.
    pub before: Duration,
    pub after: Duration,
    /// Latencies are reported per window of this length (`before` a multiple of it).
    pub window: Duration,
    /// The columns Q3 reads before the shift, and after it.
    pub q3_before: Range<usize>,
    pub q3_after: Range<usize>,
}

impl ShiftShape {
    /// Rows the writer inserts at most (the run's length at the insert rate).
    pub fn inserts(&self) -> u64 {
        ((self.before + self.after).as_secs_f64() * self.insert_rate_per_sec as f64) as u64
    }

    /// Windows before the shift.
    pub fn windows_before(&self) -> usize {
        (self.before.as_secs_f64() / self.window.as_secs_f64()).round() as usize
    }

    fn window_count(&self) -> usize {
        ((self.before + self.after).as_secs_f64() / self.window.as_secs_f64()).ceil() as usize
    }
}

/// Latencies of the operations that started in one window, and what the engine did in it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Window {
    pub q3: Timing,
    pub q2: Timing,
    /// laser's `layout_changes`, `levels_regrouped` and `run_bytes_written` during the window.
    pub layout_changes: u64,
    pub levels_regrouped: u64,
    pub run_bytes_written: u64,
}

impl Window {
    fn merge(&mut self, other: &Window) {
        self.q3.merge(other.q3);
        self.q2.merge(other.q2);
        self.layout_changes += other.layout_changes;
        self.levels_regrouped += other.levels_regrouped;
        self.run_bytes_written += other.run_bytes_written;
    }
}

/// laser's counters of what it changed: layout changes, levels regrouped, run bytes written.
fn engine_counters(table: &StrataTable) -> Result<[u64; 3]> {
    let stats = table.db().stats()?;
    let counter = |name: &str| stats.counter(name).unwrap_or(0);
    Ok([counter("layout_changes"), counter("levels_regrouped"), counter("run_bytes_written")])
}

/// What every thread records: the run's start, and a window per `shape.window`.
struct Clock {
    started: Instant,
    window: Duration,
    count: usize,
}

impl Clock {
    fn window_of(&self, at: Instant) -> Option<usize> {
        let index = (at - self.started).as_secs_f64() / self.window.as_secs_f64();
        Some(index as usize).filter(|&i| i < self.count)
    }
}

/// The workload on `table` (loaded with `shape.loaded` rows), shifting after `shape.before`;
/// `at_shift` runs once, at the shift. Returns each window's latencies. Every Q3 answer is a
/// real MAX over the projected columns, computed from column vectors.
pub fn run(table: &StrataTable, shape: &ShiftShape, at_shift: &mut dyn FnMut()) -> Result<Vec<Window>> {
    let clock = Clock { started: Instant::now(), window: shape.window, count: shape.window_count() };
    let (stop, shifted) = (AtomicBool::new(false), AtomicBool::new(false));
    let inserted = AtomicU64::new(shape.loaded);
    let mut engine = vec![Window::default(); clock.count];
    let parts = std::thread::scope(|scope| {
        let writer = scope.spawn(|| write_until(table, shape, &inserted, &stop, &clock));
        let reader = scope.spawn(|| read_until(table, &inserted, &stop, &clock));
        let scanner = scope.spawn(|| scan_until(table, shape, &shifted, &stop, &clock));
        let sampled = sample_windows(table, shape, &clock, &mut engine, &mut || {
            at_shift();
            shifted.store(true, Relaxed);
        });
        stop.store(true, Relaxed);
        let joined = |h: std::thread::ScopedJoinHandle<'_, Result<Vec<Window>>>| {
            h.join().map_err(|_| anyhow!("a workload thread panicked"))?
        };
        let parts = [joined(writer)?, joined(reader)?, joined(scanner)?];
        sampled?;
        Ok::<_, anyhow::Error>(parts)
    })?;
    let mut windows = engine;
    for part in &parts {
        windows.iter_mut().zip(part).for_each(|(w, p)| w.merge(p));
    }
    Ok(windows)
}

/// Sleeps to the end of each window and notes the engine's counters' growth in it; calls
/// `shift` once, `windows_before` windows in.
fn sample_windows(
    table: &StrataTable,
    shape: &ShiftShape,
    clock: &Clock,
    windows: &mut [Window],
    shift: &mut dyn FnMut(),
) -> Result<()> {
    let mut last = engine_counters(table)?;
    for (i, window) in windows.iter_mut().enumerate() {
        if i == shape.windows_before() {
            shift();
        }
        let end = clock.window * (i as u32 + 1);
        std::thread::sleep(end.saturating_sub(clock.started.elapsed()));
        let now = engine_counters(table)?;
        window.layout_changes = now[0] - last[0];
        window.levels_regrouped = now[1] - last[1];
        window.run_bytes_written = now[2] - last[2];
        last = now;
    }
    Ok(())
}

/// Q1 at the insert rate and Q5 after every hundredth insert, until `stop` (their latencies
/// are not reported: every layout inserts whole rows into level 0 alike).
fn write_until(
    table: &StrataTable,
    shape: &ShiftShape,
    inserted: &AtomicU64,
    stop: &AtomicBool,
    clock: &Clock,
) -> Result<Vec<Window>> {
    let mut update_n = 0;
    for n in 1.. {
        let due = Duration::from_secs_f64(n as f64 / shape.insert_rate_per_sec.max(1) as f64);
        if let Some(wait) = due.checked_sub(clock.started.elapsed()) {
            std::thread::sleep(wait);
        }
        if stop.load(Relaxed) {
            break;
        }
        let index = shape.loaded + n - 1;
        table.insert(&workload::key(index), &workload::row(index))?;
        inserted.store(index + 1, Relaxed);
        if n.is_multiple_of(INSERTS_PER_UPDATE) {
            let (row, column, value) = workload::update(update_n, index + 1);
            update_n += 1;
            table.update(&workload::key(row), column, value)?;
        }
    }
    Ok(Vec::new())
}

/// Q2a and Q2b alternating at random, back to back, until `stop`.
fn read_until(
    table: &StrataTable,
    inserted: &AtomicU64,
    stop: &AtomicBool,
    clock: &Clock,
) -> Result<Vec<Window>> {
    let mut rng = SmallRng::seed_from_u64(0x5_41F7);
    let mut windows = vec![Window::default(); clock.count];
    while !stop.load(Relaxed) {
        let at = Instant::now();
        let wide = rng.gen_bool(0.5);
        let took = super::q2(table, &mut rng, inserted.load(Relaxed), wide)?;
        if let Some(i) = clock.window_of(at) {
            windows[i].q2.add(took);
        }
    }
    Ok(windows)
}

/// Q3 (MAX of three columns over half the keys, from a random start) back to back until
/// `stop`, over `q3_before` and, once `shifted`, over `q3_after`.
fn scan_until(
    table: &StrataTable,
    shape: &ShiftShape,
    shifted: &AtomicBool,
    stop: &AtomicBool,
    clock: &Clock,
) -> Result<Vec<Window>> {
    let mut windows = vec![Window::default(); clock.count];
    for i in 0.. {
        if stop.load(Relaxed) {
            break;
        }
        let columns = if shifted.load(Relaxed) { shape.q3_after.clone() } else { shape.q3_before.clone() };
        let (lo, hi) = workload::key_range(workload::analytic_start(i, Q3_FRACTION), Q3_FRACTION);
        let at = Instant::now();
        let answer = table.max_over(&lo, &hi, columns)?;
        let took = at.elapsed();
        if matches!(&answer, workload::Answer::Max(m) if m.iter().all(|&v| v == 0)) {
            return Err(anyhow!("a Q3 over half the keys found no row"));
        }
        if let Some(w) = clock.window_of(at) {
            windows[w].q3.add(took);
        }
    }
    Ok(windows)
}

/// The driver in small on laser (`auto`): every window before and after the shift ran Q3s and
/// Q2s, the shift came once, and the engine's counters were sampled.
#[cfg(test)]
mod tests {
    use super::*;
    use strata::{Db, EngineKind, Options};

    #[test]
    fn a_small_shift_runs_every_query_in_every_window() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::new(EngineKind::Laser)
            .memory_budget_bytes(256 << 10)
            .engine_option("schema", "30x4")
            .engine_option("size_ratio", "2")
            .engine_option("memtable_bytes", "64KiB");
        let db = Db::open(dir.path(), options).unwrap();
        let table = StrataTable::new(&db).unwrap();
        let shape = ShiftShape {
            loaded: 4_000,
            insert_rate_per_sec: 2_000,
            before: Duration::from_secs(1),
            after: Duration::from_secs(2),
            window: Duration::from_secs(1),
            q3_before: 27..30,
            q3_after: 13..16,
        };
        super::super::load(&table, shape.loaded).unwrap();
        let mut shifts = 0;
        let windows = run(&table, &shape, &mut || shifts += 1).unwrap();
        assert_eq!(shifts, 1);
        assert_eq!(windows.len(), 3);
        for (i, w) in windows.iter().enumerate() {
            assert!(w.q3.count > 0 && w.q2.count > 0, "window {i}: {w:?}");
        }
        assert!(
            windows.iter().map(|w| w.run_bytes_written).sum::<u64>() > 0,
            "no flush sampled: {windows:?}"
        );
        drop(table);
        db.close().unwrap();
    }
}
