//! The paper's HTAP workload (LASER §7.2, Table 3) as data: a table of an 8-byte key and 30
//! four-byte integer columns; every row and every update is a function of its index, so every
//! system sees the same writes in the same order and the driver knows the final state (it
//! checks each system's analytical answers against it).

use std::ops::Range;

/// a1 … a30.
pub const COLUMNS: usize = 30;
/// Bytes of a row (the key is separate).
pub const ROW_BYTES: usize = COLUMNS * 4;
/// One update per this many inserts (the paper's 100 updates/s beside 10,000 inserts/s).
pub const INSERTS_PER_UPDATE: u64 = 100;

/// A bijection on u64 (splitmix64's finalizer): keys spread uniformly, distinct by construction.
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The key of the row inserted `index`-th: big-endian, so key order is numeric order.
pub fn key(index: u64) -> [u8; 8] {
    mix64(index).to_be_bytes()
}

/// Column `column`'s value in the row inserted `index`-th, before any update.
pub fn value(index: u64, column: usize) -> u32 {
    (mix64(index.wrapping_mul(31).wrapping_add(column as u64 + 1)) >> 32) as u32
}

pub fn row(index: u64) -> Vec<u8> {
    (0..COLUMNS).flat_map(|c| value(index, c).to_le_bytes()).collect()
}

/// The `n`-th update (Q5): the row it changes (one of the newest 1% of the `inserted` rows then),
/// the column and the new value.
pub fn update(n: u64, inserted: u64) -> (u64, usize, u32) {
    let h = mix64(n ^ 0x5151_5151_5151_5151);
    let recent = (inserted / 100).max(1);
    let index = inserted - 1 - h % recent;
    let column = ((h >> 32) % COLUMNS as u64) as usize;
    (index, column, (mix64(h) >> 32) as u32)
}

/// A key range holding `fraction` of the key space, starting at `start` (a fraction of it).
pub fn key_range(start: f64, fraction: f64) -> (Vec<u8>, Vec<u8>) {
    let at = |x: f64| ((x.clamp(0.0, 1.0) * u64::MAX as f64) as u64).to_be_bytes().to_vec();
    (at(start), at(start + fraction))
}

/// Q3: MAX of columns 28–30 (indices 27..30) over 50% of the keys.
pub const Q3_COLUMNS: Range<usize> = 27..30;
pub const Q3_FRACTION: f64 = 0.5;
/// Q4: a21 + … + a30 (indices 20..30) over 5% of the keys.
pub const Q4_COLUMNS: Range<usize> = 20..30;
pub const Q4_FRACTION: f64 = 0.05;
/// Q2b: columns 16–30 (indices 15..30).
pub const Q2B_COLUMNS: Range<usize> = 15..30;

/// Where the `i`-th Q3 or Q4 range starts (spread over the key space, within it).
pub fn analytic_start(i: u64, fraction: f64) -> f64 {
    (mix64(i ^ 0xA7A7) >> 11) as f64 / (1u64 << 53) as f64 * (1.0 - fraction)
}

/// What an analytical query returns: Q3's maxima, or Q4's row count and the sum of its
/// per-row sums.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Max(Vec<u32>),
    Sum { rows: u64, total: u128 },
}

/// The final state the driver expects: every row 0..rows with updates 0..updates applied.
pub struct Model {
    /// (key, row) sorted by key.
    rows: Vec<([u8; 8], Vec<u32>)>,
}

impl Model {
    /// `rows` inserted in order, one update after every `INSERTS_PER_UPDATE` inserts past
    /// `loaded` (the load has none).
    pub fn build(loaded: u64, rows: u64) -> Model {
        let mut table: Vec<Vec<u32>> =
            (0..rows).map(|i| (0..COLUMNS).map(|c| value(i, c)).collect()).collect();
        let mut n = 0;
        for inserted in loaded + 1..=rows {
            if (inserted - loaded).is_multiple_of(INSERTS_PER_UPDATE) {
                let (index, column, v) = update(n, inserted);
                table[index as usize][column] = v;
                n += 1;
            }
        }
        let mut rows: Vec<([u8; 8], Vec<u32>)> =
            table.into_iter().enumerate().map(|(i, r)| (key(i as u64), r)).collect();
        rows.sort_unstable_by_key(|(key, _)| *key);
        Model { rows }
    }

