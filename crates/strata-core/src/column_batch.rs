//! Column vectors: a batch of a table scan's rows handed out column by column
//! (`ColumnarTable::scan_batches`), so an aggregate walks one column's values back to back
//! instead of slicing rows, and an engine that stores columns fills them without building rows.

use std::ops::Range;

use crate::{Error, Key, Result, Schema};

/// Rows a batch holds unless the caller asks otherwise.
pub const DEFAULT_BATCH_ROWS: usize = 1024;
/// Rows a new batch reserves room for at most (a caller may ask for huge batches).
const MAX_RESERVED_ROWS: usize = 64 * DEFAULT_BATCH_ROWS;

/// A run of a scan's rows in scan order: their keys, and per column of the projection its
/// values back to back (`width × len()` bytes). Invariant: every vector holds exactly `len()`
/// values of its width; a column the projection names twice has one vector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ColumnBatch {
    keys: Vec<u8>,
    key_ends: Vec<usize>,
    vectors: Vec<Vec<u8>>,
    widths: Vec<usize>,
    /// Per projected column, its vector.
    vector_of: Vec<usize>,
    /// Per vector, the first projected column that names it (`push_row` fills it from there).
    first_mention: Vec<usize>,
}

impl ColumnBatch {
    /// An empty batch of the given vectors' widths, where projected column `p` is vector
    /// `vector_of[p]`, with room for `rows` rows.
    pub fn with_vectors(widths: Vec<usize>, vector_of: Vec<usize>, rows: usize) -> ColumnBatch {
        debug_assert!(vector_of.iter().all(|&v| v < widths.len()));
        let first_mention =
            (0..widths.len()).map(|v| vector_of.iter().position(|&w| w == v).unwrap_or_default()).collect();
        ColumnBatch {
            keys: Vec::with_capacity(rows * 8),
            key_ends: Vec::with_capacity(rows),
            vectors: widths.iter().map(|w| Vec::with_capacity(rows * w)).collect(),
            widths,
            vector_of,
            first_mention,
        }
    }

    /// An empty batch of the same vectors with room for `rows` rows, reserving at most
    /// `MAX_RESERVED_ROWS` up front (a clone of an empty batch would hold none).
    pub fn empty_like(&self, rows: usize) -> ColumnBatch {
        ColumnBatch::with_vectors(self.widths.clone(), self.vector_of.clone(), rows.min(MAX_RESERVED_ROWS))
    }

    /// An empty batch for `projection` (a vector per projected column, in projection order).
    pub fn for_projection(schema: &Schema, projection: &crate::Projection, rows: usize) -> ColumnBatch {
        let widths = projection.columns().iter().map(|&i| schema.column_range(i).len()).collect();
        ColumnBatch::with_vectors(widths, (0..projection.columns().len()).collect(), rows)
    }

    /// Rows in the batch.
    pub fn len(&self) -> usize {
        self.key_ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.key_ends.is_empty()
    }

    /// Columns of the projection (a vector each, shared by a column named twice).
    pub fn column_count(&self) -> usize {
        self.vector_of.len()
    }

