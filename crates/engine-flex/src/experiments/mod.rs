//! The FlexFile paper's data-structure experiments (§6.1 Table 1, §6.2 Table 2's random insert),
//! as functions both `strata repro flex` and engine-flex's cargo benches call, so the two measure
//! the same thing. Each returns what it measured plus what a caller needs to check the run did
//! the work it claims (counts, lookups that found the right address, the file's final length).

mod extent_index;
mod insert_range;

pub use extent_index::{
    extent_addr, new_index, run_table1, ExtentIndex, IndexKind, IndexTimes, Table1Sizes, EXTENT_BYTES,
};
pub use insert_range::{
    block_id, filesystem_name, flexfile_random_insert, fs_random_insert, insert_offsets_blocks,
    rewrite_random_insert, FsInsertOutcome, InsertLimits, InsertRun, BLOCK_BYTES, FLEXFILE_NAME,
    FS_INSERT_FILE_NAME, REWRITE_FILE_NAME,
};

/// Bytes this process has caused to be sent to the block layer so far (`/proc/self/io`
/// `write_bytes`: charged when a page is dirtied, so it covers buffered writes but not the
/// journal or metadata a filesystem's kernel threads write). 0 where the file is absent.
pub fn process_write_bytes() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    io.lines().find_map(|l| l.strip_prefix("write_bytes: ").and_then(|v| v.trim().parse().ok())).unwrap_or(0)
}

/// splitmix64: a seeded, dependency-free generator; the experiments need reproducible offsets,
/// not statistical quality beyond "uniform enough".
#[derive(Clone, Debug)]
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub(crate) fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max` (Lemire's multiply-shift: the bias is range / 2^64, nothing at these sizes).
    pub(crate) fn up_to(&mut self, max: u64) -> u64 {
        ((u128::from(self.next_u64()) * (u128::from(max) + 1)) >> 64) as u64
    }
}
