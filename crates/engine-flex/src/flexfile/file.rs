//! The FlexFile: a user-space file with insert-range and collapse-range (paper §4) over a data
//! file of segments, a copy-on-write FlexTree file and a logical log.
//!
//! Locking: `writer` serializes every mutation and `sync`; `state` is read-locked by readers and
//! write-locked by a mutator. `sync` (log commit and tree commit, see `commit.rs`) holds the write
//! lock only to take what it writes and to publish the result: the writes and fsyncs run with
//! readers unblocked.

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_core::{Error, Poison, Result};
use strata_io::StorageFile;

use super::format::{LogOp, MAX_ENTRY_LEN};
use super::options::FlexFileOptions;
use super::space::{self, Space};
use super::{LogMark, TableFile};
use crate::flextree::{Extent, FlexTree, HOLE_ADDR, MAX_LOGICAL_BYTES};

/// Counters of one open FlexFile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlexFileStats {
    pub logical_bytes: u64,
    pub live_data_bytes: u64,
    /// Bytes given to insert/write/update.
    pub user_bytes_written: u64,
    /// Bytes written to the data file (user data plus GC and defrag copies).
    pub data_bytes_written: u64,
    pub gc_bytes_relocated: u64,
    pub gc_segments_reclaimed: u64,
    pub log_commits: u64,
    pub tree_commits: u64,
    pub segments_used: u64,
    pub segments_available: u64,
    pub tree_nodes: u64,
    pub rebases: u64,
    /// Time spent with the state lock held for writing (readers of the file wait for these) by
    /// mutations and by the locked steps of `sync`, in total and the longest single hold.
    pub write_locked_micros: u64,
    pub write_locked_max_micros: u64,
    /// Time spent in garbage collection (inside mutations, so with the state lock held).
    pub gc_micros: u64,
    /// Time spent in tree commits, from taking the page images to publishing the new version
    /// (mostly writes and fsyncs with readers unblocked).
    pub tree_commit_micros: u64,
}

pub(crate) struct State {
    pub tree: FlexTree,
    pub space: Space,
    /// Operations applied in memory but not yet in the log file.
    pub log_buf: Vec<LogOp>,
    /// End of the valid log (where the next block goes) and the next block's sequence number.
    /// Every byte before `log_end` is durable: it advances only after the block's fsync, a tree
    /// commit resets it after the log reset's fsync, and open syncs the log it replayed. So
    /// `synced_log` never reports more than a crash keeps.
    pub log_end: u64,
    pub log_seq: u32,
    pub tree_version: u64,
    /// The log passed `log_max_bytes`: the next `sync` (or `maintain`) commits the tree.
    pub checkpoint_due: bool,
    /// Tree pages below `page_count` that neither the committed version nor the in-memory tree
    /// uses.
    pub free_pages: Vec<u64>,
    pub page_count: u64,
    /// Sticky after an I/O failure or a failure in the middle of an operation; changed only
    /// under the state write lock, so a mutation sees it before it starts.
    pub poison: Poison,
    /// Set once the current operation has changed the tree: a failure after that point leaves
    /// a partial operation in memory, so it poisons the file.
    pub op_started: bool,
    pub stats: FlexFileStats,
}

/// See the module docs and docs/format/flexfile.md.
pub struct FlexFile {
    pub(crate) name: String,
    pub(crate) opts: FlexFileOptions,
    pub(crate) data: Arc<dyn StorageFile>,
    pub(crate) tree_file: Arc<dyn StorageFile>,
    pub(crate) log_file: Arc<dyn StorageFile>,
    pub(crate) writer: Mutex<()>,
    pub(crate) state: RwLock<State>,
}

impl std::fmt::Debug for FlexFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlexFile").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Applies a logged operation to the tree: the one function both live operations and replay use.
pub(crate) fn apply_to_tree(tree: &mut FlexTree, op: &LogOp) -> Result<()> {
    match *op {
        LogOp::Insert { offset, len, addr } => tree.insert(offset, len, addr),
        LogOp::Collapse { offset, len } => tree.collapse(offset, len),
        LogOp::Relocate { offset, len, addr } => tree.remap(offset, len, addr),
    }
}

