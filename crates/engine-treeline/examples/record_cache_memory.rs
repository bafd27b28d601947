//! Measures what a record cache entry really costs in memory (resident set growth per entry),
//! beside what the cache counts against its capacity (`ENTRY_OVERHEAD_BYTES` + key + value).
//! `cargo run --release -p engine-treeline --example record_cache_memory [VALUE_BYTES]`. Linux
//! only (reads `/proc/self/statm`).

use engine_treeline::record_cache::RecordCache;

const ENTRIES: u64 = 1_000_000;

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm (Linux)");
    let pages: u64 =
        statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("statm's resident pages");
    pages * 4096
}

fn main() {
    let value_bytes: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(56);
    let before = resident_bytes();
    let mut cache = RecordCache::new(u64::MAX);
    for i in 0..ENTRIES {
        let key = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes().to_vec();
        cache.admit_clean(key, vec![7u8; value_bytes]);
    }
    let grown = resident_bytes().saturating_sub(before);
    println!(
        "8-byte keys, {value_bytes}-byte values: {:.0} bytes resident per entry, {:.0} counted",
        grown as f64 / ENTRIES as f64,
        cache.used_bytes() as f64 / ENTRIES as f64
    );
}
