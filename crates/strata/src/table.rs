use std::ops::RangeBounds;

use strata_core::{
    BatchIter, ColumnarTable, Direction, Durability, KeyRange, Projection, Result, Schema, Value,
    DEFAULT_BATCH_ROWS,
};

use crate::{Db, Iter};

/// A table of fixed-width columns over a `Db` ([`Db::table`]): whole-row inserts, updates of some
/// columns, and reads and scans of a projection (LASER's workload). Every call checks the key
/// against the engine's limits and the row or columns against the schema.
pub struct Table<'db> {
    db: &'db Db,
    inner: Box<dyn ColumnarTable + 'db>,
}

impl<'db> Table<'db> {
    pub(crate) fn new(db: &'db Db, inner: Box<dyn ColumnarTable + 'db>) -> Self {
        Table { db, inner }
    }

    pub fn schema(&self) -> &Schema {
        self.inner.schema()
    }

    /// The projection of the named columns (`Schema::projection`).
    pub fn projection(&self, names: &[&str]) -> Result<Projection> {
        self.schema().projection(names)
    }

    /// Stores a whole row: every column's bytes concatenated in schema order.
    pub fn insert(&self, key: impl AsRef<[u8]>, row: &[u8]) -> Result<()> {
        self.insert_with(key, row, self.db.default_durability())
    }

    pub fn insert_with(&self, key: impl AsRef<[u8]>, row: &[u8], durability: Durability) -> Result<()> {
        let key = self.checked_key(key.as_ref())?;
        self.schema().check_row(row)?;
        self.inner.insert(key, row, durability)
    }

    /// Replaces the named columns of the row of `key` atomically; `false` when the key holds no
    /// row (nothing is written).
    pub fn update(&self, key: impl AsRef<[u8]>, columns: &[(&str, &[u8])]) -> Result<bool> {
        self.update_with(key, columns, self.db.default_durability())
    }

    pub fn update_with(
        &self,
        key: impl AsRef<[u8]>,
        columns: &[(&str, &[u8])],
        durability: Durability,
    ) -> Result<bool> {
        let key = self.checked_key(key.as_ref())?;
        let schema = self.schema();
        let indexed = columns
            .iter()
            .map(|&(name, bytes)| Ok((schema.require_column(name)?, bytes)))
            .collect::<Result<Vec<(usize, &[u8])>>>()?;
        self.inner.update(key, &indexed, durability)
    }

    /// The projected columns of the row of `key`, concatenated in projection order.
    pub fn get(&self, key: impl AsRef<[u8]>, projection: &Projection) -> Result<Option<Value>> {
        let key = self.checked_key(key.as_ref())?;
        self.inner.get(key, projection)
    }

    /// `(key, projected columns)` over `bounds` in key order.
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        bounds: R,
        projection: &Projection,
    ) -> Result<Iter> {
        self.scan_with(KeyRange::from_bounds(bounds), Direction::Forward, projection)
    }

    pub fn scan_with(&self, range: KeyRange, direction: Direction, projection: &Projection) -> Result<Iter> {
        self.db.ensure_open()?;
        Ok(Iter::new(self.inner.scan(range, direction, projection)?))
    }

    /// The rows of `scan` over `bounds`, handed out column by column: batches of up to
    /// `DEFAULT_BATCH_ROWS` rows, each a vector of values per projected column
    /// (`ColumnBatch::column_as::<u32>(p)` reads a column of four-byte integers), so an
    /// aggregate never builds rows. laser fills the vectors from its column groups directly.
    pub fn scan_batches<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        bounds: R,
        projection: &Projection,
    ) -> Result<BatchIter> {
        self.scan_batches_with(
            KeyRange::from_bounds(bounds),
            Direction::Forward,
            projection,
            DEFAULT_BATCH_ROWS,
        )
    }

    pub fn scan_batches_with(
        &self,
        range: KeyRange,
        direction: Direction,
        projection: &Projection,
        rows_per_batch: usize,
    ) -> Result<BatchIter> {
        self.db.ensure_open()?;
        self.schema().check_projection(projection)?;
        self.inner.scan_batches(range, direction, projection, rows_per_batch.max(1))
    }

    fn checked_key<'k>(&self, key: &'k [u8]) -> Result<&'k [u8]> {
        self.db.ensure_open()?;
        self.db.check_key(key)?;
        Ok(key)
    }
}
