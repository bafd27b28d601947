//! In-memory storage: every write is immediately "durable"; nothing survives the process.
//! The fast backend for tests that do not simulate crashes (use `SimStorage` for those).

use std::collections::{BTreeMap, HashSet};
use std::io;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_core::{Error, IoStats, Result};

use crate::{check_name, Counters, OpenOptions, Storage, StorageFile, StorageLock};

type FileData = Arc<RwLock<Vec<u8>>>;

/// In-memory storage. Cloning shares the same files.
#[derive(Clone, Debug, Default)]
pub struct MemStorage {
    inner: Arc<MemInner>,
}

#[derive(Debug, Default)]
struct MemInner {
    files: Mutex<BTreeMap<String, FileData>>,
    locks: Arc<Mutex<HashSet<String>>>,
    counters: Arc<Counters>,
}

impl MemStorage {
    pub fn new() -> Self {
        Self::default()
    }
}

fn not_found(name: &str) -> Error {
    Error::io(format!("opening {name}"), io::Error::new(io::ErrorKind::NotFound, "no such file"))
}

impl Storage for MemStorage {
    fn open(&self, name: &str, opts: OpenOptions) -> Result<Arc<dyn StorageFile>> {
        check_name(name)?;
        let mut files = self.inner.files.lock();
        let data = match files.get(name) {
            Some(d) => d.clone(),
            None if opts.create => files.entry(name.to_string()).or_default().clone(),
            None => return Err(not_found(name)),
        };
        Ok(Arc::new(MemFile { name: name.to_string(), data, counters: self.inner.counters.clone() }))
    }

    fn exists(&self, name: &str) -> Result<bool> {
        check_name(name)?;
        Ok(self.inner.files.lock().contains_key(name))
    }

    fn remove(&self, name: &str) -> Result<()> {
        check_name(name)?;
        match self.inner.files.lock().remove(name) {
            Some(_) => Ok(()),
            None => Err(not_found(name)),
        }
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        check_name(from)?;
        check_name(to)?;
        let mut files = self.inner.files.lock();
        let data = files.remove(from).ok_or_else(|| not_found(from))?;
        files.insert(to.to_string(), data);
        Ok(())
    }

    fn list(&self) -> Result<Vec<String>> {
        Ok(self.inner.files.lock().keys().cloned().collect())
    }

    fn sync_dir(&self) -> Result<()> {
        self.inner.counters.on_sync();
        Ok(())
    }

    fn lock(&self, name: &str) -> Result<Box<dyn StorageLock>> {
        check_name(name)?;
        if !self.inner.locks.lock().insert(name.to_string()) {
            return Err(Error::Locked(format!("mem:{name}")));
        }
        Ok(Box::new(MemLock { name: name.to_string(), locks: self.inner.locks.clone() }))
    }

    fn io_stats(&self) -> IoStats {
        self.inner.counters.snapshot()
    }

    fn location(&self) -> String {
        "mem:".to_string()
    }
}

#[derive(Debug)]
struct MemLock {
    name: String,
    locks: Arc<Mutex<HashSet<String>>>,
}

impl StorageLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        self.locks.lock().remove(&self.name);
    }
}

#[derive(Debug)]
struct MemFile {
    name: String,
    data: FileData,
    counters: Arc<Counters>,
}

impl StorageFile for MemFile {
    fn name(&self) -> &str {
        &self.name
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        read_bytes_at(&self.name, &self.data.read(), offset, buf)?;
        self.counters.on_read(buf.len());
        Ok(())
    }

    fn write_at(&self, offset: u64, src: &[u8]) -> Result<()> {
        let start = usize::try_from(offset).map_err(|_| Error::invalid("offset too large"))?;
        let end = start + src.len();
        let mut data = self.data.write();
        if data.len() < end {
            data.resize(end, 0);
        }
        data[start..end].copy_from_slice(src);
        self.counters.on_write(src.len());
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.counters.on_sync();
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        Ok(self.data.read().len() as u64)
    }

    fn set_len(&self, len_bytes: u64) -> Result<()> {
        let len = usize::try_from(len_bytes).map_err(|_| Error::invalid("length too large"))?;
        self.data.write().resize(len, 0);
        Ok(())
    }

    fn allocate(&self, len_bytes: u64) -> Result<()> {
        let len = usize::try_from(len_bytes).map_err(|_| Error::invalid("length too large"))?;
        let mut data = self.data.write();
        if data.len() < len {
            data.resize(len, 0);
        }
        Ok(())
    }

    fn punch_hole(&self, offset: u64, len_bytes: u64) -> Result<()> {
        let mut data = self.data.write();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(data.len());
        let end = usize::try_from(offset.saturating_add(len_bytes)).unwrap_or(usize::MAX).min(data.len());
        if let Some(range) = data.get_mut(start..end) {
            range.fill(0);
        }
        Ok(())
    }
}

/// `buf.len()` bytes at `offset` of `data`, the contents of the in-memory file `name`; reading
/// past the end is an `Error::Io` of kind `UnexpectedEof`, as from a file.
pub(crate) fn read_bytes_at(name: &str, data: &[u8], offset: u64, buf: &mut [u8]) -> Result<()> {
    let src = usize::try_from(offset)
        .ok()
        .and_then(|start| data.get(start..start.checked_add(buf.len())?))
        .ok_or_else(|| {
        Error::io(
            format!("reading {} bytes at offset {offset} of {name}", buf.len()),
            io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of file"),
        )
    })?;
    buf.copy_from_slice(src);
    Ok(())
}
