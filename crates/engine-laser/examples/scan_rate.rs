//! How fast laser's table scans a few columns of a compacted store (the HTAP benchmark's Q3
//! and Q4 shapes, `strata repro laser`), through row scans and through column batches.
//!
//! `cargo run --release -p engine-laser --example scan_rate -- [rows] [layout] [dir]`: loads
//! `rows` rows (default 400,000) of 30 four-byte columns under random keys into a store with
//! T = 2 and a budget of a third of the data, lets it compact, then times 12 scans of columns
//! 28–30 over half the keys (MAX) and 12 of columns 21–30 over 5% (SUM), each way, and checks
//! that both ways agree. `SCAN_RATE_DIRECT_IO=1`: direct I/O; `SCAN_RATE_ROUNDS=N`: N rounds;
//! `SCAN_RATE_BATCHES_ONLY=1`: column vectors only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use engine_laser::LaserEngine;
use strata_core::{
    ColumnarTable, Direction, Durability, Engine, EngineConfig, KeyRange, Schema, DEFAULT_BATCH_ROWS,
};
use strata_io::{FileStorage, Storage};

fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn row(index: u64) -> Vec<u8> {
    (0..30u64).flat_map(|c| ((mix64(index.wrapping_mul(31) + c + 1) >> 32) as u32).to_le_bytes()).collect()
}

fn range(start: f64, fraction: f64) -> KeyRange {
    let at = |x: f64| ((x.clamp(0.0, 1.0) * u64::MAX as f64) as u64).to_be_bytes().to_vec();
    KeyRange::from_bounds(at(start)..at(start + fraction))
}

/// Folds little-endian u32 columns: per column the maximum, and the sum of all.
#[derive(Debug, PartialEq, Default)]
struct Fold {
    rows: u64,
    max: Vec<u32>,
    sum: u128,
}

impl Fold {
    fn add_row(&mut self, projected: &[u8]) {
        self.rows += 1;
        self.max.resize(projected.len() / 4, 0);
        for (m, b) in self.max.iter_mut().zip(projected.chunks_exact(4)) {
            let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            *m = (*m).max(v);
            self.sum += u128::from(v);
        }
    }
}

fn by_rows(table: &dyn ColumnarTable, range: KeyRange, columns: &[&str]) -> Fold {
    let projection = table.schema().projection(columns).unwrap();
    let mut fold = Fold::default();
    for item in table.scan(range, Direction::Forward, &projection).unwrap() {
        fold.add_row(&item.unwrap().1);
    }
    fold
}

fn by_batches(table: &dyn ColumnarTable, range: KeyRange, columns: &[&str]) -> Fold {
    let projection = table.schema().projection(columns).unwrap();
    let mut fold = Fold { max: vec![0; columns.len()], ..Fold::default() };
    for batch in table.scan_batches(range, Direction::Forward, &projection, DEFAULT_BATCH_ROWS).unwrap() {
        let batch = batch.unwrap();
        fold.rows += batch.len() as u64;
        for (p, max) in fold.max.iter_mut().enumerate() {
            for v in batch.column_as::<u32>(p).unwrap() {
                *max = (*max).max(v);
                fold.sum += u128::from(v);
            }
        }
    }
    fold
}

