//! Making a FlexFile durable in the order of the paper's Figure 9: data fsync → log block →
//! log fsync; and, when the log is long, the copy-on-write tree commit: nodes → fsync → header
//! slot → fsync → log reset → fsync.

use strata_core::Result;

use super::file::{FlexFile, State};
use super::format::{self, LogOp, LOG_HEADER_BYTES};
use crate::flextree::page::{self, TreeHeader, PAGE_BYTES};

/// A log commit between its locked preparation and its unlocked I/O.
pub(crate) struct PreparedCommit {
    block: Vec<u8>,
    block_at: u64,
    /// Segments emptied before this commit; free once it is durable.
    released: Vec<u64>,
}

impl FlexFile {
    /// Hands buffered data to the data file and takes the log buffer (under the state lock).
    fn prepare_commit(&self, st: &mut State) -> Result<Option<PreparedCommit>> {
        if st.log_buf.is_empty() {
            return Ok(None);
        }
        st.space.flush_open(&*self.data)?;
        let ops: Vec<LogOp> = std::mem::take(&mut st.log_buf);
        // Each block is written twice in one write: a bit flip in a synced block leaves the
        // other copy intact, so damage to the last block is never mistaken for a torn tail.
        let mut block = format::encode_block(&ops, st.tree_version, st.log_seq);
        block.extend_from_within(..);
        Ok(Some(PreparedCommit {
            block,
            block_at: st.log_end,
            released: std::mem::take(&mut st.space.pending),
        }))
    }

    /// The I/O of a log commit; needs no state lock (the writer lock keeps commits in order).
    fn write_commit(&self, commit: &PreparedCommit) -> Result<()> {
        self.data.sync()?;
        self.log_file.write_at(commit.block_at, &commit.block)?;
        self.log_file.sync()
    }

    fn finish_commit(&self, st: &mut State, commit: PreparedCommit) -> Result<()> {
        st.log_end = commit.block_at + commit.block.len() as u64;
        st.log_seq += 1;
        st.stats.log_commits += 1;
        st.space.release(commit.released);
        if st.log_end > self.opts.log_max_bytes {
            self.checkpoint_locked(st)?;
        }
        Ok(())
    }

    fn poison_on_error<T>(st: &mut State, result: Result<T>) -> Result<T> {
        if let Err(err) = &result {
            st.poisoned.get_or_insert_with(|| err.to_string());
        }
        result
    }

    /// A whole log commit with the state lock held (inside mutations: GC, full log buffer).
    pub(crate) fn commit_locked(&self, st: &mut State) -> Result<()> {
        Self::check_usable(st)?;
        let result = (|| {
            let Some(commit) = self.prepare_commit(st)? else { return Ok(()) };
            self.write_commit(&commit)?;
            self.finish_commit(st, commit)
        })();
        Self::poison_on_error(st, result)
    }

    /// `sync`: readers are blocked only while the buffer is handed over, not during the fsyncs.
    pub(crate) fn sync_unblocking(&self) -> Result<()> {
        let _w = self.writer.lock();
        let commit = {
            let mut st = self.state.write();
            Self::check_usable(&st)?;
            let prepared = self.prepare_commit(&mut st);
            match Self::poison_on_error(&mut st, prepared)? {
                Some(commit) => commit,
                None => return Ok(()),
            }
        };
        let written = self.write_commit(&commit);
        let mut st = self.state.write();
        Self::poison_on_error(&mut st, written)?;
        let finished = self.finish_commit(&mut st, commit);
        Self::poison_on_error(&mut st, finished)
    }

    /// Commits the in-memory tree to the tree file copy-on-write and resets the log. Requires an
    /// empty log buffer (call after a log commit).
    pub(crate) fn checkpoint_locked(&self, st: &mut State) -> Result<()> {
        let started = std::time::Instant::now();
        let result = self.checkpoint_inner(st);
        st.stats.tree_commit_micros += started.elapsed().as_micros() as u64;
        Self::poison_on_error(st, result)
    }

    fn checkpoint_inner(&self, st: &mut State) -> Result<()> {
        debug_assert!(st.log_buf.is_empty(), "checkpoint with uncommitted log entries");
        let version = st.tree_version + 1;
        let State { tree, free_pages, page_count, .. } = st;
        // Pages of the committed version are never in `free_pages`: CoW never overwrites them.
        free_pages.sort_unstable_by(|a, b| b.cmp(a));
        let mut alloc = || {
            free_pages.pop().unwrap_or_else(|| {
                *page_count += 1;
                *page_count - 1
            })
        };
        let tree_file = &self.tree_file;
        let mut write = |page_no: u64, bytes: &[u8]| tree_file.write_at(page_no * PAGE_BYTES as u64, bytes);
        let root_page = tree.write_dirty(version, &mut alloc, &mut write)?;
        self.tree_file.sync()?;
        let header = TreeHeader {
            version,
            root_page,
            page_count: st.page_count,
            logical_len: st.tree.len(),
            segment_bytes: st.space.segment_bytes,
        };
        self.tree_file.write_at((version % 2) * PAGE_BYTES as u64, &page::encode_header(&header))?;
        self.tree_file.sync()?;
        st.tree_version = version;
        let freed = st.tree.take_freed_pages();
        st.free_pages.extend(freed);
        st.stats.tree_commits += 1;
        // The log's entries are all in the tree now; a crash before the reset is harmless (the
        // log names the older version and is ignored).
        self.log_file.write_at(0, &format::encode_log_header(version))?;
        self.log_file.set_len(LOG_HEADER_BYTES as u64)?;
        self.log_file.sync()?;
        st.log_end = LOG_HEADER_BYTES as u64;
        st.log_seq = 0;
        Ok(())
    }
}
