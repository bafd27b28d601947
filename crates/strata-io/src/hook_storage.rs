//! A storage wrapper that runs hooks on file syncs, writes and reads: slow disks, counted syncs and
//! power losses in the middle of an fdatasync, for tests of anything that groups or orders syncs;
//! a write or sync held (and then failed) while another thread looks, for tests of what is
//! visible while a write is in flight; read sizes, for tests of anything that must read in
//! bounded pieces.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use strata_core::{IoStats, Result};

use crate::{OpenOptions, Storage, StorageFile, StorageLock};

/// Called with the file's name before each `StorageFile::sync`; an `Err` is returned instead of
/// syncing.
pub type SyncHook = Arc<dyn Fn(&str) -> Result<()> + Send + Sync>;

/// Called with the file's name, the offset and the length before each `StorageFile::write_at`; an
/// `Err` is returned instead of writing (nothing is written).
pub type WriteHook = Arc<dyn Fn(&str, u64, usize) -> Result<()> + Send + Sync>;

/// Called with the file's name, the offset and the length before each `StorageFile::read_at`; an
/// `Err` is returned instead of reading (a bad sector).
pub type ReadHook = Arc<dyn Fn(&str, u64, usize) -> Result<()> + Send + Sync>;

/// Forwards everything to `inner`, except that every file sync runs the sync hook: before the
/// sync (`new`; an `Err` is returned instead of syncing) or after a successful one (`after`; an
/// `Err` is returned although the sync took effect, and a delay there models a sync that returns
/// late); every file write runs the write hook (`with_writes`; an `Err` is returned instead of
/// writing); and every file read runs the read hook (`reads`; an `Err` is returned instead of
/// reading).
#[derive(Clone)]
pub struct HookStorage {
    inner: Arc<dyn Storage>,
    hooks: Hooks,
}

#[derive(Clone)]
struct Hooks {
    sync: Option<SyncHook>,
    sync_after: bool,
    write: Option<WriteHook>,
    read: Option<ReadHook>,
}

impl HookStorage {
    pub fn new(inner: Arc<dyn Storage>, hook: SyncHook) -> Self {
        HookStorage { inner, hooks: Hooks { sync: Some(hook), sync_after: false, write: None, read: None } }
    }

    /// The hook runs after each successful file sync instead of before it.
    pub fn after(inner: Arc<dyn Storage>, hook: SyncHook) -> Self {
        HookStorage { inner, hooks: Hooks { sync: Some(hook), sync_after: true, write: None, read: None } }
    }

    /// Only reads run a hook.
    pub fn reads(inner: Arc<dyn Storage>, hook: ReadHook) -> Self {
        HookStorage { inner, hooks: Hooks { sync: None, sync_after: false, write: None, read: Some(hook) } }
    }

    /// Every file write also runs `hook` first (files opened from the returned storage).
    pub fn with_writes(mut self, hook: WriteHook) -> Self {
        self.hooks.write = Some(hook);
        self
    }

    /// Reads raise the returned counter to the longest single read's length (bytes), for tests
    /// of anything that must read in bounded pieces; store 0 in it to forget earlier reads.
    pub fn recording_longest_read(inner: Arc<dyn Storage>) -> (Self, Arc<AtomicUsize>) {
        let longest = Arc::new(AtomicUsize::new(0));
        let seen = longest.clone();
        let hook: ReadHook = Arc::new(move |_, _, len| {
            seen.fetch_max(len, Ordering::Relaxed);
            Ok(())
        });
        (HookStorage::reads(inner, hook), longest)
    }
}

impl fmt::Debug for HookStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookStorage").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl Storage for HookStorage {
    fn open(&self, name: &str, opts: OpenOptions) -> Result<Arc<dyn StorageFile>> {
        let inner = self.inner.open(name, opts)?;
        Ok(Arc::new(HookFile { inner, hooks: self.hooks.clone() }))
    }
    fn exists(&self, name: &str) -> Result<bool> {
        self.inner.exists(name)
    }
    fn remove(&self, name: &str) -> Result<()> {
        self.inner.remove(name)
    }
    fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn list(&self) -> Result<Vec<String>> {
        self.inner.list()
    }
    fn sync_dir(&self) -> Result<()> {
        self.inner.sync_dir()
    }
    fn lock(&self, name: &str) -> Result<Box<dyn StorageLock>> {
        self.inner.lock(name)
    }
    fn io_stats(&self) -> IoStats {
        self.inner.io_stats()
    }
    fn location(&self) -> String {
        format!("hooked:{}", self.inner.location())
    }
}

struct HookFile {
    inner: Arc<dyn StorageFile>,
    hooks: Hooks,
}

