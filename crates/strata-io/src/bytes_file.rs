//! A file over bytes in memory, outside any storage: a run is written into it once (a writer
//! appends), then read through the same reader as one on disk, from one allocation, with no
//! storage, directory lock or counters behind it.

use parking_lot::RwLock;
use strata_core::{Error, Result};

use crate::mem::read_bytes_at;
use crate::StorageFile;

/// See the module documentation. Writes extend it; every other change of length is refused.
#[derive(Debug)]
pub struct BytesFile {
    name: String,
    bytes: RwLock<Vec<u8>>,
}

impl BytesFile {
    /// An empty file.
    pub fn new(name: impl Into<String>) -> BytesFile {
        BytesFile { name: name.into(), bytes: RwLock::new(Vec::new()) }
    }

    /// `f` of the file's contents (writes wait meanwhile).
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.bytes.read())
    }

    /// Gives back the capacity beyond its length (once written, it only serves reads).
    pub fn shrink_to_fit(&self) {
        self.bytes.write().shrink_to_fit();
    }

    /// The memory it holds.
    pub fn capacity_bytes(&self) -> usize {
        self.bytes.read().capacity()
    }

    fn refused(&self, what: &str) -> Error {
        Error::unsupported(format!("{what} on {}: an in-memory file only grows by writes", self.name))
    }
}

impl StorageFile for BytesFile {
    fn name(&self) -> &str {
        &self.name
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        read_bytes_at(&self.name, &self.bytes.read(), offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let start = usize::try_from(offset).map_err(|_| Error::invalid("offset too large"))?;
        let end = start.checked_add(data.len()).ok_or_else(|| Error::invalid("offset too large"))?;
        let mut bytes = self.bytes.write();
        if bytes.len() < end {
            bytes.resize(end, 0);
        }
        bytes[start..end].copy_from_slice(data);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        Ok(self.bytes.read().len() as u64)
    }

    fn set_len(&self, _len_bytes: u64) -> Result<()> {
        Err(self.refused("a change of length"))
    }

    fn allocate(&self, _len_bytes: u64) -> Result<()> {
        Err(self.refused("an allocation"))
    }

    fn punch_hole(&self, _offset: u64, _len_bytes: u64) -> Result<()> {
        Err(self.refused("a punched hole"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_by_writes_reads_within_its_bytes_and_refuses_the_rest() {
        let file = BytesFile::new("run");
        file.write_at(0, b"0123").unwrap();
        file.write_at(4, b"456789").unwrap();
        file.write_at(8, b"ab").unwrap();
        file.shrink_to_fit();
        assert_eq!(file.with_bytes(<[u8]>::to_vec), b"01234567ab");
        assert_eq!(file.capacity_bytes(), 10);
        let mut buf = [0u8; 4];
        file.read_at(3, &mut buf).unwrap();
        assert_eq!(&buf, b"3456");
        assert!(file.read_at(8, &mut buf).is_err(), "past the end");
        assert!(file.read_at(u64::MAX, &mut buf).is_err());
        assert!(matches!(file.set_len(0), Err(Error::Unsupported(_))));
        assert!(file.allocate(20).is_err() && file.punch_hole(0, 1).is_err());
    }
}
