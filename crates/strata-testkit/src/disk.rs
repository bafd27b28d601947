//! Facts about the real file system a test's directory is on.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use strata_io::{FileStorage, OpenOptions, Storage};

/// Disk blocks allocated to the file `name` in `dir` (not its length).
pub fn allocated_bytes(dir: &Path, name: &str) -> u64 {
    std::fs::metadata(dir.join(name)).map_or(0, |m| m.blocks() * 512)
}

/// Whether `dir`'s file system gives punched ranges' blocks back (`StorageFile::punch_hole`):
/// a 1 MiB file written, synced and punched whole must hold less than 1 MiB afterwards. Tests
/// of holes have nothing to check where it does not.
pub fn punches_holes(dir: &Path) -> bool {
    let storage = FileStorage::open_dir(dir, false).expect("open the probe's directory");
    let probe = storage.open("punch-probe", OpenOptions::create()).expect("create the probe");
    probe.write_at(0, &vec![1u8; 1 << 20]).expect("write the probe");
    probe.sync().expect("sync the probe");
    probe.punch_hole(0, 1 << 20).expect("punch the probe");
    let punched = allocated_bytes(dir, "punch-probe") < 1 << 20;
    drop(probe);
    let _ = storage.remove("punch-probe");
    punched
}
