//! The HTAP benchmark of LASER's paper (§7.2, Table 3), scaled: load a table of 30 four-byte
//! columns, then one writer inserts at a fixed rate with an update of one column after every
//! hundredth insert (Q1, Q5) while readers run wide point reads of recent rows (Q2a, all
//! columns, insertion age ~ normal(0.98, 0.02)) and narrower ones of older rows (Q2b, columns
//! 16–30, normal(0.85, 0.02)); then the analytical queries over the final table: Q3 (MAX of
//! columns 28–30 over half the keys) and Q4 (a21 + … + a30 over 5% of them), each answer
//! checked against the driver's own model of the final table. Each system is a `HtapStore`.

#[cfg(feature = "duckdb")]
pub mod duckdb;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod shift;
pub mod workload;

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata::{Db, Direction, Durability, KeyRange, Projection, Schema, Table, DEFAULT_BATCH_ROWS};

use workload::{Answer, Fold, Model, COLUMNS, INSERTS_PER_UPDATE, Q2B_COLUMNS, Q3_COLUMNS, Q4_COLUMNS};

/// A system under the HTAP workload. Columns are given as index ranges; values are
/// little-endian u32s in column order.
pub trait HtapStore: Sync {
    fn insert(&self, key: &[u8], row: &[u8]) -> Result<()>;
    /// Sets one column of an existing row.
    fn update(&self, key: &[u8], column: usize, value: u32) -> Result<()>;
    fn get(&self, key: &[u8], columns: Range<usize>) -> Result<Option<Vec<u8>>>;
    /// Calls `visit` with the columns of every row with a key in `lo..hi`, in key order.
    fn scan(&self, lo: &[u8], hi: &[u8], columns: Range<usize>, visit: &mut dyn FnMut(&[u8])) -> Result<()>;
    fn flush(&self) -> Result<()>;

    /// Q3 over `lo..hi`, the system's own way: SQL aggregates on the server, or column vectors
    /// folded here (`StrataTable`). `scan` and `Fold` give the same answer row by row (the
    /// SQL systems' tests check theirs against it).
    fn q3(&self, lo: &[u8], hi: &[u8]) -> Result<Answer>;

    /// Q4 over `lo..hi`, as `q3`.
    fn q4(&self, lo: &[u8], hi: &[u8]) -> Result<Answer>;

    /// The initial load, the way the system's users load a table: by default one insert per
    /// row, then a flush.
    fn load(&self, rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>) -> Result<()> {
        for (key, row) in rows {
            self.insert(&key, &row)?;
        }
        self.flush()
    }
}

/// The paper's schema: columns `c0` … `c29` of 4 bytes (laser's `schema=30x4`).
pub fn schema() -> Schema {
    Schema::new((0..COLUMNS).map(|i| (format!("c{i}"), 4))).expect("a valid schema")
}

/// A Strata store through its table (laser's own, or any engine's row-encoded fallback).
pub struct StrataTable<'db> {
    db: &'db Db,
    table: Table<'db>,
    names: Vec<String>,
    projections: Vec<(Range<usize>, Projection)>,
}

impl<'db> StrataTable<'db> {
    pub fn new(db: &'db Db) -> Result<StrataTable<'db>> {
        let table = db.table(schema())?;
        let names: Vec<String> = (0..COLUMNS).map(|i| format!("c{i}")).collect();
        let mut projections = Vec::new();
        for range in [0..COLUMNS, Q2B_COLUMNS, Q3_COLUMNS, Q4_COLUMNS] {
            let picked: Vec<&str> = names[range.clone()].iter().map(String::as_str).collect();
            projections.push((range, table.projection(&picked)?));
        }
        Ok(StrataTable { db, table, names, projections })
    }

    fn fold_batches(&self, lo: &[u8], hi: &[u8], projection: &Projection, mut fold: Fold) -> Result<Answer> {
        let range = KeyRange::from_bounds(lo.to_vec()..hi.to_vec());
        for batch in
            self.table.scan_batches_with(range, Direction::Forward, projection, DEFAULT_BATCH_ROWS)?
        {
            fold.add_batch(&batch?)?;
        }
        Ok(fold.finish())
    }

    /// The store the table is in.
    pub fn db(&self) -> &'db Db {
        self.db
    }

