//! Strata's shared write-ahead log: crc32c-checksummed records in segment files, one record per
//! atomic batch, group commit, segment recycling, and recovery that tells a torn tail (dropped or
//! reported, per [`RecoveryMode`](strata_core::RecoveryMode)) from mid-log corruption (always
//! reported). `sync` and `close` end with a durability marker record, so damage to the records
//! they made durable is reported too; after `open`, appends continue the last segment. Byte
//! layout and recovery rules: `docs/format/wal.md`.
//!
//! How an engine uses it — it holds its own write lock around append + apply, so log order equals
//! apply order, and waits for durability after releasing it, so concurrent writers share syncs:
//! ```
//! # use std::sync::Arc;
//! # use strata_core::Durability;
//! # use strata_wal::{Wal, WalOptions};
//! # fn main() -> strata_core::Result<()> {
//! let storage = Arc::new(strata_io::MemStorage::new());
//! let engine_lock = parking_lot::Mutex::new(());
//! let snapshot_lsn = 0; // what the engine's own durable state covers
//! let (wal, _report) = Wal::open_located(storage, WalOptions::default(), snapshot_lsn + 1, &mut |_at, _payload| {
//!     Ok(()) // re-apply the encoded batch
//! })?;
//! let lsn = {
//!     let _guard = engine_lock.lock();
//!     let lsn = wal.append(b"encoded batch")?;
//!     // apply the batch to the in-memory state here
//!     lsn
//! };
//! wal.commit(lsn, Durability::Sync)?;
//! // checkpoint: make the log durable, persist a snapshot covering lsn <= s, then release the log
//! let s = wal.sync()?;
//! wal.truncate_before(s + 1)?;
//! wal.close()?;
//! # Ok(())
//! # }
//! ```

mod counters;
mod format;
mod options;
mod recovery;
mod segment_reader;
mod segments;
mod state;
mod wal;

pub use format::MAX_PAYLOAD_BYTES;
pub use options::{RecoveryReport, WalOptions, WalStats, MIN_SEGMENT_BYTES};
pub use recovery::RecordLocation;
pub use segment_reader::RECOVERY_READ_WINDOW_BYTES;
pub use wal::Wal;

/// Log sequence number of a record: the first record ever is 1, and each record is one more than
/// the one before. 0 means "no record".
pub type Lsn = u64;

/// The highest lsn a log uses: 2^63 records is beyond any real log, so a larger one (in a segment
/// header, or a `min_lsn` a caller read from a damaged but checksum-valid file) is refused as
/// corruption or an invalid argument instead of overflowing at the next append.
pub const MAX_LSN: Lsn = u64::MAX / 2;
