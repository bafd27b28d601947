//! A seeded in-memory disk that loses unsynced data on a simulated power loss and fails
//! operations on purpose. Models: redb's crash-consistency backend, leveldb's fault-injection
//! Env, TigerBeetle's testing/storage.zig.
//!
//! Files are inodes; a directory maps names to inodes. Each inode keeps its current bytes (what
//! reads see), its durable bytes (what survives a crash) and the changes in between. The
//! directory has a current and a durable name table; `sync_dir` copies the first to the second.
//! Everything is deterministic given the seed and the sequence of calls.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

mod disk;
mod faults;

use std::fmt;
use std::io;
use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::SeedableRng;
use strata_core::{Error, IoStats, Result};

use self::disk::{Change, Disk, InodeId};
use self::faults::{FaultPlan, OpClass};
use crate::{check_name, Counters, OpenOptions, Storage, StorageFile, StorageLock};

/// How a simulated power loss treats data that was not made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// Every write since each file's last sync is lost; namespace changes since the last sync_dir are undone.
    DropUnsynced,
    /// Seeded per file: a random prefix of the unsynced writes (in issue order) survives, and the last
    /// surviving write may be torn (only a random prefix of its bytes reaches the disk). Namespace changes
    /// since the last sync_dir are undone.
    Random,
    /// Seeded per file: writeback in any order, as a real page cache does it. Each 4 KiB page the
    /// unsynced writes changed reaches the disk or not, independently, with the content the
    /// writes left it (never an older unsynced version); the length is the old or the new one,
    /// and a page past the old length that did not reach the disk reads as zeros. So a later
    /// write can survive an earlier one, and a multi-page write can keep its tail without its
    /// head. Namespace changes since the last sync_dir are undone.
    Reordered,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    Eio,
    Enospc,
}

impl FaultKind {
    fn to_io_error(self) -> io::Error {
        io::Error::from_raw_os_error(match self {
            FaultKind::Eio => libc::EIO,
            FaultKind::Enospc => libc::ENOSPC,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The `after_ops`-th I/O operation from now (0 = the very next) fails with `kind`; with `sticky`
    /// every later operation fails too until `clear_faults`. Counted ops: open, read_at, write_at, sync,
    /// set_len, allocate, remove, rename, sync_dir (not exists/list/lock/len).
    FailOp { after_ops: u64, kind: FaultKind, sticky: bool },
    /// Same, counting only write_at/set_len/allocate calls. A write failing with Enospc writes nothing.
    FailWrite { after_writes: u64, kind: FaultKind, sticky: bool },
    /// The `after_syncs`-th sync (file sync or sync_dir) from now returns EIO, and the data it would have
    /// made durable stays NOT durable (like Linux dropping dirty pages after a failed fsync).
    ///
    /// For a file sync, the unsynced writes stay readable but no later sync makes them durable
    /// (they are lost at the next crash unless written again). For sync_dir, the namespace simply
    /// stays as durable as before; a later successful sync_dir makes it durable.
    FailSync { after_syncs: u64 },
}

/// A seeded in-memory disk with crashes and fault injection. Clone shares the same simulated disk.
///
/// Any failing operation (injected or capacity) changes nothing. Faults stay armed across
/// `crash` until `clear_faults`.
///
/// A plain value (from `new` or `clone`) works across crashes, like an operator's view of the
/// disk. [`SimStorage::booted`] gives the view of one process lifetime instead: after the next
/// crash every `Storage` call through it fails, as the process that held it would be dead. An
/// engine opened on such a view can never write after the power loss, whatever threads it leaves.
#[derive(Clone)]
pub struct SimStorage {
    shared: Arc<Shared>,
    /// `Some(epoch)` for a [`SimStorage::booted`] view: the disk epoch it belongs to.
    boot_epoch: Option<u64>,
}

struct Shared {
    state: Mutex<State>,
    counters: Counters,
}

struct State {
    disk: Disk,
    faults: FaultPlan,
}

impl State {
    /// Counts an operation; the injected error if a fault fires. `inode` loses its unsynced
    /// changes when a `FailSync` fires on its sync.
    fn count_op(
        &mut self,
        class: OpClass,
        inode: Option<InodeId>,
        context: impl FnOnce() -> String,
    ) -> Result<()> {
        let Some(fired) = self.faults.on_op(class) else { return Ok(()) };
        if fired.loses_unsynced {
            if let Some(inode) = inode.and_then(|id| self.disk.inode_mut(id)) {
                inode.lose_unsynced();
            }
        }
        Err(Error::io(format!("{} (injected fault)", context()), fired.kind.to_io_error()))
    }
}

fn not_found(context: String) -> Error {
    Error::io(context, io::Error::new(io::ErrorKind::NotFound, "no such file"))
}

fn no_space(context: String, capacity_bytes: u64) -> Error {
    Error::io(
        format!("{context} (simulated disk full at {capacity_bytes} bytes)"),
        io::Error::from_raw_os_error(libc::ENOSPC),
    )
}

fn to_usize(value: u64, what: &str) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::invalid(format!("{what} {value} does not fit in memory")))
}

impl SimStorage {
    pub fn new(seed: u64) -> SimStorage {
        let state = State { disk: Disk::new(StdRng::seed_from_u64(seed)), faults: FaultPlan::default() };
        SimStorage {
            shared: Arc::new(Shared { state: Mutex::new(state), counters: Counters::default() }),
            boot_epoch: None,
        }
    }

