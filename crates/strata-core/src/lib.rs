//! Strata's shared vocabulary. Every engine and every shared crate speaks these types; nothing here
//! does I/O.

mod batch;
pub mod batch_codec;
mod capabilities;
mod column_batch;
mod columnar;
mod engine;
mod engine_options;
mod error;
pub mod le_bytes;
mod poison;
mod range;
mod stats;

pub use batch::{BatchOp, WriteBatch};
pub use capabilities::{Capabilities, Maintenance, MaintenanceTask, NoMaintenance};
pub use column_batch::{batches_of_rows, BatchIter, ColumnBatch, LittleEndian, DEFAULT_BATCH_ROWS};
pub use columnar::{Column, ColumnarTable, Projection, RowEncodedTable, Schema};
pub use engine::{
    bulk_load_by_writes, wal_segment_bytes_for_budget, Durability, Engine, EngineConfig, KvIter, Limits,
    RecoveryMode, VerifyReport, BULK_LOAD_BATCH_BYTES, LARGEST_DEFAULT_WAL_SEGMENT_BYTES,
};
pub use engine_options::{
    parse_bytes, parse_engine_option, repeated_option_name, AutoOr, EngineOptionReader,
};
pub use error::{Error, Result};
pub use poison::Poison;
pub use range::{
    at_or_after, at_or_before, borrow_bound, bound_key, bounds_hold_nothing, Direction, KeyRange,
};
pub use stats::{IoStats, Stats};

/// Keys are arbitrary byte strings, ordered lexicographically.
pub type Key = Vec<u8>;
/// Values are arbitrary byte strings; the empty value is a value, not a deletion.
pub type Value = Vec<u8>;