impl FlexFile {
    pub fn stats(&self) -> FlexFileStats {
        let st = self.state.read();
        let mut stats = st.stats;
        stats.logical_bytes = st.tree.len();
        stats.live_data_bytes = st.space.total_live_bytes;
        stats.data_bytes_written = st.space.data_bytes_written;
        stats.segments_used = st.space.used_segments();
        stats.segments_available = st.space.available_segments();
        stats.tree_nodes = st.tree.node_count() as u64;
        stats.rebases = st.tree.rebase_count();
        stats
    }

    /// The FlexTree, the open segment's write buffer and the logical-log buffer.
    pub fn memory_bytes(&self) -> u64 {
        let st = self.state.read();
        st.tree.memory_bytes() + st.space.buffer_memory_bytes() + (st.log_buf.capacity() * 24) as u64
    }

    /// The extents of `offset .. offset + len`, clipped to the range (diagnostics, tests).
    pub fn extents(&self, offset: u64, len: u64) -> Vec<Extent> {
        let mut out = Vec::new();
        self.state.read().tree.query(offset, len, &mut out);
        out
    }

    /// Checks the tree's invariants and the live-byte accounting against it.
    pub fn verify(&self) -> Result<()> {
        let st = self.state.read();
        st.tree.check_invariants().map_err(|e| Error::corruption(self.tree_name(), 0, e))?;
        let mut live = 0;
        st.tree.for_each(|e| live += if e.is_hole() { 0 } else { e.len });
        if live != st.space.total_live_bytes {
            return Err(Error::corruption(
                self.data_name(),
                0,
                format!("tree maps {live} data bytes, accounting says {}", st.space.total_live_bytes),
            ));
        }
        Ok(())
    }

    /// Makes everything durable and commits the tree so the next open replays nothing.
    pub fn close(&self) -> Result<()> {
        self.sync_unblocking(true)
    }

    pub(crate) fn data_name(&self) -> String {
        format!("{}.data", self.name)
    }
    pub(crate) fn tree_name(&self) -> String {
        format!("{}.tree", self.name)
    }

    pub(crate) fn check_usable(st: &State) -> Result<()> {
        st.poison.check()
    }

    /// Runs a mutation under the writer lock; an I/O error poisons the file (the durable state
    /// is then whatever the last successful sync left). Refusals (bad arguments, no space) leave
    /// the file unchanged and usable. When the operation fills the log buffer, the log commit
    /// (and a tree commit it makes due) runs after the state lock is released: the operation is
    /// complete, so readers may see the state meanwhile, and the writer lock, still held, keeps
    /// other mutations and commits out.
    pub(crate) fn mutate<T>(&self, f: impl FnOnce(&Self, &mut State) -> Result<T>) -> Result<T> {
        let _w = self.writer.lock();
        let (result, buffer_full) = self.with_state_locked(|st| {
            Self::check_usable(st)?;
            st.op_started = false;
            let result = f(self, st);
            if let Err(err) = &result {
                if st.op_started || !is_refusal(err) {
                    st.poison.record(err);
                }
            }
            let buffer_full = result.is_ok() && st.log_buf.len() >= self.opts.log_buffer_entries;
            Ok((result, buffer_full))
        })?;
        if buffer_full {
            self.commit_log_then_tree(false)?;
        }
        result
    }

    /// Appends `data` as new extents at `offset` (insert-range), logging one entry per extent.
    pub(crate) fn insert_locked(&self, st: &mut State, mut offset: u64, data: &[u8]) -> Result<()> {
        st.op_started = true;
        for chunk in data.chunks(self.opts.max_extent_bytes as usize) {
            let len = chunk.len() as u64;
            let addr = st.space.alloc(len, &*self.data)?;
            st.space.append(chunk);
            st.space.add_live(addr, len);
            let op = LogOp::Insert { offset, len, addr };
            apply_to_tree(&mut st.tree, &op)?;
            st.log_buf.push(op);
            offset += len;
        }
        st.stats.user_bytes_written += data.len() as u64;
        Ok(())
    }

