//! Opening a FlexFile: pick the newer valid tree header slot, load the tree, replay the log
//! blocks that name its version, cut a torn log tail, and rebuild the segment accounting.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_core::{Error, Poison, Result};
use strata_io::{OpenOptions, Storage, StorageFile};

use super::api::LogMark;
use super::file::{apply_to_tree, FlexFile, FlexFileStats, State};
use super::format::{self, LOG_HEADER_BYTES};
use super::options::FlexFileOptions;
use super::space::{self, Space};
use crate::flextree::page::{self, TreeHeader, HEADER_BYTES, HEADER_PAGES, PAGE_BYTES};
use crate::flextree::FlexTree;

fn read_slot(file: &dyn StorageFile, slot: u64) -> Result<Option<TreeHeader>> {
    let at = slot * PAGE_BYTES as u64;
    if file.len()? < at + HEADER_BYTES as u64 {
        return Ok(None);
    }
    let mut buf = [0u8; HEADER_BYTES];
    file.read_at(at, &mut buf)?;
    Ok(page::decode_header(&buf))
}

impl FlexFile {
    /// Opens (creating if needed) the FlexFile `name` in `storage`: files `{name}.data`,
    /// `{name}.tree`, `{name}.log`. Recovers the last durable state.
    pub fn open(storage: Arc<dyn Storage>, name: &str, opts: FlexFileOptions) -> Result<FlexFile> {
        open(storage, name, opts, None)
    }

    /// Like `open`, but refuses (`Error::Corruption` naming the log, the expected and the found
    /// length) a log for `synced.tree_version` that is shorter than `synced.synced_bytes` or whose
    /// valid blocks end before it, and a tree older than that version: `synced` is a mark the
    /// caller recorded from `synced_log` (FlexDB: in `flexdb-meta`).
    pub fn open_checked(
        storage: Arc<dyn Storage>,
        name: &str,
        opts: FlexFileOptions,
        synced: Option<LogMark>,
    ) -> Result<FlexFile> {
        open(storage, name, opts, synced)
    }
}

/// Opens the FlexFile `name`; `synced`: the caller's record of how far the log was durable
/// (`FlexFile::open_checked`), checked before the tree or the log is changed.
fn open(
    storage: Arc<dyn Storage>,
    name: &str,
    mut opts: FlexFileOptions,
    synced: Option<LogMark>,
) -> Result<FlexFile> {
    opts.validate()?;
    let data = storage.open(&format!("{name}.data"), OpenOptions::create())?;
    let tree_file = storage.open(&format!("{name}.tree"), OpenOptions::create())?;
    let log_file = storage.open(&format!("{name}.log"), OpenOptions::create())?;
    let tree_name = format!("{name}.tree");
    let log_name = format!("{name}.log");

    let (in_use, header) = newest_header(&*tree_file)?;
    let log_bytes = strata_io::read_all(&*log_file)?;
    let header = match header {
        Some(h) => {
            check_log_not_emptied(&log_bytes, &log_name, h.version)?;
            check_tree_not_older(synced, h.version, &tree_name)?;
            check_synced_length(synced, h.version, log_bytes.len() as u64, "file length", &log_name)?;
            h
        }
        None => {
            refuse_lost_tree(&log_bytes, synced, &tree_name)?;
            create(&*storage, &*tree_file, &*log_file, opts.segment_bytes)?
        }
    };
    let segment_bytes = header.segment_bytes;
    check_segment_bytes(segment_bytes, &opts, &tree_name)?;
    opts.segment_bytes = segment_bytes;
    let (mut tree, free_pages) = load_tree(&*tree_file, &header, &opts, &tree_name)?;

    let (log_end, log_seq) = replay(&mut tree, &log_bytes, header.version, &log_name)?;
    let valid_end = log_end.max(LOG_HEADER_BYTES as u64);
    check_synced_length(synced, header.version, valid_end, "end of its valid blocks", &log_name)?;
    if let Some(slot) = in_use {
        settle_header_slot(&*tree_file, slot)?;
    }
    settle_log(&*log_file, &log_bytes, log_end, header.version)?;

    let space = rebuild_space(&tree, segment_bytes, &opts, data.len()?, &format!("{name}.data"))?;
    // The log that freed them is durable now (`settle_log`): a free segment's bytes go back to
    // the file system, as a log commit gives back the segments it frees.
    space::punch_segments(&*data, space.free.iter().copied(), segment_bytes)?;

    let state = State {
        tree,
        space,
        log_buf: Vec::new(),
        log_end: valid_end,
        log_seq,
        tree_version: header.version,
        checkpoint_due: log_end > opts.log_max_bytes,
        free_pages,
        page_count: header.page_count,
        poison: Poison::new(),
        op_started: false,
        stats: FlexFileStats::default(),
    };
    Ok(FlexFile {
        name: name.to_string(),
        opts,
        data,
        tree_file,
        log_file,
        writer: Mutex::new(()),
        state: RwLock::new(state),
    })
}

