//! The simulated disk: inodes with current and durable bytes, and a directory with a current
//! and a durable name table.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::Rng;

use super::CrashMode;

pub(super) type InodeId = u64;

/// One size or content change not yet made durable.
#[derive(Clone, Debug)]
pub(super) enum Change {
    Write {
        offset: usize,
        bytes: Vec<u8>,
    },
    SetLen(usize),
    /// Extends to the length if shorter; never shrinks.
    Allocate(usize),
}

impl Change {
    fn apply(&self, data: &mut Vec<u8>) {
        match self {
            Change::Write { offset, bytes } => write_bytes(data, *offset, bytes),
            Change::SetLen(len) => data.resize(*len, 0),
            Change::Allocate(len) => {
                if data.len() < *len {
                    data.resize(*len, 0);
                }
            }
        }
    }
}

/// Writes `bytes` at `offset`, zero-filling any gap. The caller checked `offset + len` fits.
fn write_bytes(data: &mut Vec<u8>, offset: usize, bytes: &[u8]) {
    let end = offset.saturating_add(bytes.len());
    if data.len() < end {
        data.resize(end, 0);
    }
    if let Some(dst) = data.get_mut(offset..end) {
        dst.copy_from_slice(bytes);
    }
}

#[derive(Debug, Default)]
pub(super) struct Inode {
    /// What reads see (the page cache).
    pub data: Vec<u8>,
    /// What a crash leaves when no unsynced change survives.
    pub durable: Vec<u8>,
    /// Changes since the last sync, in issue order. Invariant: `durable` with `unsynced` replayed
    /// equals `data`, except after a failed sync dropped changes (those stay readable in `data`
    /// until a crash, but never reach `durable`).
    unsynced: Vec<Change>,
    /// Live `SimFile` handles from the current epoch.
    pub open_handles: usize,
}

impl Inode {
    pub fn change(&mut self, change: Change) {
        change.apply(&mut self.data);
        self.unsynced.push(change);
    }

    pub fn sync(&mut self) {
        for change in self.unsynced.drain(..) {
            change.apply(&mut self.durable);
        }
    }

    /// A failed fsync: like Linux, the dirty pages are marked clean without reaching the disk, so
    /// no later sync writes them.
    pub fn lose_unsynced(&mut self) {
        self.unsynced.clear();
    }

    /// Flips bits in the unsynced writes covering `offset`, so a later sync keeps a bit flipped
    /// in `data` and `durable` flipped.
    pub fn flip_unsynced(&mut self, offset: usize, mask: u8) {
        for change in &mut self.unsynced {
            if let Change::Write { offset: start, bytes } = change {
                if let Some(byte) = offset.checked_sub(*start).and_then(|i| bytes.get_mut(i)) {
                    *byte ^= mask;
                }
            }
        }
    }

    /// `Reordered`: what the unsynced changes would leave (`durable` with them replayed; changes
    /// a failed sync dropped are not among them), then per 4 KiB page either that or the old
    /// bytes (zeros past the old length), and either length.
    fn written_back_in_any_order(&self, old: Vec<u8>, rng: &mut StdRng) -> Vec<u8> {
        const PAGE_BYTES: usize = 4096;
        let mut new = old.clone();
        for change in &self.unsynced {
            change.apply(&mut new);
        }
        let len = if rng.gen_bool(0.5) { new.len() } else { old.len() };
        let mut disk = old;
        disk.resize(len, 0);
        for (index, page) in new.chunks(PAGE_BYTES).enumerate() {
            let start = index * PAGE_BYTES;
            if start >= len || !rng.gen_bool(0.5) {
                continue;
            }
            let end = (start + page.len()).min(len);
            if let (Some(dst), Some(src)) = (disk.get_mut(start..end), page.get(..end - start)) {
                dst.copy_from_slice(src);
            }
        }
        disk
    }

