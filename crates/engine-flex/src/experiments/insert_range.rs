//! Table 2's random insert (§6.2, the INSERT pattern of §2): a file grows from empty to
//! `total_bytes` by inserting 4 KiB blocks, each at a random 4 KiB-aligned offset within what is
//! already written, so every insert shifts everything after it. Three ways to do that:
//! FlexFile's insert-range (O(log N) in FlexTree), the filesystem's own insert-range
//! (`fallocate(FALLOC_FL_INSERT_RANGE)`: ext4 and XFS shift every later extent), and a plain
//! file whose tail is rewritten on every insert (the paper's REWRITE, Figure 2).
//!
//! All three draw the same offsets from the same seed, and insert `i` writes a block that
//! starts with `i` (little-endian), so a caller can rebuild the expected order and read it back.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_core::{Error, Result};
use strata_io::{FileStorage, Storage};

use super::SplitMix;
use crate::flexfile::{FlexFile, FlexFileOptions, TableFile};

/// The paper's insert size, and the alignment insert-range needs on 4 KiB-block filesystems.
pub const BLOCK_BYTES: u64 = 4096;
/// The FlexFile's name in the experiment directory (files `flexfile.data`, `.tree`, `.log`).
pub const FLEXFILE_NAME: &str = "flexfile";
/// The plain file the filesystem's insert-range grows.
pub const FS_INSERT_FILE_NAME: &str = "insert-range.dat";
pub const REWRITE_FILE_NAME: &str = "rewrite.dat";

/// The `i`th item (from 0) is insert `i`'s offset in blocks: uniform in `0..=i`, so an insert
/// lands anywhere in the file written so far, its end (an append) included.
pub fn insert_offsets_blocks(seed: u64) -> impl Iterator<Item = u64> {
    let mut rng = SplitMix::new(seed);
    (0u64..).map(move |i| rng.up_to(i))
}

/// The insert number a block written by these experiments carries in its first 8 bytes.
pub fn block_id(block: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(block.get(..8)?.try_into().ok()?))
}

/// How far to grow the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InsertLimits {
    /// Target size; a multiple of [`BLOCK_BYTES`] (rounded down).
    pub total_bytes: u64,
    /// Stop early at this much time (the filesystem's insert-range slows as O(N) per insert); the
    /// run then reports what it reached.
    pub deadline: Option<Duration>,
}

impl InsertLimits {
    pub fn target_inserts(&self) -> u64 {
        self.total_bytes / BLOCK_BYTES
    }
}

/// What one way of inserting achieved.
#[derive(Clone, Debug, PartialEq)]
pub struct InsertRun {
    pub target_inserts: u64,
    pub inserts: u64,
    /// From the first insert to the end of the final sync.
    pub secs: f64,
    /// The file's logical size afterwards: `inserts * BLOCK_BYTES` when right.
    pub file_bytes: u64,
    /// Bytes the storage layer wrote (FlexFile: every file it owns; rewrite: data written).
    pub storage_bytes_written: Option<u64>,
    /// `/proc/self/io` write_bytes over the run (see [`super::process_write_bytes`]).
    pub process_write_bytes: u64,
    /// Inserts per second over the last tenth of the inserts (before the final sync): where the
    /// filesystem's shifting cost has grown with the file.
    pub tail_ops_per_sec: f64,
    pub stopped_at_deadline: bool,
}

impl InsertRun {
    pub fn ops_per_sec(&self) -> f64 {
        self.inserts as f64 / self.secs.max(1e-9)
    }

    pub fn user_bytes(&self) -> u64 {
        self.inserts * BLOCK_BYTES
    }
}

/// The filesystem's insert-range either ran or was refused (tmpfs, overlayfs, …: EOPNOTSUPP).
#[derive(Clone, Debug, PartialEq)]
pub enum FsInsertOutcome {
    Measured(InsertRun),
    /// `error` is the refusal of a probe insert on a two-block file; nothing was measured.
    Refused {
        error: String,
    },
}

/// Inserts driven so far and when: the loop every variant shares.
struct Driven {
    inserts: u64,
    stopped_at_deadline: bool,
    tail_ops_per_sec: f64,
}

