//! Random 4 KiB insert-range into a file growing to FLEXFILE_BENCH_BYTES (default 16 MiB; the
//! issue's run uses 1 GiB): FlexFile on real files vs ext4 `fallocate(FALLOC_FL_INSERT_RANGE)`
//! vs rewrite-shifting (a plain file whose tail is rewritten on every insert). Prints throughput
//! and write amplification: bytes the storage layer wrote / user bytes, and bytes this process
//! sent to the block layer (/proc/self/io `write_bytes`) / user bytes.
//!
//! `FLEXFILE_BENCH_BYTES=$((1<<30)) cargo bench -p engine-flex --bench flexfile`
//! FLEXFILE_BENCH_DIR: where the files go (default: a temp dir under the system temp dir; it
//! must be ext4 or XFS for INSERT_RANGE). FLEXFILE_BENCH_REWRITE_BYTES caps the rewrite-shifting
//! file (default 16 MiB; it is O(N) per insert). Sizes are multiples of 4 KiB.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use engine_flex::flexfile::{FlexFile, FlexFileOptions, TableFile};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_io::{FileStorage, Storage};

const BLOCK_BYTES: u64 = 4096;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Bytes this process has caused to be sent to the block layer so far.
fn proc_write_bytes() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    io.lines().find_map(|l| l.strip_prefix("write_bytes: ").and_then(|v| v.trim().parse().ok())).unwrap_or(0)
}

struct Row {
    name: &'static str,
    inserts: u64,
    secs: f64,
    storage_bytes: Option<u64>,
    block_bytes: u64,
}

fn print_row(r: &Row) {
    let user = (r.inserts * BLOCK_BYTES) as f64;
    let storage_wa = r.storage_bytes.map_or("-".to_string(), |b| format!("{:.2}", b as f64 / user));
    println!(
        "| {} | {} | {:.2} | {:.2} | {} | {:.2} |",
        r.name,
        r.inserts,
        r.secs,
        r.inserts as f64 / r.secs / 1000.0,
        storage_wa,
        r.block_bytes as f64 / user
    );
}

fn block(rng: &mut SmallRng) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK_BYTES as usize];
    rng.fill(&mut b[..]);
    b
}

fn bench_flexfile(dir: &Path, total_bytes: u64) -> Row {
    let storage = FileStorage::open_dir(dir.join("flexfile"), true).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(storage);
    let opts =
        FlexFileOptions { max_data_bytes: (total_bytes * 2).max(1 << 30), ..FlexFileOptions::default() };
    let file = FlexFile::open(storage.clone(), "bench", opts).unwrap();
    let mut rng = SmallRng::seed_from_u64(1);
    let inserts = total_bytes / BLOCK_BYTES;
    let (io_before, block_before) = (storage.io_stats().bytes_written, proc_write_bytes());
    let t = Instant::now();
    for i in 0..inserts {
        let offset = rng.gen_range(0..=i) * BLOCK_BYTES;
        file.insert(offset, &block(&mut rng)).unwrap();
    }
    file.close().unwrap();
    let secs = t.elapsed().as_secs_f64();
    Row {
        name: "FlexFile",
        inserts,
        secs,
        storage_bytes: Some(storage.io_stats().bytes_written - io_before),
        block_bytes: proc_write_bytes() - block_before,
    }
}

fn bench_insert_range(dir: &Path, total_bytes: u64) -> Option<Row> {
    let path = dir.join("insert-range.dat");
    let file = OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&path).unwrap();
    let mut rng = SmallRng::seed_from_u64(1);
    let inserts = total_bytes / BLOCK_BYTES;
    let block_before = proc_write_bytes();
    let t = Instant::now();
    let mut len = 0u64;
    for i in 0..inserts {
        let offset = rng.gen_range(0..=i) * BLOCK_BYTES;
        if offset < len {
            // SAFETY: plain syscall on an open descriptor with in-range arguments.
            let rc = unsafe {
                libc::fallocate(
                    file.as_raw_fd(),
                    libc::FALLOC_FL_INSERT_RANGE,
                    offset as i64,
                    BLOCK_BYTES as i64,
                )
            };
            if rc != 0 {
                println!("fallocate(FALLOC_FL_INSERT_RANGE) failed: {}", std::io::Error::last_os_error());
                return None;
            }
        }
        file.write_all_at(&block(&mut rng), offset).unwrap();
        len += BLOCK_BYTES;
    }
    file.sync_all().unwrap();
    let secs = t.elapsed().as_secs_f64();
    Some(Row {
        name: "ext4 INSERT_RANGE",
        inserts,
        secs,
        storage_bytes: None,
        block_bytes: proc_write_bytes() - block_before,
    })
}

fn bench_rewrite(dir: &Path, total_bytes: u64) -> Row {
    let path = dir.join("rewrite.dat");
    let file = OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&path).unwrap();
    let mut rng = SmallRng::seed_from_u64(1);
    let inserts = total_bytes / BLOCK_BYTES;
    let block_before = proc_write_bytes();
    let mut written = 0u64;
    let t = Instant::now();
    let mut tail = Vec::new();
    for i in 0..inserts {
        let offset = rng.gen_range(0..=i) * BLOCK_BYTES;
        let len = i * BLOCK_BYTES;
        tail.resize((len - offset) as usize, 0);
        file.read_exact_at(&mut tail, offset).unwrap();
        file.write_all_at(&block(&mut rng), offset).unwrap();
        file.write_all_at(&tail, offset + BLOCK_BYTES).unwrap();
        written += BLOCK_BYTES + tail.len() as u64;
    }
    file.sync_all().unwrap();
    let secs = t.elapsed().as_secs_f64();
    Row {
        name: "rewrite-shifting",
        inserts,
        secs,
        storage_bytes: Some(written),
        block_bytes: proc_write_bytes() - block_before,
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` probing: nothing to list.
    }
    let total_bytes = env("FLEXFILE_BENCH_BYTES", 16 << 20) / BLOCK_BYTES * BLOCK_BYTES;
    let rewrite_bytes =
        env("FLEXFILE_BENCH_REWRITE_BYTES", 16 << 20).min(total_bytes) / BLOCK_BYTES * BLOCK_BYTES;
    let tmp;
    let dir = match std::env::var("FLEXFILE_BENCH_DIR") {
        Ok(d) => std::path::PathBuf::from(d),
        Err(_) => {
            tmp = tempfile::tempdir().unwrap();
            tmp.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&dir).unwrap();
    println!("random 4 KiB insert-range, file grows to {total_bytes} bytes (rewrite-shifting to {rewrite_bytes}), dir {}", dir.display());
    println!("| file | inserts | seconds | Kops/s | storage-level WA | block-layer WA (/proc/self/io) |");
    println!("|---|---|---|---|---|---|");
    print_row(&bench_flexfile(&dir, total_bytes));
    if let Some(row) = bench_insert_range(&dir, total_bytes) {
        print_row(&row);
    }
    print_row(&bench_rewrite(&dir, rewrite_bytes));
}
