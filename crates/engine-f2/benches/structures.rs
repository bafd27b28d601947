//! Microbenchmarks of f2's structures and of the engine on in-memory storage.
//! `cargo bench -p engine-f2 --bench structures`; sizes via `F2_BENCH_KEYS` (default 100000).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use engine_f2::internals::{encode_record, key_hash, parse_slot, seal_record, HotIndex, Slot};
use engine_f2::{F2Engine, F2Options};
use strata_core::{Durability, Engine, EngineConfig};
use strata_io::MemStorage;

fn keys() -> u64 {
    std::env::var("F2_BENCH_KEYS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
}

fn key(i: u64) -> [u8; 8] {
    key_hash(&i.to_le_bytes()).to_be_bytes()
}

fn structures(c: &mut Criterion) {
    let n = keys();
    let index = HotIndex::new(n / 4);
    for i in 0..n {
        let e = index.find_or_create(key_hash(&key(i)));
        let _ = e.cas_address(64 + i * 8);
    }
    let mut i = 0u64;
    c.bench_function("hot index find (hit)", |b| {
        b.iter(|| {
            i = (i + 7919) % n;
            black_box(index.find(key_hash(&key(i))))
        })
    });
    c.bench_function("hot index find_or_create + cas", |b| {
        b.iter(|| {
            i = (i + 7919) % n;
            let e = index.find_or_create(key_hash(&key(i)));
            black_box(e.cas_address(e.address() + 8))
        })
    });
    let address = 1 << 20;
    let mut record = encode_record(b"user0000", Some(&[7u8; 100]), 4096);
    assert!(seal_record(&mut record, address));
    c.bench_function("record encode + seal (8 B key, 100 B value)", |b| {
        b.iter(|| {
            let mut r = encode_record(black_box(b"user0000"), Some(&[7u8; 100]), 4096);
            black_box(seal_record(&mut r, address))
        })
    });
    c.bench_function("record parse + crc32c", |b| {
        b.iter(|| black_box(matches!(parse_slot(black_box(&record), Some(address)), Ok(Slot::Record(_)))))
    });
}

fn engine(c: &mut Criterion) {
    let n = keys();
    let config = EngineConfig { memory_budget_bytes: 64 << 20, ..EngineConfig::default() };
    let options =
        F2Options { page_size_bytes: Some(64 << 10), segment_bytes: 16 << 20, ..F2Options::default() };
    let f2 = F2Engine::open_with(Arc::new(MemStorage::new()), &config, options).expect("open");
    let value = [7u8; 100];
    for i in 0..n {
        f2.put(&key(i), &value, Durability::None).expect("load");
    }
    let mut i = 0u64;
    c.bench_function("f2 put (update, Durability::None)", |b| {
        b.iter(|| {
            i = (i + 7919) % n;
            f2.put(&key(i), &value, Durability::None).expect("put")
        })
    });
    c.bench_function("f2 get (hit)", |b| {
        b.iter(|| {
            i = (i + 7919) % n;
            black_box(f2.get(&key(i)).expect("get"))
        })
    });
    c.bench_function("f2 rmw (8 hot keys)", |b| {
        b.iter(|| {
            i = (i + 1) % 8;
            f2.rmw(&key(i), &mut |old| Some(old.map_or(vec![0; 8], <[u8]>::to_vec)), Durability::None)
                .expect("rmw")
        })
    });
}

criterion_group!(benches, structures, engine);
criterion_main!(benches);