    /// A view of this disk for one process lifetime (see the type's documentation): every
    /// `Storage` call through it fails with `Error::Io` once the disk crashes again.
    pub fn booted(&self) -> SimStorage {
        let epoch = self.shared.state.lock().disk.epoch;
        SimStorage { shared: self.shared.clone(), boot_epoch: Some(epoch) }
    }

    /// The state lock, after checking that a booted view's process is still alive.
    fn live_state(&self, context: impl FnOnce() -> String) -> Result<parking_lot::MutexGuard<'_, State>> {
        let state = self.shared.state.lock();
        match self.boot_epoch {
            Some(epoch) if epoch != state.disk.epoch => {
                Err(Error::io(context(), io::Error::other("simulated crash: storage view of a dead process")))
            }
            _ => Ok(state),
        }
    }

    /// Power loss. Applies `mode` to every file, then invalidates every handle and lock taken before the
    /// crash: later calls on old `StorageFile` handles return `Error::Io` ("simulated crash: stale handle"),
    /// and old lock guards stop holding the lock (dropping them later must not release a new holder's lock).
    /// The storage stays usable: open files again to "reboot".
    pub fn crash(&self, mode: CrashMode) {
        self.shared.state.lock().disk.crash(mode);
    }

    /// Arms a fault; several may be armed at once.
    pub fn inject(&self, fault: Fault) {
        self.shared.state.lock().faults.arm(fault);
    }

    pub fn clear_faults(&self) {
        self.shared.state.lock().faults.clear();
    }

    /// Total bytes the disk may hold (sum of file lengths); writes/allocations beyond it fail with ENOSPC.
    /// Counted files are those with a name or an open handle.
    pub fn set_capacity_bytes(&self, capacity: Option<u64>) {
        self.shared.state.lock().disk.capacity_bytes = capacity;
    }

    /// Flips one bit in both the current and the durable contents of a file (bit 0..=7).
    /// Meant for files with no unsynced writes; an unsynced write over the byte is flipped too.
    pub fn flip_bit(&self, name: &str, byte_offset: u64, bit: u8) -> Result<()> {
        check_name(name)?;
        if bit > 7 {
            return Err(Error::invalid(format!("bit {bit} is not in 0..=7")));
        }
        let offset = to_usize(byte_offset, "byte offset")?;
        let mut state = self.shared.state.lock();
        let context = || format!("flipping bit {bit} of byte {byte_offset} of sim:{name}");
        let id = *state.disk.dir.get(name).ok_or_else(|| not_found(context()))?;
        let inode = state.disk.inode_mut(id).ok_or_else(|| not_found(context()))?;
        let mask = 1u8 << bit;
        let mut flipped = false;
        for byte in [inode.data.get_mut(offset), inode.durable.get_mut(offset)].into_iter().flatten() {
            *byte ^= mask;
            flipped = true;
        }
        if !flipped {
            return Err(Error::invalid(format!("{}: offset is past the end of the file", context())));
        }
        inode.flip_unsynced(offset, mask);
        Ok(())
    }

    /// The bytes a reader would see now (None if the file does not exist). For tests.
    pub fn contents(&self, name: &str) -> Option<Vec<u8>> {
        let state = self.shared.state.lock();
        let id = state.disk.dir.get(name)?;
        state.disk.inode(*id).map(|inode| inode.data.clone())
    }

    /// What would survive `crash(DropUnsynced)` (None if the file would not exist). For tests.
    pub fn durable_contents(&self, name: &str) -> Option<Vec<u8>> {
        let state = self.shared.state.lock();
        let id = state.disk.durable_dir.get(name)?;
        state.disk.inode(*id).map(|inode| inode.durable.clone())
    }