    /// The key of row `i`. Panics past `len()`.
    pub fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.key_ends[i - 1] };
        &self.keys[start..self.key_ends[i]]
    }

    /// Bytes of all the batch's keys.
    pub fn key_bytes(&self) -> usize {
        self.keys.len()
    }

    /// The keys in scan order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| self.key(i))
    }

    /// Bytes of one value of projected column `p`. Panics past `column_count()`.
    pub fn width(&self, p: usize) -> usize {
        self.widths[self.vector_of[p]]
    }

    /// Projected column `p`'s values back to back, row order. Panics past `column_count()`.
    pub fn column(&self, p: usize) -> &[u8] {
        &self.vectors[self.vector_of[p]]
    }

    /// Projected column `p`'s values, one slice each.
    pub fn values(&self, p: usize) -> std::slice::ChunksExact<'_, u8> {
        self.column(p).chunks_exact(self.width(p))
    }

    /// Projected column `p` read as little-endian `T`s; `InvalidArgument` when the column is
    /// not `T`'s width.
    pub fn column_as<T: LittleEndian>(&self, p: usize) -> Result<impl ExactSizeIterator<Item = T> + '_> {
        if self.width(p) != T::WIDTH {
            return Err(Error::invalid(format!(
                "column {p} of the projection is {} bytes wide; a {} is {}",
                self.width(p),
                std::any::type_name::<T>(),
                T::WIDTH
            )));
        }
        Ok(self.column(p).chunks_exact(T::WIDTH).map(T::from_le))
    }

    /// Row `i` of the projection: its columns' bytes concatenated in projection order.
    pub fn row(&self, i: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for p in 0..self.column_count() {
            let width = self.width(p);
            out.extend_from_slice(&self.column(p)[i * width..(i + 1) * width]);
        }
        out
    }

    /// The rows as `(key, projected columns)` pairs, in scan order.
    pub fn rows(&self) -> impl Iterator<Item = (Key, Vec<u8>)> + '_ {
        (0..self.len()).map(|i| (self.key(i).to_vec(), self.row(i)))
    }

    /// Appends a row's key; the caller then appends one value to every vector
    /// (`push_value`), keeping the invariant.
    pub fn push_key(&mut self, key: &[u8]) {
        self.keys.extend_from_slice(key);
        self.key_ends.push(self.keys.len());
    }

    /// Appends `value` (exactly its width) to vector `v`.
    pub fn push_value(&mut self, v: usize, value: &[u8]) {
        debug_assert_eq!(value.len(), self.widths[v]);
        self.vectors[v].extend_from_slice(value);
    }

    /// Vector `v` to append to directly (`width × rows` bytes once the row is done).
    pub fn vector_mut(&mut self, v: usize) -> &mut Vec<u8> {
        &mut self.vectors[v]
    }

    /// Appends a whole projected row (`row` holds the projected columns in projection order;
    /// `ranges[p]` is where projected column `p` sits in it). A vector shared by a column the
    /// projection names twice takes the value of its first mention.
    pub fn push_row(&mut self, key: &[u8], row: &[u8], ranges: &[Range<usize>]) {
        self.push_key(key);
        for (vector, &p) in self.vectors.iter_mut().zip(&self.first_mention) {
            vector.extend_from_slice(&row[ranges[p].clone()]);
        }
    }
}

/// A fixed-width number stored little-endian in a column (`ColumnBatch::column_as`).
pub trait LittleEndian: Sized + 'static {
    const WIDTH: usize;
    /// Decodes exactly `WIDTH` bytes.
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! little_endian {
    ($($t:ty),*) => {$(
        impl LittleEndian for $t {
            const WIDTH: usize = std::mem::size_of::<$t>();
            fn from_le(bytes: &[u8]) -> Self {
                let mut buf = [0u8; std::mem::size_of::<$t>()];
                buf.copy_from_slice(bytes);
                <$t>::from_le_bytes(buf)
            }
        }
    )*};
}

little_endian!(u8, i8, u16, i16, u32, i32, u64, i64, u128, i128, f32, f64);

/// Batches of a scan, in scan order; an error ends it.
pub type BatchIter = Box<dyn Iterator<Item = Result<ColumnBatch>> + Send>;

