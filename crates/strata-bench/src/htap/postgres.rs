//! PostgreSQL 15 as an HTAP system (LASER §7.2's row store): the table with a primary key, the
//! queries in SQL (aggregates computed by the server), one connection per thread that uses it,
//! the load through COPY. Four-byte values are stored as `int4` with the sign bit flipped, so
//! the server's order (MAX) is the unsigned order; sums are taken back exactly.

use std::io::Write as _;
use std::ops::Range;

use anyhow::{anyhow, Result};
use parking_lot::Mutex;
use postgres::{Client, NoTls, Statement};

use super::workload::{self, Answer, COLUMNS, Q3_COLUMNS, Q4_COLUMNS};
use super::HtapStore;

/// A connection and its prepared statements.
struct Session {
    client: Client,
    insert: Statement,
    updates: Vec<Statement>,
    gets: Vec<(Range<usize>, Statement)>,
}

/// See the module documentation.
pub struct Postgres {
    conninfo: String,
    idle: Mutex<Vec<Session>>,
}

fn to_sql(v: u32) -> i32 {
    (v ^ 0x8000_0000) as i32
}

fn from_sql(v: i32) -> u32 {
    (v as u32) ^ 0x8000_0000
}

fn columns_sql(range: &Range<usize>) -> String {
    range.clone().map(|c| format!("c{c}")).collect::<Vec<_>>().join(", ")
}

impl Postgres {
    /// Connects to `conninfo` and creates the table.
    pub fn connect(conninfo: &str) -> Result<Postgres> {
        let mut client = Client::connect(conninfo, NoTls)?;
        let columns: Vec<String> = (0..COLUMNS).map(|c| format!("c{c} int4 NOT NULL")).collect();
        client.batch_execute(&format!(
            "DROP TABLE IF EXISTS r; CREATE TABLE r (k bytea PRIMARY KEY, {})",
            columns.join(", ")
        ))?;
        Ok(Postgres { conninfo: conninfo.to_string(), idle: Mutex::new(Vec::new()) })
    }

    fn session(&self) -> Result<Session> {
        if let Some(s) = self.idle.lock().pop() {
            return Ok(s);
        }
        let mut client = Client::connect(&self.conninfo, NoTls)?;
        let placeholders: Vec<String> = (1..=COLUMNS + 1).map(|i| format!("${i}")).collect();
        let insert = client.prepare(&format!("INSERT INTO r VALUES ({})", placeholders.join(", ")))?;
        let updates = (0..COLUMNS)
            .map(|c| client.prepare(&format!("UPDATE r SET c{c} = $2 WHERE k = $1")))
            .collect::<Result<Vec<_>, _>>()?;
        let mut gets = Vec::new();
        for range in [0..COLUMNS, workload::Q2B_COLUMNS] {
            let statement = client.prepare(&format!("SELECT {} FROM r WHERE k = $1", columns_sql(&range)))?;
            gets.push((range, statement));
        }
        Ok(Session { client, insert, updates, gets })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Session) -> Result<T>) -> Result<T> {
        let mut session = self.session()?;
        let result = f(&mut session);
        self.idle.lock().push(session);
        result
    }

    fn range_rows(&self, sql: &str, lo: &[u8], hi: &[u8]) -> Result<Vec<postgres::Row>> {
        self.with(|s| Ok(s.client.query(sql, &[&lo, &hi])?))
    }
}

