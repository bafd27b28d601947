//! Strata's storage layer. All engine I/O goes through [`Storage`] (a flat directory of named
//! files) and [`StorageFile`] (positional reads and writes on one file). Backends:
//! - [`FileStorage`]: real files in a directory, buffered or O_DIRECT;
//! - [`MemStorage`]: in memory, every write immediately "durable" — fast tests;
//! - [`SimStorage`]: in memory, seeded; tracks written vs durable bytes, crashes, injects faults.
//!
//! [`BytesFile`] is one read-only file over bytes in memory, outside any storage.
//!
//! Every backend counts bytes and operations ([`IoStats`]).

mod bytes_file;
mod counters;
mod file;
mod hook_storage;
mod mem;
mod sim;

use std::fmt::Debug;
use std::sync::Arc;

pub use bytes_file::BytesFile;
pub use counters::Counters;
pub use file::{direct_read_alignment_of, AlignedBuf, FileStorage, DIRECT_IO_ALIGNMENT_BYTES};
pub use hook_storage::{HookStorage, ReadHook, SyncHook, WriteHook};
pub use mem::MemStorage;
pub use sim::{CrashMode, Fault, FaultKind, SimStorage};
pub use strata_core::IoStats;
use strata_core::{Error, Result};

/// How to open a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct OpenOptions {
    /// Create the file if it does not exist.
    pub create: bool,
    /// Bypass the OS page cache (O_DIRECT). Writes must then be aligned to
    /// [`DIRECT_IO_ALIGNMENT_BYTES`] in offset and length; reads may be unaligned (the backend
    /// bounces them through an aligned buffer). Backends without a page cache ignore the flag.
    pub direct: bool,
}

impl OpenOptions {
    pub fn existing() -> Self {
        OpenOptions { create: false, direct: false }
    }
    pub fn create() -> Self {
        OpenOptions { create: true, direct: false }
    }
    pub fn with_direct(mut self, direct: bool) -> Self {
        self.direct = direct;
        self
    }
}

/// A flat directory of named files. Names are plain file names: no `/`, not empty, not `.`/`..`.
///
/// Durability model (the one `SimStorage` enforces): file contents are durable after
/// [`StorageFile::sync`]; creating, removing and renaming files is durable after
/// [`Storage::sync_dir`].
pub trait Storage: Send + Sync + Debug {
    /// Opens (and with `opts.create`, creates) a file. Missing file without `create` is an
    /// `Error::Io` of kind `NotFound`.
    fn open(&self, name: &str, opts: OpenOptions) -> Result<Arc<dyn StorageFile>>;
    fn exists(&self, name: &str) -> Result<bool>;
    fn remove(&self, name: &str) -> Result<()>;
    /// Atomically replaces `to` (if present) with `from`.
    fn rename(&self, from: &str, to: &str) -> Result<()>;
    /// File names, sorted.
    fn list(&self) -> Result<Vec<String>>;
    /// Makes creations, removals and renames durable.
    fn sync_dir(&self) -> Result<()>;
    /// Takes an exclusive lock named `name`; `Error::Locked` if anyone (this process included)
    /// holds it. The lock is released when the guard drops (or the process dies).
    fn lock(&self, name: &str) -> Result<Box<dyn StorageLock>>;
    /// Counters over all files of this storage since it was created.
    fn io_stats(&self) -> IoStats;
    /// Where this storage lives, for error messages (a path, or `mem:`/`sim:`).
    fn location(&self) -> String;
}

/// One open file. Shared between threads; positional I/O needs no seek state.
pub trait StorageFile: Send + Sync + Debug {
    fn name(&self) -> &str;
    /// Reads exactly `buf.len()` bytes at `offset`; reading past the end is an `Error::Io` of kind
    /// `UnexpectedEof`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()>;
    /// fdatasync: contents written so far become durable.
    fn sync(&self) -> Result<()>;
    fn len(&self) -> Result<u64>;
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Truncates or extends (with zeros).
    fn set_len(&self, len_bytes: u64) -> Result<()>;
    /// Reserves disk space up to `len_bytes` (fallocate) so later writes below it need no
    /// allocation; extends the file with zeros if it is shorter. Never shrinks.
    fn allocate(&self, len_bytes: u64) -> Result<()>;
    /// Gives the blocks of `offset .. offset + len_bytes` (clipped to the file's length) back
    /// to the file system: the range then reads as zeros, or keeps its bytes where the file
    /// system cannot punch holes. The length never changes. Not durable until a `sync`: after a
    /// crash the range holds either. For space the caller no longer references.
    fn punch_hole(&self, offset: u64, len_bytes: u64) -> Result<()>;
}

/// Held while a directory lock is taken.
pub trait StorageLock: Send + Sync + Debug {}

/// Checks a file name for the flat namespace.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(Error::invalid(format!("invalid storage file name {name:?}")));
    }
    Ok(())
}

/// Reads the whole file.
pub fn read_all(file: &dyn StorageFile) -> Result<Vec<u8>> {
    let len = usize::try_from(file.len()?)
        .map_err(|_| Error::invalid(format!("{} is too large to read into memory", file.name())))?;
    let mut buf = vec![0u8; len];
    file.read_at(0, &mut buf)?;
    Ok(buf)
}

/// Writes `data` to `name` via a temporary file, syncs it, renames it into place and syncs the
/// directory: after return the new contents are durable and a crash never leaves a partial file.
pub fn write_file_atomic(storage: &dyn Storage, name: &str, data: &[u8]) -> Result<()> {
    let tmp = format!("{name}.tmp");
    if storage.exists(&tmp)? {
        storage.remove(&tmp)?;
    }
    let file = storage.open(&tmp, OpenOptions::create())?;
    file.write_at(0, data)?;
    file.sync()?;
    drop(file);
    storage.rename(&tmp, name)?;
    storage.sync_dir()
}

/// Sum of the lengths of every file in `storage` (0 for files that vanish while counting).
/// What engines report as `Stats::disk_bytes`.
pub fn total_file_bytes(storage: &dyn Storage) -> u64 {
    let Ok(names) = storage.list() else { return 0 };
    names
        .iter()
        .filter_map(|n| storage.open(n, OpenOptions::existing()).ok())
        .filter_map(|f| f.len().ok())
        .sum()
}
