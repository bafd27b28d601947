//! The LSM-tree as of one manifest (`Version`): level 0's row runs, newest first, and each
//! deeper level's column groups with their runs, open and shared. A version never changes: a
//! flush or compaction builds the next one and swaps it in; readers keep the one they started
//! with. A run a newer manifest no longer names is removed once the last version holding it
//! is dropped (`Run::retire`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use strata_core::Result;
use strata_io::{OpenOptions, Storage};
use strata_kit::sorted_run::{BlockCache, RunReader};

use crate::layout::{ColumnSet, Columns};
use crate::manifest::{run_file_name, GroupMeta, Manifest, RunMeta};

/// One open run file.
#[derive(Debug)]
pub struct Run {
    pub meta: RunMeta,
    pub reader: Arc<RunReader>,
    storage: Arc<dyn Storage>,
    /// Set once a durable manifest no longer names the run: its file goes with the last holder.
    retired: AtomicBool,
}

impl Run {
    /// Opens run `meta` (its length checked by the reader's footer and the manifest's length).
    pub fn open(
        storage: &Arc<dyn Storage>,
        meta: RunMeta,
        direct_io: bool,
        cache: &Arc<BlockCache>,
    ) -> Result<Run> {
        let name = run_file_name(meta.id);
        if !storage.exists(&name)? {
            return Err(strata_core::Error::corruption(
                name,
                0,
                "the run file is missing; the manifest names it",
            ));
        }
        let file = storage.open(&name, OpenOptions::existing().with_direct(direct_io))?;
        let len = file.len()?;
        if len != meta.len_bytes {
            return Err(strata_core::Error::corruption(
                name,
                len.min(meta.len_bytes),
                format!("the run is {len} bytes; the manifest says {}", meta.len_bytes),
            ));
        }
        let reader = RunReader::open_cached(file, &name, 0, len, Some(cache.clone()))?;
        Ok(Run { meta, reader: Arc::new(reader), storage: storage.clone(), retired: AtomicBool::new(false) })
    }

    /// The run is no longer named by the durable manifest: its file is removed when the last
    /// version (or scan) holding it lets go. A removal that fails leaves a file the next open
    /// removes.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }

    pub fn file_name(&self) -> String {
        run_file_name(self.meta.id)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if self.retired.load(Ordering::Acquire) {
            let _ = self.storage.remove(&self.file_name());
        }
    }
}

/// A column group of a level below 0, and its run.
#[derive(Clone, Debug)]
pub struct Group {
    pub set: ColumnSet,
    pub run: Option<Arc<Run>>,
}

impl Group {
    pub fn bytes(&self) -> u64 {
        self.run.as_ref().map_or(0, |r| r.meta.len_bytes)
    }
}

/// See the module documentation. `levels[i]` is level `i + 1`.
#[derive(Clone, Debug, Default)]
pub struct Version {
    pub level0: Vec<Arc<Run>>,
    pub levels: Vec<Vec<Group>>,
}

impl Version {
    /// Opens every run the manifest names.
    pub fn open(
        manifest: &Manifest,
        columns: &Columns,
        storage: &Arc<dyn Storage>,
        direct_io: bool,
        cache: &Arc<BlockCache>,
    ) -> Result<Version> {
        let open = |meta: &RunMeta| Run::open(storage, *meta, direct_io, cache).map(Arc::new);
        let level0 = manifest.level0.iter().map(open).collect::<Result<Vec<_>>>()?;
        let mut levels = Vec::with_capacity(manifest.levels.len());
        for groups in &manifest.levels {
            let groups = groups
                .iter()
                .map(|g| {
                    Ok(Group {
                        set: ColumnSet::new(g.columns.clone(), columns),
                        run: g.run.as_ref().map(open).transpose()?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            levels.push(groups);
        }
        Ok(Version { level0, levels })
    }

    /// The manifest's level lists for this version.
    pub fn level_metas(&self) -> (Vec<RunMeta>, Vec<Vec<GroupMeta>>) {
        let level0 = self.level0.iter().map(|r| r.meta).collect();
        let levels = self
            .levels
            .iter()
            .map(|groups| {
                groups
                    .iter()
                    .map(|g| GroupMeta { columns: g.set.ids().to_vec(), run: g.run.as_ref().map(|r| r.meta) })
                    .collect()
            })
            .collect();
        (level0, levels)
    }

    /// Every run, level 0 first.
    pub fn runs(&self) -> impl Iterator<Item = &Arc<Run>> {
        self.level0.iter().chain(self.levels.iter().flatten().filter_map(|g| g.run.as_ref()))
    }

    /// Bytes of level `level` (1 and deeper) and of its groups.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels.get(level - 1).map_or(0, |groups| groups.iter().map(Group::bytes).sum())
    }

    /// Whether any level below `level` holds a run of a group sharing a column with `set`.
    pub fn holds_below(&self, level: usize, set: &ColumnSet) -> bool {
        self.levels.iter().skip(level).flatten().any(|g| g.run.is_some() && g.set.intersects(set))
    }

    /// Memory the open runs hold (indexes, filters).
    pub fn memory_bytes(&self) -> u64 {
        self.runs().map(|r| r.reader.memory_bytes() as u64).sum()
    }
}
