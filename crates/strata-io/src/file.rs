//! Real files in one directory, buffered or O_DIRECT.
//!
//! O_DIRECT fallback: some filesystems (tmpfs, some overlay and FUSE mounts) reject `O_DIRECT` at
//! open time with EINVAL. Such a file is then opened buffered and behaves exactly like a file
//! opened without `direct` (no alignment rules); [`FileStorage::direct_io_fallbacks`] counts how
//! often that happened, so a benchmark can tell the page cache was not bypassed.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

mod aligned;

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

pub use aligned::{AlignedBuf, DIRECT_IO_ALIGNMENT_BYTES};
use strata_core::{Error, IoStats, Result};

use crate::{check_name, Counters, OpenOptions, Storage, StorageFile, StorageLock};

const ALIGNMENT_BYTES_U64: u64 = DIRECT_IO_ALIGNMENT_BYTES as u64;

/// Real files in one directory. Cloning shares the directory and the counters.
#[derive(Clone, Debug)]
pub struct FileStorage {
    inner: Arc<DirInner>,
}

#[derive(Debug)]
struct DirInner {
    /// Absolute, so every error message names the full path.
    dir: PathBuf,
    /// `dir` with symlinks resolved (the lock registry's keys), on first use.
    canonical_dir: std::sync::OnceLock<PathBuf>,
    counters: Arc<Counters>,
    direct_io_fallbacks: AtomicU64,
}

