//! Random 4 KiB insert-range into a file growing to FLEXFILE_BENCH_BYTES (default 16 MiB; the
//! paper's run uses 1 GB): FlexFile on real files vs the filesystem's
//! `fallocate(FALLOC_FL_INSERT_RANGE)` vs rewrite-shifting (a plain file whose tail is rewritten
//! on every insert). Measured by `engine_flex::experiments` (the functions `strata repro flex`
//! runs). Prints throughput and write amplification: bytes the storage layer wrote / user bytes,
//! and bytes this process sent to the block layer (/proc/self/io `write_bytes`) / user bytes.
//!
//! `FLEXFILE_BENCH_BYTES=$((1<<30)) cargo bench -p engine-flex --features experiments --bench flexfile`
//! FLEXFILE_BENCH_DIR: where the files go (default: a temp dir under the system temp dir; it
//! must be ext4 or XFS for INSERT_RANGE). FLEXFILE_BENCH_REWRITE_BYTES caps the rewrite-shifting
//! file (default 16 MiB; it is O(N) per insert). Sizes are multiples of 4 KiB.

use engine_flex::experiments::{
    filesystem_name, flexfile_random_insert, fs_random_insert, rewrite_random_insert, FsInsertOutcome,
    InsertLimits, InsertRun,
};

const SEED: u64 = 1;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn print_row(name: &str, r: &InsertRun) {
    let user = r.user_bytes() as f64;
    let storage_wa = r.storage_bytes_written.map_or("-".to_string(), |b| format!("{:.2}", b as f64 / user));
    println!(
        "| {name} | {} | {:.2} | {:.2} | {:.2} | {storage_wa} | {:.2} |",
        r.inserts,
        r.secs,
        r.ops_per_sec() / 1000.0,
        r.tail_ops_per_sec / 1000.0,
        r.process_write_bytes as f64 / user
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` probing: nothing to list.
    }
    let total_bytes = env("FLEXFILE_BENCH_BYTES", 16 << 20);
    let rewrite_bytes = env("FLEXFILE_BENCH_REWRITE_BYTES", 16 << 20).min(total_bytes);
    let tmp;
    let dir = match std::env::var("FLEXFILE_BENCH_DIR") {
        Ok(d) => std::path::PathBuf::from(d),
        Err(_) => {
            tmp = tempfile::tempdir().unwrap();
            tmp.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&dir).unwrap();
    let fs = filesystem_name(&dir);
    println!(
        "random 4 KiB insert-range, file grows to {total_bytes} bytes (rewrite-shifting to {rewrite_bytes}), dir {} ({fs})",
        dir.display()
    );
    println!("| file | inserts | seconds | Kops/s | last 10% Kops/s | storage-level WA | block-layer WA (/proc/self/io) |");
    println!("|---|---|---|---|---|---|---|");
    let limits = InsertLimits { total_bytes, deadline: None };
    print_row("FlexFile", &flexfile_random_insert(&dir, limits, SEED).unwrap());
    match fs_random_insert(&dir, limits, SEED).unwrap() {
        FsInsertOutcome::Measured(run) => print_row(&format!("{fs} INSERT_RANGE"), &run),
        FsInsertOutcome::Refused { error } => println!("{fs} INSERT_RANGE: not measured: {error}"),
    }
    let rewrite = InsertLimits { total_bytes: rewrite_bytes, deadline: None };
    print_row("rewrite-shifting", &rewrite_random_insert(&dir, rewrite, SEED).unwrap());
}