    /// Power loss, then reboot: the file holds its durable bytes plus, in `Random` mode, a seeded
    /// prefix of the unsynced changes whose last write may be torn, or in `Reordered` mode a
    /// seeded subset of the pages they changed.
    fn crash(&mut self, mode: CrashMode, rng: &mut StdRng) {
        let mut disk = std::mem::take(&mut self.durable);
        if mode == CrashMode::Reordered && !self.unsynced.is_empty() {
            disk = self.written_back_in_any_order(disk, rng);
        }
        if mode == CrashMode::Random && !self.unsynced.is_empty() {
            let surviving = rng.gen_range(0..=self.unsynced.len());
            for (index, change) in self.unsynced.iter().take(surviving).enumerate() {
                match change {
                    Change::Write { offset, bytes } if index + 1 == surviving && rng.gen_bool(0.5) => {
                        let torn_len = rng.gen_range(0..bytes.len().max(1));
                        if let Some(prefix) = bytes.get(..torn_len).filter(|p| !p.is_empty()) {
                            write_bytes(&mut disk, *offset, prefix);
                        }
                    }
                    _ => change.apply(&mut disk),
                }
            }
        }
        self.unsynced.clear();
        self.data.clone_from(&disk);
        self.durable = disk;
        self.open_handles = 0;
    }
}

/// Why a size-changing operation cannot proceed.
#[derive(Debug)]
pub(super) struct NoSpace {
    pub capacity_bytes: u64,
}

#[derive(Debug)]
pub(super) struct Disk {
    inodes: BTreeMap<InodeId, Inode>,
    next_inode: InodeId,
    /// The namespace readers see.
    pub dir: BTreeMap<String, InodeId>,
    /// The namespace as of the last successful sync_dir (what a crash restores).
    pub durable_dir: BTreeMap<String, InodeId>,
    /// Bumped by every crash; handles and locks from an older epoch are stale.
    pub epoch: u64,
    /// Held locks: name to the holder's unique id.
    pub locks: BTreeMap<String, u64>,
    pub next_lock_id: u64,
    pub capacity_bytes: Option<u64>,
    rng: StdRng,
}

impl Disk {
    pub fn new(rng: StdRng) -> Disk {
        Disk {
            inodes: BTreeMap::new(),
            next_inode: 0,
            dir: BTreeMap::new(),
            durable_dir: BTreeMap::new(),
            epoch: 0,
            locks: BTreeMap::new(),
            next_lock_id: 0,
            capacity_bytes: None,
            rng,
        }
    }

    pub fn inode(&self, id: InodeId) -> Option<&Inode> {
        self.inodes.get(&id)
    }

    pub fn inode_mut(&mut self, id: InodeId) -> Option<&mut Inode> {
        self.inodes.get_mut(&id)
    }

    pub fn create(&mut self, name: &str) -> InodeId {
        let id = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(id, Inode::default());
        self.dir.insert(name.to_string(), id);
        id
    }

    /// Drops the inode once nothing can reach it any more: no name in either directory and no
    /// open handle.
    pub fn collect_if_unreachable(&mut self, id: InodeId) {
        let named = self.dir.values().chain(self.durable_dir.values()).any(|&other| other == id);
        let open = self.inodes.get(&id).is_some_and(|inode| inode.open_handles > 0);
        if !named && !open {
            self.inodes.remove(&id);
        }
    }

    pub fn sync_dir(&mut self) {
        let replaced: Vec<InodeId> = self.durable_dir.values().copied().collect();
        self.durable_dir.clone_from(&self.dir);
        for id in replaced {
            self.collect_if_unreachable(id);
        }
    }

    /// Fails if growing inode `id` to `new_len_bytes` would exceed the capacity. Used space is the
    /// sum of the lengths of files that are named or open (what a real disk would still hold).
    pub fn check_space(&self, id: InodeId, new_len_bytes: usize) -> Result<(), NoSpace> {
        let Some(capacity_bytes) = self.capacity_bytes else { return Ok(()) };
        let current = self.inodes.get(&id).map_or(0, |inode| inode.data.len());
        if new_len_bytes <= current {
            return Ok(());
        }
        let used: u64 = self
            .inodes
            .iter()
            .filter(|(id, inode)| inode.open_handles > 0 || self.dir.values().any(|d| d == *id))
            .map(|(_, inode)| inode.data.len() as u64)
            .sum();
        let needed = used.saturating_add((new_len_bytes - current) as u64);
        if needed > capacity_bytes {
            return Err(NoSpace { capacity_bytes });
        }
        Ok(())
    }