fn os_error(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

impl FileStorage {
    /// Opens the directory `path`; with `create`, creates it (and missing parents) first.
    pub fn open_dir(path: impl AsRef<Path>, create: bool) -> Result<FileStorage> {
        let given = path.as_ref();
        let dir = std::path::absolute(given)
            .map_err(|e| Error::io(format!("resolving the directory path {}", given.display()), e))?;
        if create && !dir.exists() {
            fs::create_dir_all(&dir)
                .map_err(|e| Error::io(format!("creating directory {}", dir.display()), e))?;
            // The new directory entry is durable only once its parent is synced.
            if let Some(parent) = dir.parent() {
                sync_directory(parent)?;
            }
        }
        let meta = fs::metadata(&dir)
            .map_err(|e| Error::io(format!("opening storage directory {}", dir.display()), e))?;
        if !meta.is_dir() {
            return Err(Error::io(
                format!("opening storage directory {}", dir.display()),
                os_error(libc::ENOTDIR),
            ));
        }
        Ok(FileStorage {
            inner: Arc::new(DirInner {
                dir,
                canonical_dir: std::sync::OnceLock::new(),
                counters: Arc::new(Counters::default()),
                direct_io_fallbacks: AtomicU64::new(0),
            }),
        })
    }

    /// The directory (absolute).
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// How many `direct` opens fell back to buffered I/O because the filesystem rejected O_DIRECT.
    pub fn direct_io_fallbacks(&self) -> u64 {
        self.inner.direct_io_fallbacks.load(Relaxed)
    }

    fn file_path(&self, name: &str) -> Result<PathBuf> {
        check_name(name)?;
        Ok(self.inner.dir.join(name))
    }

    /// The lock registry's key of the file `name`: its path under the canonical directory.
    fn lock_key(&self, name: &str) -> Result<PathBuf> {
        if let Some(dir) = self.inner.canonical_dir.get() {
            return Ok(dir.join(name));
        }
        let dir = fs::canonicalize(&self.inner.dir)
            .map_err(|e| Error::io(format!("resolving {}", self.inner.dir.display()), e))?;
        Ok(self.inner.canonical_dir.get_or_init(|| dir).join(name))
    }

    /// Refuses to open a lock file this process holds: closing that second descriptor would drop
    /// the process's POSIX lock (`lock`), and another process could then open the store too
    /// (`total_file_bytes`, behind every engine's `Stats::disk_bytes`, opens every listed file,
    /// `LOCK` included).
    fn refuse_held_lock_file(&self, name: &str) -> Result<()> {
        if held_locks().is_empty() {
            return Ok(());
        }
        let key = self.lock_key(name)?;
        if held_locks().contains(&key) {
            return Err(Error::invalid(format!(
                "{} is a lock file this process holds: opening it would release the lock",
                key.display()
            )));
        }
        Ok(())
    }
}

fn sync_directory(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing directory {}", dir.display()), e))
}

fn open_file(path: &Path, create: bool, direct: bool) -> io::Result<File> {
    let mut options = fs::OpenOptions::new();
    options.read(true).write(true).create(create).truncate(false);
    #[cfg(target_os = "linux")]
    if direct {
        options.custom_flags(libc::O_DIRECT);
    }
    options.open(path)
}

impl Storage for FileStorage {
    fn open(&self, name: &str, opts: OpenOptions) -> Result<Arc<dyn StorageFile>> {
        let path = self.file_path(name)?;
        self.refuse_held_lock_file(name)?;
        // O_DIRECT exists only on Linux; elsewhere `direct` is ignored.
        let want_direct = opts.direct && cfg!(target_os = "linux");
        let opened = match open_file(&path, opts.create, want_direct) {
            Err(e) if want_direct && e.raw_os_error() == Some(libc::EINVAL) => {
                self.inner.direct_io_fallbacks.fetch_add(1, Relaxed);
                open_file(&path, opts.create, false).map(|file| (file, false))
            }
            other => other.map(|file| (file, want_direct)),
        };
        let (file, direct) = opened.map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let read_alignment_bytes =
            if direct { direct_read_alignment_bytes(&file) } else { ALIGNMENT_BYTES_U64 };
        Ok(Arc::new(FileHandle {
            name: name.to_string(),
            path,
            file,
            direct,
            read_alignment_bytes,
            counters: self.inner.counters.clone(),
        }))
    }

    fn exists(&self, name: &str) -> Result<bool> {
        let path = self.file_path(name)?;
        match fs::metadata(&path) {
            Ok(meta) => Ok(!meta.is_dir()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(format!("checking whether {} exists", path.display()), e)),
        }
    }

    fn remove(&self, name: &str) -> Result<()> {
        let path = self.file_path(name)?;
        fs::remove_file(&path).map_err(|e| Error::io(format!("removing {}", path.display()), e))
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (from_path, to_path) = (self.file_path(from)?, self.file_path(to)?);
        fs::rename(&from_path, &to_path)
            .map_err(|e| Error::io(format!("renaming {} to {}", from_path.display(), to_path.display()), e))
    }

    /// Regular files only; names that are not UTF-8 cannot be storage names and are skipped.
    fn list(&self) -> Result<Vec<String>> {
        let dir = &self.inner.dir;
        let context = || format!("listing directory {}", dir.display());
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| Error::io(context(), e))? {
            let entry = entry.map_err(|e| Error::io(context(), e))?;
            if entry.file_type().map_err(|e| Error::io(context(), e))?.is_dir() {
                continue;
            }
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort_unstable();
        Ok(names)
    }

    fn sync_dir(&self) -> Result<()> {
        sync_directory(&self.inner.dir)?;
        self.inner.counters.on_sync();
        Ok(())
    }

    /// An advisory POSIX record lock (`fcntl(F_SETLK)`) on the file `name` (created if missing),
    /// plus this process's own registry of held locks.
    ///
    /// Not `flock`: a flock belongs to the open file description, which every child process
    /// shares from `fork` until its `exec` closes the (close-on-exec) descriptor, so a thread
    /// spawning a process while another closed and reopened a store made the reopen fail with
    /// `Locked` (`lock_is_free_after_drop_while_a_child_is_being_spawned`). A POSIX lock belongs
    /// to the process and is not inherited. It does not exclude the same process, and closing
    /// any descriptor of the file drops it, hence the registry, checked before the file is
    /// opened.
    fn lock(&self, name: &str) -> Result<Box<dyn StorageLock>> {
        let path = self.file_path(name)?;
        let key = self.lock_key(name)?;
        if !held_locks().insert(key.clone()) {
            return Err(Error::Locked(path.display().to_string()));
        }
        // From here the registry entry is ours: `FileLock`'s drop (or this error path) removes it.
        let locked = open_file(&path, true, false)
            .map_err(|e| Error::io(format!("opening lock file {}", path.display()), e))
            .and_then(|file| lock_whole_file(&file, &path).map(|()| file));
        match locked {
            Ok(file) => Ok(Box::new(FileLock { path, key, file: Some(file) })),
            Err(e) => {
                held_locks().remove(&key);
                Err(e)
            }
        }
    }

    fn io_stats(&self) -> IoStats {
        self.inner.counters.snapshot()
    }

    fn location(&self) -> String {
        self.inner.dir.display().to_string()
    }
}

/// Lock files held by this process (canonical paths). A path is in it from before its file is
/// opened until after the file is closed, so no second descriptor of a held lock file is ever
/// opened (or closed, which would drop the process's POSIX lock) in this process.
fn held_locks() -> std::sync::MutexGuard<'static, std::collections::BTreeSet<PathBuf>> {
    static HELD: std::sync::Mutex<std::collections::BTreeSet<PathBuf>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    // Poisoning is impossible in practice (no code panics under it); the set stays valid anyway.
    HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `fcntl(F_SETLK)` of a write lock over the whole file; `Locked` when another process holds it.
fn lock_whole_file(file: &File, path: &Path) -> Result<()> {
    // SAFETY: an all-zero `struct flock` is valid (plain integers); the fields are set below.
    let mut request: libc::flock = unsafe { std::mem::zeroed() };
    request.l_type = libc::F_WRLCK as libc::c_short;
    request.l_whence = libc::SEEK_SET as libc::c_short;
    // l_start = l_len = 0: the whole file, however long it grows.
    loop {
        // SAFETY: the descriptor belongs to `file`, which outlives the call; `request` is a valid
        // `struct flock` that the kernel only reads for F_SETLK.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &request) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EACCES | libc::EAGAIN) => return Err(Error::Locked(path.display().to_string())),
            _ => return Err(Error::io(format!("locking {}", path.display()), err)),
        }
    }
}