    /// Number of counted operations so far (to place faults at a chosen point).
    pub fn op_count(&self) -> u64 {
        self.shared.state.lock().faults.op_count()
    }

    /// Operations an injected fault failed so far (not capacity errors): a fault that fired
    /// without any call returning an error was handled (or swallowed) by the engine, not missed.
    pub fn faults_fired(&self) -> u64 {
        self.shared.state.lock().faults.fired_count()
    }
}

impl fmt::Debug for SimStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("SimStorage");
        if let Some(state) = self.shared.state.try_lock() {
            out.field("files", &state.disk.dir.keys().collect::<Vec<_>>()).field("epoch", &state.disk.epoch);
        }
        out.finish_non_exhaustive()
    }
}

impl Storage for SimStorage {
    fn open(&self, name: &str, opts: OpenOptions) -> Result<Arc<dyn StorageFile>> {
        check_name(name)?;
        let mut state = self.live_state(|| format!("opening sim:{name}"))?;
        state.count_op(OpClass::Other, None, || format!("opening sim:{name}"))?;
        let id = match state.disk.dir.get(name) {
            Some(&id) => id,
            None if opts.create => state.disk.create(name),
            None => return Err(not_found(format!("opening sim:{name}"))),
        };
        if let Some(inode) = state.disk.inode_mut(id) {
            inode.open_handles += 1;
        }
        let epoch = state.disk.epoch;
        Ok(Arc::new(SimFile { name: name.to_string(), inode: id, epoch, shared: self.shared.clone() }))
    }

    fn exists(&self, name: &str) -> Result<bool> {
        check_name(name)?;
        Ok(self.live_state(|| format!("checking sim:{name}"))?.disk.dir.contains_key(name))
    }

    fn remove(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let mut state = self.live_state(|| format!("removing sim:{name}"))?;
        state.count_op(OpClass::Other, None, || format!("removing sim:{name}"))?;
        let id = state.disk.dir.remove(name).ok_or_else(|| not_found(format!("removing sim:{name}")))?;
        state.disk.collect_if_unreachable(id);
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        check_name(from)?;
        check_name(to)?;
        let context = || format!("renaming sim:{from} to sim:{to}");
        let mut state = self.live_state(context)?;
        state.count_op(OpClass::Other, None, context)?;
        let id = state.disk.dir.remove(from).ok_or_else(|| not_found(context()))?;
        if let Some(replaced) = state.disk.dir.insert(to.to_string(), id) {
            state.disk.collect_if_unreachable(replaced);
        }
        Ok(())
    }

    fn list(&self) -> Result<Vec<String>> {
        Ok(self.live_state(|| "listing sim:".to_string())?.disk.dir.keys().cloned().collect())
    }

    fn sync_dir(&self) -> Result<()> {
        let mut state = self.live_state(|| "syncing directory sim:".to_string())?;
        state.count_op(OpClass::Sync, None, || "syncing directory sim:".to_string())?;
        state.disk.sync_dir();
        self.shared.counters.on_sync();
        Ok(())
    }

    fn lock(&self, name: &str) -> Result<Box<dyn StorageLock>> {
        check_name(name)?;
        let mut state = self.live_state(|| format!("locking sim:{name}"))?;
        if state.disk.locks.contains_key(name) {
            return Err(Error::Locked(format!("sim:{name}")));
        }
        let id = state.disk.next_lock_id;
        state.disk.next_lock_id += 1;
        state.disk.locks.insert(name.to_string(), id);
        Ok(Box::new(SimLock { name: name.to_string(), id, shared: self.shared.clone() }))
    }

    fn io_stats(&self) -> IoStats {
        self.shared.counters.snapshot()
    }

    fn location(&self) -> String {
        "sim:".to_string()
    }
}

struct SimLock {
    name: String,
    /// Unique per acquisition, so a guard from before a crash cannot release a newer holder.
    id: u64,
    shared: Arc<Shared>,
}

impl fmt::Debug for SimLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimLock").field("name", &self.name).finish_non_exhaustive()
    }
}

impl StorageLock for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        if state.disk.locks.get(&self.name) == Some(&self.id) {
            state.disk.locks.remove(&self.name);
        }
    }
}

/// A handle to one inode; it keeps working after the name is removed or renamed (like a Unix
/// file descriptor) until the next crash.
struct SimFile {
    name: String,
    inode: InodeId,
    /// The disk epoch the handle was opened in; a crash makes it stale.
    epoch: u64,
    shared: Arc<Shared>,
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFile")
            .field("name", &self.name)
            .field("inode", &self.inode)
            .finish_non_exhaustive()
    }
}

