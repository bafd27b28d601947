use crate::{Key, Value};

/// One operation inside a [`WriteBatch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchOp {
    Put { key: Key, value: Value },
    Delete { key: Key },
}

impl BatchOp {
    pub fn key(&self) -> &[u8] {
        match self {
            BatchOp::Put { key, .. } | BatchOp::Delete { key } => key,
        }
    }

    /// The value written, or `None` for a delete.
    pub fn value(&self) -> Option<&[u8]> {
        match self {
            BatchOp::Put { value, .. } => Some(value),
            BatchOp::Delete { .. } => None,
        }
    }
}

/// A group of puts and deletes applied atomically: after a crash either all of them are visible or
/// none is. When a key appears more than once, the last operation on it wins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
    payload_bytes: usize,
}

impl WriteBatch {
    pub fn new() -> Self {
        Self::default()
    }

    /// A batch of one op: `Some(value)` puts it, `None` deletes the key (what an `rmw` writes).
    pub fn single(key: &[u8], value: Option<&[u8]>) -> Self {
        let mut batch = Self::new();
        match value {
            Some(v) => batch.put(key, v),
            None => batch.delete(key),
        };
        batch
    }

    pub fn put(&mut self, key: impl Into<Key>, value: impl Into<Value>) -> &mut Self {
        let (key, value) = (key.into(), value.into());
        self.payload_bytes += key.len() + value.len();
        self.ops.push(BatchOp::Put { key, value });
        self
    }

    pub fn delete(&mut self, key: impl Into<Key>) -> &mut Self {
        let key = key.into();
        self.payload_bytes += key.len();
        self.ops.push(BatchOp::Delete { key });
        self
    }

    pub fn push(&mut self, op: BatchOp) -> &mut Self {
        self.payload_bytes += op.key().len() + op.value().map_or(0, <[u8]>::len);
        self.ops.push(op);
        self
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Sum of key and value lengths over all operations.
    pub fn payload_bytes(&self) -> usize {
        self.payload_bytes
    }

    pub fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    pub fn into_ops(self) -> Vec<BatchOp> {
        self.ops
    }

    pub fn clear(&mut self) {
        self.ops.clear();
        self.payload_bytes = 0;
    }
}

impl FromIterator<BatchOp> for WriteBatch {
    fn from_iter<T: IntoIterator<Item = BatchOp>>(iter: T) -> Self {
        let mut batch = WriteBatch::new();
        for op in iter {
            batch.push(op);
        }
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_is_a_put_or_a_delete_with_its_payload_counted() {
        let put = WriteBatch::single(b"k", Some(b"vv"));
        assert_eq!(put.ops(), &[BatchOp::Put { key: b"k".to_vec(), value: b"vv".to_vec() }]);
        assert_eq!(put.payload_bytes(), 3);
        let empty_value = WriteBatch::single(b"k", Some(b""));
        assert_eq!(empty_value.ops(), &[BatchOp::Put { key: b"k".to_vec(), value: Vec::new() }]);
        let delete = WriteBatch::single(b"k", None);
        assert_eq!(delete.ops(), &[BatchOp::Delete { key: b"k".to_vec() }]);
        assert_eq!(delete.payload_bytes(), 1);
    }
}
