//! A storage wrapper that runs a hook before every file sync: slow disks, counted syncs and power
//! losses in the middle of an fdatasync, for tests of anything that groups or orders syncs.

use std::fmt;
use std::sync::Arc;

use strata_core::{IoStats, Result};

use crate::{OpenOptions, Storage, StorageFile, StorageLock};

/// Called with the file's name before each `StorageFile::sync`; an `Err` is returned instead of
/// syncing.
pub type SyncHook = Arc<dyn Fn(&str) -> Result<()> + Send + Sync>;

/// Forwards everything to `inner`, except that every file sync runs the hook: before the sync
/// (`new`; an `Err` is returned instead of syncing) or after a successful one (`after`; an `Err`
/// is returned although the sync took effect, and a delay there models a sync that returns late).
#[derive(Clone)]
pub struct SyncHookStorage {
    inner: Arc<dyn Storage>,
    hook: SyncHook,
    after: bool,
}

impl SyncHookStorage {
    pub fn new(inner: Arc<dyn Storage>, hook: SyncHook) -> Self {
        SyncHookStorage { inner, hook, after: false }
    }

    /// The hook runs after each successful file sync instead of before it.
    pub fn after(inner: Arc<dyn Storage>, hook: SyncHook) -> Self {
        SyncHookStorage { inner, hook, after: true }
    }
}

impl fmt::Debug for SyncHookStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncHookStorage").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl Storage for SyncHookStorage {
    fn open(&self, name: &str, opts: OpenOptions) -> Result<Arc<dyn StorageFile>> {
        let inner = self.inner.open(name, opts)?;
        Ok(Arc::new(SyncHookFile { inner, hook: self.hook.clone(), after: self.after }))
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
        format!("sync-hook:{}", self.inner.location())
    }
}

struct SyncHookFile {
    inner: Arc<dyn StorageFile>,
    hook: SyncHook,
    after: bool,
}

impl fmt::Debug for SyncHookFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncHookFile").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl StorageFile for SyncHookFile {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.inner.write_at(offset, data)
    }
    fn sync(&self) -> Result<()> {
        if self.after {
            self.inner.sync()?;
            return (self.hook)(self.inner.name());
        }
        (self.hook)(self.inner.name())?;
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
        let storage = SyncHookStorage::new(Arc::new(MemStorage::new()), hook);
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
        let storage = SyncHookStorage::after(Arc::new(inner), hook);
        let file = storage.open("f", OpenOptions::create()).unwrap();
        storage.sync_dir().unwrap(); // the name is durable; the data not yet
        file.write_at(0, b"abcd").unwrap();
        file.sync().unwrap();
        assert_eq!(seen_durable.load(Ordering::SeqCst), 4, "the hook saw the synced bytes");
    }
}
