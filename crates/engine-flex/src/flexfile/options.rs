//! Tuning of a FlexFile.

use strata_core::{Error, Result};

use crate::flextree::FlexTreeConfig;

/// Options of [`super::FlexFile::open`]. Defaults follow the paper (§4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlexFileOptions {
    /// Segment size of the data file (4 MiB). Recorded in the tree file: an existing FlexFile
    /// keeps the size it was created with.
    pub segment_bytes: u64,
    /// Longest extent (128 KiB = 1/32 of a segment); larger writes become several extents.
    pub max_extent_bytes: u32,
    /// Most bytes the data file may occupy; beyond that writes fail with a no-space error.
    pub max_data_bytes: u64,
    /// Segments kept free for garbage collection to relocate into (paper: 64).
    pub reserved_segments: u64,
    /// Live data may fill at most this many 32nds of the non-reserved space (paper: 30), which
    /// guarantees a GC victim with at least two extents' worth of garbage.
    pub max_utilization_32nds: u64,
    /// GC also runs when live data fills less than this percentage of the used segments.
    pub gc_trigger_percent: u64,
    /// Commit the log buffer (a `sync`) once it holds this many entries.
    pub log_buffer_entries: usize,
    /// Commit the tree (copy-on-write) once the log file exceeds this many bytes.
    pub log_max_bytes: u64,
    pub tree: FlexTreeConfig,
}

impl Default for FlexFileOptions {
    fn default() -> Self {
        FlexFileOptions {
            segment_bytes: 4 << 20,
            max_extent_bytes: 128 << 10,
            max_data_bytes: 1 << 40,
            reserved_segments: 64,
            max_utilization_32nds: 30,
            gc_trigger_percent: 50,
            log_buffer_entries: 1 << 16,
            log_max_bytes: 8 << 20,
            tree: FlexTreeConfig::default(),
        }
    }
}

impl FlexFileOptions {
    /// Small sizes so tests reach segment rollover, GC and tree commits quickly.
    pub fn for_tests() -> Self {
        FlexFileOptions {
            segment_bytes: 64 << 10,
            max_extent_bytes: 4 << 10,
            max_data_bytes: 4 << 20,
            reserved_segments: 4,
            log_buffer_entries: 512,
            log_max_bytes: 16 << 10,
            tree: FlexTreeConfig {
                leaf_capacity: 8,
                internal_capacity: 8,
                max_merge_bytes: 4 << 10,
                merge_boundary_bytes: 0,
                rebase_threshold: 1 << 20,
            },
            ..FlexFileOptions::default()
        }
    }

    pub(crate) fn validate(&mut self) -> Result<()> {
        crate::flextree::check_tree_config(&self.tree)?;
        self.tree.max_merge_bytes = self.tree.max_merge_bytes.min(self.max_extent_bytes);
        // An extent spanning two segments would be read and accounted in the wrong segment.
        self.tree.merge_boundary_bytes = self.segment_bytes;
        let extent = u64::from(self.max_extent_bytes);
        let ok = self.segment_bytes.is_multiple_of(4096)
            && self.segment_bytes <= 1 << 30
            && extent >= 1
            && extent * 4 <= self.segment_bytes
            && self.max_utilization_32nds >= 1
            && self.max_utilization_32nds <= 30
            && self.max_data_bytes / self.segment_bytes >= self.reserved_segments + 4
            && self.max_data_bytes < 1 << 47
            && self.log_buffer_entries >= 1
            && self.log_buffer_entries <= super::format::MAX_BLOCK_ENTRIES / 2;
        if !ok {
            return Err(Error::invalid(format!("bad FlexFile options {self:?}")));
        }
        Ok(())
    }

    pub(crate) fn max_segments(&self) -> u64 {
        self.max_data_bytes / self.segment_bytes
    }
}
