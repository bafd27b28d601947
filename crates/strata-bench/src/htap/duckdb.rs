//! DuckDB as an HTAP system (the column store of the issue's comparison; the paper ran
//! MonetDB): a file-backed database with the table and its primary key, the queries in SQL
//! (aggregates computed by DuckDB, vectorized), one connection per thread that uses it, the load
//! through DuckDB's appender, `memory_limit` at the budget but at least what its key index
//! needs (`memory_limit_bytes`): DuckDB keeps a primary key's ART index in memory, and at the
//! quick run's 17.9 MiB budget its load fails ("could not allocate block"), as at the full
//! run's 171 MiB with 256 MiB (4M rows: 244 MiB used when a 256 KiB block was refused).

use std::ops::Range;
use std::path::Path;

use anyhow::{anyhow, Result};
use duckdb::{params_from_iter, Connection};
use parking_lot::Mutex;

use super::workload::{Answer, COLUMNS, Q3_COLUMNS, Q4_COLUMNS};
use super::HtapStore;

/// See the module documentation.
pub struct DuckDb {
    /// The first connection: the others are cloned from it (a connection is not shared
    /// between threads, so each is used by one at a time).
    root: Mutex<Connection>,
    idle: Mutex<Vec<Connection>>,
}

/// The least memory DuckDB is given (see the module documentation).
pub const MIN_MEMORY_LIMIT_BYTES: u64 = 256 << 20;
/// Memory DuckDB is given per row of the table at least: its key index and the appender's
/// blocks (4M rows did not load in 256 MiB).
pub const MEMORY_PER_ROW_BYTES: u64 = 128;

/// DuckDB's `memory_limit` for a table of `rows` rows under `budget`: the budget, but at least
/// `MIN_MEMORY_LIMIT_BYTES` and `MEMORY_PER_ROW_BYTES` a row.
pub fn memory_limit_bytes(budget: u64, rows: u64) -> u64 {
    budget.max(MIN_MEMORY_LIMIT_BYTES).max(rows.saturating_mul(MEMORY_PER_ROW_BYTES))
}

fn columns_sql(range: &Range<usize>) -> String {
    range.clone().map(|c| format!("c{c}")).collect::<Vec<_>>().join(", ")
}

fn values(row: &[u8]) -> Vec<u32> {
    row.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

impl DuckDb {
    /// Creates the database file `path` and the table, DuckDB held to `memory_limit_bytes`.
    pub fn create(path: &Path, memory_limit_bytes: u64) -> Result<DuckDb> {
        let root = Connection::open(path)?;
        let columns: Vec<String> = (0..COLUMNS).map(|c| format!("c{c} UINTEGER NOT NULL")).collect();
        root.execute_batch(&format!(
            "SET memory_limit = '{}MB'; SET threads = 2; CREATE TABLE r (k BLOB PRIMARY KEY, {});",
            memory_limit_bytes >> 20,
            columns.join(", ")
        ))?;
        Ok(DuckDb { root: Mutex::new(root), idle: Mutex::new(Vec::new()) })
    }

    fn with<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let connection = match self.idle.lock().pop() {
            Some(c) => c,
            None => self.root.lock().try_clone()?,
        };
        let result = f(&connection);
        self.idle.lock().push(connection);
        result
    }
}

impl HtapStore for DuckDb {
    fn insert(&self, key: &[u8], row: &[u8]) -> Result<()> {
        let placeholders = vec!["?"; COLUMNS + 1].join(", ");
        let row = values(row);
        self.with(|c| {
            let mut statement = c.prepare_cached(&format!("INSERT INTO r VALUES ({placeholders})"))?;
            let params: Vec<duckdb::types::Value> = std::iter::once(duckdb::types::Value::Blob(key.to_vec()))
                .chain(row.iter().map(|&v| duckdb::types::Value::UInt(v)))
                .collect();
            statement.execute(params_from_iter(params))?;
            Ok(())
        })
    }

    fn update(&self, key: &[u8], column: usize, value: u32) -> Result<()> {
        self.with(|c| {
            let mut statement = c.prepare_cached(&format!("UPDATE r SET c{column} = ? WHERE k = ?"))?;
            if statement.execute(duckdb::params![value, key])? != 1 {
                return Err(anyhow!("update of a row that is not there"));
            }
            Ok(())
        })
    }

