//! Manual probe (not a test): loads `F2_PROBE_RECORDS` records (8 B keys, 100 B values) into a
//! real directory, drops the files from the page cache, reopens, then runs zipfian (θ 0.99) reads
//! and prints the engine's counters per phase, so each change to the read path can be measured.
//! `cargo run --release -p engine-f2 --example probe -- <dir>`; sizes via F2_PROBE_RECORDS,
//! F2_PROBE_BUDGET_MIB, F2_PROBE_OPS; F2_PROBE_NO_SNAPSHOT=1 deletes the hot-index snapshot
//! before the reopen (to time the hot-log scan instead).

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

use engine_f2::F2Engine;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Engine, EngineConfig, WriteBatch};
use strata_io::FileStorage;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// YCSB's zipfian generator over ranks 0..n.
struct Zipf {
    n: f64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipf {
    fn new(n: u64, theta: f64) -> Zipf {
        let zeta = |k: u64| (1..=k).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let (zetan, zeta2) = (zeta(n), zeta(2));
        let nf = n as f64;
        let eta = (1.0 - (2.0 / nf).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipf { n: nf, theta, alpha: 1.0 / (1.0 - theta), zetan, eta }
    }
    fn next(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        (self.n * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }
}

fn key_of(rank: u64, n: u64) -> [u8; 8] {
    // A fixed permutation of 0..n (scrambles which keys are hot relative to load order).
    let k = (rank.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5bd1e995) % n;
    k.to_be_bytes()
}

fn counters(engine: &F2Engine) -> BTreeMap<String, u64> {
    let s = engine.stats();
    let mut m: BTreeMap<String, u64> = s.engine_counters.into_iter().collect();
    m.insert("io.read_ops".into(), s.io.read_ops);
    m.insert("io.bytes_read".into(), s.io.bytes_read);
    m
}

fn print_delta(phase: &str, before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) {
    println!("-- {phase}");
    for (k, v) in after {
        let b = before.get(k).copied().unwrap_or(0);
        if *v != b && !k.starts_with("memory.") && !k.starts_with("wal.") {
            println!("   {k:40} {}", v.wrapping_sub(b));
        }
    }
}

fn drop_page_cache(dir: &std::path::Path) {
    for entry in std::fs::read_dir(dir).expect("dir") {
        let path = entry.expect("entry").path();
        if let Ok(f) = std::fs::File::open(&path) {
            // SAFETY: a valid descriptor for the duration of the call.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
}

fn main() -> strata_core::Result<()> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).expect("usage: probe <dir>"));
    let n = env("F2_PROBE_RECORDS", 2_000_000);
    let budget = env("F2_PROBE_BUDGET_MIB", 21) << 20;
    let ops = env("F2_PROBE_OPS", 100_000);
    let config = EngineConfig { memory_budget_bytes: budget, ..EngineConfig::default() };
    let _ = std::fs::remove_dir_all(&dir);
    let open = || -> strata_core::Result<F2Engine> {
        F2Engine::open(Arc::new(FileStorage::open_dir(&dir, true)?), &config)
    };
    let engine = open()?;
    let value = [7u8; 100];
    let t = Instant::now();
    let mut worst_us = 0u128;
    for i in 0..n {
        let mut b = WriteBatch::new();
        b.put(key_of(i, n), value.to_vec());
        let op = Instant::now();
        engine.write(b, Durability::Buffered)?;
        worst_us = worst_us.max(op.elapsed().as_micros());
    }
    println!("load {n} records: {:.1} s, worst insert {worst_us} µs", t.elapsed().as_secs_f64());
    print_delta("load", &BTreeMap::new(), &counters(&engine));
    let t = Instant::now();
    engine.close()?;
    drop(engine);
    println!("close {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    if std::env::var("F2_PROBE_NO_SNAPSHOT").is_ok() {
        let _ = std::fs::remove_file(dir.join("f2-hot-index"));
    }
    drop_page_cache(&dir);
    let t = Instant::now();
    let engine = open()?;
    println!("reopen {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    let open_counters = counters(&engine);
    for name in ["open.hot_index_entries_loaded", "open.hot_records_scanned"] {
        println!("   {name:40} {}", open_counters.get(name).copied().unwrap_or(0));
    }
    let zipf = Zipf::new(n, 0.99);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
    for phase in ["c", "c-again", "a"] {
        let before = counters(&engine);
        let t = Instant::now();
        for _ in 0..ops {
            let key = key_of(zipf.next(&mut rng), n);
            if phase == "a" && rng.gen_bool(0.5) {
                let mut b = WriteBatch::new();
                b.put(key, value.to_vec());
                engine.write(b, Durability::Buffered)?;
            } else if engine.get(&key)?.is_none() {
                panic!("missing key");
            }
        }
        let secs = t.elapsed().as_secs_f64();
        println!("{phase}: {ops} ops in {secs:.2} s = {:.0} ops/s", ops as f64 / secs);
        print_delta(phase, &before, &counters(&engine));
    }
    engine.close()?;
    Ok(())
}
