//! FlexTree vs a `BTreeMap` extent index vs a sorted `Vec` in the shape of the paper's Table 1:
//! append N extents, look each up, insert M extents at the front. Prints the table, then runs
//! criterion microbenchmarks.
//!
//! `cargo bench -p engine-flex --bench flextree`
//! Sizes: FLEXTREE_BENCH_APPEND (default 100000; paper 10^8/10^9, issue 10^7),
//! FLEXTREE_BENCH_FRONT (default 10000; issue 10^6), FLEXTREE_BENCH_BASELINE_FRONT (front inserts
//! for the O(N)-per-insert baselines, default FRONT capped at 20000; their total for FRONT is
//! extrapolated quadratically and marked as such).
//! FLEXTREE_BENCH_TABLE_ONLY=1 skips criterion.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use criterion::Criterion;
use engine_flex::flextree::{FlexTree, FlexTreeConfig};

const EXTENT_BYTES: u64 = 100;

trait ExtentIndex {
    fn name(&self) -> &'static str;
    fn append(&mut self, len: u64, addr: u64);
    fn insert_front(&mut self, len: u64, addr: u64);
    /// Physical address of logical `offset`.
    fn lookup(&self, offset: u64) -> u64;
}

struct Flex(FlexTree);
impl ExtentIndex for Flex {
    fn name(&self) -> &'static str {
        "FlexTree"
    }
    fn append(&mut self, len: u64, addr: u64) {
        self.0.append(len, addr).unwrap();
    }
    fn insert_front(&mut self, len: u64, addr: u64) {
        self.0.insert(0, len, addr).unwrap();
    }
    fn lookup(&self, offset: u64) -> u64 {
        let e = self.0.find(offset).unwrap();
        e.addr + (offset - e.offset)
    }
}

/// offset -> (len, addr); a shift rewrites every later key (the paper's plain B+-tree).
struct Btree(BTreeMap<u64, (u64, u64)>, u64);
impl ExtentIndex for Btree {
    fn name(&self) -> &'static str {
        "BTreeMap"
    }
    fn append(&mut self, len: u64, addr: u64) {
        self.0.insert(self.1, (len, addr));
        self.1 += len;
    }
    fn insert_front(&mut self, len: u64, addr: u64) {
        let old = std::mem::take(&mut self.0);
        self.0 = old.into_iter().map(|(k, v)| (k + len, v)).collect();
        self.0.insert(0, (len, addr));
        self.1 += len;
    }
    fn lookup(&self, offset: u64) -> u64 {
        let (start, (_, addr)) = self.0.range(..=offset).next_back().unwrap();
        addr + (offset - start)
    }
}

/// Sorted (offset, len, addr).
struct Sorted(Vec<(u64, u64, u64)>, u64);
impl ExtentIndex for Sorted {
    fn name(&self) -> &'static str {
        "sorted Vec"
    }
    fn append(&mut self, len: u64, addr: u64) {
        self.0.push((self.1, len, addr));
        self.1 += len;
    }
    fn insert_front(&mut self, len: u64, addr: u64) {
        self.0.insert(0, (0, len, addr));
        for e in self.0.iter_mut().skip(1) {
            e.0 += len;
        }
        self.1 += len;
    }
    fn lookup(&self, offset: u64) -> u64 {
        let i = self.0.partition_point(|e| e.0 <= offset) - 1;
        let (start, _, addr) = self.0[i];
        addr + (offset - start)
    }
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn indexes() -> Vec<Box<dyn ExtentIndex>> {
    vec![
        Box::new(Flex(FlexTree::new(FlexTreeConfig::default()).unwrap())),
        Box::new(Btree(BTreeMap::new(), 0)),
        Box::new(Sorted(Vec::new(), 0)),
    ]
}

/// Non-contiguous addresses so that nothing merges.
fn addr(i: u64) -> u64 {
    i * 2 * EXTENT_BYTES
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
    for i in 0..3 {
        let mut index = indexes().swap_remove(i);
        let t = Instant::now();
        for j in 0..appends {
            index.append(EXTENT_BYTES, addr(j));
        }
        let append_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut sum = 0u64;
        for j in 0..appends {
            sum = sum.wrapping_add(index.lookup(j * EXTENT_BYTES + 7));
        }
        black_box(sum);
        let lookup_s = t.elapsed().as_secs_f64();
        let name = index.name();
        drop(index);
        let count = if i == 0 { fronts } else { baseline_fronts };
        let mut index = indexes().swap_remove(i);
        let t = Instant::now();
        for j in 0..count {
            index.insert_front(EXTENT_BYTES, addr(j));
        }
        let front_s = t.elapsed().as_secs_f64();
        black_box(index.lookup(0));
        // O(N) per insert for the baselines: the total for `fronts` grows quadratically.
        let ratio = fronts as f64 / count.max(1) as f64;
        let extrapolated = front_s * ratio * ratio;
        let per_op_us = front_s * 1e6 / count.max(1) as f64;
        println!(
            "| {name} | {append_s:.3} | {lookup_s:.3} | {front_s:.4} | {per_op_us:.2} | {extrapolated:.3} |"
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
    for (i, name) in ["FlexTree", "BTreeMap", "sorted Vec"].into_iter().enumerate() {
        group.bench_function(format!("append_{n}/{name}"), |b| {
            b.iter(|| {
                let mut index = indexes().swap_remove(i);
                for j in 0..n {
                    index.append(EXTENT_BYTES, addr(j));
                }
                index
            })
        });
        let mut built = indexes().swap_remove(i);
        for j in 0..n {
            built.append(EXTENT_BYTES, addr(j));
        }
        group.bench_function(format!("lookup_{n}/{name}"), |b| {
            b.iter(|| (0..n).fold(0u64, |acc, j| acc.wrapping_add(built.lookup(j * EXTENT_BYTES))))
        });
        group.bench_function(format!("insert_front_1000_into_{n}/{name}"), |b| {
            b.iter(|| {
                let mut index = indexes().swap_remove(i);
                for j in 0..n {
                    index.append(EXTENT_BYTES, addr(j));
                }
                for j in 0..1000 {
                    index.insert_front(EXTENT_BYTES, addr(n + j));
                }
                index
            })
        });
    }
    group.finish();
    c.final_summary();
}