/// Holds the POSIX lock; on drop, closing the file releases it, then the registry entry goes.
#[derive(Debug)]
struct FileLock {
    #[expect(dead_code, reason = "read only by Debug, to show which lock is held")]
    path: PathBuf,
    key: PathBuf,
    file: Option<File>,
}

impl StorageLock for FileLock {}

impl Drop for FileLock {
    fn drop(&mut self) {
        // Close first: were the entry removed while the file is open, another `lock` in this
        // process could take the lock and lose it again when this descriptor closes.
        drop(self.file.take());
        held_locks().remove(&self.key);
    }
}

#[derive(Debug)]
struct FileHandle {
    name: String,
    path: PathBuf,
    file: File,
    /// True only if O_DIRECT is really in effect (false after a fallback).
    direct: bool,
    /// Offset and length alignment of this file's O_DIRECT reads: what the file system reports
    /// (`direct_read_alignment_bytes`), at most [`DIRECT_IO_ALIGNMENT_BYTES`]. Writes keep that
    /// one, which the engines' formats are laid out for.
    read_alignment_bytes: u64,
    counters: Arc<Counters>,
}

/// The offset alignment O_DIRECT reads of `file` need: the file system's `STATX_DIOALIGN`
/// answer when it gives one from 512 to 4096 bytes (512 on this VM's ext4, whose device has
/// 512 B logical blocks), else [`DIRECT_IO_ALIGNMENT_BYTES`]. A record store reading a 200 B
/// record then moves 512 or 1,024 bytes from the device, not 4 KiB.
#[cfg(target_os = "linux")]
fn direct_read_alignment_bytes(file: &File) -> u64 {
    use std::os::fd::AsRawFd;
    // SAFETY: `statx` is plain old data; all-zero bytes are a valid value of it.
    let mut status: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open for the call's duration, the path is a valid empty C
    // string (`AT_EMPTY_PATH`: the descriptor itself), and `status` is a writable `statx`.
    let rc = unsafe {
        libc::statx(file.as_raw_fd(), c"".as_ptr(), libc::AT_EMPTY_PATH, libc::STATX_DIOALIGN, &mut status)
    };
    let reported = u64::from(status.stx_dio_offset_align);
    let usable = (512..=ALIGNMENT_BYTES_U64).contains(&reported) && reported.is_power_of_two();
    if rc == 0 && status.stx_mask & libc::STATX_DIOALIGN != 0 && usable {
        reported
    } else {
        ALIGNMENT_BYTES_U64
    }
}

