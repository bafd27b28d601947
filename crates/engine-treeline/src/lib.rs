//! Engine `treeline` (issue #18): TreeLine (Yu et al., VLDB 2022) on Strata — an update-in-place
//! store for NVMe SSDs with a record cache, page grouping by learned linear models, and insert
//! forecasting. **The engine is being built**; this crate holds its foundations, pure and tested
//! data structures, and is not yet registered with the `strata` facade.
//!
//! Here now:
//! * [`page`]: the slotted data page (fences with prefix compression, sorted slots from the front,
//!   records from the back, checksum, validation of untrusted bytes). Layout:
//!   docs/format/treeline.md.
//! * [`key_projection`]: order-preserving `u64` projections of byte-string keys, for the models.
//! * [`model::plr`]: the optimal streaming piecewise-linear regression with error ±ε.
//! * [`model::segment_model`]: the model stored in a segment's head and the Phase II/III segment
//!   planner (records → segments of 1, 2, 4, 8, 16 pages that never overfill a page).
//! * [`forecast`]: insert forecasting by epochs of equi-depth histograms (paper §4.6).
//! * [`free_space`]: segment slots of the data file, a free list per size class.
//!
//! Planned engine modules (next): a record cache over strata-kit's cache (clock eviction with
//! priorities, dirty write-back grouped by page, tombstones held until written back); the
//! in-memory index, a `BTreeMap<Key, SegmentEntry>` behind a `RwLock` mapping each segment's lower
//! bound to its page id, page count and model; reorganization in four phases (range detection,
//! model building, segment write-out, index update) with a reorg log carrying production ids;
//! durability through strata-wal; and recovery that rebuilds the index by scanning segment heads
//! and resolves in-flight reorganizations by production id (paper §4.7).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing))]

pub mod forecast;
pub mod free_space;
pub mod key_projection;
pub mod model;
pub mod page;