    pub fn crash(&mut self, mode: CrashMode) {
        self.epoch += 1;
        self.locks.clear();
        self.dir.clone_from(&self.durable_dir);
        let durable_dir = &self.durable_dir;
        self.inodes.retain(|id, _| durable_dir.values().any(|d| d == id));
        // BTreeMap order keeps the rng draws, and so the outcome, deterministic.
        for inode in self.inodes.values_mut() {
            inode.crash(mode, &mut self.rng);
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn inode_with_writes(durable: &[u8], writes: &[(usize, &[u8])]) -> Inode {
        let mut inode = Inode::default();
        inode.change(Change::Write { offset: 0, bytes: durable.to_vec() });
        inode.sync();
        for (offset, bytes) in writes {
            inode.change(Change::Write { offset: *offset, bytes: bytes.to_vec() });
        }
        inode
    }

    /// `Reordered`: pages reach the disk independently (a later write without an earlier one),
    /// each with its latest unsynced content or its old one, never an older unsynced version, and
    /// never a change a failed sync dropped.
    #[test]
    fn reordered_crashes_keep_any_subset_of_pages_with_their_latest_content() {
        let page = |b: u8| vec![b; 4096];
        let (mut later_without_earlier, mut states) = (false, std::collections::BTreeSet::new());
        for seed in 0..64 {
            let mut inode = inode_with_writes(&[page(b'o'), page(b'o')].concat(), &[(0, &page(b'a'))]);
            inode.change(Change::Write { offset: 4096, bytes: page(b'b') });
            inode.change(Change::Write { offset: 0, bytes: page(b'c') });
            inode.change(Change::Write { offset: 8192, bytes: page(b'd') });
            inode.crash(CrashMode::Reordered, &mut StdRng::seed_from_u64(seed));
            let firsts: Vec<u8> = inode.data.chunks(4096).map(|p| p[0]).collect();
            assert!(
                matches!(firsts.first(), Some(b'o' | b'c')),
                "page 0 holds an older unsynced version: {firsts:?}"
            );
            assert!(matches!(firsts.get(1), Some(b'o' | b'b')), "{firsts:?}");
            assert!(matches!(firsts.get(2), None | Some(0 | b'd')), "{firsts:?}");
            later_without_earlier |= firsts.get(1) == Some(&b'b') && firsts.first() == Some(&b'o');
            states.insert(firsts);
        }
        assert!(later_without_earlier, "a later write never survived without an earlier one");
        assert!(states.len() >= 6, "only {} outcomes: {states:?}", states.len());
        let mut failed = inode_with_writes(b"old", &[(0, b"new")]);
        failed.lose_unsynced();
        failed.crash(CrashMode::Reordered, &mut StdRng::seed_from_u64(1));
        assert_eq!(failed.data, b"old", "a change a failed sync dropped reached the disk");
    }

    #[test]
    fn sync_replays_unsynced_changes_onto_durable() {
        let mut inode = inode_with_writes(b"abcdef", &[(4, b"XYZ")]);
        inode.change(Change::SetLen(5));
        inode.change(Change::Allocate(3));
        assert_eq!(inode.durable, b"abcdef");
        assert_eq!(inode.data, b"abcdX");
        inode.sync();
        assert_eq!(inode.durable, inode.data);
    }

    #[test]
    fn lost_changes_stay_readable_but_never_become_durable() {
        let mut inode = inode_with_writes(b"aaaa", &[(0, b"bb")]);
        inode.lose_unsynced();
        inode.change(Change::Write { offset: 3, bytes: b"c".to_vec() });
        inode.sync();
        assert_eq!(inode.data, b"bbac");
        assert_eq!(inode.durable, b"aaac");
        inode.crash(CrashMode::DropUnsynced, &mut StdRng::seed_from_u64(1));
        assert_eq!(inode.data, b"aaac");
    }

    #[test]
    fn random_crash_result_is_durable_plus_a_prefix() {
        let writes: [(usize, &[u8]); 3] = [(0, b"1111"), (4, b"2222"), (8, b"3333")];
        let full = b"111122223333";
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let mut inode = inode_with_writes(b"", &writes);
            inode.crash(CrashMode::Random, &mut rng);
            assert_eq!(inode.data, inode.durable);
            assert!(full.starts_with(&inode.data), "{:?} is not a prefix", inode.data);
        }
    }
}
