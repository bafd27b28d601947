//! The columnar API on laser's own table (`Engine::open_table`, `Capabilities::columnar`):
//! whole-row inserts, updates that log only the columns they change (partial rows, folded in
//! at compaction, paper §4.2), and reads and scans that touch only the column groups holding
//! the projected columns.

use std::sync::Arc;

use strata_core::{
    BatchIter, ColumnBatch, ColumnarTable, Direction, Durability, KeyRange, KvIter, Projection, Result,
    Schema, Value, WriteBatch,
};

use crate::cells::{stored_partial, stored_row, Cell, Cells};
use crate::engine::Inner;
use crate::layout::{ColumnId, ColumnSet};
use crate::read::LaserRead;
use crate::scan::LaserScan;
use crate::vectors::LaserBatches;

/// laser's table: the store's one schema.
pub(crate) struct LaserTable {
    pub inner: Arc<Inner>,
    pub schema: Schema,
}

/// The columns a projection reads, as a set, and where each projected column sits in a row of
/// that set (a projection may name a column twice, in any order).
fn projected(inner: &Inner, projection: &Projection) -> (ColumnSet, Vec<std::ops::Range<usize>>) {
    let mut ids: Vec<ColumnId> = projection.columns().iter().map(|&i| i as ColumnId).collect();
    ids.sort_unstable();
    ids.dedup();
    let set = ColumnSet::new(ids, &inner.columns);
    let ranges = projection
        .columns()
        .iter()
        .map(|&i| set.range(set.position(i as ColumnId).unwrap_or_default()))
        .collect();
    (set, ranges)
}

/// `row` (of the projection's set) in projection order; as it is when that is the set's order.
fn in_projection_order(row: Value, ranges: &[std::ops::Range<usize>]) -> Value {
    let in_order =
        ranges.first().is_none_or(|r| r.start == 0) && ranges.windows(2).all(|w| w[0].end == w[1].start);
    if in_order && ranges.last().is_none_or(|r| r.end == row.len()) {
        return row;
    }
    let mut out = Vec::with_capacity(ranges.iter().map(|r| r.len()).sum());
    ranges.iter().for_each(|r| out.extend_from_slice(&row[r.clone()]));
    out
}

impl ColumnarTable for LaserTable {
    fn schema(&self) -> &Schema {
        &self.schema
    }

    fn insert(&self, key: &[u8], row: &[u8], durability: Durability) -> Result<()> {
        self.schema.check_row(row)?;
        let inner = &self.inner;
        let mut batch = WriteBatch::new();
        batch.put(key, stored_row(row));
        inner.profile.inserts(1);
        inner.writes.write(batch, durability, inner.as_ref())
    }

    /// Logs a partial row of the named columns while the key holds a row (its first updated
    /// column is present, read under the log lock), else writes nothing.
    fn update(&self, key: &[u8], columns: &[(usize, &[u8])], durability: Durability) -> Result<bool> {
        self.schema.check_update(columns)?;
        let inner = &self.inner;
        let Some(&(first, _)) = columns.first() else { return Ok(inner.read(key, &inner.all)?.is_some()) };
        let mut partial = Cells::absent(&inner.all);
        for &(index, bytes) in columns {
            partial.states[index] = Cell::Present;
            partial.row[inner.all.range(index)].copy_from_slice(bytes);
        }
        let stored = stored_partial(&inner.all, &partial);
        let probe = ColumnSet::new(vec![first as ColumnId], &inner.columns);
        let mut read = LaserRead::new(inner, key, &probe);
        let mut write = |current: Option<&[u8]>| current.map(|_| Some(stored.clone()));
        let written = inner.writes.rmw_or_skip(key, &mut read, &mut write, durability, inner.as_ref())?;
        if written.is_some() {
            let mut ids: Vec<ColumnId> = columns.iter().map(|&(i, _)| i as ColumnId).collect();
            ids.sort_unstable();
            ids.dedup();
            inner.profile.update(read.level, ids);
        }
        Ok(written.is_some())
    }

    fn get(&self, key: &[u8], projection: &Projection) -> Result<Option<Value>> {
        self.schema.check_projection(projection)?;
        self.inner.writes.check_usable()?;
        let (set, ranges) = projected(&self.inner, projection);
        Ok(self.inner.read(key, &set)?.map(|row| in_projection_order(row, &ranges)))
    }

    fn scan(&self, range: KeyRange, direction: Direction, projection: &Projection) -> Result<KvIter> {
        self.schema.check_projection(projection)?;
        self.inner.writes.check_usable()?;
        let (set, ranges) = projected(&self.inner, projection);
        let rows = LaserScan::new(self.inner.clone(), range, direction, set)?;
        Ok(Box::new(rows.map(move |item| item.map(|(key, row)| (key, in_projection_order(row, &ranges))))))
    }

    /// Column vectors filled from the sources' entries (vectors.rs): one vector per column the
    /// projection names, shared by a column it names twice.
    fn scan_batches(
        &self,
        range: KeyRange,
        direction: Direction,
        projection: &Projection,
        rows_per_batch: usize,
    ) -> Result<BatchIter> {
        self.schema.check_projection(projection)?;
        self.inner.writes.check_usable()?;
        let (set, _) = projected(&self.inner, projection);
        let widths = (0..set.len()).map(|j| set.range(j).len()).collect();
        let vector_of =
            projection.columns().iter().map(|&i| set.position(i as ColumnId).unwrap_or_default()).collect();
        let template = ColumnBatch::with_vectors(widths, vector_of, 0);
        let batches = LaserBatches::new(self.inner.clone(), range, direction, set, template, rows_per_batch)?;
        Ok(Box::new(batches))
    }
}
