//! The damage targets: which seed store each one damages, which of its files, and how to reseal
//! them. `fuzz_targets/<name>.rs` runs `damaged_store(&targets::<NAME>, data)`; the tests in
//! `fuzz/tests/` go through [`ALL`].

use strata::EngineKind;

use crate::reseal::{self, Reseal};
use crate::Seed;

/// One damage target.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// The cargo-fuzz target's name.
    pub name: &'static str,
    pub kind: EngineKind,
    /// The seed store damaged: the cleanly closed one, or the one a power cut left.
    pub seed: Seed,
    /// The files of the seed store the input picks from.
    pub pick: fn(&str) -> bool,
    /// Rewrites the checksums of a damaged file (`reseal`), when the input asks for it.
    pub reseal: Reseal,
    /// Granularity of the file's records or pages (or a divisor of it that aligns them all): the
    /// edits' third alignment choice, so a copy or removal can move whole checksummed units. 8
    /// (the second choice) where records are 8-aligned and of varying length.
    pub unit: usize,
    /// Bytes of the file's header: a picked file longer than this holds records or pages
    /// (`fuzz/tests/seed_files.rs`).
    pub header_bytes: usize,
    /// The file holds user keys and values, so resealed damage can change them into other valid
    /// data: reads are then only checked for consistency, not against the workload.
    pub holds_values: bool,
    /// A failed open must be `Error::Corruption` (or `Error::Incompatible`, which is what a
    /// damaged version or engine name is documented to give). On for every target; a target
    /// whose engine is known to break it may turn it off until it is fixed.
    pub open_errors_are_corruption: bool,
    /// A failed open must leave every file in place (`.tmp` files aside): what it refuses to
    /// open is left for inspection and repair. On for every target; a target whose engine is
    /// known to break it may turn it off until it is fixed.
    pub failed_open_keeps_files: bool,
    /// Reads of the clean seed after damage that was not resealed must return exactly the final
    /// contents (a lost write or an older value is a bug); off, they are checked against the
    /// history of values. On for every target; a target whose engine is known to break it may
    /// turn it off until it is fixed.
    pub last_values_exact: bool,
}

const fn target(name: &'static str, kind: EngineKind, seed: Seed, pick: fn(&str) -> bool) -> Target {
    Target {
        name,
        kind,
        seed,
        pick,
        reseal: reseal::none,
        unit: 8,
        header_bytes: 0,
        holds_values: false,
        open_errors_are_corruption: true,
        failed_open_keeps_files: true,
        last_values_exact: true,
    }
}

impl Target {
    const fn reseal(self, reseal: Reseal) -> Target {
        Target { reseal, ..self }
    }

    const fn unit(self, unit: usize) -> Target {
        Target { unit, ..self }
    }

    const fn header(self, header_bytes: usize) -> Target {
        Target { header_bytes, ..self }
    }

    const fn values(self) -> Target {
        Target { holds_values: true, ..self }
    }

    /// Turns `open_errors_are_corruption` off (a known engine violation, until it is fixed).
    #[allow(dead_code)] // kept for the next known violation
    const fn open_errors_may_be_other(self) -> Target {
        Target { open_errors_are_corruption: false, ..self }
    }

    /// Turns `failed_open_keeps_files` off (a known engine violation, until it is fixed).
    #[allow(dead_code)] // kept for the next known violation
    const fn failed_open_may_remove_files(self) -> Target {
        Target { failed_open_keeps_files: false, ..self }
    }

    /// Turns `last_values_exact` off (a known engine violation, until it is fixed).
    #[allow(dead_code)] // kept for the next known violation
    const fn reads_may_be_stale(self) -> Target {
        Target { last_values_exact: false, ..self }
    }
}

use EngineKind::{Flex, Laser, Memory, Treeline, Turtle, F2};
use Seed::{Clean, Crash, DoubleWrite};

const WAL_HEADER: usize = 32;
const PAGE: usize = reseal::TREELINE_PAGE_BYTES;
const F2_PAGE: usize = reseal::F2_PAGE_BYTES;

pub const MANIFEST: Target =
    target("manifest", Memory, Clean, |n| n == "STRATA-MANIFEST").reseal(reseal::trailing_crc).unit(1);
pub const MEMORY_WAL: Target = target("memory_wal", Memory, Clean, |n| n.starts_with("wal-"))
    .reseal(reseal::wal)
    .header(WAL_HEADER)
    .values();
pub const MEMORY_SNAPSHOT: Target = target("memory_snapshot", Memory, Clean, |n| n.starts_with("snapshot-"))
    .reseal(reseal::memory_snapshot)
    .header(32 + 24)
    .values();
pub const FLEX_WAL: Target = target("flex_wal", Flex, Crash, |n| n.starts_with("flexdb-wal-"))
    .reseal(reseal::wal)
    .header(WAL_HEADER)
    .values();
pub const FLEX_META: Target =
    target("flex_meta", Flex, Clean, |n| n == "flexdb-meta").reseal(reseal::trailing_crc).unit(1);
pub const FLEX_TABLE_DATA: Target =
    target("flex_table_data", Flex, Clean, |n| n == "flexdb-table.data").reseal(reseal::flexdb_data).values();
/// The log is the header alone after a clean close (the close commits the tree): the seed a power
/// cut left holds blocks.
pub const FLEX_TABLE_LOG: Target = target("flex_table_log", Flex, Crash, |n| n == "flexdb-table.log")
    .reseal(reseal::flexfile_log)
    .unit(8)
    .header(32);
