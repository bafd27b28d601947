use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

fn put(k: &[u8], v: &[u8]) -> BatchOp {
    BatchOp::Put { key: k.to_vec(), value: v.to_vec() }
}

fn delete(k: &[u8]) -> BatchOp {
    BatchOp::Delete { key: k.to_vec() }
}

/// The totals as a walk of every kept version computes them.
fn walk(table: &VersionedMemTable) -> (u64, u64) {
    let (mut memory, mut data) = (0, 0);
    for (key, newest) in &table.entries {
        memory += ENTRY_OVERHEAD_BYTES + key_heap_bytes(key.len());
        let (mut next, mut older) = (Some(newest), false);
        while let Some(v) = next {
            memory += version_bytes(v.value.as_deref(), older);
            data += user_bytes(key.len(), v.value.as_deref());
            next = v.older.as_deref();
            older = true;
        }
    }
    (memory, data)
}

fn versions(table: &VersionedMemTable) -> usize {
    let chain = |v: &Version| std::iter::successors(Some(v), |v| v.older.as_deref()).count();
    table.entries.values().map(chain).sum()
}

type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

fn seen(table: &VersionedMemTable, lsn: u64, reverse: bool) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let owned = |(k, v): (&[u8], Option<&[u8]>)| (k.to_vec(), v.map(<[u8]>::to_vec));
    let all = (Bound::Unbounded, Bound::Unbounded);
    match reverse {
        false => table.range_at(all, lsn).map(owned).collect(),
        true => table.range_at(all, lsn).rev().map(owned).collect(),
    }
}

/// Random puts and deletes in batches, snapshots taken and dropped between them: every live
/// snapshot reads the table as it was at its lsn (both ways, and by `get_at`), the newest read
/// sees the last write, and the totals always equal a walk.
#[test]
fn every_live_snapshot_reads_the_table_as_of_its_lsn() {
    for seed in 0..20 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut table = VersionedMemTable::default();
        let mut model = Model::new();
        let mut snapshots: Vec<(u64, Model)> = Vec::new();
        for lsn in 1..=400u64 {
            if rng.gen_bool(0.1) {
                snapshots.push((lsn - 1, model.clone()));
            }
            if !snapshots.is_empty() && rng.gen_bool(0.08) {
                snapshots.remove(rng.gen_range(0..snapshots.len()));
            }
            let newest_snapshot = snapshots.iter().map(|(s, _)| *s).max();
            for _ in 0..rng.gen_range(1..4) {
                let key = vec![b'a' + rng.gen_range(0..12u8)];
                let op = match rng.gen_bool(0.7) {
                    true => put(&key, &vec![rng.gen(); rng.gen_range(0..40)]),
                    false => delete(&key),
                };
                let value = match &op {
                    BatchOp::Put { value, .. } => Some(value.clone()),
                    BatchOp::Delete { .. } => None,
                };
                table.apply(op, lsn, newest_snapshot);
                model.insert(key, value);
                assert_eq!((table.memory_bytes(), table.data_bytes()), walk(&table), "seed {seed}");
            }
            for (at, expected) in &snapshots {
                let expected: Vec<_> = expected.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                assert_eq!(seen(&table, *at, false), expected, "seed {seed}, snapshot {at}");
                let mut reversed = expected.clone();
                reversed.reverse();
                assert_eq!(seen(&table, *at, true), reversed, "seed {seed}, snapshot {at}");
                for (k, v) in &expected {
                    assert_eq!(table.get_at(k, *at).map(|v| v.cloned()), Some(v.clone()));
                }
            }
            let newest: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(seen(&table, NEWEST, false), newest);
            let newest_only: Vec<_> =
                table.newest().map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec))).collect();
            assert_eq!(newest_only, newest);
        }
    }
}

#[test]
fn with_no_snapshot_a_key_holds_one_version_and_memory_does_not_grow_with_overwrites() {
    let mut table = VersionedMemTable::default();
    table.apply(put(b"k", &[1; 100]), 1, None);
    let one = table.memory_bytes();
    for lsn in 2..100 {
        table.apply(put(b"k", &[1; 100]), lsn, None);
    }
    assert_eq!((versions(&table), table.memory_bytes()), (1, one));
    // A snapshot at lsn 99 keeps the version it sees, and only that one.
    table.apply(put(b"k", &[2; 100]), 100, Some(99));
    table.apply(put(b"k", &[3; 100]), 101, Some(99));
    assert_eq!(versions(&table), 2, "lsn 99's version kept, lsn 100's dropped");
    assert_eq!(table.get_at(b"k", 99), Some(Some(&vec![1; 100])));
    assert_eq!(table.get_at(b"k", 100), Some(Some(&vec![1; 100])), "100 was never visible to a snapshot");
    assert_eq!(table.get_at(b"k", NEWEST), Some(Some(&vec![3; 100])));
    assert_eq!(table.get_at(b"k", 0), None, "no version that old");
    // Once no snapshot is live, the next write drops the whole chain.
    table.apply(put(b"k", &[4; 100]), 102, None);
    assert_eq!((versions(&table), table.memory_bytes()), (1, one));
    assert_eq!((table.memory_bytes(), table.data_bytes()), walk(&table));
}

#[test]
fn a_key_first_written_after_a_snapshot_is_not_in_its_view_and_empty_bounds_hold_nothing() {
    let mut table = VersionedMemTable::default();
    table.apply(put(b"a", b"1"), 1, None);
    table.apply(put(b"b", b"2"), 2, Some(1));
    table.apply(delete(b"a"), 3, Some(1));
    let keys = |lsn| seen(&table, lsn, false);
    assert_eq!(keys(1), [(b"a".to_vec(), Some(b"1".to_vec()))]);
    assert_eq!(keys(NEWEST), [(b"a".to_vec(), None), (b"b".to_vec(), Some(b"2".to_vec()))]);
    let (inc, exc) = (Bound::Included::<&[u8]>, Bound::Excluded::<&[u8]>);
    for bounds in [(inc(b"b"), inc(b"a")), (exc(b"a"), exc(b"a")), (inc(b"a"), exc(b"a"))] {
        assert_eq!(table.range_at(bounds, NEWEST).count(), 0);
    }
    assert_eq!(table.range_at((inc(b"b"), Bound::Unbounded), NEWEST).count(), 1);
}