    pub(crate) fn insert_hole_locked(&self, st: &mut State, offset: u64, len: u64) -> Result<()> {
        st.op_started = true;
        let mut done = 0;
        while done < len {
            let piece = (len - done).min(MAX_ENTRY_LEN);
            let op = LogOp::Insert { offset: offset + done, len: piece, addr: HOLE_ADDR };
            apply_to_tree(&mut st.tree, &op)?;
            st.log_buf.push(op);
            done += piece;
        }
        Ok(())
    }

    pub(crate) fn collapse_locked(&self, st: &mut State, offset: u64, len: u64) -> Result<()> {
        st.op_started = true;
        let mut mappings = Vec::new();
        st.tree.query(offset, len, &mut mappings);
        for m in mappings.iter().filter(|m| !m.is_hole()) {
            st.space.remove_live(m.addr, m.len);
        }
        let mut done = 0;
        while done < len {
            let piece = (len - done).min(MAX_ENTRY_LEN);
            let op = LogOp::Collapse { offset, len: piece };
            apply_to_tree(&mut st.tree, &op)?;
            st.log_buf.push(op);
            done += piece;
        }
        Ok(())
    }

    fn check_range(st: &State, offset: u64, len: u64, what: &str) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > st.tree.len()) {
            return Err(Error::invalid(format!(
                "flexfile {what} of {len} bytes at {offset} is past the end ({})",
                st.tree.len()
            )));
        }
        Ok(())
    }

    fn check_growth(new_len: Option<u64>) -> Result<()> {
        if new_len.is_none_or(|len| len > MAX_LOGICAL_BYTES) {
            return Err(Error::invalid("flexfile would exceed its 2^48-byte size limit"));
        }
        Ok(())
    }

    pub(crate) fn read_locked(&self, st: &State, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let n = (buf.len() as u64).min(st.tree.len().saturating_sub(offset)) as usize;
        let mut mappings = Vec::new();
        st.tree.query(offset, n as u64, &mut mappings);
        // Extents that are also adjacent on disk (in one segment) are read together: one read
        // per physical run, not per extent.
        let mut at = 0usize;
        let mut i = 0;
        while let Some(first) = mappings.get(i) {
            let mut run_len = first.len;
            i += 1;
            if !first.is_hole() {
                while let Some(m) = mappings.get(i) {
                    let adjacent = !m.is_hole()
                        && m.addr == first.addr + run_len
                        && st.space.segment_of(m.addr + m.len.max(1) - 1) == st.space.segment_of(first.addr);
                    if !adjacent {
                        break;
                    }
                    run_len += m.len;
                    i += 1;
                }
            }
            let dst = &mut buf[at..at + run_len as usize];
            if first.is_hole() {
                dst.fill(0);
            } else {
                st.space.read(first.addr, dst, &*self.data)?;
            }
            at += run_len as usize;
        }
        Ok(at)
    }
}

/// Errors that refuse an operation without changing anything (no poisoning).
pub(crate) fn is_refusal(err: &Error) -> bool {
    match err {
        Error::Io { context, .. } => context.starts_with("flexfile:"),
        _ => true,
    }
}

impl TableFile for FlexFile {
    fn len(&self) -> u64 {
        self.state.read().tree.len()
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let st = self.state.read();
        Self::check_usable(&st)?;
        self.read_locked(&st, offset, buf)
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.mutate(|this, st| {
            let len = st.tree.len();
            let end = offset.checked_add(data.len() as u64);
            Self::check_growth(end.map(|e| e.max(len)))?;
            this.make_room(st, data.len() as u64)?;
            if offset > len {
                this.insert_hole_locked(st, len, offset - len)?;
            }
            let overlap = (data.len() as u64).min(st.tree.len() - offset);
            if overlap > 0 {
                this.collapse_locked(st, offset, overlap)?;
            }
            this.insert_locked(st, offset, data)
        })
    }