fn timed(label: &str, runs: usize, mut scan: impl FnMut(usize) -> Fold) -> Vec<Fold> {
    let started = Instant::now();
    let folds: Vec<Fold> = (0..runs).map(&mut scan).collect();
    let took = started.elapsed() / runs as u32;
    let rows = folds.iter().map(|f| f.rows).sum::<u64>() / runs as u64;
    println!("{label}: {:.1} ms per scan, {rows} rows, {:.0} ns per row", ms(took), ns_per(took, rows));
    folds
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn ns_per(d: Duration, rows: u64) -> f64 {
    d.as_secs_f64() * 1e9 / rows.max(1) as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rows: u64 = args.get(1).map_or(400_000, |a| a.parse().expect("rows"));
    let layout = args.get(2).cloned().unwrap_or_else(|| "row".into());
    let dir = match args.get(3) {
        Some(d) => std::path::PathBuf::from(d),
        None => std::env::temp_dir().join(format!("laser-scan-rate-{}", std::process::id())),
    };
    let _ = std::fs::remove_dir_all(&dir);
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::open_dir(&dir, true).unwrap());
    let direct_io = std::env::var("SCAN_RATE_DIRECT_IO").is_ok();
    let config = EngineConfig { memory_budget_bytes: rows * 128 / 3, direct_io, ..EngineConfig::default() }
        .with_engine_options([("schema", "30x4"), ("size_ratio", "2"), ("layout", layout.as_str())]);
    let engine = LaserEngine::open(storage, &config).unwrap();
    let schema = Schema::new((0..30).map(|i| (format!("c{i}"), 4))).unwrap();
    let table = engine.open_table(&schema).unwrap().unwrap();
    let started = Instant::now();
    for i in 0..rows {
        table.insert(&mix64(i).to_be_bytes(), &row(i), Durability::Buffered).unwrap();
    }
    engine.flush().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    println!(
        "loaded {rows} rows in {:.1} s, layout {layout}: {}",
        started.elapsed().as_secs_f64(),
        engine.layout().to_text()
    );
    let names: Vec<String> = (0..30).map(|i| format!("c{i}")).collect();
    let columns = |r: std::ops::Range<usize>| names[r].iter().map(String::as_str).collect::<Vec<&str>>();
    let (q3, q4, q2b) = (columns(27..30), columns(20..30), columns(15..30));
    let start = |i: usize| (i as f64 * 0.37) % 0.5;
    let rounds: usize = std::env::var("SCAN_RATE_ROUNDS").map_or(1, |r| r.parse().expect("rounds"));
    let batches_only = std::env::var("SCAN_RATE_BATCHES_ONLY").is_ok();
    for _ in 0..rounds {
        let batches3 = timed("Q3 batches", 12, |i| by_batches(table.as_ref(), range(start(i), 0.5), &q3));
        let batches4 = timed("Q4 batches", 12, |i| by_batches(table.as_ref(), range(start(i), 0.05), &q4));
        if !batches_only {
            let rows3 = timed("Q3 rows", 12, |i| by_rows(table.as_ref(), range(start(i), 0.5), &q3));
            let rows4 = timed("Q4 rows", 12, |i| by_rows(table.as_ref(), range(start(i), 0.05), &q4));
            assert!(rows3 == batches3 && rows4 == batches4, "rows and batches disagree");
        }
    }
    // Q2b's shape: columns 16-30 of rows inserted around 85% of the way through the load.
    let projection = table.schema().projection(&q2b).unwrap();
    let (hits, misses) = (engine.stats().cache_hits, engine.stats().cache_misses);
    let started = Instant::now();
    let gets = 20_000u64;
    // `SCAN_RATE_WRITER=1`: a writer inserts new rows at 10,000/s meanwhile (the HTAP run's).
    let writing = std::env::var("SCAN_RATE_WRITER").is_ok();
    let took = std::thread::scope(|scope| {
        if writing {
            scope.spawn(|| {
                for i in rows..rows + 40_000 {
                    table.insert(&mix64(i).to_be_bytes(), &row(i), Durability::Buffered).unwrap();
                    let due = Duration::from_micros((i - rows) * 100);
                    if let Some(wait) = due.checked_sub(started.elapsed()) {
                        std::thread::sleep(wait);
                    }
                }
            });
        }
        for n in 0..gets {
            let index = (rows as f64 * (0.81 + 0.08 * (mix64(n) % 1000) as f64 / 1000.0)) as u64;
            assert!(table.get(&mix64(index).to_be_bytes(), &projection).unwrap().is_some());
        }
        started.elapsed()
    });
    let stats = engine.stats();
    println!(
        "Q2b gets{}: {:.1} µs each, block cache {} hits / {} misses, {} device reads",
        if writing { " beside a writer at 10,000 inserts/s" } else { "" },
        took.as_secs_f64() * 1e6 / gets as f64,
        stats.cache_hits - hits,
        stats.cache_misses - misses,
        stats.io.read_ops
    );
    drop(table);
    engine.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
