//! The columnar extension (LASER's workload, runnable on every engine): a table of fixed-width
//! columns keyed by the store's byte-string keys, with inserts of whole rows, updates of some
//! columns, and reads and scans of a projection.
//!
//! An engine that stores columns itself (`Capabilities::columnar`) returns its own table from
//! `Engine::open_table`; every other engine gets `RowEncodedTable`: a row is the value of its key,
//! the columns' bytes concatenated in schema order.

use std::ops::Range;

use crate::{
    batches_of_rows, BatchIter, Direction, Durability, Engine, Error, KeyRange, KvIter, Result, Value,
};

/// One fixed-width column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub width_bytes: usize,
}

/// The columns of a table, in row order. Invariant: at least one column, no zero width, no name
/// twice; `offsets[i]` is where column `i` starts in a row and `row_bytes` their total width.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    columns: Vec<Column>,
    offsets: Vec<usize>,
    row_bytes: usize,
}

/// Which columns a read returns, in the order it returns them (indices into the schema).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Projection {
    columns: Vec<usize>,
}

impl Projection {
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }
}

impl Schema {
    /// A schema of `(name, width_bytes)` columns.
    pub fn new<N: Into<String>>(columns: impl IntoIterator<Item = (N, usize)>) -> Result<Schema> {
        let columns: Vec<Column> = columns
            .into_iter()
            .map(|(name, width_bytes)| Column { name: name.into(), width_bytes })
            .collect();
        if columns.is_empty() {
            return Err(Error::invalid("a table schema needs at least one column"));
        }
        let mut offsets = Vec::with_capacity(columns.len());
        let mut row_bytes = 0usize;
        for (i, column) in columns.iter().enumerate() {
            if column.width_bytes == 0 {
                return Err(Error::invalid(format!("column {:?} has width 0", column.name)));
            }
            if columns[..i].iter().any(|c| c.name == column.name) {
                return Err(Error::invalid(format!("column {:?} is named twice", column.name)));
            }
            offsets.push(row_bytes);
            row_bytes = row_bytes
                .checked_add(column.width_bytes)
                .ok_or_else(|| Error::invalid("the columns' widths overflow a row"))?;
        }
        Ok(Schema { columns, offsets, row_bytes })
    }

    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Bytes of one whole row.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// Where column `index` sits in a row. Panics on an index the schema does not have (a
    /// `Projection` or a checked update only holds valid ones).
    pub fn column_range(&self, index: usize) -> Range<usize> {
        self.offsets[index]..self.offsets[index] + self.columns[index].width_bytes
    }

    /// The index of the column `name`; `InvalidArgument` listing the columns when it has none.
    pub fn require_column(&self, name: &str) -> Result<usize> {
        self.column_index(name).ok_or_else(|| self.unknown_column(name))
    }

    /// The projection of the named columns, in the order given.
    pub fn projection(&self, names: &[&str]) -> Result<Projection> {
        let columns = names.iter().map(|name| self.require_column(name)).collect::<Result<Vec<usize>>>()?;
        Ok(Projection { columns })
    }

    /// Every column, in schema order.
    pub fn all_columns(&self) -> Projection {
        Projection { columns: (0..self.columns.len()).collect() }
    }

    /// Bytes a projected row holds.
    pub fn projected_bytes(&self, projection: &Projection) -> usize {
        projection.columns.iter().map(|&i| self.columns[i].width_bytes).sum()
    }

    /// Appends the projected columns of `row` (a whole row) to `out`.
    pub fn project_into(&self, row: &[u8], projection: &Projection, out: &mut Vec<u8>) {
        for &i in &projection.columns {
            out.extend_from_slice(&row[self.column_range(i)]);
        }
    }

    /// Checks an update's columns: known indices, each value exactly its column's width.
    pub fn check_update(&self, columns: &[(usize, &[u8])]) -> Result<()> {
        for &(index, bytes) in columns {
            let column = self
                .columns
                .get(index)
                .ok_or_else(|| Error::invalid(format!("the table has no column {index}")))?;
            if bytes.len() != column.width_bytes {
                return Err(Error::invalid(format!(
                    "column {:?} is {} bytes wide; the update gives {}",
                    column.name,
                    column.width_bytes,
                    bytes.len()
                )));
            }
        }
        Ok(())
    }

