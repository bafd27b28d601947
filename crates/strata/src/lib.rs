//! Strata: five storage-engine designs behind one embeddable key-value API.
//!
//! ```no_run
//! use strata::{Db, EngineKind, Options};
//! # fn main() -> strata::Result<()> {
//! let db = Db::open("/tmp/strata-doc", Options::new(EngineKind::Memory))?;
//! db.put(b"user:42", b"ada")?;
//! assert_eq!(db.get(b"user:42")?.as_deref(), Some(&b"ada"[..]));
//! for item in db.prefix(b"user:")? {
//!     let (key, value) = item?;
//!     println!("{key:?} = {value:?}");
//! }
//! db.flush()?; // everything acknowledged so far is durable
//! # Ok(()) }
//! ```

mod db;
mod kind;
mod manifest;
mod options;
mod registry;
mod table;

pub use db::{Db, Iter};
pub use kind::EngineKind;
pub use manifest::{Manifest, MANIFEST_FILE_NAME, MANIFEST_FORMAT_VERSION};
pub use options::Options;
pub use strata_core::{
    parse_bytes, parse_engine_option, repeated_option_name, BatchIter, BatchOp, Capabilities, Column,
    ColumnBatch, Direction, Durability, Error, IoStats, Key, KeyRange, Limits, LittleEndian, MaintenanceTask,
    Projection, RecoveryMode, Result, Schema, Stats, Value, VerifyReport, WriteBatch, DEFAULT_BATCH_ROWS,
};
pub use table::Table;

/// Storage backends, for tests and tools that want to run a `Db` on simulated or in-memory disks.
pub mod storage {
    pub use strata_io::{
        CrashMode, Fault, FaultKind, FileStorage, MemStorage, OpenOptions, SimStorage, Storage, StorageFile,
    };
}