pub const FLEX_TREE: Target = target("flex_tree", Flex, Clean, |n| n == "flexdb-table.tree")
    .reseal(reseal::flextree)
    .unit(4096)
    .header(2 * 4096);
pub const F2_WAL: Target =
    target("f2_wal", F2, Crash, |n| n.starts_with("f2wal-")).reseal(reseal::wal).header(WAL_HEADER).values();
pub const F2_CHECKPOINT: Target =
    target("f2_checkpoint", F2, Clean, |n| n == "f2-checkpoint").reseal(reseal::f2_checkpoint).unit(1);
pub const F2_HOT_INDEX: Target = target("f2_hot_index", F2, Clean, |n| n == "f2-hot-index")
    .reseal(reseal::f2_hot_index)
    .unit(4)
    .header(64);
pub const F2_HOT_LOG: Target =
    target("f2_hot_log", F2, Clean, |n| n.starts_with("f2-hot-") && n.ends_with(".seg"))
        .reseal(reseal::f2_log)
        .unit(F2_PAGE)
        .header(64)
        .values();
pub const F2_COLD_LOG: Target = target("f2_cold_log", F2, Clean, |n| n.starts_with("f2-cold-"))
    .reseal(reseal::f2_log)
    .unit(F2_PAGE)
    .header(64)
    .values();
/// Chunk records hold cold-log addresses, not user data.
pub const F2_CHUNK_LOG: Target = target("f2_chunk_log", F2, Clean, |n| n.starts_with("f2-chunk-"))
    .reseal(reseal::f2_log)
    .unit(F2_PAGE)
    .header(64);
pub const TREELINE_WAL: Target = target("treeline_wal", Treeline, Crash, |n| n.starts_with("treeline-wal-"))
    .reseal(reseal::wal)
    .header(WAL_HEADER)
    .values();
pub const TREELINE_CHECKPOINT: Target =
    target("treeline_checkpoint", Treeline, Crash, |n| n == "treeline-checkpoint")
        .reseal(reseal::trailing_crc)
        .unit(1);
pub const TREELINE_FORECAST: Target =
    target("treeline_forecast", Treeline, Crash, |n| n == "treeline-forecast").reseal(reseal::trailing_crc);
pub const TREELINE_DATA: Target = target("treeline_data", Treeline, Crash, |n| n == "treeline-data")
    .reseal(reseal::treeline_data)
    .unit(PAGE)
    .header(PAGE)
    .values();
pub const TREELINE_DWB: Target = target("treeline_dwb", Treeline, DoubleWrite, |n| n == "treeline-dwb")
    .reseal(reseal::treeline_dwb)
    .unit(32 + PAGE)
    .values();
pub const TURTLE_WAL: Target = target("turtle_wal", Turtle, Crash, |n| n.starts_with("turtle-wal-"))
    .reseal(reseal::wal)
    .header(WAL_HEADER)
    .values();
/// `turtle-checkpoint` has f2-checkpoint's layout: the CRC at 12 covers bytes 16 on.
pub const TURTLE_CHECKPOINT: Target =
    target("turtle_checkpoint", Turtle, Clean, |n| n == "turtle-checkpoint")
        .reseal(reseal::f2_checkpoint)
        .unit(1);
/// Node pages and sorted runs in 4 KiB extents. Not resealed yet: every node page and every
/// run block carries its own CRC, so damage mostly stops at the checksums.
pub const TURTLE_PAGES: Target =
    target("turtle_pages", Turtle, Clean, |n| n == "turtle-pages").unit(4096).values();

pub const LASER_WAL: Target = target("laser_wal", Laser, Crash, |n| n.starts_with("laser-wal-"))
    .reseal(reseal::wal)
    .header(WAL_HEADER)
    .values();
/// `laser-manifest` has f2-checkpoint's layout: the CRC at 12 covers bytes 16 on.
pub const LASER_MANIFEST: Target =
    target("laser_manifest", Laser, Clean, |n| n == "laser-manifest").reseal(reseal::f2_checkpoint).unit(1);
/// Level 0 and column-group runs (kit sorted runs, blocks aligned to 4 KiB). Not resealed: every
/// block carries its own CRC.
pub const LASER_RUNS: Target =
    target("laser_runs", Laser, Clean, |n| n.starts_with("laser-") && n.ends_with(".run"))
        .unit(4096)
        .values();

/// Every damage target.
pub const ALL: [Target; 25] = [
    MANIFEST,
    MEMORY_WAL,
    MEMORY_SNAPSHOT,
    FLEX_WAL,
    FLEX_META,
    FLEX_TABLE_DATA,
    FLEX_TABLE_LOG,
    FLEX_TREE,
    F2_WAL,
    F2_CHECKPOINT,
    F2_HOT_INDEX,
    F2_HOT_LOG,
    F2_COLD_LOG,
    F2_CHUNK_LOG,
    TREELINE_WAL,
    TREELINE_CHECKPOINT,
    TREELINE_FORECAST,
    TREELINE_DATA,
    TREELINE_DWB,
    TURTLE_WAL,
    TURTLE_CHECKPOINT,
    TURTLE_PAGES,
    LASER_WAL,
    LASER_MANIFEST,
    LASER_RUNS,
];