    /// Checks that `projection` names only columns of this schema (it may come from another
    /// table's schema).
    pub fn check_projection(&self, projection: &Projection) -> Result<()> {
        match projection.columns.iter().find(|&&i| i >= self.columns.len()) {
            Some(i) => Err(Error::invalid(format!(
                "the table has no column {i}: the projection is another schema's"
            ))),
            None => Ok(()),
        }
    }

    /// Checks that `row` is one whole row of this schema.
    pub fn check_row(&self, row: &[u8]) -> Result<()> {
        if row.len() != self.row_bytes {
            return Err(Error::invalid(format!(
                "a row of this table is {} bytes; {} given",
                self.row_bytes,
                row.len()
            )));
        }
        Ok(())
    }

    fn unknown_column(&self, name: &str) -> Error {
        let names: Vec<&str> = self.columns.iter().map(|c| c.name.as_str()).collect();
        Error::invalid(format!("the table has no column {name:?}; its columns: {}", names.join(", ")))
    }
}

/// A table of fixed-width columns. Keys have been checked against the engine's limits and rows
/// against the schema (`Schema::check_row`) by the caller; an implementation refuses updates and
/// projections of other schemas itself (`check_update`, `check_projection`), never panics.
pub trait ColumnarTable: Send + Sync {
    fn schema(&self) -> &Schema;

    /// Stores a whole row (replacing any row of `key`).
    fn insert(&self, key: &[u8], row: &[u8], durability: Durability) -> Result<()>;

    /// Replaces some columns of the row of `key`, atomically; `false` (and nothing written) when
    /// the key holds no row.
    fn update(&self, key: &[u8], columns: &[(usize, &[u8])], durability: Durability) -> Result<bool>;

    /// The projected columns of the row of `key`, concatenated in projection order.
    fn get(&self, key: &[u8], projection: &Projection) -> Result<Option<Value>>;

    /// `(key, projected columns)` in key order; `Error::Unsupported` on an unordered engine.
    fn scan(&self, range: KeyRange, direction: Direction, projection: &Projection) -> Result<KvIter>;

    /// The same rows as `scan`, handed out column by column in batches of at most
    /// `rows_per_batch` rows (`ColumnBatch`). By default built from `scan`'s rows; an engine
    /// that stores columns fills the vectors without building rows.
    fn scan_batches(
        &self,
        range: KeyRange,
        direction: Direction,
        projection: &Projection,
        rows_per_batch: usize,
    ) -> Result<BatchIter> {
        let rows = self.scan(range, direction, projection)?;
        Ok(batches_of_rows(rows, self.schema(), projection, rows_per_batch))
    }
}

/// The row-encoded fallback: a row is the value of its key. Works on every engine; scans need an
/// ordered one. A value that is not one row of this schema is reported, never sliced.
pub struct RowEncodedTable<'e> {
    engine: &'e dyn Engine,
    schema: Schema,
}

impl<'e> RowEncodedTable<'e> {
    pub fn new(engine: &'e dyn Engine, schema: Schema) -> Self {
        RowEncodedTable { engine, schema }
    }
}

fn not_a_row(schema: &Schema, key: &[u8], len: usize) -> Error {
    Error::invalid(format!(
        "the value of key {} is {len} bytes, not a row of this table ({} bytes)",
        String::from_utf8_lossy(key),
        schema.row_bytes()
    ))
}

/// What `RowEncodedTable::update`'s read-modify-write found.
enum Found {
    Absent,
    Row,
    NotARow(usize),
}

