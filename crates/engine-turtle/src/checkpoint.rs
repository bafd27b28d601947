//! `turtle-checkpoint` (docs/format/turtle.md): the last complete checkpoint — the tree's root
//! in `turtle-pages`, the last WAL record the tree holds, and the tree's shape. Replaced
//! atomically (`SmallFileFormat::store`) after `turtle-pages` is synced.

use strata_core::{Error, Result};
use strata_io::Storage;
use strata_kit::small_file::{CrcLayout, SmallFileFormat, OVERHEAD_BYTES};

use crate::tree::{ChildKind, ChildRef, TreeConfig};

pub const CHECKPOINT_FILE: &str = "turtle-checkpoint";
const VERSION: u32 = 1;
const FIELDS: usize = 8;
/// Bytes of the whole file.
pub const CHECKPOINT_BYTES: usize = OVERHEAD_BYTES + FIELDS * 8;

/// `magic | version | crc32c of the payload | eight u64 fields`.
fn format() -> SmallFileFormat {
    SmallFileFormat {
        magic: b"STRTCKP1",
        versions: VERSION..=VERSION,
        crc: CrcLayout::AfterVersionOverPayload,
        payload_bytes: Some(CHECKPOINT_BYTES - OVERHEAD_BYTES),
    }
}

/// What a checkpoint records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The tree holds every WAL record up to this one (replay starts after it).
    pub wal_lsn: u64,
    pub root: ChildRef,
    pub tree: TreeConfig,
}

impl Checkpoint {
    fn encode(&self) -> Vec<u8> {
        let fields = [
            self.wal_lsn,
            self.root.kind as u64,
            self.root.offset,
            self.root.len,
            self.root.leaf_bytes,
            self.tree.leaf_bytes,
            self.tree.max_pivots as u64,
            u64::from(self.root.checksum),
        ];
        fields.iter().flat_map(|f| f.to_le_bytes()).collect()
    }

    /// Durably replaces the record.
    pub fn store(&self, storage: &dyn Storage) -> Result<()> {
        format().store(storage, CHECKPOINT_FILE, VERSION, &self.encode())
    }

    /// The record, `None` for a store never checkpointed.
    pub fn load(storage: &dyn Storage) -> Result<Option<Checkpoint>> {
        let Some((_, payload)) = format().load(storage, CHECKPOINT_FILE)? else { return Ok(None) };
        let field = |i: usize| u64::from_le_bytes(payload[i * 8..i * 8 + 8].try_into().unwrap_or_default());
        let bad =
            |i: usize, what: &str| Error::corruption(CHECKPOINT_FILE, (OVERHEAD_BYTES + i * 8) as u64, what);
        let kind = match field(1) {
            0 => ChildKind::Leaf,
            1 => ChildKind::Node,
            _ => return Err(bad(1, "root kind is neither leaf nor node")),
        };
        // Replay starts after it, within the WAL's lsn space.
        if field(0) >= strata_wal::MAX_LSN {
            return Err(bad(0, "WAL position past the lsn space"));
        }
        let tree = TreeConfig { leaf_bytes: field(5), max_pivots: field(6) as usize };
        if !(512..=64 << 20).contains(&tree.leaf_bytes) {
            return Err(bad(5, "leaf size out of range"));
        }
        if !(2..=64).contains(&tree.max_pivots) {
            return Err(bad(6, "pivot count out of range"));
        }
        let checksum = u32::try_from(field(7)).map_err(|_| bad(7, "root checksum wider than 32 bits"))?;
        let root = ChildRef { kind, offset: field(2), len: field(3), leaf_bytes: field(4), checksum };
        Ok(Some(Checkpoint { wal_lsn: field(0), root, tree }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_io::{read_all, MemStorage, OpenOptions};

    fn sample() -> Checkpoint {
        Checkpoint {
            wal_lsn: 77,
            root: ChildRef {
                kind: ChildKind::Node,
                offset: 8192,
                len: 300,
                leaf_bytes: 0,
                checksum: 0xABCD_1234,
            },
            tree: TreeConfig { leaf_bytes: 1 << 20, max_pivots: 64 },
        }
    }

    /// docs/format/turtle.md, "turtle-checkpoint": every field at its documented offset.
    #[test]
    fn checkpoint_offsets() {
        let storage = MemStorage::new();
        sample().store(&storage).unwrap();
        let bytes =
            read_all(storage.open(CHECKPOINT_FILE, OpenOptions::existing()).unwrap().as_ref()).unwrap();
        assert_eq!(bytes.len(), CHECKPOINT_BYTES);
        assert_eq!(&bytes[0..8], b"STRTCKP1");
        assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(bytes[12..16].try_into().unwrap()), crc32c::crc32c(&bytes[16..]));
        let field = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        assert_eq!(
            [field(16), field(24), field(32), field(40), field(48), field(56), field(64), field(72)],
            [77, 1, 8192, 300, 0, 1 << 20, 64, 0xABCD_1234]
        );
        assert_eq!(Checkpoint::load(&storage).unwrap(), Some(sample()));
    }

    /// Found by the `turtle_checkpoint` fuzz target: a resealed record whose WAL position lay
    /// past the lsn space failed the open with the WAL's `InvalidArgument`, not as corruption
    /// of the record.
    #[test]
    fn a_wal_position_past_the_lsn_space_is_corruption_of_the_record() {
        let storage = MemStorage::new();
        Checkpoint { wal_lsn: strata_wal::MAX_LSN, ..sample() }.store(&storage).unwrap();
        match Checkpoint::load(&storage) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file.as_str(), offset), (CHECKPOINT_FILE, 16))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_damaged_byte_is_refused() {
        let storage = MemStorage::new();
        sample().store(&storage).unwrap();
        let file = storage.open(CHECKPOINT_FILE, OpenOptions::existing()).unwrap();
        let good = read_all(file.as_ref()).unwrap();
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            file.write_at(0, &bad).unwrap();
            assert!(Checkpoint::load(&storage).is_err(), "byte {at}");
        }
    }
}
