//! The memory engine through the public `Db` API, as the benchmark drives it.
//! `cargo bench -p strata-bench --bench memory_engine`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use strata::{Db, Durability, EngineKind, Options};
use strata_bench::workload::{KeyFormat, KeySpec};

const RECORDS: u64 = 100_000;

fn memory_engine(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let db = Db::open(tmp.path().join("db"), Options::new(EngineKind::Memory)).expect("open");
    let keys = KeySpec { format: KeyFormat::Int, key_bytes: Some(8), hashed: true, clustered_inserts: None };
    let value = [7u8; 120];
    let mut key = Vec::new();
    for n in 0..RECORDS {
        keys.write_key(n, &mut key);
        db.put_with(&key, value, Durability::Buffered).expect("put");
    }
    let mut n = 0u64;
    c.bench_function("memory Db::get (100k records)", |b| {
        b.iter(|| {
            n = (n + 7919) % RECORDS;
            keys.write_key(n, &mut key);
            black_box(db.get(&key).expect("get"))
        })
    });
    c.bench_function("memory Db::put_with Buffered (update)", |b| {
        b.iter(|| {
            n = (n + 7919) % RECORDS;
            keys.write_key(n, &mut key);
            db.put_with(&key, value, Durability::Buffered).expect("put")
        })
    });
    db.close().expect("close");
}

criterion_group!(benches, memory_engine);
criterion_main!(benches);