    fn within(&self, lo: &[u8], hi: &[u8]) -> &[([u8; 8], Vec<u32>)] {
        let from = self.rows.partition_point(|(k, _)| k.as_slice() < lo);
        let to = self.rows.partition_point(|(k, _)| k.as_slice() < hi);
        &self.rows[from..to.max(from)]
    }

    pub fn q3(&self, lo: &[u8], hi: &[u8]) -> Answer {
        let mut max = vec![0u32; Q3_COLUMNS.len()];
        for (_, r) in self.within(lo, hi) {
            for (m, c) in max.iter_mut().zip(Q3_COLUMNS) {
                *m = (*m).max(r[c]);
            }
        }
        Answer::Max(max)
    }

    pub fn q4(&self, lo: &[u8], hi: &[u8]) -> Answer {
        let rows = self.within(lo, hi);
        let total =
            rows.iter().map(|(_, r)| r[Q4_COLUMNS].iter().map(|&v| u128::from(v)).sum::<u128>()).sum();
        Answer::Sum { rows: rows.len() as u64, total }
    }
}

/// Folds scanned rows of Q3's or Q4's columns (little-endian u32s in column order) into an
/// answer.
pub struct Fold {
    answer: Answer,
}

impl Fold {
    pub fn q3() -> Fold {
        Fold::max_of(Q3_COLUMNS.len())
    }

    /// The maxima of `columns` columns.
    pub fn max_of(columns: usize) -> Fold {
        Fold { answer: Answer::Max(vec![0; columns]) }
    }

    pub fn q4() -> Fold {
        Fold { answer: Answer::Sum { rows: 0, total: 0 } }
    }

    pub fn add(&mut self, projected: &[u8]) {
        let values = projected.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        match &mut self.answer {
            Answer::Max(max) => max.iter_mut().zip(values).for_each(|(m, v)| *m = (*m).max(v)),
            Answer::Sum { rows, total } => {
                *rows += 1;
                *total += values.map(u128::from).sum::<u128>();
            }
        }
    }

    /// Folds a batch of column vectors of Q3's or Q4's columns (four-byte integers): a column
    /// at a time, no row built.
    pub fn add_batch(&mut self, batch: &strata::ColumnBatch) -> strata::Result<()> {
        match &mut self.answer {
            Answer::Max(max) => {
                for (p, m) in max.iter_mut().enumerate() {
                    *m = batch.column_as::<u32>(p)?.fold(*m, u32::max);
                }
            }
            Answer::Sum { rows, total } => {
                *rows += batch.len() as u64;
                for p in 0..batch.column_count() {
                    *total += batch.column_as::<u32>(p)?.map(u64::from).sum::<u64>() as u128;
                }
            }
        }
        Ok(())
    }

    pub fn finish(self) -> Answer {
        self.answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_and_updates_touch_recent_rows() {
        let keys: std::collections::HashSet<[u8; 8]> = (0..10_000).map(key).collect();
        assert_eq!(keys.len(), 10_000);
        for n in 0..1000 {
            let (index, column, _) = update(n, 5_000);
            assert!((4_950..5_000).contains(&index) && column < COLUMNS);
        }
    }

    #[test]
    fn the_model_applies_updates_and_answers_by_key_range() {
        let model = Model::build(100, 400);
        let (lo, hi) = key_range(0.0, 1.0);
        let Answer::Sum { rows, .. } = model.q4(&lo, &hi) else { panic!() };
        assert_eq!(rows, 400);
        let mut fold = Fold::q3();
        for (k, r) in &model.rows {
            if k.as_slice() >= lo.as_slice() && k.as_slice() < hi.as_slice() {
                let projected: Vec<u8> = r[Q3_COLUMNS].iter().flat_map(|v| v.to_le_bytes()).collect();
                fold.add(&projected);
            }
        }
        assert_eq!(fold.finish(), model.q3(&lo, &hi));
        let updated = (0..3)
            .map(|n| update(n, 100 + (n + 1) * INSERTS_PER_UPDATE))
            .any(|(i, c, v)| model.rows.iter().any(|(k, r)| *k == key(i) && r[c] == v));
        assert!(updated, "an update the model applied shows in its rows");
    }
}