impl fmt::Debug for HookFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookFile").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl StorageFile for HookFile {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if let Some(hook) = &self.hooks.read {
            hook(self.inner.name(), offset, buf.len())?;
        }
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        if let Some(hook) = &self.hooks.write {
            hook(self.inner.name(), offset, data.len())?;
        }
        self.inner.write_at(offset, data)
    }
    fn sync(&self) -> Result<()> {
        let Some(hook) = &self.hooks.sync else { return self.inner.sync() };
        if self.hooks.sync_after {
            self.inner.sync()?;
            return hook(self.inner.name());
        }
        hook(self.inner.name())?;
        self.inner.sync()
    }
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len_bytes: u64) -> Result<()> {
        self.inner.set_len(len_bytes)
    }
    fn allocate(&self, len_bytes: u64) -> Result<()> {
        self.inner.allocate(len_bytes)
    }
    fn punch_hole(&self, offset: u64, len_bytes: u64) -> Result<()> {
        self.inner.punch_hole(offset, len_bytes)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::MemStorage;

    #[test]
    fn the_hook_runs_before_each_file_sync_and_can_fail_it() {
        let syncs = Arc::new(AtomicU64::new(0));
        let counted = syncs.clone();
        let hook: SyncHook = Arc::new(move |name| {
            if counted.fetch_add(1, Ordering::SeqCst) == 1 {
                return Err(strata_core::Error::invalid(format!("refusing to sync {name}")));
            }
            Ok(())
        });
        let storage = HookStorage::new(Arc::new(MemStorage::new()), hook);
        let file = storage.open("f", OpenOptions::create()).unwrap();
        file.write_at(0, b"abc").unwrap();
        file.sync().unwrap();
        let err = file.sync().unwrap_err();
        assert!(err.to_string().contains("refusing to sync f"), "{err}");
        storage.sync_dir().unwrap();
        assert_eq!(syncs.load(Ordering::SeqCst), 2, "directory syncs do not run the hook");
    }

    #[test]
    fn an_after_hook_runs_only_once_the_sync_took_effect() {
        let inner = crate::SimStorage::new(7);
        let seen_durable = Arc::new(AtomicU64::new(0));
        let (sim, seen) = (inner.clone(), seen_durable.clone());
        let hook: SyncHook = Arc::new(move |name| {
            seen.store(sim.durable_contents(name).map_or(0, |c| c.len() as u64), Ordering::SeqCst);
            Ok(())
        });
        let storage = HookStorage::after(Arc::new(inner), hook);
        let file = storage.open("f", OpenOptions::create()).unwrap();
        storage.sync_dir().unwrap(); // the name is durable; the data not yet
        file.write_at(0, b"abcd").unwrap();
        file.sync().unwrap();
        assert_eq!(seen_durable.load(Ordering::SeqCst), 4, "the hook saw the synced bytes");
    }

    #[test]
    fn the_write_hook_runs_before_each_write_and_can_fail_it() {
        let writes = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let seen = writes.clone();
        let write_hook: WriteHook = Arc::new(move |name, offset, len| {
            seen.lock().push((name.to_string(), offset, len));
            match offset {
                0 => Ok(()),
                _ => Err(strata_core::Error::invalid(format!("refusing to write {name} at {offset}"))),
            }
        });
        let inner = MemStorage::new();
        let storage = HookStorage::new(Arc::new(inner.clone()), Arc::new(|_| Ok(()))).with_writes(write_hook);
        let file = storage.open("f", OpenOptions::create()).unwrap();
        file.write_at(0, b"abc").unwrap();
        let err = file.write_at(3, b"def").unwrap_err();
        assert!(err.to_string().contains("refusing to write f at 3"), "{err}");
        assert_eq!(file.len().unwrap(), 3, "the refused write wrote nothing");
        assert_eq!(*writes.lock(), [("f".to_string(), 0, 3), ("f".to_string(), 3, 3)]);
    }

    #[test]
    fn the_read_hook_sees_every_read_and_syncs_pass_through() {
        let reads = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let seen = reads.clone();
        let hook: ReadHook = Arc::new(move |name, offset, len| {
            seen.lock().push((name.to_string(), offset, len));
            Ok(())
        });
        let storage = HookStorage::reads(Arc::new(MemStorage::new()), hook);
        let file = storage.open("f", OpenOptions::create()).unwrap();
        file.write_at(0, b"abcdef").unwrap();
        file.sync().unwrap();
        let mut buf = [0u8; 4];
        file.read_at(2, &mut buf).unwrap();
        assert_eq!(&buf, b"cdef");
        assert!(file.read_at(4, &mut buf).is_err(), "past the end");
        assert_eq!(*reads.lock(), [("f".to_string(), 2, 4), ("f".to_string(), 4, 4)]);
    }
}