    fn insert(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.mutate(|this, st| {
            Self::check_range(st, offset, 0, "insert")?;
            Self::check_growth(st.tree.len().checked_add(data.len() as u64))?;
            this.make_room(st, data.len() as u64)?;
            this.insert_locked(st, offset, data)
        })
    }

    fn collapse(&self, offset: u64, len: u64) -> Result<()> {
        self.mutate(|this, st| {
            Self::check_range(st, offset, len, "collapse")?;
            this.collapse_locked(st, offset, len)
        })
    }

    fn update(&self, offset: u64, old_len: u64, data: &[u8]) -> Result<()> {
        self.mutate(|this, st| {
            Self::check_range(st, offset, old_len, "update")?;
            Self::check_growth((st.tree.len() - old_len).checked_add(data.len() as u64))?;
            this.make_room(st, data.len() as u64)?;
            this.collapse_locked(st, offset, old_len)?;
            this.insert_locked(st, offset, data)
        })
    }

    fn read_extent(&self, offset: u64, max_len: usize) -> Result<Option<(u64, Vec<u8>)>> {
        let st = self.state.read();
        Self::check_usable(&st)?;
        let Some(extent) = st.tree.find(offset) else { return Ok(None) };
        let n = (max_len as u64).min(st.tree.len() - extent.offset) as usize;
        let mut buf = vec![0u8; n];
        let got = self.read_locked(&st, extent.offset, &mut buf)?;
        buf.truncate(got);
        Ok(Some((extent.offset, buf)))
    }

    fn sync(&self) -> Result<()> {
        self.sync_unblocking(false)
    }

    fn memory_bytes(&self) -> u64 {
        FlexFile::memory_bytes(self)
    }

    /// `log_end` is durable (see `State::log_end`); the pair is read under one lock, and both
    /// change together (a log commit's or a tree commit's publication).
    fn synced_log(&self) -> Option<LogMark> {
        let st = self.state.read();
        Some(LogMark { tree_version: st.tree_version, synced_bytes: st.log_end })
    }

    /// Garbage collection ahead of writes, and the tree commit that a log commit inside a
    /// mutation left due (run here, with readers unblocked, rather than under the state lock).
    /// No free segment to relocate into is not an error here: GC ahead of need is optional, and
    /// a write that truly lacks space reports it itself. Any other error is.
    fn maintain(&self) -> Result<()> {
        match self.collect_garbage_ahead() {
            Err(e) if !e.is_no_space() => return Err(e),
            _ => {}
        }
        if self.state.read().checkpoint_due {
            self.sync_unblocking(false)?;
        }
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.stats();
        vec![
            ("flexfile.live_data_bytes", s.live_data_bytes),
            ("flexfile.data_bytes_written", s.data_bytes_written),
            ("flexfile.gc_bytes_relocated", s.gc_bytes_relocated),
            ("flexfile.gc_segments_reclaimed", s.gc_segments_reclaimed),
            ("flexfile.log_commits", s.log_commits),
            ("flexfile.tree_commits", s.tree_commits),
            ("flexfile.segments_used", s.segments_used),
            ("flexfile.tree_nodes", s.tree_nodes),
            ("flexfile.write_locked_micros", s.write_locked_micros),
            ("flexfile.write_locked_max_micros", s.write_locked_max_micros),
            ("flexfile.gc_micros", s.gc_micros),
            ("flexfile.tree_commit_micros", s.tree_commit_micros),
        ]
    }
}

/// Counts one hold of the state write lock that began at `locked`.
pub(crate) fn record_write_hold(stats: &mut FlexFileStats, locked: std::time::Instant) {
    let micros = locked.elapsed().as_micros() as u64;
    stats.write_locked_micros += micros;
    stats.write_locked_max_micros = stats.write_locked_max_micros.max(micros);
}

pub(crate) fn no_space_error(what: String) -> Error {
    space::no_space(what)
}
