//! Throughput over time of an RMW-heavy, skewed run on real files that forces repeated hot→cold
//! compaction: the F2 design should show no collapse (FASTER's "death spiral", F2 Figure 2, comes
//! from compacting write-cold records into the hot tail, which f2 never does).
//! `cargo bench -p engine-f2 --bench rmw_timeline`; env: `F2_BENCH_KEYS` (default 200000),
//! `F2_BENCH_SECONDS` (default 10), `F2_BENCH_THREADS` (default 2), `F2_BENCH_DIR` (default a
//! temporary directory).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine_f2::{F2Engine, F2Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Engine, EngineConfig};
use strata_io::FileStorage;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let keys = env("F2_BENCH_KEYS", 200_000);
    let seconds = env("F2_BENCH_SECONDS", 10);
    let threads = env("F2_BENCH_THREADS", 2);
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = std::env::var("F2_BENCH_DIR").map(Into::into).unwrap_or_else(|_| tmp.path().join("db"));
    let storage = Arc::new(FileStorage::open_dir(&dir, true).expect("storage"));
    // Memory about a tenth of the data; hot-log disk budget small enough to compact often.
    let data_bytes = keys * 120;
    let config =
        EngineConfig { memory_budget_bytes: (data_bytes / 10).max(4 << 20), ..EngineConfig::default() };
    let options = F2Options {
        page_size_bytes: 64 << 10,
        segment_bytes: 8 << 20,
        hot_log_disk_budget_bytes: Some((data_bytes / 4).max(1 << 20)),
        ..F2Options::default()
    };
    let engine = Arc::new(F2Engine::open_with(storage, &config, options).expect("open"));
    let value = [7u8; 100];
    for i in 0..keys {
        engine.put(&i.to_be_bytes(), &value, Durability::None).expect("load");
    }
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (engine, done, stop) = (engine.clone(), done.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t);
                while !stop.load(Ordering::Relaxed) {
                    // Skewed: 90% of operations on 10% of the keys.
                    let k =
                        if rng.gen_bool(0.9) { rng.gen_range(0..keys / 10) } else { rng.gen_range(0..keys) };
                    let r = engine.rmw(
                        &k.to_be_bytes(),
                        &mut |old| {
                            let mut v = old.map_or_else(|| vec![0u8; 100], <[u8]>::to_vec);
                            v[0] = v[0].wrapping_add(1);
                            Some(v)
                        },
                        Durability::None,
                    );
                    r.expect("rmw");
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    println!("second,ops_per_sec,hot_to_cold_runs,cold_to_cold_runs,in_place_updates");
    let start = Instant::now();
    let mut last = 0;
    for s in 1..=seconds {
        std::thread::sleep((start + Duration::from_secs(s)).saturating_duration_since(Instant::now()));
        let now = done.load(Ordering::Relaxed);
        let stats = engine.stats();
        let c = |n: &str| stats.counter(n).unwrap_or(0);
        println!(
            "{s},{},{},{},{}",
            now - last,
            c("compaction.hot_to_cold_runs"),
            c("compaction.cold_to_cold_runs"),
            c("ops.in_place_updates")
        );
        last = now;
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("worker");
    }
    engine.close().expect("close");
}
