//! Throughput over time of a zipfian read/RMW run (YCSB-F shape) on real files that forces
//! repeated hot-log compaction, for f2 and for its `single_log` mode (FASTER's one log with the
//! lookup-based compaction the paper's FASTER baseline used, F2 §8.1), one after the other with
//! identical settings except that knob. F2 Figure 2: FASTER's compaction copies write-cold
//! records to the log's tail, which pushes write-hot records out of memory (they then cost a
//! disk read and an append each, growing the log and triggering the next compaction); f2 moves
//! write-cold records to its cold log and leaves the mutable region alone.
//!
//! `cargo bench -p engine-f2 --bench rmw_timeline`; env (defaults in brackets):
//! `F2_BENCH_KEYS` [500000], `F2_BENCH_SECONDS` per mode [30], `F2_BENCH_THREADS` [2],
//! `F2_BENCH_THETA_PERCENT` zipf θ×100 [99], `F2_BENCH_READ_PERCENT` [50] (the rest are RMWs),
//! `F2_BENCH_MEMORY_PERCENT` memory budget as % of the data [10], `F2_BENCH_HOT_BUDGET_PERCENT`
//! hot-log disk budget as % of the data [150] (the single log must hold every live record),
//! `F2_BENCH_DIRECT_IO` [1] (reads bypass the OS page cache, as in the paper's runs, so the
//! memory budget is all the caching either mode gets), `F2_BENCH_SEED` [1], `F2_BENCH_DIR` (default a temporary directory; one subdirectory per mode).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine_f2::{F2Engine, F2Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Engine, EngineConfig, Stats};
use strata_io::FileStorage;

/// 8 B key + 100 B value + 24 B header, padded to 8 B.
const RECORD_BYTES: u64 = 136;
const VALUE_BYTES: usize = 100;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Params {
    keys: u64,
    seconds: u64,
    threads: u64,
    theta: f64,
    read_percent: u64,
    seed: u64,
    config: EngineConfig,
    options: F2Options,
}

/// YCSB's zipfian generator (Gray et al.) over ranks `0..n`; rank r maps to key id
/// `r * PERMUTE % n`, so hot keys are spread over the load order.
struct Zipf {
    n: u64,
    theta: f64,
    zeta_n: f64,
    alpha: f64,
    eta: f64,
}

const PERMUTE: u128 = 1_000_003;

impl Zipf {
    fn new(n: u64, theta: f64) -> Zipf {
        let zeta = |count: u64| (1..=count).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let zeta_n = zeta(n);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta(2) / zeta_n);
        Zipf { n, theta, zeta_n, alpha: 1.0 / (1.0 - theta), eta }
    }

    fn rank(&self, rng: &mut SmallRng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zeta_n;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        ((self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64).min(self.n - 1)
    }

    fn key(&self, rng: &mut SmallRng) -> u64 {
        (u128::from(self.rank(rng)) * PERMUTE % u128::from(self.n)) as u64
    }
}

struct ModeRun {
    ops_per_second: Vec<u64>,
    /// Engine stats at the end of the timed phase, and at its start (after the load).
    end: Stats,
    start: Stats,
}