/// Calls `insert(offset_bytes, block)` for each insert up to the limits.
fn drive(
    limits: InsertLimits,
    seed: u64,
    mut insert: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<Driven> {
    let target = limits.target_inserts();
    // Marks every 1/64 of the target bound the tail-throughput window without per-insert state.
    let step = (target / 64).max(1);
    let started = Instant::now();
    let mut marks = vec![(0u64, started)];
    let mut block = pattern_block(seed);
    let mut done = 0u64;
    let mut stopped_at_deadline = false;
    for offset_blocks in insert_offsets_blocks(seed).take(target as usize) {
        block[..8].copy_from_slice(&done.to_le_bytes());
        insert(offset_blocks * BLOCK_BYTES, &block)?;
        done += 1;
        if done.is_multiple_of(step) {
            marks.push((done, Instant::now()));
        }
        let check_deadline = done.is_multiple_of(16);
        if check_deadline && limits.deadline.is_some_and(|d| started.elapsed() >= d) {
            stopped_at_deadline = done < target;
            break;
        }
    }
    let from = done - (done / 10).max(1).min(done);
    let (from_done, from_at) = marks.iter().rev().find(|(n, _)| *n <= from).copied().unwrap_or((0, started));
    let window_secs = from_at.elapsed().as_secs_f64().max(1e-9);
    Ok(Driven {
        inserts: done,
        stopped_at_deadline,
        tail_ops_per_sec: (done - from_done) as f64 / window_secs,
    })
}

/// A block of incompressible-looking bytes (content does not matter to any of the three, but
/// zeros could be special-cased by a filesystem).
fn pattern_block(seed: u64) -> Vec<u8> {
    let mut rng = SplitMix::new(seed ^ 0x5eed);
    (0..BLOCK_BYTES / 8).flat_map(|_| rng.next_u64().to_le_bytes()).collect()
}

/// FlexFile `FLEXFILE_NAME` in `dir` (created empty; an existing one is replaced), buffered I/O,
/// default options but room for twice the data; closed (synced, tree committed) at the end.
pub fn flexfile_random_insert(dir: &Path, limits: InsertLimits, seed: u64) -> Result<InsertRun> {
    for ext in ["data", "tree", "log"] {
        remove_if_present(&dir.join(format!("{FLEXFILE_NAME}.{ext}")))?;
    }
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::open_dir(dir, true)?);
    let opts = FlexFileOptions {
        max_data_bytes: (limits.total_bytes * 2).max(1 << 30),
        ..FlexFileOptions::default()
    };
    let file = FlexFile::open(storage.clone(), FLEXFILE_NAME, opts)?;
    let (storage_before, process_before) = (storage.io_stats().bytes_written, super::process_write_bytes());
    let started = Instant::now();
    let driven = drive(limits, seed, |offset, block| file.insert(offset, block))?;
    file.close()?;
    Ok(InsertRun {
        target_inserts: limits.target_inserts(),
        inserts: driven.inserts,
        secs: started.elapsed().as_secs_f64(),
        file_bytes: file.len(),
        storage_bytes_written: Some(storage.io_stats().bytes_written - storage_before),
        process_write_bytes: super::process_write_bytes() - process_before,
        tail_ops_per_sec: driven.tail_ops_per_sec,
        stopped_at_deadline: driven.stopped_at_deadline,
    })
}

/// The filesystem's insert-range on `FS_INSERT_FILE_NAME` in `dir` (buffered writes, one
/// `fsync` at the end, as the paper's INSERT test). Probes first, so a filesystem without
/// insert-range yields `Refused` instead of a number.
pub fn fs_random_insert(dir: &Path, limits: InsertLimits, seed: u64) -> Result<FsInsertOutcome> {
    if let Err(error) = probe_insert_range(dir) {
        return Ok(FsInsertOutcome::Refused { error });
    }
    let path = dir.join(FS_INSERT_FILE_NAME);
    let file = create_truncated(&path)?;
    let process_before = super::process_write_bytes();
    let started = Instant::now();
    let mut len_bytes = 0u64;
    let driven = drive(limits, seed, |offset, block| {
        // Insert-range must leave at least one block after it: an append is a plain write.
        if offset < len_bytes {
            insert_range(&file, offset, BLOCK_BYTES)
                .map_err(|e| Error::io(format!("insert-range at {offset} in {}", path.display()), e))?;
        }
        file.write_all_at(block, offset).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        len_bytes += BLOCK_BYTES;
        Ok(())
    })?;
    file.sync_all().map_err(|e| Error::io(format!("syncing {}", path.display()), e))?;
    let secs = started.elapsed().as_secs_f64();
    let file_bytes = file.metadata().map_err(|e| Error::io(format!("stat {}", path.display()), e))?.len();
    Ok(FsInsertOutcome::Measured(InsertRun {
        target_inserts: limits.target_inserts(),
        inserts: driven.inserts,
        secs,
        file_bytes,
        storage_bytes_written: None,
        process_write_bytes: super::process_write_bytes() - process_before,
        tail_ops_per_sec: driven.tail_ops_per_sec,
        stopped_at_deadline: driven.stopped_at_deadline,
    }))
}