    /// Q3's MAX over any columns of `lo..hi` from column vectors (the shifted Q3 of
    /// `shift`), the projection built for the call.
    pub fn max_over(&self, lo: &[u8], hi: &[u8], columns: Range<usize>) -> Result<Answer> {
        let picked: Vec<&str> = self.names[columns.clone()].iter().map(String::as_str).collect();
        let projection = self.table.projection(&picked)?;
        self.fold_batches(lo, hi, &projection, Fold::max_of(columns.len()))
    }

    fn projection(&self, columns: &Range<usize>) -> Result<&Projection> {
        self.projections
            .iter()
            .find(|(r, _)| r == columns)
            .map(|(_, p)| p)
            .ok_or_else(|| anyhow!("no projection {columns:?}"))
    }
}

impl HtapStore for StrataTable<'_> {
    fn insert(&self, key: &[u8], row: &[u8]) -> Result<()> {
        Ok(self.table.insert_with(key, row, Durability::Buffered)?)
    }

    fn update(&self, key: &[u8], column: usize, value: u32) -> Result<()> {
        let bytes = value.to_le_bytes();
        let updated =
            self.table.update_with(key, &[(self.names[column].as_str(), &bytes)], Durability::Buffered)?;
        if !updated {
            return Err(anyhow!("update of a row that is not there"));
        }
        Ok(())
    }

    fn get(&self, key: &[u8], columns: Range<usize>) -> Result<Option<Vec<u8>>> {
        Ok(self.table.get(key, self.projection(&columns)?)?)
    }

    fn scan(&self, lo: &[u8], hi: &[u8], columns: Range<usize>, visit: &mut dyn FnMut(&[u8])) -> Result<()> {
        let range = KeyRange::from_bounds(lo.to_vec()..hi.to_vec());
        for item in self.table.scan_with(range, Direction::Forward, self.projection(&columns)?)? {
            visit(&item?.1);
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(self.db.flush()?)
    }

    /// Column vectors, folded a column at a time (`Table::scan_batches`).
    fn q3(&self, lo: &[u8], hi: &[u8]) -> Result<Answer> {
        self.fold_batches(lo, hi, self.projection(&Q3_COLUMNS)?, Fold::q3())
    }

    fn q4(&self, lo: &[u8], hi: &[u8]) -> Result<Answer> {
        self.fold_batches(lo, hi, self.projection(&Q4_COLUMNS)?, Fold::q4())
    }
}

/// The workload's size.
#[derive(Clone, Copy, Debug)]
pub struct HtapShape {
    /// Rows loaded before the workload.
    pub loaded: u64,
    /// Rows the writer inserts during it.
    pub inserts: u64,
    pub insert_rate_per_sec: u64,
    pub q2a: u64,
    pub q2b: u64,
    /// Q3s and Q4s each.
    pub analytic: u64,
    pub readers: usize,
}

/// How long some operations took.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timing {
    pub count: u64,
    pub total: Duration,
    pub max: Duration,
}

impl Timing {
    pub(crate) fn add(&mut self, took: Duration) {
        self.count += 1;
        self.total += took;
        self.max = self.max.max(took);
    }

    pub(crate) fn merge(&mut self, other: Timing) {
        self.count += other.count;
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    pub fn mean_us(&self) -> f64 {
        self.total.as_secs_f64() * 1e6 / self.count.max(1) as f64
    }
}

/// One system's run.
#[derive(Clone, Debug, Default)]
pub struct HtapResult {
    pub loaded_rows: u64,
    pub load: Duration,
    pub inserts: Timing,
    pub updates: Timing,
    pub q2a: Timing,
    pub q2b: Timing,
    pub q3: Timing,
    pub q4: Timing,
    /// Analytical answers that differ from the model's (none when every one matched).
    pub wrong_answers: Vec<String>,
}

impl HtapResult {
    /// The paper's total: the time its queries (Q2a, Q2b, Q3, Q4) took.
    pub fn query_total(&self) -> Duration {
        self.q2a.total + self.q2b.total + self.q3.total + self.q4.total
    }

