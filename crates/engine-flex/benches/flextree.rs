//! FlexTree vs a `BTreeMap` extent index vs a sorted `Vec` in the shape of the paper's Table 1:
//! append N extents, look each up, insert M extents at the front. Prints the table (measured by
//! `engine_flex::experiments::run_table1`, the function `strata repro flex` runs), then runs
//! criterion microbenchmarks.
//!
//! `cargo bench -p engine-flex --features experiments --bench flextree`
//! Sizes: FLEXTREE_BENCH_APPEND (default 100000; paper 10^8/10^9, issue 10^7),
//! FLEXTREE_BENCH_FRONT (default 10000; issue 10^6), FLEXTREE_BENCH_BASELINE_FRONT (front inserts
//! for the O(N)-per-insert baselines, default FRONT capped at 20000; their total for FRONT is
//! extrapolated quadratically and marked as such).
//! FLEXTREE_BENCH_TABLE_ONLY=1 skips criterion.

use criterion::Criterion;
use engine_flex::experiments::{extent_addr, new_index, run_table1, IndexKind, Table1Sizes, EXTENT_BYTES};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn print_table() {
    let appends = env("FLEXTREE_BENCH_APPEND", 100_000);
    let fronts = env("FLEXTREE_BENCH_FRONT", 10_000);
    let baseline_fronts = env("FLEXTREE_BENCH_BASELINE_FRONT", fronts.min(20_000)).min(fronts);
    println!("FlexTree, Table 1 shape: append {appends}, lookup {appends}, insert-at-front {fronts} extents");
    println!(
        "(baselines insert {baseline_fronts} at the front; their total for {fronts} is extrapolated quadratically from the measured run)"
    );
    println!("| index | append (s) | lookup (s) | insert-front measured (s) | per insert (µs) | insert-front {fronts} (s) |");
    println!("|---|---|---|---|---|---|");
    let sizes = Table1Sizes { appends, front_inserts: fronts, baseline_front_inserts: baseline_fronts };
    for row in run_table1(sizes).unwrap() {
        assert_eq!(row.lookups_correct, appends, "{} lookups", row.kind.name());
        let per_op_us = row.front_measured_secs * 1e6 / row.front_inserts_measured.max(1) as f64;
        println!(
            "| {} | {:.3} | {:.3} | {:.4} | {per_op_us:.2} | {:.3} |",
            row.kind.name(),
            row.append_secs,
            row.lookup_secs,
            row.front_measured_secs,
            row.front_total_secs
        );
    }
}

fn main() {
    print_table();
    if std::env::var("FLEXTREE_BENCH_TABLE_ONLY").is_ok() {
        return;
    }
    let mut c = Criterion::default().configure_from_args().sample_size(10);
    let n = 10_000u64;
    let mut group = c.benchmark_group("flextree");
    for kind in IndexKind::ALL {
        let name = kind.name();
        group.bench_function(format!("append_{n}/{name}"), |b| {
            b.iter(|| {
                let mut index = new_index(kind).unwrap();
                for j in 0..n {
                    index.append(EXTENT_BYTES, extent_addr(j)).unwrap();
                }
                index
            })
        });
        let mut built = new_index(kind).unwrap();
        for j in 0..n {
            built.append(EXTENT_BYTES, extent_addr(j)).unwrap();
        }
        group.bench_function(format!("lookup_{n}/{name}"), |b| {
            b.iter(|| (0..n).fold(0u64, |acc, j| acc.wrapping_add(built.lookup(j * EXTENT_BYTES).unwrap())))
        });
        group.bench_function(format!("insert_front_1000_into_{n}/{name}"), |b| {
            b.iter(|| {
                let mut index = new_index(kind).unwrap();
                for j in 0..n {
                    index.append(EXTENT_BYTES, extent_addr(j)).unwrap();
                }
                for j in 0..1000 {
                    index.insert_front(EXTENT_BYTES, extent_addr(n + j)).unwrap();
                }
                index
            })
        });
    }
    group.finish();
    c.final_summary();
}