impl ColumnarTable for RowEncodedTable<'_> {
    fn schema(&self) -> &Schema {
        &self.schema
    }

    fn insert(&self, key: &[u8], row: &[u8], durability: Durability) -> Result<()> {
        self.engine.put(key, row, durability)
    }

    fn update(&self, key: &[u8], columns: &[(usize, &[u8])], durability: Durability) -> Result<bool> {
        self.schema.check_update(columns)?;
        if self.engine.get(key)?.is_none() {
            return Ok(false);
        }
        let schema = &self.schema;
        let mut found = Found::Absent;
        // Absent (deleted since the check) and non-row values are written back unchanged.
        let mut patch = |old: Option<&[u8]>| match old {
            None => {
                found = Found::Absent;
                None
            }
            Some(row) if row.len() != schema.row_bytes() => {
                found = Found::NotARow(row.len());
                Some(row.to_vec())
            }
            Some(row) => {
                found = Found::Row;
                let mut new = row.to_vec();
                for &(index, bytes) in columns {
                    new[schema.column_range(index)].copy_from_slice(bytes);
                }
                Some(new)
            }
        };
        self.engine.rmw(key, &mut patch, durability)?;
        match found {
            Found::Absent => Ok(false),
            Found::Row => Ok(true),
            Found::NotARow(len) => Err(not_a_row(schema, key, len)),
        }
    }

    fn get(&self, key: &[u8], projection: &Projection) -> Result<Option<Value>> {
        self.schema.check_projection(projection)?;
        let Some(row) = self.engine.get(key)? else { return Ok(None) };
        if row.len() != self.schema.row_bytes() {
            return Err(not_a_row(&self.schema, key, row.len()));
        }
        let mut out = Vec::with_capacity(self.schema.projected_bytes(projection));
        self.schema.project_into(&row, projection, &mut out);
        Ok(Some(out))
    }

    fn scan(&self, range: KeyRange, direction: Direction, projection: &Projection) -> Result<KvIter> {
        self.schema.check_projection(projection)?;
        let rows = self.engine.range(range, direction)?;
        let (schema, projection) = (self.schema.clone(), projection.clone());
        Ok(Box::new(rows.map(move |item| {
            let (key, row) = item?;
            if row.len() != schema.row_bytes() {
                return Err(not_a_row(&schema, &key, row.len()));
            }
            let mut out = Vec::with_capacity(schema.projected_bytes(&projection));
            schema.project_into(&row, &projection, &mut out);
            Ok((key, out))
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::new([("a", 4), ("b", 8), ("c", 2)]).unwrap()
    }

    #[test]
    fn offsets_and_projection_follow_the_column_order() {
        let s = schema();
        assert_eq!(s.row_bytes(), 14);
        assert_eq!(s.column_range(1), 4..12);
        assert_eq!(s.column_range(2), 12..14);
        let p = s.projection(&["c", "a"]).unwrap();
        let row: Vec<u8> = (0u8..14).collect();
        let mut out = Vec::new();
        s.project_into(&row, &p, &mut out);
        assert_eq!(out, vec![12, 13, 0, 1, 2, 3]);
        assert_eq!(s.projected_bytes(&p), 6);
    }

    #[test]
    fn bad_schemas_updates_and_names_are_refused() {
        assert!(matches!(Schema::new(Vec::<(&str, usize)>::new()), Err(Error::InvalidArgument(_))));
        assert!(matches!(Schema::new([("a", 0)]), Err(Error::InvalidArgument(_))));
        assert!(matches!(Schema::new([("a", 1), ("a", 2)]), Err(Error::InvalidArgument(_))));
        let s = schema();
        assert!(matches!(s.projection(&["z"]), Err(Error::InvalidArgument(m)) if m.contains("a, b, c")));
        assert!(matches!(s.check_update(&[(1, &[0; 4])]), Err(Error::InvalidArgument(_))));
        assert!(matches!(s.check_update(&[(3, &[0; 4])]), Err(Error::InvalidArgument(_))));
        assert!(s.check_update(&[(0, &[0; 4]), (2, &[0; 2])]).is_ok());
        assert!(matches!(s.check_row(&[0; 13]), Err(Error::InvalidArgument(_))));
        let wider = Schema::new([("a", 1), ("b", 1), ("c", 1), ("d", 1)]).unwrap();
        let foreign = wider.projection(&["d"]).unwrap();
        assert!(matches!(s.check_projection(&foreign), Err(Error::InvalidArgument(_))));
        assert!(s.check_projection(&s.all_columns()).is_ok());
    }
}