    /// `query_total` with `q2` Q2a and `q2` Q2b at their mean latencies (the paper's
    /// proportion of point reads to rows, where the run issued more).
    pub fn paper_mix_total(&self, q2: f64) -> Duration {
        let point_reads_us = (self.q2a.mean_us() + self.q2b.mean_us()) * q2;
        Duration::from_secs_f64(point_reads_us / 1e6) + self.q3.total + self.q4.total
    }
}

/// Loads the first `rows` rows into `store`; how long it took.
pub fn load(store: &dyn HtapStore, rows: u64) -> Result<Duration> {
    let started = Instant::now();
    store.load(&mut (0..rows).map(|i| (workload::key(i).to_vec(), workload::row(i))))?;
    Ok(started.elapsed())
}

/// The workload (after `load`), then Q3 and Q4 checked against `model` (built for the same
/// shape: `Model::build(shape.loaded, shape.loaded + shape.inserts)`).
pub fn run(store: &dyn HtapStore, shape: &HtapShape, model: &Model) -> Result<HtapResult> {
    let mut result = HtapResult::default();
    let inserted = AtomicU64::new(shape.loaded);
    let (writes, reads) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| write_phase(store, shape, &inserted));
        let readers: Vec<_> = (0..shape.readers.max(1))
            .map(|r| {
                scope.spawn({
                    let inserted = &inserted;
                    move || read_phase(store, shape, inserted, r)
                })
            })
            .collect();
        let writes = writer.join().map_err(|_| anyhow!("the writer panicked"))?;
        let reads: Vec<Result<(Timing, Timing)>> =
            readers.into_iter().map(|h| h.join().map_err(|_| anyhow!("a reader panicked"))?).collect();
        Ok::<_, anyhow::Error>((writes, reads))
    })?;
    (result.inserts, result.updates) = writes?;
    for read in reads {
        let (a, b) = read?;
        result.q2a.merge(a);
        result.q2b.merge(b);
    }
    store.flush()?;
    for i in 0..shape.analytic {
        for (query, fraction) in [(3, workload::Q3_FRACTION), (4, workload::Q4_FRACTION)] {
            let (lo, hi) = workload::key_range(workload::analytic_start(i * 2 + query, fraction), fraction);
            let want = if query == 3 { model.q3(&lo, &hi) } else { model.q4(&lo, &hi) };
            let started = Instant::now();
            let got = if query == 3 { store.q3(&lo, &hi)? } else { store.q4(&lo, &hi)? };
            let took = started.elapsed();
            if query == 3 {
                result.q3.add(took)
            } else {
                result.q4.add(took)
            }
            if got != want {
                result.wrong_answers.push(format!("Q{query} #{i}: got {} want {}", show(&got), show(&want)));
            }
        }
    }
    Ok(result)
}

fn show(answer: &Answer) -> String {
    match answer {
        Answer::Max(m) => format!("max {m:?}"),
        Answer::Sum { rows, total } => format!("{rows} rows, sum {total}"),
    }
}

/// Q1 at `insert_rate_per_sec`, and Q5 after every hundredth insert.
fn write_phase(store: &dyn HtapStore, shape: &HtapShape, inserted: &AtomicU64) -> Result<(Timing, Timing)> {
    let (mut inserts, mut updates) = (Timing::default(), Timing::default());
    let started = Instant::now();
    let mut update_n = 0;
    for n in 1..=shape.inserts {
        let due = Duration::from_secs_f64(n as f64 / shape.insert_rate_per_sec.max(1) as f64);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
        let index = shape.loaded + n - 1;
        let at = Instant::now();
        store.insert(&workload::key(index), &workload::row(index))?;
        inserts.add(at.elapsed());
        inserted.store(index + 1, Relaxed);
        if n.is_multiple_of(INSERTS_PER_UPDATE) {
            let (row, column, value) = workload::update(update_n, index + 1);
            update_n += 1;
            let at = Instant::now();
            store.update(&workload::key(row), column, value)?;
            updates.add(at.elapsed());
        }
    }
    Ok((inserts, updates))
}

