//! Cost of the harness's per-operation work: drawing keys and formatting them.
//! `cargo bench -p strata-bench --bench generators`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use strata_bench::workload::trace::TraceParams;
use strata_bench::workload::zipfian::{ScrambledZipfian, Zipfian, DEFAULT_THETA};
use strata_bench::workload::{Distribution, KeyFormat, KeySpec, ThreadTrace, ValueSpec, Workload};

fn generators(c: &mut Criterion) {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut zipf = Zipfian::new(1_000_000, DEFAULT_THETA);
    c.bench_function("zipfian next (1M items)", |b| b.iter(|| black_box(zipf.next(&mut rng))));
    let mut scrambled = ScrambledZipfian::new(1_000_000, DEFAULT_THETA);
    c.bench_function("scrambled zipfian next", |b| b.iter(|| black_box(scrambled.next(&mut rng))));

    let mut key = Vec::with_capacity(64);
    let int_keys =
        KeySpec { format: KeyFormat::Int, key_bytes: Some(8), hashed: true, clustered_inserts: None };
    let mut n = 0u64;
    c.bench_function("int key format", |b| {
        b.iter(|| {
            n += 1;
            int_keys.write_key(black_box(n), &mut key);
        })
    });
    let string_keys =
        KeySpec { format: KeyFormat::String, key_bytes: None, hashed: true, clustered_inserts: None };
    c.bench_function("string key format (user<fnv>)", |b| {
        b.iter(|| {
            n += 1;
            string_keys.write_key(black_box(n), &mut key);
        })
    });

    let params = TraceParams {
        seed: 1,
        records: 1_000_000,
        threads: 1,
        values: ValueSpec::fixed(120),
        max_scan_length: 100,
    };
    let workload = Workload::named("a").expect("workload a exists");
    let mut trace =
        ThreadTrace::new(&params, 1, 0, &workload, Distribution::Zipfian { theta: DEFAULT_THETA }, 0, None);
    c.bench_function("trace next_op (workload a)", |b| b.iter(|| black_box(trace.next_op())));
}

criterion_group!(benches, generators);
criterion_main!(benches);