/// The valid tree header of the higher version and its slot, if either slot holds one.
fn newest_header(tree_file: &dyn StorageFile) -> Result<(Option<u64>, Option<TreeHeader>)> {
    let slots = [read_slot(tree_file, 0)?, read_slot(tree_file, 1)?];
    Ok(slots
        .into_iter()
        .zip(0u64..)
        .filter_map(|(header, slot)| Some((slot, header?)))
        .max_by_key(|(_, header)| header.version)
        .unzip())
}

/// The data file's segment accounting, rebuilt from the extents the recovered tree maps.
fn rebuild_space(
    tree: &FlexTree,
    segment_bytes: u64,
    opts: &FlexFileOptions,
    data_file_bytes: u64,
    data_name: &str,
) -> Result<Space> {
    let mut space = Space::new(segment_bytes, opts.max_segments());
    let mut extents = Vec::new();
    tree.for_each(|e| {
        if !e.is_hole() {
            extents.push((e.addr, e.len));
        }
    });
    space.rebuild(data_file_bytes, &extents, data_name)?;
    Ok(space)
}

/// The segment size the tree header names must fit the options' extents and stay sane.
fn check_segment_bytes(segment_bytes: u64, opts: &FlexFileOptions, tree_name: &str) -> Result<()> {
    if !segment_bytes.is_multiple_of(4096)
        || segment_bytes < 4 * u64::from(opts.max_extent_bytes)
        || segment_bytes > 1 << 30
    {
        return Err(Error::corruption(tree_name, 0, format!("bad segment size {segment_bytes}")));
    }
    Ok(())
}

/// Loads the committed tree `header` names; returns it and the pages below `page_count` that it
/// does not use (free).
fn load_tree(
    tree_file: &dyn StorageFile,
    header: &TreeHeader,
    opts: &FlexFileOptions,
    tree_name: &str,
) -> Result<(FlexTree, Vec<u64>)> {
    let tree_len = tree_file.len()?;
    if header.page_count > tree_len.div_ceil(PAGE_BYTES as u64).max(HEADER_PAGES) {
        return Err(Error::corruption(
            tree_name,
            0,
            format!("header names {} pages, file is shorter", header.page_count),
        ));
    }
    let mut read_page = |p: u64, buf: &mut [u8]| {
        let offset = p * PAGE_BYTES as u64;
        tree_file.read_at(offset, buf).map_err(|e| short_file_is_corruption(e, tree_name, offset))
    };
    let (tree, used) = FlexTree::load(
        opts.tree,
        header.root_page,
        header.page_count,
        header.logical_len,
        tree_name,
        &mut read_page,
    )?;
    let free_pages = (HEADER_PAGES..header.page_count)
        .filter(|&p| !used.get(p as usize).copied().unwrap_or(true))
        .collect();
    Ok((tree, free_pages))
}

/// Makes the replayed log durable exactly as replayed: a log of an older tree version (or never
/// written, `log_end == 0`) starts afresh, a torn tail is cut. The valid bytes are written again
/// and synced even when unchanged: after a process kill the bytes read back may sit in the page
/// cache only, and after an fsync that failed earlier in this boot the kernel may have marked
/// them clean without writing them, so a sync alone would not make them durable; `State::log_end`
/// (which a commit record may soon name as synced, and after which new blocks go) must not count
/// bytes a power loss could still drop. A tree commit empties the log, so after a clean close
/// this is the log header alone.
fn settle_log(log_file: &dyn StorageFile, log_bytes: &[u8], log_end: u64, tree_version: u64) -> Result<()> {
    if log_end == 0 {
        log_file.write_at(0, &format::encode_log_header(tree_version))?;
        log_file.set_len(LOG_HEADER_BYTES as u64)?;
    } else {
        // A valid block whose second copy is cut short can end past the file: what the file
        // holds of it is written again all the same.
        let end = usize::try_from(log_end).unwrap_or(usize::MAX).min(log_bytes.len());
        log_file.write_at(0, log_bytes.get(..end).unwrap_or_default())?;
        if log_bytes.len() as u64 != log_end {
            log_file.set_len(log_end)?;
        }
    }
    log_file.sync()
}