#[cfg(not(target_os = "linux"))]
fn direct_read_alignment_bytes(_file: &File) -> u64 {
    ALIGNMENT_BYTES_U64
}

/// The alignment O_DIRECT reads of the existing file at `path` use (see `FileStorage`): the
/// file system's, from 512 to 4096 bytes; `None` when the file cannot be opened for O_DIRECT.
pub fn direct_read_alignment_of(path: &Path) -> Option<u64> {
    let file = open_file(path, false, cfg!(target_os = "linux")).ok()?;
    Some(direct_read_alignment_bytes(&file))
}

// The alignment is a power of two, so a mask tests divisibility.
const _: () = assert!(DIRECT_IO_ALIGNMENT_BYTES.is_power_of_two());

fn is_aligned(value: u64) -> bool {
    value & (ALIGNMENT_BYTES_U64 - 1) == 0
}

fn is_aligned_address(bytes: &[u8]) -> bool {
    is_aligned(bytes.as_ptr() as usize as u64)
}

fn read_past_eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of file")
}

/// Reads into an aligned `buf` at an aligned `offset` until it is full or the file ends; returns
/// the bytes read. Under O_DIRECT a read covering EOF returns a short count that may not be a
/// multiple of the alignment; continuing at that unaligned offset would fail with EINVAL, so a
/// short unaligned count ends the read.
fn read_aligned_until_eof(
    file: &File,
    offset: u64,
    buf: &mut [u8],
    alignment_bytes: u64,
) -> io::Result<usize> {
    let mut done = 0;
    while let Some(rest) = buf.get_mut(done..).filter(|rest| !rest.is_empty()) {
        match file.read_at(rest, offset + done as u64) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                if !(done as u64).is_multiple_of(alignment_bytes) {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

impl FileHandle {
    fn read_direct(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let len_bytes = buf.len() as u64;
        let alignment = self.read_alignment_bytes;
        if offset.is_multiple_of(alignment) && len_bytes.is_multiple_of(alignment) && is_aligned_address(buf)
        {
            let got = read_aligned_until_eof(&self.file, offset, buf, alignment)?;
            return if got == buf.len() { Ok(()) } else { Err(read_past_eof()) };
        }
        // Bounce through an aligned buffer covering the aligned range around the request (the
        // buffer's memory is 4 KiB-aligned; only the span the alignment needs is read).
        let end = offset.checked_add(len_bytes).ok_or_else(read_past_eof)?;
        let aligned_start = offset - offset % alignment;
        let aligned_end = end.checked_next_multiple_of(alignment).ok_or_else(read_past_eof)?;
        let span_bytes = usize::try_from(aligned_end - aligned_start)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "read too large"))?;
        let mut bounce = AlignedBuf::new(span_bytes);
        let span = bounce.get_mut(..span_bytes).unwrap_or_default();
        let got = read_aligned_until_eof(&self.file, aligned_start, span, alignment)?;
        // Less than one alignment unit, so it fits in usize.
        let skip = (offset - aligned_start) as usize;
        let wanted = bounce.get(skip..skip + buf.len()).filter(|_| skip + buf.len() <= got);
        buf.copy_from_slice(wanted.ok_or_else(read_past_eof)?);
        Ok(())
    }

    fn write_direct(&self, offset: u64, data: &[u8]) -> Result<()> {
        if !is_aligned(offset) || !is_aligned(data.len() as u64) {
            return Err(Error::invalid(format!(
                "O_DIRECT write of {} bytes at offset {offset} of {}: offset and length must be \
                 multiples of {DIRECT_IO_ALIGNMENT_BYTES} bytes",
                data.len(),
                self.path.display()
            )));
        }
        let written = if is_aligned_address(data) {
            self.file.write_all_at(data, offset)
        } else {
            let mut bounce = AlignedBuf::new(data.len());
            bounce.copy_from_slice(data);
            self.file.write_all_at(&bounce, offset)
        };
        written.map_err(|e| self.write_error(offset, data.len(), e))
    }

    fn write_error(&self, offset: u64, len: usize, e: io::Error) -> Error {
        Error::io(format!("writing {len} bytes at offset {offset} of {}", self.path.display()), e)
    }

    fn current_len(&self) -> Result<u64> {
        let meta = self
            .file
            .metadata()
            .map_err(|e| Error::io(format!("reading the length of {}", self.path.display()), e))?;
        Ok(meta.len())
    }
}

impl StorageFile for FileHandle {
    fn name(&self) -> &str {
        &self.name
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let read =
            if self.direct { self.read_direct(offset, buf) } else { self.file.read_exact_at(buf, offset) };
        read.map_err(|e| {
            Error::io(format!("reading {} bytes at offset {offset} of {}", buf.len(), self.path.display()), e)
        })?;
        self.counters.on_read(buf.len());
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        if self.direct {
            self.write_direct(offset, data)?;
        } else {
            self.file.write_all_at(data, offset).map_err(|e| self.write_error(offset, data.len(), e))?;
        }
        self.counters.on_write(data.len());
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| Error::io(format!("syncing {}", self.path.display()), e))?;
        self.counters.on_sync();
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        self.current_len()
    }

    fn set_len(&self, len_bytes: u64) -> Result<()> {
        self.file.set_len(len_bytes).map_err(|e| {
            Error::io(format!("setting the length of {} to {len_bytes} bytes", self.path.display()), e)
        })
    }

    fn punch_hole(&self, offset: u64, len_bytes: u64) -> Result<()> {
        let end = offset.saturating_add(len_bytes).min(self.current_len()?);
        if offset >= end {
            return Ok(());
        }
        #[cfg(target_os = "linux")]
        {
            let context =
                || format!("punching {len_bytes} bytes at offset {offset} of {}", self.path.display());
            let (start, len) = match (libc::off_t::try_from(offset), libc::off_t::try_from(end - offset)) {
                (Ok(start), Ok(len)) => (start, len),
                _ => return Err(Error::invalid(format!("{}: does not fit in off_t", context()))),
            };
            let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
            loop {
                // SAFETY: the descriptor belongs to `self.file`, which outlives the call.
                let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), mode, start, len) };
                if rc == 0 {
                    return Ok(());
                }
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // The file system keeps the blocks: the range keeps its bytes.
                    Some(libc::EOPNOTSUPP) => return Ok(()),
                    _ => return Err(Error::io(context(), err)),
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        Ok(())
    }

    fn allocate(&self, len_bytes: u64) -> Result<()> {
        if len_bytes <= self.current_len()? {
            return Ok(());
        }
        let context = || format!("allocating {len_bytes} bytes for {}", self.path.display());
        #[cfg(target_os = "linux")]
        {
            let len = libc::off_t::try_from(len_bytes)
                .map_err(|_| Error::invalid(format!("{}: length does not fit in off_t", context())))?;
            loop {
                // SAFETY: the descriptor belongs to `self.file`, which outlives the call.
                // Mode 0 allocates the range and extends the file size.
                let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, 0, len) };
                if rc == 0 {
                    return Ok(());
                }
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EOPNOTSUPP) => break,
                    _ => return Err(Error::io(context(), err)),
                }
            }
        }
        // The filesystem cannot preallocate: extending the size is the best available.
        self.file.set_len(len_bytes).map_err(|e| Error::io(context(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_check() {
        assert!(is_aligned(0));
        assert!(is_aligned(8192));
        assert!(!is_aligned(4095));
        assert!(!is_aligned(4097));
    }

    /// Every storage reads a punched range as zeros (or its old bytes where holes are not
    /// supported), keeps the length, clips at the end; a real file gives the blocks back.
    #[test]
    fn punched_ranges_read_as_zeros_and_keep_the_length() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<(Arc<dyn StorageFile>, bool)> = vec![
            (
                FileStorage::open_dir(dir.path(), false).unwrap().open("f", OpenOptions::create()).unwrap(),
                true,
            ),
            (crate::MemStorage::new().open("f", OpenOptions::create()).unwrap(), false),
            (crate::SimStorage::new(1).open("f", OpenOptions::create()).unwrap(), false),
        ];
        for (file, real) in files {
            file.write_at(0, &vec![7u8; 64 << 10]).unwrap();
            file.sync().unwrap();
            file.punch_hole(16 << 10, 32 << 10).unwrap();
            file.punch_hole(60 << 10, 1 << 20).unwrap();
            assert_eq!(file.len().unwrap(), 64 << 10, "{}", file.name());
            let mut back = vec![0u8; 64 << 10];
            file.read_at(0, &mut back).unwrap();
            let punched = |i: usize| (16 << 10..48 << 10).contains(&i) || i >= 60 << 10;
            let zeros = back.iter().enumerate().filter(|&(i, &b)| punched(i) && b == 0).count();
            let kept = back.iter().enumerate().all(|(i, &b)| punched(i) || b == 7);
            assert!(kept, "bytes outside the holes changed");
            if real {
                let blocks = std::fs::metadata(dir.path().join("f")).unwrap().blocks() * 512;
                if blocks < 64 << 10 {
                    assert_eq!(zeros, 36 << 10, "a file system that punches reads zeros");
                }
            } else {
                assert_eq!(zeros, 36 << 10);
            }
        }
    }

    #[test]
    fn bounce_read_handles_short_last_block() {
        let dir = tempfile::tempdir().unwrap();
        let storage = FileStorage::open_dir(dir.path(), false).unwrap();
        let file = storage.open("f", OpenOptions::create().with_direct(true)).unwrap();
        let block: Vec<u8> = (0..DIRECT_IO_ALIGNMENT_BYTES * 2).map(|i| (i % 251) as u8).collect();
        file.write_at(0, &block).unwrap();
        file.set_len(5000).unwrap();
        let mut buf = vec![0u8; 4990];
        file.read_at(10, &mut buf).unwrap();
        assert_eq!(buf, &block[10..5000]);
        let mut past = vec![0u8; 20];
        let err = file.read_at(4990, &mut past).unwrap_err();
        assert!(matches!(&err, Error::Io { source, .. } if source.kind() == io::ErrorKind::UnexpectedEof));
        // An aligned read of a block that is only partly present is also EOF.
        let mut aligned = AlignedBuf::new(DIRECT_IO_ALIGNMENT_BYTES);
        let err = file.read_at(4096, &mut aligned).unwrap_err();
        assert!(matches!(&err, Error::Io { source, .. } if source.kind() == io::ErrorKind::UnexpectedEof));
    }
}