/// This reader's share of Q2a and Q2b, alternating.
fn read_phase(
    store: &dyn HtapStore,
    shape: &HtapShape,
    inserted: &AtomicU64,
    reader: usize,
) -> Result<(Timing, Timing)> {
    let mut rng = SmallRng::seed_from_u64(0x0C2A + reader as u64);
    let share = |total: u64| total / shape.readers.max(1) as u64;
    let (mut q2a, mut q2b) = (Timing::default(), Timing::default());
    let (mut a_left, mut b_left) = (share(shape.q2a), share(shape.q2b));
    while a_left + b_left > 0 {
        let wide = a_left > 0 && (b_left == 0 || rng.gen_bool(0.5));
        let took = q2(store, &mut rng, inserted.load(Relaxed), wide)?;
        if wide {
            q2a.add(took);
            a_left -= 1;
        } else {
            q2b.add(took);
            b_left -= 1;
        }
    }
    Ok((q2a, q2b))
}

/// One Q2a (`wide`: every column of a row of insertion age ~ normal(0.98, 0.02)) or Q2b
/// (columns 16–30, normal(0.85, 0.02)) of the `count` rows inserted so far; how long it took.
fn q2(store: &dyn HtapStore, rng: &mut SmallRng, count: u64, wide: bool) -> Result<Duration> {
    let (mean, columns) = if wide { (0.98, 0..COLUMNS) } else { (0.85, Q2B_COLUMNS) };
    let age = (mean + 0.02 * standard_normal(rng)).clamp(0.0, 1.0);
    let index = ((age * count as f64) as u64).min(count - 1);
    let at = Instant::now();
    let found = store.get(&workload::key(index), columns)?;
    let took = at.elapsed();
    if found.is_none() {
        return Err(anyhow!("Q2 found no row {index} of {count}"));
    }
    Ok(took)
}

/// Box–Muller.
fn standard_normal(rng: &mut SmallRng) -> f64 {
    let (u1, u2): (f64, f64) = (rng.gen_range(f64::EPSILON..1.0), rng.gen());
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// The benchmark in small, against our engines (CI's version of `strata repro laser`): every
/// analytical answer, which laser computes from column vectors, matches the model.
#[cfg(test)]
mod tests {
    use super::*;
    use strata::{EngineKind, Options};

    const TINY: HtapShape = HtapShape {
        loaded: 6_000,
        inserts: 600,
        insert_rate_per_sec: 20_000,
        q2a: 300,
        q2b: 300,
        analytic: 3,
        readers: 2,
    };

    fn answers_match(kind: EngineKind, knobs: &[(&str, &str)]) {
        let dir = tempfile::tempdir().unwrap();
        let mut options = Options::new(kind).memory_budget_bytes(256 << 10);
        if kind == EngineKind::Laser {
            options = options
                .engine_option("schema", "30x4")
                .engine_option("size_ratio", "2")
                .engine_option("memtable_bytes", "64KiB");
        }
        for (name, value) in knobs {
            options = options.engine_option(*name, *value);
        }
        let db = Db::open(dir.path(), options).unwrap();
        let store = StrataTable::new(&db).unwrap();
        let model = workload::Model::build(TINY.loaded, TINY.loaded + TINY.inserts);
        load(&store, TINY.loaded).unwrap();
        let result = run(&store, &TINY, &model).unwrap();
        assert!(result.wrong_answers.is_empty(), "{kind} {knobs:?}: {:?}", result.wrong_answers);
        assert_eq!((result.q3.count, result.q4.count), (TINY.analytic, TINY.analytic));
        drop(store);
        db.close().unwrap();
    }

    #[test]
    fn laser_answers_from_column_vectors_in_every_layout() {
        answers_match(EngineKind::Laser, &[]);
        answers_match(EngineKind::Laser, &[("layout", "row/0-14|15-29/column")]);
    }

    #[test]
    fn a_row_encoded_engine_answers_from_batches_of_rows() {
        answers_match(EngineKind::Memory, &[]);
    }
}