/// Writes the tree header slot in use again and syncs it, for the reason `settle_log` writes the
/// log again: a header whose fsync failed earlier in this boot reads back from the page cache,
/// and the log soon names its version.
fn settle_header_slot(tree_file: &dyn StorageFile, slot: u64) -> Result<()> {
    let mut buf = [0u8; HEADER_BYTES];
    let at = slot * PAGE_BYTES as u64;
    tree_file.read_at(at, &mut buf)?;
    tree_file.write_at(at, &buf)?;
    tree_file.sync()
}

/// No valid tree header: creation never finished, unless the log holds entries or the caller
/// recorded a synced log mark (a commit point saw a committed tree): then the tree file lost its
/// headers, and creating an empty one would drop every committed byte silently.
fn refuse_lost_tree(log_bytes: &[u8], synced: Option<LogMark>, tree_name: &str) -> Result<()> {
    let block_at = log_bytes.get(LOG_HEADER_BYTES..).unwrap_or(&[]);
    if let Some(version) = format::decode_log_header(log_bytes) {
        if format::decode_block(block_at, version, 0).is_ok() {
            return Err(Error::corruption(tree_name, 0, "no valid tree header but the log holds entries"));
        }
    }
    match synced {
        Some(mark) => Err(Error::corruption(
            tree_name,
            0,
            format!(
                "no valid tree header, but a commit recorded tree version {} as durable",
                mark.tree_version
            ),
        )),
        None => Ok(()),
    }
}

/// The tree header in use must be at least the version a commit recorded: versions are
/// published only once their header is durable, and a later tree commit writes the other slot,
/// so an older one means the newer header slot was damaged and the log's entries for it are
/// gone with the tree commit that absorbed them.
fn check_tree_not_older(synced: Option<LogMark>, tree_version: u64, tree_name: &str) -> Result<()> {
    match synced {
        Some(mark) if mark.tree_version > tree_version => Err(Error::corruption(
            tree_name,
            0,
            format!(
                "tree version {tree_version} is older than version {} that a commit recorded as durable",
                mark.tree_version
            ),
        )),
        _ => Ok(()),
    }
}

/// The log of `tree_version` must reach the length a commit recorded as synced for that version
/// (a mark of an older version says nothing: a tree commit since absorbed that log). Shorter is
/// damage, not a torn tail: a crash only drops bytes that were never synced.
fn check_synced_length(
    synced: Option<LogMark>,
    tree_version: u64,
    found: u64,
    what: &str,
    log_name: &str,
) -> Result<()> {
    let Some(mark) = synced.filter(|m| m.tree_version == tree_version) else { return Ok(()) };
    if found >= mark.synced_bytes {
        return Ok(());
    }
    Err(Error::corruption(
        log_name,
        found,
        format!(
            "log shorter than its synced length: expected at least {} bytes (synced for tree \
             version {tree_version} at the last recorded commit), found {found} ({what})",
            mark.synced_bytes
        ),
    ))
}

/// The log's header is durable before any tree header (`create` writes it first; a tree
/// commit's reset rewrites it in place, never shortening the file below it), so a log shorter
/// than its header beside a valid tree header was emptied or cut after the fact: its synced
/// blocks are gone, not a torn tail.
fn check_log_not_emptied(log_bytes: &[u8], log_name: &str, tree_version: u64) -> Result<()> {
    if log_bytes.len() >= LOG_HEADER_BYTES {
        return Ok(());
    }
    Err(Error::corruption(
        log_name,
        log_bytes.len() as u64,
        format!(
            "log shorter than its header beside tree version {tree_version}: expected at least \
             {LOG_HEADER_BYTES} bytes, found {}",
            log_bytes.len()
        ),
    ))
}