    fn get(&self, key: &[u8], columns: Range<usize>) -> Result<Option<Vec<u8>>> {
        self.with(|c| {
            let mut statement =
                c.prepare_cached(&format!("SELECT {} FROM r WHERE k = ?", columns_sql(&columns)))?;
            let mut rows = statement.query(duckdb::params![key])?;
            let Some(row) = rows.next()? else { return Ok(None) };
            let mut out = Vec::with_capacity(columns.len() * 4);
            for i in 0..columns.len() {
                out.extend(row.get::<_, u32>(i)?.to_le_bytes());
            }
            Ok(Some(out))
        })
    }

    fn scan(&self, lo: &[u8], hi: &[u8], columns: Range<usize>, visit: &mut dyn FnMut(&[u8])) -> Result<()> {
        self.with(|c| {
            let sql = format!("SELECT {} FROM r WHERE k >= ? AND k < ? ORDER BY k", columns_sql(&columns));
            let mut statement = c.prepare_cached(&sql)?;
            let mut rows = statement.query(duckdb::params![lo, hi])?;
            let mut bytes = Vec::with_capacity(columns.len() * 4);
            while let Some(row) = rows.next()? {
                bytes.clear();
                for i in 0..columns.len() {
                    bytes.extend(row.get::<_, u32>(i)?.to_le_bytes());
                }
                visit(&bytes);
            }
            Ok(())
        })
    }

    fn q3(&self, lo: &[u8], hi: &[u8]) -> Result<Answer> {
        let maxima: Vec<String> = Q3_COLUMNS.map(|c| format!("max(c{c})")).collect();
        let sql = format!("SELECT {} FROM r WHERE k >= ? AND k < ?", maxima.join(", "));
        self.with(|c| {
            let mut statement = c.prepare_cached(&sql)?;
            let maxima = statement.query_row(duckdb::params![lo, hi], |row| {
                (0..Q3_COLUMNS.len())
                    .map(|i| row.get::<_, Option<u32>>(i).map(|v| v.unwrap_or(0)))
                    .collect::<Result<Vec<u32>, _>>()
            })?;
            Ok(Answer::Max(maxima))
        })
    }

    fn q4(&self, lo: &[u8], hi: &[u8]) -> Result<Answer> {
        let sum: Vec<String> = Q4_COLUMNS.map(|c| format!("c{c}::UBIGINT")).collect();
        let sql = format!(
            "SELECT count(*), coalesce(sum({}), 0)::HUGEINT FROM r WHERE k >= ? AND k < ?",
            sum.join(" + ")
        );
        self.with(|c| {
            let mut statement = c.prepare_cached(&sql)?;
            let (rows, total) = statement.query_row(duckdb::params![lo, hi], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, i128>(1)?))
            })?;
            Ok(Answer::Sum { rows: rows as u64, total: total as u128 })
        })
    }

    fn flush(&self) -> Result<()> {
        self.with(|c| Ok(c.execute_batch("CHECKPOINT")?))
    }

    /// DuckDB's appender, then a checkpoint.
    fn load(&self, rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>) -> Result<()> {
        {
            let root = self.root.lock();
            let mut appender = root.appender("r")?;
            for (key, row) in rows {
                let params: Vec<duckdb::types::Value> = std::iter::once(duckdb::types::Value::Blob(key))
                    .chain(values(&row).into_iter().map(duckdb::types::Value::UInt))
                    .collect();
                appender.append_row(duckdb::appender_params_from_iter(params))?;
            }
            appender.flush()?;
        }
        self.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::htap::workload::{key, key_range, row, Fold, Q2B_COLUMNS};

    /// Q3 and Q4 on the server match the same queries folded from a scan.
    #[test]
    fn server_aggregates_match_folded_scans() {
        let dir = tempfile::tempdir().unwrap();
        let db = DuckDb::create(&dir.path().join("t.duckdb"), memory_limit_bytes(64 << 20, 1_000)).unwrap();
        db.load(&mut (0..2_000).map(|i| (key(i).to_vec(), row(i)))).unwrap();
        db.update(&key(7), 28, u32::MAX).unwrap();
        let (lo, hi) = key_range(0.0, 1.0);
        let mut fold = Fold::q3();
        db.scan(&lo, &hi, Q3_COLUMNS, &mut |r| fold.add(r)).unwrap();
        assert_eq!(db.q3(&lo, &hi).unwrap(), fold.finish());
        let mut fold = Fold::q4();
        db.scan(&lo, &hi, Q4_COLUMNS, &mut |r| fold.add(r)).unwrap();
        assert_eq!(db.q4(&lo, &hi).unwrap(), fold.finish());
        assert_eq!(db.get(&key(3), Q2B_COLUMNS).unwrap().map(|v| v.len()), Some(60));
    }
}
