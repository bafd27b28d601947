//! `FlexEngine`: FlexDB (`crate::flexdb`) behind the `strata_core::Engine` trait. Every method
//! delegates to `FlexDb`; paths are numbered in the `flex` section of docs/ARCHITECTURE.md.

use std::sync::Arc;

use strata_core::{
    Direction, Durability, Engine, EngineConfig, KeyRange, KvIter, Limits, Result, Stats, Value,
    VerifyReport, WriteBatch,
};
use strata_io::Storage;

use crate::flexdb::db::FlexDb;
use crate::flexdb::iter::MergedRange;
use crate::flexdb::record::{MAX_KEY_BYTES, MAX_VALUE_BYTES};
use crate::flexdb::FlexOptions;

/// Size limits of engine `flex`: a record must stay below FlexFile's 128 KiB extent limit.
pub const LIMITS: Limits =
    Limits { max_key_bytes: MAX_KEY_BYTES, max_value_bytes: MAX_VALUE_BYTES, max_batch_bytes: 8 << 20 };

/// The FlexDB engine. Cheap handles share one `FlexDb`.
pub struct FlexEngine {
    db: Arc<FlexDb>,
}

impl FlexEngine {
    pub fn open(storage: Arc<dyn Storage>, config: &EngineConfig) -> Result<FlexEngine> {
        Self::open_with(storage, config, FlexOptions::default())
    }

    /// Opens with explicit options, overridden by `config.engine_options` (named like the fields
    /// of [`FlexOptions`]).
    pub fn open_with(
        storage: Arc<dyn Storage>,
        config: &EngineConfig,
        mut options: FlexOptions,
    ) -> Result<FlexEngine> {
        options.apply_engine_options(config)?;
        Ok(FlexEngine { db: FlexDb::open(storage, config, &options)? })
    }

    /// Commits the MemTables into the table file now, in the caller's thread (normally the
    /// background committer does it when the MemTable is full).
    pub fn commit(&self) -> Result<()> {
        self.db.commit()
    }

    /// The runtime knob `cache_bytes`: fixes the interval cache's size (within the memory budget).
    pub(crate) fn set_cache_bytes(&self, bytes: u64) -> Result<()> {
        self.db.check_usable()?;
        self.db.set_cache_bytes(bytes);
        Ok(())
    }

    pub(crate) fn memory_budget_bytes(&self) -> u64 {
        self.db.memory_budget_bytes()
    }
}

impl Engine for FlexEngine {
    fn name(&self) -> &'static str {
        "flex"
    }

    fn limits(&self) -> Limits {
        LIMITS
    }

    fn capabilities(&self) -> strata_core::Capabilities {
        crate::contract::CAPABILITIES
    }

    fn maintenance(&self) -> &dyn strata_core::Maintenance {
        self
    }

    fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        self.db.get(key)
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.db.write(batch, durability)
    }

    fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        self.db.rmw(key, f, durability)
    }

    fn range(&self, range: KeyRange, direction: Direction) -> Result<KvIter> {
        self.db.check_usable()?;
        Ok(Box::new(MergedRange::new(self.db.clone(), range, direction)))
    }

    fn flush(&self) -> Result<()> {
        self.db.flush()
    }

    fn close(&self) -> Result<()> {
        self.db.shutdown(true)
    }

    fn stats(&self) -> Stats {
        self.db.stats()
    }

    fn verify(&self) -> Result<VerifyReport> {
        self.db.verify()
    }
}

impl Drop for FlexEngine {
    fn drop(&mut self) {
        // No commit here: after a simulated power loss the handle is stale. Iterators still alive
        // see `Error::Closed`.
        let _ = self.db.shutdown(false);
    }
}