impl SimFile {
    /// Runs `f` on this handle's inode under the state lock. A stale handle fails; `class`
    /// (when the operation is counted) may make an injected fault fire instead.
    fn with_inode<T>(
        &self,
        class: Option<OpClass>,
        context: impl Fn() -> String,
        f: impl FnOnce(&mut Disk, InodeId) -> Result<T>,
    ) -> Result<T> {
        let mut state = self.shared.state.lock();
        if state.disk.epoch != self.epoch || state.disk.inode(self.inode).is_none() {
            return Err(Error::io(context(), io::Error::other("simulated crash: stale handle")));
        }
        if let Some(class) = class {
            state.count_op(class, Some(self.inode), &context)?;
        }
        f(&mut state.disk, self.inode)
    }

    /// Applies a change that may grow the file to `new_len_bytes`, if the capacity allows
    /// (a length at or below the current one needs no space).
    fn grow_or_change(
        &self,
        context: impl Fn() -> String,
        new_len_bytes: usize,
        change: Change,
    ) -> Result<()> {
        self.with_inode(Some(OpClass::Write), &context, |disk, id| {
            disk.check_space(id, new_len_bytes).map_err(|e| no_space(context(), e.capacity_bytes))?;
            disk.inode_mut(id).ok_or_else(|| not_found(context()))?.change(change);
            Ok(())
        })
    }

    fn inode_len(disk: &Disk, id: InodeId) -> usize {
        disk.inode(id).map_or(0, |inode| inode.data.len())
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        if state.disk.epoch != self.epoch {
            return;
        }
        if let Some(inode) = state.disk.inode_mut(self.inode) {
            inode.open_handles = inode.open_handles.saturating_sub(1);
        }
        state.disk.collect_if_unreachable(self.inode);
    }
}

impl StorageFile for SimFile {
    fn name(&self) -> &str {
        &self.name
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = buf.len();
        let context = || format!("reading {len} bytes at offset {offset} of sim:{}", self.name);
        self.with_inode(Some(OpClass::Other), context, |disk, id| {
            let data = disk.inode(id).map(|inode| inode.data.as_slice()).unwrap_or_default();
            let src = usize::try_from(offset).ok().and_then(|start| data.get(start..start.checked_add(len)?));
            let eof = || io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of file");
            buf.copy_from_slice(src.ok_or_else(|| Error::io(context(), eof()))?);
            Ok(())
        })?;
        self.shared.counters.on_read(len);
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let context = || format!("writing {} bytes at offset {offset} of sim:{}", data.len(), self.name);
        let start = to_usize(offset, "write offset")?;
        let end = start.checked_add(data.len()).ok_or_else(|| Error::invalid(context()))?;
        self.grow_or_change(context, end, Change::Write { offset: start, bytes: data.to_vec() })?;
        self.shared.counters.on_write(data.len());
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.with_inode(
            Some(OpClass::Sync),
            || format!("syncing sim:{}", self.name),
            |disk, id| {
                if let Some(inode) = disk.inode_mut(id) {
                    inode.sync();
                }
                Ok(())
            },
        )?;
        self.shared.counters.on_sync();
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        self.with_inode(
            None,
            || format!("reading the length of sim:{}", self.name),
            |disk, id| Ok(Self::inode_len(disk, id) as u64),
        )
    }

    fn set_len(&self, len_bytes: u64) -> Result<()> {
        let context = || format!("setting the length of sim:{} to {len_bytes} bytes", self.name);
        let len = to_usize(len_bytes, "length")?;
        self.grow_or_change(context, len, Change::SetLen(len))
    }

    fn allocate(&self, len_bytes: u64) -> Result<()> {
        let context = || format!("allocating {len_bytes} bytes for sim:{}", self.name);
        let len = to_usize(len_bytes, "length")?;
        self.grow_or_change(context, len, Change::Allocate(len))
    }

    /// An unsynced write of zeros over the range (clipped to the length): lost or kept at a
    /// crash like any other write, which is what a real file system allows.
    fn punch_hole(&self, offset: u64, len_bytes: u64) -> Result<()> {
        let file_len = self.len()?;
        let end = offset.saturating_add(len_bytes).min(file_len);
        if offset >= end {
            return Ok(());
        }
        self.write_at(offset, &vec![0; to_usize(end - offset, "hole length")?])
    }
}