impl HtapStore for Postgres {
    fn insert(&self, key: &[u8], row: &[u8]) -> Result<()> {
        let values: Vec<i32> =
            row.chunks_exact(4).map(|b| to_sql(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))).collect();
        self.with(|s| {
            let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![&key];
            params.extend(values.iter().map(|v| v as &(dyn postgres::types::ToSql + Sync)));
            s.client.execute(&s.insert, &params)?;
            Ok(())
        })
    }

    fn update(&self, key: &[u8], column: usize, value: u32) -> Result<()> {
        self.with(|s| {
            let updated = s.client.execute(&s.updates[column], &[&key, &to_sql(value)])?;
            if updated != 1 {
                return Err(anyhow!("update of a row that is not there"));
            }
            Ok(())
        })
    }

    fn get(&self, key: &[u8], columns: Range<usize>) -> Result<Option<Vec<u8>>> {
        self.with(|s| {
            let statement = s.gets.iter().find(|(r, _)| *r == columns).map(|(_, st)| st.clone());
            let statement = statement.ok_or_else(|| anyhow!("no statement for {columns:?}"))?;
            let rows = s.client.query(&statement, &[&key])?;
            Ok(rows
                .first()
                .map(|row| (0..columns.len()).flat_map(|i| from_sql(row.get(i)).to_le_bytes()).collect()))
        })
    }

    fn scan(&self, lo: &[u8], hi: &[u8], columns: Range<usize>, visit: &mut dyn FnMut(&[u8])) -> Result<()> {
        let sql = format!("SELECT {} FROM r WHERE k >= $1 AND k < $2 ORDER BY k", columns_sql(&columns));
        for row in self.range_rows(&sql, lo, hi)? {
            let bytes: Vec<u8> =
                (0..columns.len()).flat_map(|i| from_sql(row.get(i)).to_le_bytes()).collect();
            visit(&bytes);
        }
        Ok(())
    }

    fn q3(&self, lo: &[u8], hi: &[u8]) -> Result<Answer> {
        let maxima: Vec<String> = Q3_COLUMNS.map(|c| format!("max(c{c})")).collect();
        let sql = format!("SELECT {} FROM r WHERE k >= $1 AND k < $2", maxima.join(", "));
        let rows = self.range_rows(&sql, lo, hi)?;
        let row = rows.first().ok_or_else(|| anyhow!("an aggregate without a row"))?;
        Ok(Answer::Max(
            (0..Q3_COLUMNS.len()).map(|i| row.get::<_, Option<i32>>(i).map_or(0, from_sql)).collect(),
        ))
    }

    fn q4(&self, lo: &[u8], hi: &[u8]) -> Result<Answer> {
        let sum: Vec<String> = Q4_COLUMNS.map(|c| format!("c{c}::int8")).collect();
        let sql = format!(
            "SELECT count(*), coalesce(sum({}), 0)::int8 FROM r WHERE k >= $1 AND k < $2",
            sum.join(" + ")
        );
        let rows = self.range_rows(&sql, lo, hi)?;
        let row = rows.first().ok_or_else(|| anyhow!("an aggregate without a row"))?;
        let (count, mapped): (i64, i64) = (row.get(0), row.get(1));
        // Each stored value is its unsigned value minus 2^31.
        let total =
            (i128::from(mapped) + i128::from(count) * Q4_COLUMNS.len() as i128 * (1i128 << 31)) as u128;
        Ok(Answer::Sum { rows: count as u64, total })
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    /// COPY in text form, then ANALYZE (as a user loading a table would).
    fn load(&self, rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>) -> Result<()> {
        self.with(|s| {
            let mut copy = s.client.copy_in("COPY r FROM STDIN")?;
            let mut line = String::new();
            for (key, row) in rows {
                line.clear();
                line.push_str("\\\\x");
                key.iter().for_each(|b| line.push_str(&format!("{b:02x}")));
                for b in row.chunks_exact(4) {
                    line.push('\t');
                    line.push_str(&to_sql(u32::from_le_bytes([b[0], b[1], b[2], b[3]])).to_string());
                }
                line.push('\n');
                copy.write_all(line.as_bytes())?;
            }
            copy.finish()?;
            s.client.batch_execute("ANALYZE r")?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flipping_the_sign_bit_keeps_unsigned_order_and_comes_back() {
        let values = [0u32, 1, 0x7FFF_FFFF, 0x8000_0000, 0x8000_0001, u32::MAX];
        for w in values.windows(2) {
            assert!(to_sql(w[0]) < to_sql(w[1]), "{w:?}");
        }
        assert!(values.iter().all(|&v| from_sql(to_sql(v)) == v));
        let mapped_sum: i64 = values.iter().map(|&v| i64::from(to_sql(v))).sum();
        let want: u128 = values.iter().map(|&v| u128::from(v)).sum();
        assert_eq!((i128::from(mapped_sum) + values.len() as i128 * (1i128 << 31)) as u128, want);
    }
}