/// Batches of `rows` rows (at most `rows_per_batch` each) from `(key, projected row)` items, for
/// an engine that scans rows (the `ColumnarTable::scan_batches` default).
pub fn batches_of_rows(
    mut rows: crate::KvIter,
    schema: &Schema,
    projection: &crate::Projection,
    rows_per_batch: usize,
) -> BatchIter {
    let template = ColumnBatch::for_projection(schema, projection, 0);
    let ranges: Vec<Range<usize>> = {
        let mut at = 0;
        projection
            .columns()
            .iter()
            .map(|&i| {
                let width = schema.column_range(i).len();
                at += width;
                at - width..at
            })
            .collect()
    };
    let rows_per_batch = rows_per_batch.max(1);
    // An error met after some rows: handed out after the batch that holds them.
    let mut failed: Option<crate::Error> = None;
    let mut ended = false;
    Box::new(std::iter::from_fn(move || {
        if ended {
            return None;
        }
        if let Some(e) = failed.take() {
            ended = true;
            return Some(Err(e));
        }
        let mut batch = template.empty_like(rows_per_batch);
        while batch.len() < rows_per_batch {
            match rows.next() {
                None => break,
                Some(Err(e)) if batch.is_empty() => {
                    ended = true;
                    return Some(Err(e));
                }
                Some(Err(e)) => {
                    failed = Some(e);
                    break;
                }
                Some(Ok((key, row))) => batch.push_row(&key, &row, &ranges),
            }
        }
        (!batch.is_empty()).then_some(Ok(batch))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Projection;

    fn schema() -> Schema {
        Schema::new([("a", 4), ("b", 2), ("c", 8)]).unwrap()
    }

    fn projected_rows(n: u32, projection: &Projection) -> Vec<(Key, Vec<u8>)> {
        let schema = schema();
        (0..n)
            .map(|i| {
                let row: Vec<u8> = i
                    .to_le_bytes()
                    .into_iter()
                    .chain([i as u8, 7])
                    .chain(u64::from(i).to_le_bytes())
                    .collect();
                let mut out = Vec::new();
                schema.project_into(&row, projection, &mut out);
                (format!("k{i:03}").into_bytes(), out)
            })
            .collect()
    }

    #[test]
    fn rows_become_batches_of_columns_in_projection_order() {
        let schema = schema();
        let projection = schema.projection(&["c", "a", "c"]).unwrap();
        let rows = projected_rows(10, &projection);
        let items: crate::KvIter = Box::new(rows.clone().into_iter().map(Ok));
        let batches: Vec<ColumnBatch> =
            batches_of_rows(items, &schema, &projection, 4).map(Result::unwrap).collect();
        assert_eq!(batches.iter().map(ColumnBatch::len).collect::<Vec<_>>(), vec![4, 4, 2]);
        let again: Vec<(Key, Vec<u8>)> = batches.iter().flat_map(|b| b.rows().collect::<Vec<_>>()).collect();
        assert_eq!(again, rows);
        let first = &batches[0];
        assert_eq!(first.column_count(), 3);
        assert_eq!(first.width(0), 8);
        assert_eq!(first.column_as::<u64>(0).unwrap().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        assert_eq!(first.column_as::<u32>(1).unwrap().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        assert_eq!(first.keys().collect::<Vec<_>>(), vec![b"k000", b"k001", b"k002", b"k003"]);
        assert!(matches!(first.column_as::<u32>(0), Err(Error::InvalidArgument(_))));
        // A column named twice may share one vector: a row fills it once, both read it.
        let shared = ColumnBatch::with_vectors(vec![8, 4], vec![0, 1, 0], 4);
        let mut again = shared.empty_like(2);
        for (key, row) in &rows[..2] {
            again.push_row(key, row, &[0..8, 8..12, 12..20]);
        }
        assert_eq!(again.rows().collect::<Vec<_>>(), rows[..2].to_vec());
        assert_eq!(again.column(2), again.column(0));
    }

    #[test]
    fn an_error_comes_after_the_rows_before_it_and_ends_the_batches() {
        let schema = schema();
        let projection = schema.projection(&["b"]).unwrap();
        let rows = projected_rows(3, &projection);
        let items: crate::KvIter = Box::new(
            rows.into_iter()
                .map(Ok)
                .chain([Err(Error::corruption("f", 9, "bad")), Ok((b"late".to_vec(), vec![0, 0]))]),
        );
        let got: Vec<Result<ColumnBatch>> = batches_of_rows(items, &schema, &projection, 100).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].as_ref().unwrap().len(), 3);
        assert!(matches!(got[1], Err(Error::Corruption { .. })));
    }
}