/// Inserts a block at the front of a two-block file; the error text when the filesystem refuses.
fn probe_insert_range(dir: &Path) -> std::result::Result<(), String> {
    let path = dir.join("insert-range-probe.dat");
    let outcome = create_truncated(&path).map_err(|e| e.to_string()).and_then(|file| {
        file.write_all_at(&[1u8; 2 * BLOCK_BYTES as usize], 0).map_err(|e| e.to_string())?;
        insert_range(&file, 0, BLOCK_BYTES).map_err(|e| format!("fallocate(FALLOC_FL_INSERT_RANGE): {e}"))
    });
    let _ = std::fs::remove_file(&path);
    outcome
}

fn insert_range(file: &File, offset: u64, len_bytes: u64) -> std::io::Result<()> {
    let (offset, len) = (i64::try_from(offset), i64::try_from(len_bytes));
    let (Ok(offset), Ok(len)) = (offset, len) else {
        return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
    };
    // SAFETY: a plain syscall on a descriptor `file` keeps open; no memory is passed.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_INSERT_RANGE, offset, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A plain file on which every insert reads the tail after the offset and writes it back one
/// block later (O(N) bytes per insert); `storage_bytes_written` counts the bytes written.
pub fn rewrite_random_insert(dir: &Path, limits: InsertLimits, seed: u64) -> Result<InsertRun> {
    let path = dir.join(REWRITE_FILE_NAME);
    let file = create_truncated(&path)?;
    let io_err = |what: &str, e| Error::io(format!("{what} {}", path.display()), e);
    let process_before = super::process_write_bytes();
    let started = Instant::now();
    let (mut len_bytes, mut written_bytes, mut tail) = (0u64, 0u64, Vec::new());
    let driven = drive(limits, seed, |offset, block| {
        tail.resize((len_bytes - offset) as usize, 0);
        file.read_exact_at(&mut tail, offset).map_err(|e| io_err("reading", e))?;
        file.write_all_at(block, offset).map_err(|e| io_err("writing", e))?;
        file.write_all_at(&tail, offset + BLOCK_BYTES).map_err(|e| io_err("writing", e))?;
        written_bytes += BLOCK_BYTES + tail.len() as u64;
        len_bytes += BLOCK_BYTES;
        Ok(())
    })?;
    file.sync_all().map_err(|e| io_err("syncing", e))?;
    let secs = started.elapsed().as_secs_f64();
    Ok(InsertRun {
        target_inserts: limits.target_inserts(),
        inserts: driven.inserts,
        secs,
        file_bytes: file.metadata().map_err(|e| io_err("stat", e))?.len(),
        storage_bytes_written: Some(written_bytes),
        process_write_bytes: super::process_write_bytes() - process_before,
        tail_ops_per_sec: driven.tail_ops_per_sec,
        stopped_at_deadline: driven.stopped_at_deadline,
    })
}

fn create_truncated(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| Error::io(format!("creating {}", path.display()), e))
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io(format!("removing {}", path.display()), e))
        }
        _ => Ok(()),
    }
}

/// The filesystem holding `dir`, by its statfs magic ("ext4" for ext2/3/4, "XFS", "tmpfs", …).
pub fn filesystem_name(dir: &Path) -> String {
    let Ok(path) = CString::new(dir.as_os_str().as_bytes()) else {
        return "unknown (path has a NUL byte)".into();
    };
    // SAFETY: statfs writes only into `buf`, a properly sized, initialised statfs struct.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and outlives the call; `buf` is a valid out-pointer.
    if unsafe { libc::statfs(path.as_ptr(), &mut buf) } != 0 {
        return format!("unknown ({})", std::io::Error::last_os_error());
    }
    // f_type is a signed long on glibc; the magics are positive 32-bit values.
    let magic = buf.f_type as u64;
    match magic {
        0xEF53 => "ext4".into(),
        0x5846_5342 => "XFS".into(),
        0x9123_683E => "Btrfs".into(),
        0xF2F5_2010 => "F2FS".into(),
        0x0102_1994 => "tmpfs".into(),
        0x794C_7630 => "overlayfs".into(),
        0x6969 => "NFS".into(),
        other => format!("filesystem magic {other:#x}"),
    }
}