fn run_mode(p: &Params, zipf: &Arc<Zipf>, dir: &Path, single_log: bool) -> ModeRun {
    let storage = Arc::new(FileStorage::open_dir(dir, true).expect("storage"));
    let options = F2Options { single_log, ..p.options.clone() };
    let engine = Arc::new(F2Engine::open_with(storage, &p.config, options).expect("open"));
    let value = [7u8; VALUE_BYTES];
    for i in 0..p.keys {
        engine.put(&i.to_be_bytes(), &value, Durability::None).expect("load");
    }
    let start_stats = engine.stats();
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..p.threads)
        .map(|t| {
            let (engine, done, stop, zipf) = (engine.clone(), done.clone(), stop.clone(), zipf.clone());
            let (seed, read_percent) = (p.seed * 1000 + t, p.read_percent);
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed);
                while !stop.load(Ordering::Relaxed) {
                    let k = zipf.key(&mut rng).to_be_bytes();
                    if rng.gen_range(0..100) < read_percent {
                        engine.get(&k).expect("get");
                    } else {
                        let mut bump = |old: Option<&[u8]>| {
                            let mut v = old.map_or_else(|| vec![0u8; VALUE_BYTES], <[u8]>::to_vec);
                            v[0] = v[0].wrapping_add(1);
                            Some(v)
                        };
                        engine.rmw(&k, &mut bump, Durability::None).expect("rmw");
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let start = Instant::now();
    let mut last = 0;
    let mut ops_per_second = Vec::new();
    for s in 1..=p.seconds {
        std::thread::sleep((start + Duration::from_secs(s)).saturating_duration_since(Instant::now()));
        let now = done.load(Ordering::Relaxed);
        ops_per_second.push(now - last);
        last = now;
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("worker");
    }
    let end = engine.stats();
    engine.close().expect("close");
    ModeRun { ops_per_second, end, start: start_stats }
}

fn min_median_max(v: &[u64]) -> (u64, u64, u64) {
    let mut sorted = v.to_vec();
    sorted.sort_unstable();
    let at = |i: usize| sorted.get(i).copied().unwrap_or(0);
    (at(0), at(sorted.len() / 2), at(sorted.len().saturating_sub(1)))
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let keys = env("F2_BENCH_KEYS", 500_000).max(100);
    let data_bytes = keys * RECORD_BYTES;
    let memory_bytes = (data_bytes * env("F2_BENCH_MEMORY_PERCENT", 10) / 100).max(4 << 20);
    let hot_budget_bytes = (data_bytes * env("F2_BENCH_HOT_BUDGET_PERCENT", 150) / 100).max(1 << 20);
    let p = Params {
        keys,
        seconds: env("F2_BENCH_SECONDS", 30),
        threads: env("F2_BENCH_THREADS", 2),
        theta: env("F2_BENCH_THETA_PERCENT", 99) as f64 / 100.0,
        read_percent: env("F2_BENCH_READ_PERCENT", 50),
        seed: env("F2_BENCH_SEED", 1),
        config: EngineConfig {
            memory_budget_bytes: memory_bytes,
            direct_io: env("F2_BENCH_DIRECT_IO", 1) != 0,
            ..EngineConfig::default()
        },
        options: F2Options {
            page_size_bytes: Some(64 << 10),
            segment_bytes: 8 << 20,
            hot_log_disk_budget_bytes: Some(hot_budget_bytes),
            ..F2Options::default()
        },
    };
    let zipf = Arc::new(Zipf::new(p.keys, p.theta));
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = std::env::var("F2_BENCH_DIR").map(Into::into).unwrap_or_else(|_| tmp.path().to_path_buf());
    println!(
        "# keys {} ({} MiB of records), memory budget {} MiB, hot-log disk budget {} MiB, \
         {} threads, zipf θ {}, {}% reads / {}% RMW, seed {}, {} s per mode, direct I/O {}",
        p.keys,
        data_bytes >> 20,
        memory_bytes >> 20,
        hot_budget_bytes >> 20,
        p.threads,
        p.theta,
        p.read_percent,
        100 - p.read_percent,
        p.seed,
        p.seconds,
        p.config.direct_io
    );
    let f2 = run_mode(&p, &zipf, &root.join("f2"), false);
    let single = run_mode(&p, &zipf, &root.join("single-log"), true);
    println!("t\tf2 ops/s\tsingle-log ops/s");
    for (i, (a, b)) in f2.ops_per_second.iter().zip(&single.ops_per_second).enumerate() {
        println!("{}\t{a}\t{b}", i + 1);
    }
    println!("mode\tmin\tmedian\tmax\tops/s");
    for (name, run) in [("f2", &f2), ("single-log", &single)] {
        let (min, median, max) = min_median_max(&run.ops_per_second);
        println!("{name}\t{min}\t{median}\t{max}");
    }
    println!("counters during the timed phase (end minus start of it):");
    let names = [
        "compaction.hot_to_cold_runs",
        "compaction.hot_to_cold_records",
        "compaction.hot_to_hot_tail_records",
        "compaction.cold_to_cold_records",
        "compaction.bytes_written",
        "ops.in_place_updates",
        "ops.appends",
        "hot_log.point_reads",
        "cold_log.point_reads",
        "backpressure_waits",
    ];
    println!("counter\tf2\tsingle-log");
    for name in names {
        let delta =
            |r: &ModeRun| r.end.counter(name).unwrap_or(0).saturating_sub(r.start.counter(name).unwrap_or(0));
        println!("{name}\t{}\t{}", delta(&f2), delta(&single));
    }
    let io = |r: &ModeRun| (r.end.io.bytes_written - r.start.io.bytes_written) >> 20;
    println!("io.bytes_written_mib\t{}\t{}", io(&f2), io(&single));
    let disk = |r: &ModeRun| r.end.disk_bytes >> 20;
    println!("disk_mib_at_end\t{}\t{}", disk(&f2), disk(&single));
    let in_place_percent = |r: &ModeRun| {
        let d = |n: &str| r.end.counter(n).unwrap_or(0) - r.start.counter(n).unwrap_or(0);
        let (in_place, appends) = (d("ops.in_place_updates"), d("ops.appends"));
        100 * in_place / (in_place + appends).max(1)
    };
    println!("writes_in_place_percent\t{}\t{}", in_place_percent(&f2), in_place_percent(&single));
}
