//! In-process baselines. They are not stores (no files, no durability, nothing survives close);
//! they show what the harness plus a plain data structure can do on this machine.

use std::collections::BTreeMap;
use std::ops::Bound;

use parking_lot::RwLock;

use crate::adapter::KvAdapter;

/// `std::collections::BTreeMap` behind a `parking_lot::RwLock`: a plain lookup loop over the same
/// keys, for judging how much an engine adds on top of an in-memory ordered map.
#[derive(Default)]
pub struct BTreeMapBaseline {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl KvAdapter for BTreeMapBaseline {
    fn name(&self) -> &str {
        "btreemap"
    }

    fn config_description(&self) -> Vec<(String, String)> {
        vec![
            (
                "kind".into(),
                "baseline: in-process BTreeMap<Vec<u8>, Vec<u8>> behind a RwLock; not a store".into(),
            ),
            ("durability".into(), "none (no files; nothing survives close)".into()),
            ("get".into(), "lookup only; the value is not copied".into()),
            ("memory_budget".into(), "ignored".into()),
        ]
    }

    fn get(&self, key: &[u8]) -> anyhow::Result<Option<usize>> {
        Ok(self.map.read().get(key).map(Vec::len))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        self.map.write().insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn delete(&self, key: &[u8]) -> anyhow::Result<()> {
        self.map.write().remove(key);
        Ok(())
    }

    fn scan(&self, start: &[u8], count: usize) -> anyhow::Result<usize> {
        let map = self.map.read();
        Ok(map.range::<[u8], _>((Bound::Included(start), Bound::Unbounded)).take(count).count())
    }

    fn flush(&self) -> anyhow::Result<()> {
        Ok(())
    }

    fn close(self: Box<Self>) -> anyhow::Result<()> {
        Ok(())
    }
}

/// Does nothing: its throughput is the harness's own ceiling (trace generation, key formatting,
/// timing and histogram recording).
pub struct NullBaseline;

impl KvAdapter for NullBaseline {
    fn name(&self) -> &str {
        "null"
    }

    fn config_description(&self) -> Vec<(String, String)> {
        vec![("kind".into(), "baseline: discards writes, finds nothing; measures the harness alone".into())]
    }

    fn get(&self, key: &[u8]) -> anyhow::Result<Option<usize>> {
        std::hint::black_box(key);
        Ok(None)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        std::hint::black_box((key, value));
        Ok(())
    }

    fn delete(&self, key: &[u8]) -> anyhow::Result<()> {
        std::hint::black_box(key);
        Ok(())
    }

    fn scan(&self, start: &[u8], _count: usize) -> anyhow::Result<usize> {
        std::hint::black_box(start);
        Ok(0)
    }

    fn flush(&self) -> anyhow::Result<()> {
        Ok(())
    }

    fn close(self: Box<Self>) -> anyhow::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn btreemap_baseline_behaves_like_a_map() {
        let b = BTreeMapBaseline::default();
        b.put(b"b", b"22").unwrap();
        b.put(b"a", b"1").unwrap();
        b.put(b"c", b"333").unwrap();
        assert_eq!(b.get(b"b").unwrap(), Some(2));
        assert_eq!(b.get(b"z").unwrap(), None);
        assert_eq!(b.scan(b"a", 2).unwrap(), 2);
        assert_eq!(b.scan(b"b", 10).unwrap(), 2);
        b.delete(b"b").unwrap();
        assert_eq!(b.get(b"b").unwrap(), None);
        b.read_modify_write(b"a", b"xyz").unwrap();
        assert_eq!(b.get(b"a").unwrap(), Some(3));
    }
}