/// A page the committed tree refers to lies past the end of the tree file: the file was cut
/// after the commit, which is corruption of it, not an I/O failure.
fn short_file_is_corruption(e: Error, name: &str, offset: u64) -> Error {
    match &e {
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof => Error::corruption(
            name,
            offset,
            format!("a page of the committed tree lies past the end of the file ({e})"),
        ),
        _ => e,
    }
}

/// Writes an empty tree (version 1) and an empty log for it.
fn create(
    storage: &dyn Storage,
    tree_file: &dyn StorageFile,
    log_file: &dyn StorageFile,
    segment_bytes: u64,
) -> Result<TreeHeader> {
    let header =
        TreeHeader { version: 1, root_page: 0, page_count: HEADER_PAGES, logical_len: 0, segment_bytes };
    log_file.write_at(0, &format::encode_log_header(1))?;
    log_file.set_len(LOG_HEADER_BYTES as u64)?;
    log_file.sync()?;
    tree_file.set_len(HEADER_PAGES * PAGE_BYTES as u64)?;
    tree_file.write_at(PAGE_BYTES as u64, &page::encode_header(&header))?;
    tree_file.sync()?;
    storage.sync_dir()?;
    Ok(header)
}

/// A valid block at or after a bad one, found by scanning (blocks start at multiples of 8).
enum Found {
    /// The second copy of the expected block, at this position.
    Copy(usize),
    /// A later block: the bad one had been synced, so this is damage, not a torn tail.
    Later(usize),
}

fn scan(blocks: &[u8], from: usize, version: u64, seq: u32) -> Option<Found> {
    let mut pos = from;
    while pos + format::BLOCK_HEADER_BYTES <= blocks.len() {
        let bytes = blocks.get(pos..).unwrap_or(&[]);
        if bytes.starts_with(format::BLOCK_MAGIC) {
            match format::valid_block_seq(bytes, version) {
                Some(s) if s == seq => return Some(Found::Copy(pos)),
                Some(s) if s > seq => return Some(Found::Later(pos)),
                _ => {}
            }
        }
        pos += 8;
    }
    None
}

/// Applies the log's blocks for `version` to `tree`. Every block is stored twice; a block is used
/// from its first valid copy. Returns the end of the valid log and the next block sequence
/// number; `(0, 0)` when the log is not for this version.
fn replay(tree: &mut FlexTree, log: &[u8], version: u64, file: &str) -> Result<(u64, u32)> {
    let blocks = log.get(LOG_HEADER_BYTES..).unwrap_or(&[]);
    match format::decode_log_header(log) {
        Some(v) if v == version => {}
        Some(v) if v > version => {
            return Err(Error::corruption(
                file,
                0,
                format!("log names tree version {v}, tree is at {version}"),
            ));
        }
        Some(_) => return Ok((0, 0)),
        None => {
            if scan(blocks, 0, version, 0).is_some() {
                return Err(Error::corruption(file, 0, "damaged log header before valid log blocks"));
            }
            return Ok((0, 0));
        }
    }
    let mut at = 0usize;
    let mut seq = 0u32;
    loop {
        let (ops, next) = match format::decode_block(blocks.get(at..).unwrap_or(&[]), version, seq) {
            Ok((ops, size)) => (ops, at + 2 * size),
            Err(_) => match scan(blocks, at + 8, version, seq) {
                Some(Found::Copy(pos)) => {
                    match format::decode_block(blocks.get(pos..).unwrap_or(&[]), version, seq) {
                        Ok((ops, size)) => (ops, pos + size),
                        Err(_) => break,
                    }
                }
                Some(Found::Later(pos)) => {
                    return Err(Error::corruption(
                        file,
                        (LOG_HEADER_BYTES + at) as u64,
                        format!(
                            "damaged log block {seq} (both copies) before block at {}",
                            LOG_HEADER_BYTES + pos
                        ),
                    ));
                }
                // A torn last block from a crash before its sync returned.
                None => break,
            },
        };
        for op in &ops {
            apply_to_tree(tree, op).map_err(|e| {
                Error::corruption(
                    file,
                    (LOG_HEADER_BYTES + at) as u64,
                    format!("log entry {op:?} does not apply: {e}"),
                )
            })?;
        }
        at = next;
        seq += 1;
    }
    Ok(((LOG_HEADER_BYTES + at) as u64, seq))
}
